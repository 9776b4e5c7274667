"""Join order and strategy from the estimated sizes (``estimate.py``): two optimizer rules, plan → plan.

- ``join_order``: ``(a ⋈ b) ⋈ c``, both inner joins, where ``c`` joins on columns of ``b`` alone, becomes
  ``a ⋈ (b ⋈ c)`` when ``b ⋈ c`` is estimated smaller than ``a ⋈ b`` (the larger table meets the smaller
  intermediate). It is legal as written: an inner join drops the same rows in either order, the rows still come in
  the order of ``a``'s row, then ``b``'s, then ``c``'s (the eager join orders by the left row, then the right), and a
  select restores the columns' order; it is left alone where a suffix would rename a column in either order.
- ``join_sizes``: each join's expected strategy, for ``explain()``: ``"broadcast"`` where the smaller estimated side
  (its key and row number travel: 8 bytes and the key's width a row) fits the join kind's broadcast threshold
  (32 MiB) and has fewer rows, else ``"hash"`` (both sides shuffled by key).  The run chooses again from the real
  sizes: a wrong estimate never broadcasts a large side.

Example: ``a.join(b, on="k").join(c, on="m")`` with ``c`` filtered to a few rows prints, optimized,
``join how=inner on k, estimated hash`` over ``join how=inner on m, estimated broadcast``.
"""

from __future__ import annotations

import attrs

from .._kinds.join.plan import BROADCAST_BYTES
from .estimate import Estimate, estimate
from .plan import Joined, Keep, Node, join_names, names, rebuilt


def join_order(plan: Node) -> Node:
    """``(a ⋈ b) ⋈ c`` as ``a ⋈ (b ⋈ c)`` (inner joins, ``c`` keyed on ``b``'s columns) where that is estimated to
    make fewer rows first; the columns in their order."""
    return rebuilt(plan, _reordered)


def _reordered(node: Node) -> Node:
    lower = node.left if isinstance(node, Joined) else None
    if not (isinstance(node, Joined) and isinstance(lower, Joined) and node.how == lower.how == "inner"):
        return node
    sides = {out: (side, src) for out, side, src in join_names(lower)}
    if not all(sides.get(k, ("", ""))[0] == "right" for k in node.left_on):
        return node  # c is keyed on a's columns (or the keys a and b share): not this rule's reorder
    inner = Joined(lower.right, node.right, tuple(sides[k][1] for k in node.left_on), node.right_on, "inner", node.suffix)
    swapped = Joined(lower.left, inner, lower.left_on, lower.right_on, "inner", lower.suffix)
    before = names(node)
    if before is None or not _plain_names(node, lower, inner, swapped) or set(names(swapped) or ()) != set(before):
        return node
    if estimate(inner).rows >= estimate(lower).rows:
        return node
    return Keep(swapped, before)


def _plain_names(*joins: Joined) -> bool:
    """Whether every right column of ``joins`` keeps its name (no suffix), and each knows its columns."""
    columns = [join_names(j) for j in joins]
    return all(c and all(out == src for out, side, src in c if side == "right") for c in columns)


def join_sizes(plan: Node) -> Node:
    """Each join's expected ``strategy``: ``"broadcast"`` where the smaller estimated side fits ``BROADCAST_BYTES`` (and has
    fewer rows), else ``"hash"``."""
    return rebuilt(plan, _sized)


def _sized(node: Node) -> Node:
    if not isinstance(node, Joined):
        return node
    left, right = estimate(node.left), estimate(node.right)
    small, other, keys = (left, right, node.left_on) if left.rows < right.rows else (right, left, node.right_on)
    fits = small.rows < other.rows and shipped(small, keys) <= BROADCAST_BYTES
    return attrs.evolve(node, strategy="broadcast" if fits else "hash")


def shipped(side: Estimate, keys: tuple[str, ...]) -> int:
    """Bytes a side sends to a table join's run: each row's key (its columns' widths) and row number (8 bytes)."""
    widths = dict(side.widths)
    return int(side.rows * (8 + sum(widths.get(k, 8.0) for k in keys)))
