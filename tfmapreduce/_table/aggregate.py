"""Aggregates by key in one keyed job: every aggregate's input travels as one column of the job's values (a tuple),
and each key's partials merge with each aggregate's own merge (a per-column combiner)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from .._kinds.mapreduce import MapReduce
from .._ops.combine import Combiner, SegmentForm, segment_max, segment_min, segment_sum
from .column import Column, made
from .keys import KeyCodec
from .ops import OPS, partial_of, type_of
from .schema import ColumnType, check_name


@attrs.frozen
class Aggregate:
    """One output column of an aggregation: ``output = op(column)`` (``column`` is ``"*"`` for a row count)."""

    output: str
    column: str
    op: str

    @classmethod
    def parse(cls, output: str, spec: Any, names: tuple[str, ...]) -> Aggregate:
        """``output=(column, op)`` as ``agg`` takes it.

        Raises:
            TypeError: not a pair of a column name and an op name; ValueError: an unknown op, or ``"*"`` with another
            op than ``"count"``; KeyError: an unknown column.
        """
        if not (isinstance(spec, tuple) and len(spec) == 2 and all(isinstance(s, str) for s in spec)):
            raise TypeError(
                f"agg: {output}= expected a pair (column, op), e.g. {output}=('price', 'sum'), got {type(spec).__name__} {spec!r}"
            )
        column, op = spec
        if op not in OPS:
            raise ValueError(f"agg: {output}=({column!r}, {op!r}): unknown op {op!r}; expected one of {sorted(OPS)}")
        if column == "*":
            if op not in ("count", "size"):
                raise ValueError(f"agg: {output}=('*', {op!r}): '*' (every row) takes only 'count'; did you mean ('*', 'count')?")
            return cls(output, column, "size")
        return cls(output, check_name(column, names, f"agg: {output}="), op)


def aggregate(
    columns: Mapping[str, Column], keys: Sequence[str], aggregates: Sequence[Aggregate], options: Mapping[str, Any]
) -> dict[str, Column]:
    """The aggregated columns (the key columns, then the aggregates), one row per group, sorted by the keys (nulls
    last); with no keys, one row for the whole table."""
    for a in aggregates:
        if a.column != "*":
            type_of(a.op, columns[a.column].type, a.output)  # refuse what does not apply before any run
    rows = len(next(iter(columns.values()))) if columns else 0
    if rows == 0:
        return _empty(columns, keys, aggregates)
    codec = KeyCodec(tuple(columns[k].type for k in keys), tuple(columns[k].nullable for k in keys))
    needed = list(dict.fromkeys([*keys, *(a.column for a in aggregates if a.column != "*")]))
    arrays: list[np.ndarray[Any, Any]] = []
    slots: dict[str, tuple[int, int | None]] = {}
    for name in needed:
        c = columns[name]
        arrays.append(c.values)
        slots[name] = (len(arrays) - 1, None if c.valid is None else len(arrays))
        if c.valid is not None:
            arrays.append(c.valid)
    ops = tuple((a.op, None if a.column == "*" else columns[a.column].type) for a in aggregates)

    def map_fn(*tensors: tf.Tensor) -> tuple[tf.Tensor, Any]:
        def column(name: str) -> tuple[tf.Tensor, tf.Tensor | None]:
            values, valid = slots[name]
            return tensors[values], None if valid is None else tensors[valid]

        key = codec.encode([column(k) for k in keys]) if keys else tf.zeros(tf.shape(tensors[0])[:1], tf.int64)
        inputs = tuple(column(a.column) if a.column != "*" else (tf.zeros(tf.shape(key), tf.int8), None) for a in aggregates)
        return key, tuple((v,) if valid is None else (v, valid) for v, valid in inputs)

    result = MapReduce(map_fn, _combiner(ops), by_key=True).run(tuple(arrays), **options)
    out = dict(zip(keys, codec.decode(result.keys), strict=True)) if keys else {}
    for a, (op, type_), partial in zip(aggregates, ops, result.values, strict=True):
        out[a.output] = _finish(op, type_, [np.asarray(p) for p in partial], a.output)
    if keys:
        order = sort_order([out[k] for k in keys])
        out = {name: c.take(order) for name, c in out.items()}
    return out


def _combiner(ops: tuple[tuple[str, ColumnType | None], ...]) -> Combiner:
    """A keyed combiner over a tuple of (values, [valid]) inputs, one per aggregate, each merged its own way."""

    def partial(inputs: Any, ids: tf.Tensor, n: tf.Tensor) -> Any:
        return tuple(
            partial_of(op, type_, column[0], column[1] if len(column) > 1 else None, ids, n)
            for (op, type_), column in zip(ops, inputs, strict=True)
        )

    def merge(partials: Any, ids: tf.Tensor, n: tf.Tensor) -> Any:
        return tuple(_merge(op, p, ids, n) for (op, _), p in zip(ops, partials, strict=True))

    def whole(value: Any, rows: tf.Tensor) -> Any:
        raise NotImplementedError("a table's aggregates run only as a keyed job")

    return Combiner(partial=whole, merge=whole, name="table_aggregates", per_key=SegmentForm(partial=partial, merge=merge))


def _merge(op: str, partial: tuple[tf.Tensor, ...], ids: tf.Tensor, n: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """Partials of equal keys merged: every part summed, but a min's or max's value, which takes its own op."""
    first = {"min": segment_min, "max": segment_max}.get(op, segment_sum)
    return (first(partial[0], ids, n), *(segment_sum(p, ids, n) for p in partial[1:]))


def _finish(op: str, type_: ColumnType | None, partial: list[np.ndarray[Any, Any]], output: str) -> Column:
    """The result column of one aggregate from its merged partial: null where a group had no value."""
    result = type_of(op, type_, output)
    if op in ("count", "size"):
        return made(result, partial[0], None)
    value, count = partial
    if op == "mean":
        value = value / np.maximum(count, 1)
    value = np.where(count > 0, value, 0)  # a group with no value: a min's or max's filler would not fit the type
    return made(result, value.astype(result.storage), count > 0)


def _empty(columns: Mapping[str, Column], keys: Sequence[str], aggregates: Sequence[Aggregate]) -> dict[str, Column]:
    """The aggregates of no rows: no groups, or (no keys) one row with counts 0 and nulls (as SQL gives)."""
    rows = 0 if keys else 1
    out = {k: made(columns[k].type, np.zeros(0, columns[k].type.storage), None) for k in keys}
    for a in aggregates:
        result = type_of(a.op, None if a.column == "*" else columns[a.column].type, a.output)
        nulls = None if a.op in ("count", "size") else np.zeros(rows, bool)
        out[a.output] = made(result, np.zeros(rows, result.storage), nulls)
    return out


def sort_order(columns: Sequence[Column]) -> np.ndarray[Any, Any]:
    """The rows' order sorted by ``columns`` (the first first), each ascending with its nulls last."""
    codes = []
    for c in columns:
        valid = np.ones(len(c), bool) if c.valid is None else c.valid
        code = np.full(len(c), len(c), np.int64)
        if valid.any():
            code[valid] = np.unique(c.values[valid], return_inverse=True)[1].reshape(-1)
        codes.append(code)
    return np.lexsort(codes[::-1]) if codes else np.arange(0)
