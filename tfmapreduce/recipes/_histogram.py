"""Histograms: numpy's bin edges, counted per shard where the data lives, added up."""

from __future__ import annotations

import math
from typing import Any, Literal, overload

import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._engine.stats import RunStats
from .._io.source import sources
from .._ops.combine import SUM, segment_count
from .._options import Options, RunOptions
from ._recipe import recipe, run_with_stats, value_range


def _histogram_map(x: tf.Tensor, edges: tf.Tensor) -> tf.Tensor:
    """Per shard: how many elements fall in each bin ``[e_i, e_i+1)``, the last bin closed, outsiders dropped."""
    values = tf.reshape(tf.cast(x, tf.float64), [-1])
    bins = tf.size(edges) - 1
    index = tf.searchsorted(edges[None, :], values[None, :], side="right")[0] - 1
    index = tf.where(tf.equal(values, edges[-1]), bins - 1, index)
    inside = (values >= edges[0]) & (values <= edges[-1])
    index = tf.where(inside, index, bins)  # one extra bucket for everything outside (NaN included)
    return segment_count(index, bins + 1)[:-1]


def _check_edges(edges: np.ndarray[Any, Any], argument: str) -> None:
    """Refuse edges wider than float64 (long double) that float64, which the workers compare in, would move.

    Raises:
        TypeError: an edge is not exactly a float64 (numpy would count the values near it otherwise).
    """
    if edges.dtype.kind == "f" and edges.dtype.itemsize > 8:
        moved = edges[edges.astype(np.float64) != edges]
        if moved.size:
            raise TypeError(
                f"{argument} gives {edges.dtype} (longdouble) bin edges, and float64, in which the workers count, would move "
                f"the edge {moved[0]!r} to {float(moved[0])!r} and count values numpy leaves out; pass float64 "
                f"{argument}, e.g. {argument}=np.asarray({argument}, np.float64)"
            )


Histogram = tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]
"""``(counts, edges)`` as numpy returns them."""


@overload
def histogram(
    x: Any,
    /,
    bins: Any = 10,
    range: tuple[float, float] | None = None,
    *,
    density: bool = False,
    return_stats: Literal[False] = False,
    **options: Unpack[Options],
) -> Histogram: ...
@overload
def histogram(
    x: Any,
    /,
    bins: Any = 10,
    range: tuple[float, float] | None = None,
    *,
    density: bool = False,
    return_stats: Literal[True],
    **options: Unpack[Options],
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], RunStats]: ...
def histogram(
    x: Any,
    /,
    bins: Any = 10,
    range: tuple[float, float] | None = None,
    *,
    density: bool = False,
    return_stats: bool = False,
    **options: Unpack[Options],
) -> Any:
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
        return_stats: also return the counting run's ``RunStats``.
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout`` (see ``RunOptions``).

    Returns:
        ``(counts, edges)`` (and the stats of the counting run, if asked).

    Raises:
        ValueError: bad ``bins`` or ``range`` (numpy's checks), or a non-finite data range.
        TypeError: ``bins`` or ``range`` in long double, with an edge float64 cannot hold exactly.

    Examples:
        >>> tmr.recipes.histogram(np.array([0.0, 1, 1, 2, 5]), bins=5, cluster=cluster)
        (array([1, 2, 1, 0, 1]), array([0., 1., 2., 3., 4., 5.]))
    """
    if isinstance(bins, str):
        raise TypeError(
            f"bins must be a number of bins or a sequence of edges; numpy's estimators such as {bins!r} need the whole data on one host"
        )
    settings = RunOptions.of(return_stats=return_stats, **options)
    x = sources(x)  # once, for the range run and the counting run
    src = x[0]
    empty = np.empty(0, src.dtype)
    if range is None and np.ndim(bins) == 0 and math.prod(src.shape) > 0:  # explicit edges need no data range
        lo, hi = value_range(x, settings)
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise ValueError(f"autodetected range of [{lo}, {hi}] is not finite; pass range=(low, high)")
        range = (lo, hi)
    edges = np.histogram_bin_edges(empty, bins, range)
    _check_edges(edges, "range" if np.ndim(bins) == 0 else "bins")
    mapreduce = recipe(("histogram",), lambda: (_histogram_map, SUM))
    counts, stats = run_with_stats(mapreduce, x, settings, broadcast=(edges.astype(np.float64),))
    counts = np.asarray(counts, np.int64)
    result: Histogram = (counts, edges)
    if density:
        widths = np.array(np.diff(edges), float)
        result = (counts / widths / counts.sum(), edges)
    return (*result, stats) if return_stats else result
