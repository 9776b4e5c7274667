"""Joins of a resident table with another (resident, or a client :class:`Table`) on the workers: no row of a
resident side passes through the client.

Three steps, each a run over data that stay where they are::

    keys      a map-only run over each resident side's key columns makes one exact key a row (``keys.py``'s
              encoding, with the common type of the two columns; a list column by its list key, ``list_hex``); a
              client side's keys are encoded on the client by the same graph
    join      the join kind joins the keys, every column of each side (values and validity; a list column's
              ``[rows, width]`` values, slot mask and rows' validity) travelling as the rows' values; its rows stay
              where they are made (``resident=True``)
    columns   a map-only run over the join's rows makes the result's columns: the key columns once (each row's key
              from the side it has), then each side's other columns, null where the row has no such side (a list
              column's: a null list, no slot and its rows' validity False)

SQL's nulls without moving a row aside: a key with a null is encoded with its flag bytes and one more byte that
names its side, so it equals no key of the other side (whose keys end otherwise) and its row is an unmatched row of
its side, kept by the joins that keep them. Semi and anti joins are left joins with the right side's distinct keys
(a keyed run on the workers; on the client for a client side), then a filter on whether a row matched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from .._io.resident import Sharded, delete_all
from .._kinds.join.api import join as join_kind
from .._kinds.map_api import filter as filter_rows
from .._kinds.map_api import map as map_rows
from .._kinds.mapreduce import MapReduce
from .._ops.combine import COUNT
from .column import Column, ResidentColumn, column_arrays, refilled
from .join import common_type
from .keys import KeyCodec
from .maps import arrays_of
from .resident_list_keys import hex_columns, list_hex
from .schema import STRING, ColumnType

Columns = Mapping[str, Column] | Mapping[str, ResidentColumn]

_MAP_OPTIONS = ("cluster", "timeout", "retries")
"""The run options the map-only runs of a join take (the others are the join's: ``strategy=``, ``reducers=``...)."""


def resident_joined(
    left: Mapping[str, ResidentColumn],
    right: Columns,
    keys: tuple[Sequence[str], Sequence[str]],
    how: str,
    suffix: str,
    options: dict[str, Any],
) -> dict[str, ResidentColumn]:
    """The columns of ``left`` joined with ``right`` on ``keys`` (left names, right names), on the workers."""
    lkeys, rkeys = keys
    types = tuple(common_type(left[a].type, right[b].type, (a, b)) for a, b in zip(lkeys, rkeys, strict=True))
    mapped = {k: options[k] for k in _MAP_OPTIONS if k in options}
    made: list[Sharded] = []  # the intermediates, freed at the end
    try:
        lcoded, rcoded = _coded(left, lkeys, mapped, made), _coded(right, rkeys, mapped, made)
        codec = KeyCodec(
            tuple(STRING if t.inner is not None else t for t in types),  # (a list key: its list key's text)
            tuple(lcoded[a].nullable or rcoded[b].nullable for a, b in zip(lkeys, rkeys, strict=True)),
        )
        lkey = _keys(lcoded, lkeys, codec, b"L", mapped)
        made.append(lkey)
        larrays = arrays_of(left)
        host = not any(isinstance(c, ResidentColumn) for c in right.values())
        if how in ("semi", "anti"):
            if host:
                distinct: Any = _distinct(_keys(rcoded, rkeys, codec, b"R", mapped))
                distinct = (distinct, np.zeros(len(distinct), np.int8))
            else:
                rkey = _keys(rcoded, rkeys, codec, b"R", mapped)
                made.append(rkey)
                distinct = _DISTINCT.run(rkey, resident=True, **mapped)
                made.extend([distinct.keys, distinct.values])
            pairs = join_kind((lkey, larrays), distinct, how="left", resident=True, **options)
            made.extend(_parts(pairs))
            keep = _kept(how == "semi")
            out = filter_rows(keep, (pairs.right_matched, *pairs.left), **mapped)
            parts = iter(list(out) if isinstance(out, tuple) else [out])
            next(parts)
            return {name: refilled(c, parts) for name, c in left.items()}
        rkey = _keys(rcoded, rkeys, codec, b"R", mapped)
        if isinstance(rkey, Sharded):
            made.append(rkey)
        pairs = join_kind((lkey, larrays), (rkey, arrays_of(right)), how=how, resident=True, **options)
        made.extend(_parts(pairs))
        return _columns(left, right, keys, types, how, suffix, pairs, mapped)
    finally:
        delete_all(list({id(a): a for a in made}.values()))


def _coded(columns: Columns, names: Sequence[str], options: dict[str, Any], made: list[Sharded]) -> dict[str, Any]:
    """The key columns ``names`` as a join's key is encoded from them: a list column as its list key, a string null
    where the list is (``resident_list_keys.list_hex``: made on the workers for a resident side, appended to
    ``made``; here by the same graph for a client side, in its travelling form)."""
    lists = {n: columns[n] for n in names if columns[n].type.inner is not None}
    coded = hex_columns({n: c for n, c in lists.items() if isinstance(c, ResidentColumn)}, options)
    made.extend(c.values for c in coded.values())
    for n, c in lists.items():
        if isinstance(c, Column):
            present = None if c.present is None else tf.constant(c.present)
            keys = list_hex(tf.constant(c.values), tf.constant(c.valid), present).numpy()
            coded[n] = Column(STRING, keys, c.present)  # type: ignore[assignment]
    return {n: coded.get(n, columns[n]) for n in names}


Where = tuple[int, int | None, int | None]
"""Where a column's arrays are among a map's inputs: its values, its validity (a list's slot mask), a list's rows'
validity (``present``); None where it has none."""


@functools.lru_cache(maxsize=256)
def _maker(
    outputs: tuple[tuple[ColumnType, bool, bool, Where | None, Where | None], ...],
) -> Callable[..., tuple[tf.Tensor, ...]]:
    """The map function making a join's columns from its rows ``(left matched, right matched, *left, *right)``: each
    output's type, whether it has a validity and (a list column) a rows' validity, and where its left and right
    arrays are (a key column has both: each row's from the side it has). A list column of a row without its side is
    a null list: no slot, its rows' validity False."""

    def made(lm: tf.Tensor, rm: tf.Tensor, *tensors: tf.Tensor) -> tuple[tf.Tensor, ...]:
        def column(at: Where, matched: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
            if at[1] is None:
                return tensors[at[0]], matched, matched
            mask = tensors[at[1]]  # a list column's: [rows, width], the slots of its elements
            if mask.shape.rank == 1:
                return tensors[at[0]], matched & mask, matched
            present = matched if at[2] is None else matched & tensors[at[2]]
            return tensors[at[0]], present[:, None] & mask, present

        out: list[tf.Tensor] = []
        for type_, has_valid, has_present, lpos, rpos in outputs:
            if lpos is not None and rpos is not None:
                (a, av, ap), (b, bv, bp) = column(lpos, lm), column(rpos, rm)
                on = lm
                if type_.inner is not None:  # a list key: both sides' [rows, width] arrays as wide as the wider
                    width = tf.maximum(tf.shape(a)[1], tf.shape(b)[1])
                    a, av, b, bv = (tf.pad(t, [[0, 0], [0, width - tf.shape(t)[1]]]) for t in (a, av, b, bv))
                    on = lm[:, None]
                elif type_ != STRING:
                    a, b = tf.cast(a, type_.storage), tf.cast(b, type_.storage)
                values, valid, present = tf.where(on, a, b), tf.where(on, av, bv), tf.where(lm, ap, bp)
            else:
                values, valid, present = column(lpos, lm) if lpos is not None else column(rpos, rm)  # type: ignore[arg-type]
            filler = tf.constant("") if type_ == STRING else tf.zeros([], values.dtype)
            out.append(tf.where(valid, values, filler))
            if has_valid:
                out.append(valid)
            if has_present:
                out.append(present)
        return tuple(out)

    return made


def _keys_only(keys: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return keys, keys


_DISTINCT: MapReduce[Any] = MapReduce(_keys_only, COUNT, by_key=True)
"""The distinct keys of a resident side (with their counts), kept on the reducers."""


def _keys(columns: Columns, names: Sequence[str], codec: KeyCodec, side: bytes, options: dict[str, Any]) -> Any:
    """Each row's key (a resident ``Sharded``, or a numpy array for a client side): ``codec``'s, and ``side`` after
    the key of a row with a null in a key column, so that it matches no row of the other side."""
    at = _positions(columns)
    keyed = _keyer(tuple(at[list(columns).index(n)][:2] for n in names), codec, side)
    arrays = arrays_of(columns)
    if isinstance(arrays[0], Sharded):
        return map_rows(keyed, arrays, **options)
    tensors = [tf.constant(a.tolist(), tf.string) if a.dtype == object else tf.constant(a) for a in arrays]
    return keyed(*tensors).numpy()


@functools.lru_cache(maxsize=256)
def _keyer(at: tuple[tuple[int, int | None], ...], codec: KeyCodec, side: bytes) -> Callable[..., tf.Tensor]:
    """The map function of :func:`_keys` (one a spec, so that its compiled graphs are reused): the key columns are
    at ``at`` (values, validity) among its inputs."""

    def keyed(*tensors: tf.Tensor) -> tf.Tensor:
        fields = []
        ok = tf.ones(tf.shape(tensors[0])[:1], tf.bool)
        for (values_at, valid_at), type_ in zip(at, codec.types, strict=True):
            values = tensors[values_at]
            if type_ != STRING and values.dtype != tf.as_dtype(type_.storage):
                values = tf.cast(values, type_.storage)
            valid = None if valid_at is None else tensors[valid_at]
            if valid is not None:
                ok &= valid
            fields.append((values, valid))
        key = codec.encode(fields)
        if codec.raw:
            return key
        return tf.where(ok, key, tf.strings.join([key, tf.fill(tf.shape(key), side.decode("latin-1"))]))

    return keyed


def _positions(columns: Columns) -> list[Where]:
    """Where each column's arrays are among :func:`arrays_of`'s (see :data:`Where`)."""
    out, i = [], 0
    for c in columns.values():
        valid = i + 1 if c.valid is not None else None
        out.append((i, valid, i + 2 if c.present is not None else None))
        i += len(column_arrays(c))
    return out


def _distinct(keys: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    if keys.dtype == object:
        return np.array(list(dict.fromkeys(keys.tolist())), dtype=object)
    return np.unique(keys)


def _parts(pairs: Any) -> list[Sharded]:
    """Every ``Sharded`` of a join's resident rows."""
    sides = [s if isinstance(s, tuple) else (s,) for s in (pairs.left, pairs.right)]
    return [pairs.keys, *sides[0], *sides[1], pairs.left_matched, pairs.right_matched]


@functools.lru_cache(maxsize=2)
def _kept(matched: bool) -> Callable[..., tf.Tensor]:
    def keep(right_matched: tf.Tensor, *_: tf.Tensor) -> tf.Tensor:
        return right_matched if matched else tf.logical_not(right_matched)

    return keep


def _columns(
    left: Mapping[str, ResidentColumn],
    right: Columns,
    keys: tuple[Sequence[str], Sequence[str]],
    types: tuple[ColumnType, ...],
    how: str,
    suffix: str,
    pairs: Any,
    options: dict[str, Any],
) -> dict[str, ResidentColumn]:
    """The result's columns from the join's rows, in one map-only run (names and order as the eager join's)."""
    lkeys, rkeys = keys
    lat, rat = _positions(left), _positions(right)
    nl = len(arrays_of(left))
    lorder, rorder = list(left), list(right)
    some_left, some_right = how in ("right", "outer"), how in ("left", "outer")  # a side that may be missing
    plan: list[tuple[str, ColumnType, bool, bool, int, str]] = []  # (name, type, validity, present, side, source)
    for name, type_, rname in zip(lkeys, types, rkeys, strict=True):
        lc, rc = left[name], right[rname]
        present = lc.present is not None or rc.present is not None  # (a list key's null list: a left or outer join's)
        plan.append((name, type_, lc.nullable or (some_left and rc.nullable), present, -1, name))
    for name, c in left.items():
        if name not in lkeys:
            plan.append((name, c.type, c.valid is not None or some_left, _nulls(c, some_left), 0, name))
    for name, rc in right.items():
        if name in rkeys:
            continue
        named = name if all(p[0] != name for p in plan) else name + suffix
        if any(p[0] == named for p in plan):
            raise ValueError(
                f"join: the right column {name!r} would be {named!r}, which the result already has; pass another "
                f"suffix= or select() other columns first"
            )
        plan.append((named, rc.type, rc.valid is not None or some_right, _nulls(rc, some_right), 1, name))

    outputs = []  # (type, has a validity, has a rows' validity, where its left arrays are, where its right's), in order
    for _, type_, has_valid, has_present, side, source in plan:
        lpos = lat[lorder.index(source)] if side <= 0 else None
        rpos = rat[rorder.index(rkeys[lkeys.index(source)] if side < 0 else source)] if side != 0 else None
        rpos = None if rpos is None else (nl + rpos[0], *(None if p is None else nl + p for p in rpos[1:]))  # type: ignore[assignment]
        outputs.append((type_, has_valid, has_present, lpos, rpos))
    made = _maker(tuple(outputs))

    sides = [s if isinstance(s, tuple) else (s,) for s in (pairs.left, pairs.right)]
    result = map_rows(made, (pairs.left_matched, pairs.right_matched, *sides[0], *sides[1]), **options)
    parts = iter(list(result) if isinstance(result, tuple) else [result])
    return {
        name: ResidentColumn(type_, next(parts), next(parts) if has else None, next(parts) if present else None)
        for name, type_, has, present, _, _ in plan
    }


def _nulls(column: Column | ResidentColumn, missing: bool) -> bool:
    """Whether a side's column in a join's result has a rows' validity (a list column that holds a null list, or
    whose side may be missing)."""
    return column.type.inner is not None and (column.present is not None or missing)
