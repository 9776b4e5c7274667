"""The keyed combiner of a table's aggregates where none needs a group's every value: each aggregate's partial, each
merged its own way; sums, means and counts of columns without nulls in one native pass (``TmrSumsByKey``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from .._ops.combine import (
    SUMMED_AS_THEY_ARE,
    Combiner,
    SegmentForm,
    Summed,
    Sums,
    segment_count,
    segment_max,
    segment_min,
    segment_sum,
)
from .groups import GroupOp
from .ops import partial_of
from .schema import ColumnType

Inputs = tuple[tuple[str, ColumnType, bool], ...]
"""Each aggregated column once, as the map passes it: its name, type and whether it holds nulls."""


def combiner(ops: tuple[GroupOp, ...], inputs: Inputs) -> Combiner:
    """A keyed combiner of the map's (values, [valid]) columns (``inputs``, in order): each aggregate's partial (of
    ``ops``), each merged its own way; where ``summed_natively``, all of them in one native pass."""

    def partial(inputs: Any, ids: tf.Tensor, n: tf.Tensor) -> Any:
        rows = segment_count(ids, n)  # once for every aggregate
        parts = []
        for op in ops:
            column = inputs[0 if op.at is None else op.at]
            parts.append(partial_of(op.op, op.source, column[0], column[1] if len(column) > 1 else None, ids, n, rows))
        return tuple(parts)

    def merge(partials: Any, ids: tf.Tensor, n: tf.Tensor) -> Any:
        return tuple(_merge(op.op, p, ids, n) for op, p in zip(ops, partials, strict=True))

    def whole(value: Any, rows: tf.Tensor) -> Any:
        raise NotImplementedError("a table's aggregates run only as a keyed job")

    if summed_natively(ops, inputs):  # one native pass sums every column and counts the rows once, where the run has it
        summed = Sums(lambda dtype: tf.float64 if dtype.is_floating else tf.int64, functools.partial(_sums_result, ops))
        per_key = SegmentForm(partial=Summed(partial, summed), merge=Summed(merge, SUMMED_AS_THEY_ARE))
    else:
        per_key = SegmentForm(partial=partial, merge=merge)
    return Combiner(partial=whole, merge=whole, name="table_aggregates", per_key=per_key)


def summed_natively(ops: tuple[GroupOp, ...], inputs: Inputs) -> bool:
    """Whether every aggregate is a count, a sum or a mean, and every input column, without nulls, is summed by one
    of them: a float column (summed in float64) or an int32 or int64 one that only sums read (in int64), as
    ``partial_of`` sums them; then ``TmrSumsByKey`` gives the same partials in one pass over the rows.

    Example:
        >>> from tfmapreduce._table.schema import ColumnType
        >>> f64 = ColumnType.of(np.dtype(np.float64))
        >>> summed_natively((GroupOp("sum", f64, 0, None), GroupOp("size", None, None, None)), (("x", f64, False),))
        True
    """
    if any(op.op not in ("size", "count", "sum", "mean") for op in ops):
        return False
    for at, (_, type_, nullable) in enumerate(inputs):
        readers = {op.op for op in ops if op.at == at}
        dtype = np.dtype(type_.storage)
        floating = dtype.kind == "f" and dtype.itemsize >= 4
        integer = dtype in (np.dtype(np.int32), np.dtype(np.int64)) and readers == {"sum"}
        if nullable or not readers & {"sum", "mean"} or not (floating or integer):
            return False
    return True


def _sums_result(ops: Sequence[GroupOp], rows: Any, sums: list[tf.Tensor], counts: tf.Tensor) -> tuple[Any, ...]:
    """The partials ``partial_of`` gives, from one pass's sums (one per input column, in order) and counts."""
    return tuple((counts,) if op.op in ("size", "count") or op.at is None else (sums[op.at], counts) for op in ops)


def _merge(op: str, partial: tuple[tf.Tensor, ...], ids: tf.Tensor, n: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """Partials of equal keys merged: every part summed, but a min's or max's value, which takes its own op."""
    first = {"min": segment_min, "max": segment_max}.get(op, segment_sum)
    return (first(partial[0], ids, n), *(segment_sum(p, ids, n) for p in partial[1:]))
