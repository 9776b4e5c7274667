"""File formats: how each kind of file is described on the client and read, batch by batch, on a worker.

A reader never reads data on the client.  :meth:`Reader.describe` may stat a
file and read its header (a ``.npy`` header, a CSV's first line); everything
else happens in the graph, on the task that owns the piece:

- *row* formats (``.npy``, raw binary) know each file's rows from its size, so
  a piece is any row range of a file, read as byte ranges (no byte outside the range is read):
  by the native ``TmrReadRows`` where the kernels are everywhere (each batch the file's own
  pages, mapped, or read straight into its tensor), else with ``tf.data.FixedLengthRecordDataset``
  and ``decode_raw``;
- *byte* formats (text, CSV, TFRecord) learn their rows only by reading, so a
  piece is a whole file and the plan's unit is the file's bytes.
"""

from __future__ import annotations

import abc
import functools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf

from ..._base.errors import InputError
from ..._native.loader import has, kernels
from . import text as _text
from .text import byte_blocks, split_lines, text_blocks, text_lines, whole_texts

BATCH_BYTES = 4 << 20
"""Bytes per batch when ``batch_rows`` is None: a few MB, so a task holds a few batches, never its shard."""

MAP = True
"""Whether batches of local files may be their mapped pages (``TmrReadRows``' ``map``); False: always read."""

ALIGN = 64
"""Bytes a mapped batch's start is a multiple of: TensorFlow's alignment of the tensors it allocates."""

WINDOW_BYTES = 64 << 20
"""Bytes per window when ``batch_rows`` is None: a batch of mapped rows made by plain graph ops (:meth:`Reader.windows`)."""

WINDOWS = 64
"""Windows of one piece at most; a larger piece is read through ``tf.data`` only, whose fixed cost is small beside it."""


@attrs.frozen
class Layout:
    """What one file holds: its rows (None for byte formats), where its data starts, its element type and row shape."""

    rows: int | None
    offset: int
    dtype: np.dtype[Any]
    row_shape: tuple[int, ...]
    fields: int = 0
    """CSV: the fields of each line."""
    columns: tuple[int, ...] = ()
    """CSV: the fields read, in the order asked."""
    kinds: tuple[str, ...] = ()
    """CSV: the dtype of each field (numpy's ``dtype.str``), as ``dtypes=`` gives it for this file's header."""


def _decodable(dtype: np.dtype[Any], what: str) -> tf.DType:
    try:
        tf_dtype = tf.as_dtype(dtype)
        tf.io.decode_raw(tf.constant(b""), tf_dtype)  # the dtypes decode_raw supports
    except (TypeError, tf.errors.InvalidArgumentError) as e:
        raise InputError(
            f"{what} holds dtype {dtype}, which tfmapreduce cannot decode ({e}); store numbers, e.g. float32 or int64"
        ) from None
    return tf_dtype


