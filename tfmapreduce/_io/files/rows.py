"""Row formats: ``.npy`` and raw binary files, whose rows follow from each file's size (and header).

A piece is any row range of a file, read as byte ranges (no byte outside the range is read): by the native
``TmrReadRows`` where the kernels are everywhere (each batch the file's own pages, mapped, or read straight into its
tensor), else with ``tf.data.FixedLengthRecordDataset`` and ``decode_raw``.  uint32 and uint64, which
``decode_raw`` does not decode, are read as the signed integers of their width and bitcast back.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf

from ..._base.errors import InputError
from ..._native.loader import has, kernels
from .readers import BATCH_BYTES, Layout, Reader
from .text import byte_blocks

MAP = True
"""Whether batches of local files may be their mapped pages (``TmrReadRows``' ``map``); False: always read."""

ALIGN = 64
"""Bytes a mapped batch's start is a multiple of: TensorFlow's alignment of the tensors it allocates."""

WINDOW_BYTES = 64 << 20
"""Bytes per window when ``batch_rows`` is None: a batch of mapped rows made by plain graph ops (:meth:`Reader.windows`)."""

WINDOWS = 64
"""Windows of one piece at most; a larger piece is read through ``tf.data`` only, whose fixed cost is small beside it."""


_TWINS = {tf.uint32: tf.int32, tf.uint64: tf.int64}
"""Dtypes ``decode_raw`` does not decode, read as the signed integers of their width and bitcast back."""


def _read_as(dtype: np.dtype[Any]) -> tf.DType:
    """The dtype a file's rows of ``dtype`` are read as (``decode_raw``, ``TmrReadRows``): itself or its twin."""
    tf_dtype = tf.as_dtype(dtype)
    return _TWINS.get(tf_dtype, tf_dtype)


def _as_stored(values: tf.Tensor, dtype: np.dtype[Any]) -> tf.Tensor:
    """``values`` read as :func:`_read_as` says, as ``dtype`` again (the same bits)."""
    tf_dtype = tf.as_dtype(dtype)
    return values if values.dtype == tf_dtype else tf.bitcast(values, tf_dtype)


def _decodable(dtype: np.dtype[Any], what: str) -> tf.DType:
    try:
        tf_dtype = tf.as_dtype(dtype)
        tf.io.decode_raw(tf.constant(b""), _read_as(dtype))  # the dtypes decode_raw supports, and their twins
    except (TypeError, tf.errors.InvalidArgumentError) as e:
        raise InputError(
            f"{what} holds dtype {dtype}, which tfmapreduce cannot decode ({e}); store numbers, e.g. float32 or int64"
        ) from None
    return tf_dtype


def _aligned(start: int, stop: int, batch: int) -> int:
    """Where the first batch of rows ``start:stop`` ends: at the first multiple of ``batch`` rows of the file (every
    later batch starts at one; with the default ``batch`` a multiple of :data:`ALIGN` bytes, so it can be mapped)."""
    return min(stop, -(-start // batch) * batch)


def _fixed_rows(
    path: str,
    offset: int,
    size: int,
    row_bytes: int,
    start: int,
    stop: int,
    batch: int,
    dtype: np.dtype[Any],
    row_shape: tuple[int, ...],
) -> tf.data.Dataset:
    """Rows ``start:stop`` of a file of fixed-size rows at ``offset``, in batches: byte ranges, one copy into each record."""
    read_as = _read_as(dtype)
    little = dtype.byteorder != ">"
    cut = _aligned(start, stop, batch)
    at = offset + cut * row_bytes
    dataset = byte_blocks(path, size, offset + start * row_bytes, at, max(1, at - offset - start * row_bytes))
    dataset = dataset.concatenate(byte_blocks(path, size, at, offset + stop * row_bytes, batch * row_bytes))

    def decode(record: tf.Tensor) -> tf.Tensor:
        return tf.reshape(_as_stored(tf.io.decode_raw(record, read_as, little_endian=little), dtype), (-1, *row_shape))

    return dataset.map(decode)


def _native_rows(
    path: str, offset: int, size: int, start: int, stop: int, batch: int, dtype: np.dtype[Any], row_shape: tuple[int, ...]
) -> tf.data.Dataset:
    """Rows ``start:stop`` of a file of fixed-size rows at ``offset``, in batches read by ``TmrReadRows``: each the
    file's own pages, mapped, where it is local and the batch starts at a multiple of :data:`ALIGN` bytes (else read).

    Batches end where :func:`_aligned` says, as :func:`_fixed_rows`'s do.
    """
    read = _mapped_reader(path, offset, size, dtype, row_shape)
    cut = _aligned(start, stop, batch)
    firsts = tf.data.Dataset.range(start, cut, max(1, cut - start)).concatenate(tf.data.Dataset.range(cut, stop, batch))
    return firsts.map(lambda first: read(first, tf.minimum(tf.constant(batch, tf.int64) - first % batch, stop - first)))


def _native_windows(
    path: str, offset: int, size: int, start: int, stop: int, batch: int, dtype: np.dtype[Any], row_shape: tuple[int, ...]
) -> tuple[Callable[[], tf.Tensor], ...]:
    """The batches of :func:`_native_rows` as windows (:meth:`Reader.windows`); () for more than :data:`WINDOWS`."""
    cut = _aligned(start, stop, batch)
    firsts = ([start] if cut > start else []) + list(range(cut, stop, batch))
    if len(firsts) > WINDOWS:
        return ()
    read = _mapped_reader(path, offset, size, dtype, row_shape)
    return tuple(functools.partial(read, first, min(stop, (first // batch + 1) * batch) - first) for first in firsts)


def _mapped_reader(
    path: str, offset: int, size: int, dtype: np.dtype[Any], row_shape: tuple[int, ...]
) -> Callable[[Any, Any], tf.Tensor]:
    """``read(first, rows)``: rows ``first:first + rows`` of the file by ``TmrReadRows`` (mapped where it can be)."""
    ops = kernels()
    assert ops is not None  # native only where every task and the client have the kernels
    width = int(np.prod(row_shape, dtype=np.int64))
    row_bytes = dtype.itemsize * width
    name = tf.constant(path)

    def read(first: Any, rows: Any) -> tf.Tensor:
        values = ops.tmr_read_rows(name, size, offset + first * row_bytes, rows * width, T=_read_as(dtype), map=MAP)
        return tf.reshape(_as_stored(values, dtype), (rows, *row_shape))

    return read


@attrs.frozen
class Npy(Reader):
    """``.npy`` files: the header parsed once on the client, the rows read as byte ranges on the workers."""

    name: ClassVar[str] = "read_npy"
    unit: ClassVar[str] = "rows"
    native: bool = attrs.field(default=False, kw_only=True)
    """Read with the native ``TmrReadRows`` (one copy, from the page cache into the batch): set by the run driver
    where the client and every task have the kernels (:meth:`with_kernels`)."""

    def with_kernels(self) -> Reader:
        return attrs.evolve(self, native=True) if has(kernels(), "tmr_read_rows") else self

    def maps(self, layout: Layout) -> bool:
        return self.native and MAP and layout.dtype.byteorder != ">"

    def describe(self, path: str, size: int) -> Layout:
        try:
            with open(path, "rb") as f:
                version = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape, fortran, dtype = read(f)
                offset = f.tell()
        except (ValueError, OSError, SyntaxError) as e:
            raise InputError(f"{path} is not a readable .npy file ({e}); write it with np.save()") from None
        if len(shape) == 0:
            raise InputError(
                f"{path} holds a 0-d scalar of shape (); the rows to partition are axis 0, so save at least a 1-d array"
            )
        if fortran and len(shape) > 1:
            raise InputError(
                f"{path} is stored in Fortran order, so its rows are not contiguous; save np.ascontiguousarray(a) instead"
            )
        _decodable(dtype, path)
        row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
        needed = offset + shape[0] * row_bytes
        if size < needed:
            raise InputError(
                f"{path} is truncated: its header promises {shape[0]} rows of {row_bytes} bytes ({needed} bytes in all), "
                f"but the file has {size} bytes; write it again"
            )
        return Layout(int(shape[0]), offset, dtype, tuple(int(d) for d in shape[1:]))

    def batch_rows(self, layout: Layout) -> int:
        """About :data:`BATCH_BYTES` of rows, a multiple of :data:`ALIGN` bytes where rows that many fit."""
        row_bytes = max(1, layout.dtype.itemsize * int(np.prod(layout.row_shape, dtype=np.int64)))
        rows = max(1, BATCH_BYTES // row_bytes)
        unit = ALIGN // math.gcd(row_bytes, ALIGN)  # rows whose bytes are a multiple of ALIGN
        return rows // unit * unit if rows >= unit else rows

    def rows_dataset(self, path: str, size: int, layout: Layout, start: int, stop: int, batch: int) -> tf.data.Dataset:
        row_bytes = layout.dtype.itemsize * int(np.prod(layout.row_shape, dtype=np.int64))
        if not self.native or layout.dtype.byteorder == ">":  # big-endian data is swapped by decode_raw
            return _fixed_rows(path, layout.offset, size, row_bytes, start, stop, batch, layout.dtype, layout.row_shape)
        return _native_rows(path, layout.offset, size, start, stop, batch, layout.dtype, layout.row_shape)

    def windows(
        self, path: str, size: int, layout: Layout, start: int, stop: int, batch: int | None
    ) -> tuple[Callable[[], tf.Tensor], ...]:
        if not self.native or layout.dtype.byteorder == ">":
            return ()
        rows = batch or self.batch_rows(layout) * max(1, WINDOW_BYTES // BATCH_BYTES)
        return _native_windows(path, layout.offset, size, start, stop, rows, layout.dtype, layout.row_shape)


@attrs.frozen
class Raw(Npy):
    """Headerless binary files of fixed-size rows (``dtype`` and the row ``shape`` given by the caller)."""

    name: ClassVar[str] = "read_raw"
    dtype: str
    shape: tuple[int, ...]

    def describe(self, path: str, size: int) -> Layout:
        dtype = np.dtype(self.dtype)
        row_bytes = dtype.itemsize * int(np.prod(self.shape, dtype=np.int64))
        rows, rest = divmod(size, row_bytes)
        if rest:
            raise InputError(
                f"{path} has {size} bytes, not a whole number of rows of {row_bytes} bytes ({dtype} × {self.shape}); "
                "the file is truncated, or dtype=/shape= do not describe it"
            )
        return Layout(rows, 0, dtype, self.shape)
