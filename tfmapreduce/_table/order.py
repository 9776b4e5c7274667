"""Sorting a table by several columns: one order-preserving byte key per row, sorted by the sort kind (or, for the
first ``limit`` rows, each shard's ``limit`` smallest keys from one map-only run).

The key of a row joins, column by column, a flag byte and the value's bytes, so that comparing two keys as byte
strings compares the rows column by column::

    flag          1 for a value; a null 2 where nulls come last, 0 where they come first (never inverted)
    integers      8 bytes big-endian, the sign bit flipped for signed ones (dates, timestamps and bool too)
    floats        as float64: -0.0 as 0.0, every NaN as one NaN (the largest, as numpy sorts), the sign bit flipped
                  for a positive value and every bit for a negative one, 8 bytes big-endian
    strings       the UTF-8 bytes, each 0x00 as 0x00 0xFF, then 0x00 0x01: no key of a value is a prefix of
                  another's, and a shorter string that is a prefix of a longer one comes first
    descending    the value's bytes (not the flag) inverted: with keys free of prefixes, that reverses their order

A null's slot holds the column's canonical filler, so every null of a column has the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from .._io.resident import delete_all
from .._kinds.map_api import map as map_rows
from .._kinds.sort import sort_by_key
from .._ops.grouping import string_ranks
from .column import Column
from .schema import STRING

_INVERT = bytes(255 - i for i in range(256))
_SIGN = np.uint64(1 << 63)


def sort_keys(columns: Sequence[Column], descending: Sequence[bool], nulls_last: Sequence[bool]) -> np.ndarray[Any, Any]:
    """Each row's order-preserving key: an ``S`` array where every column is fixed-width (equal widths, so the
    trailing zero bytes numpy drops change no order), else an ``object`` array of ``bytes``.

    Examples:
        >>> from tfmapreduce._table.convert import from_numpy
        >>> keys = sort_keys([from_numpy("x", np.array([2, -1, 10]))], [False], [True])
        >>> np.argsort(keys, kind="stable").tolist()
        [1, 0, 2]
    """
    n = len(columns[0])
    parts: list[np.ndarray[Any, Any] | list[bytes]] = []
    for c, down, last in zip(columns, descending, nulls_last, strict=True):
        flag = np.ones((n, 1), np.uint8)
        if c.valid is not None:
            flag[~c.valid, 0] = 2 if last else 0
        parts.append(flag)
        if c.type == STRING:
            texts = [s.encode("utf-8").replace(b"\0", b"\0\xff") + b"\0\x01" for s in c.values.tolist()]
            parts.append([t.translate(_INVERT) for t in texts] if down else texts)
        else:
            octets = _fixed(c.values)
            parts.append(255 - octets if down else octets)
    if all(isinstance(p, np.ndarray) for p in parts):
        matrix = np.ascontiguousarray(np.hstack(parts))
        return matrix.view(f"S{matrix.shape[1]}").reshape(-1)
    pieces = [[row.tobytes() for row in p] if isinstance(p, np.ndarray) else p for p in parts]
    return np.array([b"".join(row) for row in zip(*pieces, strict=True)], dtype=object)


def _fixed(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A fixed-width value's 8 order-preserving bytes ([n, 8] uint8)."""
    if values.dtype.kind == "f":
        x = values.astype(np.float64)
        x = np.where(x == 0, 0.0, np.where(np.isnan(x), np.nan, x))  # one zero, one NaN
        bits = x.view(np.uint64)
        bits = np.where(bits & _SIGN, ~bits, bits | _SIGN)
    elif values.dtype.kind == "u" or values.dtype.kind == "b":
        bits = values.astype(np.uint64)
    else:
        bits = values.astype(np.int64).view(np.uint64) ^ _SIGN
    return bits.astype(">u8").view(np.uint8).reshape(-1, 8)


def sorted_rows(keys: np.ndarray[Any, Any], limit: int | None, options: Mapping[str, Any]) -> np.ndarray[Any, Any]:
    """The rows in the order of their ``keys`` (equal keys in row order), the first ``limit`` of them when given.

    Every row: ``sort_by_key`` (range-partitioned, each range sorted on its reducer), fetching the row numbers.
    The first ``limit``: one map-only run in which each shard keeps its ``limit`` smallest keys and their rows; the
    client orders the candidates (at most ``limit`` a shard) by (key, row) and keeps the first ``limit``.
    """
    rows = np.arange(len(keys), dtype=np.int64)
    if limit is None or limit >= len(keys):
        ordered, values = sort_by_key(keys, rows, **options)
        try:
            result: np.ndarray[Any, Any] = values.gather()
            return result
        finally:
            delete_all([ordered, values])
    texts = keys.astype(object)

    def best(k: tf.Tensor, r: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        first = tf.argsort(string_ranks(k, None), stable=True)[:limit]
        return tf.gather(k, first), tf.gather(r, first)

    out = map_rows(best, (texts, rows), **options)
    try:
        found, at = out[0].gather(), out[1].gather()
    finally:
        delete_all(list(out))
    order = sorted(range(len(at)), key=lambda i: (bytes(found[i]), int(at[i])))[:limit]
    return np.asarray(at, np.int64)[order]
