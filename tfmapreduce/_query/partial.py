"""``partial_aggregates``, an optimizer rule (plan → plan): a group-by of an inner or left join, by columns of the
join's left side, aggregating only columns of its right side, aggregates the right side by its join keys first
(eager aggregation), so the join meets one row per right key instead of every right row.

``(x ⟕ y on k) grouped by g: count(y.v)`` becomes ``(x ⟕ (y grouped by k: count(v) as c) on k) grouped by g:
sum(c)`` (a left row no right row meets gets a null ``c``, counted as 0). Each aggregate is one that partial
results combine: ``count`` (of a column: the partial counts summed), ``sum``, ``min`` and ``max`` (of the partial
ones). Each row of the original join is a left row with one of its right rows; the rewritten join gives that left
row once with its rows' partial aggregate, so each group combines the same values (a float sum may differ in its
last bits, being added in another order). The rule applies where the join is read by the group-by alone, the
aggregates' names are not the left side's, and the right side is estimated to have more rows than the left (TPC-H
Q13: 1.5e6 orders counted per customer before they meet 150,000 customers, not after).

Example: ``customers.join(orders, left_on="c_custkey", right_on="o_custkey", how="left").group_by("c_custkey")
.agg(n=("o_orderkey", "count"))`` joins the customers with each customer's count of orders.
"""

from __future__ import annotations

import attrs

from .estimate import estimate
from .expr import Col, Lit, Op
from .plan import Aggregated, Assign, Joined, Node, inputs, join_names, names, readers, with_inputs

COMBINED = {"count": "sum", "sum": "sum", "min": "min", "max": "max"}
"""Each aggregate partial results combine, and the aggregate that combines them."""


def partial_aggregates(plan: Node) -> Node:
    """Each group-by of a join that aggregates only the join's right side, over the right side aggregated first."""
    read = readers(plan)
    done: dict[int, Node] = {}

    def visit(node: Node) -> Node:
        if id(node) not in done:
            below = node.input if isinstance(node, Aggregated) else None
            if isinstance(node, Aggregated) and isinstance(below, Joined) and read[id(below)] == 1:
                new = with_inputs(node, (with_inputs(below, (visit(below.left), visit(below.right))),))
                done[id(node)] = _eager(new)  # type: ignore[arg-type]
            else:
                done[id(node)] = with_inputs(node, tuple(visit(i) for i in inputs(node)))
        return done[id(node)]

    return visit(plan)


def _eager(node: Aggregated) -> Node:
    """``node`` (a group-by of a join) with the join's right side aggregated first, where the rule applies."""
    join = node.input
    assert isinstance(join, Joined)
    left = names(join.left)
    sides = {out: (side, src) for out, side, src in join_names(join)}
    if join.how not in ("inner", "left") or node.steps or not node.keys or left is None or not sides:
        return node
    if not all(sides.get(k, ("right", ""))[0] in ("left", "key") for k in node.keys):
        return node
    if not all(sides.get(c, ("left", ""))[0] == "right" and op in COMBINED for _, c, op in node.aggs):
        return node
    if {out for out, _, _ in node.aggs} & {*left, *join.right_on} or estimate(join.right).rows <= estimate(join.left).rows:
        return node
    partial = Aggregated(join.right, join.right_on, tuple((out, sides[c][1], op) for out, c, op in node.aggs))
    joined: Node = attrs.evolve(join, right=partial, strategy="auto")
    counts = tuple(
        (out, Op("if", (Op("is_null", (Col(out),)), Lit(0), Col(out))))
        for out, _, op in node.aggs
        if op == "count" and join.how == "left"
    )
    if counts:  # a left row that met no right row: its count is 0, not null
        joined = Assign(joined, counts)
    return Aggregated(joined, node.keys, tuple((out, out, COMBINED[op]) for out, _, op in node.aggs))
