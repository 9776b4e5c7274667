"""Statistics recipes: mean, sum, min, max, count, variance, std, weighted_mean — each one distributed run."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from ._cluster import Cluster
from ._combine import COUNT, MAX, MIN, MOMENTS, SUM, Combiner
from ._errors import InputError
from ._inputs import known_nonnegative, sources
from ._job import MapReduce
from ._partition import SizesLike

_jobs: dict[Any, MapReduce[Any]] = {}


def job(key: Any, make: Callable[[], tuple[Callable[..., Any], Combiner]]) -> MapReduce[Any]:
    """The recipe job for ``key``, built once so repeated calls reuse its compiled graphs."""
    if key not in _jobs:
        map_fn, combiner = make()
        _jobs[key] = MapReduce(map_fn, combiner, name=str(key[0]))
    return _jobs[key]


def options(cluster: Cluster | None, sizes: SizesLike, devices: Sequence[str] | None, fallback: str | None,
            timeout: float | None, return_stats: bool = False) -> dict[str, Any]:
    """The keywords every recipe forwards to ``MapReduce.run``."""
    return {"cluster": cluster, "sizes": sizes, "devices": devices, "fallback": fallback, "timeout": timeout, "return_stats": return_stats}


def run(recipe: MapReduce[Any], x: Any, settings: dict[str, Any], broadcast: Sequence[Any] = ()) -> Any:
    """Run a recipe's job with the user's :func:`options`; returns (result, stats or None)."""
    out = recipe.run(x, broadcast=broadcast, **settings)
    return out if settings.get("return_stats") else (out, None)


def _check_axis(axis: object) -> int | None:
    if axis not in (None, 0):
        raise ValueError(f"axis must be None (every element) or 0 (down the rows, one result per column), got {axis!r}")
    return axis  # type: ignore[return-value]


def _info(x: Any, name: str) -> tuple[np.dtype, tuple[int, ...], int]:
    """The dtype, full shape and rows of the (first) input, after canonicalization."""
    src = sources(x, argument=name)[0]
    return src.dtype, src.shape, src.rows


def _require_rows(rows: int, recipe: str) -> None:
    if rows == 0:
        raise InputError(f"{recipe} of an input with 0 rows is undefined; pass at least one row")


def _result_dtype(dtype: np.dtype) -> np.dtype:
    """Means, variances and float sums are float64 whatever the input: the partials are float64,
    and rounding them to float32 would throw away the digits they kept."""
    return np.dtype(np.float64)


def _finish(value: Any, dtype: np.dtype, stats: Any) -> Any:
    value = np.asarray(value).astype(dtype)
    value = value[()] if value.ndim == 0 else value
    return (value, stats) if stats is not None else value


BLOCK = 256
"""float32 elements summed in float32 before the partial sums widen to float64."""

SAMPLE = 4096
"""Rows of a shard sampled to pick the shift of its variance computation."""


def _blocked_sum(x: tf.Tensor, axis: int | None) -> tf.Tensor:
    """float32 summed in blocks of :data:`BLOCK` in float32, then the block sums in float64.

    Its error is about 1e-7 of ``Σ|x|`` (not of ``|Σx|``): as good as float64 when
    no terms cancel, 7× faster than widening every element first (one core).
    Only the sum of everything is blocked: down axis 0, Eigen would add each
    column's block one row after another, which loses ~1e-6.
    """
    if axis is not None:
        return tf.reduce_sum(tf.cast(x, tf.float64), axis=axis)
    flat = tf.reshape(x, [-1])  # blocks along the innermost axis: Eigen's fastest, tree-shaped reduction
    blocks, rest = divmod(flat.shape[0], BLOCK)
    head, tail = tf.split(flat, [blocks * BLOCK, rest])  # split shares the buffer; a slice would copy it
    total = tf.reduce_sum(tf.cast(tf.reduce_sum(tf.reshape(head, [blocks, BLOCK]), axis=1), tf.float64))
    return total + tf.reduce_sum(tf.cast(tail, tf.float64))


def exact_sum(x: tf.Tensor, axis: int | None) -> tf.Tensor:
    """Sum ``x`` (over everything, or down axis 0) as exactly as float64 accumulation.

    Integers and booleans sum in int64, floats in float64.  A float32 shard
    known to hold no negative number (nothing can cancel) takes the blocked
    float32 path, as exact there and several times faster: resident data
    learns that when it is stored, shipped data when the client slices it.
    """
    if x.dtype.is_integer or x.dtype.is_bool:
        return tf.reduce_sum(tf.cast(x, tf.int64), axis=axis)
    if axis is None and x.dtype == tf.float32 and x.shape.num_elements() >= 2 * BLOCK and known_nonnegative(x):
        return _blocked_sum(x, axis)
    return tf.reduce_sum(tf.cast(x, tf.float64), axis=axis)


def _sum_map(axis: int | None) -> Callable[[tf.Tensor], tf.Tensor]:
    def shard_sum(x: tf.Tensor) -> tf.Tensor:
        return exact_sum(x, axis)

    return shard_sum


def mean(x: Any, /, *, axis: int | None = None, cluster: Cluster | None = None, sizes: SizesLike = None,
         devices: Sequence[str] | None = None, fallback: str | None = None, timeout: float | None = None,
         return_stats: bool = False) -> Any:
    """The mean of ``x`` over the cluster, equal to ``np.mean(x, axis=axis)``.

    Every shard sums in float64; the sums add up and divide by the element
    count, so uneven and empty shards weigh exactly what they hold.

    Args:
        x: an array or resident ``Sharded`` data.
        axis: None for every element, 0 for one mean per column.
        cluster, sizes, devices, fallback, timeout, return_stats: as for ``MapReduce.run``.

    Raises:
        InputError: ``x`` has 0 rows.  TypeError: ``x`` is not numeric.

    Example:
        >>> tmr.mean(np.arange(100.0), cluster=c, sizes=[30, 70])  # doctest: +SKIP
        49.5
    """
    axis = _check_axis(axis)
    dtype, shape, rows = _info(x, "x")
    _require_rows(rows, "the mean")
    recipe = job(("mean", axis), lambda: (_sum_map(axis), SUM))
    total, stats = run(recipe, x, options(cluster, sizes, devices, fallback, timeout, return_stats))
    count = math.prod(shape) if axis is None else rows
    return _finish(np.asarray(total, np.float64) / count, _result_dtype(dtype), stats)


def sum(x: Any, /, *, axis: int | None = None, cluster: Cluster | None = None, sizes: SizesLike = None,
        devices: Sequence[str] | None = None, fallback: str | None = None, timeout: float | None = None,
        return_stats: bool = False) -> Any:
    """The sum of ``x``, equal to ``np.sum(x, axis=axis)``: integers accumulate in int64, floats in float64.

    Example:
        >>> tmr.sum(np.arange(10, dtype=np.int32), cluster=c)  # doctest: +SKIP
        45
    """
    axis = _check_axis(axis)
    recipe = job(("sum", axis), lambda: (_sum_map(axis), SUM))
    total, stats = run(recipe, x, options(cluster, sizes, devices, fallback, timeout, return_stats))
    return _finish(total, np.asarray(total).dtype, stats)


def _extreme(name: str, reduce: Callable[..., tf.Tensor], combiner: Combiner) -> Callable[..., Any]:
    def recipe(x: Any, /, *, axis: int | None = None, cluster: Cluster | None = None, sizes: SizesLike = None,
               devices: Sequence[str] | None = None, fallback: str | None = None, timeout: float | None = None,
               return_stats: bool = False) -> Any:
        axis = _check_axis(axis)
        dtype, _, rows = _info(x, "x")
        _require_rows(rows, f"the {name}")
        the_job = job((name, axis), lambda: (lambda t: reduce(t, axis=axis), combiner))
        value, stats = run(the_job, x, options(cluster, sizes, devices, fallback, timeout, return_stats))
        return _finish(value, dtype, stats)

    recipe.__name__ = recipe.__qualname__ = name
    recipe.__doc__ = f"""The {name}imum of ``x``, equal to ``np.{name}(x, axis=axis)``; an input with 0 rows raises InputError.

    Example:
        >>> tmr.{name}(np.array([3, 1, 2]), cluster=c)  # doctest: +SKIP
    """
    return recipe


min = _extreme("min", tf.reduce_min, MIN)
max = _extreme("max", tf.reduce_max, MAX)


def count(x: Any, /, *, cluster: Cluster | None = None, sizes: SizesLike = None, devices: Sequence[str] | None = None,
          fallback: str | None = None, timeout: float | None = None, return_stats: bool = False) -> Any:
    """The number of rows of ``x`` (``len(x)``), counted shard by shard on the cluster.

    Example:
        >>> tmr.count(np.zeros((7, 3)), cluster=c)  # doctest: +SKIP
        7
    """
    recipe = job(("count",), lambda: (lambda t: tf.shape(t, out_type=tf.int64)[0], COUNT))
    value, stats = run(recipe, x, options(cluster, sizes, devices, fallback, timeout, return_stats))
    return _finish(value, np.dtype(np.int64), stats)


def _moments_map(axis: int | None) -> Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor, tf.Tensor]]:
    def shard_moments(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        # Shift by c, an estimate of the mean in x's own float type: y = x - c is exact
        # near the mean, so data far from 0 (mean 1e6, std 1) keeps its digits, and
        # Σ(x - m)² = Σy² - (Σy)²/n with Σy small (no cancellation).  c and Σy may be
        # approximate (blocked float32): they move the mean by ~1e-7·std, never M2.
        if not x.dtype.is_floating or x.dtype in (tf.float16, tf.bfloat16):
            x = tf.cast(x, tf.float64)
        approx = _blocked_sum if x.dtype == tf.float32 else exact_sum
        n = tf.cast(tf.size(x) if axis is None else tf.shape(x)[0], tf.float64)
        rows = x.shape[0]
        sample = x[:: rows // SAMPLE or 1]  # c needs only be near the mean: a strided sample saves a pass
        c = tf.cast(tf.reduce_mean(tf.cast(sample, tf.float64), axis=axis), x.dtype)
        y = x - c
        s1 = approx(y, axis)
        return n, tf.cast(c, tf.float64) + s1 / n, approx(tf.square(y), axis) - s1 * s1 / n

    return shard_moments


def moments(x: Any, /, *, axis: int | None = None, cluster: Cluster | None = None, sizes: SizesLike = None,
            devices: Sequence[str] | None = None, fallback: str | None = None, timeout: float | None = None,
            return_stats: bool = False) -> Any:
    """``(count, mean, M2)`` of ``x`` in float64, merged across shards with Chan's parallel formula."""
    axis = _check_axis(axis)
    _, _, rows = _info(x, "x")
    _require_rows(rows, "the variance")
    recipe = job(("moments", axis), lambda: (_moments_map(axis), MOMENTS))
    value, stats = run(recipe, x, options(cluster, sizes, devices, fallback, timeout, return_stats))
    return (value, stats) if return_stats else value


