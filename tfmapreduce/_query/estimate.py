"""Estimated rows and bytes of each node of a plan, before anything runs: a frozen ``Estimate`` from what is known
without running, and fixed heuristics where the data decide.

- a client table: its row count, each column's width from its dtype (a string column: the mean UTF-8 length of its
  first 1000 values, plus 8 bytes of pointer);
- a Parquet scan: the row groups' row counts and each column's uncompressed size in the footers;
- a CSV scan: the files' bytes over the mean bytes of a record in the first MiB of the first file, each string
  column's width its fields' mean length there (plus 8), the others their type's;
- a filter keeps a fixed fraction (DuckDB's and Spark's kind of defaults): ``==``, ``isin``, string matches and
  ``is_null`` 0.2, ``!=`` 0.8, a range (``<``, ``<=``, ``>``, ``>=``) 1/3, ``a & b`` the product, ``a | b``
  ``a + b - a·b``, ``~a`` ``1 - a``, a traced function 0.2 (``between`` is two ranges: 1/9);
- an inner key join: a side's rows times the fraction of its source rows the other side's filters kept, the larger
  of the two (a foreign key meets its primary key: each row of the foreign key's side matches at most one of the
  other, which the other's filters may have dropped); a left (right, outer) join at least its kept side(s); a semi
  join the left's rows times the right's fraction, an anti join times the rest (at least 0.1);
- a group-by (and ``unique``) a tenth of its input's rows (one row without keys), a limit its ``n``, an explode
  four times its input's rows.

Example: ``estimate(plan).rows``; ``str(estimate(plan))`` is ``"~1200 rows, ~37.5 KiB"``.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import attrs

from .._io.files.csv_scan import CsvScan
from .._io.files.parquet import ParquetPlan
from .._table.parquet import column_type
from .._table.schema import STRING
from .expr import ARITHMETIC, MATCHES, Alias, Col, Expr, Op
from .plan import (
    Aggregated,
    Apply,
    Assign,
    Bound,
    CsvFiles,
    Distinct,
    Exploded,
    Fused,
    Joined,
    Keep,
    Limited,
    Node,
    ParquetFiles,
    Scan,
    Where,
    inputs,
    join_names,
)

EQUAL, RANGE, OPAQUE = 0.2, 1 / 3, 0.2
"""The fractions of rows a filter keeps: an equality, a range, a condition the planner cannot read."""
GROUPS = 0.1
"""The fraction of its input's rows a group-by (or ``unique``) gives."""
ELEMENTS = 4
"""The rows an explode gives for each of its input's rows (the mean length of a list)."""
SAMPLE = 1000
"""The string values of a client table measured for its column's width."""


@attrs.frozen
class Estimate:
    """A node's estimated ``rows`` and ``bytes``, ``kept`` the fraction of its sources' rows its filters keep (what a
    join it meets keeps of the other side), ``widths`` each column's bytes per row."""

    rows: int
    bytes: int
    kept: float
    widths: tuple[tuple[str, float], ...]

    def __str__(self) -> str:
        return f"~{self.rows} row{'' if self.rows == 1 else 's'}, ~{_size(self.bytes)}"


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _of(rows: float, widths: dict[str, float], kept: float) -> Estimate:
    whole = max(round(rows), 0)
    return Estimate(whole, round(whole * sum(widths.values())), min(max(kept, 0.0), 1.0), tuple(widths.items()))


def estimates(plan: Node) -> dict[int, Estimate]:
    """Every node's estimate, by ``id`` of the node (each node estimated once, however many nodes read it)."""
    done: dict[int, Estimate] = {}

    def visit(node: Node) -> Estimate:
        if id(node) not in done:
            done[id(node)] = _estimate(node, [visit(i) for i in inputs(node)])
        return done[id(node)]

    visit(plan)
    return done


def estimate(plan: Node) -> Estimate:
    """The estimate of ``plan``'s root."""
    return estimates(plan)[id(plan)]


def _estimate(node: Node, below: list[Estimate]) -> Estimate:
    if isinstance(node, Scan):
        chosen = node.columns if node.columns is not None else node.table.columns
        return _of(len(node.table), {c: _width(node.table.column(c)) for c in chosen}, 1.0)
    if isinstance(node, ParquetFiles):
        total = sum(g.rows for g in node.source.row_groups)
        sizes = dict(node.sizes)
        chosen = node.columns if node.columns is not None else node.source.columns
        return _of(total, {c: sizes[c] / total if total else 0.0 for c in chosen}, 1.0)
    if isinstance(node, CsvFiles):
        widths = dict(node.widths)
        return _of(node.rows, {c: widths[c] for c in (node.columns or node.source.columns)}, 1.0)
    if isinstance(node, Bound):
        return below[-1]  # the plan's own estimate (its scalar subqueries: one row each)
    (first, *other) = below
    widths = dict(first.widths)
    if isinstance(node, (Where, Apply, Fused, Assign, Keep)):
        return _stepped(node.steps if isinstance(node, Fused) else [_step(node)], first)
    if isinstance(node, Joined):
        return _join(node, first, other[0])
    if isinstance(node, (Aggregated, Distinct)):
        if isinstance(node, Aggregated) and node.steps:  # the fused steps it runs in its own map, first
            first = _stepped(node.steps, first)
            widths = dict(first.widths)
        keys = node.keys if isinstance(node, Aggregated) else node.columns
        out = {k: widths.get(k, 8.0) for k in keys}
        if isinstance(node, Aggregated):
            out.update({o: 8.0 for o, _, _ in node.aggs})
        return _of(max(first.rows * GROUPS, 1.0) if keys else 1.0, out, first.kept)
    if isinstance(node, Exploded):
        return _of(first.rows * ELEMENTS, widths, first.kept)
    n = node.n if isinstance(node, Limited) else node.limit
    return _of(first.rows if n is None else min(n, first.rows), widths, first.kept)


