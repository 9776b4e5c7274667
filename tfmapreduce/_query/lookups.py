"""``lookup_joins``, an optimizer rule (plan → plan): a join of a larger left side with a small right side, on one
integer (or date) key, becomes a lookup inside the row-wise step that reads the join, so the join costs no
distributed run of its own: the small side is computed first (one ``table(i)`` of the plan's ``Bound`` root), its
key and columns travel whole to every worker as the run's inputs (not graph constants: new data of the same sizes
compiles nothing), and each left row finds its key there by a binary search (sorted keys, ``tf.searchsorted``).

- a semi join keeps the left rows whose key is found (``col(k).found_in(table(i))``), an anti join the others (a
  null key is never found: an anti join keeps its row, as the eager join does);
- an inner join keeps the found rows and takes each right column at the found row
  (``col(k).lookup(table(i), 'c')``); a left join keeps every row, the right columns null where none is found.

The steps are a filter, new columns and a select, which ``fuse`` and ``into_aggregates`` put in the map of the step
that reads the join (a group-by's, another filter's, or the next lookup's): a chain of small joins and a group-by
is one keyed run. The rule applies where the right side is estimated at most ``LOOKUP_ROWS`` rows (and a left side
above ``LARGE_LEFT`` rows is estimated to keep at least ``KEEPS`` of its rows), both keys are columns of a client
table of an integer or date type (``DATE``), and, for an inner or left join, the right side is
unique on its key (known from the plan: a client table's column checked once, a group-by by that key, a filter or a
join that keeps it unique): a right key met twice would give a left row twice, which a lookup cannot. String
columns of the right side travel as their Unicode code points (run inputs too), made strings on the workers.

Example: ``lines.join(nation.filter(col("n_name") == "FRANCE"), left_on="l_nation", right_on="n_nationkey",
how="semi").group_by("l_part").agg(...)`` is one keyed run, its map keeping the French lines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from .._table.column import Column
from .._table.ops import OPS
from .._table.schema import DATE, STRING, ColumnType
from .._table.table import Table
from .estimate import estimate
from .expr import Col, Expr, Lit, Op, Rows
from .plan import (
    Aggregated,
    Assign,
    Bound,
    Distinct,
    Joined,
    Keep,
    Limited,
    Node,
    Scan,
    Sorted,
    Where,
    join_names,
    names,
    rebuilt,
)

LOOKUP_ROWS = 100_000
"""The most rows the right side may be estimated at: its keys and columns travel to every worker with each run
(TPC-H sf1: supplier's 10,000 rows, nation's 25, a part filter's ~40,000 estimated)."""

LARGE_LEFT = 100_000
KEEPS = 0.5
"""A left side estimated above ``LARGE_LEFT`` rows is looked up only where the join is estimated to keep at least
``KEEPS`` of its rows: the step that reads a lookup ships its columns for every left row, where a join run ships the
keys alone and the step then reads the rows kept (TPC-H Q19 at scale 1: lineitem's strings for 7e5 rows, not
for the few of the parts kept)."""

HOWS = ("inner", "left", "semi", "anti")


def found(key: Expr, at: int) -> Op:
    """Whether ``key`` is among the keys of ``table(at)`` (never null: a null key is not found)."""
    return Op("found_in", (key, Rows(at)))


def looked(key: Expr, at: int, column: str) -> Op:
    """``column`` of ``table(at)`` at the row whose key is ``key`` (null where none is, or the value is)."""
    return Op("lookup", (key, Rows(at), Lit(column)))


@attrs.frozen(eq=False)
class LookupTable:
    """A small side ready for lookups: ``keys`` its non-null keys sorted (int64), padded with the last one to a
    power of two longer than ``count`` (so sizes close by share a compiled program), ``order`` each sorted key's row
    in ``table``."""

    table: Table
    keys: np.ndarray[Any, Any]
    count: int
    order: np.ndarray[Any, Any]

    @classmethod
    def of(cls, table: Table, key: str) -> LookupTable:
        """``table`` ready for lookups of ``key`` (an integer or date column).

        Raises:
            TypeError: ``key`` is not of an integer or date type.
        """
        column = table.column(key)
        if not _keyed(column.type):
            raise TypeError(f"lookup: the key {key!r} must be an integer or date column, got {column.type.name}")
        rows = np.arange(len(column)) if column.valid is None else np.flatnonzero(column.valid)
        values = column.values[rows].astype(np.int64)
        sort = np.argsort(values, kind="stable")
        count = len(rows)
        width = _padded(count)
        keys = np.full(width, values[sort[-1]] if count else 0, np.int64)
        keys[:count] = values[sort]
        return cls(table, keys, count, rows[sort])

    def inputs(self, column: str | None) -> list[np.ndarray[Any, Any]]:
        """The run inputs of a lookup: the keys and their count, then ``column``'s values in key order (padded; UTF-8
        bytes for strings) and, where it holds nulls, their validity."""
        out = [self.keys, np.array(self.count, np.int64)]
        if column is None:
            return out
        source = self.table.column(column)
        width = len(self.keys)
        if source.type == STRING:  # Unicode code points (a run's inputs are numbers) and each string's length
            texts = [[ord(ch) for ch in str(v)] for v in source.values[self.order]]
            points = np.zeros((width, _padded(max((len(t) for t in texts), default=0))), np.int32)
            lengths = np.zeros(width, np.int64)
            for row, text in enumerate(texts):
                points[row, : len(text)] = text
                lengths[row] = len(text)
            out.append(points)
            values = lengths
        else:
            values = np.zeros(width, source.values.dtype)
            values[: self.count] = source.values[self.order]
        out.append(values)
        if source.valid is not None:
            valid = np.zeros(width, bool)
            valid[: self.count] = source.valid[self.order]
            out.append(valid)
        return out

    def kind(self, column: str) -> tuple[ColumnType, bool]:
        """``column``'s type and whether it holds nulls."""
        source = self.table.column(column)
        return source.type, source.valid is not None

    def shape(self, column: str | None) -> tuple[Any, ...]:
        """What a compiled lookup depends on: the inputs' dtypes and lengths, not their values."""
        return ("table", *((a.dtype.str, a.shape) for a in self.inputs(column)))


def _padded(n: int) -> int:
    """The power of two above ``n`` (at least 1 more)."""
    return 1 << int(n).bit_length()


def _keyed(kind: ColumnType) -> bool:
    return kind == DATE or (kind.is_numeric and kind.storage.kind in "iu")


def lookup_joins(plan: Node) -> Node:
    """Each join of a small right side (one integer or date key; unique on it, unless a semi or anti join) as a
    filter and new columns of its left side that look the key up in ``table(i)``, a query of the ``Bound`` root."""
    base = len(plan.queries) if isinstance(plan, Bound) else 0
    queries: list[Node] = []
    tables: list[tuple[int, str]] = []
    index: dict[tuple[int, str], int] = {}

    def table(at: int) -> Node | None:
        return queries[at - base] if at >= base else None

    def step(node: Node) -> Node:
        if not isinstance(node, Joined) or not _applies(node, table):
            return node
        key = node.right_on[0]
        at = index.get((id(node.right), key))
        if at is None:
            at = index[(id(node.right), key)] = base + len(queries)
            queries.append(node.right)
            tables.append((at, key))
        return _rewritten(node, at)

    root = rebuilt(plan, step)  # a scalar subquery's joins too: queries run when a step reads them (execute.py)
    if not queries:
        return root
    if isinstance(root, Bound):
        return Bound(root.input, (*root.queries, *queries), (*root.tables, *tables))
    return Bound(root, tuple(queries), tuple(tables))


def _rewritten(node: Joined, at: int) -> Node:
    hit = found(Col(node.left_on[0]), at)
    if node.how in ("semi", "anti"):
        return Where(node.left, hit if node.how == "semi" else Op("not", (hit,)))
    columns = tuple((out, looked(Col(node.left_on[0]), at, src)) for out, side, src in join_names(node) if side == "right")
    left = Where(node.left, hit) if node.how == "inner" else node.left
    return Keep(Assign(left, columns) if columns else left, names(node) or ())


def _applies(node: Joined, table: Callable[[int], Node | None]) -> bool:
    if node.how not in HOWS or len(node.left_on) != 1 or not join_names(node):
        return False
    left, right = _source(node.left, node.left_on[0], table), _source(node.right, node.right_on[0], table)
    if left is None or right is None or not _keyed(left.type) or not _keyed(right.type):
        return False
    if (left.type == DATE) != (right.type == DATE):  # a date meets a date only, as the eager join
        return False
    if estimate(node.right).rows > LOOKUP_ROWS:
        return False
    left_rows = estimate(node.left).rows
    if left_rows > LARGE_LEFT and estimate(node).rows < KEEPS * left_rows:
        return False  # a join that drops most rows of a large side: its run first, so the next step ships fewer
    if node.how in ("semi", "anti"):
        return True
    brought = [src for _, side, src in join_names(node) if side == "right"]
    if not all(_plain(node.right, c, table) for c in brought):
        return False
    return _unique(node.right, node.right_on[0])


def _plain(node: Node, name: str, table: Callable[[int], Node | None]) -> bool:
    """Whether ``name`` of ``node`` is known to be a column of single values (not lists): a client table's, or a
    group-by's aggregate by name (a sum, a count...)."""
    source = _source(node, name, table)
    if source is not None:
        return source.type.inner is None
    while isinstance(node, (Where, Sorted, Limited, Keep)) or (
        isinstance(node, Assign) and name not in {n for n, _ in node.columns}
    ):
        node = node.input
    return isinstance(node, Aggregated) and any(out == name and op in OPS for out, _, op in node.aggs)


def _source(node: Node, name: str, table: Callable[[int], Node | None]) -> Column | None:
    """The client table's column that ``name`` of ``node`` passes through unchanged (or looks up in ``table(i)``, a
    lookup this rule made); None where it is computed or read from files."""
    if isinstance(node, Scan):
        return node.table.column(name) if name in (names(node) or ()) else None
    made = dict(node.columns) if isinstance(node, Assign) else {}
    if name in made:
        expr = made[name]
        if isinstance(expr, Op) and expr.op == "lookup" and isinstance(expr.args[1], Rows):
            looked_in = table(expr.args[1].index)
            column = expr.args[2].value  # type: ignore[attr-defined]
            return None if looked_in is None else _source(looked_in, column, table)
        return None
    if isinstance(node, (Where, Sorted, Limited, Keep, Distinct, Assign)):
        return _source(node.input, name, table)
    if isinstance(node, Aggregated) and not node.steps and name in node.keys:
        return _source(node.input, name, table)
    if isinstance(node, Joined):
        sides = {out: (side, src) for out, side, src in join_names(node)}
        if name in sides:
            side, src = sides[name]
            return _source(node.right if side == "right" else node.left, src, table)
    return None


_UNIQUE: dict[int, tuple[Column, bool]] = {}
"""Whether a client table's column holds each non-null value once, by the column's ``id`` (the column kept with it)."""


def _unique(node: Node, name: str) -> bool:
    """Whether ``node``'s column ``name`` is known to hold each non-null value at most once."""
    if isinstance(node, Scan):
        column = node.table.column(name)
        kept = _UNIQUE.get(id(column))
        if kept is None or kept[0] is not column:
            values = column.values if column.valid is None else column.values[column.valid]
            kept = _UNIQUE[id(column)] = (column, len(np.unique(values)) == len(values))
        return kept[1]
    if isinstance(node, (Where, Sorted, Limited, Keep)) or (
        isinstance(node, Assign) and name not in {n for n, _ in node.columns}
    ):
        return _unique(node.input, name)
    if isinstance(node, (Aggregated, Distinct)):
        return (node.keys if isinstance(node, Aggregated) else node.columns) == (name,)
    if isinstance(node, Joined):
        sides = {out: (side, src) for out, side, src in join_names(node)}
        side, src = sides.get(name, ("", ""))
        one = len(node.left_on) == 1
        if side in ("key", "left"):
            meets_once = node.how in ("semi", "anti") or (one and _unique(node.right, node.right_on[0]))
            return meets_once and _unique(node.left, src)
        if side == "right" and node.how == "inner":
            return one and _unique(node.left, node.left_on[0]) and _unique(node.right, src)
    return False
