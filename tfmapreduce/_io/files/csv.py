"""CSV files of numbers: the reader, and the diagnosis that finds a bad line after a failed run."""

from __future__ import annotations

import csv
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf

from ..._base.errors import InputError
from ..._native.loader import has, kernels
from ..._ops.mapfn import traced
from .readers import Layout, Text
from .text import TEXT_BLOCK, byte_blocks, split_lines, text_lines, whole_texts

NATIVE_DTYPES = (tf.float32, tf.float64, tf.int32, tf.int64)
"""The column dtypes the native ``TmrDecodeCsv`` parses (other columns read: ``tf.io.decode_csv``)."""

_BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte order mark some editors write at the start of a file: not part of its first line."""

BAD_LINE = re.compile(r'tfmapreduce: CSV line (\d+): "((?:[^"\\]|\\.)*)"')
"""The error of ``TmrReadCsv`` at a bad line: its number in the file and its bytes (C-escaped)."""

_DECODE = "DecodeCSV_batch"
"""The name of the op that decodes a batch of lines, before the batch size (in the error of a failed run)."""

WHOLE_BYTES = 64 << 20
"""A file up to this size is read whole to find its bad line (one read, no block pipeline to trace); larger ones in blocks."""

DIAGNOSIS_SECONDS = 2.0
"""The deadline of the run that finds a bad line after a failed run: a call ends at most this long after its own."""


def without_bom(lines: tf.Tensor) -> tf.Tensor:
    """``lines`` (strings) each without a leading UTF-8 byte order mark.

    Example:
        >>> without_bom(tf.constant([b"\\xef\\xbb\\xbfa,b", b"c"])).numpy().tolist()
        [b'a,b', b'c']
    """
    start = tf.where(tf.equal(tf.strings.substr(lines, 0, 3), _BOM), 3, 0)
    return tf.strings.substr(lines, start, tf.fill(tf.shape(start), -1))


@attrs.frozen
class Csv(Text):
    """CSV files of numbers: the columns (names or indices) parsed into one (rows, columns) matrix."""

    name: ClassVar[str] = "read_csv"
    columns: tuple[str | int, ...] | None
    dtypes: tuple[str, ...] | tuple[tuple[str, str], ...] | str
    """One dtype for every field, one per field, or ``(name, dtype)`` pairs by header name (the rest float32)."""
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
            return [np.dtype(named.get(n, "float32")) for n in names]
        if len(self.dtypes) != count:
            raise InputError(f"{path} has {count} columns but dtypes= gives {len(self.dtypes)}; give one dtype per column")
        return [np.dtype(d) for d in self.dtypes]

    def kinds(self, layout: Layout) -> list[np.dtype[Any]]:
        """The dtype of each field of a file of ``layout`` (resolved when it was described)."""
        return [np.dtype(k) for k in layout.kinds] if layout.kinds else self.column_dtypes(layout.fields, "")

    def records(self, path: Any) -> tf.data.Dataset:
        lines = tf.data.TextLineDataset(path, buffer_size=1 << 20)
        if self.header:
            return lines.skip(1)
        return lines.enumerate().map(lambda i, line: tf.cond(tf.equal(i, 0), lambda: without_bom(line), lambda: line))

    def record_batches(self, path: str, size: int, batch: int) -> tf.data.Dataset:
        # The first block starts with the file's first line: its BOM dropped, and itself if it is the header.
        first = self._first_lines
        blocks = text_lines(path, size).enumerate()
        return blocks.map(lambda i, lines: tf.cond(tf.equal(i, 0), lambda: first(lines), lambda: lines)).rebatch(batch)

    def small_batches(self, paths: Sequence[str], sizes: Sequence[int], batch: int) -> tf.data.Dataset:
        files = whole_texts(paths, sizes).map(split_lines)  # one element per file with text
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
        if self.native and all(d in NATIVE_DTYPES for d in wanted):
            ops = kernels()
            assert ops is not None  # native only where every task and the client have the kernels
            decoded = ops.tmr_decode_csv(
                records, out_types=wanted, columns=list(layout.columns), fields=layout.fields, delimiter=self.delimiter,
                name=f"{_DECODE}{batch}",
            )  # fmt: skip
            return list(decoded)
        every = tf.io.decode_csv(
            records,
            record_defaults=[tf.constant([""]) if d == tf.string else tf.constant([], d) for d in dtypes],
            field_delim=self.delimiter,
            name=f"{_DECODE}{batch}",
        )
        return [every[i] for i in layout.columns]

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


_RECORD = re.compile(r"in record (\d+)")
_BATCH = re.compile(re.escape(_DECODE) + r"(\d+)")


@attrs.frozen
class BadLine:
    """The first line of some CSV files read together that does not decode."""

    file: int
    """Which of the files (an index)."""
    number: int
    """Its line number in that file, from 1 (the header, if any, is line 1)."""
    text: str
    """The line, decoded as UTF-8 (undecodable bytes replaced)."""


def find_bad_line(
    reader: Csv,
    layout: Layout,
    files: Sequence[tuple[str, int]],
    small: bool,
    details: str,
    device: str,
    run: Callable[[tf.Graph, Any, float], Any],
) -> BadLine | None:
    """The bad line behind the error ``details`` of a failed run that read ``files`` (path, size) as one piece.

    The failed op's name holds the batch size, TensorFlow's message the record within the batch:
    the bad line is that record of some batch, the first such line that does not decode.  Two
    graphs ``run(graph, fetches, seconds)`` runs on ``device`` find those lines' byte ranges from
    the files' newlines (no string per line) and fetch their bytes; the client decodes them as the
    run did.  ``small``: the files were read together, each whole (else one file, in blocks).
    Everything ends within :data:`DIAGNOSIS_SECONDS`.  None when the error does not say where, a
    run fails, or every candidate decodes.

    Example:
        the error ``... DecodeCSV_batch2 ... in record 1 ...`` of a file ``a,b\\n1,2\\n3,4\\n5,6\\n7\\n`` (header
        skipped: batches ``[1,2 3,4]``, ``[5,6 7]``) tries lines 3 and 5 and gives ``BadLine(0, 5, '7')``.
    """
    batch, record = _BATCH.search(details), _RECORD.search(details)
    if batch is None or record is None:
        return None
    rows, r, header = int(batch.group(1)), int(record.group(1)), int(reader.header)
    end = time.monotonic() + DIAGNOSIS_SECONDS

    def on_task(build: Callable[[], Any]) -> Any:
        graph = tf.Graph()
        with graph.as_default(), tf.device(device):
            fetches = traced(build)
        return run(graph, fetches, max(end - time.monotonic(), 0.1))

    try:
        whole = small or files[0][1] <= WHOLE_BYTES
        candidates = _small_candidates if whole else _block_candidates
        found = candidates(files, rows, r, header, on_task)
    except Exception:  # the diagnosis is a courtesy: the error stands without it
        return None
    if not found:
        return None
    records = [t.replace(b"\r", b"").removesuffix(b"\n") for _, _, _, t in found]
    records = [t.removeprefix(_BOM) if c[2] == 0 else t for t, c in zip(records, found, strict=True)]
    try:
        reader.decode(tf.constant(records), layout)
    except tf.errors.InvalidArgumentError as e:
        failed = _RECORD.search(str(e))
        if failed is None:
            return None
        _, file, line, _ = found[int(failed.group(1))]
        return BadLine(file, line + 1, records[int(failed.group(1))].decode("utf-8", "replace"))
    return None


Candidate = tuple[int, int, int, bytes]
"""A line that may be the bad one: (its index among the piece's data lines, file, line index in the file, its bytes)."""


def _lines(data: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The newline positions of ``data`` (uint8) and whether a byte other than ``\\r`` follows the last one."""
    at = tf.where(tf.equal(data, 10))[:, 0]
    after = data[tf.reduce_max(tf.concat([[-1], at], 0)) + 1 :]
    return at, tf.reduce_any(tf.not_equal(after, 13))


def _any_length(dtype: tf.DType) -> tf.Tensor:
    """An empty vector whose static shape is ``[None]``: a fold's state that grows is traced once."""
    return tf.compat.v1.placeholder_with_default(tf.zeros([0], dtype), [None])


def _gather(data: tf.Tensor, starts: tf.Tensor, stops: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The byte ranges ``starts:stops`` of ``data`` (uint8), clipped to it: (their lengths, their bytes end to end)."""
    n = tf.size(data, tf.int64)
    lo, hi = tf.clip_by_value(starts, 0, n), tf.clip_by_value(stops, 0, n)
    hi = tf.maximum(hi, lo)
    return hi - lo, tf.gather(data, tf.ragged.range(lo, hi).flat_values)


def _pieces(lengths: Sequence[int], body: bytes) -> list[bytes]:
    """``body`` cut into pieces of ``lengths`` bytes."""
    ends = np.cumsum(lengths)
    return [body[e - n : e] for n, e in zip(lengths, ends.tolist(), strict=True)]


def _joined(state: tuple[tf.Tensor, tf.Tensor], element: tuple[tf.Tensor, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
    return tf.concat([state[0], element[0]], 0), tf.concat([state[1], element[1]], 0)


def _fold(dataset: tf.data.Dataset) -> tuple[tf.Tensor, tf.Tensor]:
    """(lengths, bytes) elements concatenated."""
    folded: tuple[tf.Tensor, tf.Tensor] = dataset.reduce((_any_length(tf.int64), _any_length(tf.uint8)), _joined)
    return folded


def _small_candidates(
    files: Sequence[tuple[str, int]], rows: int, r: int, header: int, on_task: Callable[[Callable[[], Any]], Any]
) -> list[Candidate]:
    """Files read whole, in one run: their line counts, so where each file's data lines start, then their candidate lines."""
    paths = [p for p, _ in files]

    def build() -> tuple[tf.Tensor, ...]:
        def count(path: tf.Tensor) -> tf.Tensor:
            at, tail = _lines(tf.io.decode_raw(tf.io.read_file(path), tf.uint8))
            return tf.size(at, tf.int64) + tf.cast(tail, tf.int64)

        if len(paths) > 1:
            lines = tf.map_fn(count, tf.constant(paths), fn_output_signature=tf.int64)
            data_lines = tf.maximum(lines - header, 0)
            offsets = tf.cumsum(data_lines, exclusive=True)
        else:  # one file: its data lines start the piece
            lines, offsets = tf.constant([-1], tf.int64), tf.constant([0], tf.int64)
        first = header + tf.math.floormod(r - offsets, rows)

        def pick(path: tf.Tensor, start: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            data = tf.io.decode_raw(tf.io.read_file(path), tf.uint8)
            at, tail = _lines(data)
            n = tf.size(at, tf.int64)
            chosen = tf.range(start, n + tf.cast(tail, tf.int64), rows)
            lengths, body = _gather(data, *_ranges(chosen, at, n, tf.size(data, tf.int64)))
            return tf.concat([[tf.size(chosen, tf.int64)], lengths], 0), body  # each file: its candidates, their lengths

        lengths, body = _fold(tf.data.Dataset.from_tensor_slices((paths, first)).map(pick))
        return offsets, first, lengths, body

    offsets, first, lengths, body = on_task(build)
    lengths = lengths.tolist()
    found, at, cut = [], 0, 0
    for i in range(len(paths)):
        k = lengths[at]
        texts = _pieces(lengths[at + 1 : at + 1 + k], body[cut:].tobytes()) if k else []
        at, cut = at + 1 + k, cut + sum(lengths[at + 1 : at + 1 + k])
        for j, text in enumerate(texts):
            line = int(first[i]) + j * rows
            found.append((int(offsets[i]) + line - header, i, line, text))
    return found


def _ranges(chosen: tf.Tensor, at: tf.Tensor, n: tf.Tensor, size: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The byte ranges of lines ``chosen`` (indices, from 0) of a file of ``size`` bytes whose ``n`` newlines are ``at``.

    A line's range ends after its newline (the last line may have none).
    """
    starts = tf.where(chosen > 0, tf.gather(at, tf.maximum(chosen - 1, 0)) + 1, 0)
    stops = tf.where(chosen < n, tf.gather(at, tf.clip_by_value(chosen, 0, tf.maximum(n - 1, 0))) + 1, size)
    return starts, stops


def _block_candidates(
    files: Sequence[tuple[str, int]], rows: int, r: int, header: int, on_task: Callable[[Callable[[], Any]], Any]
) -> list[Candidate]:
    """One file read in blocks, twice in one run: the newlines around its candidate lines, then their bytes."""
    ((path, size),) = files
    first = header + r

    def build() -> tuple[tf.Tensor, ...]:
        count, tail, indices, positions = _scan_file(path, size, first - 1, rows)
        chosen = tf.range(first, count + tf.cast(tail, tf.int64), rows)
        at = tf.gather(positions, tf.searchsorted(indices, chosen - 1))  # the newline before each candidate ...
        ends = tf.gather(positions, tf.minimum(tf.searchsorted(indices, chosen), tf.maximum(tf.size(indices) - 1, 0)))
        starts = tf.where(chosen > 0, at + 1, 0)
        stops = tf.where(chosen < count, ends + 1, size)  # ... and its own

        def pick(b: tf.Tensor, block: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            offset = b * TEXT_BLOCK
            return _gather(tf.io.decode_raw(block, tf.uint8), starts - offset, stops - offset)

        return (chosen, *_fold(byte_blocks(path, size, 0, size, TEXT_BLOCK).enumerate().map(pick)))

    chosen, lengths, body = on_task(build)
    if not len(chosen):
        return []
    per_block = np.asarray(lengths).reshape(-1, len(chosen))  # each block's part of each candidate
    parts = _pieces(per_block.ravel().tolist(), body.tobytes())
    texts = [b"".join(parts[j :: len(chosen)]) for j in range(len(chosen))]
    return [(int(line) - header, 0, int(line), text) for line, text in zip(chosen.tolist(), texts, strict=True)]


def _scan_file(path: str, size: int, residue: int, rows: int) -> tuple[tf.Tensor, ...]:
    """Over the bytes of a file, in blocks: (its newlines, whether a byte other than ``\\r`` follows the last one,
    and the index and byte position of each newline ``i`` with ``i ≥ residue`` and ``(i - residue) mod rows`` 0 or 1).

    Its lines, as the CSV reader counts them, are the newlines plus that one.
    """
    blocks = byte_blocks(path, size, 0, size, TEXT_BLOCK).enumerate()

    def step(state: tuple[tf.Tensor, ...], item: tuple[tf.Tensor, tf.Tensor]) -> tuple[tf.Tensor, ...]:
        count, tail, indices, positions = state
        b, block = item
        at, content = _lines(tf.io.decode_raw(block, tf.uint8))
        n = tf.size(at, tf.int64)
        index = count + tf.range(n)
        keep = tf.logical_and(index >= residue, tf.math.floormod(index - residue, rows) <= 1)
        return (
            count + n,
            tf.where(n > 0, content, tf.logical_or(tail, content)),
            tf.concat([indices, index[keep]], 0),
            tf.concat([positions, at[keep] + b * TEXT_BLOCK], 0),
        )

    start = (tf.constant(0, tf.int64), tf.constant(False), _any_length(tf.int64), _any_length(tf.int64))
    result: tuple[tf.Tensor, ...] = blocks.reduce(start, step)
    return result


def bad_line_message(reader: Csv, layout: Layout, bad: BadLine, where: str, cause: str) -> str:
    """What is wrong with ``bad``, after ``where`` (the file and its task), and how to fix it.

    Example:
        ``line 3 is '1,': field 2 is empty; it must hold a float32 number (every field is required): fill it in or remove that line``
    """
    shown = f"{where}: line {bad.number} is {bad.text!r}"
    try:
        fields = next(csv.reader([bad.text], delimiter=reader.delimiter))
    except (csv.Error, StopIteration):
        fields = bad.text.split(reader.delimiter)
    if not bad.text.strip():
        return f"{shown}: an empty line, where {layout.fields} numeric fields separated by {reader.delimiter!r} belong; remove it"
    if len(fields) != layout.fields:
        return (
            f"{shown}: expected {layout.fields} numeric fields separated by {reader.delimiter!r}, got {len(fields)}; "
            "fix or remove that line"
        )
    dtypes = reader.kinds(layout)
    if isinstance(reader, CsvTable):
        dtypes = [np.dtype(object) if d == tf.string else np.dtype(d.as_numpy_dtype) for d in reader.field_dtypes(layout)]
    for i, (field, dtype) in enumerate(zip(fields, dtypes, strict=True), start=1):
        if dtype.kind not in "iuf":
            continue  # a string field: any text is one
        if not field.strip():
            return (
                f"{shown}: field {i} is empty; it must hold a {dtype} number (every field is required): "
                "fill it in or remove that line"
            )
        try:
            (float if dtype.kind == "f" else int)(field)
        except ValueError:
            return f"{shown}: field {i} is {field!r}, not a {dtype} number; fix or remove that line"
    return f"{shown}: it does not decode as {layout.fields} {reader.delimiter!r}-separated numbers ({cause}); fix or remove that line"
