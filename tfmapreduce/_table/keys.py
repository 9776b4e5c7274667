"""Keys of several columns as one exact key: encoded in the map's graph, decoded on the client (or, for a result
kept on the workers, in a graph).

One key column of integers (or dates, timestamps, bool) with no nulls is the key itself (int64), and one string
column with no nulls is the string itself. Any other key is one ``tf.string`` joining, column by column, a flag
byte (1: a value, 0: null) and the value's bytes: a fixed-width value's storage bytes (native byte order), a
string's byte length as 4 bytes then its UTF-8 bytes. The encoding is injective (each field's length is known from
its type or its prefix), so no two groups can share a key, whatever their values.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from .._io.strings import split_joined
from .column import Column, made
from .schema import STRING, ColumnType

_RAW = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "date")
"""Types a lone key column of which, without nulls, is the key itself as int64."""


@attrs.frozen
class KeyCodec:
    """How the key columns of a group-by become one key in graphs, and back into columns on the client."""

    types: tuple[ColumnType, ...]
    nullable: tuple[bool, ...]

    @property
    def raw(self) -> bool:
        """Whether the key is a lone column's values as they are (int64, or a string)."""
        if len(self.types) != 1 or self.nullable[0]:
            return False
        name = self.types[0].name
        return name in _RAW or name.startswith("timestamp[") or self.types[0] == STRING

    def encode(self, columns: Sequence[tuple[tf.Tensor, tf.Tensor | None]]) -> tf.Tensor:
        """The key of each row, from each key column's (values, valid or None) tensors."""
        if self.raw:
            values = columns[0][0]
            return values if values.dtype == tf.string else tf.cast(values, tf.int64)
        fields: list[tf.Tensor] = []
        for (values, valid), type_ in zip(columns, self.types, strict=True):
            fields.append(tf.constant(b"\x01") if valid is None else _pieces(tf.cast(valid, tf.uint8))[0])
            if type_ == STRING:
                fields.extend(_pieces(tf.strings.length(values)))
                fields.append(values)
            else:
                fields.extend(_pieces(_fixed(values)))
        return tf.strings.join(fields)

    def columns(self, keys: tf.Tensor) -> list[tuple[tf.Tensor, tf.Tensor | None]]:
        """In a graph, the inverse of :meth:`encode`: each key column's (values in its storage, valid or None) of
        ``keys``."""
        if self.raw:
            type_ = self.types[0]
            return [(keys if type_ == STRING else tf.cast(keys, tf.as_dtype(type_.storage)), None)]
        at = tf.zeros(tf.shape(keys), tf.int32)
        out: list[tuple[tf.Tensor, tf.Tensor | None]] = []
        for type_, nullable in zip(self.types, self.nullable, strict=True):
            valid = tf.equal(_read(keys, at, tf.uint8), 1)
            at += 1
            if type_ == STRING:
                length = _read(keys, at, tf.int32)
                values = tf.strings.substr(keys, at + 4, length)
                at += 4 + length
            else:
                storage = np.dtype(np.uint8) if type_.name == "bool" else type_.storage
                values = tf.cast(_read(keys, at, tf.as_dtype(storage)), tf.as_dtype(type_.storage))
                at += storage.itemsize
            out.append((values, valid if nullable else None))
        return out

    def decode(self, keys: np.ndarray[Any, Any]) -> list[Column]:
        """The key columns of the distinct ``keys`` a job returned, in their order."""
        if self.raw:
            if self.types[0] == STRING:
                return [made(STRING, np.array([_text(k) for k in keys], dtype=object), None)]
            return [made(self.types[0], keys.astype(self.types[0].storage), None)]
        blobs = [k.encode("utf-8") if isinstance(k, str) else bytes(k) for k in keys]
        starts = np.zeros(len(blobs), np.int64)
        buffer = np.frombuffer(b"".join(blobs), np.uint8)
        if len(blobs):
            starts[1:] = np.cumsum([len(b) for b in blobs])[:-1]
        out = []
        for type_ in self.types:
            valid = buffer[starts] == 1 if len(blobs) else np.zeros(0, bool)
            starts = starts + 1
            if type_ == STRING:
                lengths = _take(buffer, starts, np.dtype(np.int32))
                starts = starts + 4
                values: np.ndarray[Any, Any] = _texts(buffer, starts, lengths)
                starts = starts + lengths
            else:
                storage = np.dtype(np.uint8) if type_.name == "bool" else type_.storage
                values = _take(buffer, starts, storage).astype(type_.storage)
                starts = starts + storage.itemsize
            out.append(made(type_, values, valid))
        return out


