"""The logical plan: frozen nodes, each a step over its inputs; ``key`` is a plan's structure as plain values (two
subplans with equal keys compute the same table), ``names`` the columns a node gives (None where a traced function
decides them), ``show`` the indented text ``explain()`` prints.

Nodes compare by identity (``eq=False``): their expressions' ``==`` builds comparisons, so structure is ``key``'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs

from .._io.files.csv_scan import CsvScan
from .._io.files.parquet import ParquetPlan
from .._table.table import Table
from .expr import Expr


@attrs.frozen(eq=False)
class Scan:
    """A table held on the client; ``columns`` None: all of them, else only those (projection pushdown)."""

    table: Table
    columns: tuple[str, ...] | None = None


@attrs.frozen(eq=False)
class ParquetFiles:
    """Parquet files read by ``collect()`` (``tmr.lazy(tmr.plan_parquet(paths))``): ``source`` what a scan of every
    column reads, ``sizes`` each column's uncompressed bytes in the footers of the row groups read, ``columns`` as
    ``Scan``'s, ``filters`` the query's ``(column, op, value)`` conditions the scan takes (``rules.scan_filters``;
    ``source`` is planned with them: the row groups their statistics exclude are not read)."""

    source: ParquetPlan
    sizes: tuple[tuple[str, int], ...]
    columns: tuple[str, ...] | None = None
    filters: tuple[tuple[str, str, Any], ...] = ()


@attrs.frozen(eq=False)
class CsvFiles:
    """CSV files read by ``collect()`` (``tmr.lazy(tmr.plan_csv(paths))``): ``source`` the scan, ``rows`` and
    ``widths`` (each column's bytes a row) estimated from the files' sizes and their first records, ``columns`` as
    ``Scan``'s (every column is read, the others dropped after)."""

    source: CsvScan
    rows: int
    widths: tuple[tuple[str, float], ...]
    columns: tuple[str, ...] | None = None


@attrs.frozen(eq=False)
class Where:
    """The rows where ``predicate`` is true (an expression; null counts as not true)."""

    input: Node
    predicate: Expr


@attrs.frozen(eq=False)
class Assign:
    """The input's columns with ``columns`` (name, expression) added or replacing those of their names."""

    input: Node
    columns: tuple[tuple[str, Expr], ...]


@attrs.frozen(eq=False)
class Keep:
    """The columns ``names``, in that order."""

    input: Node
    names: tuple[str, ...]


@attrs.frozen(eq=False)
class Apply:
    """A traced Python function, opaque to the planner: ``verb`` ``"filter"`` or ``"with_columns"``."""

    input: Node
    verb: str
    fn: Callable[..., Any]


@attrs.frozen(eq=False)
class Fused:
    """Consecutive row-wise steps in one map run: ``steps`` of ``("where", expr)``, ``("assign", columns)`` and
    ``("keep", names)``, applied in order."""

    input: Node
    steps: tuple[tuple[str, Any], ...]


@attrs.frozen(eq=False)
class Joined:
    """``left`` joined with ``right`` on equal keys (the eager ``Table.join``'s rules)."""

    left: Node
    right: Node
    left_on: tuple[str, ...]
    right_on: tuple[str, ...]
    how: str
    suffix: str
    strategy: str = "auto"
    """The strategy ``explain()`` expects: ``"broadcast"`` or ``"hash"`` from the estimated sizes (``rules.join_sizes``),
    ``"auto"`` before that rule.  The run itself chooses from the real sizes, so a wrong estimate never broadcasts a
    large side."""


@attrs.frozen(eq=False)
class Aggregated:
    """One row per group of ``keys`` (none: one row), with ``aggs`` of ``(output, column, op)``; ``steps`` are
    row-wise steps (a ``Fused``'s) applied to the input first, inside the group-by's own map."""

    input: Node
    keys: tuple[str, ...]
    aggs: tuple[tuple[str, str, Any], ...]
    steps: tuple[tuple[str, Any], ...] = ()


@attrs.frozen(eq=False)
class Sorted:
    """The rows ordered by ``by`` (per column ``descending``, ``nulls_last``), the first ``limit`` (None: all)."""

    input: Node
    by: tuple[str, ...]
    descending: tuple[bool, ...]
    nulls_last: tuple[bool, ...]
    limit: int | None = None


@attrs.frozen(eq=False)
class Limited:
    """The first ``n`` rows."""

    input: Node
    n: int


@attrs.frozen(eq=False)
class Exploded:
    """Each element of the list columns ``columns`` a row, the other columns repeated (the eager ``Table.explode``'s
    rules: an empty list one null row unless not ``empty_as_null``, a null list one unless not ``keep_nulls``)."""

    input: Node
    columns: tuple[str, ...]
    empty_as_null: bool = True
    keep_nulls: bool = True


@attrs.frozen(eq=False)
class Distinct:
    """The distinct rows of ``columns``, sorted by them."""

    input: Node
    columns: tuple[str, ...]


@attrs.frozen(eq=False)
class Bound:
    """``input``, whose expressions may read ``scalar(i)``: the one value of ``queries[i]`` (a one-row, one-column
    plan), computed first, in order, in the same run of the plan as ``input`` (a node both read is computed once).
    ``scalars.lifted`` makes it, the plan's root, from ``LazyTable.scalar()`` expressions. ``tables`` are the
    queries read whole, by ``(index, key columns)``: ``table(i)`` of a lookup (``lookups.lookup_joins``), its rows
    ready for lookups of that key rather than one value."""

    input: Node
    queries: tuple[Node, ...]
    tables: tuple[tuple[int, tuple[str, ...]], ...] = ()


Node = (
    Scan
    | ParquetFiles
    | CsvFiles
    | Where
    | Assign
    | Keep
    | Apply
    | Fused
    | Joined
    | Aggregated
    | Sorted
    | Limited
    | Exploded
    | Distinct
    | Bound
)
"""A plan: its root node."""


def inputs(node: Node) -> tuple[Node, ...]:
    """The nodes ``node`` reads."""
    if isinstance(node, (Scan, ParquetFiles, CsvFiles)):
        return ()
    if isinstance(node, Joined):
        return (node.left, node.right)
    if isinstance(node, Bound):
        return (*node.queries, node.input)
    return (node.input,)


def readers(plan: Node, which: Callable[[Node], bool] = lambda node: True) -> Counter[int]:
    """How many nodes of ``plan`` (those ``which`` is true of) read each node, by its ``id`` (a node read twice is
    one node, counted once per reader)."""
    counts: Counter[int] = Counter()
    seen: set[int] = set()

    def count(node: Node) -> None:
        if id(node) not in seen:
            seen.add(id(node))
            counts.update(id(i) for i in inputs(node) if which(node))
            for i in inputs(node):
                count(i)

    count(plan)
    return counts


def with_inputs(node: Node, new: tuple[Node, ...]) -> Node:
    """``node`` over the inputs ``new`` (the same node where they are the same)."""
    if new == inputs(node):
        return node
    if isinstance(node, Joined):
        return attrs.evolve(node, left=new[0], right=new[1])
    if isinstance(node, Bound):
        return Bound(new[-1], new[:-1], node.tables)
    evolve: Any = attrs.evolve  # every other node reads one input, named input
    return evolve(node, input=new[0])  # type: ignore[no-any-return]


def rebuilt(plan: Node, step: Callable[[Node], Node]) -> Node:
    """``step`` applied to each node over its rebuilt inputs, from the sources up, once per node (a node read twice
    stays one node)."""
    done: dict[int, Node] = {}

    def visit(node: Node) -> Node:
        if id(node) not in done:
            done[id(node)] = step(with_inputs(node, tuple(visit(i) for i in inputs(node))))
        return done[id(node)]

    return visit(plan)


def _plain(value: Any) -> Any:
    if isinstance(value, Expr):
        return value.key
    if isinstance(value, Table):
        return ("table", id(value))
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if callable(value):
        return ("fn", id(value))
    return value


def key(node: Node) -> tuple[Any, ...]:
    """The plan's structure as plain values: equal keys, the same table (tables and functions by identity)."""
    parts = [key(v) if attrs.has(type(v)) else _plain(v) for v in attrs.astuple(node, recurse=False)]
    return (type(node).__name__, *parts)


def names(node: Node) -> tuple[str, ...] | None:
    """The columns ``node`` gives, in order; None where a traced function decides them."""
    if isinstance(node, Scan):
        return node.columns if node.columns is not None else node.table.columns
    if isinstance(node, (ParquetFiles, CsvFiles)):
        return node.columns if node.columns is not None else node.source.columns
    if isinstance(node, (Keep, Distinct)):
        return node.names if isinstance(node, Keep) else node.columns
    if isinstance(node, Aggregated):
        return (*node.keys, *(a[0] for a in node.aggs))
    if isinstance(node, Joined):
        return tuple(out for out, _, _ in join_names(node))
    if isinstance(node, Apply) and node.verb == "with_columns":
        return None
    if isinstance(node, Assign):
        below = names(node.input)
        return None if below is None else tuple(dict.fromkeys([*below, *(n for n, _ in node.columns)]))
    if isinstance(node, Fused):
        return None
    return names(node.input)


def join_names(node: Joined) -> list[tuple[str, str, str]]:
    """Each output column of a join: ``(output name, "left" | "right" | "key", its name on its side)``."""
    left, right = names(node.left), names(node.right)
    if left is None or right is None:
        return []
    out = [(k, "key", k) for k in node.left_on]
    out += [(n, "left", n) for n in left if n not in node.left_on]
    if node.how in ("semi", "anti"):
        return out
    taken = {n for n, _, _ in out}
    out += [(n + node.suffix if n in taken else n, "right", n) for n in right if n not in node.right_on]
    return out


def label(node: Node) -> str:
    """One line saying what ``node`` does."""
    if isinstance(node, Scan):
        cols = "*" if node.columns is None else ", ".join(node.columns)
        return f"scan table of {len(node.table)} rows [{cols}]"
    if isinstance(node, ParquetFiles):
        cols = "*" if node.columns is None else ", ".join(node.columns)
        skipped = ""
        if node.filters:
            conditions = ", ".join(f"{c} {op} {_literal(v)}" for c, op, v in node.filters)
            skipped = f", {node.source.skipped} skipped by [{conditions}]"
        return f"scan parquet of {len(node.source.files)} files, {node.source.read} row groups{skipped} [{cols}]"
    if isinstance(node, CsvFiles):
        cols = "*" if node.columns is None else ", ".join(node.columns)
        return f"scan csv of {len(node.source.files)} files, {sum(node.source.sizes)} bytes [{cols}]"
    if isinstance(node, Where):
        return f"filter {node.predicate!r}"
    if isinstance(node, Assign):
        return "with_columns " + ", ".join(f"{n}={e!r}" for n, e in node.columns)
    if isinstance(node, Keep):
        return "select " + ", ".join(node.names)
    if isinstance(node, Apply):
        return f"{node.verb} {getattr(node.fn, '__name__', 'fn')}(traced)"
    if isinstance(node, Fused):
        return "fused [" + "; ".join(_step(s) for s in node.steps) + "]"
    if isinstance(node, Joined):
        on = ", ".join(a if a == b else f"{a}={b}" for a, b in zip(node.left_on, node.right_on, strict=True))
        return f"join how={node.how} on {on}" + ("" if node.strategy == "auto" else f", estimated {node.strategy}")
    if isinstance(node, Aggregated):
        aggs = ", ".join(f"{o}={op[0]}({c}, {op[1]})" if isinstance(op, tuple) else f"{o}={op}({c})" for o, c, op in node.aggs)
        after = "" if not node.steps else " after [" + "; ".join(_step(s) for s in node.steps) + "]"
        return f"group_by [{', '.join(node.keys)}] agg {aggs}{after}"
    if isinstance(node, Sorted):
        order = ", ".join(f"{b}{' desc' if d else ''}" for b, d in zip(node.by, node.descending, strict=True))
        return f"sort {order}" + ("" if node.limit is None else f" limit {node.limit}")
    if isinstance(node, Limited):
        return f"limit {node.n}"
    if isinstance(node, Exploded):
        dropped = [f"{flag}=False" for flag in ("empty_as_null", "keep_nulls") if not getattr(node, flag)]
        return "explode " + ", ".join([*node.columns, *dropped])
    if isinstance(node, Bound):
        whole = dict(node.tables)
        bound = (f"table({i}) by {', '.join(whole[i])}" if i in whole else f"scalar({i})" for i in range(len(node.queries)))
        return "bind " + ", ".join(bound) + " (the queries below, in order; the plan last)"
    return "unique " + ", ".join(node.columns)


def _literal(value: Any) -> str:
    """A scan filter's value as ``explain()`` prints it: a date in ISO form, a list of values in brackets."""
    if isinstance(value, tuple):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return value.isoformat() if hasattr(value, "isoformat") else repr(value)


def _step(step: tuple[str, Any]) -> str:
    verb, arg = step
    if verb == "where":
        return f"filter {arg!r}"
    if verb == "assign":
        return "with_columns " + ", ".join(f"{n}={e!r}" for n, e in arg)
    return "select " + ", ".join(arg)


def show(node: Node, depth: int = 0) -> list[str]:
    """The plan as indented lines, the root first."""
    return ["  " * depth + label(node), *(line for i in inputs(node) for line in show(i, depth + 1))]
