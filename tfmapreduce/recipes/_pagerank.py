"""PageRank as an iterative join: the edges stay on the workers, sorted by target; only the ranks move.

Setup (once): node ids become dense rows ``0 .. n-1``; the edges are sorted by target across the cluster
(``tmr.sort_by_key``: each range of targets on one device, sorted there) and stay resident.  Host edges are
numbered on the client; resident edges (and files, read into resident arrays on the workers) on the workers: their
node ids are the union of two ``unique`` runs, the out-degrees one ``count_by_key``, and a ``map`` numbers the edges
where they live (a binary search in the broadcast ids), so no edge crosses the client.  Each
iteration is one run: every shard joins its edges with the ranks (the ranks, divided by each source's
out-degree, are broadcast: a gather by source) and sums them by target (a segment sum over its sorted
targets); the shards' sums add up, and the client adds the teleport and the dangling nodes' share.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._base.errors import InputError
from .._io.files.files import Files
from .._io.resident import Sharded
from .._kinds.map_api import map as map_rows
from .._kinds.mapreduce import MapReduce
from .._kinds.shuffle.result import KeyedResult
from .._kinds.sort import sort_by_key
from .._ops.combine import SUM
from .._options import Options
from ._by_key import count_by_key
from ._unique import unique

PLACING = ("sizes", "devices", "fallback", "reducers")
"""The options that place the edges (given to the sort); the others go to every iteration's run."""
PERSIST = ("cluster", "sizes", "devices", "fallback", "timeout")
"""The options that read edge files into resident arrays (``Files.persist``)."""


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


def _resident_ids(src: Any, dst: Any, running: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, Sharded, Sharded]:
    """Resident edges numbered where they live: the node ids (sorted), each node's out-degree, and each edge's target
    and source rows among the ids (int32, resident on the edges' plan; the caller deletes them)."""
    for name, x in (("src", src), ("dst", dst)):
        if len(x.shape) != 1 or x.dtype.kind not in "iu":
            raise TypeError(
                f"{name} must hold 1-D integer node ids, got {x.dtype} of shape {x.shape}; read a column of ids "
                "(e.g. tmr.read_npy of a 1-D int64 array)"
            )
    if src.shape[0] != dst.shape[0]:
        raise InputError(f"src has {src.shape[0]} edges but dst {dst.shape[0]}; pass one source and one target per edge")
    nodes = np.union1d(unique(src, **running), unique(dst, **running)).astype(np.int64)
    if len(nodes) >= 2**31:
        raise InputError(f"the graph has {len(nodes):,} nodes; pagerank takes at most 2**31 - 1")
    counted = count_by_key(src, **running)
    out = np.zeros(len(nodes))
    out[np.searchsorted(nodes, counted.keys)] = counted.values

    target, source = map_rows(_rows, (src, dst), broadcast=(nodes,), **running)
    return nodes, out, target, source


def _rows(src: tf.Tensor, dst: tf.Tensor, ids: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Edges' (target rows, source rows) among the sorted node ``ids`` (one function for every call: one program)."""
    return (
        tf.searchsorted(ids, tf.cast(dst, tf.int64), out_type=tf.int32),
        tf.searchsorted(ids, tf.cast(src, tf.int64), out_type=tf.int32),
    )


def _placed(x: Any, name: str, persist: dict[str, Any]) -> tuple[Any, bool]:
    """``x`` as host ids or resident ids: files read into resident arrays on the workers (True: delete them after)."""
    if isinstance(x, Files):
        if x.reader.unit != "rows":
            raise TypeError(
                f"{name} reads {x.reader.name} files; pagerank reads edge files of 1-D integer ids as .npy or raw files "
                "(tmr.read_npy(paths), tmr.read_raw(paths, dtype=np.int64)), one for the sources and one for the targets"
            )
        return x.persist(**persist), True
    return x, False


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
        src: the edges' source node ids (1-D integers): a host array, resident ``Sharded`` ids (co-partitioned
            with ``dst``: numbered where they live), or ``.npy``/raw files (read into resident arrays on the workers,
            freed at the end).
        dst: the edges' target node ids, one per source, given as ``src`` is.
        iters: the most iterations.
        damping: the probability of following an edge, in [0, 1).
        tol: stop early once the ranks change by less than ``n * tol`` in total (L1), as networkx does; None runs
            every iteration.
        **options: ``sizes``, ``devices``, ``reducers`` (how the edges are placed: ``reducers`` ranges of targets;
            ``sizes`` and ``devices`` place host edges and files), and ``cluster``, ``timeout``, ``retries``: see
            [`RunOptions`][tfmapreduce.RunOptions].

    Returns:
        A [`KeyedResult`][tfmapreduce.KeyedResult]: the node ids (sorted) and their ranks (float64, summing to 1).

    Raises:
        TypeError: ids that are not integers, ``src`` and ``dst`` of different kinds (host, resident, files), files of
            another format, or a bad ``iters``, ``damping`` or ``tol``.
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
    given: dict[str, Any] = dict(options)
    running = {k: v for k, v in given.items() if k not in PLACING}
    kinds = [isinstance(x, (Sharded, Files)) for x in (src, dst)]
    if kinds[0] != kinds[1]:
        raise TypeError(
            "src and dst must both be host arrays, both resident Sharded arrays (co-partitioned), or both files; got "
            f"{type(src).__name__} and {type(dst).__name__}: scatter the host one (tmr.scatter(x, cluster=c)) or gather "
            "the resident one"
        )
    if not kinds[0]:
        nodes, source, target = _ids(src, dst)
        n = len(nodes)
        if n == 0:
            return KeyedResult(nodes, np.zeros(0))
        out = np.bincount(source, minlength=n).astype(np.float64)
        targets, sources = sort_by_key(target, source, **given)
    else:
        persist = {k: v for k, v in given.items() if k in PERSIST}
        placed = [_placed(x, name, persist) for x, name in ((src, "src"), (dst, "dst"))]
        try:
            nodes, out, target_rows, source_rows = _resident_ids(placed[0][0], placed[1][0], running)
        finally:
            for x, read in placed:
                if read:
                    x.delete()
        n = len(nodes)
        try:
            if n == 0:
                return KeyedResult(nodes, np.zeros(0))
            placing = {k: v for k, v in given.items() if k not in ("sizes", "devices", "fallback")}
            targets, sources = sort_by_key(target_rows, source_rows, **placing)
        finally:
            target_rows.delete()
            source_rows.delete()
    dangling = out == 0
    share = np.divide(1.0, out, out=np.zeros(n), where=~dangling)

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
