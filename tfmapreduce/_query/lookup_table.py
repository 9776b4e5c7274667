"""A lookup join's small side as a run's inputs (``LookupTable``): its keys sorted (one integer or date column as it
is; a string key or several keys coded into one int64 by ``KeyPart``s) and its columns in key order, padded to a power
of two so that sizes close by share a compiled program (``lookups.lookup_joins`` makes the joins that use them).

Example:
    >>> from tfmapreduce._table.make import table
    >>> small = LookupTable.of(table({"k": np.array([7, 3, 5])}), "k")
    >>> small.keys.tolist(), small.count, small.order.tolist()
    ([3, 5, 7, 7], 3, [1, 2, 0])
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from .._table.column import Column
from .._table.schema import DATE, STRING, ColumnType
from .._table.table import Table
from .compile import BUCKETS


@attrs.frozen(eq=False)
class KeyPart:
    """One key column of a lookup on several columns or on a string: ``values`` its distinct non-null values sorted
    (int64; a string's 64-bit fingerprint, ``fingerprints``), padded like ``LookupTable.keys``; a left value's rank
    there is its code. ``strings`` are a string column's distinct values in that order, so a left string found by its
    fingerprint is compared whole (a fingerprint met by another string never matches)."""

    values: np.ndarray[Any, Any]
    count: int
    strings: np.ndarray[Any, Any] | None

    @classmethod
    def of(cls, column: Column, rows: np.ndarray[Any, Any]) -> tuple[KeyPart, np.ndarray[Any, Any]]:
        """The part of ``column``'s values at ``rows``, and each row's rank in it."""
        if column.type == STRING:
            texts = np.asarray(column.values[rows], dtype=object)
            distinct = np.unique(texts) if len(texts) else texts
            prints = fingerprints(distinct)
            sort = np.argsort(prints, kind="stable")
            distinct, prints = distinct[sort], prints[sort]
            if len(np.unique(prints)) != len(prints):
                raise ValueError("lookup: two distinct string keys share a 64-bit fingerprint; join with lookup_joins off")
            ranks = np.searchsorted(prints, fingerprints(texts))
            return cls(_padding(prints), len(prints), distinct), ranks
        values = column.values[rows].astype(np.int64)
        distinct = np.unique(values)
        return cls(_padding(distinct), len(distinct), None), np.searchsorted(distinct, values)

    def inputs(self) -> list[np.ndarray[Any, Any]]:
        """The run inputs of this part: its values and count, then a string part's strings as ``_texts`` makes them."""
        out = [self.values, np.array(self.count, np.int64)]
        return out if self.strings is None else [*out, *_texts(list(self.strings), len(self.values))]


def fingerprints(texts: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Each string's 64-bit fingerprint (UTF-8), as the workers compute it (``tf.strings.to_hash_bucket_fast``)."""
    if not len(texts):
        return np.zeros(0, np.int64)
    prints: np.ndarray[Any, Any] = tf.strings.to_hash_bucket_fast([str(t) for t in texts], BUCKETS).numpy()
    return prints.astype(np.int64)


def _padding(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``values`` (sorted int64) padded with the last one to a power of two longer than their count."""
    out = np.full(_padded(len(values)), values[-1] if len(values) else 0, np.int64)
    out[: len(values)] = values
    return out


def _texts(texts: list[Any], width: int) -> list[np.ndarray[Any, Any]]:
    """Strings as run inputs (a run's inputs are numbers): their Unicode code points, padded, and their lengths.

    Example:
        >>> points, lengths = _texts(["é", "ab\\x00"], 3)
        >>> points.tolist(), lengths.tolist()
        ([[233, 0, 0, 0], [97, 98, 0, 0], [0, 0, 0, 0]], [1, 3, 0])
    """
    strings = [str(v) for v in texts]
    lengths = np.zeros(width, np.int64)
    lengths[: len(strings)] = np.fromiter(map(len, strings), np.int64, len(strings))
    longest = int(lengths.max(initial=0))
    points = np.zeros((width, _padded(longest)), np.int32)
    if longest:  # numpy's fixed-width text is each string's code points, zeros after it (a trailing NUL's 0 too)
        points[: len(strings), :longest] = np.array(strings, f"<U{longest}").view(np.uint32).reshape(len(strings), -1)
    return [points, lengths]


@attrs.frozen(eq=False)
class LookupTable:
    """A small side ready for lookups: ``keys`` its keys sorted (int64), padded with the last one to a power of two
    longer than ``count`` (so sizes close by share a compiled program), ``order`` each sorted key's row in ``table``.
    A row with a null key is left out (a null never matches). One integer or date key is its own value; a string key
    or several keys are coded: each column's ``parts`` (``KeyPart``) rank its values, ``strides`` combine the ranks
    into one int64 (``sum(rank_i * stride_i)``, the same on the workers)."""

    table: Table
    keys: np.ndarray[Any, Any]
    count: int
    order: np.ndarray[Any, Any]
    parts: tuple[KeyPart, ...] = ()
    strides: np.ndarray[Any, Any] | None = None
    _inputs: dict[str | None, list[np.ndarray[Any, Any]]] = attrs.field(factory=dict, init=False, repr=False)

    @classmethod
    def of(cls, table: Table, key: str | tuple[str, ...]) -> LookupTable:
        """``table`` ready for lookups of ``key``: one integer, date or string column, or a tuple of them.

        Raises:
            TypeError: a key column is not of an integer, date or string type.
            ValueError: the keys' distinct values are too many to code in an int64 (their counts' product).
        """
        names = (key,) if isinstance(key, str) else tuple(key)
        columns = [table.column(n) for n in names]
        for name, column in zip(names, columns, strict=True):
            if not (integer_key(column.type) or column.type == STRING):
                raise TypeError(f"lookup: the key {name!r} must be an integer, date or string column, got {column.type.name}")
        valid = np.ones(len(table), bool)
        for column in columns:
            if column.valid is not None:
                valid &= column.valid
        rows = np.flatnonzero(valid)
        parts: tuple[KeyPart, ...] = ()
        strides = None
        if len(columns) == 1 and columns[0].type != STRING:
            values = columns[0].values[rows].astype(np.int64)
        else:
            made = [KeyPart.of(c, rows) for c in columns]
            parts = tuple(p for p, _ in made)
            counts = [max(p.count, 1) for p in parts]
            if float(np.prod(np.array(counts, np.float64))) >= 2.0**62:
                raise ValueError(f"lookup: the keys {list(names)} have too many distinct values to code in an int64")
            strides = np.array([int(np.prod(counts[i + 1 :], dtype=np.int64)) for i in range(len(counts))], np.int64)
            values = np.zeros(len(rows), np.int64)
            for (_, ranks), stride in zip(made, strides, strict=True):
                values += ranks.astype(np.int64) * stride
        sort = np.argsort(values, kind="stable")
        return cls(table, _padding(values[sort]), len(rows), rows[sort], parts, strides)

    def inputs(self, column: str | None) -> list[np.ndarray[Any, Any]]:
        """The run inputs of a lookup: each key part's (``KeyPart.inputs``) and the strides where coded, the keys and
        their count, then ``column``'s values in key order (padded; strings as ``_texts``) and, where it holds
        nulls, their validity (made once a column: a lookup's shape and its run read them)."""
        if column not in self._inputs:
            self._inputs[column] = self._made(column)
        return self._inputs[column]

    def _made(self, column: str | None) -> list[np.ndarray[Any, Any]]:
        out = [a for p in self.parts for a in p.inputs()]
        if self.strides is not None:
            out.append(self.strides)
        out += [self.keys, np.array(self.count, np.int64)]
        if column is None:
            return out
        source = self.table.column(column)
        width = len(self.keys)
        if source.type == STRING:
            out += _texts(list(source.values[self.order]), width)
        else:
            values = np.zeros(width, source.values.dtype)
            values[: self.count] = source.values[self.order]
            out.append(values)
        if source.valid is not None:
            valid = np.zeros(width, bool)
            valid[: self.count] = source.valid[self.order]
            out.append(valid)
        return out

    def kind(self, column: str) -> tuple[ColumnType, bool]:
        """``column``'s type and whether it holds nulls."""
        source = self.table.column(column)
        return source.type, source.valid is not None

    def shape(self, column: str | None) -> tuple[Any, ...]:
        """What a compiled lookup depends on: the inputs' dtypes and lengths, not their values."""
        return ("table", *((a.dtype.str, a.shape) for a in self.inputs(column)))


def _padded(n: int) -> int:
    """The power of two above ``n`` (at least 1 more)."""
    return 1 << int(n).bit_length()


def integer_key(kind: ColumnType) -> bool:
    return kind == DATE or (kind.is_numeric and kind.storage.kind in "iu")
