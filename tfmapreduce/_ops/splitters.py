"""Sampled range partitioning in the graph (TeraSort's way): keys as ordered integers, a sample, R − 1 splitters.

``tmr.sort`` and keyed jobs with ``partitioner="range"`` share it.  A key's order is its :func:`order_key`
(integers as they are, floats by their bits) or, for strings, its rank in byte order among the strings ranked
together (``_grouping.string_ranks``: a shard's keys ranked with the splitters, so both compare).

A keyed job's range partition (one distributed run; see ``_keyed_map.split_all``)::

    task t (its device)        its merged partial's keys (distinct after a combine; every row's for a group job)
                               → up to SAMPLES · R of them, drawn with replacement (all when fewer), each weighing
                                 keys / drawn
    task 0's CPU               every sample, ordered; the keys at cumulated weights W·(r + 1)/R: R − 1 splitters
    task t                     reducer of a key = ``searchsorted(splitters, key, side="right")``: the splitters ≤ it

A key goes to the same reducer from every task (one set of splitters), so every key lives on one reducer and the
reducers hold contiguous ranges: reducer r's keys are all below reducer r + 1's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from .grouping import argsort, sort_key, string_ranks

INT_DTYPES = tuple(np.dtype(d) for d in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"))
"""The integer dtypes a range sort, top-k and unique take as they are."""
FLOAT_DTYPES = tuple(np.dtype(d) for d in ("float16", "float32", "float64"))
"""The float dtypes they take (ordered through :func:`order_key`)."""

SAMPLES = 256
"""Sampled rows per range (R ranges: about ``SAMPLES * R`` in all); a smaller input is taken whole."""

SEED = 0x5027
"""The first half of each shard's stateless sampling seed (the second is the shard's index): a run samples the same rows."""


def sample_size(rows: int, total: int, ranges: int) -> int:
    """Rows a shard of ``rows`` samples (in proportion; all of them when the input has at most SAMPLES per range).

    Example:
        >>> sample_size(100, 1000, 4), sample_size(100, 1_000_000, 4), sample_size(100, 1000, 1)
        (100, 1, 0)
    """
    if ranges == 1 or rows == 0:
        return 0
    if total <= SAMPLES * ranges:
        return rows
    return max(1, round(SAMPLES * ranges * rows / total))


def order_key(values: tf.Tensor, descending: bool = False) -> tf.Tensor:
    """The values as int32 or int64 keys in the sort's order: a stable integer sort of the keys sorts the values.

    Integers keep their value (widened to int32, uint32 to int64); floats map their bits to integers of the same
    order (``_grouping.sort_key``), -0.0 first made 0.0 and every NaN one NaN after +inf (numpy's NaN last).
    ``descending`` inverts every bit: the exact reverse order (NaN first), ties still in row order under a stable sort.

    Example:
        >>> x = tf.constant([2.0, float("nan"), -0.0, -1.5, 0.0, float("-inf")])
        >>> tf.argsort(order_key(x), stable=True).numpy().tolist()
        [5, 3, 2, 4, 0, 1]
    """
    key = sort_key(values)
    if values.dtype.is_floating:  # -0.0 (image -1) as 0.0, by the bits: a comparison would take subnormals for 0 too
        key = tf.where(tf.equal(key, -1), tf.zeros_like(key), key)
    return tf.bitwise.invert(key) if descending else key


def comparable(values: tf.Tensor, descending: bool = False, native: Any | None = None) -> tf.Tensor:
    """Integers in the order of ``values`` (equal values equal): ``order_key`` of numbers; of strings their ranks
    among ``values`` in byte order (``_grouping.string_ranks``), so two string tensors compare only when ranked
    together (:func:`ranked_with`).

    Example:
        >>> comparable(tf.constant([b"b", b"", b"ab"]), True).numpy().tolist()
        [-3, -1, -2]
    """
    if values.dtype != tf.string:
        return order_key(values, descending)
    ranks = string_ranks(values, native)
    return tf.bitwise.invert(ranks) if descending else ranks


def ranked_with(
    keys: tf.Tensor, splitters: tf.Tensor, descending: bool = False, native: Any | None = None
) -> tuple[tf.Tensor, tf.Tensor]:
    """``keys`` and ``splitters`` as :func:`comparable` integers of one order (strings ranked together, in one call).

    Example:
        >>> [t.numpy().tolist() for t in ranked_with(tf.constant([b"b", b"a"]), tf.constant([b"ab"]))]
        [[2, 0], [1]]
    """
    if keys.dtype != tf.string:
        return comparable(keys, descending), comparable(splitters, descending)
    ranks = comparable(tf.concat([keys, splitters], 0), descending, native)
    m = tf.size(keys)
    return ranks[:m], ranks[m:]


def key_order(keys: tf.Tensor, native: Any | None = None) -> tf.Tensor:
    """The permutation that sorts ``keys`` ascending (strings in byte order), stably.

    Example:
        >>> key_order(tf.constant([b"b", b"", b"ab"])).numpy().tolist(), key_order(tf.constant([3, -1, 2])).numpy().tolist()
        ([1, 2, 0], [1, 2, 0])
    """
    return argsort(comparable(keys, native=native), native)


def sample(keys: tf.Tensor, seed: int, ranges: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Up to ``SAMPLES * ranges`` of ``keys`` (all of them when there are no more), and the weight of each (float64):
    how many keys one sampled key stands for.  Drawn with replacement by a stateless generator seeded
    ``(SEED, seed)``: the same keys sample the same."""
    cap = SAMPLES * ranges
    n = tf.size(keys, out_type=tf.int64)

    def drawn() -> tf.Tensor:
        return tf.random.stateless_uniform([cap], [SEED, seed], 0, n, dtype=tf.int64)

    at = tf.cond(n <= cap, lambda: tf.range(n), drawn)
    taken = tf.size(at, out_type=tf.int64)
    weight = tf.cast(n, tf.float64) / tf.cast(tf.maximum(taken, 1), tf.float64)
    return tf.gather(keys, at), tf.fill([taken], weight)


def choose(samples: Sequence[tuple[tf.Tensor, tf.Tensor]], ranges: int, native: Any | None = None) -> tf.Tensor:
    """At most ``ranges - 1`` splitter keys, ascending, from weighted samples (:func:`sample`'s): the sampled keys at
    the cumulated weights ``W · (r + 1) / ranges`` (with weights of 1: ranks ``total · (r + 1) // ranges``, as
    ``tmr.sort`` picks them).  No sample, no splitter: every key goes to range 0."""
    keys = tf.concat([k for k, _ in samples], 0)
    weights = tf.concat([w for _, w in samples], 0)
    order = key_order(keys, native)
    keys, cumulated = tf.gather(keys, order), tf.cumsum(tf.gather(weights, order))
    total = tf.size(keys, out_type=tf.int64)
    whole = tf.reduce_sum(weights)
    targets = whole * tf.constant([(r + 1) / ranges for r in range(ranges - 1)], tf.float64)
    at = tf.minimum(tf.searchsorted(cumulated, targets, side="right", out_type=tf.int64), total - 1)
    return tf.gather(keys, tf.boolean_mask(at, at >= 0))  # (no sample: total - 1 is -1, and nothing is kept)


def ranges_of(keys: tf.Tensor, splitters: tf.Tensor, native: Any | None = None) -> tf.Tensor:
    """Each key's range (int32): how many splitters are ≤ it, ``searchsorted(splitters, key, side="right")``; equal
    keys share a range.  String keys are ranked together with the splitters, so both are compared in byte order.

    Example:
        >>> ranges_of(tf.constant([5, 1, 9, 3]), tf.constant([3, 6])).numpy().tolist()
        [1, 0, 2, 1]
    """
    key, split = ranked_with(keys, splitters, native=native)
    return tf.searchsorted(split, key, side="right", out_type=tf.int32)
