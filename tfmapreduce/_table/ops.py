"""Each aggregate's types and per-key partial, with SQL's nulls: an aggregate skips nulls, ``count`` counts the
values that are not null, ``size`` (``("*", "count")``) every row; merges are in ``aggregate_combiner``. The
aggregates that no partial merges (``median``, ``quantile``, ``count_distinct``, ``top_k``, a string's ``min`` and
``max``) see every value of a group, in ``groups``.

Partials are tuples whose last part (but a count's) is the number of values seen, so a group with none gives null.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from .._ops.combine import segment_count, segment_max, segment_min, segment_sum
from .schema import ColumnType, list_of

OPS = frozenset({"sum", "mean", "count", "size", "min", "max", "median", "count_distinct"})
"""The aggregates ``agg`` takes by name."""

PARAMETRIC = frozenset({"quantile", "top_k"})
"""The aggregates ``agg`` takes as ``(name, parameter)``: ``("quantile", q)``, ``("top_k", k)``."""

LIST_OPS = frozenset({"count", "count_distinct", "min", "max"})
"""The aggregates of a list column: its lists compared whole, in the order of a list key (a null list skipped)."""

HOLISTIC = frozenset({"median", "quantile", "count_distinct", "top_k"})
"""The aggregates no partial merges: each group's values all meet on its reducer."""


def holistic(op: str, source: ColumnType | None) -> bool:
    """Whether ``op`` over a column of type ``source`` needs every value of a group (no combiner computes it)."""
    return op in HOLISTIC or (op in ("min", "max") and source is not None and source.name == "string")


INT64 = ColumnType("int64", np.dtype(np.int64))
UINT64 = ColumnType("uint64", np.dtype(np.uint64))
FLOAT64 = ColumnType("float64", np.dtype(np.float64))


def type_of(op: str, source: ColumnType | None, output: str) -> ColumnType:
    """The type of ``op`` over a column of type ``source`` (None: ``size``).

    Raises:
        TypeError: an op that does not apply to the column's type (a sum, mean, median or quantile of strings or dates).
    """
    if op in ("count", "size", "count_distinct"):
        return INT64
    assert source is not None
    if op in ("min", "max"):
        return source
    if op == "top_k":
        return list_of(source)
    if not source.is_numeric:
        raise TypeError(
            f"agg: {output}=(..., {op!r}): {op} needs a number or bool column, got a {source.name} column; use 'min', 'max' or 'count' on it"
        )
    if op in ("mean", "median", "quantile") or source.storage.kind == "f":
        return FLOAT64
    return UINT64 if source.name == "uint64" else INT64


def _summed(values: tf.Tensor) -> tf.Tensor:
    """Values as summed: floats in float64, integers and bool in int64 (uint64 in uint64)."""
    if values.dtype.is_floating:
        return tf.cast(values, tf.float64)
    return values if values.dtype == tf.uint64 else tf.cast(values, tf.int64)


def _ordered(values: tf.Tensor) -> tf.Tensor:
    """Values in a dtype TF's segment min and max take: narrow ints and bool as int32, uint32 as int64, float16 as float32."""
    if values.dtype in (tf.bool, tf.int8, tf.int16, tf.uint8, tf.uint16):
        return tf.cast(values, tf.int32)
    if values.dtype == tf.uint32:
        return tf.cast(values, tf.int64)
    if values.dtype == tf.float16:
        return tf.cast(values, tf.float32)
    return values


def _identity(dtype: tf.DType, op: str) -> tf.Tensor:
    """The value that never wins ``op`` (what a null becomes before a min or max)."""
    if dtype.is_floating:
        return tf.constant(np.inf if op == "min" else -np.inf, dtype)
    return tf.constant(dtype.max if op == "min" else dtype.min, dtype)


def partial_of(
    op: str,
    source: ColumnType | None,
    values: tf.Tensor,
    valid: tf.Tensor | None,
    ids: tf.Tensor,
    n: tf.Tensor,
    rows: tf.Tensor | None = None,
) -> tuple[tf.Tensor, ...]:
    """The per-key partial of ``op`` over one batch's rows (``valid`` None: no nulls); ``rows``: each key's rows
    counted once for every aggregate (None: counted here)."""
    if rows is None:
        rows = segment_count(ids, n)
    if op == "size" or (op == "count" and valid is None):
        return (rows,)
    count = rows if valid is None else segment_sum(tf.cast(valid, tf.int64), ids, n)
    if op == "count":
        return (count,)
    if op in ("sum", "mean"):
        summed = tf.cast(_summed(values), tf.float64) if op == "mean" else _summed(values)
        if valid is not None:
            summed = tf.where(valid, summed, tf.zeros([], summed.dtype))
        return segment_sum(summed, ids, n), count
    ordered = _ordered(values)
    if valid is not None:
        ordered = tf.where(valid, ordered, _identity(ordered.dtype, op))
    return (segment_min if op == "min" else segment_max)(ordered, ids, n), count
