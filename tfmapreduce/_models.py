"""Model recipes: k-means, linear and logistic regression, model averaging and histograms.

Each round of an iterative recipe is ONE distributed run: the model's current
parameters travel as broadcast values (fed, so new values never retrace), each
shard returns small sums, and the client does the update.  Input that is not
resident yet is scattered once for the duration of a multi-round call, so the
rounds after the first ship nothing.
"""

from __future__ import annotations

import collections
import contextlib
import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO, TypeVar

import attrs
import numpy as np
import tensorflow as tf

from . import _backend
from ._cluster import Cluster
from ._combine import SUM, WEIGHTED_MEAN, Combiner
from ._errors import InputError, TfMapReduceError
from ._inputs import as_array, sources
from ._job import MapReduce, RunStats, _resolve_cluster
from ._partition import SizesLike
from ._resident import Sharded, scatter
from ._stats import job, run
from ._stats import options as run_options

Step = TypeVar("Step")


# --------------------------------------------------------------------------- results


@attrs.frozen
class KMeansStep:
    """One Lloyd iteration of :func:`kmeans`, as passed to ``callback`` and kept in the history."""

    iteration: int
    """1 for the first iteration."""
    inertia: float
    """Sum of squared distances of the points to the centroids they were assigned to (the centroids before this update)."""
    shift: float
    """The largest distance a centroid moved in this update."""
    empty: int
    """Clusters that received no point (they kept their centroid)."""
    seconds: float
    """Wall time of the iteration: the distributed run and the client's update."""
    stats: RunStats
    """What the distributed run did (bytes sent, whether it compiled)."""


@attrs.frozen(eq=False)
class KMeansResult:
    """The result of :func:`kmeans`."""

    centroids: np.ndarray
    """The final centroids, shape ``(k, features)``, float64."""
    iterations: int
    """Lloyd iterations run."""
    converged: bool
    """True when the last update moved no centroid further than ``tol``."""
    history: tuple[KMeansStep, ...]
    """One record per iteration."""

    def predict(self, x: Any) -> np.ndarray:
        """The index of the nearest centroid for each row of ``x`` (a host array; the lowest index on ties).

        Computed on the client; for resident data, ``gather()`` it first.

        Example:
            >>> result = KMeansResult(np.array([[0.0], [10.0]]), 1, True, ())
            >>> result.predict(np.array([[1.0], [9.0], [5.0]]))
            array([0, 1, 0])
        """
        x = as_array(x, argument="x").astype(np.float64)
        x = x.reshape(-1, 1) if x.ndim == 1 else x
        if x.ndim != 2 or x.shape[1] != self.centroids.shape[1]:
            raise InputError(f"x must have {self.centroids.shape[1]} features per row like the centroids, got shape {x.shape}")
        d2 = (x * x).sum(1)[:, None] - 2.0 * (x @ self.centroids.T) + (self.centroids * self.centroids).sum(1)[None, :]
        return np.argmin(d2, axis=1)


@attrs.frozen(eq=False)
class LinearModel:
    """The result of :func:`linear_regression`: ``y ≈ X @ coef + intercept``."""

    coef: np.ndarray
    """Coefficients, shape ``(features,)`` (or ``(features, targets)`` for a 2-d ``y``)."""
    intercept: Any
    """The intercept: a float (an array for a 2-d ``y``); 0 when fitted without one."""
    rows: int
    """Rows the model was fitted on."""

    def predict(self, x: Any) -> np.ndarray:
        """``X @ coef + intercept`` on the client.

        Example:
            >>> LinearModel(np.array([2.0]), 1.0, 3).predict(np.array([[0.0], [1.0]]))
            array([1., 3.])
        """
        x = as_array(x, argument="X").astype(np.float64)
        return (x.reshape(-1, 1) if x.ndim == 1 else x) @ self.coef + self.intercept


