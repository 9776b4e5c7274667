"""The optimizer: rules, each a function plan → plan that gives the same table, applied in order by ``optimize``.

- ``push_predicates``: a filter (each part of an ``a & b & ...``) moves below the steps that do not change its
  columns: ``with_columns`` that do not define them, selects, sorts without a limit, other filters, a group-by whose
  keys it reads, and a join, into the side that owns its columns (both sides for an inner join's keys).
- ``prune``: projection pushdown — each step asks its input for the columns it uses alone, down to the source.
- ``fuse``: consecutive filters, ``with_columns`` and selects of expressions become one map run.
- ``share``: subplans of equal structure become one node, computed once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from .expr import Col, Expr, conjuncts, substituted, used
from .plan import (
    Aggregated,
    Apply,
    Assign,
    Distinct,
    Fused,
    Joined,
    Keep,
    Limited,
    Node,
    Scan,
    Sorted,
    Where,
    inputs,
    join_names,
    key,
    names,
    with_inputs,
)

Rule = Callable[[Node], Node]


def push_predicates(plan: Node) -> Node:
    """Filters of expressions moved as far down the plan as they keep their meaning."""
    below = with_inputs(plan, tuple(push_predicates(i) for i in inputs(plan)))
    if not isinstance(below, Where):
        return below
    node = below.input
    for part in conjuncts(below.predicate):
        node = _sink(node, part)
    return node


def _sink(node: Node, predicate: Expr) -> Node:
    """``node`` filtered by ``predicate``, the filter placed as low as it may go."""
    cols = used(predicate)
    if (
        isinstance(node, (Keep, Where))
        or (isinstance(node, Assign) and not cols & {n for n, _ in node.columns})
        or (isinstance(node, Sorted) and node.limit is None)
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
    """Projection pushdown: every step gets from its input only the columns used above it, down to the source."""
    return _prune(plan, None)


def _prune(node: Node, need: frozenset[str] | None) -> Node:
    """``node`` giving at least the columns ``need`` (None: all of its own)."""
    if isinstance(node, Scan):
        if need is None:
            return node
        kept = tuple(n for n in node.table.columns if n in need) or node.table.columns[:1]
        return attrs.evolve(node, columns=kept) if kept != node.table.columns else node
    if isinstance(node, Where):
        return with_inputs(node, (_prune(node.input, _plus(need, used(node.predicate))),))
    if isinstance(node, Assign):
        columns = tuple((n, e) for n, e in node.columns if need is None or n in need)
        if not columns:
            return _prune(node.input, need)
        rest = None if need is None else need - {n for n, _ in columns}
        below = _plus(rest, frozenset().union(*(used(e) for _, e in columns)))
        return Assign(_prune(node.input, below), columns)
    if isinstance(node, Keep):
        kept = tuple(n for n in node.names if need is None or n in need) or node.names[:1]
        return Keep(_prune(node.input, frozenset(kept)), kept)
    if isinstance(node, (Apply, Fused, Limited)):
        return with_inputs(node, (_prune(node.input, None if isinstance(node, (Apply, Fused)) else need),))
    if isinstance(node, Sorted):
        return with_inputs(node, (_prune(node.input, _plus(need, frozenset(node.by))),))
    if isinstance(node, Distinct):
        return with_inputs(node, (_prune(node.input, frozenset(node.columns)),))
    if isinstance(node, Aggregated):
        cols = frozenset([*node.keys, *(c for _, c, _ in node.aggs if c != "*")])
        first = names(node.input)
        if not cols and first:
            cols = frozenset(first[:1])
        return with_inputs(node, (_prune(node.input, cols or None),))
    return _prune_join(node, need)


def _prune_join(node: Joined, need: frozenset[str] | None) -> Node:
    columns = join_names(node)
    if not columns:  # a side's columns are a traced function's: it gets all it has
        return with_inputs(node, (_prune(node.left, None), _prune(node.right, None)))
    wanted = [(side, src, out != src) for out, side, src in columns if need is None or out in need]
    left = {src for side, src, _ in wanted if side in ("left", "key")} | set(node.left_on)
    right = {src for side, src, _ in wanted if side == "right"} | set(node.right_on)
    left |= {src for side, src, renamed in wanted if side == "right" and renamed}  # keeps the suffix it names
    return with_inputs(node, (_prune(node.left, frozenset(left)), _prune(node.right, frozenset(right))))


def _plus(need: frozenset[str] | None, more: frozenset[str]) -> frozenset[str] | None:
    return None if need is None else need | more


def fuse(plan: Node) -> Node:
    """Consecutive filters, ``with_columns`` and selects of expressions as one ``Fused`` step: one map run."""
    below = with_inputs(plan, tuple(fuse(i) for i in inputs(plan)))
    step = row_step(below)
    if step is None:
        return below
    source = below.input  # type: ignore[union-attr]
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


def share(plan: Node) -> Node:
    """Subplans of equal structure as one node, which the executor computes once."""
    seen: dict[tuple[object, ...], Node] = {}

    def visit(node: Node) -> Node:
        node = with_inputs(node, tuple(visit(i) for i in inputs(node)))
        return seen.setdefault(key(node), node)

    return visit(plan)


RULES: tuple[Rule, ...] = (push_predicates, prune, fuse, share)
"""The rules ``optimize`` applies, in order."""


def optimize(plan: Node, rules: Sequence[Rule] = RULES) -> Node:
    """``plan`` through each of ``rules`` in order (the default: all of them)."""
    for rule in rules:
        plan = rule(plan)
    return plan
