"""``explode``: each element of a list column becomes a row, the other columns repeated (polars' ``explode``).

A row's list gives as many rows as it has elements; an empty list one row holding a null (``empty_as_null=True``,
the default, as pandas' ``explode``, Spark's ``explode_outer`` and polars before 2.0; polars 2's default drops it:
``empty_as_null=False``) and a null list one (``keep_nulls=True``; False drops it). Rows keep their order. Several
columns explode together where each row's lists are of one length and give as many rows (an empty and a null list
match where ``empty_as_null`` equals ``keep_nulls``); polars raises a ``ShapeError`` otherwise, and this a
``ValueError`` naming the first row that differs.

A client table explodes on the client (numpy, nothing runs); a resident one on the workers, each shard where it
is, in one map-only run (and a small one before it where several columns explode, to check their lengths).

Example:
    >>> lists = np.empty(3, object)
    >>> lists[:] = [np.array([3, 1]), np.zeros(0, np.int64), None]
    >>> from tfmapreduce._table.schema import ColumnType
    >>> int64s = ColumnType("list<int64>", np.dtype(object))
    >>> columns = {"k": made(int64s.inner, np.array([7, 8, 9]), None), "l": made(int64s, lists, np.array([1, 1, 0]))}
    >>> out = exploded(columns, ["l"], empty_as_null=True, keep_nulls=True)
    >>> out["k"].values.tolist(), out["l"].to_numpy().tolist()
    ([7, 7, 8, 9], [3, 1, None, None])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from .._io.resident import Sharded, delete_all
from .._kinds.map_api import map as map_rows
from .column import Column, ResidentColumn, column_arrays, made, refilled
from .schema import STRING, check_name


def explode_names(columns: Mapping[str, Column | ResidentColumn], names: str | Sequence[str]) -> list[str]:
    """The columns to explode: at least one, each a list column of the table, none twice.

    Raises:
        KeyError: a name that is not a column. TypeError: a column that holds no lists (named, with its type).
        ValueError: no column, or one named twice.
    """
    listed = [names] if isinstance(names, str) else list(names)
    if not listed:
        raise ValueError("explode: expected at least one list column, e.g. t.explode('tags'); got none")
    if len(set(listed)) != len(listed):
        raise ValueError(f"explode: each column may be named once, got {listed}")
    for name in listed:
        type_ = columns[check_name(name, tuple(columns), "explode")].type
        if type_.inner is None:
            raise TypeError(
                f"explode: column {name!r} is a {type_.name} column, not a list column; explode only list columns "
                "(e.g. one a with_columns function returns as a tf.RaggedTensor), and leave it out of explode()"
            )
    return listed


def _mismatch(names: list[str], row: int, lists: Sequence[int]) -> ValueError:
    """The error of a row whose exploded columns' lists differ: ``lists`` each one's length, -1 for a null list."""
    said = [
        f"{n!r} {'a null list' if k < 0 else 'an empty list' if k == 0 else f'{k} element(s)'}"
        for n, k in zip(names, lists, strict=True)
    ]
    return ValueError(
        f"explode: the columns {names} must hold lists of one length in each row (and give as many rows: an empty "
        f"and a null list match where empty_as_null equals keep_nulls), but row {row} holds {', '.join(said)}; "
        "explode them in separate calls, or make their lists of equal lengths first"
    )


def _counts(lengths: Any, present: Any, empty_as_null: bool, keep_nulls: bool, ops: Any) -> Any:
    """How many rows each row gives: its list's length, else 1 or 0 (an empty list, a null list). ``ops``: numpy
    or TensorFlow (the same code on either side)."""
    empty = ops.where(present, np.int64(empty_as_null), np.int64(keep_nulls))
    return ops.where(lengths > 0, lengths, empty)


def exploded(columns: Mapping[str, Column], names: list[str], empty_as_null: bool, keep_nulls: bool) -> dict[str, Column]:
    """A client table's ``columns`` with the list columns ``names`` exploded (see the module), in numpy."""
    rows = len(next(iter(columns.values())))
    lengths, presents, counts = [], [], []
    for name in names:
        c = columns[name]
        present = np.ones(rows, bool) if c.valid is None else np.asarray(c.valid, bool)
        length = np.array([len(v) if ok else 0 for v, ok in zip(c.values, present, strict=True)], np.int64)
        lengths.append(length)
        presents.append(present)
        counts.append(_counts(length, present, empty_as_null, keep_nulls, np))
    differ = np.flatnonzero(np.any((np.stack(lengths) != lengths[0]) | (np.stack(counts) != counts[0]), axis=0))
    if len(differ):
        first = int(differ[0])
        raise _mismatch(names, first, [int(n[first]) if p[first] else -1 for n, p in zip(lengths, presents, strict=True)])
    index = np.repeat(np.arange(rows), counts[0])
    out = {}
    for name, c in columns.items():
        if name not in names:
            out[name] = c.take(index)
            continue
        inner, length = c.type.inner, lengths[names.index(name)]
        assert inner is not None
        kept = length[index] > 0  # the rows holding an element (the others: an empty or null list's null)
        parts = [np.asarray(v, inner.storage) for v, n in zip(c.values, length.tolist(), strict=True) if n]
        values = np.full(len(index), "" if inner == STRING else 0, inner.storage)
        values[kept] = np.concatenate(parts) if parts else values[:0]
        out[name] = made(inner, values, kept)
    return out


