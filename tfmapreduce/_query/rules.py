"""The optimizer: rules, each a function plan → plan that gives the same table, applied in order by ``optimize``.

- ``push_predicates``: a filter (each part of an ``a & b & ...``) moves below the steps that do not change its
  columns: ``with_columns`` that do not define them, selects, sorts without a limit, other filters, an explode of
  other columns, a group-by whose keys it reads, and a join, into the side that owns its columns (both sides for an
  inner join's keys).
- ``scan_filters`` (``scan_filters.py``): a filter's column-literal comparisons on a Parquet scan become the scan's
  ``filters=`` (row groups their statistics exclude are not read; the filter stays).
- ``prune``: projection pushdown — each step asks its input for the columns it uses alone, down to the source.
- ``fuse``: consecutive filters, ``with_columns`` and selects of expressions become one map run.
- ``top_k``: a limit of a sort becomes the sort's ``limit=`` (each shard keeps its first rows; nothing sorts all).
- ``share``: subplans of equal structure become one node, computed once.
- ``sorted_groups``: a sort of a group-by's result by its keys, ascending with nulls last, is dropped (a group-by
  gives its groups in that order).
- ``join_order`` and ``join_sizes`` (``joins.py``): join order and expected strategy from the estimated sizes.
- ``semi_groups`` (``sideways.py``): a group-by joined on its keys with a much smaller side groups only the rows of
  that side's keys (a semi join first).
- ``partial_aggregates`` (``partial.py``): a group-by of a join that aggregates only its right side's columns
  aggregates the right side by its join keys first (the join meets one row per key).
- ``lookup_joins`` (``lookups.py``): a join of a small right side (or an inner join's small left side, the sides
  swapped) becomes a lookup (a filter and new columns reading ``table(i)``) in the map of the step that reads it.
- ``into_aggregates``: a fused step read by a group-by alone runs in the group-by's map (one keyed run; the rows it
  drops and the columns it makes never leave the workers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from .expr import Col, Expr, conjuncts, substituted, used
from .joins import join_order, join_sizes
from .lookups import lookup_joins
from .partial import partial_aggregates
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
    Sorted,
    Where,
    inputs,
    join_names,
    key,
    names,
    readers,
    rebuilt,
    with_inputs,
)
from .scalars import lifted
from .scan_filters import scan_filters
from .sideways import semi_groups

Rule = Callable[[Node], Node]


def push_predicates(plan: Node) -> Node:
    """Filters of expressions moved as far down the plan as they keep their meaning."""
    return rebuilt(plan, _pushed)


def _pushed(node: Node) -> Node:
    if not isinstance(node, Where):
        return node
    below = node.input
    for part in conjuncts(node.predicate):
        below = _sink(below, part)
    return below


def _sink(node: Node, predicate: Expr) -> Node:
    """``node`` filtered by ``predicate``, the filter placed as low as it may go."""
    cols = used(predicate)
    if (
        isinstance(node, (Keep, Where))
        or (isinstance(node, Assign) and not cols & {n for n, _ in node.columns})
        or (isinstance(node, Sorted) and node.limit is None)
        or (isinstance(node, Exploded) and not cols & set(node.columns))
        or (isinstance(node, Aggregated) and node.keys and cols <= set(node.keys))
    ):
        return with_inputs(node, (_sink(node.input, predicate),))
    if isinstance(node, Joined):
        sides = {out: (side, src) for out, side, src in join_names(node)}
        if cols and cols <= sides.keys():
            owners = {sides[c][0] for c in cols}
            left = owners <= {"left", "key"} and node.how in ("inner", "left", "semi", "anti")
            right = owners <= {"right", "key"} and node.how in ("inner", "right")
            if left or right:
                renamed = {o: Col(node.right_on[node.left_on.index(o)] if s == "key" else src) for o, (s, src) in sides.items()}
                return attrs.evolve(
                    node,
                    left=_sink(node.left, predicate) if left else node.left,
                    right=_sink(node.right, substituted(predicate, renamed)) if right else node.right,
                )
    return Where(node, predicate)


def prune(plan: Node) -> Node:
    """Projection pushdown: every step gets from its input only the columns used above it, down to the source (a
    node read by several steps gives what all of them use)."""
    order: list[Node] = []  # every node after each node that reads it
    seen: set[int] = set()

    def visit(node: Node) -> None:
        if id(node) not in seen:
            seen.add(id(node))
            for i in inputs(node):
                visit(i)
            order.append(node)

    visit(plan)
    order.reverse()
    need: dict[int, frozenset[str] | None] = {id(plan): None}
    for node in order:
        for child, more in zip(inputs(node), _needs(node, need[id(node)]), strict=True):
            had = need.get(id(child), frozenset())
            need[id(child)] = None if had is None or more is None else had | more
    done: dict[int, Node] = {}
    for node in reversed(order):  # the sources first
        done[id(node)] = _pruned(with_inputs(node, tuple(done[id(i)] for i in inputs(node))), need[id(node)])
    return done[id(plan)]


def _needs(node: Node, need: frozenset[str] | None) -> list[frozenset[str] | None]:
    """The columns each input of ``node`` must give for ``node`` to give ``need`` (None: all)."""
    if isinstance(node, Where):
        return [_plus(need, used(node.predicate))]
    if isinstance(node, Assign):
        columns = [(n, e) for n, e in node.columns if need is None or n in need]
        rest = None if need is None else need - {n for n, _ in columns}
        return [_plus(rest, frozenset().union(*(used(e) for _, e in columns)))]
    if isinstance(node, Keep):
        return [frozenset(_kept(node, need))]
    if isinstance(node, (Apply, Fused)):
        return [None]
    if isinstance(node, Limited):
        return [need]
    if isinstance(node, Sorted):
        return [_plus(need, frozenset(node.by))]
    if isinstance(node, Exploded):  # its lists give its rows, used or not
        return [_plus(need, frozenset(node.columns))]
    if isinstance(node, Distinct):
        return [frozenset(node.columns)]
    if isinstance(node, Aggregated):
        if node.steps:
            return [None]
        cols = frozenset([*node.keys, *(c for _, c, _ in node.aggs if c != "*")])
        first = names(node.input)
        return [cols or (frozenset(first[:1]) if first else None)]
    if isinstance(node, Joined):
        return _join_needs(node, need)
    if isinstance(node, Bound):
        return [*(None if names(q) is None else frozenset(names(q) or ()) for q in node.queries), need]
    return []


def _kept(node: Keep, need: frozenset[str] | None) -> tuple[str, ...]:
    return tuple(n for n in node.names if need is None or n in need) or node.names[:1]


def _pruned(node: Node, need: frozenset[str] | None) -> Node:
    """``node`` (over its pruned inputs) giving only what ``need`` asks of it, where it chooses its columns."""
    if isinstance(node, (Scan, ParquetFiles, CsvFiles)) and need is not None:
        every = node.table.columns if isinstance(node, Scan) else node.source.columns
        kept = tuple(n for n in every if n in need) or every[:1]
        return attrs.evolve(node, columns=kept) if kept != every else node
    if isinstance(node, Assign) and need is not None:
        columns = tuple((n, e) for n, e in node.columns if n in need)
        return Assign(node.input, columns) if columns else node.input
    if isinstance(node, Keep):
        return Keep(node.input, _kept(node, need))
    return node


def _join_needs(node: Joined, need: frozenset[str] | None) -> list[frozenset[str] | None]:
    columns = join_names(node)
    if not columns:  # a side's columns are a traced function's: it gets all it has
        return [None, None]
    wanted = [(side, src, out != src) for out, side, src in columns if need is None or out in need]
    left = {src for side, src, _ in wanted if side in ("left", "key")} | set(node.left_on)
    right = {src for side, src, _ in wanted if side == "right"} | set(node.right_on)
    left |= {src for side, src, renamed in wanted if side == "right" and renamed}  # keeps the suffix it names
    return [frozenset(left), frozenset(right)]


def _plus(need: frozenset[str] | None, more: frozenset[str]) -> frozenset[str] | None:
    return None if need is None else need | more


def fuse(plan: Node) -> Node:
    """Consecutive filters, ``with_columns`` and selects of expressions as one ``Fused`` step: one map run."""
    return rebuilt(plan, _fused)


def _fused(node: Node) -> Node:
    step = row_step(node)
    if step is None:
        return node
    source = node.input  # type: ignore[union-attr]
    if isinstance(source, Fused):
        return Fused(source.input, (*source.steps, step))
    return Fused(source, (step,))


def row_step(node: Node) -> tuple[str, object] | None:
    """``node`` as a step of a fused run, or None where it is not row-wise with expressions."""
    if isinstance(node, Where):
        return ("where", node.predicate)
    if isinstance(node, Assign):
        return ("assign", node.columns)
    if isinstance(node, Keep):
        return ("keep", node.names)
    return None


def top_k(plan: Node) -> Node:
    """A ``limit(n)`` of a sort without a limit as the sort's ``limit=n``: one map-only run in which each shard keeps
    its first ``n``, instead of a sort of every row (a limit of a limit keeps the smaller)."""
    return rebuilt(plan, _top)


def _top(node: Node) -> Node:
    if not isinstance(node, Limited):
        return node
    below = node.input
    if isinstance(below, Sorted):
        return attrs.evolve(below, limit=node.n if below.limit is None else min(node.n, below.limit))
    if isinstance(below, Limited):
        return Limited(below.input, min(node.n, below.n))
    return node


def share(plan: Node) -> Node:
    """Subplans of equal structure as one node, which the executor computes once."""
    seen: dict[tuple[object, ...], Node] = {}
    return rebuilt(plan, lambda node: seen.setdefault(key(node), node))


def sorted_groups(plan: Node) -> Node:
    """A sort of a group-by's result by its first keys, each ascending with nulls last, as no step (a group-by gives
    its groups in that order; a sort's limit stays, as a ``limit``)."""
    return rebuilt(plan, _unsorted)


