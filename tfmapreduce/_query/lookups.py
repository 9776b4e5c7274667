"""``lookup_joins``, an optimizer rule (plan → plan): a join of a larger left side with a small right side, on integer,
date or string keys (one or several), becomes a lookup inside the row-wise step that reads the join, so the join
costs no distributed run of its own: the small side is computed first (one ``table(i)`` of the plan's ``Bound``
root), its key and columns travel whole to every worker as the run's inputs (not graph constants: new data of the
same sizes compiles nothing), and each left row finds its key there by a binary search (sorted keys,
``tf.searchsorted``).
A string key or several keys are coded first (``lookup_table.KeyPart``): each key column's value is ranked among the small side's
distinct values of it (a string by its 64-bit fingerprint, then compared whole), and the ranks make one int64 key
(``keys(col(a), col(b)).found_in(table(i))``).

- a semi join keeps the left rows whose key is found (``col(k).found_in(table(i))``), an anti join the others (a
  null key is never found: an anti join keeps its row, as the eager join does);
- an inner join keeps the found rows and takes each right column at the found row
  (``col(k).lookup(table(i), 'c')``); a left join keeps every row, the right columns null where none is found.

The steps are a filter, new columns and a select, which ``fuse`` and ``into_aggregates`` put in the map of the step
that reads the join (a group-by's, another filter's, or the next lookup's): a chain of small joins and a group-by is
one keyed run. The rule applies where the right side is estimated at most ``LOOKUP_ROWS`` rows (and a left side
above ``LARGE_LEFT`` rows is estimated to keep at least ``KEEPS`` of its rows), each key pair are columns of a
client table or of files (Parquet, CSV: their planned types) of an integer, date (``DATE``) or string type (a string meets a string, a date a date), and, for an
inner or left join, the right side is unique on its keys (known from the plan, ``unique_on``: one key a client
table's column checked once, a group-by by that key, a filter or a join that keeps it unique; several keys, one of
them unique, the client table's rows checked once, or a group-by by some of them): a right key met twice would give
a left row twice, which a lookup cannot. String columns of the right side travel as their Unicode code points (run
inputs too), made strings on the workers.

An inner join whose small side, unique on its keys, is the left one is swapped (``_swapped``), so the right side
looks the left one up, and a ``with_columns`` and ``select`` give back the unswapped join's columns, names and order:
``region.filter(...).join(nation, ...)`` is the nations' map (TPC-H Q2, Q5, Q8).

Example: ``lines.join(nation.filter(col("n_name") == "FRANCE"), left_on="l_nation", right_on="n_nationkey",
how="semi").group_by("l_part").agg(...)`` is one keyed run, its map keeping the French lines.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._table.column import Column
from .._table.ops import OPS
from .._table.schema import DATE, STRING, ColumnType
from .estimate import estimate
from .expr import Col, Expr, Lit, Op, Rows, substituted, used
from .lookup_table import integer_key
from .plan import (
    Aggregated,
    Assign,
    Bound,
    CsvFiles,
    Distinct,
    Joined,
    Keep,
    Limited,
    Node,
    ParquetFiles,
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


def _file_type(kind: str) -> ColumnType | None:
    """The column type a file's column of ``kind`` (``"int64"``, ``"string"``, ``"date"``...) is read as, where a
    lookup's key may be one; None else (a float, a timestamp, a bool)."""
    if kind in ("string", "date"):
        return STRING if kind == "string" else DATE
    if kind.startswith(("int", "uint")):
        return ColumnType.of(np.dtype(kind))
    return None


def _meet(left: ColumnType, right: ColumnType) -> bool:
    """Whether a left key of type ``left`` is looked up among right keys of type ``right``: integers with integers,
    a date with a date, a string with a string (as the eager join meets them)."""
    if left == STRING or right == STRING:
        return left == right
    return integer_key(left) and integer_key(right) and (left == DATE) == (right == DATE)


def key_of(names: tuple[str, ...]) -> Expr:
    """The left key a lookup finds: a column, or ``keys(col(a), col(b))`` for several."""
    return Col(names[0]) if len(names) == 1 else Op("keys", tuple(Col(n) for n in names))


def lookup_joins(plan: Node) -> Node:
    """Each join of a small right side (integer, date or string keys; unique on them, unless a semi or anti join) as a
    filter and new columns of its left side that look the key up in ``table(i)``, a query of the ``Bound`` root."""
    base = len(plan.queries) if isinstance(plan, Bound) else 0
    queries: list[Node] = []
    tables: list[tuple[int, tuple[str, ...]]] = []
    index: dict[tuple[int, tuple[str, ...]], int] = {}

    def table(at: int) -> Node | None:
        return queries[at - base] if at >= base else None

    def step(node: Node) -> Node:
        if not isinstance(node, Joined):
            return node
        if not _applies(node, table):
            swapped = _swapped(node, table)
            return node if swapped is None else _renamed(node, step(swapped))
        key = tuple(node.right_on)
        right, having = _filtered(node, table)
        at = index.get((id(right), key))
        if at is None:
            at = index[(id(right), key)] = base + len(queries)
            queries.append(right)
            tables.append((at, key))
        return _rewritten(node, at, having)

    root = rebuilt(plan, step)  # a scalar subquery's joins too: queries run when a step reads them (execute.py)
    if not queries:
        return root
    if isinstance(root, Bound):
        return Bound(root.input, (*root.queries, *queries), (*root.tables, *tables))
    return Bound(root, tuple(queries), tuple(tables))


