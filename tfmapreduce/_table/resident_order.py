"""Sorting a resident table on the workers: each row's order-preserving key made in a map-only run (the bytes of
``order.py``'s ``sort_keys``, made by TensorFlow ops), then the sort kind moves every column with its key.

Every row: ``sort_by_key`` of the keys with every column (values and validity) as its values; the sorted columns
stay on the reducers. The first ``limit`` rows: one map-only run keeps each shard's ``limit`` smallest keys and
their rows, the sort kind sorts those candidates on one reducer, and one more map-only run keeps its first
``limit``: no run sorts every row, and no row passes through the client.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from .._io.resident import Sharded, delete_all
from .._kinds.map_api import map as map_rows
from .._kinds.sort import sort_by_key
from .._ops.grouping import string_ranks
from .column import ResidentColumn, column_arrays, refilled
from .maps import arrays_of

_MAP_OPTIONS = ("cluster", "timeout", "retries")
"""The run options the map-only runs of a sort take (the sort's own take every option)."""

_SIGN = np.uint64(1 << 63)


def order_key(
    columns: Sequence[tuple[tf.Tensor, tf.Tensor | None]], descending: Sequence[bool], nulls_last: Sequence[bool]
) -> tf.Tensor:
    """Each row's order-preserving key (``tf.string``) from each sort column's (values, valid or None): the bytes
    ``order.sort_keys`` makes for the same rows (a null's slot holds its column's filler)."""
    fields = []
    for (values, valid), down, last in zip(columns, descending, nulls_last, strict=True):
        flag = tf.ones(tf.shape(values), tf.uint8)
        if valid is not None:
            flag = tf.where(valid, flag, tf.constant(2 if last else 0, tf.uint8))
        fields.append(byte_strings(flag))
        if values.dtype == tf.string:
            text = tf.strings.join([tf.strings.regex_replace(values, "\\x00", b"\x00\xff"), tf.constant(b"\x00\x01")])
            fields.append(_inverted(text) if down else text)
        else:
            octets = _fixed(values)
            fields.append(byte_strings(255 - octets if down else octets))
    return tf.strings.join(fields)


def _fixed(values: tf.Tensor) -> tf.Tensor:
    """A fixed-width value's 8 order-preserving bytes, big-endian ([n, 8] uint8)."""
    sign = tf.constant(_SIGN, tf.uint64)
    if values.dtype.is_floating:
        x = tf.cast(values, tf.float64) + tf.zeros([], tf.float64)  # -0.0 + 0.0 is 0.0
        x = tf.where(tf.math.is_nan(x), tf.constant(np.nan, tf.float64), x)  # one NaN
        bits = tf.bitcast(x, tf.uint64)
        negative = tf.not_equal(tf.bitwise.bitwise_and(bits, sign), 0)
        bits = tf.where(negative, tf.bitwise.invert(bits), tf.bitwise.bitwise_or(bits, sign))
    elif values.dtype.is_unsigned or values.dtype == tf.bool:
        bits = tf.cast(tf.cast(values, tf.uint8) if values.dtype == tf.bool else values, tf.uint64)
    else:
        bits = tf.bitwise.bitwise_xor(tf.bitcast(tf.cast(values, tf.int64), tf.uint64), sign)
    octets = tf.bitcast(bits, tf.uint8)  # the host's byte order: made big-endian
    return octets if _BIG_ENDIAN else tf.reverse(octets, [-1])


_BIG_ENDIAN = sys.byteorder == "big"

_BYTES = [bytes([i]) for i in range(256)]


def byte_strings(octets: tf.Tensor) -> tf.Tensor:
    """Each row of uint8 ``octets`` (shape [n] or [n, w]) as a string of those bytes."""
    chars = tf.gather(tf.constant(_BYTES), tf.cast(octets, tf.int32))
    return chars if octets.shape.rank == 1 else tf.strings.reduce_join(chars, axis=-1)


def _inverted(text: tf.Tensor) -> tf.Tensor:
    """Each string with every byte inverted (255 - byte)."""
    chars = tf.strings.bytes_split(text)
    octets = tf.reshape(tf.io.decode_raw(chars.flat_values, tf.uint8), [-1])
    inverted = byte_strings(255 - octets)
    return tf.strings.reduce_join(chars.with_flat_values(inverted), axis=-1)


def resident_sorted(
    columns: Mapping[str, ResidentColumn],
    by: Sequence[str],
    descending: Sequence[bool],
    nulls_last: Sequence[bool],
    limit: int | None,
    options: dict[str, Any],
) -> dict[str, ResidentColumn]:
    """``columns`` sorted by the columns ``by`` (stably), or their first ``limit`` rows in that order."""
    at, i = {}, 0
    for name, c in columns.items():
        at[name] = (i, i + 1 if c.valid is not None else None)
        i += len(column_arrays(c))
    keyed = _keyer(tuple(at[n] for n in by), tuple(descending), tuple(nulls_last))
    mapped = {k: options[k] for k in _MAP_OPTIONS if k in options}
    arrays = arrays_of(columns)
    made: list[Sharded] = []
    try:
        keys = map_rows(keyed, arrays, **mapped)
        made.append(keys)
        if limit is not None:
            out = map_rows(_first(limit), (keys, *arrays), **mapped)
            made.extend(out)
            keys, arrays = out[0], tuple(out[1:])
            options = {**options, "reducers": 1}
        ordered, values = sort_by_key(keys, tuple(arrays), **options)
        made.append(ordered)
        if limit is not None:
            made.extend(values)
            cut = map_rows(_cut(limit), tuple(values), **mapped)
            values = tuple(cut) if isinstance(cut, tuple) else (cut,)
    finally:
        delete_all(list({id(a): a for a in made}.values()))
    parts = iter(values)
    return {name: refilled(c, parts) for name, c in columns.items()}


@functools.lru_cache(maxsize=256)
def _keyer(
    at: tuple[tuple[int, int | None], ...], descending: tuple[bool, ...], nulls_last: tuple[bool, ...]
) -> Callable[..., tf.Tensor]:
    """The map function making each row's key (one a spec, so that its compiled graphs are reused): the sort columns
    are at ``at`` (values, validity) among its inputs."""

    def keyed(*tensors: tf.Tensor) -> tf.Tensor:
        picked = [(tensors[v], None if m is None else tensors[m]) for v, m in at]
        return order_key(picked, descending, nulls_last)

    return keyed


@functools.lru_cache(maxsize=64)
def _cut(limit: int) -> Callable[..., tuple[tf.Tensor, ...]]:
    """The map function keeping the first ``limit`` rows of its shard."""

    def cut(*columns: tf.Tensor) -> tuple[tf.Tensor, ...]:
        return tuple(c[:limit] for c in columns)

    return cut


@functools.lru_cache(maxsize=64)
def _first(limit: int) -> Any:
    def best(k: tf.Tensor, *columns: tf.Tensor) -> tuple[tf.Tensor, ...]:
        first = tf.argsort(string_ranks(k, None), stable=True)[:limit]
        return (tf.gather(k, first), *(tf.gather(c, first) for c in columns))

    return best