def _unsorted(node: Node) -> Node:
    if not (isinstance(node, Sorted) and isinstance(node.input, Aggregated)):
        return node
    if node.input.keys[: len(node.by)] != node.by or any(node.descending) or not all(node.nulls_last):
        return node
    return node.input if node.limit is None else Limited(node.input, node.limit)


def into_aggregates(plan: Node) -> Node:
    """A ``Fused`` step that only group-bys read as each group-by's ``steps``: one keyed run maps, filters and
    aggregates, and no row of the step's output passes through the client (a step two group-bys read, a query's
    and its scalar subquery's, runs in both maps: cheaper than a run of its own whose rows both read)."""
    read = readers(plan)
    grouped = readers(plan, lambda node: isinstance(node, Aggregated) and not node.steps)
    done: dict[int, Node] = {}

    def visit(node: Node) -> Node:
        if id(node) not in done:
            below = node.input if isinstance(node, Aggregated) else None
            if (
                isinstance(node, Aggregated)
                and not node.steps
                and isinstance(below, Fused)
                and read[id(below)] == grouped[id(below)]
            ):
                done[id(node)] = attrs.evolve(node, input=visit(below.input), steps=below.steps)
            else:
                done[id(node)] = with_inputs(node, tuple(visit(i) for i in inputs(node)))
        return done[id(node)]

    return visit(plan)


RULES: tuple[Rule, ...] = (
    share,
    push_predicates,
    scan_filters,
    top_k,
    sorted_groups,
    join_order,
    semi_groups,
    partial_aggregates,
    prune,
    lookup_joins,
    fuse,
    into_aggregates,
    join_sizes,
)
"""The rules ``optimize`` applies, in order: ``share`` first, so the others, which rewrite each node once, keep a
shared subplan one node (``prune`` asks of it what all its readers use); a Parquet scan's filters once the filters
are down on it (its estimate then counts the row groups read); the joins' order once the filters are down
(their estimates read them), then ``semi_groups`` (which reads the joins' final order) and ``partial_aggregates``;
``lookup_joins`` once ``prune`` has left each small side the columns used, before ``fuse`` puts its lookups in the
map of the step that reads them; the joins' strategies last, from the columns that travel."""


def optimize(plan: Node, rules: Sequence[Rule] = RULES) -> Node:
    """``plan`` with its scalar subqueries lifted into it (``scalars.lifted``: always, whatever ``rules``), then
    through each of ``rules`` in order (the default: all of them)."""
    plan = lifted(plan)
    for rule in rules:
        plan = rule(plan)
    return plan