def _filtered(node: Joined, table: Callable[[int], Node | None]) -> tuple[Node, tuple[Expr, ...]]:
    """The node a join's small side is looked up in, and the filters its rows must pass there: the filters on top
    of the right side (a group-by's ``HAVING``, a dimension's filter) are evaluated on the looked-up row in the
    reader's map instead of in a run of their own, where the side below them is small too (``LOOKUP_ROWS``) and
    unique on the keys (a semi join's key met twice, one row passing the filters, the other not, would find one of
    them), the left side is (``LARGE_LEFT``: each left row evaluates them), the join is not a left join (its right
    columns would need nulls where the filters fail) and every column they read is plain. Else ``(node.right, ())``."""
    right, having = node.right, []
    while isinstance(right, (Where, Keep)) and node.how != "left":
        having += [right.predicate] if isinstance(right, Where) else []
        right = right.input
    read = frozenset().union(*(used(p) for p in having))
    if (
        not having
        or estimate(right).rows > LOOKUP_ROWS
        or estimate(node.left).rows > LARGE_LEFT
        or not unique_on(right, tuple(node.right_on))
        or not all(_plain(right, c, table) for c in read)
    ):
        return node.right, ()
    return right, tuple(having)


def _rewritten(node: Joined, at: int, having: tuple[Expr, ...] = ()) -> Node:
    """The join as a lookup in ``table(at)``: its rows are met where the key is found and ``having`` (the filters of
    ``_filtered``, their columns looked up) is true (a null counts as not met: an anti join keeps the row)."""
    key = key_of(tuple(node.left_on))
    hit: Expr = found(key, at)
    for predicate in having:
        looked_up = substituted(predicate, {c: looked(key, at, c) for c in used(predicate)})
        hit = Op("and", (hit, Op("if", (looked_up, Lit(True), Lit(False)))))
    if node.how in ("semi", "anti"):
        return Where(node.left, hit if node.how == "semi" else Op("not", (hit,)))
    columns = tuple((out, looked(key_of(tuple(node.left_on)), at, src)) for out, side, src in join_names(node) if side == "right")
    left = Where(node.left, hit) if node.how == "inner" else node.left
    return Keep(Assign(left, columns) if columns else left, names(node) or ())


def _swapped(node: Joined, table: Callable[[int], Node | None]) -> Joined | None:
    """An inner join with its sides swapped, where the swapped join is a lookup and the join itself is not (its small
    side unique on its keys is the left one: ``region.filter(...).join(nation, ...)``, the nations look the region
    up); None else. The key pairs must be of one type: the swapped join's key columns stand for the left keys."""
    if node.how != "inner" or not node.left_on or not join_names(node):
        return None
    swapped = Joined(node.right, node.left, node.right_on, node.left_on, "inner", node.suffix, node.strategy)
    for left_key, right_key in zip(node.left_on, node.right_on, strict=True):
        if _source(node.left, left_key, table) != _source(node.right, right_key, table):
            return None
    return swapped if join_names(swapped) and _applies(swapped, table) else None


def _made(node: Joined, swapped: Joined) -> dict[str, str]:
    """Each output of ``node`` by the output of ``swapped`` (its sides swapped) that holds the same values: a left
    key by the right key it meets, a side's column by its name in the swapped join."""
    by_side = {(side, src): out for out, side, src in join_names(swapped)}
    keys = dict(zip(node.left_on, node.right_on, strict=True))
    made = {}
    for out, side, src in join_names(node):
        made[out] = by_side[("key", keys[src])] if side == "key" else by_side[("right" if side == "left" else "left", src)]
    return made


def _renamed(node: Joined, lookup: Node) -> Node:
    """The lookup of ``node``'s swapped join (``_swapped``) with ``node``'s columns, names and order: one ``Assign``
    renames them all at once (``x`` and ``x_right`` trade names where both sides have an ``x``)."""
    swapped = Joined(node.right, node.left, node.right_on, node.left_on, "inner", node.suffix, node.strategy)
    renames = tuple((out, Col(was)) for out, was in _made(node, swapped).items() if out != was)
    return Keep(Assign(lookup, renames) if renames else lookup, tuple(out for out, _, _ in join_names(node)))


