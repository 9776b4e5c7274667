"""Results a worker writes straight into a shared-memory file of the client's (a header, then the raw rows), and
their reading back on the client without a copy."""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from .._native.loader import has

RESULT_MAGIC = b"TMRRES2\0"
"""The first bytes of a result written by the native ``TmrWriteResult``: its raw bytes follow a header."""


RESULT_HEADER = 128
"""Bytes of that header: the magic, the dtype (int32, TensorFlow's enum), the rank and the parts (int32 each), 4 spare
bytes, up to 6 dimensions (int64); then each part's rows (int64, padded to 64 bytes), then the values."""


RESULT_RANKS = 6


def write_result(
    path: tf.Tensor, value: tf.Tensor, native: Any | None = None, *, part: int = 0, rows: Sequence[tf.Tensor] = ()
) -> tf.Operation:
    """In a graph, on the worker: ``value`` written into the file at ``path`` (a string placeholder fed with
    :meth:`Staging.returned`), for :func:`read_returned` on the client.

    With the native kernels (``native``, where every task has them) a tensor of numbers of rank 1 to 6 is written as
    its raw bytes after a small header (``TmrWriteResult``: one copy, into the file); otherwise serialized, a
    ``TensorProto`` (one copy into the proto, one into the file).  ``rows``: the row counts of every part of a
    result made in parts (this one part ``part``), all written into the one file in order, natively.
    """
    if rows:
        assert has(native, "tmr_write_result"), "a result in parts is written by the native kernel"
        with tf.name_scope("at"):
            offset = tf.add_n([tf.constant(0, tf.int64), *rows[:part]])
            total = tf.add_n(list(rows))
        written: tf.Operation = native.tmr_write_result(path, value, offset, total, part=part, parts=len(rows))
        return written
    if has(native, "tmr_write_result") and value.dtype != tf.string and value.shape.rank in range(1, RESULT_RANKS + 1):
        size = tf.shape(value, out_type=tf.int64)[0]
        written = native.tmr_write_result(path, value, tf.constant(0, tf.int64), size)
        return written
    return tf.io.write_file(path, tf.io.serialize_tensor(value))


def read_returned(path: str, dtype: np.dtype[Any], row: Sequence[int]) -> list[np.ndarray[Any, Any]]:
    """The array a worker wrote with :func:`write_result` (rows of shape ``row``), mapped copy-on-write from the file:
    its pages are the array's, no copy is made, and the array stays valid after the file is closed or unlinked.  One
    array per part of a result written in parts (views of one mapping, in order: ``_concat.concatenated`` joins them
    without a copy); none where nothing was written.

    Example:
        >>> from tfmapreduce._io.shm import Staging
        >>> with Staging(mechanism="file") as staging:
        ...     path = staging.returned()
        ...     _ = tf.io.write_file(path, tf.io.serialize_tensor(tf.constant([[1, 2], [3, 4]], tf.int32)))
        ...     [a.tolist() for a in read_returned(path, np.dtype(np.int32), (2,))]
        [[[1, 2], [3, 4]]]
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        data = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) if size else b""
    if not size:
        return []
    if size >= RESULT_HEADER and data[: len(RESULT_MAGIC)] == RESULT_MAGIC:
        return _raw(data, dtype, row)
    start, length = _content(memoryview(data))
    count = length // dtype.itemsize
    return [np.frombuffer(data, dtype, count, start).reshape(-1, *row) if count else np.zeros((0, *row), dtype)]


def _raw(data: Any, dtype: np.dtype[Any], row: Sequence[int]) -> list[np.ndarray[Any, Any]]:
    """The parts of a file written by ``TmrWriteResult``: its header checked against ``dtype`` and ``row``."""
    kind, rank, parts = np.frombuffer(data, np.int32, 3, len(RESULT_MAGIC)).tolist()
    shape = tuple(np.frombuffer(data, np.int64, rank, 24).tolist()) if 0 < rank <= RESULT_RANKS else ()
    if kind != tf.as_dtype(dtype).as_datatype_enum or not shape or tuple(shape[1:]) != tuple(row) or parts < 1:
        raise ValueError(
            f"a worker's result file holds {tf.as_dtype(kind).name} of shape {shape}, not {dtype} rows of {tuple(row)}"
        )
    start = RESULT_HEADER + -(-parts * 8 // 64) * 64
    rows = np.frombuffer(data, np.int64, parts, RESULT_HEADER) if len(data) >= start else np.zeros(0, np.int64)
    count = int(np.prod(shape, dtype=np.int64))
    if len(data) < start + count * dtype.itemsize or len(rows) != parts or int(rows.sum()) != shape[0]:
        raise ValueError(f"a worker's result file is cut short: {len(data)} bytes for {count} values of {dtype}")
    whole = np.frombuffer(data, dtype, count, start).reshape(shape) if count else np.zeros(shape, dtype)
    ends = np.cumsum(rows).tolist()
    return [whole[end - n : end] for n, end in zip(rows.tolist(), ends, strict=True)]


def _content(buffer: memoryview) -> tuple[int, int]:
    """Where a serialized ``TensorProto``'s ``tensor_content`` (field 4) starts, and its length; (0, 0) without one
    (an empty tensor)."""

    def varint(at: int) -> tuple[int, int]:
        value, shift = 0, 0
        while True:
            byte = buffer[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value, at

    at = 0
    while at < len(buffer):
        tag, at = varint(at)
        if tag & 7 == 0:
            _, at = varint(at)
        elif tag & 7 == 2:
            length, at = varint(at)
            if tag >> 3 == 4:
                return at, length
            at += length
        else:
            raise ValueError(f"a worker's result file has an unexpected field (tag {tag})")
    return 0, 0