def _stepped(steps: Any, first: Estimate) -> Estimate:
    """The estimate of row-wise ``steps`` (a ``Fused``'s) over ``first``."""
    widths = dict(first.widths)
    rows, kept = float(first.rows), first.kept
    for verb, arg in steps:
        if verb in ("where", "apply-filter"):
            fraction = selectivity(arg) if verb == "where" else OPAQUE
            rows, kept = rows * fraction, kept * fraction
        elif verb == "assign":
            widths.update({n: _expr_width(e, widths) for n, e in arg})
        elif verb == "keep":
            widths = {n: widths.get(n, 8.0) for n in arg}
    return _of(rows, widths, kept)


def _step(node: Where | Apply | Assign | Keep) -> tuple[str, Any]:
    if isinstance(node, Where):
        return ("where", node.predicate)
    if isinstance(node, Apply):
        return ("apply-filter" if node.verb == "filter" else "apply", None)
    if isinstance(node, Assign):
        return ("assign", node.columns)
    return ("keep", node.names)


def _join(node: Joined, left: Estimate, right: Estimate) -> Estimate:
    lw, rw = dict(left.widths), dict(right.widths)
    columns = join_names(node)  # none where a side's columns are decided by a step the planner does not read
    widths = {out: (rw if side == "right" else lw).get(src, 8.0) for out, side, src in columns} or {**rw, **lw}
    if node.how in ("semi", "anti"):
        fraction = right.kept if node.how == "semi" else max(1.0 - right.kept, 0.1)
        return _of(left.rows * fraction, widths, left.kept * fraction)
    rows = max(left.rows * right.kept, right.rows * left.kept)
    kept = left.kept * right.kept
    if node.how in ("left", "outer"):
        rows, kept = max(rows, left.rows), max(kept, left.kept)
    if node.how in ("right", "outer"):
        rows, kept = max(rows, right.rows), max(kept, right.kept)
    return _of(rows, widths, kept)


def selectivity(predicate: Expr) -> float:
    """The fraction of rows a filter by ``predicate`` keeps (the module's fixed fractions)."""
    if not isinstance(predicate, Op):
        return OPAQUE
    op = predicate.op
    if op == "and":
        return selectivity(predicate.args[0]) * selectivity(predicate.args[1])
    if op == "or":
        a, b = selectivity(predicate.args[0]), selectivity(predicate.args[1])
        return a + b - a * b
    if op == "not":
        return 1.0 - selectivity(predicate.args[0])
    if op == "ne":
        return 1.0 - EQUAL
    if op in ("lt", "le", "gt", "ge"):
        return RANGE
    return EQUAL if op in ("eq", "isin", "is_null", *MATCHES) else OPAQUE


def _width(column: Any) -> float:
    """Bytes per row of a client table's column."""
    if column.type != STRING:
        return float(column.type.storage.itemsize)
    first = column.values[:SAMPLE]
    return 8.0 + (len("".join(map(str, first.tolist())).encode()) / len(first) if len(first) else 0.0)


def _expr_width(expr: Expr, widths: dict[str, float]) -> float:
    """Bytes per row of a computed column: a column's own width (``substr`` its string's), a condition 1, else 8."""
    if isinstance(expr, Col):
        return widths.get(expr.name, 8.0)
    if isinstance(expr, Alias) or (isinstance(expr, Op) and expr.op == "substr"):
        return _expr_width(expr.arg if isinstance(expr, Alias) else expr.args[0], widths)
    if isinstance(expr, Op) and expr.op not in (*ARITHMETIC, "year", "if"):
        return 1.0
    return 8.0


def parquet_sizes(source: ParquetPlan) -> tuple[tuple[str, int], ...]:
    """Each column of ``source``: its uncompressed bytes over the row groups read, from the footers' statistics the
    plan keeps (no file is opened; 0 where a plan made by hand keeps none)."""
    groups = () if source.footers is None else source.footers.groups
    return tuple((name, sum(g[index].size for g in groups)) for name, index in zip(source.columns, source.indices, strict=True))


def csv_sizes(scan: CsvScan, sample: int = 1 << 20) -> tuple[int, tuple[tuple[str, float], ...]]:
    """The rows of ``scan``'s files and each column's bytes a row, from its files' sizes and the whole records of the
    first ``sample`` bytes of its first file (the header left out)."""
    with open(scan.files[0], "rb") as f:
        head = f.read(sample)
    if len(head) == sample:  # whole records only
        head = head[: head.rfind(b"\n") + 1] or head
    text = head.decode("utf-8-sig", errors="replace")
    records = [r for r in csv.reader(io.StringIO(text), delimiter=scan.delimiter) if r]
    skipped = len(text.split("\n", 1)[0]) + 1 if scan.header else 0
    body = records[1:] if scan.header else records
    every = sum(scan.sizes) - skipped * len(scan.files)
    rows = round(every * len(body) / max(len(head) - skipped, 1)) if body else 0
    widths = []
    for i, (name, kind) in enumerate(zip(scan.columns, scan.kinds, strict=True)):
        fields = [len(r[i]) for r in body if i < len(r)]
        text_width = 8.0 + (sum(fields) / len(fields) if fields else 0.0)
        widths.append((name, text_width if kind == "string" else float(column_type(kind).storage.itemsize)))
    return rows, tuple(widths)
