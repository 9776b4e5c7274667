"""Linear models: least squares by the normal equations (one run) and logistic regression by gradient descent."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._base.checks import flag
from .._base.errors import InputError
from .._engine.stats import RunStats
from .._io.source import as_array, sources
from .._ops.combine import SUM, WEIGHTED_MEAN
from .._options import Options, RunOptions
from ._recipe import (
    as_matrix,
    check_callback,
    check_float,
    check_int,
    feature_count,
    held_resident,
    progress_bar,
    recipe,
    returns_stats,
    run,
    run_with_stats,
    value_range,
)


@attrs.frozen(eq=False)
class LinearModel:
    """The result of [`linear_regression`][tfmapreduce.recipes.linear_regression]: ``y ≈ X @ coef + intercept``."""

    coef: np.ndarray
    """Coefficients, shape ``(features,)`` (or ``(features, targets)`` for a 2-d ``y``)."""
    intercept: Any
    """The intercept: a float (an array for a 2-d ``y``); 0 when fitted without one."""
    rows: int
    """Rows the model was fitted on."""

    @property
    def coef_(self) -> np.ndarray[Any, Any]:
        """scikit-learn's ``coef_``: [`coef`][tfmapreduce.recipes.LinearModel.coef] shaped as scikit-learn shapes it,
        ``(features,)`` or ``(targets, features)``."""
        return self.coef.T if self.coef.ndim == 2 else self.coef

    @property
    def intercept_(self) -> Any:
        """scikit-learn's name for [`intercept`][tfmapreduce.recipes.LinearModel.intercept]."""
        return self.intercept

    def predict(self, x: Any) -> np.ndarray[Any, Any]:
        """``X @ coef + intercept`` on the client.

        Examples:
            >>> LinearModel(np.array([2.0]), 1.0, 3).predict(np.array([[0.0], [1.0]]))
            array([1., 3.])
        """
        x = as_array(x, argument="X").astype(np.float64)
        predicted: np.ndarray[Any, Any] = (x.reshape(-1, 1) if x.ndim == 1 else x) @ self.coef + self.intercept
        return predicted


@attrs.frozen
class GradientStep:
    """One step of gradient descent ([`logistic_regression`][tfmapreduce.recipes.logistic_regression]), as passed to ``callback`` and kept in the history."""

    step: int
    """1 for the first step."""
    loss: float
    """The mean loss over all rows at the parameters before this step."""
    grad_norm: float
    """The Euclidean norm of the full-batch gradient at those parameters."""
    seconds: float
    """Wall time of the step: the distributed run and the client's update."""
    stats: RunStats
    """What the distributed run did (bytes sent, whether it compiled)."""


@attrs.frozen(eq=False)
class LogisticModel:
    """The result of [`logistic_regression`][tfmapreduce.recipes.logistic_regression]: ``P(y=1 | x) = sigmoid(x @ coef + intercept)``."""

    coef: np.ndarray
    """Coefficients, shape ``(features,)``, float64."""
    intercept: float
    """The intercept (0 when fitted without one)."""
    steps: int
    """Gradient steps taken."""
    history: tuple[GradientStep, ...]
    """One record per step."""

    @property
    def coef_(self) -> np.ndarray[Any, Any]:
        """scikit-learn's ``coef_`` of a binary classifier: [`coef`][tfmapreduce.recipes.LogisticModel.coef] as shape ``(1, features)``."""
        return self.coef[None, :]

    @property
    def intercept_(self) -> np.ndarray[Any, Any]:
        """scikit-learn's ``intercept_`` of a binary classifier: ``array([intercept])``."""
        return np.array([self.intercept])

    @property
    def n_iter_(self) -> np.ndarray[Any, Any]:
        """scikit-learn's ``n_iter_`` of a binary classifier: ``array([steps])``."""
        return np.array([self.steps])

    def __repr__(self) -> str:
        return f"LogisticModel(coef={self.coef!r}, intercept={self.intercept!r}, steps={self.steps}, history=<{len(self.history)} steps>)"

    def predict_proba(self, x: Any) -> np.ndarray[Any, Any]:
        """``P(y=1 | x)`` for each row of ``x``, on the client.

        Examples:
            >>> LogisticModel(np.array([1.0]), 0.0, 0, ()).predict_proba(np.array([[0.0]]))
            array([0.5])
        """
        x = as_array(x, argument="X").astype(np.float64)
        z = (x.reshape(-1, 1) if x.ndim == 1 else x) @ self.coef + self.intercept
        probability: np.ndarray[Any, Any] = 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic function, without overflow warnings
        return probability

    def predict(self, x: Any) -> np.ndarray[Any, Any]:
        """Class labels (0 or 1) for each row of ``x``: 1 where ``P(y=1 | x) > 0.5``.

        Examples:
            >>> LogisticModel(np.array([1.0]), 0.0, 0, ()).predict(np.array([[-2.0], [3.0]]))
            array([0, 1])
        """
        return (self.predict_proba(x) > 0.5).astype(np.int64)


