"""Rows grouped by key inside a graph: every value of each key, as ragged rows, sorted within the key when asked.

Integer keys with one value column to sort take one native sort of the (key, value) rows themselves
(``TmrSortPairs``), which also says where each key's rows start: no key ids, no gather.  Otherwise
grouping is a sort of key ids: each key's id among the distinct keys (:func:`~tfmapreduce._ops.group.group`:
``tf.unique`` for integers, two fingerprints for strings) is stably sorted (:func:`argsort`), and the
sorted values become ``tf.RaggedTensor.from_row_splits`` rows whose splits are the cumulated counts of
the keys.  Values sorted within their key (``sort_values=True``, Hadoop's secondary sort) are sorted
first, each column by a stable sort from the last to the first, then by key id, again stably; a
single 32-bit column is packed with the key id into one int64 and sorted once.

Sorts see integers only (``tf.argsort`` has no string kernel and misorders NaN): values are sorted by
an integer image of them (:func:`sort_key`), floats by their IEEE bits made monotone, every NaN last,
as numpy sorts, and turned back by :func:`value_of`; strings by their rank in byte order
(:func:`string_ranks`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from .._native.loader import has
from .group import group

SORTABLE = (
    tf.int8,
    tf.int16,
    tf.int32,
    tf.int64,
    tf.uint8,
    tf.uint16,
    tf.uint32,
    tf.uint64,
    tf.float16,
    tf.bfloat16,
    tf.float32,
    tf.float64,
    tf.string,
)
"""The value dtypes ``sort_values=True`` sorts: integers, floats and strings (byte order), not bool or complex."""

CHUNK = 7
"""Bytes of a string compared at once by the stock :func:`string_ranks`: a non-negative int64 each."""


def sort_key(values: tf.Tensor) -> tf.Tensor:
    """An integer tensor ordered as ``values`` are (numpy's order: -0.0 before 0.0 aside, every NaN last).

    Example:
        >>> keys = sort_key(tf.constant([1.5, float("nan"), -2.0, float("-inf")]))
        >>> tf.argsort(keys, stable=True).numpy().tolist()
        [3, 2, 0, 1]
    """
    dtype = values.dtype
    if dtype.is_integer:
        if dtype.size < 4:
            return tf.cast(values, tf.int32)
        return tf.cast(values, tf.int64) if dtype == tf.uint32 else values
    wide = tf.float64 if dtype == tf.float64 else tf.float32
    bits, ones = (tf.int64, np.int64(2**63 - 1)) if wide == tf.float64 else (tf.int32, np.int32(2**31 - 1))
    floats = tf.cast(values, wide)
    floats = tf.where(tf.math.is_nan(floats), tf.constant(np.nan, wide), floats)  # one (positive) NaN: after +inf
    image = tf.bitcast(floats, bits)
    return tf.where(image < 0, tf.bitwise.bitwise_xor(image, tf.constant(ones, bits)), image)


def string_ranks(strings: tf.Tensor, native: Any | None) -> tf.Tensor:
    """Each string's rank (int64) among the distinct ``strings`` in byte order, as numpy sorts ``S`` arrays: equal
    strings share a rank.  The native ``TmrStringRanks`` where ``native`` is given; else stock ops: the distinct
    strings sorted from their last 7-byte chunk to their first (zero-padded; shorter first where they tie), each a
    stable sort of the chunks as integers.

    Example:
        >>> string_ranks(tf.constant([b"b", b"a\\x00", b"", b"a", b"b"]), None).numpy().tolist()
        [3, 2, 0, 1, 3]
    """
    if has(native, "tmr_string_ranks"):
        return native.tmr_string_ranks(strings)
    distinct, ids = tf.unique(tf.reshape(strings, [-1]))
    lengths = tf.strings.length(distinct)
    weights = tf.constant([256 ** (CHUNK - 1 - j) for j in range(CHUNK)], tf.int64)
    pad = tf.constant(b"\0" * CHUNK)

    def chunk(c: tf.Tensor, order: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        at = tf.minimum(c * CHUNK, lengths)
        piece = tf.strings.substr(distinct, at, tf.fill(tf.shape(at), CHUNK))  # "" past the end
        raw = tf.io.decode_raw(tf.strings.substr(tf.strings.join([piece, pad]), 0, CHUNK), tf.uint8)
        column = tf.reduce_sum(tf.cast(tf.reshape(raw, [-1, CHUNK]), tf.int64) * weights, axis=1)
        return c - 1, tf.gather(order, tf.argsort(tf.gather(column, order), stable=True))

    chunks = (tf.reduce_max(tf.concat([lengths, [0]], 0)) + CHUNK - 1) // CHUNK
    _, order = tf.while_loop(lambda c, _: c >= 0, chunk, (chunks - 1, tf.argsort(lengths, stable=True)))
    n = tf.size(distinct)
    ranks = tf.scatter_nd(order[:, None], tf.range(n, dtype=tf.int64), n[None])
    return tf.reshape(tf.gather(ranks, ids), tf.shape(strings, out_type=tf.int64))


def value_of(image: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    """The values whose :func:`sort_key` is ``image`` (every NaN comes back as one NaN).

    Example:
        >>> value_of(sort_key(tf.constant([-2.5, 0.0, 7.0])), tf.float32).numpy().tolist()
        [-2.5, 0.0, 7.0]
    """
    if dtype.is_integer:
        return tf.cast(image, dtype)
    bits = image.dtype
    ones = np.int64(2**63 - 1) if bits == tf.int64 else np.int32(2**31 - 1)
    raw = tf.where(image < 0, tf.bitwise.bitwise_xor(image, tf.constant(ones, bits)), image)
    return tf.cast(tf.bitcast(raw, tf.float64 if bits == tf.int64 else tf.float32), dtype)


def argsort(key: tf.Tensor, native: Any | None) -> tf.Tensor:
    """The stable order of int32 or int64 keys: the native radix sort (``_native/sorting.cc``) when ``native`` is given, else
    ``tf.argsort`` (TensorFlow's sort is ``top_k`` over all the keys: a few times slower; see the ordering guide).

    Example:
        >>> argsort(tf.constant([3, 1, 3, 0]), None).numpy().tolist()
        [3, 1, 0, 2]
    """
    return native.tmr_stable_argsort(key) if has(native, "tmr_stable_argsort") else tf.argsort(key, stable=True)


def _columns(leaf: tf.Tensor) -> list[tf.Tensor]:
    """A leaf's columns (a 1-D leaf is one column; inner dimensions, static, are flattened)."""
    if leaf.shape.rank == 1:
        return [leaf]
    width = int(np.prod(leaf.shape[1:]))
    flat = tf.reshape(leaf, [-1, width])
    return [flat[:, j] for j in range(width)]


def _order(ids: tf.Tensor, values: Any, sort_values: bool, native: Any | None) -> tf.Tensor:
    """The permutation that groups the rows by key id (stably), each key's rows sorted by their values when asked."""
    if not sort_values:
        return argsort(ids, native)
    columns = [
        string_ranks(c, native) if c.dtype == tf.string else sort_key(c)
        for leaf in tf.nest.flatten(values)
        for c in _columns(leaf)
    ]
    if len(columns) == 1 and columns[0].dtype == tf.int32:  # (key id, value) packed in one int64: one sort
        packed = tf.bitwise.left_shift(tf.cast(ids, tf.int64), 32) + (tf.cast(columns[0], tf.int64) + 2**31)
        return argsort(packed, native)
    order = tf.range(tf.size(ids, tf.int64), dtype=tf.int64)
    for column in reversed(columns):
        order = tf.gather(order, argsort(tf.gather(column, order), native))
    return tf.gather(order, argsort(tf.gather(ids, order), native))


def grouped(keys: tf.Tensor, values: Any, *, sort_values: bool = False, native: Any | None = None) -> tuple[tf.Tensor, Any]:
    """The distinct ``keys`` (in no particular order) and, for each, every one of its ``values`` as a ragged row.

    ``values`` is a tensor or a structure of them, one row per key occurrence; the result has the
    same structure of ``tf.RaggedTensor`` (one row per distinct key).  ``native``: the native kernels, where the
    device running the sort has them (see :func:`argsort`).

    Example:
        >>> keys, values = grouped(tf.constant([7, 3, 7, 7]), tf.constant([2.0, 1.0, 0.5, 4.0]), sort_values=True)
        >>> dict(zip(keys.numpy().tolist(), values.to_list()))
        {7: [0.5, 2.0, 4.0], 3: [1.0]}
    """
    leaves = tf.nest.flatten(values)
    if has(native, "tmr_sort_pairs") and sort_values and keys.dtype in (tf.int32, tf.int64) and _one_column(leaves):
        return _sorted_pairs(keys, leaves[0], native, values)
    distinct, ids = group(keys)
    n = tf.size(distinct)
    order = _order(ids, values, sort_values, native)
    counts = tf.math.bincount(ids, minlength=n, maxlength=n, dtype=tf.int64)
    splits = tf.concat([tf.zeros([1], tf.int64), tf.cumsum(counts)], 0)

    def rows(leaf: tf.Tensor) -> tf.RaggedTensor:
        return tf.RaggedTensor.from_row_splits(tf.gather(leaf, order), splits, validate=False)

    return distinct, tf.nest.map_structure(rows, values)


def _one_column(leaves: list[tf.Tensor]) -> bool:
    return len(leaves) == 1 and leaves[0].shape.rank == 1 and leaves[0].dtype not in (tf.uint64, tf.string)


def _sorted_pairs(keys: tf.Tensor, leaf: tf.Tensor, native: Any, structure: Any) -> tuple[tf.Tensor, Any]:
    """:func:`grouped` of integer keys and one sorted column in one native sort of the (key, value) rows themselves:
    no key ids, no order to gather by; each key's rows start where the sorted keys change."""
    sorted_keys, images, starts = native.tmr_sort_pairs(keys, sort_key(leaf))
    splits = tf.concat([starts, tf.reshape(tf.size(sorted_keys, tf.int64), [1])], 0)
    rows = tf.RaggedTensor.from_row_splits(value_of(images, leaf.dtype), splits, validate=False)
    return tf.gather(sorted_keys, starts), tf.nest.pack_sequence_as(structure, [rows])


def row_ids(splits: tf.Tensor) -> tf.Tensor:
    """Each value's row (int64) from the row splits: ``RaggedTensor.value_rowids`` in two ops (its own builds dozens).

    Example:
        >>> row_ids(tf.constant([0, 2, 2, 3], tf.int64)).numpy().tolist()
        [0, 0, 2]
    """
    total = splits[-1]
    inner = splits[1:-1]
    starts = tf.math.unsorted_segment_sum(tf.ones_like(inner), inner, total + 1)  # rows starting at each position
    return tf.cumsum(starts[:total])


def ungrouped(keys: tf.Tensor, groups: Any) -> tuple[tf.Tensor, Any]:
    """Ragged rows (a structure sharing one row partition) back to (keys, values): each key repeated for its values."""
    first = tf.nest.flatten(groups)[0]
    return tf.gather(keys, row_ids(first.row_splits)), tf.nest.map_structure(lambda g: g.flat_values, groups)


def nbytes(keys: tf.Tensor, values: Any) -> tf.Tensor:
    """The bytes (int64) of ``keys`` and ``values`` in memory: strings count their bytes and 32 per string."""

    def size(t: tf.Tensor) -> tf.Tensor:
        if t.dtype == tf.string:
            return tf.reduce_sum(tf.cast(tf.strings.length(t), tf.int64)) + 32 * tf.size(t, tf.int64)
        return tf.size(t, tf.int64) * t.dtype.size

    return tf.add_n([size(t) for t in [keys, *tf.nest.flatten(values)]])
