"""Statistics recipes: mean, sum, min, max, count, moments, variance, std, weighted_mean — each one distributed run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._base.errors import InputError
from .._io.source import sources
from .._ops.combine import COUNT, MAX, MIN, SUM, Combiner
from .._ops.moments import MOMENTS
from .._ops.numerics import exact_sum, float_sum, moments_map
from .._options import Options, RunOptions
from ._recipe import check_axis, finish, info, keep_dims, recipe, require_rows, returns_stats, run

Numeric = np.generic | np.ndarray[Any, Any]
"""A numpy scalar (for a whole-array statistic) or array (one value per column)."""


def _sum_map(axis: int | None) -> Callable[[tf.Tensor], tf.Tensor]:
    def shard_sum(x: tf.Tensor) -> tf.Tensor:
        return exact_sum(x, axis)

    return shard_sum


def _sum_count_map(axis: int | None) -> Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    def shard_sum_count(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return float_sum(x, axis), (tf.size(x, out_type=tf.int64) if axis is None else tf.shape(x, out_type=tf.int64)[0])

    return shard_sum_count


@returns_stats
def mean(x: Any, /, *, axis: int | None = None, keepdims: bool = False, **options: Unpack[Options]) -> Numeric:
    """The mean of ``x`` over the cluster, equal to ``np.mean(x, axis=axis)``.

    Every shard sums in float64, every element widened (integers too, as numpy
    does: no int64 overflow), so a float mean is within about 1e-13 of the exact
    one, as ``np.mean(x, dtype=np.float64)``; the sums add up and divide by the element count, so uneven and
    empty shards weigh exactly what they hold.  Unlike numpy (nan and a
    warning), an input with 0 rows raises.  TensorFlow's CPU kernels flush
    subnormal float32/float64 values (below ~1.2e-38 / 2.2e-308) to zero.

    Args:
        x: an array or resident ``Sharded`` data.
        axis: None for every element, 0 for one mean per column (numpy's negative axes
            too: ``-1`` is 0 for 1-d data; a per-row axis such as ``-1`` of 2-d data raises).
        keepdims: keep the reduced axes with length 1, as numpy does (the same in
            [`sum`][tfmapreduce.sum], [`min`][tfmapreduce.min], [`max`][tfmapreduce.max], [`variance`][tfmapreduce.variance] and [`std`][tfmapreduce.std]).
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout`` (see ``RunOptions``).

    Raises:
        InputError: ``x`` has 0 rows.
        TypeError: ``x`` is not numeric.

    Examples:
        >>> float(tmr.mean(np.arange(100.0), cluster=cluster, sizes=[30, 70]))
        49.5
    """
    settings = RunOptions.of(**options)
    x = sources(x)  # once: the checks below and the run share it
    _, shape, rows = info(x, "x")
    axis = check_axis(axis, len(shape))
    require_rows(rows, "the mean")
    mapreduce = recipe(("mean", axis), lambda: (_sum_count_map(axis), SUM))
    (total, count) = run(mapreduce, x, settings)  # counted where read: file sources learn their rows by reading
    require_rows(int(count), "the mean")
    return finish(keep_dims(np.asarray(total, np.float64) / count, len(shape), axis, keepdims), np.float64)


@returns_stats
def sum(x: Any, /, *, axis: int | None = None, keepdims: bool = False, **options: Unpack[Options]) -> Numeric:
    """The sum of ``x``, equal to ``np.sum(x, axis=axis)``.

    Signed integers and booleans accumulate in int64 and unsigned ones in
    uint64 (both wrap on overflow, like numpy), floats in float64, every element
    widened (within about 1e-13 of the exact sum, as ``np.sum(x, dtype=np.float64)``): the sum of
    float16 or float32 data is a float64 (numpy keeps the input's type, and a
    float16 sum of 70,000 ones overflows to inf there).

    Examples:
        >>> int(tmr.sum(np.arange(10, dtype=np.int32), cluster=cluster))
        45
    """
    settings = RunOptions.of(**options)
    x = sources(x)
    _, shape, _ = info(x, "x")
    axis = check_axis(axis, len(shape))
    mapreduce = recipe(("sum", axis), lambda: (_sum_map(axis), SUM))
    total = run(mapreduce, x, settings)
    return finish(keep_dims(total, len(shape), axis, keepdims), np.asarray(total).dtype)


def _extreme_map(reduce: Callable[..., tf.Tensor], axis: int | None) -> Callable[[tf.Tensor], tf.Tensor]:
    def shard_extreme(t: tf.Tensor) -> tf.Tensor:
        return reduce(tf.cast(t, tf.uint8) if t.dtype == tf.bool else t, axis=axis)  # TensorFlow has no min/max of bool

    return shard_extreme


def _extreme(
    name: str, reduce: Callable[..., tf.Tensor], combiner: Combiner, x: Any, axis: object, keepdims: object, settings: RunOptions
) -> Numeric:
    x = sources(x)
    dtype, shape, rows = info(x, "x")
    axis = check_axis(axis, len(shape))
    require_rows(rows, f"the {name}")
    mapreduce = recipe((name, axis), lambda: (_extreme_map(reduce, axis), combiner))
    value = run(mapreduce, x, settings)
    return finish(keep_dims(value, len(shape), axis, keepdims), dtype)


@returns_stats
def min(x: Any, /, *, axis: int | None = None, keepdims: bool = False, **options: Unpack[Options]) -> Numeric:
    """The minimum of ``x``, equal to ``np.min(x, axis=axis)``; an input with 0 rows raises InputError.

    Examples:
        >>> int(tmr.min(np.array([3, 1, 2]), cluster=cluster))
        1
    """
    return _extreme("min", tf.reduce_min, MIN, x, axis, keepdims, RunOptions.of(**options))


@returns_stats
def max(x: Any, /, *, axis: int | None = None, keepdims: bool = False, **options: Unpack[Options]) -> Numeric:
    """The maximum of ``x``, equal to ``np.max(x, axis=axis)``; an input with 0 rows raises InputError.

    Examples:
        >>> int(tmr.max(np.array([3, 1, 2]), cluster=cluster))
        3
    """
    return _extreme("max", tf.reduce_max, MAX, x, axis, keepdims, RunOptions.of(**options))


def _rows_map(t: tf.Tensor) -> tf.Tensor:
    return tf.shape(t, out_type=tf.int64)[0]


@returns_stats
def count(x: Any, /, **options: Unpack[Options]) -> np.int64:
    """The number of rows of ``x`` (``len(x)``), counted shard by shard on the cluster.

    Examples:
        >>> int(tmr.count(np.zeros((7, 3)), cluster=cluster))
        7
    """
    settings = RunOptions.of(**options)
    mapreduce = recipe(("count",), lambda: (_rows_map, COUNT))
    rows: np.int64 = np.int64(run(mapreduce, x, settings))
    return rows


Moments = tuple[Numeric, Numeric, Numeric]
"""``(count, mean, M2)`` in float64."""


@returns_stats
def moments(x: Any, /, *, axis: int | None = None, **options: Unpack[Options]) -> Moments:
    """``(count, mean, M2)`` of ``x`` in float64, merged across shards with Chan's parallel formula.

    Examples:
        >>> tuple(float(v) for v in tmr.recipes.moments(np.array([1.0, 2.0, 3.0, 4.0]), cluster=cluster, sizes=[1, 3]))
        (4.0, 2.5, 5.0)
    """
    settings = RunOptions.of(**options)
    return _moments(x, axis, settings)


def _moments(x: Any, axis: object, settings: RunOptions) -> Moments:
    x = sources(x)
    _, shape, rows = info(x, "x")
    axis = check_axis(axis, len(shape))
    require_rows(rows, "the variance")
    mapreduce = recipe(("moments", axis), lambda: (moments_map(axis), MOMENTS))
    n, mean, m2 = run(mapreduce, x, settings)
    return n, mean, m2


def _variance(x: Any, axis: object, ddof: object, keepdims: object, settings: RunOptions) -> Any:
    x = sources(x)
    _, shape, rows = info(x, "x")
    if isinstance(ddof, (bool, np.bool_)) or not isinstance(ddof, (int, np.integer)) or ddof < 0:
        raise ValueError(f"ddof must be an int ≥ 0, got {ddof!r}")
    ddof = int(ddof)
    if rows and ddof >= rows and check_axis(axis, len(shape)) == 0:
        raise InputError(f"ddof={ddof} needs more than {ddof} rows, got {rows}")
    n, _, m2 = _moments(x, axis, settings)
    if np.any(np.asarray(n) <= ddof):
        raise InputError(f"ddof={ddof} needs more than {ddof} elements, got {int(np.max(n))}")
    return keep_dims(np.asarray(m2) / (np.asarray(n) - ddof), len(shape), check_axis(axis, len(shape)), keepdims)


@returns_stats
def variance(
    x: Any,
    /,
    *,
    axis: int | None = None,
    keepdims: bool = False,
    ddof: int = 0,
    **options: Unpack[Options],
) -> Numeric:
    """The variance of ``x``, equal to ``np.var(x, axis=axis, ddof=ddof)``.

    Each shard computes its count, mean and sum of squared deviations; Chan's
    formula merges them, so data far from zero (mean 1e6, std 1) keeps its digits.
    Where numpy returns nan with a warning (0 rows, ``ddof`` ≥ the count),
    this raises InputError instead: a distributed run should not hand back a nan
    that a caller may not notice.

    Examples:
        >>> float(tmr.variance(np.array([1.0, 2.0, 3.0, 4.0]), cluster=cluster, sizes=[1, 3]))
        1.25
    """
    value = _variance(x, axis, ddof, keepdims, RunOptions.of(**options))
    return finish(value, np.float64)


var = variance
"""numpy's name for :func:`variance` (``np.var``): the same function."""


