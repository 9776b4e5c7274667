"""A plan run through the eager table operations, one node after the other (each node once, however many nodes read
it; a ``Bound`` root's scalar subqueries first, their values the literals of the nodes that read them), and
``physical``: the steps that will run, one line each with its kind, before anything runs. A sort, row-wise steps or
a group-by over a small input are done on the client (``client_steps``), a limit and an explode always (a step's
result is a client table).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Literal, overload

import attrs

from .._base.errors import TfMapReduceError
from .._table.aggregate import Aggregate
from .._table.aggregate_client import aggregated, can_aggregate
from .._table.csv import scan_csv
from .._table.parquet import scan_parquet
from .._table.resident import ResidentTable
from .._table.table import Table
from .client_steps import on_client, sorted_on_client
from .estimate import Estimate, estimates
from .expr import Col
from .grouped import grouped
from .lookup_table import LookupTable
from .plan import (
    Aggregated,
    Apply,
    Bound,
    CsvFiles,
    Distinct,
    Exploded,
    Fused,
    Joined,
    Limited,
    Node,
    ParquetFiles,
    Scan,
    Sorted,
    inputs,
    label,
    names,
)
from .rowwise import rowwise
from .rules import row_step
from .scalars import params, resolved, value_of


def execute(plan: Node, options: Mapping[str, Any], client_rows: int | None = None) -> Table:
    """The table ``plan`` computes, each node computed once; ``options`` are every run's options (``cluster=``...),
    ``client_rows`` the most rows a small step's input holds to be done on the client (``client_steps.on_client``)."""
    done: dict[int, Table] = {}
    sizes = estimates(plan)
    values: dict[int, Any] = {}  # each scalar subquery's value, each lookup's table, by its index (scalars.py)
    bound = plan if isinstance(plan, Bound) else None

    def value(at: int) -> None:
        if at not in values:  # a query when a step first reads it (a lookup's table may be read inside a subquery)
            assert bound is not None
            whole = dict(bound.tables)
            table = run(bound.queries[at])
            values[at] = LookupTable.of(table, whole[at]) if at in whole else value_of(table, at)

    def run(node: Node) -> Table:
        if id(node) not in done and isinstance(node, Bound):
            for at in range(len(node.queries)):  # in order: a query may read the ones before it
                value(at)
            done[id(node)] = run(node.input)
        elif id(node) not in done:
            scan = _kept_scan(node, sizes, client_rows)
            tables = [] if scan is not None else [run(i) for i in inputs(node)]
            for at in params(node):
                value(at)
            step = resolved(node, values)
            if scan is not None:
                assert isinstance(step, Aggregated)
                done[id(node)] = _aggregated_where_read(step, scan, dict(options), client_rows)
            else:
                done[id(node)] = _step(step, tables, dict(options), client_rows)
        return done[id(node)]

    return run(plan)


def _kept_scan(node: Node, sizes: Mapping[int, Estimate], client_rows: int | None) -> ParquetFiles | CsvFiles | None:
    """The file scan ``node`` reads where ``node`` is a group-by over it run on the workers: its columns are then kept
    where they are decoded (``_aggregated_where_read``); else None."""
    if not isinstance(node, Aggregated):
        return None
    (source,) = inputs(node)
    if not isinstance(source, (ParquetFiles, CsvFiles)) or on_client(node, sizes[id(source)].rows, client_rows):
        return None
    return source


def _aggregated_where_read(
    node: Aggregated, scan: ParquetFiles | CsvFiles, options: dict[str, Any], client_rows: int | None
) -> Table:
    """``node``'s group-by of the file ``scan``, its columns kept on the workers that decode them and read there by
    the keyed run (no row through the client), then freed; where they turn out small, or a list column is
    aggregated, fetched first and grouped as a client table is."""
    kept = _scanned(scan, options, resident=True)
    try:
        if _lists_aggregated(node, kept) or on_client(node, len(kept), client_rows):
            result = _aggregated(node, kept.collect(timeout=options.get("timeout")), options, client_rows)
        else:
            result = _keyed(node, kept, options)
    except BaseException:
        with contextlib.suppress(TfMapReduceError):  # (a lost worker's share went with it: the run's error is the one)
            kept.delete(timeout=options.get("timeout"))
        raise
    kept.delete(timeout=options.get("timeout"))
    return result


@overload
def _scanned(node: ParquetFiles | CsvFiles, options: dict[str, Any], resident: Literal[False] = False) -> Table: ...
@overload
def _scanned(node: ParquetFiles | CsvFiles, options: dict[str, Any], resident: Literal[True]) -> ResidentTable: ...
def _scanned(node: ParquetFiles | CsvFiles, options: dict[str, Any], resident: bool = False) -> Table | ResidentTable:
    """The table a file scan reads (kept on the workers where ``resident``)."""
    if isinstance(node, ParquetFiles):
        filters = [(c, op, v) for c, op, v in node.filters] or None
        read: Table | ResidentTable = scan_parquet(  # type: ignore[call-overload]
            list(node.source.files), columns=list(names(node) or ()), filters=filters, resident=resident, **options
        )
        return read
    scan = node.source
    typed = dict(zip(scan.columns, scan.kinds, strict=True))  # the types planned, and the names (renamed or not)
    every: Table | ResidentTable = scan_csv(
        list(scan.files),
        typed,
        has_header=scan.header,
        new_columns=list(scan.columns),
        null_values=list(scan.null_values) or None,
        delimiter=scan.delimiter,
        resident=resident,  # type: ignore[call-overload]
        **options,
    )
    if node.columns is None:
        return every
    chosen = every.select(node.columns)
    if isinstance(every, ResidentTable):  # the columns the query does not use, freed (the chosen ones are shared)
        every.delete(timeout=options.get("timeout"))
    return chosen


