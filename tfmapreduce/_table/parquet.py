"""Tables from and to Parquet files: ``tmr.scan_parquet`` decodes row groups on the workers, one map-only run whose
splits are the row groups (the client reads only the files' footers), and the decoded columns come back into a
client-held :class:`Table`, or stay where they were decoded (``resident=True``: a :class:`ResidentTable`);
``tmr.write_parquet`` writes a table's shards as Parquet part files on the workers."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

import attrs
import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._base.errors import JobError
from .._cluster.cluster import Cluster
from .._io.files.parquet import INSTALL, ParquetPlan, fed, native_reader, plan, read_split, row_filter, split_ranges
from .._io.files.parquet_writer import ParquetWriter
from .._io.files.pipeline import Pipeline, read_dataset
from .._io.files.written import Written
from .._io.resident import delete_all, gather_all
from .._kinds.map_api import map as map_rows
from .._kinds.writers import _write
from .._options import Options
from .column import Column, ResidentColumn, made, placed, unmasked
from .resident import ResidentTable
from .schema import DATE, STRING, ColumnType, timestamp
from .table import Table

Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def column_type(kind: str) -> ColumnType:
    """The table column type of a logical type's name (``"int64"``, ``"string"``, ``"date"``, ``"timestamp[ms]"``)."""
    if kind == "string":
        return STRING
    if kind == "date":
        return DATE
    if kind.startswith("timestamp["):
        return timestamp(kind[len("timestamp[") : -1])
    return ColumnType.of(np.dtype(kind))


def plan_parquet(
    paths: Paths, /, columns: Sequence[str] | None = None, filters: Sequence[tuple[str, str, Any]] | None = None
) -> ParquetPlan:
    """What [`scan_parquet`][tfmapreduce.scan_parquet] reads with these arguments, without reading a row: the files,
    the columns and their types, the row groups read and how many the filters' statistics skip.

    Examples:
        >>> print(tmr.plan_parquet(folder, columns=["x"], filters=[("x", ">", 10)]))  # doctest: +SKIP
        parquet scan: 2 files, columns ['x'], 1 row groups read (100 rows), 3 skipped by their statistics
    """
    return plan(paths, columns, filters)


