"""A resident join's rows in the left side's order (``join(..., maintain_order="left")``), on the workers.

Each side gets a column of its rows' positions, made on each shard's device (``tmr.generate`` of
``tf.range(start, stop)``: nothing shipped; a client side's travels with it), which the join carries as any column;
the resident sort then orders the result by (left position, right position), nulls last, and the two columns are
dropped. So the rows come as pandas' ``merge`` gives them: each left row in order, with its matches in the right's
order, then (``how="right"`` or ``"outer"``) the right rows that matched nothing, in the right's order. The cost is
the sort: one more move of every row of the result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from .._io.generate import generate
from .._io.resident import Sharded, delete_all
from .column import Column, ResidentColumn, column_arrays, row_numbers
from .resident_join import Columns, resident_joined
from .resident_order import resident_sorted
from .schema import ColumnType

ORDERS = ("none", "left")
"""The row orders a resident join gives: none set (the default, as Spark's and polars'), or the left side's."""

_LEFT, _RIGHT = "\0left_row", "\0right_row"
"""The position columns' names (a NUL byte: no table's column is named so)."""

_INT64 = ColumnType.of(np.dtype(np.int64))


def joined_in_left_order(
    left: Mapping[str, ResidentColumn],
    right: Columns,
    keys: tuple[Sequence[str], Sequence[str]],
    how: str,
    suffix: str,
    options: dict[str, Any],
) -> dict[str, ResidentColumn]:
    """``resident_joined``'s columns, its rows in the left side's order (see the module)."""
    made: list[Sharded] = []
    try:
        lpos = _positions(next(iter(left.values())))
        made.append(lpos)
        sides: dict[str, Any] = {**left, _LEFT: ResidentColumn(_INT64, lpos)}
        others: dict[str, Any] = dict(right)
        by = [_LEFT]
        if how not in ("semi", "anti"):  # (a semi or anti join's rows are left rows, once each)
            first = right[next(iter(right))]
            if isinstance(first, ResidentColumn):
                others[_RIGHT] = ResidentColumn(_INT64, _positions(first))
                made.append(others[_RIGHT].values)
            else:
                others[_RIGHT] = Column(_INT64, row_numbers(len(first)))
            by.append(_RIGHT)
        rows = resident_joined(sides, others, keys, how, suffix, options)
        made.extend(a for c in rows.values() for a in column_arrays(c))
        sort: dict[str, Any] = {k: options[k] for k in ("cluster", "timeout", "retries") if k in options}
        ordered = resident_sorted(rows, by, [False] * len(by), [True] * len(by), None, sort)
        made.extend(a for name in by for a in column_arrays(ordered[name]))
        return {name: c for name, c in ordered.items() if name not in by}
    finally:
        delete_all(list({id(a): a for a in made}.values()))


def _positions(column: ResidentColumn) -> Sharded:
    """Each row's position in its table (shard after shard), made on its shard's device, on the column's partition."""
    plan = column.values.plan
    return generate(
        lambda start, stop: tf.range(start, stop, dtype=tf.int64),
        rows=plan.rows,
        cluster=column.values.cluster,
        sizes=list(plan.sizes),
        devices=[s.device for s in plan.shards],
    )