_BYTES = [bytes([i]) for i in range(256)]


def _pieces(values: tf.Tensor) -> list[tf.Tensor]:
    """The storage bytes of each row of fixed-width ``values`` (shape [n], native byte order) as strings that, joined
    in order, are those bytes: a 1-byte value's one byte, a wider value's bytes two at a time (one string each), each
    a gather from the 65536 two-byte strings, which the graph makes from the 256 bytes (a constant of them took
    0.1 s to trace and bloated every graph).

    Example:
        >>> pieces = _pieces(tf.constant([258, -1], tf.int32))
        >>> len(pieces), b"".join(p.numpy()[0] for p in pieces) == np.int32(258).tobytes()
        (2, True)
    """
    octets = tf.constant(_BYTES)
    if values.dtype.size == 1:
        return [tf.gather(octets, tf.cast(tf.bitcast(values, tf.uint8), tf.int32))]
    low, high = tf.tile(octets, [256]), tf.repeat(octets, 256)  # uint16 i: its low byte i % 256, high byte i // 256
    halves = tf.strings.join([low, high] if sys.byteorder == "little" else [high, low])
    pairs = tf.reshape(tf.bitcast(values, tf.uint16), [-1, values.dtype.size // 2])
    return [tf.gather(halves, tf.cast(pair, tf.int32)) for pair in tf.unstack(pairs, values.dtype.size // 2, axis=1)]


def _fixed(values: tf.Tensor) -> tf.Tensor:
    """A fixed-width value normalized so that values equal as numbers have equal bytes: bool as uint8, floats with
    -0.0 as 0.0 and every NaN as one NaN."""
    if values.dtype == tf.bool:
        return tf.cast(values, tf.uint8)
    if values.dtype.is_floating:
        values = values + tf.zeros([], values.dtype)  # -0.0 + 0.0 is +0.0
        values = tf.where(tf.math.is_nan(values), tf.constant(np.nan, values.dtype), values)
    return values


def _read(keys: tf.Tensor, at: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    """In a graph: the ``dtype`` value at byte ``at`` of each key (native byte order)."""
    piece = tf.strings.substr(keys, at, tf.fill(tf.shape(at), dtype.size))
    raw = _SIGNED.get(dtype, dtype)  # (decode_raw reads no uint32 or uint64: their bits read as signed)
    values = tf.io.decode_raw(piece, raw, little_endian=sys.byteorder == "little")
    return tf.reshape(tf.bitcast(values, dtype) if raw != dtype else values, tf.shape(at))


_SIGNED = {tf.uint32: tf.int32, tf.uint64: tf.int64}


def _take(buffer: np.ndarray[Any, Any], starts: np.ndarray[Any, Any], dtype: np.dtype) -> np.ndarray[Any, Any]:
    """The ``dtype`` value at each of ``starts`` in ``buffer``."""
    if not len(starts):
        return np.zeros(0, dtype)
    octets = buffer[starts[:, None] + np.arange(dtype.itemsize)]
    return np.ascontiguousarray(octets).view(dtype).reshape(-1)


def _texts(buffer: np.ndarray[Any, Any], starts: np.ndarray[Any, Any], lengths: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The UTF-8 strings of ``lengths`` bytes at ``starts`` in ``buffer``, decoded as one NUL-joined buffer (one at a
    time where a string holds a NUL).

    Example:
        >>> _texts(np.frombuffer("xaéb\\0".encode(), np.uint8), np.array([1, 2, 4]), np.array([1, 2, 2])).tolist()
        ['a', 'é', 'b\\x00']
    """
    spans = lengths.astype(np.int64) + 1  # each string's bytes, then a NUL (the index one past the buffer)
    first = np.cumsum(spans) - spans
    at = np.arange(int(spans.sum())) + np.repeat(starts - first, spans)
    at[first + spans - 1] = len(buffer)
    whole = split_joined([(np.append(buffer, np.uint8(0))[at].tobytes(), len(starts) + 1)])
    if whole is not None:
        return whole[0][:-1]
    return np.array([bytes(buffer[s : s + n]).decode("utf-8") for s, n in zip(starts, lengths, strict=True)], dtype=object)


def _text(key: Any) -> str:
    return key if isinstance(key, str) else bytes(key).decode("utf-8")
