"""Exact order statistics: quantile, percentile and median of the whole input, from one distributed sort.

The input is sorted across the cluster (``tmr.sort``: sampled ranges, each sorted on its device), then one more
run fetches only the few ranks the answer needs (two per quantile, and the last for NaN).  Numpy finishes the
answer on those values, so it equals ``np.quantile``/``np.percentile``/``np.median`` bit for bit.
"""

from __future__ import annotations

import bisect
from typing import Any, Literal, get_args

import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from ._deadline import effective_timeout
from ._errors import InputError
from ._options import Options
from ._resident import Sharded
from ._sort import sort

Method = Literal["linear", "lower", "higher", "midpoint", "nearest"]
METHODS: tuple[Method, ...] = get_args(Method)
"""The methods of ``np.quantile`` computed here (numpy's default, ``"linear"``, and the four classic others)."""


def _ranks(data: Sharded, ranks: list[int], timeout: float | None) -> dict[int, Any]:
    """The values of the sorted resident ``data`` at the given ranks, fetched in one run."""
    starts = [s.start for s in data.plan.shards]
    graph = tf.Graph()
    fetch: dict[int, Any] = {}
    with graph.as_default():
        wanted: dict[int, list[int]] = {}
        for rank in sorted(set(ranks)):
            wanted.setdefault(bisect.bisect_right(starts, rank) - 1, []).append(rank)
        for index, chosen in wanted.items():
            shard = data.plan.shards[index]  # the last shard starting at or before the rank: not an empty one
            with tf.device(shard.device):
                values = tf.gather(data.read(shard), [r - shard.start for r in chosen])
                for j, rank in enumerate(chosen):
                    fetch[rank] = values[j]
    data.as_source()  # ClusterError for a closed cluster
    try:
        found = data.cluster.run(graph, fetch, {}, tasks=data.plan.tasks, timeout=effective_timeout(timeout))
    finally:
        data.cluster.forget(graph)
    return {rank: np.asarray(v)[()] for rank, v in found.items()}


def _order_statistics(x: Any, q: np.ndarray, weak: bool, method: Method, options: dict[str, Any]) -> Any:
    """``np.quantile(x, q, method=method)`` from the ranks of the distributed sort of ``x`` (``weak``: q was a Python number)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))} (numpy's names), got {method!r}")
    with sort(x, **options) as ordered:
        n = ordered.plan.rows
        if n == 0:
            raise InputError("x has no rows; a quantile needs at least one value")
        floats = ordered.dtype.kind == "f"
        # numpy's virtual index of each quantile: (n - 1) * q in float64, and the two ranks around it
        at = (n - 1) * q.reshape(-1)
        low = np.minimum(np.floor(at), n - 1).astype(np.int64)
        nearest = np.around(at).astype(np.int64)
        ranks = [*low.tolist(), *np.minimum(low + 1, n - 1).tolist(), *nearest.tolist(), *([n - 1] if floats else [])]
        values = _ranks(ordered, ranks, options.get("timeout"))
    dtype = ordered.dtype
    results = []
    for i, point in enumerate(at.tolist()):
        if method == "nearest":  # numpy rounds half to even: the rank itself
            pair, t = np.array([values[int(nearest[i])]] * 2, dtype), 0.0
        elif point >= n - 1:  # numpy takes the last value
            pair, t = np.array([values[n - 1]] * 2, dtype), 1.0
        else:  # numpy's interpolation between the two ranks, on the same two values and weight
            pair, t = np.array([values[int(low[i])], values[int(low[i]) + 1]], dtype), float(point - np.floor(point))
        results.append(np.quantile(pair, t if weak else np.asarray(t), method=method))
    result = np.asarray(results).reshape(q.shape)
    if floats and np.isnan(values[n - 1]):  # NaN sorts last: numpy's quantile of data with a NaN is NaN
        result = np.full_like(result, np.nan)
    return result[()] if result.ndim == 0 else result


def _check_q(q: Any, *, name: str, top: float) -> np.ndarray:
    array = np.asanyarray(q, dtype=np.float64) if not isinstance(q, np.ndarray) else q.astype(np.float64)
    if array.size and not (np.all(array >= 0) and np.all(array <= top)):
        raise ValueError(f"{name} must be in the range [0, {top:g}], got {q!r}; e.g. {name}={0.5 * top:g} for the median")
    return array


def quantile(x: Any, q: Any, /, *, method: Method = "linear", **options: Unpack[Options]) -> Any:
    """The exact ``q``-th quantile(s) of all of ``x``: equal to ``np.quantile(x, q, method=method)``.

    One distributed sort of ``x`` (see [`sort`][tfmapreduce.sort]), then one run that fetches the two ranks around each quantile
    (and the last value: a NaN anywhere makes the answer NaN, as in numpy).  The sorted copy is freed before it returns.

    Args:
        x: a 1-D array of integers or floats, or resident ``Sharded`` data (see [`sort`][tfmapreduce.sort]).
        q: a quantile in [0, 1], or an array of them (the result has its shape).
        method: ``"linear"`` (numpy's default), ``"lower"``, ``"higher"``, ``"midpoint"`` or ``"nearest"``.
        **options: the run options of [`sort`][tfmapreduce.sort].

    Raises:
        ValueError: ``q`` outside [0, 1] or another ``method``.
        InputError: ``x`` has no rows, or is not 1-D.

    Examples:
        >>> x = np.array([7.0, 1.0, 3.0, 5.0, 9.0, 2.0])
        >>> tmr.quantile(x, [0.25, 0.5, 0.9], cluster=cluster).tolist() == np.quantile(x, [0.25, 0.5, 0.9]).tolist()
        True
    """
    return _order_statistics(x, _check_q(q, name="q", top=1.0), type(q) in (int, float), method, dict(options))


def percentile(x: Any, p: Any, /, *, method: Method = "linear", **options: Unpack[Options]) -> Any:
    """The exact ``p``-th percentile(s) of all of ``x`` (``p`` in [0, 100]): equal to ``np.percentile(x, p, method=method)``.

    Examples:
        >>> float(tmr.percentile(np.arange(11), 30, cluster=cluster))
        3.0
    """
    q = np.true_divide(_check_q(p, name="p", top=100.0), 100)
    return _order_statistics(x, np.asanyarray(q), type(p) in (int, float), method, dict(options))


def median(x: Any, /, **options: Unpack[Options]) -> Any:
    """The exact median of all of ``x``: equal to ``np.median(x)`` (the mean of the two middle values for an even count).

    Examples:
        >>> float(tmr.median(np.array([4, 1, 3, 2]), cluster=cluster))
        2.5
    """
    with sort(x, **options) as ordered:
        n = ordered.plan.rows
        if n == 0:
            raise InputError("x has no rows; a median needs at least one value")
        middle = [(n - 1) // 2, n // 2]
        floats = ordered.dtype.kind == "f"
        values = _ranks(ordered, [*middle, *([n - 1] if floats else [])], options.get("timeout"))
    if floats and np.isnan(values[n - 1]):
        return np.median(np.array([values[n - 1]], ordered.dtype))
    return np.median(np.array([values[r] for r in dict.fromkeys(middle)], ordered.dtype))