class Reader(abc.ABC):
    """One file format: the description of a file on the client and its batches on a worker."""

    name: ClassVar[str]
    """The function that made the reader (``read_npy``), for messages."""
    unit: ClassVar[str]
    """``"rows"`` (a piece may be any row range of a file) or ``"bytes"`` (a piece is a whole file)."""
    counts: ClassVar[str] = "rows"
    """What a batch is counted in as a run goes (``Batches.counts``)."""

    @abc.abstractmethod
    def describe(self, path: str, size: int) -> Layout:
        """On the client: the layout of the file at ``path`` (``size`` bytes).

        Raises:
            InputError: the file is not of this format (the message names it).
        """

    @abc.abstractmethod
    def batch_rows(self, layout: Layout) -> int:
        """Rows per batch for about :data:`BATCH_BYTES` bytes."""

    def maps(self, layout: Layout) -> bool:
        """Whether batches of a local file of ``layout`` may be its mapped pages (:func:`~tfmapreduce._io.mapped.note_mapped`)."""
        return False

    def with_kernels(self) -> Reader:
        """This reader as it reads where the client and every task have the native kernels (``_native``): itself, or
        one that uses them."""
        return self

    def key(self) -> tuple[Any, ...]:
        """What the reading graph depends on (the reader's settings)."""
        return (type(self).__name__, *attrs.astuple(self, recurse=False))  # type: ignore[arg-type]  # subclasses are attrs classes

    def rows_dataset(self, path: str, size: int, layout: Layout, start: int, stop: int, batch: int) -> tf.data.Dataset:
        """Row formats: the rows ``start:stop`` of one file, in batches of ``batch`` rows."""
        raise NotImplementedError

    def windows(
        self, path: str, size: int, layout: Layout, start: int, stop: int, batch: int | None
    ) -> tuple[Callable[[], tf.Tensor], ...]:
        """Row formats: the rows ``start:stop`` of one file as windows of ``batch`` rows (None: about
        :data:`WINDOW_BYTES`), each made by calling it in the graph being built; () where the reader has none.

        A window is a plain graph op, not a ``tf.data`` element: a job that folds batches one after another takes
        them where they are given, and so skips a pipeline whose functions cost milliseconds each run.
        """
        return ()

    def records(self, path: Any) -> tf.data.Dataset:
        """Byte formats: one file's records (``path`` is a string or a scalar string tensor), unbatched."""
        raise NotImplementedError

    def record_batches(self, path: str, size: int, batch: int) -> tf.data.Dataset:
        """Byte formats: the records of the file at ``path`` (``size`` bytes when the run started), in batches of ``batch``."""
        return self.records(path).batch(batch)

    def small(self, size: int) -> bool:
        """Byte formats: whether a file of ``size`` bytes is read by :meth:`small_batches`, together with its small neighbours."""
        return False

    def small_batches(self, paths: Sequence[str], sizes: Sequence[int], batch: int) -> tf.data.Dataset:
        """Byte formats: the records of several small files (``sizes`` bytes when the run started), one pipeline for all, in batches of ``batch``."""
        raise NotImplementedError

    def decode(self, records: tf.Tensor, layout: Layout, batch: int = 0) -> tf.Tensor:
        """Byte formats: a batch of records (of at most ``batch``, all but the last exactly) as a tensor of rows."""
        return records

    def empty(self, layout: Layout) -> tuple[tf.Tensor, ...]:
        """The batch of no rows, as :meth:`decode` (or :meth:`rows_dataset`) gives a batch: one tensor, or a table's columns."""
        return (tf.zeros((0, *layout.row_shape), tf.as_dtype(layout.dtype)),)


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
    tf_dtype = tf.as_dtype(dtype)
    little = dtype.byteorder != ">"
    cut = _aligned(start, stop, batch)
    at = offset + cut * row_bytes
    dataset = byte_blocks(path, size, offset + start * row_bytes, at, max(1, at - offset - start * row_bytes))
    dataset = dataset.concatenate(byte_blocks(path, size, at, offset + stop * row_bytes, batch * row_bytes))
    return dataset.map(lambda record: tf.reshape(tf.io.decode_raw(record, tf_dtype, little_endian=little), (-1, *row_shape)))


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
    tf_dtype = tf.as_dtype(dtype)
    name = tf.constant(path)

    def read(first: Any, rows: Any) -> tf.Tensor:
        values = ops.tmr_read_rows(name, size, offset + first * row_bytes, rows * width, T=tf_dtype, map=MAP)
        return tf.reshape(values, (rows, *row_shape))

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


@attrs.frozen
class Text(Reader):
    """Text files: one row (a string) per line, without its line ending."""

    name: ClassVar[str] = "read_text"
    unit: ClassVar[str] = "bytes"

    def describe(self, path: str, size: int) -> Layout:
        return Layout(None, 0, np.dtype(object), ())

    def batch_rows(self, layout: Layout) -> int:
        return 32768

    def records(self, path: Any) -> tf.data.Dataset:
        return tf.data.TextLineDataset(path, buffer_size=1 << 20)

    def record_batches(self, path: str, size: int, batch: int) -> tf.data.Dataset:
        return text_lines(path, size).rebatch(batch)

    def small(self, size: int) -> bool:
        return size <= _text.TEXT_BLOCK  # read whole at once: the block scan is for larger files

    def small_batches(self, paths: Sequence[str], sizes: Sequence[int], batch: int) -> tf.data.Dataset:
        return whole_texts(paths, sizes).map(split_lines).rebatch(batch)


