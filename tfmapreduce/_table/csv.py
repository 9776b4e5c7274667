"""Tables from CSV files: ``tmr.scan_csv`` infers each column's type from the first rows of the first file on the
client, then reads every byte range of every file with that schema on the workers, one map-only run (no row
through the client), and the decoded columns come back into a client-held :class:`Table`, or stay where they were read
(``resident=True``: a :class:`ResidentTable`)."""

from __future__ import annotations

import csv
import functools
import io
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

import numpy as np
from typing_extensions import Unpack

from .._base.errors import InputError, JobError
from .._cluster.cluster import Cluster
from .._engine.kernels import available
from .._io.files.csv_columns import BAD, UNSPLIT, read_ranges
from .._io.files.csv_scan import CsvScan, plan
from .._io.files.pipeline import Pipeline, read_dataset
from .._io.resident import delete_all, gather_all
from .._kinds.map_api import map as map_rows
from .._options import Options, RunOptions
from .column import Column, ResidentColumn, made, placed, unmasked
from .parquet import column_type, placing
from .resident import ResidentTable
from .table import Table

Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]

SPLIT_BYTES = 16 << 20
"""Bytes of a file per split by default (a split is read as one string on its task)."""


@overload
def scan_csv(
    paths: Paths,
    /,
    dtypes: Mapping[str, Any] | None = None,
    *,
    has_header: bool = True,
    new_columns: Sequence[str] | None = None,
    null_values: str | Sequence[str] | None = None,
    delimiter: str = ",",
    infer_rows: int = 1000,
    split_bytes: int = SPLIT_BYTES,
    resident: Literal[False] = False,
    **options: Unpack[Options],
) -> Table: ...
@overload
def scan_csv(
    paths: Paths,
    /,
    dtypes: Mapping[str, Any] | None = None,
    *,
    has_header: bool = True,
    new_columns: Sequence[str] | None = None,
    null_values: str | Sequence[str] | None = None,
    delimiter: str = ",",
    infer_rows: int = 1000,
    split_bytes: int = SPLIT_BYTES,
    resident: Literal[True],
    **options: Unpack[Options],
) -> ResidentTable: ...
def scan_csv(
    paths: Paths,
    /,
    dtypes: Mapping[str, Any] | None = None,
    *,
    has_header: bool = True,
    new_columns: Sequence[str] | None = None,
    null_values: str | Sequence[str] | None = None,
    delimiter: str = ",",
    infer_rows: int = 1000,
    split_bytes: int = SPLIT_BYTES,
    resident: bool = False,
    **options: Unpack[Options],
) -> Table | ResidentTable:
    """A [`Table`][tfmapreduce.Table] of the CSV files ``paths`` (a file, a folder of ``*.csv`` files, a glob
    pattern, or a list), each with a header line naming the columns (the same in every file), read on the workers
    in one map-only run (eager). With ``resident=True`` the decoded columns stay where they were read, a
    [`ResidentTable`][tfmapreduce.ResidentTable] (no row through the client; its shards are the splits', in file
    then line order), and the validity of a column without a null dropped, as the client's (one small run counts them).

    With ``has_header=False`` every line is data and the columns are ``column_1``, ``column_2``, ... (as polars names
    them; as many as the first record of the first file has fields). ``new_columns`` (a list of names) renames the
    first ``len(new_columns)`` columns, with a header or without, as polars' ``read_csv`` does; ``dtypes`` then
    names the new names.

    Each column's type is inferred from the first ``infer_rows`` records of the first file (their non-empty fields):
    all ``true``/``false`` → bool; all integers → int64; all numbers (``nan``, ``inf`` too) → float64; all
    ``YYYY-MM-DD`` → date; dates and ``YYYY-MM-DD HH:MM[:SS[.ffffff]]`` (or with ``T``) → ``timestamp[us]`` (``[ns]``
    for 7 to 9 digits of fraction); anything else, or no value, → string (nulls do not count). ``dtypes`` (a dict)
    sets the type of the columns it names, and only those: ``"string"``, ``"date"``, ``"timestamp[ms]"``, ``"bool"``,
    a number's dtype (``"int32"``, ``np.float32``). An empty field is null (as pandas and polars read it, whatever the
    column's type, quoted ``""`` too), and so is a field equal to a string of ``null_values`` (a string or a list,
    e.g. ``["NA", "null"]``, compared with the whole field, quoted or not, in every column type); blank lines are
    skipped; fields may be quoted (``"a,b"``, a doubled ``""`` inside quotes, line breaks inside quotes); a UTF-8 BOM
    and ``\\r\\n`` line ends are taken.

    The files are cut into byte ranges of about ``split_bytes``, each starting at a record (the client counts
    quotes to find where: no field is parsed there), placed on the tasks as rows are (``sizes=``, ``devices=``).
    A later value that contradicts its column's inferred type fails the scan naming the file, line and column.

    Where the client and every task have the native kernels (see ``_native``), each range is decoded by one C++ op,
    ``TmrScanCsv``; elsewhere by stock TensorFlow ops: the same table, slower.

    Examples:
        >>> t = tmr.scan_csv(folder, dtypes={"zip": "string"}, cluster=cluster)  # doctest: +SKIP
        >>> t = tmr.scan_csv(path, has_header=False, new_columns=["id", "city"], null_values="NA", cluster=cluster)  # doctest: +SKIP

    Raises:
        FileNotFoundError: no file. KeyError: ``dtypes`` names no column (with "did you mean"). TypeError: a type
            ``dtypes`` cannot name, ``null_values`` not strings, ``has_header`` not a bool. ValueError: more
            ``new_columns`` than columns, or names twice; files whose headers differ (named), duplicate names, an empty file, a
            record with another number of fields than the header or a value that is not of its column's type (the
            file, line, column and fix named).
    """
    scan = plan_csv(
        paths,
        dtypes,
        has_header=has_header,
        new_columns=new_columns,
        null_values=null_values,
        delimiter=delimiter,
        infer_rows=infer_rows,
        split_bytes=split_bytes,
    )
    ranges = [r for r in scan.ranges if r[2] > r[1]]
    if not ranges:
        empty = {c: _column(k, np.zeros(0, column_type(k).storage), None) for c, k in zip(scan.columns, scan.kinds, strict=True)}
        return ResidentTable(placed(empty, True, placing(options))) if resident else Table(empty)
    try:
        out = map_rows(_columns, _pipeline(scan, _grouped(ranges, _splits(options)), _native(options)), **options)
    except (InputError, JobError) as e:
        if found := BAD.search(str(e)):
            raise ValueError(bad_record(scan, *(int(g) for g in found.groups()))) from None
        if UNSPLIT.search(str(e)):
            raise ValueError(bad_fields(scan) or f"scan_csv: a record does not split into fields: {e}") from None
        raise
    parts = list(out) if isinstance(out, tuple) else [out]
    n = len(scan.columns)
    if resident:
        kept = {
            name: ResidentColumn(column_type(kind), parts[j], parts[n + j])
            for j, (name, kind) in enumerate(zip(scan.columns, scan.kinds, strict=True))
        }
        return ResidentTable(unmasked(kept, options))
    try:
        arrays = gather_all(parts, texts=True)
    finally:
        delete_all(parts)
    return Table(
        {
            name: _column(kind, arrays[j], arrays[n + j])
            for j, (name, kind) in enumerate(zip(scan.columns, scan.kinds, strict=True))
        }
    )


