"""PageRank as an iterative join: the edges stay on the workers, sorted by target; only the ranks move.

Setup (once): node ids become dense rows ``0 .. n-1``; the edges are sorted by target across the cluster
(``tmr.sort_by_key``: each range of targets on one device, sorted there) and stay resident.  Each
iteration is one run: every shard joins its edges with the ranks (the ranks, divided by each source's
out-degree, are broadcast: a gather by source) and sums them by target (a segment sum over its sorted
targets); the shards' sums add up, and the client adds the teleport and the dangling nodes' share.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from ._combine import SUM
from ._errors import InputError
from ._keyed_result import KeyedResult
from ._mapreduce import MapReduce
from ._options import Options
from ._sort import sort_by_key

PLACING = ("sizes", "devices", "fallback", "reducers")
"""The options that place the edges (given to the sort); the others go to every iteration's run."""


def _ids(src: Any, dst: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The node ids (sorted) and each edge's source and target rows among them (int32)."""
    arrays = []
    for name, x in (("src", src), ("dst", dst)):
        array = np.asarray(x)
        if array.ndim != 1 or array.dtype.kind not in "iu":
            raise TypeError(
                f"{name} must be a 1-D array of integer node ids, got {array.dtype} of shape {array.shape}; "
                f"e.g. np.asarray({name}, dtype=np.int64)"
            )
        arrays.append(array.astype(np.int64, copy=False))
    if len(arrays[0]) != len(arrays[1]):
        raise InputError(f"src has {len(arrays[0])} edges but dst {len(arrays[1])}; pass one source and one target per edge")
    both = np.concatenate(arrays)
    if both.size and both.min() >= 0 and both.max() < 4 * both.size + 1024:  # small ids: a dense look-up table
        present = np.zeros(int(both.max()) + 1, bool)
        present[both] = True
        nodes = np.flatnonzero(present)
        row = np.cumsum(present, dtype=np.int64) - 1
        rows = row[both]
    else:
        nodes, rows = np.unique(both, return_inverse=True)
    if len(nodes) >= 2**31:
        raise InputError(f"the graph has {len(nodes):,} nodes; pagerank takes at most 2**31 - 1")
    rows = rows.astype(np.int32)
    return nodes, rows[: len(arrays[0])], rows[len(arrays[0]) :]


def pagerank(
    src: Any, dst: Any, /, *, iters: int = 20, damping: float = 0.85, tol: float | None = None, **options: Unpack[Options]
) -> KeyedResult:
    """The PageRank of every node of a directed graph given as an edge list, by power iteration.

    Each iteration: ``rank = (1 - damping) / n + damping * (sum over edges u→v of rank[u] / outdegree[u]
    + (the ranks of the dangling nodes, without out-edges) / n)``, from the uniform ``1 / n``: the ranks of
    networkx's ``pagerank`` (uniform teleport, dangling nodes redistributed uniformly), with each edge counted
    as often as it appears.  Each iteration is one distributed run over the resident edges; only the ranks
    move (to every task, and back summed).

    Args:
        src: the edges' source node ids (1-D integers).
        dst: the edges' target node ids, one per source.
        iters: the most iterations.
        damping: the probability of following an edge, in [0, 1).
        tol: stop early once the ranks change by less than ``n * tol`` in total (L1), as networkx does; None runs
            every iteration.
        **options: ``sizes``, ``devices``, ``reducers`` (how the edges are placed: ``reducers`` ranges of targets),
            and ``cluster``, ``timeout``, ``retries``: see [`RunOptions`][tfmapreduce.RunOptions].

    Returns:
        A [`KeyedResult`][tfmapreduce.KeyedResult]: the node ids (sorted) and their ranks (float64, summing to 1).

    Raises:
        TypeError: ids that are not integers, or a bad ``iters``, ``damping`` or ``tol``.
        InputError: ``src`` and ``dst`` of different lengths.

    Examples:
        >>> ranks = tmr.recipes.pagerank(np.array([0, 1, 2, 2]), np.array([1, 2, 0, 1]), cluster=cluster)
        >>> ranks.keys.tolist(), np.round(ranks.values, 4).tolist()
        ([0, 1, 2], [0.2148, 0.3974, 0.3878])
    """
    if isinstance(iters, bool) or not isinstance(iters, (int, np.integer)) or iters < 0:
        raise TypeError(f"iters must be a number of iterations ≥ 0, got {iters!r}")
    if isinstance(damping, bool) or not isinstance(damping, (int, float, np.floating)) or not 0 <= damping < 1:
        raise TypeError(f"damping must be a probability in [0, 1), such as 0.85, got {damping!r}")
    if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float, np.floating)) or tol <= 0):
        raise TypeError(f"tol must be a positive tolerance or None, got {tol!r}")
    nodes, source, target = _ids(src, dst)
    n = len(nodes)
    if n == 0:
        return KeyedResult(nodes, np.zeros(0))
    out = np.bincount(source, minlength=n).astype(np.float64)
    dangling = out == 0
    share = np.divide(1.0, out, out=np.zeros(n), where=~dangling)
    given: dict[str, Any] = dict(options)
    running = {k: v for k, v in given.items() if k not in PLACING}
    targets, sources = sort_by_key(target, source, **given)

    def contributions(targets: tf.Tensor, sources: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
        sums = tf.math.segment_sum(tf.gather(weights, sources), targets)  # targets sorted: one pass
        return tf.concat([sums, tf.zeros([n - tf.shape(sums)[0]], tf.float64)], 0)

    job: MapReduce[Any] = MapReduce(contributions, SUM, name="pagerank")
    rank = np.full(n, 1.0 / n)
    try:
        for _ in range(int(iters)):
            summed = job.run((targets, sources), broadcast=(rank * share,), **running)
            new = (1.0 - damping) / n + damping * (np.asarray(summed) + rank[dangling].sum() / n)
            change = float(np.abs(new - rank).sum())
            rank = new
            if tol is not None and change < n * tol:
                break
    finally:
        targets.delete()
        sources.delete()
    return KeyedResult(nodes, rank)