Counted = tuple[dict[str, tuple[tf.Tensor, ...]], list[tf.Tensor], list[tf.Tensor], list[tf.Tensor]]
"""A shard's columns' tensors by name, and each exploded column's row lengths, rows' counts and null lists."""


def resident_exploded(
    columns: Mapping[str, ResidentColumn], names: list[str], empty_as_null: bool, keep_nulls: bool, options: dict[str, Any]
) -> dict[str, ResidentColumn]:
    """A resident table's ``columns`` with the list columns ``names`` exploded on the workers (see the module): one
    map-only run, each output shard on its input shard's device (a check run before where several explode)."""
    parts = {name: len(column_arrays(c)) for name, c in columns.items()}
    nullable = empty_as_null or keep_nulls  # (else every row holds an element: no validity)
    arrays = tuple(a for c in columns.values() for a in column_arrays(c))

    def counted(tensors: tuple[tf.Tensor, ...]) -> Counted:
        """Each column's tensors, and each exploded column's row lengths, rows' counts and null lists."""
        each, i = {}, 0
        for name, n in parts.items():
            each[name], i = tuple(tensors[i : i + n]), i + n
        lengths, counts, nulls = [], [], []
        for name in names:
            values, slots, *present = each[name]
            length = tf.reduce_sum(tf.cast(slots, tf.int64), axis=1)
            ok = present[0] if present else tf.ones(tf.shape(values)[:1], tf.bool)
            lengths.append(length)
            counts.append(_counts(length, ok, empty_as_null, keep_nulls, tf))
            nulls.append(tf.logical_not(ok))
        return each, lengths, counts, nulls

    def check(*tensors: tf.Tensor) -> tf.Tensor:
        """A shard's first row whose lists differ (-1: none), its rows, and each column's length there: one row."""
        _, lengths, counts, nulls = counted(tensors)
        stacked, each = tf.stack(lengths), tf.stack(counts)
        bad = tf.logical_or(tf.not_equal(stacked, lengths[0]), tf.not_equal(each, counts[0]))
        differ = tf.where(tf.reduce_any(bad, axis=0))[:, 0]
        first = tf.concat([differ, [-1]], 0)[0]
        said = tf.where(tf.stack(nulls), tf.constant(-1, tf.int64), stacked)  # (-1: a null list)
        padded = tf.concat([said, tf.zeros([len(names), 1], tf.int64)], 1)  # (a shard of no row: zeros)
        there = tf.gather(padded, tf.maximum(first, 0), axis=1)
        return tf.expand_dims(tf.concat([[first, tf.shape(stacked, out_type=tf.int64)[1]], there], 0), 0)

    def explode(*tensors: tf.Tensor) -> tuple[tf.Tensor, ...]:
        each, lengths, counts, _ = counted(tensors)
        index = tf.repeat(tf.range(tf.size(counts[0], out_type=tf.int64)), counts[0])
        out: list[tf.Tensor] = []
        for name in columns:
            if name not in names:
                out.extend(tf.gather(t, index) for t in each[name])
                continue
            values, slots = each[name][:2]
            kept = tf.gather(lengths[names.index(name)] > 0, index)
            flat = tf.boolean_mask(values, slots)  # the elements, row by row
            filler = tf.zeros([1], flat.dtype) if flat.dtype != tf.string else tf.constant([""])
            at = tf.where(kept, tf.cumsum(tf.cast(kept, tf.int64)) - 1, tf.size(flat, out_type=tf.int64))
            out.extend([tf.gather(tf.concat([flat, filler], 0), at), kept][: 2 if nullable else 1])
        return tuple(out)

    if len(names) > 1:
        _checked(map_rows(check, arrays, **options), names)
    made_ = map_rows(explode, arrays, **options)
    made_ = iter(list(made_) if isinstance(made_, tuple) else [made_])
    out = {}
    for name, c in columns.items():
        if name in names:
            inner = c.type.inner
            assert inner is not None
            out[name] = ResidentColumn(inner, next(made_), next(made_) if nullable else None)
        else:
            out[name] = refilled(c, made_)  # (its type kept: a date stays a date)
    return out


def _checked(shards: Sharded, names: list[str]) -> None:
    """Raise the mismatch of the first shard that has one (its row counted over the shards before it)."""
    try:
        rows = np.asarray(shards.gather()).reshape(-1, 2 + len(names))
    finally:
        delete_all([shards])
    offset = 0
    for first, count, *there in rows.tolist():
        if first >= 0:
            raise _mismatch(names, offset + int(first), there)
        offset += int(count)