@attrs.frozen
class TextBlocks(Text):
    """Text files read for a job that splits on whitespace anyway (``word_count``): each batch is one block of whole lines.

    A batch is one or two strings holding about :data:`~tfmapreduce._io.files.text.TEXT_BLOCK` bytes of whole lines joined by
    ``\\n``; ``batch`` is not used.  Splitting it on whitespace gives the words of those lines without
    making a string per line.
    """

    counts: ClassVar[str] = "bytes"
    cr: str = " "
    """What each ``\\r`` becomes: a space splits words there, as a lone ``\\r`` does in shipped lines
    (``word_count``); ``""`` drops it, as the lines of :class:`Text` do (a user's word count, see ``_fuse``)."""

    def record_batches(self, path: str, size: int, batch: int) -> tf.data.Dataset:
        return text_blocks(path, size, cr=self.cr)

    def small_batches(self, paths: Sequence[str], sizes: Sequence[int], batch: int) -> tf.data.Dataset:
        return whole_texts(paths, sizes, cr=self.cr)


@attrs.frozen
class TfRecord(Reader):
    """TFRecord files of ``tf.train.Example`` records, parsed with fixed-length features into rows."""

    name: ClassVar[str] = "read_tfrecord"
    unit: ClassVar[str] = "bytes"
    features: tuple[tuple[str, tuple[int, ...], str], ...]

    def describe(self, path: str, size: int) -> Layout:
        dtypes = [np.dtype(tf.as_dtype(d).as_numpy_dtype) for _, _, d in self.features]
        if len(self.features) == 1:
            return Layout(None, 0, dtypes[0], self.features[0][1])
        width = sum(int(np.prod(shape, dtype=np.int64)) for _, shape, _ in self.features)
        return Layout(None, 0, np.result_type(*dtypes), (width,))

    def batch_rows(self, layout: Layout) -> int:
        return 4096

    def records(self, path: Any) -> tf.data.Dataset:
        return tf.data.TFRecordDataset(path, buffer_size=1 << 20)

    def decode(self, records: tf.Tensor, layout: Layout, batch: int = 0) -> tf.Tensor:
        spec = {name: tf.io.FixedLenFeature(shape, tf.as_dtype(dtype)) for name, shape, dtype in self.features}
        parsed = tf.io.parse_example(records, spec)
        if len(self.features) == 1:
            return parsed[self.features[0][0]]
        out = tf.as_dtype(layout.dtype)
        return tf.concat(
            [
                tf.reshape(tf.cast(parsed[name], out), (-1, int(np.prod(shape, dtype=np.int64))))
                for name, shape, _ in self.features
            ],
            1,
        )


def tfrecord_features(features: Mapping[str, Any]) -> tuple[tuple[str, tuple[int, ...], str], ...]:
    """``{name: tf.io.FixedLenFeature(shape, dtype)}`` as a hashable tuple.

    Raises:
        TypeError: a feature is not a ``FixedLenFeature`` or not numeric.
    """
    if not isinstance(features, Mapping) or not features:
        raise TypeError(f"features must be a non-empty dict {{name: tf.io.FixedLenFeature(shape, dtype)}}, got {features!r}")
    result = []
    for name, feature in features.items():
        if not isinstance(feature, tf.io.FixedLenFeature):
            raise TypeError(f"features[{name!r}] must be a tf.io.FixedLenFeature(shape, dtype), got {type(feature).__name__}")
        dtype = tf.as_dtype(feature.dtype)
        if dtype == tf.string and len(features) > 1:
            raise TypeError(f"features[{name!r}] is a string feature; read string features one at a time")
        result.append((str(name), tuple(int(d) for d in feature.shape), dtype.name))
    return tuple(result)


def size_of(path: str) -> tuple[int, int]:
    """(bytes, mtime in ns) of a file, from one ``stat``."""
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns
