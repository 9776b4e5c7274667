"""The typed columns of a CSV scan's byte ranges, decoded on the task that reads them (see ``csv_scan``).

Where the client and every task have the native kernels, the ``TmrScanCsv`` kernel reads and decodes each range in one
pass (see ``_native/csv_scan.cc``). Elsewhere a range is read as one string (``FixedLengthRecordDataset``: no byte
outside it) and cut into its records (:func:`records`); each record's fields are then checked and converted by stock
ops in the graph. Both read alike: an empty field, or one of the scan's ``null_values``, is null (its validity False).
A field that does not match its column's type fails the run with :data:`BAD` (the file, the record's byte offset and
the column), which the client turns into a message naming the file's line; a record with another number of fields than
the header or a quote left open fails TensorFlow's ``DecodeCSV`` (:data:`UNSPLIT`), and the client finds it in the
files.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from ..._native.loader import kernels
from .csv_scan import CsvScan, pattern

BAD = re.compile(r"scan_csv bad record: file (\d+) byte (\d+) column (-?\d+)")
"""The error of a range with a bad record (column -1: its fields, not a value)."""

BOM = b"\xef\xbb\xbf"
_MAX = 2**63 - 1
UNSPLIT = re.compile(r"Expect \d+ fields but have \d+ in record|Quoted field has to end|Unquoted fields cannot have")
"""TensorFlow's ``DecodeCSV`` errors of a record it could not split (another number of fields than the header, a quote
left open): the client then finds the record in the files."""


def read_ranges(scan: CsvScan, ranges: Sequence[tuple[int, int, int]], native: bool = False) -> tf.data.Dataset:
    """In the graph being built: the decoded ``ranges`` (file index, first byte, end byte) of ``scan``, a batch
    each: every column's values, then every column's validity; by the native ``TmrScanCsv`` where ``native``."""
    paths = tf.constant(scan.files)
    sizes = tf.constant(scan.sizes, tf.int64)
    index, start, stop = (tf.constant([r[k] for r in ranges], tf.int64) for k in range(3))
    if native:
        return tf.data.Dataset.from_tensor_slices((index, start, stop)).map(
            tf.autograph.experimental.do_not_convert(lambda i, a, b: scanned(scan, paths[i], i, a, b))
        )

    def read(i: tf.Tensor, a: tf.Tensor, b: tf.Tensor) -> tf.data.Dataset:
        text = tf.data.FixedLengthRecordDataset(paths[i], b - a, header_bytes=a, footer_bytes=sizes[i] - b)
        return text.map(lambda t: (i, a, t))

    ranges_read = tf.data.Dataset.from_tensor_slices((index, start, stop)).flat_map(read)
    return ranges_read.map(tf.autograph.experimental.do_not_convert(lambda i, a, t: decode(scan, i, a, t)))


_NATIVE_TYPES = {"bool": tf.bool, "date": tf.int32, "string": tf.string}


def scanned(scan: CsvScan, path: tf.Tensor, file: tf.Tensor, start: tf.Tensor, stop: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """The columns of bytes ``start:stop`` of file ``file`` (at ``path``) decoded by ``TmrScanCsv``: values as the
    kernel gives them (integers int64, floats float64) cast to each column's type, then each column's validity."""
    ops = kernels()
    assert ops is not None  # native only where every task and the client have the kernels
    given = [_NATIVE_TYPES.get(k, tf.float64 if k.startswith("float") else tf.int64) for k in scan.kinds]
    values, valid = ops.tmr_scan_csv(
        path, file, start, stop, out_types=given, columns=len(scan.kinds), kinds=list(scan.kinds),
        null_values=list(scan.null_values), delimiter=scan.delimiter, header=scan.header,
    )  # fmt: skip
    cast = [
        v if k in _NATIVE_TYPES or k.startswith("timestamp") else tf.cast(v, k) for v, k in zip(values, scan.kinds, strict=True)
    ]
    return (*cast, *valid)


def _check(bad: tf.Tensor, offsets: tf.Tensor, file: tf.Tensor, column: int) -> tf.Operation:
    """An assertion that no row is ``bad``, naming the first bad one's file, byte offset and column."""
    first = tf.reduce_min(tf.where(bad, offsets, tf.constant(_MAX, tf.int64)))
    message = tf.strings.format("scan_csv bad record: file {} byte {} column " + str(column), (file, first))
    return tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)), [message])


def records(text: tf.Tensor, start: tf.Tensor, header: bool = True) -> tuple[tf.Tensor, tf.Tensor]:
    """The records of ``text``, the bytes of a file from byte ``start`` (a record's start), and each one's byte offset
    in the file: a record ends at a line break after an even number of quotes (so a quoted line break stays in its
    field), without a ``\\r`` before it; a file's BOM and header (where ``start`` is 0, and ``header``) and blank lines
    are dropped.
    Found from the bytes' quotes and line breaks as numbers, no string per line.

    Example:
        ``a,b\\r\\n"x\\ny",1\\n\\n2,3`` from byte 0 gives ``["\\"x\\ny\\",1", "2,3"]`` at bytes ``[5, 14]``.
    """
    raw = tf.io.decode_raw(text, tf.uint8)
    quotes = tf.cumsum(tf.cast(tf.equal(raw, 34), tf.int32))
    ends = tf.concat([tf.where(tf.equal(raw, 10) & tf.equal(quotes % 2, 0))[:, 0], tf.shape(raw, tf.int64)], 0)
    begins = tf.concat([tf.zeros([1], tf.int64), ends[:-1] + 1], 0)
    first = tf.equal(start, 0)
    bom = tf.logical_and(first, tf.equal(tf.strings.substr(text, 0, 3), BOM))
    begins = begins + tf.one_hot(0, tf.size(begins), tf.cast(bom, tf.int64) * 3, dtype=tf.int64)
    cr = tf.equal(tf.gather(raw, tf.maximum(ends - 1, 0)), 13) & (ends > begins)
    lengths = ends - begins - tf.cast(cr, tf.int64)
    kept = lengths > 0
    if header:
        kept &= tf.logical_not(tf.logical_and(first, tf.equal(tf.range(tf.size(begins)), 0)))
    begins, lengths = tf.boolean_mask(begins, kept), tf.boolean_mask(lengths, kept)
    return tf.strings.substr(text, tf.cast(begins, tf.int32), tf.cast(lengths, tf.int32)), start + begins


def decode(scan: CsvScan, file: tf.Tensor, start: tf.Tensor, text: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """The columns of the bytes ``text`` that start at byte ``start`` of file ``file`` (a scalar string)."""
    lines, offsets = records(text, start, scan.header)
    every = tf.io.decode_csv(lines, [[""]] * len(scan.columns), field_delim=scan.delimiter)
    values, valid = [], []
    for j, (field, kind) in enumerate(zip(every, scan.kinds, strict=True)):
        present = tf.strings.length(field) > 0
        for spelling in scan.null_values:
            present &= tf.not_equal(field, spelling)
        values.append(_converted(field, present, kind, lambda bad, j=j: _check(bad, offsets, file, j)))
        valid.append(present)
    return (*values, *valid)


def _number(field: tf.Tensor, begin: int, length: int, dtype: tf.DType = tf.int64) -> tf.Tensor:
    return tf.strings.to_number(tf.strings.substr(field, begin, length), dtype)


def _days(field: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Days since 1970-01-01 of ``YYYY-MM-DD`` fields (int64; Howard Hinnant's days-from-civil) and whether each is a
    date of the calendar."""
    y, m, d = _number(field, 0, 4), _number(field, 5, 2), _number(field, 8, 2)
    leap = tf.logical_and(tf.equal(y % 4, 0), tf.logical_or(tf.not_equal(y % 100, 0), tf.equal(y % 400, 0)))
    lengths = tf.constant([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], tf.int64)
    month_days = tf.gather(lengths, tf.clip_by_value(m - 1, 0, 11)) + tf.cast(tf.logical_and(leap, tf.equal(m, 2)), tf.int64)
    ok = (m >= 1) & (m <= 12) & (d >= 1) & (d <= month_days)
    y = y - tf.cast(m <= 2, tf.int64)
    era = tf.math.floordiv(y, 400)
    yoe = y - era * 400
    doy = (153 * (m + tf.where(m > 2, tf.constant(-3, tf.int64), 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468, ok


def _converted(field: tf.Tensor, present: tf.Tensor, kind: str, check: Any) -> tf.Tensor:
    """The values of a column of ``kind`` (a null's slot: 0, False or ""), after asserting every present field
    matches it (``check(bad)``: the assertion)."""
    regex = pattern(kind)
    if regex is None:
        return field
    matches = tf.logical_or(tf.strings.regex_full_match(field, regex), tf.logical_not(present))
    with tf.control_dependencies([check(tf.logical_not(matches))]):
        filler = {"bool": "false", "date": "1970-01-01"}.get(kind, "1970-01-01" if kind.startswith("timestamp") else "0")
        safe = tf.where(present, field, filler)
        if kind == "bool":
            return tf.equal(tf.strings.lower(safe), "true")
        if kind.startswith("float"):
            return tf.cast(tf.strings.to_number(safe, tf.float64), kind)
        if kind.startswith(("int", "uint")):
            return _integers(safe, kind, check)
        days, ok = _days(safe)
        if kind == "date":
            with tf.control_dependencies([check(tf.logical_not(ok))]):
                return tf.cast(days, tf.int32)
        return _timestamps(safe, days, ok, kind[len("timestamp[") : -1], check)


def _integers(safe: tf.Tensor, kind: str, check: Any) -> tf.Tensor:
    """Integer fields as ``kind``, asserting each fits it (int64: below 2**63 in magnitude, as a float64 compares)."""
    fits = tf.abs(tf.strings.to_number(safe, tf.float64)) < 2.0**63
    with tf.control_dependencies([check(tf.logical_not(fits))]):
        values = tf.strings.to_number(safe, tf.int64)
    if kind == "int64":
        return values
    info = tf.as_dtype(kind)
    with tf.control_dependencies([check((values < info.min) | (values > info.max))]):
        return tf.cast(values, info)


def _timestamps(safe: tf.Tensor, days: tf.Tensor, ok: tf.Tensor, unit: str, check: Any) -> tf.Tensor:
    """``YYYY-MM-DD[ T]HH:MM[:SS[.f]]`` fields (a date alone is midnight) as counts of ``unit`` since the epoch."""
    pad = tf.minimum(tf.strings.length(safe) - 10, 9)
    full = tf.strings.join(
        [safe, tf.strings.substr(tf.fill(tf.shape(safe), " 00:00:00"), pad, 9 - pad)]
    )  # at least YYYY-MM-DD HH:MM:SS
    hours, minutes, seconds = _number(full, 11, 2), _number(full, 14, 2), _number(full, 17, 2)
    ok = ok & (hours < 24) & (minutes < 60) & (seconds < 60)
    digits = {"s": 0, "ms": 3, "us": 6, "ns": 9}[unit]
    fraction = tf.strings.regex_replace(full, "^.{19}[.]?", "")
    nanos = tf.strings.to_number(tf.strings.substr(tf.strings.join([fraction, "000000000"]), 0, 9), tf.int64)
    with tf.control_dependencies([check(tf.logical_not(ok))]):
        total = days * 86400 + hours * 3600 + minutes * 60 + seconds
        return total * 10**digits + nanos // 10 ** (9 - digits)
