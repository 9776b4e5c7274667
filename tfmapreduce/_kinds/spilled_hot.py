"""A hot key of a spilled group run — one key whose values alone exceed a reducer's budget — reduced without any
device holding its values: its result selected from the workers' disks in passes (recipes with ``GroupForm.ranked``:
``median_by_key``, ``quantile_by_key``, ``top_k_by_key``).

The result needs the key's values at a few ranks (``Ranked.ranks``).  Each value is an unsigned 64-bit order code
(``order_codes``); pass p of ``PASSES`` picks each rank's code byte p, most significant first::

    every task with rows of the key's sub-partition   reads its piece from its disk, keeps the key's values and, for
                                                      each rank, counts those whose higher bytes equal the bytes
                                                      picked so far, by their byte p (256 counts per rank)
    the key's reducer                                 sums the tasks' counts
    client                                            picks each rank's byte p: where the counts pass its rank

After the last pass the codes are the values at the ranks, and ``Ranked.finish`` makes the key's result from them.
Memory: each task its own piece, as it wrote it; the reducer 256 counts per rank; the client the selected values.
One graph, fed the pass, run ``PASSES`` times.

Example: ``tmr.median_by_key(keys, values, max_bytes=4_000)`` where key 7 holds 3,000 float64 values (48 kB with their
keys) spills, reduces the other keys of key 7's sub-partition in its round, then runs this module's graph 8 times to
select key 7's two middle values; its median is ``np.median``'s of them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from .._ops.ranked import RANKABLE, from_codes, order_codes
from .grace import Graced, read_pieces
from .grouped import Grouped
from .shuffle.plan import KeyedPlan

PASSES = 8
"""One pass per byte of the 64-bit order codes."""


def takes_hot_keys(kind: Any, graced: Graced[KeyedPlan], *, resident: bool) -> bool:
    """Whether ``kind``'s hot keys are selected here: a recipe's group reducer with ranks (``GroupForm.ranked``) of one
    1-D column of ``RANKABLE`` values, its result fetched (not ``resident=True``)."""
    if resident or not isinstance(kind, Grouped) or kind.form.ranked is None or len(graced.leaves) != 1:
        return False
    dtype, row = graced.leaves[0]
    return row == () and dtype in RANKABLE


def without(pieces: list[tf.Tensor], keys: list[tf.Tensor], hot: Any) -> list[tf.Tensor]:
    """``pieces`` (one per task, on its task) without the rows of key ``hot`` (``keys``: the same tasks' keys)."""
    kept = []
    for piece, key in zip(pieces, keys, strict=True):
        with tf.device(piece.device):
            kept.append(tf.boolean_mask(piece, tf.not_equal(key, tf.constant(hot, key.dtype))))
    return kept


def selected(kind: Grouped, graced: Graced[KeyedPlan], b: int, hot: Any, cluster: Any, timeout: float) -> tuple[Any, list[Any]]:
    """The result of key ``hot`` of sub-partition ``b`` (see the module), as a round fetches a reducer's:
    (its key, the result's leaves; a ragged one as (flat values, row splits))."""
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
                codes = order_codes(tf.boolean_mask(value, tf.equal(key, tf.constant(hot, key.dtype))))
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
    leaves = [
        (leaf.flat_values.numpy(), leaf.row_splits.numpy()) if isinstance(leaf, tf.RaggedTensor) else leaf.numpy()
        for leaf in tf.nest.flatten(result)
    ]
    key = np.array([hot], dtype=object if isinstance(hot, bytes) else graced.key_dtype.as_numpy_dtype)
    return key, leaves