def variance(x: Any, /, *, axis: int | None = None, ddof: int = 0, cluster: Cluster | None = None, sizes: SizesLike = None,
             devices: Sequence[str] | None = None, fallback: str | None = None, timeout: float | None = None,
             return_stats: bool = False) -> Any:
    """The variance of ``x``, equal to ``np.var(x, axis=axis, ddof=ddof)``.

    Each shard computes its count, mean and sum of squared deviations; Chan's
    formula merges them, so data far from zero (mean 1e6, std 1) keeps its digits.

    Example:
        >>> tmr.variance(np.array([1.0, 2.0, 3.0, 4.0]), cluster=c, sizes=[1, 3])  # doctest: +SKIP
        1.25
    """
    dtype, _, rows = _info(x, "x")
    if isinstance(ddof, bool) or not isinstance(ddof, int) or ddof < 0:
        raise ValueError(f"ddof must be an int ≥ 0, got {ddof!r}")
    if rows and ddof >= rows and axis == 0:
        raise InputError(f"ddof={ddof} needs more than {ddof} rows, got {rows}")
    out = moments(x, axis=axis, cluster=cluster, sizes=sizes, devices=devices, fallback=fallback, timeout=timeout, return_stats=return_stats)
    (n, _, m2), stats = out if return_stats else (out, None)
    if np.any(np.asarray(n) <= ddof):
        raise InputError(f"ddof={ddof} needs more than {ddof} elements, got {int(np.max(n))}")
    return _finish(np.asarray(m2) / (np.asarray(n) - ddof), _result_dtype(dtype), stats)


