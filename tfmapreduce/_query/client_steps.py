"""Small steps done on the client: a sort (its rows ordered by ``order.sort_keys``, the byte keys the workers make for
a distributed sort, with numpy), the row-wise steps (a filter, new columns: the map function a map run would trace,
called on the client as one ``tf.function``) and a group-by of counts, sums, means, minima and maxima
(``aggregate_client``) whose input holds at most ``CLIENT_ROWS`` rows (a query's ``client_rows=``) when they run.
Every step's result comes back to the client, so a run of such a step would only send its rows to the workers and
back (Spark's optimizer computes projections and filters over a driver-side relation on the driver too).
``explain()`` marks the step ``client`` from the estimated rows, the run decides from the real ones (as a join's
strategy).

Example: ``lines.group_by("part").agg(total=("v", "sum")).with_columns(share=col("total") / 10).sort("share")``
over a million lines is one keyed run, the share and the sort of its few groups made on the client; in ``lines.join(small, left_on="part", right_on="p")``,
``small = parts.filter(col("size").isin(["S", "M"])).select(col("name").alias("p"), "size")`` over a client table
``parts`` of at most ``CLIENT_ROWS`` rows is made on the client, then looked up in the map of the step that reads
the join.
"""

from __future__ import annotations

import numpy as np

from .._table.aggregate_client import CLIENT_OPS
from .._table.order import sort_keys
from .._table.table import Table
from .plan import Aggregated, Assign, Fused, Keep, Node, Sorted, Where

CLIENT_ROWS = 10_000
"""The most rows a sort's, row-wise steps' or group-by's input may hold for it to run on the client (TPC-H Q21's 100
suppliers sorted, Q7's nations and suppliers filtered before they are looked up, Q15's greatest revenue)."""


def on_client(node: Node, rows: int, client_rows: int | None = None) -> bool:
    """Whether ``node``, over an input of ``rows`` rows, is done on the client: a sort, row-wise steps, or a group-by
    of ``CLIENT_OPS`` (``aggregate_client``; list columns aside) over at most ``client_rows`` rows (None:
    ``CLIENT_ROWS``)."""
    if rows > (CLIENT_ROWS if client_rows is None else client_rows):
        return False
    if isinstance(node, Aggregated):
        return all(op in CLIENT_OPS for _, _, op in node.aggs)
    return isinstance(node, (Sorted, Fused, Where, Assign, Keep))


def sorted_on_client(table: Table, node: Sorted) -> Table:
    """``table`` sorted as ``node`` says, stably, on the client: the same order as ``Table.sort``."""
    columns = [table.column(n) for n in node.by]
    if any(c.type.inner is not None for c in columns):  # a list column: the eager sort, which ranks its lists first
        return table.sort(list(node.by), descending=list(node.descending), nulls_last=list(node.nulls_last))
    keys = sort_keys(columns, node.descending, node.nulls_last) if len(table) else np.arange(0)
    rows = np.argsort(keys, kind="stable")[: node.limit]
    return Table({n: table.column(n).take(rows) for n in table.columns})
