"""``semi_groups``, an optimizer rule (plan → plan): a group-by met by an inner join (or as a semi join's right
side) on its keys, whose other side is estimated much smaller than the group-by's input, groups only the rows whose keys that side has.

``x ⋈ (y grouped by k)`` on ``k`` becomes ``x ⋈ ((y ⋉ x on k) grouped by k)``: a group whose key ``x`` lacks
meets no row of ``x`` and is dropped by the join anyway, and a kept group keeps every row of its key, so each
aggregate is the same. The semi join runs nothing (a lookup of keys on the client); the group-by then reads a fraction
of ``y`` (TPC-H Q21: the distinct suppliers of the few orders the query keeps, not of all 1.5e6). ``x`` is read
twice and computed once. The join's keys on the group-by's side must be among its keys (each group is one key of
the join), the group-by (and the filters, selects and new columns of other columns above it: each a step of its
groups alone) read by this join alone (another reader needs every group), and ``x`` estimated at most ``SMALLER``
of ``y``'s rows.

Example: ``late.join(lines.group_by("order").agg(n=("supplier", "count_distinct")), on="order")`` counts the
suppliers of the orders in ``late`` alone, where ``late`` is estimated a tenth of ``lines`` or less.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from .estimate import estimate
from .plan import Aggregated, Assign, Joined, Keep, Node, Where, inputs, names, readers, with_inputs

SMALLER = 0.1
"""The largest fraction of the group-by's input rows the other side may be estimated at for the rule to apply."""


def semi_groups(plan: Node) -> Node:
    """Each group-by met by a much smaller side of an inner join on its keys grouping only that side's keys' rows."""
    read = readers(plan)
    done: dict[int, Node] = {}
    origin: dict[int, Node] = {}  # each rebuilt node's node in ``plan``, whose readers were counted

    def readers_of(node: Node) -> int:
        return read[id(origin.get(id(node), node))]

    def visit(node: Node) -> Node:
        if id(node) not in done:
            new = with_inputs(node, tuple(visit(i) for i in inputs(node)))
            if isinstance(new, Joined) and new.how in ("inner", "semi"):
                right = _reduced(new.right, new.left, new.right_on, new.left_on, readers_of)
                if right is not new.right:
                    new = attrs.evolve(new, right=right)
                elif new.how == "inner":  # one side reduced by the other, never both (each would compute the other)
                    new = attrs.evolve(new, left=_reduced(new.left, new.right, new.left_on, new.right_on, readers_of))
            done[id(node)] = new
            origin[id(new)] = node
        return done[id(node)]

    return visit(plan)


def _reduced(
    side: Node, other: Node, keys: tuple[str, ...], other_keys: tuple[str, ...], readers_of: Callable[[Node], int]
) -> Node:
    """``side`` (a group-by under filters, selects and new columns that keep ``keys``) over only the rows whose
    ``keys`` ``other`` has, where the rule applies; else ``side``."""
    if readers_of(side) != 1:
        return side
    if isinstance(side, (Where, Keep)) or (isinstance(side, Assign) and not set(keys) & {n for n, _ in side.columns}):
        below = _reduced(side.input, other, keys, other_keys, readers_of)
        return side if below is side.input else with_inputs(side, (below,))
    if not (isinstance(side, Aggregated) and not side.steps and set(keys) <= set(side.keys)):
        return side
    if names(side.input) is None or names(other) is None:  # a traced function's columns: left as written
        return side
    if estimate(other).rows > SMALLER * estimate(side.input).rows:
        return side
    return attrs.evolve(side, input=Joined(side.input, other, keys, other_keys, "semi", "_right"))
