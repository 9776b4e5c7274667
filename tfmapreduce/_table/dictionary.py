"""String key columns as integer codes: a group-by over client-held string columns without nulls groups by one
integer key (each column's code in its sorted dictionary, the columns packed into one number, the first the most
significant), so the run ships and hashes integers instead of strings; the groups' codes are unpacked into the
strings on the client. Codes keep the strings' order, so the groups come out in the same order.

A column's dictionary, and the packed key of a list of columns, are computed once (kept while the first column
lives): a query over the same table again pays nothing for them.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from .column import Column, made
from .schema import STRING, ColumnType

PACKED = "\x00packed key"
"""The name of the packed key column while the job runs (no table's column name starts with a NUL)."""

_CODES: weakref.WeakKeyDictionary[Column, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]] = weakref.WeakKeyDictionary()


@attrs.frozen(eq=False)
class Packed:
    """The key columns packed: ``column`` (one code a row, in the narrowest signed int that holds every code), each column's sorted ``dictionaries`` and the
    ``strides`` of its code in the packed one."""

    column: Column
    dictionaries: tuple[np.ndarray[Any, Any], ...]
    strides: tuple[int, ...]

    def unpacked(self, codes: Column) -> list[Column]:
        """The key columns of the packed ``codes`` (the groups'), strings again."""
        out = []
        for dictionary, stride in zip(self.dictionaries, self.strides, strict=True):
            out.append(made(STRING, dictionary[(codes.values.astype(np.int64) // stride) % max(len(dictionary), 1)], None))
        return out


_PACKED: weakref.WeakKeyDictionary[Column, tuple[tuple[weakref.ref[Column], ...], Packed]] = weakref.WeakKeyDictionary()
"""The last packed key of each first column, with (weak references to) the columns it packs."""


def packed(columns: Sequence[Column | Any]) -> Packed | None:
    """``columns`` as one integer key column (int8 to int64, the narrowest that holds the codes: fewer bytes shipped),
    where each is a client-held string column without nulls and the
    product of their distinct counts fits an int64; else None (the key columns are encoded as they are).

    Example:
        >>> texts = Column(STRING, np.array(["b", "a", "b"], dtype=object))
        >>> p = packed([texts, texts])
        >>> p.column.values.tolist(), [c.values.tolist() for c in p.unpacked(p.column)]
        ([3, 0, 3], [['b', 'a', 'b'], ['b', 'a', 'b']])
    """
    if not columns or not all(isinstance(c, Column) and c.type == STRING and c.valid is None for c in columns):
        return None
    refs, kept = _PACKED.get(columns[0], ((), None))
    if kept is not None and len(refs) == len(columns) and all(r() is c for r, c in zip(refs, columns, strict=True)):
        return kept
    made_ = _pack(columns)
    if made_ is not None:
        _PACKED[columns[0]] = (tuple(weakref.ref(c) for c in columns), made_)
    return made_


def _pack(columns: Sequence[Column]) -> Packed | None:
    coded = [_factorized(c) for c in columns]
    if np.prod([float(max(len(d), 1)) for _, d in coded]) >= 2.0**62:
        return None
    strides, stride = [], 1
    for _, dictionary in reversed(coded):
        strides.append(stride)
        stride *= max(len(dictionary), 1)
    strides.reverse()
    key = np.zeros(len(columns[0]), np.int64)
    for (codes, _), s in zip(coded, strides, strict=True):
        key += codes * s if s != 1 else codes
    narrow = next(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64) if stride <= np.iinfo(t).max)
    return Packed(made(ColumnType.of(narrow), key.astype(narrow), None), tuple(d for _, d in coded), tuple(strides))


def _factorized(column: Column) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Each row's code (int64) in the column's sorted distinct values, and those values; computed once a column."""
    if column not in _CODES:
        try:
            import pandas as pd  # type: ignore[import-untyped]  # optional: a hash table, faster than numpy's sort

            codes, uniques = pd.factorize(column.values, sort=True)
            _CODES[column] = (codes.astype(np.int64), np.asarray(uniques, dtype=object))
        except ImportError:
            uniques, codes = np.unique(column.values, return_inverse=True)
            _CODES[column] = (codes.reshape(-1).astype(np.int64), uniques.astype(object))
    return _CODES[column]
