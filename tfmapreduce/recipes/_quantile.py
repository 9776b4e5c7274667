"""Order statistics of all of an input: quantile, percentile and median, exact or within a rank bound.

Exact (the default): one run of the select kind (``_select``: a radix select of the ranks the answer needs, a
histogram of every value's top 16 bits, then of 12 more bits of the values in the chosen buckets only, until every
bit is chosen), then numpy finishes the answer on those few values, so it equals
``np.quantile``/``np.percentile``/``np.median`` bit for bit.

Approximate (``epsilon=``): one summary run (``_select``: each shard's histogram of the values' top 16 bits, summed
like any partial, and a sample of values, each with the ranks its bucket spans); the answer is a sampled value whose
rank is provably within ``epsilon · n`` of the wanted ones.  Where no sampled value can be proven that close (the
buckets near the quantile hold more than about ``epsilon · n`` values: heavy ties, data in a narrow range), that
quantile is selected exactly instead."""

from __future__ import annotations

from typing import Any, Literal, get_args

import attrs
import numpy as np
from typing_extensions import Unpack

from .._base.errors import InputError
from .._io.source import Sources
from .._kinds.persist import persisted
from .._kinds.select import COLUMNS, Shape, inputs, select, summarize
from .._options import Options, RunOptions
from ._recipe import check_axis, returns_stats

Method = Literal["linear", "lower", "higher", "midpoint", "nearest"]
METHODS: tuple[Method, ...] = get_args(Method)
"""The methods of ``np.quantile`` computed here (numpy's default, ``"linear"``, and the four classic others)."""


@attrs.frozen
class QuantileLayout:
    """How the values of ``x`` are taken: the columns (one answer each), the values per column, the result's shape.

    Example:
        >>> layout = QuantileLayout.of(np.zeros((5, 3)), None, "a median")
        >>> layout.columns, layout.n, layout.flatten  # axis=None: every value, one column
        (1, 15, True)
        >>> QuantileLayout.of(np.zeros((5, 3)), 0, "a median").suffix  # axis=0: one answer per column
        (3,)
    """

    columns: int
    """Answers per quantile: the columns for ``axis=0`` of 2-D data, else 1."""
    n: int
    """Values per column."""
    flatten: bool
    """A 2-D input read as one column of all its values (``axis=None``)."""
    dtype: np.dtype[Any]
    suffix: tuple[int, ...]
    """The result's shape after ``q``'s: the columns for ``axis=0`` of 2-D data."""

    @classmethod
    def of(cls, x: Any, axis: object, what: str) -> QuantileLayout:
        """The layout of ``x`` (sources) for ``axis``; ``what`` names the statistic in the error for no values.

        Raises:
            ValueError: an axis other than None and 0 (``check_axis``).  InputError: ``x`` holds no value.
        """
        src = x[0] if isinstance(x, Sources) else inputs(x)[0]
        ndim = len(src.shape)
        by_column = check_axis(axis, ndim) == 0 and ndim == 2
        columns = src.shape[1] if by_column else 1
        n = src.rows * (1 if ndim == 1 or by_column else src.shape[1])
        if n == 0:
            raise InputError(f"x has no values (shape {src.shape}); {what} needs at least one value")
        return cls(columns, n, ndim == 2 and not by_column, src.dtype, (columns,) if by_column else ())


def _check_epsilon(epsilon: object) -> float | None:
    if epsilon is None:
        return None
    number = isinstance(epsilon, (int, float, np.integer, np.floating)) and not isinstance(epsilon, (bool, np.bool_))
    if not number or not 0 < float(epsilon) < 1:  # type: ignore[arg-type]
        raise ValueError(
            "epsilon must be a number in (0, 1): the rank error allowed, as a fraction of the values (1e-3 allows "
            f"0.1% of them), or None for the exact answer; got {epsilon!r}"
        )
    return float(epsilon)  # type: ignore[arg-type]


