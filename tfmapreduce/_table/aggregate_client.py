"""An aggregation of a small client table made with numpy on the client: the same result as the keyed run's
(``aggregate.aggregate``), finished by the same code, for the ops whose partials numpy makes alike (``CLIENT_OPS``).

Each group's partials are reduced over the rows sorted by the keys (nulls last, as the run gives its groups): a count
of the valid values, a sum in the run's dtype (floats in float64, integers and bools in int64, uint64 in uint64), and
a min or max as the value of least or greatest rank among the column's sorted values (any type, strings included).

Example:
    >>> t = Table({"k": made(STRING, np.array(["b", "a", "b"], object), None), "v": made(INT64, np.array([1, 2, 3]), None)})
    >>> out = aggregated(t, ["k"], [Aggregate("n", "*", "size"), Aggregate("s", "v", "sum")])
    >>> out.to_dict()["k"].tolist(), out.to_dict()["s"].tolist()
    (['a', 'b'], [2, 4])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .aggregate import Aggregate, _empty, _finish, sort_order
from .column import Column, made
from .groups import finished
from .ops import INT64, holistic, type_of
from .schema import STRING
from .table import Table

CLIENT_OPS = frozenset({"size", "count", "sum", "mean", "min", "max"})
"""The ops an aggregation on the client makes; another op (a median, a top-k, a distinct count) takes the keyed run."""


def can_aggregate(table: Table, keys: Sequence[str], aggregates: Sequence[Aggregate]) -> bool:
    """Whether :func:`aggregated` makes these aggregates: ops of ``CLIENT_OPS``, no list column among the keys and values."""
    used = [*keys, *(a.column for a in aggregates if a.column != "*")]
    return all(a.op in CLIENT_OPS for a in aggregates) and all(table.column(n).type.inner is None for n in used)


def aggregated(table: Table, keys: Sequence[str], aggregates: Sequence[Aggregate]) -> Table:
    """The keys' groups of ``table`` (sorted by the keys, nulls last; no keys: one row) with ``aggregates``, as
    ``table.group_by(keys).agg(...)`` gives them, made on the client (see :func:`can_aggregate`).

    Raises:
        TypeError: an op that does not apply to its column's type (a sum of strings), as the run raises it.
    """
    types = {n: table.column(n).type for n in table.columns}
    for a in aggregates:
        if a.column != "*":
            type_of(a.op, types[a.column], a.output)
    rows = len(table)
    if rows == 0:
        return Table(_empty(types, keys, aggregates))
    order = sort_order([table.column(k) for k in keys]) if keys else np.arange(rows)
    change = np.zeros(rows, bool)
    change[0] = True
    for k in keys:
        column = table.column(k).take(order)
        change[1:] |= _differs(column.values)
        if column.valid is not None:
            change[1:] |= column.valid[1:] != column.valid[:-1]
    starts = np.flatnonzero(change)
    out: dict[str, Column] = {k: table.column(k).take(order[starts]) for k in keys}
    for a in aggregates:
        if a.op == "size":
            out[a.output] = made(INT64, np.diff(np.append(starts, rows)), None)
            continue
        column = table.column(a.column)
        valid = np.ones(rows, bool) if column.valid is None else column.valid
        count = np.add.reduceat(valid[order].astype(np.int64), starts)
        partial = [count] if a.op == "count" else [_reduced(a.op, column, valid, order, starts), count]
        done = finished if holistic(a.op, column.type) else _finish
        out[a.output] = done(a.op, column.type, partial, a.output)
    return Table(out)


def _differs(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Whether each value differs from the one before it (floats by their bits: NaN meets NaN, as in the run's keys)."""
    if values.dtype.kind == "f":
        values = values.view(f"u{values.dtype.itemsize}")
    differs: np.ndarray[Any, Any] = values[1:] != values[:-1]
    return differs


def _reduced(
    op: str, column: Column, valid: np.ndarray[Any, Any], order: np.ndarray[Any, Any], starts: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    """Each group's sum (``"sum"``, ``"mean"``), least or greatest valid value (``"min"``, ``"max"``; a filler where
    the group has none) of ``column``, its rows taken in ``order`` and the groups starting at ``starts``."""
    values = column.values
    if op in ("sum", "mean"):
        dtype = np.float64 if values.dtype.kind == "f" else np.uint64 if values.dtype == np.uint64 else np.int64
        summed: np.ndarray[Any, Any] = np.add.reduceat(np.where(valid, values, 0).astype(dtype)[order], starts)
        return summed
    ranked = sort_order([Column(column.type, values)])  # the values ascending: a group's extreme is its extreme rank
    rank = np.empty(len(values), np.int64)
    rank[ranked] = np.arange(len(values))
    if op == "min":
        best = np.minimum.reduceat(np.where(valid, rank, len(values))[order], starts)
    else:
        best = np.maximum.reduceat(np.where(valid, rank, -1)[order], starts)
    picked: np.ndarray[Any, Any] = values[ranked[np.clip(best, 0, len(values) - 1)]]
    return picked if column.type != STRING else picked.astype(object)
