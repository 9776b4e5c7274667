"""CSV files of numbers: the reader (the diagnosis of a bad line is ``csv_diagnosis``)."""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf

from ..._base.errors import InputError
from ..._native.loader import has, kernels
from .csv_records import record_batches, records
from .readers import Layout, Text
from .text import TEXT_BLOCK, split_lines, text_lines, whole_texts

NATIVE_DTYPES = (tf.float32, tf.float64, tf.int32, tf.int64)
"""The column dtypes the native ``TmrDecodeCsv`` parses (other columns read: ``tf.io.decode_csv``)."""

BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte order mark some editors write at the start of a file: not part of its first line."""

BAD_LINE = re.compile(r'tfmapreduce: CSV line (\d+): "((?:[^"\\]|\\.)*)"')
"""The error of ``TmrReadCsv`` at a bad line: its number in the file and its bytes (C-escaped)."""

DECODE = "DecodeCSV_batch"
"""The name of the op that decodes a batch of lines, before the batch size (in the error of a failed run)."""

_LINES = 4096
"""Lines of a file read line by line (``TextLineDataset``) looked at together for quoted line breaks."""


def without_bom(lines: tf.Tensor) -> tf.Tensor:
    """``lines`` (strings) each without a leading UTF-8 byte order mark.

    Example:
        >>> without_bom(tf.constant([b"\\xef\\xbb\\xbfa,b", b"c"])).numpy().tolist()
        [b'a,b', b'c']
    """
    start = tf.where(tf.equal(tf.strings.substr(lines, 0, 3), BOM), 3, 0)
    return tf.strings.substr(lines, start, tf.fill(tf.shape(start), -1))


QUOTED_BREAK = '(?s)([^"]*"[^"]*")*[^"]*"[^"]*\n.*'
"""A record with a line break inside a quoted field: one after an odd number of quotes (a doubled quote keeps the count even)."""


@attrs.frozen
class Csv(Text):
    """CSV files of numbers: the columns (names or indices) parsed into one (rows, columns) matrix."""

    name: ClassVar[str] = "read_csv"
    columns: tuple[str | int, ...] | None
    dtypes: tuple[str, ...] | tuple[tuple[str, str], ...] | str
    """One dtype for every field, one per field, or ``(name, dtype)`` pairs by header name (the rest as their first
    data line reads: see :func:`_inferred`)."""
    header: bool
    delimiter: str
    native: bool = attrs.field(default=False, kw_only=True)
    """Parse lines with the native ``TmrDecodeCsv`` (numeric columns read): set by the run driver where the client
    and every task have the kernels (:meth:`with_kernels`)."""

    def with_kernels(self) -> Csv:
        ops = kernels()
        return attrs.evolve(self, native=True) if has(ops, "tmr_decode_csv") and has(ops, "tmr_read_csv") else self

    def describe(self, path: str, size: int) -> Layout:
        try:
            with open(path, encoding="utf-8-sig", newline="") as f:  # -sig: a BOM is not part of the first name
                first = f.readline().rstrip("\r\n")  # the header (or first line): the column names or count, nothing else
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"{path} is not a readable CSV file ({e})") from None
        if not first:
            return Layout(None, 0, np.dtype(object), ())  # an empty file: no column to learn, nothing to read
        return self.layout([n.strip() for n in first.split(self.delimiter)], path)

    def layout(self, names: Sequence[str], path: str) -> Layout:
        """The layout of a file whose first line splits into ``names``."""
        selected = self.selected(names, path)
        dtypes = self.column_dtypes(len(names), path, names)
        text = [names[i] if self.header else i for i in selected if dtypes[i].kind not in "iuf"]
        if text:
            raise InputError(
                f"read_csv: column(s) {text} are strings (dtypes=), which a matrix of numbers cannot hold; leave them out "
                "with columns=, or name a string column as the keys of a by-key recipe, e.g. "
                f"tmr.mean_by_key(tmr.read_csv(paths), keys={text[0]!r}, values=...)"
            )
        dtype = np.result_type(*(dtypes[i] for i in selected))
        return Layout(None, 0, dtype, (len(selected),), len(names), tuple(selected), tuple(d.str for d in dtypes))

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

    def column_dtypes(self, count: int, path: str, names: Sequence[str] | None = None) -> list[np.dtype[Any]]:
        """The dtype of each of the file's ``count`` columns (``names``: its header, for dtypes given by name)."""
        if isinstance(self.dtypes, str):
            return [np.dtype(self.dtypes)] * count
        if self.dtypes and not isinstance(self.dtypes[0], str):
            named = dict(self.dtypes)
            if not self.header or names is None:
                raise InputError(
                    f"read_csv: dtypes= names columns ({sorted(named)}) but {path or 'the files'} have no header to find them "
                    "by; give one dtype per column in a list"
                )
            missing = sorted(set(named) - set(names))
            if missing:
                raise InputError(
                    f"read_csv: dtypes= names column(s) {missing}, which {path} does not have; its header names {list(names)}"
                )
            row = first_row(path, self.delimiter, self.header) if path else None
            return [np.dtype(named[n]) if n in named else _inferred(row, i) for i, n in enumerate(names)]
        if len(self.dtypes) != count:
            raise InputError(f"{path} has {count} columns but dtypes= gives {len(self.dtypes)}; give one dtype per column")
        return [np.dtype(d) for d in self.dtypes]

    def kinds(self, layout: Layout) -> list[np.dtype[Any]]:
        """The dtype of each field of a file of ``layout`` (resolved when it was described)."""
        return [np.dtype(k) for k in layout.kinds] if layout.kinds else self.column_dtypes(layout.fields, "")

    def records(self, path: Any) -> tf.data.Dataset:
        lines = tf.data.TextLineDataset(path, buffer_size=1 << 20)

        def first_without_bom(i: tf.Tensor, line: tf.Tensor) -> tf.Tensor:
            return tf.cond(tf.equal(i, 0), lambda: without_bom(line), lambda: line)

        lines = lines.skip(1) if self.header else lines.enumerate().map(first_without_bom)
        return record_batches(lines.batch(_LINES)).unbatch()  # a quoted line break joined back into its record

    def record_batches(self, path: str, size: int, batch: int) -> tf.data.Dataset:
        # The first block starts with the file's first line: its BOM dropped, and itself if it is the header.
        first = self._first_lines
        blocks = record_batches(text_lines(path, size)).enumerate()
        return blocks.map(lambda i, lines: tf.cond(tf.equal(i, 0), lambda: first(lines), lambda: lines)).rebatch(batch)

    def small_batches(self, paths: Sequence[str], sizes: Sequence[int], batch: int) -> tf.data.Dataset:
        files = whole_texts(paths, sizes).map(split_lines).map(records)  # one element per file with text
        return files.map(self._first_lines).rebatch(batch)

    def _first_lines(self, lines: tf.Tensor) -> tf.Tensor:
        """The lines that start a file, without its BOM and its header."""
        lines = tf.concat([without_bom(lines[:1]), lines[1:]], 0)
        return lines[1:] if self.header else lines

    def typed(self, layout: Layout, columns: Sequence[int]) -> list[tf.DType]:
        """The dtype each field of a line decodes as: ``columns`` as ``dtypes=`` asks, the rest as strings (unchecked)."""
        given = self.kinds(layout)
        result = [tf.string] * layout.fields
        for i in columns:
            result[i] = tf.as_dtype(given[i])
        return result

    def field_dtypes(self, layout: Layout) -> list[tf.DType]:
        """The dtype each field of a line decodes as: the columns read as asked, the rest as strings (not checked)."""
        return self.typed(layout, layout.columns)

    def fields(self, records: tf.Tensor, layout: Layout, batch: int) -> list[tf.Tensor]:
        """The columns ``layout.columns`` of ``records`` (lines, or blocks of whole lines for the native kernel), each
        1-D in its own dtype.  The op's name carries the batch size: a failed run's error then says where its batch
        starts (see :func:`find_bad_line`); a line with a field too many or too few, or a column read that is not a
        number, is an error."""
        dtypes = self.field_dtypes(layout)
        wanted = [dtypes[i] for i in layout.columns]

        def stock() -> list[tf.Tensor]:
            every = tf.io.decode_csv(
                records,
                record_defaults=[tf.constant([""]) if d == tf.string else tf.constant([], d) for d in dtypes],
                field_delim=self.delimiter,
                name=f"{DECODE}{batch}",
            )
            return [every[i] for i in layout.columns]

        if not (self.native and all(d in NATIVE_DTYPES for d in wanted)):
            return stock()
        ops = kernels()
        assert ops is not None  # native only where every task and the client have the kernels

        def native() -> list[tf.Tensor]:
            decoded = ops.tmr_decode_csv(
                records, out_types=wanted, columns=list(layout.columns), fields=layout.fields, delimiter=self.delimiter,
                name=f"{DECODE}{batch}",
            )  # fmt: skip
            return list(decoded)

        # TmrDecodeCsv splits a record at every line break, also inside quotes: a batch with a line break after an odd
        # number of quotes (inside a quoted field) is decoded by TensorFlow's op; blocks of whole lines stay native
        quoted_break = tf.reduce_any(tf.strings.regex_full_match(records, QUOTED_BREAK))
        decoded: list[tf.Tensor] = tf.cond(quoted_break, stock, native)
        return decoded

    def decode(self, records: tf.Tensor, layout: Layout, batch: int = 0) -> Any:
        return self.assemble(self.fields(records, layout, batch), layout)

    def assemble(self, columns: list[tf.Tensor], layout: Layout) -> Any:
        """A batch from its columns ``layout.columns`` (each 1-D in its own dtype)."""
        return tf.stack([tf.cast(c, tf.as_dtype(layout.dtype)) for c in columns], axis=1)

    def stacked(self, layout: Layout, wanted: list[tf.DType]) -> bool:
        """Whether a batch is the columns read (of dtypes ``wanted``) stacked as they are: one dtype, the batch's; then
        ``TmrReadCsv`` writes the rows as that matrix itself (``matrix=True``), no columns stacked afterwards."""
        return bool(wanted) and all(d == tf.as_dtype(layout.dtype) for d in wanted)

    def splits(self, layout: Layout | None, size: int) -> bool:
        """Whether a file of ``layout`` and ``size`` bytes is read by :meth:`native_batches`, in byte ranges that several
        shards may share (each line read by the shard where it starts, as Hadoop splits text)."""
        if layout is None or not self.native or self.small(size):
            return False
        dtypes = self.field_dtypes(layout)
        return all(dtypes[i] in NATIVE_DTYPES for i in layout.columns)

    def native_batches(self, path: str, size: int, layout: Layout, rows: int | None, start: int, stop: int) -> tf.data.Dataset:
        """The decoded batches of the lines of a file that start in bytes ``start:stop``, read by the native
        ``TmrReadCsv``, :data:`TEXT_BLOCK` bytes a call: no string per line, no text pipeline; a batch is a block's
        lines, or ``rows`` rows where given.  A bad line fails the run naming its line number and bytes
        (:data:`BAD_LINE`)."""
        dtypes = self.field_dtypes(layout)
        wanted = [dtypes[i] for i in layout.columns]
        ops = kernels()
        assert ops is not None  # native only where every task and the client have the kernels
        matrix = self.stacked(layout, wanted)

        def read(first: tf.Tensor) -> Any:
            if matrix:
                (rows_read,) = ops.tmr_read_csv(
                    path, size, first, tf.minimum(first + TEXT_BLOCK, stop), out_types=wanted[:1],
                    columns=list(layout.columns), fields=layout.fields, delimiter=self.delimiter, header=self.header,
                    matrix=True,
                )  # fmt: skip
                return rows_read
            columns = ops.tmr_read_csv(
                path, size, first, tf.minimum(first + TEXT_BLOCK, stop), out_types=wanted, columns=list(layout.columns),
                fields=layout.fields, delimiter=self.delimiter, header=self.header,
            )  # fmt: skip
            return self.assemble(list(columns), layout)

        blocks = tf.data.Dataset.range(start, max(stop, start + 1), TEXT_BLOCK).map(read)
        return blocks if rows is None else blocks.rebatch(rows)