@overload
def scan_parquet(
    paths: Paths,
    /,
    columns: Sequence[str] | None = None,
    filters: Sequence[tuple[str, str, Any]] | None = None,
    *,
    resident: Literal[False] = False,
    **options: Unpack[Options],
) -> Table: ...
@overload
def scan_parquet(
    paths: Paths,
    /,
    columns: Sequence[str] | None = None,
    filters: Sequence[tuple[str, str, Any]] | None = None,
    *,
    resident: Literal[True],
    **options: Unpack[Options],
) -> ResidentTable: ...
def scan_parquet(
    paths: Paths,
    /,
    columns: Sequence[str] | None = None,
    filters: Sequence[tuple[str, str, Any]] | None = None,
    *,
    resident: bool = False,
    **options: Unpack[Options],
) -> Table | ResidentTable:
    """A [`Table`][tfmapreduce.Table] of the Parquet files ``paths`` (a file, a folder of ``*.parquet`` files, a glob
    pattern, or a list), decoded on the workers in one map-only run (eager); with ``resident=True`` the decoded
    columns stay where they were decoded, a [`ResidentTable`][tfmapreduce.ResidentTable] (no row through the
    client; its shards are the splits', in file then row order; one small run drops the validity of a column
    without a null, as the client's table does).

    Each row group is an input split, placed on the tasks as rows are (``sizes=``, ``devices=``); the task that reads
    it decodes it with the Arrow C++ library (a native op), only the ``columns`` chosen (all by default). ``filters``
    is a list of ``(column, op, value)`` conditions that all must hold (pyarrow's spelling: ``==``, ``!=``, ``<``,
    ``<=``, ``>``, ``>=``, ``in`` with a list): a row group whose min/max statistics exclude them is not read, and the
    rows that fail them are dropped on the workers (a null fails every condition). A filter value for a date column is
    anything ``np.datetime64(value, "D")`` takes (``"1998-09-02"``, a ``datetime.date``).

    Types: bool, ints, floats (float16 too), strings (dictionary-encoded or not) as ``str``, ``date32`` as dates,
    timestamps without a time zone with their unit; nulls as the table's nulls. Rows come in file then row order.

    Examples:
        >>> t = tmr.scan_parquet(folder, columns=["city", "price"], filters=[("price", ">", 6.0)], cluster=cluster)  # doctest: +SKIP

    Raises:
        ImportError: pyarrow is not installed (``pip install tfmapreduce[parquet]``). KeyError: an unknown column
            (with "did you mean"). TypeError: a column of a type tables do not hold (nested, decimal, binary: named).
        ValueError: a file whose schema differs from the first's (the file and the column named); a malformed filter.
        RuntimeError: the native Parquet kernels did not build here (no C++ compiler, ``TFMAPREDUCE_NATIVE=0``), or a
            worker process lacks them (the task named: install the same tfmapreduce with its parquet extra there).
    """
    scan = plan(paths, columns, filters)
    if not scan.row_groups:
        empty = {c: _empty(k) for c, k in zip(scan.columns, scan.kinds, strict=True)}
        return ResidentTable(placed(empty, True, placing(options))) if resident else Table(empty)
    native_reader()  # RuntimeError here, before a run, where the kernels did not build
    try:
        pipeline = _pipeline(_unvalued(scan), tuple(split_ranges(scan, _splits(options))))
        out = map_rows(row_filter(scan), pipeline, broadcast=fed(scan), **options)
    except JobError as e:
        if NOT_REGISTERED not in str(e):
            raise
        raise RuntimeError(_lacking_message(options.get("cluster"), options.get("timeout"))) from e
    parts = list(out) if isinstance(out, tuple) else [out]
    if resident:
        values, valid = iter(parts[: len(scan.columns)]), iter(parts[len(scan.columns) :])
        kept = {
            name: ResidentColumn(column_type(kind), next(values), next(valid) if nullable else None)
            for name, kind, nullable in zip(scan.columns, scan.kinds, scan.nullable, strict=True)
        }
        return ResidentTable(kept if _nulls_counted(scan) else unmasked(kept, options))
    try:
        arrays = gather_all(parts)
    finally:
        delete_all(parts)
    values, valid = iter(arrays[: len(scan.columns)]), iter(arrays[len(scan.columns) :])
    return Table(
        {
            name: _column(kind, next(values), next(valid) if nullable else None)
            for name, kind, nullable in zip(scan.columns, scan.kinds, scan.nullable, strict=True)
        }
    )


def _nulls_counted(scan: ParquetPlan) -> bool:
    """Whether each nullable column holds a null in the rows read, so no run need look for one (``unmasked``): the
    footers count its nulls in every row group read (``ParquetPlan.nullable``), and no filter drops a row."""
    footers = scan.footers
    if footers is None or scan.filters:
        return False
    nullable = [footers.names.index(c) for c, n in zip(scan.columns, scan.nullable, strict=True) if n]
    return all(g[i].nulls is not None for i in nullable for g in footers.groups)


NOT_REGISTERED = "Op type not registered 'TmrReadParquet'"
"""TensorFlow's error where a worker process has no ``TmrReadParquet`` kernel."""


def _lacking_message(cluster: object, timeout: object) -> str:
    """The error of a scan that a worker without the Parquet kernels failed: the tasks that lack them (each asked
    with a read of no file, where ``cluster`` is known) and how to fix it."""
    where = "a worker process of the cluster"
    if isinstance(cluster, Cluster):
        lacking = [str(t) for t in cluster.live_tasks if not _has_parquet(cluster, t, timeout)]
        where = f"the worker process of task(s) {lacking}" if lacking else where
    return (
        f"scan_parquet: {where} has no native Parquet kernels (TensorFlow: {NOT_REGISTERED}); the client has them. "
        f"Install this same tfmapreduce version with its parquet extra on every worker ({INSTALL}, with a C++ "
        "compiler, TFMAPREDUCE_NATIVE not 0) and restart the workers"
    )


