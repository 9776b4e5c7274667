"""CSV files of numbers: the reader, and the diagnosis that finds a bad line after a failed run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf

from ._errors import InputError
from ._readers import Layout, Text
from ._text import split_lines, text_lines, whole_texts


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
