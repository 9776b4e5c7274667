"""``scan_filters``, an optimizer rule (plan → plan): the filters that sit directly on a Parquet scan (after
``push_predicates``) and compare one column with a literal become the scan's ``filters=``, so a row group whose
min/max statistics exclude them is not read and the rows that fail them are dropped where they are decoded.

The filters themselves stay above the scan (the statistics are coarse, and the scan's own row filter is only ever
a superset of theirs). A conjunct is taken where it is ``col <op> literal`` (or ``literal <op> col``) with ``op``
one of ``<``, ``<=``, ``>``, ``>=``, ``==``, or ``col.isin([...])``, and the literal is the column's own kind, held
exactly in its storage: an int in an int column's range, an int or float a float column holds exactly, a
``datetime.date`` for a date column, a ``str`` for a string column (``==`` and ``isin`` only). Anything else (an
``|``, a traced function, two columns, a computed column, a bool or timestamp column) is left alone. The scan must
have no other reader (another reader would lose the rows these filters drop), and the conditions must be estimated
to keep at most ``KEPT`` of its rows (from the row groups' min/max: see ``kept``).
The scan's filter values are its run's inputs, not constants of its graph: the query with another number or date
that reads the same row groups runs the scan's compiled program (a string value is in the graph).

Example: ``tmr.lazy(tmr.plan_parquet(path)).filter(col("day") >= datetime.date(1994, 1, 1))`` reads only the row
groups whose ``day`` reaches 1994; ``explain()`` prints ``scan parquet of 1 files, 2 row groups, 3 skipped by
[day >= 1994-01-01]``.
"""

from __future__ import annotations

import datetime
from typing import Any

import attrs
import numpy as np

from .._io.files.parquet import ParquetPlan, narrowed
from .estimate import EQUAL, parquet_sizes
from .expr import Col, Expr, Lit, Op
from .plan import Node, ParquetFiles, Where, inputs, readers, with_inputs

FLIPPED = {"lt": ">", "le": ">=", "gt": "<", "ge": "<=", "eq": "=="}
"""Each comparison a scan's filter takes, as the scan spells it with the column on the right."""
KEPT = 0.5
"""The largest fraction of the rows the conditions may be estimated to keep for the scan to take them: dropping rows
where they are decoded costs a copy of every column read, which pays only where most rows go (TPC-H Q1's ship date
keeps 97% of lineitem: left to the filter)."""
EPOCH = datetime.date(1970, 1, 1)
SPELLED = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "=="}
"""Each comparison a scan's filter takes, as the scan spells it (pyarrow's ``filters=``)."""


def scan_filters(plan: Node) -> Node:
    """Each Parquet scan read by a chain of filters alone, with those filters' column-literal comparisons as its
    ``filters=`` (the filters kept above it)."""
    read = readers(plan)
    done: dict[int, Node] = {}

    def visit(node: Node) -> Node:
        if id(node) not in done:
            chain, below = [], node
            while isinstance(below, Where) and (below is node or read[id(below)] == 1):
                chain.append(below.predicate)
                below = below.input
            if chain and isinstance(below, ParquetFiles) and read[id(below)] == 1:
                out: Node = filtered(below, chain)
                for predicate in reversed(chain):
                    out = Where(out, predicate)
                done[id(node)] = out
            else:
                done[id(node)] = with_inputs(node, tuple(visit(i) for i in inputs(node)))
        return done[id(node)]

    return visit(plan)


def filtered(scan: ParquetFiles, predicates: list[Expr]) -> ParquetFiles:
    """``scan`` with the conditions of ``predicates`` it can take added to its filters (its row groups planned again)."""
    kinds = dict(zip(scan.source.columns, scan.source.kinds, strict=True))
    taken = [c for p in predicates if (c := condition(p, kinds)) is not None and c not in scan.filters]
    if not taken or scan.source.footers is None or kept(taken, scan.source) > KEPT:
        return scan
    source = narrowed(scan.source, taken)
    return attrs.evolve(scan, source=source, sizes=parquet_sizes(source), filters=(*scan.filters, *taken))


def kept(conditions: list[tuple[str, str, Any]], source: ParquetPlan) -> float:
    """The fraction of the rows of ``source`` that ``conditions`` are estimated to keep: a range the part of the
    column's ``[min, max]`` over the row groups read (their footers' statistics) that it keeps, ranges of one column
    intersected, an equality or ``in`` ``EQUAL``, the product over the columns (a column without statistics: 1)."""
    fraction = 1.0
    for column in dict.fromkeys(c for c, _, _ in conditions):
        ops = [(op, v) for c, op, v in conditions if c == column]
        if any(op in ("==", "in") for op, _ in ops):
            fraction *= EQUAL
            continue
        bounds = _bounds(source, column)
        if bounds is None or bounds[1] <= bounds[0]:
            continue
        low, high = bounds
        for op, v in ops:
            at = _number(v)
            low, high = (low, min(high, at)) if op in ("<", "<=") else (max(low, at), high)
        fraction *= max(0.0, high - low) / (bounds[1] - bounds[0])
    return fraction


def _bounds(source: ParquetPlan, column: str) -> tuple[float, float] | None:
    """The least minimum and the greatest maximum of ``column`` over the row groups read (the footers' statistics the
    plan keeps: no file is opened), or None (no statistics)."""
    if source.footers is None:
        return None
    index = source.footers.names.index(column)
    stats = [group[index] for group in source.footers.groups]
    if not stats or any(s.low is None or s.high is None for s in stats):
        return None
    return min(_number(s.low) for s in stats), max(_number(s.high) for s in stats)


def _number(value: Any) -> float:
    """A statistic or a filter's value on one axis: a date as days since 1970, a number as itself."""
    if isinstance(value, datetime.date):
        return float((value - EPOCH).days)
    return float(value)


def condition(predicate: Expr, kinds: dict[str, str]) -> tuple[str, str, Any] | None:
    """``predicate`` as a scan's ``(column, op, value)`` filter, or None where a scan cannot take it exactly."""
    if not isinstance(predicate, Op) or len(predicate.args) != 2:
        return None
    first, second = predicate.args
    if predicate.op == "isin" and isinstance(first, Col) and isinstance(second, Lit):
        column, op, values = first.name, "in", second.value
    elif predicate.op in SPELLED and isinstance(first, Col) and isinstance(second, Lit):
        column, op, values = first.name, SPELLED[predicate.op], (second.value,)
    elif predicate.op in FLIPPED and isinstance(first, Lit) and isinstance(second, Col):
        column, op, values = second.name, FLIPPED[predicate.op], (first.value,)
    else:
        return None
    kind = kinds.get(column)
    if kind is None or not all(_exact(v, kind, op) for v in values):
        return None
    return (column, op, tuple(values) if op == "in" else values[0])


def _exact(value: Any, kind: str, op: str) -> bool:
    """Whether ``value`` compares with a column of ``kind`` in the scan as it does in the query's expression."""
    if kind == "string":
        return isinstance(value, str) and op in ("==", "in")
    if kind == "date":
        return isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)
    if kind.startswith(("int", "uint")):
        info = np.iinfo(kind)
        return isinstance(value, int) and not isinstance(value, bool) and int(info.min) <= value <= int(info.max)
    if kind.startswith("float"):
        return isinstance(value, (int, float)) and not isinstance(value, bool) and float(np.dtype(kind).type(value)) == value
    return False  # bool, timestamps: not taken
