"""Model averaging: fit a model on each shard where it lives, then average the parameters weighted by rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf
from typing_extensions import Unpack

from .._base.errors import InputError
from .._io.source import sources
from .._kinds.mapreduce import MapReduce
from .._ops.combine import WEIGHTED_MEAN
from .._options import Options, RunOptions
from ._recipe import returns_stats, run
from ._regression import design_matrix


def least_squares_fit(X: tf.Tensor, y: tf.Tensor, *, intercept: bool = True) -> tuple[tf.Tensor, tf.Tensor]:
    """A per-shard model for [`model_average`][tfmapreduce.recipes.model_average]: the least-squares fit of one shard, on its worker.

    Returns ``(coef, intercept)`` as float64 tensors (the minimum-norm solution
    when the shard has fewer rows than unknowns).  Use
    ``functools.partial(least_squares_fit, intercept=False)`` to fit without a constant.

    Examples:
        >>> X = np.arange(8.0).reshape(8, 1); y = 1 + 2 * X[:, 0]  # noise-free: every shard fits the same line
        >>> coef, const = tmr.recipes.model_average(tmr.recipes.least_squares_fit, (X, y), cluster=cluster, sizes=[4, 4])
        >>> coef.round(9), float(const.round(9))
        (array([2.]), 1.0)
    """
    a = design_matrix(X, intercept)
    solution = tf.linalg.lstsq(a, tf.reshape(tf.cast(y, tf.float64), [-1, 1]), fast=False)[:, 0]
    return (solution[:-1], solution[-1]) if intercept else (solution, tf.constant(0.0, tf.float64))


@returns_stats
def model_average(fit: Callable[..., Any], data: Any, /, **options: Unpack[Options]) -> Any:
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
    (that is [`linear_regression`][tfmapreduce.recipes.linear_regression]).  It does NOT hold in general for
    parameters that depend non-linearly on the data: averaging per-shard
    least-squares coefficients (``(XᵢᵀXᵢ)⁻¹Xᵢᵀyᵢ``), logistic regression
    weights or network weights differs from the full fit unless every shard
    fits the same model (e.g. noise-free linear data, or shards with equal
    ``XᵢᵀXᵢ/nᵢ``); with shards drawn from the same distribution it is a good
    approximation that improves with the shard size.

    Args:
        fit: ``fit(*shards) -> parameters`` in TensorFlow ops, e.g. [`least_squares_fit`][tfmapreduce.recipes.least_squares_fit].
        data: an array, a tuple of co-partitioned arrays (passed to ``fit`` in order), or resident data.
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout`` (see ``RunOptions``).

    Returns:
        The averaged parameters as numpy values, in ``fit``'s structure.

    Raises:
        MapFunctionError: ``fit`` raised or returned something that is not tensors.

    Examples:
        >>> X = np.array([[0.0, 1], [1, 1], [2, 1], [3, 1]]); y = 1 + 2 * X[:, 0]
        >>> xtx, xty = tmr.recipes.model_average(  # the averaged normal equations: exact
        ...     lambda X, y: (tf.matmul(X, X, transpose_a=True) / tf.cast(tf.shape(X)[0], X.dtype),
        ...                   tf.linalg.matvec(X, y, transpose_a=True) / tf.cast(tf.shape(X)[0], X.dtype)), (X, y), cluster=cluster)
        >>> np.linalg.solve(xtx, xty).round(9)
        array([2., 1.])
    """
    if not callable(fit):
        raise TypeError(f"fit must be a callable fit(*shards) -> parameters in TensorFlow ops, got {type(fit).__name__} {fit!r}")
    data = sources(data)
    if data[0].rows == 0:
        raise InputError("model averaging over 0 rows is undefined; pass at least one row")
    settings = RunOptions.of(**options)
    mapreduce: MapReduce[Any] = MapReduce(
        fit, WEIGHTED_MEAN, name=f"model_average({getattr(fit, '__qualname__', type(fit).__name__)})"
    )
    return run(mapreduce, data, settings)  # jobs of the same fit share their compiled graphs