@attrs.frozen
class GradientStep:
    """One step of gradient descent (:func:`logistic_regression`), as passed to ``callback`` and kept in the history."""

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
    """The result of :func:`logistic_regression`: ``P(y=1 | x) = sigmoid(x @ coef + intercept)``."""

    coef: np.ndarray
    """Coefficients, shape ``(features,)``, float64."""
    intercept: float
    """The intercept (0 when fitted without one)."""
    steps: int
    """Gradient steps taken."""
    history: tuple[GradientStep, ...]
    """One record per step."""

    def predict_proba(self, x: Any) -> np.ndarray:
        """``P(y=1 | x)`` for each row of ``x``, on the client.

        Example:
            >>> LogisticModel(np.array([1.0]), 0.0, 0, ()).predict_proba(np.array([[0.0]]))
            array([0.5])
        """
        x = as_array(x, argument="X").astype(np.float64)
        z = (x.reshape(-1, 1) if x.ndim == 1 else x) @ self.coef + self.intercept
        return 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic function, without overflow warnings

    def predict(self, x: Any) -> np.ndarray:
        """Class labels (0 or 1) for each row of ``x``: 1 where ``P(y=1 | x) > 0.5``.

        Example:
            >>> LogisticModel(np.array([1.0]), 0.0, 0, ()).predict(np.array([[-2.0], [3.0]]))
            array([0, 1])
        """
        return (self.predict_proba(x) > 0.5).astype(np.int64)


# --------------------------------------------------------------------------- shared machinery


class _Progress:
    """A one-line text bar redrawn with a carriage return; silent unless enabled."""

    WIDTH = 30

    def __init__(self, label: str, total: int, enabled: bool, stream: TextIO | None = None):
        self.label, self.total, self.enabled = label, total, enabled
        self.stream = stream if stream is not None else sys.stderr
        self.width = 0  # of the last line drawn, to blank a longer one

    def update(self, done: int, text: str) -> None:
        if self.enabled:
            filled = self.WIDTH * done // max(self.total, 1)
            line = f"{self.label} [{'#' * filled}{'-' * (self.WIDTH - filled)}] {done}/{self.total} {text}"
            self.stream.write(f"\r{line.ljust(self.width)}")
            self.stream.flush()
            self.width = len(line)

    def close(self, note: str = "") -> None:
        if self.enabled:
            self.stream.write(f" {note}\n" if note else "\n")
            self.stream.flush()


def _check_callback(callback: object) -> None:
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be a callable taking one step record, or None; got {type(callback).__name__} {callback!r}")


def _check_int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an int ≥ {minimum}, got {value!r}")
    return int(value)


def _check_float(value: object, name: str, *, positive: bool = False) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be a finite number {'> 0' if positive else '≥ 0'}, got {value!r}")
    return float(value)


def _free(made: Sequence[Sharded], timeout: float | None, *, quiet: bool) -> None:
    for data in made:
        try:
            data.delete(timeout=timeout)
        except TfMapReduceError:
            if not quiet:
                raise


@contextlib.contextmanager
def _resident(data: Any, rounds: int, options: dict[str, Any]) -> Iterator[tuple[Any, dict[str, Any]]]:
    """The data of a multi-round recipe as resident shards, and the options to run over them.

    Resident inputs are used as they are.  Host inputs are scattered once (with
    ``sizes``/``devices``, or the plan of the resident inputs they are
    co-partitioned with) and deleted when the recipe returns, so each round
    after the first ships nothing.  A single round ships directly.
    """
    srcs = sources(data)
    items = data if isinstance(data, tuple) else (data,)
    resident = [item for item in items if isinstance(item, Sharded)]
    if rounds <= 1 or len(resident) == len(items):
        yield data, options
        return
    cluster = _resolve_cluster(options["cluster"], srcs)  # a resident input's own; ClusterError for another
    if resident:  # the host inputs follow the resident ones' plan (checked as for any run)
        shards = MapReduce._plan(srcs, cluster, options["sizes"], options["devices"], None).shards
        place = {"sizes": [s.rows for s in shards], "devices": [s.device for s in shards], "fallback": None}
    else:
        place = {"sizes": options["sizes"], "devices": options["devices"], "fallback": options["fallback"]}
    made: list[Sharded] = []
    try:
        held = []
        for item in items:
            if isinstance(item, Sharded):
                held.append(item)
                continue
            made.append(scatter(item, cluster=cluster, timeout=options["timeout"], **place))
            held.append(made[-1])
            if not resident:  # the others follow the first one's plan
                first = made[0].plan.shards
                place = {"sizes": [s.rows for s in first], "devices": [s.device for s in first], "fallback": None}
        yield (tuple(held) if isinstance(data, tuple) else held[0]), dict(options, cluster=cluster, sizes=None, devices=None)
    except BaseException:
        _free(made, options["timeout"], quiet=True)
        raise
    _free(made, options["timeout"], quiet=False)


