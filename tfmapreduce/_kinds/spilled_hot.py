"""A hot key of a spilled group run — one key whose values alone exceed a reducer's budget — reduced without any
device holding its values, where the recipe says how (``GroupForm.ranked``, ``distinct``, ``whole``):

- ranks (``median_by_key``, ``quantile_by_key``, ``top_k_by_key``): the result needs the key's values at a few ranks
  (``Ranked.ranks``).  Each value is an unsigned 64-bit order code (``order_codes``); pass p of ``PASSES`` picks each
  rank's code byte p, most significant first::

    every task with rows of the key's sub-partition   reads its piece from its disk, keeps the key's values and, for
                                                      each rank, counts those whose higher bytes equal the bytes
                                                      picked so far, by their byte p (256 counts per rank)
    the key's reducer                                 sums the tasks' counts
    client                                            picks each rank's byte p: where the counts pass its rank

  After the last pass the codes are the values at the ranks, and ``Ranked.finish`` makes the key's result from them.
  Memory: each task its own piece, as it wrote it; the reducer 256 counts per rank; the client the selected values.
  One graph, fed the pass, run ``PASSES`` times.
- distinct values (``count_distinct_by_key``): the key's value codes (``GroupForm.distinct``) split into hash
  buckets, each about half a budget; a run per bucket, where each task sends its distinct codes of the bucket to the
  key's reducer, which counts the distinct ones. The counts of the buckets add up to the key's.
- its values (``collect_by_key``): one run fetches each task's rows of the key straight to the client, which
  concatenates them in task order (and sorts them where ``sort_values``): no device holds them all.

Example: ``tmr.median_by_key(keys, values, max_bytes=4_000)`` where key 7 holds 3,000 float64 values (48 kB with their
keys) spills, reduces the other keys of key 7's sub-partition in its round, then runs this module's graph 8 times to
select key 7's two middle values; its median is ``np.median``'s of them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from .._ops.group import group
from .._ops.per_key import buckets
from .._ops.ranked import RANKABLE, from_codes, order_codes
from .grace import Graced, read_pieces
from .grouped import Grouped
from .shuffle.plan import KeyedPlan

PASSES = 8
"""One pass per byte of the 64-bit order codes."""


def takes_hot_keys(kind: Any, graced: Graced[KeyedPlan], *, resident: bool) -> bool:
    """Whether ``kind``'s hot keys are reduced here: a recipe's group reducer that says how (see the module): its
    values collected (fetched, not ``resident=True``), or counted or ranked where they are one 1-D column (ranked: of
    ``RANKABLE`` values), their one row a key kept on its reducer where ``resident=True`` partitions by hash."""
    if not isinstance(kind, Grouped):
        return False
    form = kind.form
    if resident and (form.whole or graced.plan.keyed.partitioner == "range"):
        return False
    if form.whole:
        return True
    if len(graced.leaves) != 1 or graced.leaves[0][1] != ():
        return False
    return form.distinct is not None or (form.ranked is not None and graced.leaves[0][0] in RANKABLE)


def without(pieces: list[tf.Tensor], keys: list[tf.Tensor], hot: list[Any]) -> list[tf.Tensor]:
    """``pieces`` (one per task, on its task) without the rows of the keys ``hot`` (``keys``: the same tasks' keys)."""
    kept = []
    for piece, key in zip(pieces, keys, strict=True):
        with tf.device(piece.device):
            other = tf.reduce_all(tf.not_equal(key[:, None], tf.constant(hot, key.dtype)[None, :]), axis=1)
            kept.append(tf.boolean_mask(piece, other))
    return kept


def selected(
    kind: Grouped, graced: Graced[KeyedPlan], b: int, hot: tuple[Any, int], cluster: Any, timeout: float
) -> tuple[Any, list[Any]]:
    """The result of the hot key of sub-partition ``b`` (``hot``: the key and its bytes; see the module), as a round
    fetches a reducer's: (its key, the result's leaves; a ragged one as (flat values, row splits))."""
    key = hot[0]
    if kind.form.whole:
        leaves = _collected(kind, graced, b, key, cluster, timeout)
    elif kind.form.distinct is not None:
        leaves = [np.array([_counted(kind.form.distinct, graced, b, hot, cluster, timeout)], np.int64)]
    else:
        leaves = _ranked(kind, graced, b, key, cluster, timeout)
    return np.array([key], dtype=object if isinstance(key, bytes) else graced.key_dtype.as_numpy_dtype), leaves


def _collected(kind: Grouped, graced: Graced[KeyedPlan], b: int, hot: Any, cluster: Any, timeout: float) -> list[Any]:
    """Key ``hot``'s values (``collect_by_key``'s result leaves): each task's rows of it fetched to the client."""
    graph = tf.Graph()
    with graph.as_default():
        keys = read_pieces(graced, b, 0)
        fetches = []
        for c in range(1, 1 + len(graced.leaves)):
            fetches.append([_of_key(value, key, hot) for key, value in zip(keys, read_pieces(graced, b, c), strict=True)])
    try:
        fetched = cluster.run(graph, fetches, {}, tasks=list(graced.plan.tasks), timeout=timeout)
    finally:
        cluster.forget(graph)
    leaves = []
    for pieces in fetched:
        flat = np.concatenate(pieces)
        if kind.form.sort_values:  # ascending, NaN last; strings in byte order
            flat = np.sort(flat, kind="stable")
        leaves.append((flat, np.array([0, len(flat)], np.int64)))
    return leaves


def _counted(codes_of: Any, graced: Graced[KeyedPlan], b: int, hot: tuple[Any, int], cluster: Any, timeout: float) -> int:
    """How many distinct value codes (``codes_of``) the hot key of sub-partition ``b`` has: a run per hash bucket."""
    key, share = hot
    parts = max(2, -(-2 * share // graced.plan.budget))  # about half a budget a bucket
    graph = tf.Graph()
    with graph.as_default():
        bucket = tf.compat.v1.placeholder(tf.int32, [], "bucket")
        picked = []
        for keys, value in zip(read_pieces(graced, b, 0), read_pieces(graced, b, 1), strict=True):
            with tf.device(keys.device), tf.name_scope("hot"):
                codes = codes_of(_of_key(value, keys, key))
                picked.append(group(tf.boolean_mask(codes, tf.equal(buckets(codes, parts), bucket)))[0])
        with tf.device(graced.plan.keyed.reducers[b // graced.plan.parts]):
            count = tf.size(group(tf.concat(picked, 0))[0], tf.int64)
    try:
        return sum(
            int(cluster.run(graph, count, {bucket: j}, tasks=list(graced.plan.tasks), timeout=timeout)) for j in range(parts)
        )
    finally:
        cluster.forget(graph)


def _of_key(value: tf.Tensor, keys: tf.Tensor, hot: Any) -> tf.Tensor:
    """The rows of ``value`` whose key (``keys``) is ``hot``, on their task."""
    with tf.device(keys.device):
        return tf.boolean_mask(value, tf.equal(keys, tf.constant(hot, keys.dtype)))


def _ranked(kind: Grouped, graced: Graced[KeyedPlan], b: int, hot: Any, cluster: Any, timeout: float) -> list[Any]:
    """Key ``hot``'s result leaves, its ranks selected in passes (``GroupForm.ranked``)."""
    ranked = kind.form.ranked
    assert ranked is not None  # (takes_hot_keys)
    plan = graced.plan
    graph = tf.Graph()
    with graph.as_default():
        shift = tf.compat.v1.placeholder(tf.uint64, [], "shift")
        mask = tf.compat.v1.placeholder(tf.uint64, [], "mask")
        prefix = tf.compat.v1.placeholder(tf.uint64, [None], "prefix")
        counted = []
        for key, value in zip(read_pieces(graced, b, 0), read_pieces(graced, b, 1), strict=True):
            with tf.device(key.device), tf.name_scope("hot"):
                codes = order_codes(_of_key(value, key, hot))
                byte = tf.cast(tf.bitwise.bitwise_and(tf.bitwise.right_shift(codes, shift), 255), tf.int64)
                at = tf.where(tf.equal(tf.bitwise.bitwise_and(codes[None, :], mask), prefix[:, None]))  # (rank, value)
                n = tf.size(prefix, tf.int64) * 256
                ids = at[:, 0] * 256 + tf.gather(byte, at[:, 1])
                counted.append(tf.math.unsorted_segment_sum(tf.ones_like(ids), ids, n))
        with tf.device(plan.keyed.reducers[b // plan.parts]):
            total = tf.add_n(counted)
    rest = codes_of = np.zeros(1, np.uint64)
    try:
        for p in range(PASSES):
            bit = 8 * (PASSES - 1 - p)
            high = np.uint64(~((1 << (bit + 8)) - 1) & 0xFFFFFFFFFFFFFFFF)
            feed = {shift: np.uint64(bit), mask: high, prefix: codes_of}
            counts = cluster.run(graph, total, feed, tasks=list(plan.tasks), timeout=timeout).reshape(-1, 256)
            if p == 0:  # every rank's counts alike: the key's values by their first byte
                n = int(counts.sum())
                rest = np.asarray(ranked.ranks(n), np.int64)
                codes_of = np.zeros(rest.size, np.uint64)
                counts = np.repeat(counts, rest.size, axis=0)
            below = np.cumsum(counts, axis=1)
            picked = np.array([np.searchsorted(c, r, side="right") for c, r in zip(below, rest, strict=True)], np.int64)
            rest = rest - np.where(picked > 0, below[np.arange(rest.size), np.maximum(picked - 1, 0)], 0)
            codes_of = codes_of | (picked.astype(np.uint64) << np.uint64(bit))
    finally:
        cluster.forget(graph)
    values = from_codes(codes_of, graced.leaves[0][0])
    result = ranked.finish(n, tf.constant(values, graced.leaves[0][0]))
    return [
        (leaf.flat_values.numpy(), leaf.row_splits.numpy()) if isinstance(leaf, tf.RaggedTensor) else leaf.numpy()
        for leaf in tf.nest.flatten(result)
    ]
