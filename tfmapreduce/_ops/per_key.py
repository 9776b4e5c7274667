"""Rows combined by key inside a graph, and keys bucketed to reducers by a stable hash.

A per-key partial is a pair (distinct keys, partial per key).  Integer keys whose range within a
batch is small (at most ``2·rows + DENSE_SLACK`` values) are combined without hashing or sorting:
the key minus the batch's minimum is the segment id.  Other integer keys go through ``tf.unique``;
strings are grouped by their fingerprints (see ``_group``).

The bucket of a key is stable across processes, machines and runs:

- strings: ``tf.strings.to_hash_bucket_fast(key, R)`` (FarmHash Fingerprint64 of the bytes, mod R);
- integers: multiplicative (Fibonacci) hashing of the key as a 64-bit two's complement number,
  ``((k · 0x9E3779B97F4A7C15) mod 2**64 >> 32) mod R`` (see :func:`int_bucket`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from .._native.loader import has
from .combine import SegmentForm, segment_count, sums_of
from .group import GOLDEN, group

DENSE_SLACK = 1 << 16
"""Integer keys spanning at most ``2·rows + DENSE_SLACK`` values are combined densely (no hashing)."""


def int_bucket(key: int, reducers: int) -> int:
    """The reducer (bucket) of an integer key, as the graph computes it: pure Python, for checks and docs.

    Example:
        >>> int_bucket(-1, 4), int_bucket(12345, 4)
        (2, 3)
    """
    h = ((key % 2**64) * GOLDEN) % 2**64
    return (h >> 32) % reducers


def buckets(keys: tf.Tensor, reducers: int) -> tf.Tensor:
    """Each key's reducer, in ``range(reducers)`` (int32): a stable hash of the key, mod ``reducers``."""
    if reducers == 1:
        return tf.zeros(tf.shape(keys), tf.int32)
    if keys.dtype == tf.string:
        return tf.cast(tf.strings.to_hash_bucket_fast(keys, reducers), tf.int32)
    mixed = tf.bitcast(tf.cast(keys, tf.int64), tf.uint64) * tf.constant(GOLDEN, tf.uint64)
    high = tf.cast(tf.bitwise.right_shift(mixed, tf.constant(32, tf.uint64)), tf.int64)
    if reducers & (reducers - 1) == 0:  # mod a power of two is a mask (int64 floormod is the slowest op here)
        return tf.cast(tf.bitwise.bitwise_and(high, reducers - 1), tf.int32)
    return tf.cast(tf.math.floormod(high, reducers), tf.int32)


def by_key(
    keys: tf.Tensor, rows: Any, combine: Callable[[Any, tf.Tensor, tf.Tensor], Any], native: Any | None = None
) -> tuple[tf.Tensor, Any]:
    """Combine ``rows`` (a structure, one row per key occurrence) by key: (distinct keys, ``combine(rows, ids, n)``).

    ``combine`` is a :class:`SegmentForm`'s ``partial`` or ``merge``.  Integer keys of a small
    range use their offset from the minimum as the segment (no hash table); the others are grouped by :func:`group`.
    Where ``combine`` is a built-in sum, count or mean (``_combine.SUMS``) or a ``Summed`` of 1-D columns on a CPU and the ``native``
    kernels are given, ``TmrSumsByKey`` does it all in two passes over the rows, with the same sums.
    """
    summed = _native_sums(keys, rows, combine, native)
    if summed is not None:
        return summed
    if keys.dtype == tf.string:
        distinct, ids = group(keys)
        return distinct, combine(rows, ids, tf.size(distinct))
    m = tf.size(keys)
    lo, hi = tf.reduce_min(keys), tf.reduce_max(keys)
    span = tf.cast(hi, tf.float64) - tf.cast(lo, tf.float64)
    dense_ok = tf.logical_and(m > 0, span <= tf.cast(2 * m + DENSE_SLACK, tf.float64))

    def dense() -> tuple[tf.Tensor, tf.Tensor]:  # every key of the range is a segment, some of them empty
        return tf.range(tf.cast(hi - lo, tf.int32) + 1, dtype=keys.dtype) + lo, tf.cast(keys - lo, tf.int32)

    # Only the segment ids are chosen in the cond: the combine is traced once, outside it (inside, it was
    # traced once per branch, each a function graph: a third of a second per batch fold built).
    segments, ids = tf.cond(dense_ok, dense, lambda: group(keys))
    n = tf.size(segments)
    combined = combine(rows, ids, n)
    present = segment_count(ids, n) > 0  # all of them, grouped
    return tf.boolean_mask(segments, present), tf.nest.map_structure(lambda t: tf.boolean_mask(t, present), combined)


_SUMMED_DTYPES = (tf.int32, tf.int64, tf.float32, tf.float64)


def _native_sums(keys: tf.Tensor, rows: Any, combine: Callable[..., Any], native: Any | None) -> tuple[tf.Tensor, Any] | None:
    """:func:`by_key` by ``TmrSumsByKey``; None where it does not apply."""
    form = sums_of(combine)
    if (
        not has(native, "tmr_sums_by_key")
        or form is None
        or keys.dtype not in (tf.int32, tf.int64)
        or "GPU" in keys.device.upper()
    ):
        return None
    leaves = tf.nest.flatten(rows) if form.leaves else []
    if not all(t.shape.rank == 1 and t.dtype in _SUMMED_DTYPES for t in leaves):
        return None
    out_types = [form.dtype(t.dtype) for t in leaves]
    distinct, sums, counts = native.tmr_sums_by_key(keys, leaves, out_types=out_types, dense_slack=DENSE_SLACK)
    return distinct, form.result(rows, sums, counts)


def _concat(parts: Sequence[tuple[tf.Tensor, Any]]) -> tuple[tf.Tensor, Any]:
    if len(parts) == 1:
        return parts[0]
    keys = tf.concat([k for k, _ in parts], 0)
    return keys, tf.nest.map_structure(lambda *leaves: tf.concat(leaves, 0), *[p for _, p in parts])


def merge(parts: Sequence[tuple[tf.Tensor, Any]], form: SegmentForm, native: Any | None = None) -> tuple[tf.Tensor, Any]:
    """Per-key partials (keys, partial) merged into one, by key (:func:`by_key` with ``native``)."""
    if len(parts) == 1:
        return parts[0]
    keys, rows = _concat(parts)
    return by_key(keys, rows, form.merge, native)
