"""Sorting a table by several columns: one order-preserving byte key per row, made on the workers in the sort's own
run and range-partitioned by the sort kind (or, for the first ``limit`` rows, each shard's ``limit`` smallest keys
from one map-only run). ``sort_keys`` makes the same bytes with numpy (the reference of ``resident_order.order_key``).

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

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from .._engine import driver as _engine
from .._io.resident import delete_all
from .._kinds.map_api import map as map_rows
from .._kinds.ranges import KeyMaker
from .._kinds.sort import Sort
from .._ops.grouping import string_ranks
from .._options import RunOptions
from .column import Column, row_numbers
from .resident_order import order_key
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
            octets = fixed_bytes(c.values)
            parts.append(255 - octets if down else octets)
    if all(isinstance(p, np.ndarray) for p in parts):
        matrix = np.ascontiguousarray(np.hstack(parts))
        return matrix.view(f"S{matrix.shape[1]}").reshape(-1)
    pieces = [[row.tobytes() for row in p] if isinstance(p, np.ndarray) else p for p in parts]
    return np.array([b"".join(row) for row in zip(*pieces, strict=True)], dtype=object)


def fixed_bytes(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
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


def sorted_rows(
    columns: Sequence[Column],
    descending: Sequence[bool],
    nulls_last: Sequence[bool],
    limit: int | None,
    options: Mapping[str, Any],
) -> np.ndarray[Any, Any]:
    """The rows in the order of the ``columns`` (equal keys in row order), the first ``limit`` of them when given.
    The columns travel as they are and each row's key (the bytes of :func:`sort_keys`) is made on the workers, in
    the run's own graph: nothing is encoded on the client.

    Every row: one run of the sort kind over the columns and the row numbers (``ranges.KeyMaker``: each shard makes its
    keys, samples them for the range splitters, and sends each row's number to its range's reducer), fetching the row
    numbers. The first ``limit``: one map-only run in which each shard makes its keys and keeps its ``limit``
    smallest with their rows; the client orders the candidates (at most ``limit`` a shard) by (key, row) and keeps
    the first ``limit``.

    Examples:
        >>> from tfmapreduce._table.convert import from_numpy
        >>> a, b = from_numpy("a", np.array(["b", "a", "b"])), from_numpy("b", np.array([1, 2, 3]))
        >>> sorted_rows([a, b], [False, True], [True, True], None, {"cluster": cluster}).tolist()
        [1, 2, 0]
    """
    arrays: list[np.ndarray[Any, Any]] = []
    at: list[tuple[int, int | None]] = []
    for c in columns:
        at.append((len(arrays), None if c.valid is None else len(arrays) + 1))
        arrays.extend([c.values] if c.valid is None else [c.values, c.valid])
    rows = row_numbers(len(columns[0]))
    keyed = _keyed(tuple(at), tuple(descending), tuple(nulls_last))
    if limit is None or limit >= len(rows):
        kind = Sort(False, None, "keys", KeyMaker(keyed, (np.dtype(object), np.dtype(np.int64))))
        keys, ordered = _engine.run(kind, (*arrays, rows), RunOptions.of(**options), resident=True)
        try:
            result: np.ndarray[Any, Any] = ordered.gather()
            return result
        finally:
            delete_all([keys, ordered])
    out = map_rows(_best(keyed, limit), (*arrays, rows), **options)
    try:
        found, numbers = out[0].gather(), out[1].gather()
    finally:
        delete_all(list(out))
    order = sorted(range(len(numbers)), key=lambda i: (bytes(found[i]), int(numbers[i])))[:limit]
    return np.asarray(numbers, np.int64)[order]


@functools.lru_cache(maxsize=256)
def _keyed(
    at: tuple[tuple[int, int | None], ...], descending: tuple[bool, ...], nulls_last: tuple[bool, ...]
) -> Callable[..., tuple[tf.Tensor, tf.Tensor]]:
    """A shard's (keys, row numbers) from its sort columns (values and validity at ``at``) and row numbers (last):
    one function a spec, so that equal sorts share their compiled graphs."""

    def keyed(*tensors: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        picked = [(tensors[v], None if m is None else tensors[m]) for v, m in at]
        return order_key(picked, descending, nulls_last), tensors[-1]

    return keyed


@functools.lru_cache(maxsize=64)
def _best(keyed: Callable[..., tuple[tf.Tensor, tf.Tensor]], limit: int) -> Callable[..., tuple[tf.Tensor, tf.Tensor]]:
    """A shard's ``limit`` smallest keys and their row numbers, from its sort columns and row numbers."""

    def best(*tensors: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        keys, rows = keyed(*tensors)
        first = tf.argsort(string_ranks(keys, None), stable=True)[:limit]
        return tf.gather(keys, first), tf.gather(rows, first)

    return best


def per_column(flag: object, names: list[str], argument: str) -> list[bool]:
    """One bool for each sort column from one bool or a list of them."""
    flags = [flag] * len(names) if isinstance(flag, (bool, np.bool_)) else flag
    if (
        not isinstance(flags, (list, tuple))
        or len(flags) != len(names)
        or not all(isinstance(f, (bool, np.bool_)) for f in flags)
    ):
        raise TypeError(f"sort: {argument}= must be a bool or one bool for each of {names}, got {flag!r}")
    return [bool(f) for f in flags]
