"""A group-by's result kept on the workers (``agg(..., resident=True)``): no row passes through the client.

Two runs, and the resident sort: the table's keyed job (``aggregate.job_of``, the eager group-by's own, its
combiner or its group reducer, a top-k's lists padded to ``k`` slots with a mask of those holding a value) keeps
each group's key and partials on the group's reducer (``resident=True``); a map-only run there makes the
result's columns — the key columns decoded from the key in the graph (``KeyCodec.columns``), then each aggregate
finished as the client finishes it (a mean its sum over its count, a group with no value a null; a top-k's lists
as they are, a list column: ``ResidentColumn``); and the resident sort orders the groups by their keys, nulls last, as the eager
group-by gives them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import tensorflow as tf

from .._io.resident import Sharded, delete_all
from .._kinds.map_api import map as map_rows
from .aggregate import Aggregate, Spec, _empty, job_of
from .column import ResidentColumn, column_arrays, placed
from .keys import KeyCodec
from .ops import type_of
from .resident_join_order import joined_in_left_order
from .resident_list_keys import hex_columns
from .resident_order import resident_sorted
from .resident_unique import resident_distinct
from .schema import STRING, ColumnType

_PAIRED, _LISTS = "\0hex key", "\0lists"
"""The names of a list column's hex keys and its lists in :func:`_relisted` (``KEY + name`` is the distinct run's)."""
_MAP_OPTIONS = ("cluster", "timeout", "retries")
"""The run options of the map-only run that finishes the aggregates (the keyed run takes every option)."""


def kept_aggregate(
    columns: Mapping[str, ResidentColumn], keys: Sequence[str], aggregates: Sequence[Aggregate], options: Mapping[str, Any]
) -> dict[str, ResidentColumn]:
    """The aggregated columns (the key columns, then the aggregates), one row per group sorted by the keys (nulls
    last), as new resident columns on the reducers: the same rows as ``aggregate.aggregate`` gives on the client.
    A ``("top_k", k)`` is a list column: each group's ``k`` slots and a mask of those holding a value (``GroupOp.padded``).
    A list column, a key or aggregated, stands for its lists' keys (``resident_list_keys``, made first), which order
    as the lists do: counted, grouped by, their least and greatest its min and max; a list key and a min or max are
    lists again at the end (:func:`_relisted`).
    """
    used = {*keys, *(a.column for a in aggregates)}
    coded = hex_columns({n: c for n, c in columns.items() if n in used and c.type.inner is not None}, options)
    try:
        out = _kept({**columns, **coded}, keys, aggregates, options)
        lists = {k: k for k in keys if k in coded} | {
            a.output: a.column for a in aggregates if a.column in coded and a.op in ("min", "max")
        }
        return _relisted(out, {o: (coded[c], columns[c]) for o, c in lists.items()}, options) if lists else out
    finally:
        delete_all([c.values for c in coded.values()])


def _relisted(
    grouped: dict[str, ResidentColumn], lists: Mapping[str, tuple[ResidentColumn, ResidentColumn]], options: Mapping[str, Any]
) -> dict[str, ResidentColumn]:
    """``grouped`` with each column named in ``lists`` (a list column's hex keys) its lists again: the distinct
    hex keys of the input (``lists[name]``) with a list each (the key decides it), joined on the hex key in the groups' order (a null key
    matches nothing: a null list); the other columns and the order as they are."""
    order = list(grouped)
    made: list[Sharded] = []
    pairs_of: dict[int, dict[str, ResidentColumn]] = {}  # each list column's pairs, made once
    try:
        for name, (hexed, column) in lists.items():
            if id(column) not in pairs_of:
                pairs_of[id(column)] = resident_distinct({_PAIRED: hexed, _LISTS: column}, [_PAIRED], dict(options), [_LISTS])
                made.extend(a for c in pairs_of[id(column)].values() for a in column_arrays(c))
            made.extend(a for c in grouped.values() for a in column_arrays(c))
            grouped = joined_in_left_order(grouped, pairs_of[id(column)], ([name], [_PAIRED]), "left", "", dict(options))
            made.extend(column_arrays(grouped[name]))
            grouped[name] = grouped.pop(_LISTS)
        return {n: grouped[n] for n in order}
    finally:
        delete_all(made)


def _kept(
    columns: Mapping[str, ResidentColumn], keys: Sequence[str], aggregates: Sequence[Aggregate], options: Mapping[str, Any]
) -> dict[str, ResidentColumn]:
    for a in aggregates:
        if a.column != "*":
            type_of(a.op, columns[a.column].type, a.output)  # refuse what does not apply before any run
    mapped = {k: options[k] for k in _MAP_OPTIONS if k in options}
    if len(next(iter(columns.values()))) == 0:  # no run: the aggregates of no rows, made here (no row of the input)
        first = next(iter(columns.values())).values
        place = {"cluster": first.cluster, **mapped}  # (the table's own cluster where the call names none)
        return placed(_empty({n: c.type for n, c in columns.items()}, keys, aggregates), True, place)
    codec = KeyCodec(tuple(columns[k].type for k in keys), tuple(columns[k].nullable for k in keys))
    inputs = tuple(
        (name, columns[name].type, columns[name].nullable)
        for name in dict.fromkeys(a.column for a in aggregates if a.column != "*")
    )
    lists = any(a.op == "top_k" for a in aggregates)  # (only then another job than the client's)
    spec = Spec(codec, tuple(keys), inputs, tuple(attrs.evolve(a, output="") for a in aggregates), padded=lists)
    arrays: list[Sharded] = []
    for name, _ in spec.layout:
        c = columns[name]
        arrays.extend([c.values] if c.valid is None else [c.values, c.valid])
    result = job_of(spec).run(tuple(arrays), resident=True, **options)
    made: list[Sharded] = []
    try:
        leaves = tuple(len(tf.nest.flatten(s)) for s in result.structure)
        types = tuple(type_of(a.op, None if a.column == "*" else columns[a.column].type, a.output) for a in aggregates)
        out = map_rows(_finisher(spec, leaves, types), (result.keys, *result.dense("agg")), **mapped)
        made.extend(list(out) if isinstance(out, tuple) else [out])
        parts = iter(made)
        grouped: dict[str, ResidentColumn] = {}
        for name, nullable in zip(keys, codec.nullable, strict=True):
            grouped[name] = ResidentColumn(columns[name].type, next(parts), next(parts) if nullable else None)
        for a, type_ in zip(aggregates, types, strict=True):
            counted = a.op in ("count", "size", "count_distinct")
            grouped[a.output] = ResidentColumn(type_, next(parts), None if counted else next(parts))
        if not keys:
            made.clear()  # one row: nothing to sort, the columns are the result
            return grouped
        n = len(keys)
        return resident_sorted(grouped, list(keys), [False] * n, [True] * n, None, dict(options))
    finally:
        result.delete()
        delete_all(made)


@functools.lru_cache(maxsize=64)
def _finisher(spec: Spec, leaves: tuple[int, ...], types: tuple[ColumnType, ...]) -> Callable[..., Any]:
    """The map function of a reducer's groups: each key's key columns (values, [valid]), then each aggregate's value
    and (but for counts) its validity, from its key and its partials (``leaves[i]`` tensors for aggregate ``i``)."""

    def finish(keys: tf.Tensor, *partials: tf.Tensor) -> tuple[tf.Tensor, ...]:
        out: list[tf.Tensor] = []
        for values, valid in spec.keys.columns(keys) if spec.key_names else []:
            out.extend([values] if valid is None else [values, valid])
        at = 0
        for op, type_, n in zip(spec.ops, types, leaves, strict=True):
            out.extend(_finished(op.op, type_, partials[at : at + n]))
            at += n
        return tuple(out)

    return finish


def _finished(op: str, type_: ColumnType, partial: Sequence[tf.Tensor]) -> list[tf.Tensor]:
    """One aggregate's column from its merged partial, as the client's ``_finish`` and ``groups.finished`` make it:
    a count as it is; a top-k's padded lists and their mask as they are; another value and its validity (a group
    with no value: null, its slot the filler)."""
    if op == "top_k":
        return list(partial)
    if op in ("count", "size", "count_distinct"):
        return [tf.cast(partial[0], tf.int64)]
    value, count = partial[0], partial[1]
    some = count > 0
    if type_ == STRING:
        return [tf.where(some, value, tf.zeros_like(value)), some]
    if op == "mean":
        value = tf.cast(value, tf.float64) / tf.cast(tf.maximum(count, 1), tf.float64)
    value = tf.cast(value, tf.as_dtype(type_.storage))
    return [tf.where(some, value, tf.zeros_like(value)), some]