def _applies(node: Joined, table: Callable[[int], Node | None]) -> bool:
    if node.how not in HOWS or not node.left_on or not join_names(node):
        return False
    for left_key, right_key in zip(node.left_on, node.right_on, strict=True):
        left, right = _source(node.left, left_key, table), _source(node.right, right_key, table)
        if left is None or right is None or not _meet(left, right):
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
    return unique_on(node.right, tuple(node.right_on))


def _plain(node: Node, name: str, table: Callable[[int], Node | None]) -> bool:
    """Whether ``name`` of ``node`` is known to be a column of single values (not lists): a client table's, or a
    group-by's aggregate by name (a sum, a count...)."""
    source = _source(node, name, table)
    if source is not None:
        return source.inner is None
    while isinstance(node, (Where, Sorted, Limited, Keep)) or (
        isinstance(node, Assign) and name not in {n for n, _ in node.columns}
    ):
        node = node.input
    return isinstance(node, Aggregated) and any(out == name and op in OPS for out, _, op in node.aggs)


def _source(node: Node, name: str, table: Callable[[int], Node | None]) -> ColumnType | None:
    """The type of the client table's or the files' column that ``name`` of ``node`` passes through unchanged or
    renamed (or looks up in ``table(i)``, a lookup this rule made); None where it is computed."""
    if isinstance(node, Scan):
        return node.table.column(name).type if name in (names(node) or ()) else None
    if isinstance(node, (ParquetFiles, CsvFiles)):
        kinds = dict(zip(node.source.columns, node.source.kinds, strict=True))
        return _file_type(kinds[name]) if name in (names(node) or ()) and name in kinds else None
    made = dict(node.columns) if isinstance(node, Assign) else {}
    if name in made:
        expr = made[name]
        if isinstance(expr, Op) and expr.op == "lookup" and isinstance(expr.args[1], Rows):
            looked_in = table(expr.args[1].index)
            column = expr.args[2].value  # type: ignore[attr-defined]
            return None if looked_in is None else _source(looked_in, column, table)
        if isinstance(node, Assign) and isinstance(expr, Col):  # a column renamed, ``col("a").alias("b")``
            return _source(node.input, expr.name, table)
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


_UNIQUE_ROWS: dict[tuple[int, ...], tuple[tuple[Column, ...], bool]] = {}
"""Whether a client table's columns hold each combination of non-null values once, by the columns' ``id``."""


def unique_on(node: Node, keys: tuple[str, ...]) -> bool:
    """Whether ``node`` holds each combination of non-null values of ``keys`` at most once: one of them is unique
    (``_unique``), a client table's rows checked once, or a group-by or unique by some of them (filters and new
    columns between keep it)."""
    if any(_unique(node, k) for k in keys):
        return True
    if len(keys) == 1:
        return False
    if isinstance(node, Scan):
        columns = tuple(node.table.column(k) for k in keys)
        kept = _UNIQUE_ROWS.get(tuple(id(c) for c in columns))
        if kept is None or any(a is not b for a, b in zip(kept[0], columns, strict=True)):
            valid = np.ones(len(node.table), bool)
            for c in columns:
                valid &= np.ones(len(valid), bool) if c.valid is None else c.valid
            codes = np.stack([np.unique(c.values[valid], return_inverse=True)[1] for c in columns], 1)
            kept = _UNIQUE_ROWS[tuple(id(c) for c in columns)] = (columns, len(np.unique(codes, axis=0)) == len(codes))
        return kept[1]
    if isinstance(node, (Where, Sorted, Limited, Keep)):
        return unique_on(node.input, keys)
    if isinstance(node, Assign):  # the keys passed through, or renamed (``col("a").alias("b")``)
        made = dict(node.columns)
        was = tuple(made[k].name if isinstance(made.get(k), Col) else k for k in keys)  # type: ignore[attr-defined]
        return all(k not in made or isinstance(made[k], Col) for k in keys) and unique_on(node.input, was)
    if isinstance(node, (Aggregated, Distinct)):
        return set(node.keys if isinstance(node, Aggregated) else node.columns) <= set(keys)
    return False


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
    if isinstance(node, Assign) and isinstance(dict(node.columns).get(name), Col):  # ``col("a").alias("b")``
        return _unique(node.input, dict(node.columns)[name].name)  # type: ignore[attr-defined]
    if isinstance(node, (Aggregated, Distinct)):
        return (node.keys if isinstance(node, Aggregated) else node.columns) == (name,)
    if isinstance(node, Joined):
        sides = {out: (side, src) for out, side, src in join_names(node)}
        side, src = sides.get(name, ("", ""))
        if side in ("key", "left"):
            meets_once = node.how in ("semi", "anti") or unique_on(node.right, tuple(node.right_on))
            return meets_once and _unique(node.left, src)
        if side == "right" and node.how == "inner":
            return unique_on(node.left, tuple(node.left_on)) and _unique(node.right, src)
    return False
