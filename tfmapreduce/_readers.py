"""File formats: how each kind of file is described on the client and read, batch by batch, on a worker.

A reader never reads data on the client.  :meth:`Reader.describe` may stat a
file and read its header (a ``.npy`` header, a CSV's first line); everything
else happens in the graph, on the task that owns the piece:

- *row* formats (``.npy``, raw binary) know each file's rows from its size, so
  a piece is any row range of a file, read as byte ranges with
  ``tf.data.FixedLengthRecordDataset`` (no byte outside the range is read);
- *byte* formats (text, CSV, TFRecord) learn their rows only by reading, so a
  piece is a whole file and the plan's unit is the file's bytes.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf

from ._errors import InputError

BATCH_BYTES = 4 << 20
"""Bytes per batch when ``batch_rows`` is None: a few MB, so a task holds a few batches, never its shard."""


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

    @abc.abstractmethod
    def describe(self, path: str, size: int) -> Layout:
        """On the client: the layout of the file at ``path`` (``size`` bytes).

        Raises:
            InputError: the file is not of this format (the message names it).
        """

    @abc.abstractmethod
    def batch_rows(self, layout: Layout) -> int:
        """Rows per batch for about :data:`BATCH_BYTES` bytes."""

    def key(self) -> tuple[Any, ...]:
        """What the reading graph depends on (the reader's settings)."""
        return (type(self).__name__, *attrs.astuple(self, recurse=False))  # type: ignore[arg-type]  # subclasses are attrs classes

    def rows_dataset(self, path: str, size: int, layout: Layout, start: int, stop: int, batch: int) -> tf.data.Dataset:
        """Row formats: the rows ``start:stop`` of one file, in batches of ``batch`` rows."""
        raise NotImplementedError

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

    def decode(self, records: tf.Tensor, layout: Layout) -> tf.Tensor:
        """Byte formats: a batch of records as a tensor of rows."""
        return records


def byte_blocks(path: str, size: int, first: int, stop: int, block: int) -> tf.data.Dataset:
    """The bytes ``first:stop`` of a file of ``size`` bytes as string records of ``block`` bytes (the last one shorter).

    No byte outside the range is read: ``FixedLengthRecordDataset`` skips a header and a footer.
    """
    full, rest = divmod(stop - first, block)
    parts = []
    if full:
        parts.append(tf.data.FixedLengthRecordDataset(path, block, header_bytes=first, footer_bytes=size - first - full * block))
    if rest:
        parts.append(tf.data.FixedLengthRecordDataset(path, rest, header_bytes=first + full * block, footer_bytes=size - stop))
    if not parts:
        return tf.data.Dataset.from_tensor_slices(tf.zeros([0], tf.string))
    return parts[0] if len(parts) == 1 else parts[0].concatenate(parts[1])


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
    dataset = byte_blocks(path, size, offset + start * row_bytes, offset + stop * row_bytes, batch * row_bytes)
    return dataset.map(lambda record: tf.reshape(tf.io.decode_raw(record, tf_dtype, little_endian=little), (-1, *row_shape)))


TEXT_BLOCK = 8 << 20
"""Bytes of a text file read at once: the file is read in blocks, each split into its whole lines."""


def text_lines(path: str, size: int) -> tf.data.Dataset:
    """The lines of a text file of ``size`` bytes, in batches of about one block's lines, as ``TextLineDataset`` yields them.

    Lines end at ``\\n``; every ``\\r`` is dropped (as ``TextLineDataset`` does); a last line
    without ``\\n`` counts.  No dataset element per line: about 2x faster than ``TextLineDataset`` here.
    """
    return text_blocks(path, size).map(split_lines)


def split_lines(text: tf.Tensor) -> tf.Tensor:
    """The lines of a piece of :func:`text_blocks` (strings of whole lines joined by ``\\n``), as one 1-D string tensor."""
    return tf.strings.split(text, "\n").flat_values


def text_blocks(path: str, size: int) -> tf.data.Dataset:
    """The text of a file of ``size`` bytes as 1-D string tensors of one or two strings of whole lines (joined by ``\\n``).

    The file is read :data:`TEXT_BLOCK` bytes at a time.  The line that straddles two blocks
    is joined from the part carried over and the block's text up to its first newline; the rest
    up to the block's last newline is passed on as it is (joining large strings is slow).
    """
    end = tf.data.Dataset.from_tensors((tf.constant(b""), True))  # the end: what is carried is the last line
    blocks = byte_blocks(path, size, 0, size, TEXT_BLOCK).map(lambda block: (block, False)).concatenate(end)

    def whole_lines(carried: tf.Tensor, item: tuple[tf.Tensor, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        block, end = item
        has_cr = tf.reduce_any(tf.equal(tf.io.decode_raw(block, tf.uint8), 13))
        block = tf.cond(has_cr, lambda: tf.strings.regex_replace(block, "\r", ""), lambda: block)
        first, last = _first_and_last_newline(block)

        def cut() -> tuple[tf.Tensor, tf.Tensor]:
            straddling = carried + tf.strings.substr(block, 0, first)
            text = tf.stack([straddling, tf.strings.substr(block, first + 1, last - first - 1)])
            return tf.strings.substr(block, last + 1, tf.strings.length(block) - last - 1), text[
                : 1 + tf.cast(last > first, tf.int32)
            ]

        def carry_all() -> tuple[tf.Tensor, tf.Tensor]:
            return carried + block, tf.zeros([0], tf.string)

        def finish() -> tuple[tf.Tensor, tf.Tensor]:
            return tf.constant(b""), tf.reshape(carried, [1])[: tf.cast(tf.strings.length(carried) > 0, tf.int32)]

        result: tuple[tf.Tensor, tf.Tensor] = tf.cond(end, finish, lambda: tf.cond(first >= 0, cut, carry_all))
        return result

    def some(text: tf.Tensor) -> tf.Tensor:
        return tf.size(text) > 0

    return blocks.scan(tf.constant(b""), whole_lines).filter(some)


NEWLINE_WINDOW = 1 << 16
"""Bytes at each end of a block searched first for its first and last newline (the whole block only if they hold none)."""


def _first_and_last_newline(block: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The byte positions of the first and the last ``\\n`` of ``block`` (int32), or (-1, -1) when it has none.

    Lines are short: both are found in :data:`NEWLINE_WINDOW` bytes at the block's ends, without
    listing every newline of an 8 MiB block.
    """
    n = tf.strings.length(block)
    w = tf.minimum(n, NEWLINE_WINDOW)
    head = tf.where(tf.equal(tf.io.decode_raw(tf.strings.substr(block, 0, w), tf.uint8), 10))[:, 0]
    tail = tf.where(tf.equal(tf.io.decode_raw(tf.strings.substr(block, n - w, w), tf.uint8), 10))[:, 0]

    def windows() -> tuple[tf.Tensor, tf.Tensor]:
        return tf.cast(head[0], tf.int32), n - w + tf.cast(tail[-1], tf.int32)

    def whole() -> tuple[tf.Tensor, tf.Tensor]:
        every = tf.cast(tf.where(tf.equal(tf.io.decode_raw(block, tf.uint8), 10))[:, 0], tf.int32)
        ends: tuple[tf.Tensor, tf.Tensor] = tf.cond(
            tf.size(every) > 0, lambda: (every[0], every[-1]), lambda: (tf.constant(-1), tf.constant(-1))
        )
        return ends

    result: tuple[tf.Tensor, tf.Tensor] = tf.cond(tf.logical_and(tf.size(head) > 0, tf.size(tail) > 0), windows, whole)
    return result


RESIZED = "no longer has the size it had when the run started"
"""In the error of a small text file that changed during the run, next to its path."""


def whole_texts(paths: Sequence[str], sizes: Sequence[int]) -> tf.data.Dataset:
    """The text of small files as :func:`text_blocks` yields it, one pipeline for them all: each file as one string.

    Each file is read whole (``tf.io.read_file``), every ``\\r`` dropped and then one final ``\\n``;
    a file with no byte left once its ``\\r`` are dropped yields nothing, and one of ``sizes`` 0 is not read.
    A file whose size is no longer its ``sizes`` fails the run with an error that names it and says :data:`RESIZED`.

    Example:
        files holding ``a\\r\\nb\\n``, nothing, ``\\n`` and ``c`` yield ``["a\\nb"]``, ``[""]`` and ``["c"]``.
    """

    def whole(path: tf.Tensor, size: tf.Tensor) -> tf.Tensor:
        data = tf.io.read_file(path)
        same = tf.debugging.Assert(tf.equal(tf.strings.length(data, unit="BYTE"), size), [path, RESIZED])
        with tf.control_dependencies([same]):
            text = tf.strings.regex_replace(data, "\r", "")
        n = tf.strings.length(text)
        newline = tf.cast(tf.equal(tf.strings.substr(text, tf.maximum(n - 1, 0), 1), "\n"), tf.int32)
        return tf.reshape(tf.strings.substr(text, 0, n - newline), [1])[: tf.cast(n > 0, tf.int32)]

    read = [(p, size) for p, size in zip(paths, sizes, strict=True) if size]
    files = (tf.constant([p for p, _ in read], tf.string), tf.constant([size for _, size in read], tf.int32))
    return tf.data.Dataset.from_tensor_slices(files).map(whole).filter(lambda text: tf.size(text) > 0)


@attrs.frozen
class Npy(Reader):
    """``.npy`` files: the header parsed once on the client, the rows read as byte ranges on the workers."""

    name: ClassVar[str] = "read_npy"
    unit: ClassVar[str] = "rows"

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
        return max(1, BATCH_BYTES // max(1, layout.dtype.itemsize * int(np.prod(layout.row_shape, dtype=np.int64))))

    def rows_dataset(self, path: str, size: int, layout: Layout, start: int, stop: int, batch: int) -> tf.data.Dataset:
        row_bytes = layout.dtype.itemsize * int(np.prod(layout.row_shape, dtype=np.int64))
        return _fixed_rows(path, layout.offset, size, row_bytes, start, stop, batch, layout.dtype, layout.row_shape)


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
        return size <= TEXT_BLOCK  # read whole at once: the block scan is for larger files

    def small_batches(self, paths: Sequence[str], sizes: Sequence[int], batch: int) -> tf.data.Dataset:
        return whole_texts(paths, sizes).map(split_lines).rebatch(batch)


@attrs.frozen
class TextBlocks(Text):
    """Text files read for a job that splits on whitespace anyway (``word_count``): each batch is one block of whole lines.

    A batch is one or two strings holding about :data:`TEXT_BLOCK` bytes of whole lines joined by
    ``\\n``; ``batch`` is not used.  Splitting it on whitespace gives the words of those lines without
    making a string per line.
    """

    def record_batches(self, path: str, size: int, batch: int) -> tf.data.Dataset:
        return text_blocks(path, size)

    def small_batches(self, paths: Sequence[str], sizes: Sequence[int], batch: int) -> tf.data.Dataset:
        return whole_texts(paths, sizes)


@attrs.frozen
class Csv(Text):
    """CSV files of numbers: the columns (names or indices) parsed into one (rows, columns) matrix."""

    name: ClassVar[str] = "read_csv"
    columns: tuple[str | int, ...] | None
    dtypes: tuple[str, ...] | str
    header: bool
    delimiter: str

    def describe(self, path: str, size: int) -> Layout:
        try:
            with open(path, encoding="utf-8", newline="") as f:
                first = f.readline().rstrip("\r\n")  # the header (or first line): the column names or count, nothing else
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"{path} is not a readable CSV file ({e})") from None
        if not first:
            return Layout(None, 0, np.dtype(object), ())  # an empty file: no column to learn, nothing to read
        return self.layout([n.strip() for n in first.split(self.delimiter)], path)

    def layout(self, names: Sequence[str], path: str) -> Layout:
        """The layout of a file whose first line splits into ``names``."""
        selected = self.selected(names, path)
        dtypes = self.column_dtypes(len(names), path)
        dtype = np.result_type(*(dtypes[i] for i in selected))
        return Layout(None, 0, dtype, (len(selected),), len(names), tuple(selected))

    def selected(self, names: Sequence[str], path: str) -> list[int]:
        """The file's column indices to read, in the order asked."""
        if self.columns is None:
            return list(range(len(names)))
        result = []
        for column in self.columns:
            if isinstance(column, int):
                if not 0 <= column < len(names):
                    raise InputError(f"{path} has {len(names)} columns; column index {column} is out of range")
                result.append(column)
            elif not self.header:
                raise InputError(f"columns={list(self.columns)} names a column, but header=False; pass column indices")
            elif column not in names:
                raise InputError(f"{path} has no column {column!r}; its header names {names}")
            else:
                result.append(names.index(column))
        return result

    def column_dtypes(self, count: int, path: str) -> list[np.dtype[Any]]:
        """The dtype of each of the file's ``count`` columns."""
        if isinstance(self.dtypes, str):
            return [np.dtype(self.dtypes)] * count
        if len(self.dtypes) != count:
            raise InputError(f"{path} has {count} columns but dtypes= gives {len(self.dtypes)}; give one dtype per column")
        return [np.dtype(d) for d in self.dtypes]

    def records(self, path: Any) -> tf.data.Dataset:
        lines = tf.data.TextLineDataset(path, buffer_size=1 << 20)
        return lines.skip(1) if self.header else lines

    def record_batches(self, path: str, size: int, batch: int) -> tf.data.Dataset:
        blocks = text_lines(path, size)
        if self.header:  # the first line of the first block is the header
            blocks = blocks.enumerate().map(lambda i, lines: lines[tf.cast(tf.equal(i, 0), tf.int32) :])
        return blocks.rebatch(batch)

    def small_batches(self, paths: Sequence[str], sizes: Sequence[int], batch: int) -> tf.data.Dataset:
        files = whole_texts(paths, sizes).map(split_lines)  # one element per file with text
        return (files.map(lambda lines: lines[1:]) if self.header else files).rebatch(batch)

    def decode(self, records: tf.Tensor, layout: Layout) -> tf.Tensor:
        dtypes = self.column_dtypes(layout.fields, "")
        # Every field is decoded (and required), so a line with a field too many or too few is an error, not skipped.
        fields = tf.io.decode_csv(
            records, record_defaults=[tf.constant([], tf.as_dtype(d)) for d in dtypes], field_delim=self.delimiter
        )
        return tf.stack([tf.cast(fields[i], tf.as_dtype(layout.dtype)) for i in layout.columns], axis=1)


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

    def decode(self, records: tf.Tensor, layout: Layout) -> tf.Tensor:
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