def _has_parquet(cluster: Cluster, task: Any, timeout: object) -> bool:
    """Whether ``task``'s process has ``TmrReadParquet``: a read of no file there fails otherwise than "not registered"."""
    graph = tf.Graph()
    with graph.as_default(), tf.device(f"{task}/device:CPU:0"):
        read = native_reader().tmr_read_parquet("", tf.zeros([1], tf.int64), out_types=[tf.int64], columns=[0], n=1)
    try:
        cluster.run(graph, read[0], {}, tasks=[task], timeout=float(timeout) if isinstance(timeout, (int, float)) else 10.0)
    except Exception as e:  # any error but "not registered": the kernel ran there
        return NOT_REGISTERED not in str(e)
    finally:
        cluster.forget(graph)
    return True


def _unvalued(scan: ParquetPlan) -> ParquetPlan:
    """``scan`` without its filters' values (its splits' graph does not read them: they are the run's inputs)."""
    return attrs.evolve(scan, filters=tuple(attrs.evolve(c, value=None) for c in scan.filters), skipped=0)


@functools.lru_cache(maxsize=16)
def _pipeline(scan: ParquetPlan, ranges: tuple[tuple[int, int], ...]) -> Pipeline:
    """The splits of ``scan``, one a range of row groups; the same object for the same scan (filter values aside),
    so the run's program (keyed by its input) is built once."""
    return read_dataset(lambda split, _: read_split(scan, ranges[split]), splits=len(ranges), batched=True)


def placing(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options of a scan that place an empty resident result (no file to read): its cluster and deadline."""
    return {k: options[k] for k in ("cluster", "timeout") if k in options}


def _splits(options: Mapping[str, Any]) -> int:
    """How many splits the row groups make: two a task of the run's cluster (each split's pipeline is traced into
    the run's graph, so one a row group would make large graphs), 8 where the cluster is not known here."""
    cluster = options.get("cluster")
    return 2 * len(cluster.tasks) if isinstance(cluster, Cluster) else 8


def _empty(kind: str) -> Column:
    return Column(column_type(kind), np.zeros(0, column_type(kind).storage))


def _column(kind: str, values: np.ndarray[Any, Any], valid: np.ndarray[Any, Any] | None) -> Column:
    type_ = column_type(kind)
    if type_ == STRING:
        values = np.array([v.decode("utf-8") for v in values.tolist()], dtype=object)
    return made(type_, values, valid)


def write_parquet(
    table: Table,
    directory: str | os.PathLike[str],
    /,
    *,
    overwrite: bool = False,
    shared: bool = True,
    **options: Unpack[Options],
) -> Written:
    """Write ``table`` as Parquet part files (``part-00000-of-0000N.parquet``, ...), each shard's encoded and written by
    the task that holds it, under the writers' commit protocol (``_SUCCESS`` once every part is written; see
    [`write_npy`][tfmapreduce.write_npy]). ``pyarrow.parquet.read_table(directory)`` and
    [`scan_parquet`][tfmapreduce.scan_parquet] read it back with its names, types and nulls (dates as ``date32``,
    timestamps with their unit; snappy-compressed).

    Raises:
        TypeError: not a Table. OutputError: the directory is a file or not empty (see ``overwrite=``).
    """
    if not isinstance(table, Table):
        raise TypeError(f"write_parquet: expected a tmr.Table, got {type(table).__name__}; make one with tmr.table(data)")
    columns = [table.column(c) for c in table.columns]
    if not columns:
        raise ValueError("write_parquet: the table has no columns; a Parquet file needs at least one")
    writer = ParquetWriter(tuple(table.columns), tuple(c.type.name for c in columns), tuple(c.nullable for c in columns))
    data = (*(c.values for c in columns), *(np.ones(len(c), bool) if c.valid is None else c.valid for c in columns))
    return _write(writer, data, directory, overwrite, shared, dict(options))
