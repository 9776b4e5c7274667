"""The join of two sets of keyed rows on one device: which row pairs it makes, and the rows those pairs take.

:func:`join_index` is the whole contract: one ``(i, j)`` pair per left row ``i`` and right row ``j`` of equal
keys, ``(i, -1)`` for a left row without a match when the left side is kept, ``(-1, j)`` likewise for the right,
and which right rows matched.  It runs in TensorFlow ops: both sides grouped by ``tf.unique`` ids, the pairs made
key by key (the order is not part of the contract).  Where every task has the native kernels, joins use ``TmrJoinMatch`` and
``TmrJoinTake`` instead (``_join``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from ..._ops.combine import segment_sum


def join_index(left: tf.Tensor, right: tf.Tensor, *, keep_left: bool, keep_right: bool) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(left rows, right rows, right_matched): int64 row pairs of the join (-1: no row of that side) and, per right
    row, whether some left row has its key.  Keys are 1-D int32, int64 or string tensors of one dtype.

    Example:
        >>> li, ri, matched = join_index(tf.constant([3, 1, 3]), tf.constant([3, 7]), keep_left=True, keep_right=True)
        >>> sorted(zip(li.numpy().tolist(), ri.numpy().tolist())), matched.numpy().tolist()
        ([(-1, 1), (0, 0), (1, -1), (2, 0)], [True, False])
    """
    # Key ids by tf.unique, each side's rows ordered by id (stable), and each key's block of left rows × right rows
    # pairs (a kept side without rows of the key counts one row, -1).
    n = tf.size(left)
    keys, ids = tf.unique(tf.concat([left, right], 0))
    k = tf.size(keys)
    left_ids, right_ids = ids[:n], ids[n:]
    on_left = segment_sum(tf.ones_like(left_ids, tf.int64), left_ids, k)
    on_right = segment_sum(tf.ones_like(right_ids, tf.int64), right_ids, k)
    one = tf.ones_like(on_left)
    rows_left = tf.maximum(on_left, one) if keep_right else on_left
    rows_right = tf.maximum(on_right, one) if keep_left else on_right
    block = rows_left * rows_right  # the pairs of each key
    key = tf.repeat(tf.range(k), block)
    at = tf.range(tf.reduce_sum(block)) - tf.gather(tf.cumsum(block, exclusive=True), key)
    across = tf.gather(rows_right, key)
    i, j = at // across, at % across

    def rows(ids: tf.Tensor, count: tf.Tensor, nth: tf.Tensor) -> tf.Tensor:
        order = tf.concat([tf.argsort(ids, stable=True), [-1]], 0)
        valid = nth < tf.gather(count, key)
        at = tf.where(valid, tf.gather(tf.cumsum(count, exclusive=True), key) + nth, tf.size(ids, tf.int64))

        return tf.cast(tf.gather(order, at), tf.int64)

    matched = tf.gather(on_left, right_ids) > 0
    return rows(left_ids, on_left, i), rows(right_ids, on_right, j), matched


def fill_value(dtype: tf.DType) -> Any:
    """What a row of the other side without a match holds: NaN for floats, 0 for integers, False, or the empty string."""
    if dtype.is_floating:
        return np.nan
    if dtype == tf.string:
        return b""
    if dtype == tf.bool:
        return False
    return 0


def take(leaf: tf.Tensor, rows: tf.Tensor) -> tf.Tensor:
    """``leaf``'s rows at ``rows``; a row -1 takes the :func:`fill_value` of ``leaf``'s dtype."""
    fill = tf.fill(tf.concat([[1], tf.shape(leaf)[1:]], 0), tf.constant(fill_value(leaf.dtype), leaf.dtype))
    padded = tf.concat([leaf, fill], 0)
    return tf.gather(padded, tf.where(rows < 0, tf.shape(leaf, tf.int64)[0], rows))