def design_matrix(x: tf.Tensor, intercept: bool) -> tf.Tensor:
    x = as_matrix(x)
    return tf.concat([x, tf.ones_like(x[:, :1])], axis=1) if intercept else x


def _normal_map(intercept: bool) -> Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    def normal_equations(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        a = design_matrix(x, intercept)
        return tf.matmul(a, a, transpose_a=True), tf.matmul(a, as_matrix(y), transpose_a=True)

    return normal_equations


def _xy_info(data: Any) -> tuple[int, int, tuple[int, ...]]:
    srcs = sources(data, argument="(X, y)")
    features = feature_count(srcs[0].shape, "X")
    if len(srcs[1].shape) not in (1, 2):
        raise InputError(f"y must be 1-d (one target) or 2-d (rows × targets), got shape {srcs[1].shape}")
    return srcs[0].rows, features, srcs[1].shape


@returns_stats
def linear_regression(X: Any, y: Any, /, *, intercept: bool = True, **options: Unpack[Options]) -> LinearModel:
    """Least squares by the normal equations: ``XᵀX`` and ``Xᵀy`` summed across shards, solved on the client.

    Each shard computes its ``AᵀA`` and ``Aᵀy`` in float64 (``A`` is ``X`` with a
    column of ones when ``intercept``); these sums add up exactly across any
    partition, so the coefficients equal ``numpy.linalg.lstsq`` on the whole
    data (within the conditioning of ``XᵀX``, the square of ``X``'s; for
    rank-deficient data the minimum-norm solution).  One distributed run.

    Args:
        X: ``(rows, features)`` (1-d: one feature), or resident data.
        y: ``(rows,)`` or ``(rows, targets)``, co-partitioned with ``X``.
        intercept: also fit a constant term.
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout`` (see ``RunOptions``).

    Returns:
        A [`LinearModel`][tfmapreduce.recipes.LinearModel].

    Raises:
        InputError: no rows, or ``X``/``y`` of unusable shapes.

    Examples:
        >>> X = np.array([[0.0], [1.0], [2.0]]); y = 1 + 2 * X[:, 0]
        >>> model = tmr.recipes.linear_regression(X, y, cluster=cluster, sizes=[1, 2])
        >>> model.coef.round(12), round(model.intercept, 12)
        (array([2.]), 1.0)
    """
    settings = RunOptions.of(**options)
    data = sources((X, y), argument="(X, y)")  # once, for the checks and the run
    rows, _, y_shape = _xy_info(data)
    if rows == 0:
        raise InputError("linear regression of 0 rows is undefined; pass at least one row")
    intercept = flag(intercept, "intercept", "also fit a constant term")
    mapreduce = recipe(("linear_regression", intercept), lambda: (_normal_map(intercept), SUM))
    ata, aty = run(mapreduce, data, settings)
    if not (np.all(np.isfinite(ata)) and np.all(np.isfinite(aty))):
        raise InputError(
            "X or y holds NaN or infinite values (or values so large their squares overflow); drop or fix those rows first"
        )
    solution = np.linalg.lstsq(ata, aty, rcond=None)[0]
    if len(y_shape) == 1:
        solution = solution[:, 0]
    coef, const = (solution[:-1], solution[-1]) if intercept else (solution, np.zeros(solution.shape[1:]))
    model = LinearModel(coef, float(const) if np.ndim(const) == 0 else const, rows)
    return model


def _logistic_map(x: tf.Tensor, y: tf.Tensor, coef: tf.Tensor, const: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Per shard: the mean gradient (of coef and intercept) and the mean log-loss."""
    x = as_matrix(x)
    y = tf.reshape(tf.cast(y, tf.float64), [-1])
    z = tf.linalg.matvec(x, coef) + const
    residual = tf.sigmoid(z) - y
    rows = tf.cast(tf.shape(x)[0], tf.float64)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=z))
    return tf.linalg.matvec(x, residual, transpose_a=True) / rows, tf.reduce_mean(residual), loss


def logistic_regression(
    X: Any,
    y: Any,
    /,
    *,
    steps: int = 100,
    lr: float = 0.1,
    intercept: bool = True,
    tol: float = 0.0,
    callback: Callable[[GradientStep], Any] | None = None,
    **options: Unpack[Options],
) -> LogisticModel:
    """Logistic regression by full-batch gradient descent; each step is one distributed run.

    The parameters (starting at zero) are broadcast to every shard; each shard
    returns its mean gradient of the log-loss, and the size-weighted average of
    those (``Σ rowsᵢ·gradᵢ / Σ rowsᵢ``: exactly the full-batch mean gradient)
    updates the parameters on the client: ``θ ← θ − lr·∇``.  The result equals
    the same gradient descent computed in one numpy process.

    Host data is scattered once for the call (and freed after), so only the
    first step ships it.

    Args:
        X: ``(rows, features)`` (1-d: one feature), or resident data.
        y: ``(rows,)`` labels in [0, 1], co-partitioned with ``X``.
        steps: the most gradient steps.
        lr: the learning rate, > 0.
        intercept: also fit a constant term.
        tol: stop once the gradient's norm is at most this (0: run every step).
        callback: called with a [`GradientStep`][tfmapreduce.recipes.GradientStep] after each step.
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout``
            (see ``RunOptions``; ``timeout`` bounds each run); ``progress`` is one bar of the steps.

    Returns:
        A [`LogisticModel`][tfmapreduce.recipes.LogisticModel] with its per-step history.

    Raises:
        InputError: no rows, ``y`` not 1-d or labels outside [0, 1].

    Examples:
        >>> X = np.array([[-2.0], [-1.0], [1.0], [2.0]]); y = np.array([0, 0, 1, 1])
        >>> model = tmr.recipes.logistic_regression(X, y, steps=200, lr=0.5, cluster=cluster)
        >>> model.predict(X)
        array([0, 0, 1, 1])
    """
    settings = RunOptions.of(**options)
    progress, settings = settings.progress, attrs.evolve(settings, progress=False)  # the steps' bar stands for its runs'
    steps = check_int(steps, "steps", 1)
    lr = check_float(lr, "lr", positive=True)
    tol = check_float(tol, "tol")
    check_callback(callback)
    rows, features, y_shape = _xy_info((X, y))
    if rows == 0:
        raise InputError("logistic regression of 0 rows is undefined; pass at least one row")
    if len(y_shape) != 1:
        raise InputError(f"y must be 1-d, one label in [0, 1] per row, got shape {y_shape}")
    intercept = flag(intercept, "intercept", "also fit a constant term")
    coef, const = np.zeros(features), np.float64(0.0)
    mapreduce = recipe(("logistic_regression",), lambda: (_logistic_map, WEIGHTED_MEAN))
    bar = progress_bar("logistic_regression", steps, progress)
    history: list[GradientStep] = []
    taken, converged = 0, False
    with held_resident((X, y), steps + 1, settings) as (held, resident):
        lo, hi = value_range(held[1], resident)
        if not (lo >= 0 and hi <= 1):
            raise InputError(f"y must hold labels in [0, 1] (0/1 classes or probabilities), got values in [{lo}, {hi}]")
        for i in range(1, steps + 1):
            started = time.perf_counter()
            (grad_coef, grad_const, loss), stats = run_with_stats(mapreduce, held, resident, broadcast=(coef, const))
            grad_const = grad_const if intercept else 0.0
            norm = float(np.sqrt(grad_coef @ grad_coef + grad_const * grad_const))
            converged = norm <= tol
            if not converged:
                coef = coef - lr * grad_coef
                const = np.float64(const - lr * grad_const)
                taken += 1
            step = GradientStep(i, float(loss), norm, time.perf_counter() - started, stats)
            history.append(step)
            bar.set_postfix_str(f"loss={step.loss:.6g} |grad|={norm:.3g}", refresh=False)
            bar.update()
            if callback is not None:
                callback(step)
            if converged:
                break
    if converged:
        bar.set_postfix_str(f"{bar.postfix}, converged" if bar.postfix else "converged")
    bar.close()
    return LogisticModel(coef, float(const), taken, tuple(history))