def _features(shape: tuple[int, ...], name: str) -> int:
    if len(shape) == 1:
        return 1
    if len(shape) != 2:
        raise InputError(f"{name} must be 1-d (one feature) or 2-d (rows × features), got shape {shape}")
    return shape[1]


def _matrix(x: tf.Tensor) -> tf.Tensor:
    """A shard as a float64 (rows, features) matrix; a 1-d shard is one feature."""
    x = tf.cast(x, tf.float64)
    return tf.reshape(x, [-1, 1]) if x.shape.rank == 1 else x


_MINMAX = Combiner(
    partial=lambda v, n: v,
    merge=lambda a, b: (tf.minimum(a[0], b[0]), tf.maximum(a[1], b[1])),
    name="minmax",
)


def _minmax(x: Any, options: dict[str, Any]) -> tuple[Any, Any]:
    """(min, max) over every element of ``x`` in one run, in ``x``'s dtype."""
    recipe = job(("minmax",), lambda: (lambda t: (tf.reduce_min(t), tf.reduce_max(t)), _MINMAX))
    (lo, hi), _ = run(recipe, x, dict(options, return_stats=False))
    return lo, hi


def _rows_of(data: Any, indices: np.ndarray, timeout: float | None) -> np.ndarray:
    """Rows ``indices`` (in that order) of a host array or resident data; only those rows travel."""
    if not isinstance(data, Sharded):
        return sources(data)[0].array[indices]
    data.as_source()  # raises ClusterError for deleted data or a closed cluster
    wanted = np.unique(indices)
    graph = tf.Graph()
    parts, found = [], []
    with graph.as_default():
        for shard in data.plan.shards:
            local = wanted[(wanted >= shard.start) & (wanted < shard.stop)]
            if local.size:
                with tf.device(shard.device):
                    parts.append(tf.gather(data.read(shard), local - shard.start))
                found.append(local)
    try:
        values = data.cluster.run(graph, parts, {}, tasks=list(data.plan.tasks), timeout=_backend.check_timeout(timeout))
    finally:
        data.cluster.forget(graph)
    rows = np.concatenate(values, axis=0)
    position = {int(g): i for i, g in enumerate(np.concatenate(found))}
    return rows[[position[int(i)] for i in indices]]


# --------------------------------------------------------------------------- k-means