@returns_stats
def std(
    x: Any,
    /,
    *,
    axis: int | None = None,
    keepdims: bool = False,
    ddof: int = 0,
    **options: Unpack[Options],
) -> Numeric:
    """The standard deviation of ``x``, equal to ``np.std(x, axis=axis, ddof=ddof)`` (see [`variance`][tfmapreduce.variance]).

    Examples:
        >>> float(tmr.std(np.array([1.0, 3.0]), cluster=cluster))
        1.0
    """
    value = _variance(x, axis, ddof, keepdims, RunOptions.of(**options))
    return finish(np.sqrt(value), np.float64)


def _weighted_map(x: tf.Tensor, w: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    x, w = tf.cast(x, tf.float64), tf.cast(w, tf.float64)
    wx = tf.reshape(w, tf.concat([tf.shape(w), tf.ones([tf.rank(x) - 1], tf.int32)], 0)) * x
    return tf.reduce_sum(wx, axis=0), tf.reduce_sum(w)


@returns_stats
def weighted_mean(x: Any, w: Any, /, **options: Unpack[Options]) -> Numeric:
    """``Σ wᵢ·xᵢ / Σ wᵢ`` down the rows, equal to ``np.average(x, axis=0, weights=w)``.

    ``x`` and ``w`` are partitioned together: ``w`` holds one weight per row.

    Raises:
        InputError: ``w`` is not 1-d with one weight per row, or the weights sum to 0.

    Examples:
        >>> float(tmr.weighted_mean(np.array([1.0, 3.0]), np.array([3.0, 1.0]), cluster=cluster))
        1.5
    """
    settings = RunOptions.of(**options)
    _, _, rows = info(x, "x")
    srcs = sources((x, w))  # the run below uses these sources, not x and w again
    if len(srcs[1].shape) != 1:
        raise InputError(f"w must be 1-d, one weight per row of x, got shape {srcs[1].shape}")
    require_rows(rows, "the weighted mean")
    mapreduce = recipe(("weighted_mean",), lambda: (_weighted_map, SUM))
    (total, weight) = run(mapreduce, srcs, settings)
    if weight == 0:
        raise InputError("the weights w sum to 0, so the weighted mean is undefined; give some row a non-zero weight")
    return finish(np.asarray(total) / weight, np.float64)