@attrs.frozen
class CsvTable(Csv):
    """CSV files read as a table for a by-key recipe: each batch is ``(keys, values)``, the key column and the value
    column(s), each in its own dtype (``columns`` is the key column, then the value columns).

    The key column decodes as int64 or as a string (``key_dtype``); columns not read decode as
    strings (no number is asked of them, and they may be empty), every value field is required.
    """

    key_dtype: str
    """``"int64"`` or ``"string"``."""
    flat: bool
    """One value column named alone: values 1-D, not a (rows, 1) matrix."""

    def field_dtypes(self, layout: Layout) -> list[tf.DType]:
        """The dtype each field of a line decodes as: the key column as ``key_dtype``, the values as asked, the rest strings."""
        result = self.typed(layout, layout.columns[1:])
        result[layout.columns[0]] = tf.int64 if self.key_dtype == "int64" else tf.string
        return result

    def layout(self, names: Sequence[str], path: str) -> Layout:
        selected = self.selected(names, path)
        dtypes = self.column_dtypes(len(names), path, names)
        text = [names[i] if self.header else i for i in selected[1:] if dtypes[i].kind not in "iuf"]
        if text:
            raise InputError(
                f"read_csv: values= names column(s) {text}, which hold strings (dtypes=); values must be numeric columns: "
                "give them a numeric dtype, or name other columns"
            )
        dtype = np.result_type(*(dtypes[i] for i in selected[1:])) if selected[1:] else np.dtype(np.int64)
        row_shape = () if self.flat or not selected[1:] else (len(selected) - 1,)
        return Layout(None, 0, dtype, row_shape, len(names), tuple(selected), tuple(d.str for d in dtypes))

    def assemble(self, columns: list[tf.Tensor], layout: Layout) -> Any:
        keys, *values = columns
        if not values:
            return keys  # the keys alone (count_by_key)
        values = [tf.cast(v, tf.as_dtype(layout.dtype)) for v in values]
        return keys, values[0] if self.flat else tf.stack(values, axis=1)

    def stacked(self, layout: Layout, wanted: list[tf.DType]) -> bool:
        return False  # (keys, values): never one matrix

    def empty(self, layout: Layout) -> tuple[tf.Tensor, ...]:
        keys = tf.zeros([0], tf.int64) if self.key_dtype == "int64" else tf.zeros([0], tf.string)
        if not layout.columns[1:]:
            return (keys,)
        return keys, tf.zeros((0, *layout.row_shape), tf.as_dtype(layout.dtype))