def _step(node: Node, tables: list[Table], options: dict[str, Any], client_rows: int | None) -> Table:
    if isinstance(node, Scan):
        return node.table if node.columns is None else node.table.select(node.columns)
    if isinstance(node, (ParquetFiles, CsvFiles)):
        return _scanned(node, options)
    (table, *other) = tables
    step = row_step(node)
    if step is not None or isinstance(node, Fused):
        steps = node.steps if isinstance(node, Fused) else [step]
        return rowwise(table, steps, options, on_client(node, len(table), client_rows))  # type: ignore[arg-type]
    if isinstance(node, Apply):
        return table.filter(node.fn, **options) if node.verb == "filter" else table.with_columns(node.fn, **options)
    if isinstance(node, Joined):
        on = {"left_on": list(node.left_on), "right_on": list(node.right_on)}
        return table.join(other[0], **on, how=node.how, suffix=node.suffix, **options)  # strategy: from the real sizes
    if isinstance(node, Aggregated):
        return _aggregated(node, table, options, client_rows)
    if isinstance(node, Sorted) and on_client(node, len(table), client_rows):
        return sorted_on_client(table, node)
    if isinstance(node, Sorted):
        down, last = list(node.descending), list(node.nulls_last)
        return table.sort(list(node.by), descending=down, nulls_last=last, limit=node.limit, **options)
    if isinstance(node, Limited):
        return table.limit(node.n)
    if isinstance(node, Exploded):
        return table.explode(list(node.columns), empty_as_null=node.empty_as_null, keep_nulls=node.keep_nulls)
    assert isinstance(node, Distinct)
    return table.unique(list(node.columns), **options)


def _aggregated(node: Aggregated, table: Table, options: dict[str, Any], client_rows: int | None) -> Table:
    """``node``'s group-by of ``table``: on the client where it is small (its steps too), else in one keyed run (its
    steps in its map, unless it aggregates a list column: a run of the steps first, as the eager group-by's input)."""
    small = on_client(node, len(table), client_rows)
    if node.steps and (small or _lists_aggregated(node, table)):
        table, node = rowwise(table, node.steps, options, small), attrs.evolve(node, steps=())
    if small:
        parsed = [Aggregate.parse(out, (column, op), tuple(table.columns)) for out, column, op in node.aggs]
        if can_aggregate(table, node.keys, parsed):
            return aggregated(table, node.keys, parsed)
    return _keyed(node, table, options)


def _lists_aggregated(node: Aggregated, table: Table | ResidentTable) -> bool:
    """Whether ``node`` aggregates a list column of ``table`` (a keyed run's map cannot take one)."""
    return any(c in table.columns and table.column(c).type.inner is not None for _, c, _ in node.aggs)


def _keyed(node: Aggregated, table: Table | ResidentTable, options: dict[str, Any]) -> Table:
    """``node``'s group-by of ``table`` in one keyed run, its steps in its map."""
    if node.steps:
        return grouped(table, node.steps, node.keys, node.aggs, options)
    aggs: dict[str, Any] = {out: (column, op) for out, column, op in node.aggs}
    return table.group_by(list(node.keys)).agg(**aggs, **options) if node.keys else table.agg(**aggs, **options)


def kind(node: Node, rows: int | None = None, client_rows: int | None = None) -> str:
    """What computing ``node`` takes: ``"map run"``, ``"keyed run"``, ``"join run"``, ``"sort run"``, or
    ``"client"`` (nothing runs on the workers: a semi or anti join, or a sort, row-wise steps or a group-by whose
    input is estimated at ``rows``, ``client_steps.on_client``)."""
    if isinstance(node, (Scan, Limited, Exploded, Bound)):
        return "client"
    if rows is not None and on_client(node, rows, client_rows):
        return "client"
    step = row_step(node)
    if step is not None or isinstance(node, Fused):
        steps: tuple[tuple[str, Any], ...] = node.steps if isinstance(node, Fused) else (step,)  # type: ignore[assignment]
        computes = [e for verb, arg in steps if verb == "assign" for _, e in arg if not isinstance(e, Col)]
        return "map run" if computes or any(verb == "where" for verb, _ in steps) else "client"
    if isinstance(node, (Apply, ParquetFiles, CsvFiles)):
        return "map run"
    if isinstance(node, Joined):
        return "client" if node.how in ("semi", "anti") else "join run"
    if isinstance(node, Sorted):
        return "sort run" if node.limit is None else "map run"
    return "keyed run"


def physical(plan: Node, client_rows: int | None = None) -> list[str]:
    """The steps that run, inputs first, each once: ``"<kind>: <step>  [<estimated rows and bytes>]"``, numbered
    where it is a distributed run."""
    sizes = estimates(plan)
    bound = plan if isinstance(plan, Bound) else None
    lines: list[str] = []
    seen: set[int] = set()
    runs = 0

    def visit(node: Node) -> None:
        nonlocal runs
        if id(node) in seen:
            return
        seen.add(id(node))
        for i in inputs(node):
            visit(i)
        for at in params(node):  # a lookup's table (a query of the Bound root) before its first reader
            if bound is not None:
                visit(bound.queries[at])
        what = kind(node, sizes[id(inputs(node)[0])].rows if inputs(node) else None, client_rows)
        if what == "client":
            lines.append(f"client: {label(node)}  [{sizes[id(node)]}]")
        else:
            runs += 1
            lines.append(f"run {runs} ({what}): {label(node)}  [{sizes[id(node)]}]")

    visit(plan)
    return [*lines, f"{runs} distributed run{'s' if runs != 1 else ''}"]