def plan_csv(
    paths: Paths,
    /,
    dtypes: Mapping[str, Any] | None = None,
    *,
    has_header: bool = True,
    new_columns: Sequence[str] | None = None,
    null_values: str | Sequence[str] | None = None,
    delimiter: str = ",",
    infer_rows: int = 1000,
    split_bytes: int = SPLIT_BYTES,
) -> CsvScan:
    """What [`scan_csv`][tfmapreduce.scan_csv] reads with these arguments, without reading a row on the workers: the
    files and their sizes, the columns and their types (inferred here from the first ``infer_rows`` records), the byte
    ranges that are its splits. ``tmr.lazy(tmr.plan_csv(paths))`` reads the files when the query runs.

    Examples:
        >>> scan = tmr.plan_csv(path)  # doctest: +SKIP
        >>> scan.columns, scan.kinds  # doctest: +SKIP
        (('city', 'price'), ('string', 'float64'))

    Raises:
        FileNotFoundError: no file. KeyError: ``dtypes`` names no column. TypeError: a type ``dtypes`` cannot name,
            ``null_values`` not strings, ``has_header`` not a bool. ValueError: files whose headers differ, a bad
            ``delimiter``, ``new_columns`` or ``infer_rows`` (as [`scan_csv`][tfmapreduce.scan_csv] before it reads).
    """
    if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '\r\n"':
        raise ValueError(f"scan_csv: delimiter must be one character other than a quote or line break, got {delimiter!r}")
    return plan(paths, dtypes, delimiter, infer_rows, split_bytes, has_header, new_columns, null_values)


