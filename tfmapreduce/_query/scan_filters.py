"""``scan_filters``, an optimizer rule (plan → plan): the filters that sit directly on a Parquet scan (after
``push_predicates``) and compare one column with a literal become the scan's ``filters=``, so a row group whose
min/max statistics exclude them is not read and the rows that fail them are dropped where they are decoded.

The filters themselves stay above the scan (the statistics are coarse, and the scan's own row filter is only ever
a superset of theirs). A conjunct is taken where it is ``col <op> literal`` (or ``literal <op> col``) with ``op``
one of ``<``, ``<=``, ``>``, ``>=``, ``==``, or ``col.isin([...])``, and the literal is the column's own kind, held
exactly in its storage: an int in an int column's range, an int or float a float column holds exactly, a
``datetime.date`` for a date column, a ``str`` for a string column (``==`` and ``isin`` only). Anything else (an
``|``, a traced function, two columns, a computed column, a bool or timestamp column) is left alone. The scan must
have no other reader (another reader would lose the rows these filters drop).

Example: ``tmr.lazy(tmr.plan_parquet(path)).filter(col("day") >= datetime.date(1994, 1, 1))`` reads only the row
groups whose ``day`` reaches 1994; ``explain()`` prints ``scan parquet of 1 files, 2 row groups, 3 skipped by
[day >= 1994-01-01]``.
"""

from __future__ import annotations

import datetime
from typing import Any

import attrs
import numpy as np

from .._io.files.parquet import plan as plan_files
from .estimate import parquet_sizes
from .expr import Col, Expr, Lit, Op
from .plan import Node, ParquetFiles, Where, inputs, readers, with_inputs

FLIPPED = {"lt": ">", "le": ">=", "gt": "<", "ge": "<=", "eq": "=="}
"""Each comparison a scan's filter takes, as the scan spells it with the column on the right."""
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
    if not taken:
        return scan
    filters = (*scan.filters, *taken)
    source = plan_files(list(scan.source.files), list(scan.source.columns), list(filters))
    return attrs.evolve(scan, source=source, sizes=parquet_sizes(source), filters=filters)


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