def _assign(x: tf.Tensor, centroids: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Squared distances to every centroid, and the nearest one (the LOWEST index among equals)."""
    d2 = (
        tf.reduce_sum(x * x, axis=1, keepdims=True)
        - 2.0 * tf.matmul(x, centroids, transpose_b=True)
        + tf.reduce_sum(centroids * centroids, axis=1)[None, :]
    )
    nearest = tf.reduce_min(d2, axis=1, keepdims=True)
    k = tf.shape(centroids)[0]
    index = tf.reduce_min(tf.where(d2 <= nearest, tf.range(k)[None, :], k), axis=1)  # tf.argmin leaves ties unspecified
    return index, tf.maximum(nearest[:, 0], 0.0)


_BINCOUNT_FEATURES = 64
"""Up to this many features, k-means sums each feature with its own weighted bincount."""


def _kmeans_map(x: tf.Tensor, centroids: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Per shard: the sum and count of the points nearest each centroid, and their squared distances."""
    x = _matrix(x)
    labels, distance = _assign(x, centroids)
    k = tf.shape(centroids)[0]
    if x.shape[1] is not None and x.shape[1] <= _BINCOUNT_FEATURES:  # a weighted bincount per feature is ~4x faster on CPU
        sums = tf.stack([tf.math.bincount(labels, weights=x[:, j], minlength=k, maxlength=k, dtype=tf.float64) for j in range(x.shape[1])], 1)
    else:
        sums = tf.math.unsorted_segment_sum(x, labels, k)
    counts = tf.math.bincount(labels, minlength=k, maxlength=k, dtype=tf.int64)
    return sums, counts, tf.reduce_sum(distance)


def _initial_centroids(data: Any, k: int, init: Any, rows: int, features: int, seed: int, timeout: float | None) -> np.ndarray:
    if isinstance(init, str):
        if init == "first":
            indices = np.arange(k)
        elif init == "random":
            indices = np.random.default_rng(seed).choice(rows, size=k, replace=False)
        else:
            raise ValueError(f"init must be 'first', 'random' or an array of k starting centroids, got {init!r}")
        return _rows_of(data, indices, timeout).astype(np.float64).reshape(k, features)
    centroids = as_array(init, argument="init").astype(np.float64)
    centroids = centroids.reshape(-1, 1) if centroids.ndim == 1 and features == 1 else centroids
    if centroids.shape != (k, features):
        raise InputError(f"init must hold k={k} centroids of {features} features, shape ({k}, {features}); got shape {centroids.shape}")
    if not np.all(np.isfinite(centroids)):
        raise InputError("init holds NaN or infinite values; give finite starting centroids")
    return centroids


def kmeans(data: Any, k: int, /, *, iters: int = 10, init: Any = "first", tol: float = 1e-6, seed: int = 0,
           progress: bool = False, callback: Callable[[KMeansStep], Any] | None = None, cluster: Cluster | None = None,
           sizes: SizesLike = None, devices: Sequence[str] | None = None, fallback: str | None = None,
           timeout: float | None = None) -> KMeansResult:
    """Lloyd's k-means: each iteration is one distributed run over the data.

    Each shard assigns its points to the nearest centroid (the lowest index among
    equally near ones) and returns per-cluster sums and counts; the sums add up
    across shards and the client divides.  A cluster that receives no point keeps
    its centroid.  The result equals the same Lloyd iterations computed in one
    numpy process (in float64) from the same starting centroids.

    Host data is scattered once for the call (and freed after), so only the
    first iteration ships it; pass resident data (``tmr.scatter``) to reuse it
    across calls.

    Args:
        data: a ``(rows, features)`` array (1-d: one feature) or resident ``Sharded`` data.
        k: the number of clusters, 1 ≤ k ≤ rows.
        iters: the most Lloyd iterations to run.
        init: ``"first"`` (the first k rows), ``"random"`` (k distinct rows drawn
            with ``seed``) or a ``(k, features)`` array of starting centroids.
        tol: stop once no centroid moves further than this (Euclidean distance).
        seed: the seed of ``init="random"``.
        progress: draw a progress bar on stderr.
        callback: called with a :class:`KMeansStep` after each iteration.
        cluster, sizes, devices, fallback, timeout: as for ``MapReduce.run``
            (``timeout`` bounds each run).

    Returns:
        A :class:`KMeansResult`: centroids, iterations, converged, history (and ``predict``).

    Raises:
        InputError: k exceeds the rows, or ``init`` has the wrong shape.  ValueError: a bad setting.

    Example:
        >>> x = np.array([[0.0, 0], [0, 1], [10, 10], [10, 11]])
        >>> result = tmr.recipes.kmeans(x, 2, init=x[[0, 2]], cluster=c)  # doctest: +SKIP
        >>> result.centroids  # doctest: +SKIP
        array([[ 0. ,  0.5],
               [10. , 10.5]])
    """
    k = _check_int(k, "k", 1)
    iters = _check_int(iters, "iters", 1)
    tol = _check_float(tol, "tol")
    _check_callback(callback)
    src = sources(data, argument="data")
    if len(src) != 1:
        raise InputError("kmeans clusters one array; pass the points as one (rows, features) array, not a tuple")
    rows, features = src[0].rows, _features(src[0].shape, "data")
    if k > rows:
        raise InputError(f"k={k} clusters need at least {k} rows of data, got {rows}")
    centroids = _initial_centroids(data, k, init, rows, features, seed, timeout)
    recipe = job(("kmeans",), lambda: (_kmeans_map, SUM))
    bar = _Progress("kmeans", iters, progress)
    history: list[KMeansStep] = []
    converged = False
    with _resident(data, iters, run_options(cluster, sizes, devices, fallback, timeout, return_stats=True)) as (held, options):
        for i in range(1, iters + 1):
            started = time.perf_counter()
            (sums, counts, inertia), stats = run(recipe, held, dict(options), broadcast=(centroids,))
            filled = counts > 0
            new = centroids.copy()
            new[filled] = sums[filled] / counts[filled][:, None]
            shift = float(np.sqrt(((new - centroids) ** 2).sum(axis=1)).max())
            centroids = new
            step = KMeansStep(i, float(inertia), shift, int((~filled).sum()), time.perf_counter() - started, stats)
            history.append(step)
            bar.update(i, f"inertia={step.inertia:.6g} shift={shift:.3g}")
            if callback is not None:
                callback(step)
            if shift <= tol:
                converged = True
                break
    bar.close("converged" if converged else "")
    return KMeansResult(centroids, len(history), converged, tuple(history))


# --------------------------------------------------------------------------- linear models


def _design(x: tf.Tensor, intercept: bool) -> tf.Tensor:
    x = _matrix(x)
    return tf.concat([x, tf.ones_like(x[:, :1])], axis=1) if intercept else x


def _normal_map(intercept: bool) -> Callable[[tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    def normal_equations(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        a = _design(x, intercept)
        return tf.matmul(a, a, transpose_a=True), tf.matmul(a, _matrix(y), transpose_a=True)

    return normal_equations


def _xy_info(X: Any, y: Any) -> tuple[int, int, tuple[int, ...]]:
    srcs = sources((X, y), argument="(X, y)")
    features = _features(srcs[0].shape, "X")
    if len(srcs[1].shape) not in (1, 2):
        raise InputError(f"y must be 1-d (one target) or 2-d (rows × targets), got shape {srcs[1].shape}")
    return srcs[0].rows, features, srcs[1].shape


def linear_regression(X: Any, y: Any, /, *, intercept: bool = True, cluster: Cluster | None = None, sizes: SizesLike = None,
                      devices: Sequence[str] | None = None, fallback: str | None = None, timeout: float | None = None,
                      return_stats: bool = False) -> Any:
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
        cluster, sizes, devices, fallback, timeout, return_stats: as for ``MapReduce.run``.

    Returns:
        A :class:`LinearModel` (and the run's stats, if asked).

    Raises:
        InputError: no rows, or ``X``/``y`` of unusable shapes.

    Example:
        >>> X = np.array([[0.0], [1.0], [2.0]]); y = 1 + 2 * X[:, 0]
        >>> model = tmr.recipes.linear_regression(X, y, cluster=c, sizes=[1, 2])  # doctest: +SKIP
        >>> model.coef, model.intercept  # doctest: +SKIP
        (array([2.]), 1.0)
    """
    rows, _, y_shape = _xy_info(X, y)
    if rows == 0:
        raise InputError("linear regression of 0 rows is undefined; pass at least one row")
    intercept = bool(intercept)
    recipe = job(("linear_regression", intercept), lambda: (_normal_map(intercept), SUM))
    (ata, aty), stats = run(recipe, (X, y), run_options(cluster, sizes, devices, fallback, timeout, return_stats))
    solution = np.linalg.lstsq(ata, aty, rcond=None)[0]
    if len(y_shape) == 1:
        solution = solution[:, 0]
    coef, const = (solution[:-1], solution[-1]) if intercept else (solution, np.zeros(solution.shape[1:]))
    model = LinearModel(coef, float(const) if np.ndim(const) == 0 else const, rows)
    return (model, stats) if stats is not None else model


def _logistic_map(x: tf.Tensor, y: tf.Tensor, coef: tf.Tensor, const: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Per shard: the mean gradient (of coef and intercept) and the mean log-loss."""
    x = _matrix(x)
    y = tf.reshape(tf.cast(y, tf.float64), [-1])
    z = tf.linalg.matvec(x, coef) + const
    residual = tf.sigmoid(z) - y
    rows = tf.cast(tf.shape(x)[0], tf.float64)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=z))
    return tf.linalg.matvec(x, residual, transpose_a=True) / rows, tf.reduce_mean(residual), loss


def logistic_regression(X: Any, y: Any, /, *, steps: int = 100, lr: float = 0.1, intercept: bool = True, tol: float = 0.0,
                        progress: bool = False, callback: Callable[[GradientStep], Any] | None = None,
                        cluster: Cluster | None = None, sizes: SizesLike = None, devices: Sequence[str] | None = None,
                        fallback: str | None = None, timeout: float | None = None) -> LogisticModel:
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
        progress: draw a progress bar on stderr.
        callback: called with a :class:`GradientStep` after each step.
        cluster, sizes, devices, fallback, timeout: as for ``MapReduce.run`` (``timeout`` bounds each run).

    Returns:
        A :class:`LogisticModel` with its per-step history.

    Raises:
        InputError: no rows, ``y`` not 1-d or labels outside [0, 1].

    Example:
        >>> X = np.array([[-2.0], [-1.0], [1.0], [2.0]]); y = np.array([0, 0, 1, 1])
        >>> model = tmr.recipes.logistic_regression(X, y, steps=200, lr=0.5, cluster=c)  # doctest: +SKIP
        >>> model.predict(X)  # doctest: +SKIP
        array([0, 0, 1, 1])
    """
    steps = _check_int(steps, "steps", 1)
    lr = _check_float(lr, "lr", positive=True)
    tol = _check_float(tol, "tol")
    _check_callback(callback)
    rows, features, y_shape = _xy_info(X, y)
    if rows == 0:
        raise InputError("logistic regression of 0 rows is undefined; pass at least one row")
    if len(y_shape) != 1:
        raise InputError(f"y must be 1-d, one label in [0, 1] per row, got shape {y_shape}")
    intercept = bool(intercept)
    coef, const = np.zeros(features), np.float64(0.0)
    recipe = job(("logistic_regression",), lambda: (_logistic_map, WEIGHTED_MEAN))
    bar = _Progress("logistic_regression", steps, progress)
    history: list[GradientStep] = []
    taken, converged = 0, False
    with _resident((X, y), steps + 1, run_options(cluster, sizes, devices, fallback, timeout, return_stats=True)) as (held, options):
        lo, hi = _minmax(held[1], options)
        if not (lo >= 0 and hi <= 1):
            raise InputError(f"y must hold labels in [0, 1] (0/1 classes or probabilities), got values in [{lo}, {hi}]")
        for i in range(1, steps + 1):
            started = time.perf_counter()
            (grad_coef, grad_const, loss), stats = run(recipe, held, dict(options), broadcast=(coef, const))
            grad_const = grad_const if intercept else 0.0
            norm = float(np.sqrt(grad_coef @ grad_coef + grad_const * grad_const))
            converged = norm <= tol
            if not converged:
                coef = coef - lr * grad_coef
                const = np.float64(const - lr * grad_const)
                taken += 1
            step = GradientStep(i, float(loss), norm, time.perf_counter() - started, stats)
            history.append(step)
            bar.update(i, f"loss={step.loss:.6g} |grad|={norm:.3g}")
            if callback is not None:
                callback(step)
            if converged:
                break
    bar.close("converged" if converged else "")
    return LogisticModel(coef, float(const), taken, tuple(history))


# --------------------------------------------------------------------------- model averaging


def least_squares_fit(X: tf.Tensor, y: tf.Tensor, *, intercept: bool = True) -> tuple[tf.Tensor, tf.Tensor]:
    """A per-shard model for :func:`model_average`: the least-squares fit of one shard, on its worker.

    Returns ``(coef, intercept)`` as float64 tensors (the minimum-norm solution
    when the shard has fewer rows than unknowns).  Use
    ``functools.partial(least_squares_fit, intercept=False)`` to fit without a constant.

    Example:
        >>> coef, const = tmr.recipes.model_average(tmr.recipes.least_squares_fit, (X, y), cluster=c)  # doctest: +SKIP
    """
    a = _design(X, intercept)
    solution = tf.linalg.lstsq(a, tf.reshape(tf.cast(y, tf.float64), [-1, 1]), fast=False)[:, 0]
    return (solution[:-1], solution[-1]) if intercept else (solution, tf.constant(0.0, tf.float64))


_AVERAGE_JOBS: collections.OrderedDict[Any, MapReduce[Any]] = collections.OrderedDict()
_AVERAGE_CACHE = 16


def _average_job(fit: Callable[..., Any]) -> MapReduce[Any]:
    """One job per fit function (a bounded cache: the oldest job's graphs are released)."""
    if fit in _AVERAGE_JOBS:
        _AVERAGE_JOBS.move_to_end(fit)
        return _AVERAGE_JOBS[fit]
    _AVERAGE_JOBS[fit] = MapReduce(fit, WEIGHTED_MEAN, name=f"model_average({getattr(fit, '__qualname__', type(fit).__name__)})")
    while len(_AVERAGE_JOBS) > _AVERAGE_CACHE:
        _, old = _AVERAGE_JOBS.popitem(last=False)
        for old_cluster, program in old._compiled.values():
            old_cluster.forget(program.graph)
    return _AVERAGE_JOBS[fit]


def model_average(fit: Callable[..., Any], data: Any, /, *, cluster: Cluster | None = None, sizes: SizesLike = None,
                  devices: Sequence[str] | None = None, fallback: str | None = None, timeout: float | None = None,
                  return_stats: bool = False) -> Any:
    """Train a model on each shard independently, then average the parameters weighted by shard rows.

    ``fit(*shard_tensors)`` runs on each shard's own device (TensorFlow ops,
    like a map function) and returns the shard's parameters: a tensor or a
    nested structure of tensors.  The result is ``Σ rowsᵢ·θᵢ / Σ rowsᵢ`` in
    float64 (empty shards take no part).  One distributed run.

    When this equals the fit on all the data: exactly when the parameters are
    a MEAN OF PER-ROW TERMS — sufficient statistics such as the normal-equation
    moments ``(XᵀX/n, Xᵀy/n)``, means, rates or histograms — because the
    size-weighted mean of per-shard means is the mean over all rows.  Solving
    the averaged normal equations then gives the full-data least squares
    (that is :func:`linear_regression`).  It does NOT hold in general for
    parameters that depend non-linearly on the data: averaging per-shard
    least-squares coefficients (``(XᵢᵀXᵢ)⁻¹Xᵢᵀyᵢ``), logistic regression
    weights or network weights differs from the full fit unless every shard
    fits the same model (e.g. noise-free linear data, or shards with equal
    ``XᵢᵀXᵢ/nᵢ``); with shards drawn from the same distribution it is a good
    approximation that improves with the shard size.

    Args:
        fit: ``fit(*shards) -> parameters`` in TensorFlow ops, e.g. :func:`least_squares_fit`.
        data: an array, a tuple of co-partitioned arrays (passed to ``fit`` in order), or resident data.
        cluster, sizes, devices, fallback, timeout, return_stats: as for ``MapReduce.run``.

    Returns:
        The averaged parameters as numpy values, in ``fit``'s structure (and the stats, if asked).

    Raises:
        MapFunctionError: ``fit`` raised or returned something that is not tensors.

    Example:
        >>> coef, const = tmr.recipes.model_average(tmr.recipes.least_squares_fit, (X, y), cluster=c)  # doctest: +SKIP
        >>> moments = tmr.recipes.model_average(  # the averaged normal equations: exact  # doctest: +SKIP
        ...     lambda X, y: (tf.matmul(X, X, transpose_a=True) / tf.cast(tf.shape(X)[0], X.dtype),
        ...                   tf.linalg.matvec(X, y, transpose_a=True) / tf.cast(tf.shape(X)[0], X.dtype)), (X, y), cluster=c)
    """
    if not callable(fit):
        raise TypeError(f"fit must be a callable fit(*shards) -> parameters in TensorFlow ops, got {type(fit).__name__} {fit!r}")
    if sources(data)[0].rows == 0:
        raise InputError("model averaging over 0 rows is undefined; pass at least one row")
    value, stats = run(_average_job(fit), data, run_options(cluster, sizes, devices, fallback, timeout, return_stats))
    return (value, stats) if stats is not None else value


# --------------------------------------------------------------------------- histogram


def _histogram_map(x: tf.Tensor, edges: tf.Tensor) -> tf.Tensor:
    """Per shard: how many elements fall in each bin ``[e_i, e_i+1)``, the last bin closed, outsiders dropped."""
    values = tf.reshape(tf.cast(x, tf.float64), [-1])
    bins = tf.size(edges) - 1
    index = tf.searchsorted(edges[None, :], values[None, :], side="right")[0] - 1
    index = tf.where(tf.equal(values, edges[-1]), bins - 1, index)
    inside = (values >= edges[0]) & (values <= edges[-1])
    index = tf.where(inside, index, bins)  # one extra bucket for everything outside (NaN included)
    return tf.math.unsorted_segment_sum(tf.ones_like(index, tf.int64), index, bins + 1)[:-1]


def histogram(x: Any, /, bins: Any = 10, range: tuple[float, float] | None = None, *, density: bool = False,
              cluster: Cluster | None = None, sizes: SizesLike = None, devices: Sequence[str] | None = None,
              fallback: str | None = None, timeout: float | None = None, return_stats: bool = False) -> Any:
    """The histogram of every element of ``x``, equal to ``numpy.histogram(x, bins, range, density=density)``.

    The bin edges are numpy's own; each shard counts its elements per bin and
    the counts add up.  Bins are half-open ``[eᵢ, eᵢ₊₁)`` except the last,
    which includes its right edge; values outside the range (and NaN) are not
    counted.  With ``range=None`` the range is the data's min and max (one
    extra run, as numpy).

    Args:
        x: an array or resident data (every element counts).
        bins: the number of equal-width bins, or the monotonically increasing edges.
        range: ``(low, high)`` of the bins; None for the data's min and max.
        density: return the probability density instead of counts.
        cluster, sizes, devices, fallback, timeout, return_stats: as for ``MapReduce.run``.

    Returns:
        ``(counts, edges)`` (and the stats of the counting run, if asked).

    Raises:
        ValueError: bad ``bins`` or ``range`` (numpy's checks), or a non-finite data range.

    Example:
        >>> tmr.recipes.histogram(np.array([0.0, 1, 1, 2, 5]), bins=5, cluster=c)  # doctest: +SKIP
        (array([1, 2, 1, 0, 1]), array([0., 1., 2., 3., 4., 5.]))
    """
    if isinstance(bins, str):
        raise TypeError(f"bins must be a number of bins or a sequence of edges; numpy's estimators such as {bins!r} need the whole data on one host")
    src = sources(x)[0]
    empty = np.empty(0, src.dtype)
    options = run_options(cluster, sizes, devices, fallback, timeout, return_stats)
    if range is None and math.prod(src.shape) > 0:
        lo, hi = _minmax(x, options)
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise ValueError(f"autodetected range of [{lo}, {hi}] is not finite; pass range=(low, high)")
        range = (lo, hi)
    edges = np.histogram_bin_edges(empty, bins, range)
    recipe = job(("histogram",), lambda: (_histogram_map, SUM))
    counts, stats = run(recipe, x, options, broadcast=(edges.astype(np.float64),))
    counts = np.asarray(counts, np.int64)
    result: tuple[np.ndarray, np.ndarray] = (counts, edges)
    if density:
        widths = np.array(np.diff(edges), float)
        result = (counts / widths / counts.sum(), edges)
    return (*result, stats) if stats is not None else result