def _check_method(method: object) -> None:
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))} (numpy's names), got {method!r}")


def _check_q(q: Any, *, name: str, top: float) -> np.ndarray:
    array = np.asanyarray(q, dtype=np.float64) if not isinstance(q, np.ndarray) else q.astype(np.float64)
    if array.size and not (np.all(array >= 0) and np.all(array <= top)):
        raise ValueError(f"{name} must be in the range [0, {top:g}], got {q!r}; e.g. {name}={0.5 * top:g} for the median")
    return array


def _exact(srcs: Sources, layout: QuantileLayout, q: np.ndarray, weak: bool, method: Method, settings: RunOptions) -> Any:
    """``np.quantile(x, q, axis, method=method)`` from the values at the ranks numpy reads, selected exactly."""
    n, dtype = layout.n, layout.dtype
    at = (n - 1) * q.reshape(-1)  # numpy's virtual index of each quantile, in float64
    low = np.minimum(np.floor(at), n - 1).astype(np.int64)
    nearest = np.around(at).astype(np.int64)
    ranks = {*low.tolist(), *np.minimum(low + 1, n - 1).tolist(), *(nearest.tolist() if method == "nearest" else [])}
    values, nan = select(srcs, [(c, r) for c in range(layout.columns) for r in sorted(ranks)], settings, flatten=layout.flatten)
    columns = []
    for c in range(layout.columns):
        results = []
        for i, point in enumerate(at.tolist()):
            if method == "nearest":  # numpy rounds half to even: the rank itself
                pair, t = np.array([values[(c, int(nearest[i]))]] * 2, dtype), 0.0
            elif point >= n - 1:  # numpy takes the last value
                pair, t = np.array([values[(c, n - 1)]] * 2, dtype), 1.0
            else:  # numpy's interpolation between the two ranks, on the same two values and weight
                pair = np.array([values[(c, int(low[i]))], values[(c, int(low[i]) + 1)]], dtype)
                t = float(point - np.floor(point))
            results.append(np.quantile(pair, t if weak else np.asarray(t), method=method))
        column = np.asarray(results)
        columns.append(np.full_like(column, np.nan) if nan[c] else column)  # numpy's quantile of data with a NaN is NaN
    return _shaped(np.stack(columns, -1), q.shape, layout)


def _targets(n: int, q: np.ndarray, method: Method) -> list[tuple[int, int]]:
    """The ranks each quantile's ``method`` reads in numpy, as ``(first, last)``: the two it interpolates between for
    linear and midpoint, the one it takes for the others."""
    at = (n - 1) * q.reshape(-1)
    floor, ceil, nearest = np.floor(at), np.minimum(np.ceil(at), n - 1), np.around(at)
    first = {"lower": floor, "higher": ceil, "nearest": nearest}.get(method, floor)
    last = {"lower": floor, "higher": ceil, "nearest": nearest}.get(method, ceil)
    return [(int(a), int(b)) for a, b in zip(first, last, strict=True)]


def _approximate(
    srcs: Sources, layout: QuantileLayout, targets: list[tuple[int, int]], epsilon: float, settings: RunOptions
) -> np.ndarray:
    """A ``(targets, columns)`` array of values of ``x``: each one's rank within ``epsilon · n`` of its target ranks."""
    n, dtype = layout.n, layout.dtype
    result = np.zeros((len(targets), layout.columns), dtype)
    missing: list[tuple[int, int]] = []  # (target, column) pairs no sampled value is proven close enough for
    for start in range(0, layout.columns, COLUMNS):
        shape = Shape((start, min(layout.columns, start + COLUMNS)), layout.flatten)
        sample, begin, end, nan, single = summarize(srcs, settings, shape)  # a sampled value is among ranks [begin, end)
        for j in range(shape.count):
            c = start + j
            if nan[j]:
                result[:, c] = np.nan
                continue
            for i, (first, last) in enumerate(targets):
                if single[j]:  # the value holds every rank of its bucket: its nearest one counts
                    worst = np.maximum(np.maximum(begin[:, j] - last, first - (end[:, j] - 1)), 0)
                else:  # its farthest possible rank
                    worst = np.maximum(np.maximum(first - begin[:, j], end[:, j] - 1 - last), 0)
                best = int(np.argmin(worst))
                if worst[best] <= epsilon * n:
                    result[i, c] = sample[best, j]
                else:
                    missing.append((i, c))
    if missing:  # selected exactly: a rank the method reads
        values, _ = select(srcs, [(c, targets[i][0]) for i, c in missing], settings, flatten=layout.flatten)
        for i, c in missing:
            result[i, c] = values[(c, targets[i][0])]
    return result


def _shaped(result: np.ndarray, shape: tuple[int, ...], layout: QuantileLayout) -> Any:
    """``(quantiles, columns)`` as numpy shapes it: ``q``'s shape, then the columns for ``axis=0`` of 2-D data."""
    result = result.reshape(shape + layout.suffix)
    return result[()] if result.ndim == 0 else result


def _order_statistics(
    x: Any, q: np.ndarray, weak: bool, method: Method, axis: object, epsilon: object, options: dict[str, Any], what: str
) -> Any:
    _check_method(method)
    eps = _check_epsilon(epsilon)
    with persisted(x, options) as (x, given):
        settings = RunOptions.of(**given)
        srcs = inputs(x)
        layout = QuantileLayout.of(srcs, axis, what)
        if layout.columns == 0:  # numpy's answer for rows of no columns
            return np.quantile(np.zeros((layout.n, layout.columns), layout.dtype), q, axis=0, method=method)
        if eps is None:
            return _exact(srcs, layout, q, weak, method, settings)
        return _shaped(_approximate(srcs, layout, _targets(layout.n, q, method), eps, settings), q.shape, layout)


@returns_stats
def quantile(
    x: Any,
    q: Any,
    /,
    *,
    axis: int | None = None,
    method: Method = "linear",
    epsilon: float | None = None,
    **options: Unpack[Options],
) -> Any:
    """The ``q``-th quantile(s) of ``x``: exactly ``np.quantile(x, q, axis=axis, method=method)``, or within
    ``epsilon`` of it in rank.

    Exact (``epsilon=None``): one distributed run selects the values at the ranks numpy reads (a radix select over
    the values' bits: every shard sends histograms of 65536 counts, never its values; see the ordering guide), and
    numpy finishes the answer on them, so it is numpy's to the bit (a NaN in the data gives NaN, as in numpy).

    Approximate (``epsilon=``, e.g. ``1e-3``): one run, one pass over the values.  The answer is a value that occurs
    in ``x`` (in ``x``'s dtype, never interpolated) whose rank — its position in ``np.sort(x)``, any one where it
    repeats — is at most ``epsilon · n`` from the ranks ``method`` reads: ``[⌊h⌋, ⌈h⌉]`` for linear and midpoint,
    ``⌊h⌋``, ``⌈h⌉`` or ``round(h)`` for lower, higher and nearest, with ``h = (n - 1) · q`` and ``n`` the values
    (of a column, for ``axis=0``).  The bound always holds: where the summary cannot prove it for a quantile, that
    quantile is selected exactly (a second run).

    Args:
        x: a 1-D or 2-D array of integers (int8 to int64, uint8 to uint32) or floats, resident ``Sharded`` data,
            or files (read into resident data first, freed after).
        q: a quantile in [0, 1], or an array of them (the result has its shape, then the columns for ``axis=0``).
        axis: None (every value, a 2-D input flattened) or 0 (one answer per column of 2-D data).
        method: ``"linear"`` (numpy's default), ``"lower"``, ``"higher"``, ``"midpoint"`` or ``"nearest"``.
        epsilon: None for the exact answer, or the rank error allowed as a fraction of the values, in (0, 1).
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout``, ``retries``, ``transfer``,
            ``return_stats`` (the stats of the last run): see [`RunOptions`][tfmapreduce.RunOptions].

    Raises:
        ValueError: ``q`` outside [0, 1], another ``method``, ``epsilon`` outside (0, 1), or an axis other than
            None and 0.
        InputError: ``x`` has no values, or is not 1-D or 2-D.
        TypeError: ``x`` holds neither integers nor floats, or ``speculate=True`` was given.

    Examples:
        >>> x = np.array([7.0, 1.0, 3.0, 5.0, 9.0, 2.0])
        >>> tmr.quantile(x, [0.25, 0.5, 0.9], cluster=cluster).tolist() == np.quantile(x, [0.25, 0.5, 0.9]).tolist()
        True
        >>> tmr.quantile(np.array([[1, 10], [2, 20], [3, 30]]), 0.5, axis=0, cluster=cluster).tolist()
        [2.0, 20.0]
        >>> float(tmr.quantile(np.arange(1000.0), 0.5, epsilon=0.01, cluster=cluster)) in np.arange(489.0, 511.0)
        True
    """
    return _order_statistics(
        x, _check_q(q, name="q", top=1.0), type(q) in (int, float), method, axis, epsilon, dict(options), "a quantile"
    )


@returns_stats
def percentile(
    x: Any,
    p: Any,
    /,
    *,
    axis: int | None = None,
    method: Method = "linear",
    epsilon: float | None = None,
    **options: Unpack[Options],
) -> Any:
    """The ``p``-th percentile(s) of ``x`` (``p`` in [0, 100]): ``np.percentile(x, p, axis=axis, method=method)``,
    exactly or within ``epsilon`` in rank (see [`quantile`][tfmapreduce.quantile]).

    Examples:
        >>> float(tmr.percentile(np.arange(11), 30, cluster=cluster))
        3.0
    """
    q = np.true_divide(_check_q(p, name="p", top=100.0), 100)
    return _order_statistics(x, np.asanyarray(q), type(p) in (int, float), method, axis, epsilon, dict(options), "a percentile")


@returns_stats
def median(x: Any, /, *, axis: int | None = None, epsilon: float | None = None, **options: Unpack[Options]) -> Any:
    """The median of ``x``: ``np.median(x, axis=axis)`` (the mean of the two middle values for an even count), or with
    ``epsilon`` a value of ``x`` within ``epsilon · n`` ranks of the middle ones (see [`quantile`][tfmapreduce.quantile]).

    Examples:
        >>> float(tmr.median(np.array([4, 1, 3, 2]), cluster=cluster))
        2.5
    """
    eps = _check_epsilon(epsilon)
    with persisted(x, dict(options)) as (x, given):
        settings = RunOptions.of(**given)
        srcs = inputs(x)
        layout = QuantileLayout.of(srcs, axis, "a median")
        if layout.columns == 0:  # numpy's answer for rows of no columns
            return np.median(np.zeros((layout.n, layout.columns), layout.dtype), axis=0)
        n, dtype = layout.n, layout.dtype
        middle = list(dict.fromkeys([(n - 1) // 2, n // 2]))
        if eps is not None:
            return _shaped(_approximate(srcs, layout, [(middle[0], middle[-1])], eps, settings), (), layout)
        cells = [(c, r) for c in range(layout.columns) for r in middle]
        values, nan = select(srcs, cells, settings, flatten=layout.flatten)
    results = []
    for c in range(layout.columns):
        chosen = [np.nan] if nan[c] else [values[(c, r)] for r in middle]  # numpy's median of data with a NaN is NaN
        results.append(np.median(np.array(chosen, dtype)))
    return _shaped(np.asarray(results), (), layout)