def std(x: Any, /, *, axis: int | None = None, ddof: int = 0, cluster: Cluster | None = None, sizes: SizesLike = None,
        devices: Sequence[str] | None = None, fallback: str | None = None, timeout: float | None = None,
        return_stats: bool = False) -> Any:
    """The standard deviation of ``x``, equal to ``np.std(x, axis=axis, ddof=ddof)`` (see :func:`variance`)."""
    out = variance(x, axis=axis, ddof=ddof, cluster=cluster, sizes=sizes, devices=devices, fallback=fallback, timeout=timeout, return_stats=return_stats)
    value, stats = out if return_stats else (out, None)
    return _finish(np.sqrt(value), np.asarray(value).dtype, stats)


def _weighted_map(x: tf.Tensor, w: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    x, w = tf.cast(x, tf.float64), tf.cast(w, tf.float64)
    wx = tf.reshape(w, tf.concat([tf.shape(w), tf.ones([tf.rank(x) - 1], tf.int32)], 0)) * x
    return tf.reduce_sum(wx, axis=0), tf.reduce_sum(w)


def weighted_mean(x: Any, w: Any, /, *, cluster: Cluster | None = None, sizes: SizesLike = None, devices: Sequence[str] | None = None,
                  fallback: str | None = None, timeout: float | None = None, return_stats: bool = False) -> Any:
    """``Σ wᵢ·xᵢ / Σ wᵢ`` down the rows, equal to ``np.average(x, axis=0, weights=w)``.

    ``x`` and ``w`` are partitioned together: ``w`` holds one weight per row.

    Raises:
        InputError: ``w`` is not 1-d with one weight per row, or the weights sum to 0.

    Example:
        >>> tmr.weighted_mean(np.array([1.0, 3.0]), np.array([3.0, 1.0]), cluster=c)  # doctest: +SKIP
        1.5
    """
    dtype, _, rows = _info(x, "x")
    srcs = sources((x, w))
    if len(srcs[1].shape) != 1:
        raise InputError(f"w must be 1-d, one weight per row of x, got shape {srcs[1].shape}")
    _require_rows(rows, "the weighted mean")
    recipe = job(("weighted_mean",), lambda: (_weighted_map, SUM))
    (total, weight), stats = run(recipe, (x, w), options(cluster, sizes, devices, fallback, timeout, return_stats))
    if weight == 0:
        raise InputError("the weights w sum to 0, so the weighted mean is undefined; give some row a non-zero weight")
    return _finish(np.asarray(total) / weight, _result_dtype(dtype), stats)
