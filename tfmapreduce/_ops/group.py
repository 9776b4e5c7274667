"""Grouping keys: each key's segment id among the distinct keys of a batch, in the graph.

``tf.unique`` hashes and compares every string key; on word-count batches it is the largest
cost after splitting the lines.  String keys are grouped instead by two independent 64-bit
fingerprints of their bytes, computed in one pass each:

- the first, FarmHash ``Fingerprint64`` (``tf.strings.to_hash_bucket_fast``), is grouped exactly
  as an integer, by a multiplicative hash into ``2**k`` buckets: the smallest fingerprint of each
  bucket is a group, and the few fingerprints that share a bucket with a smaller one go through
  ``tf.unique``;
- the second, TensorFlow's ``Hash64`` (``tf.strings.to_hash_bucket``), checks every group: each key's
  second fingerprint must equal that of one member of its group; if two different strings of a batch
  share the first fingerprint, their second fingerprints differ and the batch is grouped by
  ``tf.unique`` on the strings themselves.

Two different strings land in one group only if both 64-bit fingerprints collide: about one
chance in 2**127 for a pair of keys (for a billion distinct keys, about 10**-20).
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

GOLDEN = 0x9E3779B97F4A7C15
"""The multiplier of the bucket hash: 2**64 divided by the golden ratio, odd."""

MAX_BUCKET_BITS = 18
"""At most 2**18 buckets (2 MiB of int64 per bucket array, cache-sized: 20% faster on a word count than 2**20)."""

_FINGERPRINT_MOD = 2**63 - 1


def group(
    keys: tf.Tensor, fingerprint: Callable[[tf.Tensor, int], tf.Tensor] = tf.strings.to_hash_bucket_fast
) -> tuple[tf.Tensor, tf.Tensor]:
    """The distinct ``keys`` (in no particular order) and each key's index among them (int32), like ``tf.unique``.

    Example:
        >>> distinct, ids = group(tf.constant(["b", "a", "b"]))
        >>> [distinct.numpy()[i].decode() for i in ids.numpy()]
        ['b', 'a', 'b']

    ``fingerprint`` is the first fingerprint (a test passes a weak one to reach the fallback).
    """
    if keys.dtype != tf.string:
        return _unique(keys)
    first = fingerprint(keys, _FINGERPRINT_MOD)
    second = tf.strings.to_hash_bucket(keys, _FINGERPRINT_MOD)
    fingerprints, ids = group_ints(first)
    member = tf.tensor_scatter_nd_update(tf.zeros(tf.shape(fingerprints), tf.int32), ids[:, None], tf.range(tf.size(keys)))
    one_string = tf.reduce_all(tf.equal(tf.gather(tf.gather(second, member), ids), second))  # each key: its group's member

    def by_fingerprint() -> tuple[tf.Tensor, tf.Tensor]:
        return tf.gather(keys, member), ids

    result: tuple[tf.Tensor, tf.Tensor] = tf.cond(one_string, by_fingerprint, lambda: _unique(keys))
    return result


def group_ints(keys: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """:func:`group` of int64 keys, exact: each bucket's smallest key is a group; the keys that are not go through ``tf.unique``.

    Example:
        >>> distinct, ids = group_ints(tf.constant([7, -1, 7], tf.int64))
        >>> distinct.numpy()[ids.numpy()].tolist()
        [7, -1, 7]
    """
    m = tf.size(keys)
    bits = tf.minimum(
        tf.cast(tf.math.ceil(tf.math.log(tf.cast(m, tf.float32) + 2.0) / tf.math.log(2.0)), tf.int32), MAX_BUCKET_BITS
    )
    count = tf.bitwise.left_shift(1, bits)
    mixed = tf.bitcast(keys, tf.uint64) * tf.constant(GOLDEN, tf.uint64)
    bucket = tf.cast(tf.bitwise.right_shift(mixed, tf.cast(64 - bits, tf.uint64)), tf.int32)
    smallest = tf.math.unsorted_segment_min(keys, bucket, count)
    present = tf.math.bincount(bucket, minlength=count, maxlength=count) > 0
    ids = tf.gather(tf.cumsum(tf.cast(present, tf.int32)) - 1, bucket)
    distinct = tf.boolean_mask(smallest, present)
    # Only the keys that are not their bucket's smallest go through tf.unique: usually none, and no tf.cond chooses
    # (a cond builds a function graph per branch: it cost more to build than the empty path costs to run).
    others = tf.where(tf.not_equal(tf.gather(smallest, bucket), keys))
    rest, rest_ids = _unique(tf.gather_nd(keys, others))
    return tf.concat([distinct, rest], 0), tf.tensor_scatter_nd_update(ids, others, rest_ids + tf.size(distinct))


def _unique(keys: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    distinct, ids = tf.unique(keys)
    return distinct, ids
