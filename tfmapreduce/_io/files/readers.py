"""File formats: how each kind of file is described on the client and read, batch by batch, on a worker.

A reader never reads data on the client.  :meth:`Reader.describe` may stat a
file and read its header (a ``.npy`` header, a CSV's first line); everything
else happens in the graph, on the task that owns the piece:

- *row* formats (``.npy``, raw binary) know each file's rows from its size, so
  a piece is any row range of a file (see ``rows``);
- *byte* formats (text, CSV, TFRecord) learn their rows only by reading, so a
  piece is a whole file and the plan's unit is the file's bytes.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf

from . import text as _text
from .text import split_lines, text_blocks, text_lines, whole_texts

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
    kinds: tuple[str, ...] = ()
    """CSV: the dtype of each field (numpy's ``dtype.str``), as ``dtypes=`` gives it for this file's header."""


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
    """Text files read for a word count (``_kinds.fuse``): each batch is one block of whole lines, each ``\\r`` a space.

    A batch is one or two strings holding about :data:`~tfmapreduce._io.files.text.TEXT_BLOCK` bytes of whole lines joined by
    ``\\n``; ``batch`` is not used.  Splitting it on whitespace gives the words of those lines without
    making a string per line; a ``\\r`` separates words there as in an array of lines (the lines of :class:`Text`
    drop it).
    """

    counts: ClassVar[str] = "bytes"

    def record_batches(self, path: str, size: int, batch: int) -> tf.data.Dataset:
        return text_blocks(path, size, cr=" ")

    def small_batches(self, paths: Sequence[str], sizes: Sequence[int], batch: int) -> tf.data.Dataset:
        return whole_texts(paths, sizes, cr=" ")


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