def _columns(*columns: Any) -> tuple[Any, ...]:
    """The map of a scan: the decoded columns as they are (one function, so a scan like the last reuses its program)."""
    return columns


@functools.lru_cache(maxsize=16)
def _pipeline(scan: CsvScan, groups: tuple[tuple[tuple[int, int, int], ...], ...], native: bool) -> Pipeline:
    """The splits of ``scan``, each a group of byte ranges; the same object for the same scan (one program)."""
    return read_dataset(lambda split, _: read_ranges(scan, groups[split], native), splits=len(groups), batched=True)


def _native(options: Mapping[str, Any]) -> bool:
    """Whether the run's cluster and this client have the ``TmrScanCsv`` kernel (asked once per cluster)."""
    settings = RunOptions.of(**options)
    return settings.cluster is not None and available(settings.cluster, settings.seconds(), "tmr_scan_csv")


def _splits(options: Mapping[str, Any]) -> int:
    """Two splits a task of the run's cluster (each split's pipeline is traced into the graph), 8 if not known here."""
    cluster = options.get("cluster")
    return 2 * len(cluster.tasks) if isinstance(cluster, Cluster) else 8


def _grouped(ranges: Sequence[tuple[int, int, int]], splits: int) -> tuple[tuple[tuple[int, int, int], ...], ...]:
    """``ranges`` in at most ``splits`` contiguous groups of about equal bytes, none empty, in order."""
    ends = np.cumsum([b - a for _, a, b in ranges])
    which = np.minimum((np.concatenate([[0], ends[:-1]]) * splits) // ends[-1], splits - 1)
    return tuple(tuple(r for r, w in zip(ranges, which, strict=True) if w == g) for g in sorted(set(which.tolist())))


def _column(kind: str, values: np.ndarray[Any, Any], valid: np.ndarray[Any, Any] | None) -> Column:
    return made(column_type(kind), values, valid)  # strings already str (gathered as texts)


def bad_fields(scan: CsvScan) -> str | None:
    """After a run whose records did not all split into the header's fields: the first such record of the files
    (read here with Python's csv module: this runs only after a failed scan), or None where it finds none."""
    for path in scan.files:
        with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
            rows = csv.reader(f, delimiter=scan.delimiter, strict=True)
            line = 1
            try:
                for record in rows:
                    if record and len(record) != len(scan.columns):
                        return (
                            f"scan_csv: {path} line {line} has {len(record)} fields where the header names "
                            f"{len(scan.columns)}: {record!r}; quote a field that holds the delimiter"
                        )
                    line = rows.line_num + 1
            except csv.Error as e:
                return f"scan_csv: {path} line {line} is not a CSV record ({e}); double a quote inside quotes, and close them"
    return None


def bad_record(scan: CsvScan, file: int, offset: int, column: int) -> str:
    """The message of a record that failed its range's read: its file and line, and what is wrong with it."""
    path = scan.files[file]
    with open(path, "rb") as f:
        line = f.read(offset).count(b"\n") + 1
        record = next(
            csv.reader(io.TextIOWrapper(f, encoding="utf-8", errors="replace", newline=""), delimiter=scan.delimiter), []
        )
    where = f"scan_csv: {path} line {line}"
    name, kind = scan.columns[column], scan.kinds[column]
    value = record[column] if column < len(record) else "?"
    why = (
        f"the type inferred from the first {scan.infer_rows} rows of {scan.files[0]}"
        if scan.inferred[column]
        else "the type dtypes= gives it"
    )
    return (
        f"{where}, column {name!r}: {value!r} is not of the column's type, {kind} ({why}); read the column as another "
        f"type with dtypes={{{name!r}: 'string'}} (or 'float64', ...), or raise infer_rows="
    )
