"""The steps after a query's last group-by, on its small result, done on the client: a sort (its rows ordered by
``order.sort_keys``, the byte keys the workers make for a distributed sort, with numpy) and the row-wise steps (a
filter, new columns: the map function a map run would trace, called eagerly on the client), so neither costs a
distributed run. A step is done on the client where its input holds at most ``CLIENT_ROWS`` rows when it runs and
is the result of a group-by or a ``unique`` (row-wise steps and sorts between), or where it is row-wise steps that
make a lookup's small side (``lookups.py``: the side comes to the client whole anyway, and travels to every worker
from there): ``explain()`` marks it ``client`` from the estimated rows, the run decides from the real ones (as a
join's strategy).

Example: ``lines.group_by("part").agg(total=("v", "sum")).with_columns(share=col("total") / 10).sort("share")`` is
one keyed run, the share and the sort made on the client; in ``lines.join(small, left_on="part", right_on="p")``,
``small = parts.filter(col("size").isin(["S", "M"])).select(col("name").alias("p"), "size")`` over a client table
``parts`` of at most ``CLIENT_ROWS`` rows is made on the client, then looked up in the map of the step that reads
the join.
"""

from __future__ import annotations

import numpy as np

from .._table.order import sort_keys
from .._table.table import Table
from .plan import Aggregated, Assign, Distinct, Fused, Keep, Limited, Node, Sorted, Where

CLIENT_ROWS = 10_000
"""The most rows a group-by's result may hold for the steps after it to run on the client (TPC-H Q21's 100
suppliers sorted, Q8's two years' market shares), and a lookup side's input for its row-wise steps to (TPC-H Q7's
nations and suppliers)."""


def after_group_by(node: Node) -> bool:
    """Whether ``node`` (a sort or row-wise steps) reads a group-by's or a ``unique``'s result, row-wise steps and
    sorts between."""
    below = node.input if isinstance(node, (Sorted, Fused, Where, Assign, Keep, Limited)) else None
    while isinstance(below, (Sorted, Fused, Where, Assign, Keep, Limited)):
        below = below.input
    return isinstance(below, (Aggregated, Distinct))


def on_client(node: Node, rows: int, looked_up: bool = False) -> bool:
    """Whether ``node``, over an input of ``rows`` rows, is done on the client (``after_group_by``, ``CLIENT_ROWS``);
    ``looked_up``: ``node`` is a lookup's side (a ``Bound`` root's table), done on the client where it is row-wise."""
    rowwise = isinstance(node, (Fused, Where, Assign, Keep))
    return rows <= CLIENT_ROWS and (after_group_by(node) or (looked_up and rowwise))


def sorted_on_client(table: Table, node: Sorted) -> Table:
    """``table`` sorted as ``node`` says, stably, on the client: the same order as ``Table.sort``."""
    columns = [table.column(n) for n in node.by]
    if any(c.type.inner is not None for c in columns):  # a list column: the eager sort, which ranks its lists first
        return table.sort(list(node.by), descending=list(node.descending), nulls_last=list(node.nulls_last))
    keys = sort_keys(columns, node.descending, node.nulls_last) if len(table) else np.arange(0)
    rows = np.argsort(keys, kind="stable")[: node.limit]
    return Table({n: table.column(n).take(rows) for n in table.columns})
