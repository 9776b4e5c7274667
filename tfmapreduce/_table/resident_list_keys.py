"""A resident table's list column as a key (``unique``, ``group_by``, ``sort``): each list's order-preserving bytes
made on the workers, in a map-only run, as a text column (hex), which the runs take as any string key; a group-by's
keys come back to the client as lists (:func:`decoded`).

A list's bytes: for each element, 1 then the element's bytes as a sort makes them (``resident_order.order_key``:
numbers 8 sign-flipped big-endian bytes, strings escaped and terminated), then 0; a null list is 2. Compared as
bytes (and as their lowercase hex), lists compare as polars compares them: element by element, a list that is a
prefix of another first (the empty list first of all), a null list last; equal lists have equal bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from .._io.resident import Sharded, delete_all
from .._kinds.map_api import map as map_rows
from .column import Column, ResidentColumn, column_arrays, made
from .list_keys import ListCodes
from .maps import arrays_of
from .resident_order import order_key, resident_sorted
from .schema import STRING, ColumnType

KEY = "\0key of "
"""The prefix of a list column's key column's name beside it (no column of a table has a name with a NUL)."""

_HEX = [f"{i:02x}".encode() for i in range(256)]
_SIGN = np.uint64(1 << 63)


def list_keyed(
    columns: Mapping[str, Column | ResidentColumn], keys: Sequence[str], options: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Callable[[Column], Column]], list[Sharded]]:
    """``columns`` with each list column among ``keys`` replaced by a key of one value a row: a client column's
    codes (``list_keys``), a resident column's hex bytes (one map-only run for all); the function making each such
    key column of a result the lists again; the arrays made on the workers (the caller frees them)."""
    out: dict[str, Any] = dict(columns)
    back: dict[str, Callable[[Column], Column]] = {}
    resident: dict[str, ResidentColumn] = {}
    for k in keys:
        c = columns[k]
        if isinstance(c, ResidentColumn) and c.type.inner is not None:
            resident[k] = c
        elif isinstance(c, Column) and c.type.inner is not None:
            codes = ListCodes.of(c)
            out[k], back[k] = codes.column, codes.decoded
    kept = hex_columns(resident, options)
    for k, c in kept.items():
        out[k], back[k] = c, functools.partial(decoded, columns[k].type)
    return out, back, [c.values for c in kept.values()]


def hex_columns(columns: Mapping[str, ResidentColumn], options: Mapping[str, Any]) -> dict[str, ResidentColumn]:
    """Each of the resident list ``columns``' key column (a string column, null where the list is: its validity is
    the list column's): one map-only run, none where there is no column."""
    if not columns:
        return {}
    forms = tuple(c.present is not None for c in columns.values())
    run = {k: options[k] for k in ("cluster", "timeout", "retries") if k in options}
    out = map_rows(_encoder(forms), arrays_of(columns), **run)
    parts = list(out) if isinstance(out, tuple) else [out]
    return {n: ResidentColumn(STRING, part, c.present) for (n, c), part in zip(columns.items(), parts, strict=True)}


@functools.lru_cache(maxsize=64)
def _encoder(forms: tuple[bool, ...]) -> Callable[..., tuple[tf.Tensor, ...]]:
    """The map function of :func:`hex_columns`: each list column's (values, slots, [present]) in, its keys out."""

    def encode(*tensors: tf.Tensor) -> tuple[tf.Tensor, ...]:
        out, at = [], 0
        for has_present in forms:
            present = tensors[at + 2] if has_present else None
            out.append(list_hex(tensors[at], tensors[at + 1], present))
            at += 3 if has_present else 2
        return tuple(out)

    return encode


def list_hex(values: tf.Tensor, slots: tf.Tensor, present: tf.Tensor | None) -> tf.Tensor:
    """In a graph, each row's list key (lowercase hex of its bytes) from a list column's ``[rows, width]`` values,
    slot mask and rows' validity."""
    elements = tf.reshape(order_key([(tf.reshape(values, [-1]), None)], [False], [True]), tf.shape(values))
    body = tf.strings.reduce_join(tf.where(slots, elements, ""), axis=1)
    keys = tf.strings.join([body, tf.constant(b"\x00")])
    if present is not None:
        keys = tf.where(present, keys, tf.constant(b"\x02"))
    chars = tf.strings.bytes_split(keys)
    octets = tf.reshape(tf.io.decode_raw(chars.flat_values, tf.uint8), [-1])
    hexed = tf.gather(tf.constant(_HEX), tf.cast(octets, tf.int32))
    return tf.strings.reduce_join(chars.with_flat_values(hexed), axis=-1)


def decoded(type_: ColumnType, keys: Column) -> Column:
    """The list column of fetched list keys (:func:`list_hex`'s), in their order.

    Example:
        >>> keys = Column(STRING, np.array(["01800000000000000200", "00", "02"], object))
        >>> decoded(ColumnType("list<int64>", np.dtype(object)), keys).to_numpy().tolist()
        [array([2]), array([], dtype=int64), None]
    """
    inner = type_.inner
    assert inner is not None
    lists: np.ndarray[Any, Any] = np.empty(len(keys), object)
    valid = np.ones(len(keys), bool)
    for i, text in enumerate(keys.values.tolist()):
        raw = bytes.fromhex(text)
        valid[i] = raw[:1] != b"\x02" and (keys.valid is None or bool(keys.valid[i]))
        lists[i] = _elements(raw, inner) if valid[i] else np.zeros(0, inner.storage)
    return made(type_, lists, valid)


def _elements(raw: bytes, inner: ColumnType) -> np.ndarray[Any, Any]:
    """A present list's elements from its bytes (each ``1`` and the element's bytes, then ``0``)."""
    items: list[Any] = []
    at = 0
    while raw[at] == 1:
        if inner == STRING:
            end = raw.index(b"\x00\x01", at + 1)  # (an escaped 0 is 0 0xff: the first 0 1 ends it)
            items.append(raw[at + 1 : end].replace(b"\x00\xff", b"\x00").decode("utf-8"))
            at = end + 2
        else:
            items.append(raw[at + 1 : at + 9])
            at += 9
    if inner == STRING:
        return np.array(items, object)
    bits = np.frombuffer(b"".join(items), ">u8").astype(np.uint64)
    storage = inner.storage
    if storage.kind == "f":
        negative = (bits & _SIGN) == 0
        bits = np.where(negative, ~bits, bits ^ _SIGN)
        return bits.view(np.float64).astype(storage)
    if storage.kind in "ub":
        return bits.astype(storage)
    return np.asarray((bits ^ _SIGN).view(np.int64).astype(storage))


def list_sorted(
    columns: Mapping[str, ResidentColumn],
    by: Sequence[str],
    descending: Sequence[bool],
    nulls_last: Sequence[bool],
    limit: int | None,
    options: dict[str, Any],
) -> dict[str, ResidentColumn]:
    """``resident_order.resident_sorted``, where a list column of ``by`` sorts by its key column (made, then freed)."""
    lists = hex_columns({n: columns[n] for n in dict.fromkeys(by) if columns[n].type.inner is not None}, options)
    try:
        keyed_by = [KEY + n if n in lists else n for n in by]
        out = resident_sorted(
            {**columns, **{KEY + n: c for n, c in lists.items()}}, keyed_by, descending, nulls_last, limit, options
        )
    finally:
        delete_all([c.values for c in lists.values()])
    delete_all([a for n in lists for a in column_arrays(out.pop(KEY + n))])
    return out