def first_row(path: str, delimiter: str, header: bool) -> list[str] | None:
    """The fields of the first data line of the CSV file at ``path`` (after its header), or None if it has none."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            rows = csv.reader(f, delimiter=delimiter)
            if header:
                next(rows, None)
            return next(rows, None)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None


def is_integer(field: str) -> bool:
    try:
        int(field.strip())
    except ValueError:
        return False
    return True


def is_number(field: str) -> bool:
    try:
        float(field.strip())
    except ValueError:
        return False
    return True


def _inferred(row: Sequence[str] | None, index: int) -> np.dtype[Any]:
    """The dtype of a column that a ``dtypes=`` dict leaves out, from its field in the file's first data line ``row``:
    int64 for an integer, float64 for another number, text (``str``, refused in a matrix) for anything else, float32
    (``read_csv``'s default) where there is no such line or field.

    Examples:
        >>> [_inferred(["7", "2.5", "x", ""], i).str for i in range(5)]
        ['<i8', '<f8', '<U0', '<f4', '<f4']
    """
    field = row[index] if row is not None and index < len(row) else ""
    if not field.strip():
        return np.dtype(np.float32)
    if is_integer(field):
        return np.dtype(np.int64)
    return np.dtype(np.float64) if is_number(field) else np.dtype(str)
