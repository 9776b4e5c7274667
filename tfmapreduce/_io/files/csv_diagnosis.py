"""The CSV diagnosis: after a failed run, the bad line found on its task (its file, number and text) and named."""

from __future__ import annotations

import csv
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from ..._ops.mapfn import traced
from .csv import BOM, DECODE, Csv, CsvTable
from .readers import Layout
from .text import TEXT_BLOCK, byte_blocks

WHOLE_BYTES = 64 << 20
"""A file up to this size is read whole to find its bad line (one read, no block pipeline to trace); larger ones in blocks."""

DIAGNOSIS_SECONDS = 10.0
"""The deadline of the runs that find a bad line after a failed run: a call ends at most this long after its own.
Two small graphs, built and run on the task in well under a second when idle; at 2 s a loaded machine gave up on them
and the error named no line."""

_RECORD = re.compile(r"in record (\d+)")
_BATCH = re.compile(re.escape(DECODE) + r"(\d+)")


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
    records = [t.removeprefix(BOM) if c[2] == 0 else t for t, c in zip(records, found, strict=True)]
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
