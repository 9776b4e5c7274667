"""Key columns as integer codes: a group-by over client-held string or integer columns without nulls (strings among
them, or several columns) groups by one integer key (each string column's code in its sorted dictionary, each integer
column's value less its minimum, the columns packed into one number, the first the most significant), so the run
ships and hashes one integer instead of strings or a byte string of several columns; the groups' codes are unpacked
into the columns on the client. Codes keep the values' order, so the groups come out in the same order.

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
    """The key columns packed: ``column`` (one code a row, in the narrowest signed int that holds every code), each
    column's sorted ``dictionaries`` (a string column's distinct values; None for an integer column, whose code is its
    value less ``minimums``), ``types`` and the ``strides`` of its code in the packed one."""

    column: Column
    dictionaries: tuple[np.ndarray[Any, Any] | None, ...]
    strides: tuple[int, ...]
    types: tuple[ColumnType, ...] = ()
    minimums: tuple[int, ...] = ()
    sizes: tuple[int, ...] = ()

    def unpacked(self, codes: Column) -> list[Column]:
        """The key columns of the packed ``codes`` (the groups'), as they were."""
        out = []
        for i, stride in enumerate(self.strides):
            code = (codes.values.astype(np.int64) // stride) % self.sizes[i]
            dictionary = self.dictionaries[i]
            if dictionary is not None:
                out.append(made(STRING, dictionary[code], None))
            else:
                out.append(made(self.types[i], (code + self.minimums[i]).astype(self.types[i].storage), None))
        return out


_PACKED: weakref.WeakKeyDictionary[Column, tuple[tuple[weakref.ref[Column], ...], Packed]] = weakref.WeakKeyDictionary()
"""The last packed key of each first column, with (weak references to) the columns it packs."""


INTEGERS = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "date")
"""Types whose column (without nulls) is packed by its value less its minimum."""


def packed(columns: Sequence[Column | Any]) -> Packed | None:
    """``columns`` as one integer key column (int8 to int64, the narrowest that holds the codes: fewer bytes shipped),
    where each is a client-held string or integer column (``INTEGERS``) without nulls, a string among them or more
    than one column, and the product of their distinct counts (an integer column's: its range) fits an int64; else
    None (the key columns are encoded as they are: a lone integer column is its own key already).

    Example:
        >>> texts = Column(STRING, np.array(["b", "a", "b"], dtype=object))
        >>> p = packed([texts, texts])
        >>> p.column.values.tolist(), [c.values.tolist() for c in p.unpacked(p.column)]
        ([3, 0, 3], [['b', 'a', 'b'], ['b', 'a', 'b']])
    """
    if not columns or not all(isinstance(c, Column) and c.valid is None and _codable(c.type) for c in columns):
        return None
    if len(columns) == 1 and columns[0].type != STRING:
        return None
    refs, kept = _PACKED.get(columns[0], ((), None))
    if kept is not None and len(refs) == len(columns) and all(r() is c for r, c in zip(refs, columns, strict=True)):
        return kept
    made_ = _pack(columns)
    if made_ is not None:
        _PACKED[columns[0]] = (tuple(weakref.ref(c) for c in columns), made_)
    return made_


def _codable(type_: ColumnType) -> bool:
    return type_ == STRING or type_.name in INTEGERS


def _pack(columns: Sequence[Column]) -> Packed | None:
    coded = [_factorized(c) if c.type == STRING else _ranged(c) for c in columns]
    sizes = [max(len(d), 1) if d is not None else size for _, d, size, _ in coded]
    if np.prod([float(n) for n in sizes]) >= 2.0**62:
        return None
    strides, stride = [], 1
    for size in reversed(sizes):
        strides.append(stride)
        stride *= size
    strides.reverse()
    key = np.zeros(len(columns[0]), np.int64)
    for (codes, _, _, _), s in zip(coded, strides, strict=True):
        key += codes * s if s != 1 else codes
    narrow = _narrowest(stride)
    return Packed(
        made(ColumnType.of(narrow), key.astype(narrow), None),
        tuple(d for _, d, _, _ in coded),
        tuple(strides),
        tuple(c.type for c in columns),
        tuple(low for _, _, _, low in coded),
        tuple(sizes),
    )


def _narrowest(n: int) -> np.dtype[Any]:
    """The narrowest signed int (int8 to int64) that holds ``n``."""
    return next(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64) if n <= np.iinfo(t).max)


def _ranged(column: Column) -> tuple[np.ndarray[Any, Any], None, int, int]:
    """An integer column's codes (each value less the minimum, int64), no dictionary, its range and its minimum."""
    values = column.values.astype(np.int64)
    if not len(values):
        return values, None, 1, 0
    low, high = int(values.min()), int(values.max())
    return values - low, None, high - low + 1, low


def _factorized(column: Column) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], int, int]:
    """Each row's code (int64) in the column's sorted distinct values, those values, their count and 0 (codes start
    at 0); computed once a column."""
    codes, uniques = _coded(column)
    return codes, uniques, max(len(uniques), 1), 0


def _coded(column: Column) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    if column not in _CODES:
        _CODES[column] = sorted_codes(column.values)
    return _CODES[column]


def sorted_codes(values: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Each of ``values``' (strings, no null) index (int64) in its sorted distinct values, and those values.

    Example:
        >>> [a.tolist() for a in sorted_codes(np.array(["b", "é", "b", "a"], dtype=object))]
        [[1, 2, 1, 0], ['a', 'b', 'é']]
    """
    try:
        import pandas as pd  # type: ignore[import-untyped]  # optional: a hash table, faster than numpy's sort

        codes, uniques = pd.factorize(values, sort=True)
        return codes.astype(np.int64), np.asarray(uniques, dtype=object)
    except ImportError:
        uniques, codes = np.unique(values, return_inverse=True)
        return codes.reshape(-1).astype(np.int64), uniques.astype(object)


_NARROW: weakref.WeakKeyDictionary[Column, tuple[Column, np.ndarray[Any, Any]]] = weakref.WeakKeyDictionary()


def coded_column(column: Column) -> tuple[Column, np.ndarray[Any, Any]]:
    """A string column without nulls as its codes in its sorted distinct values (int8 to int32, the narrowest that
    holds them) and those values; computed once a column.

    Example:
        >>> codes, dictionary = coded_column(Column(STRING, np.array(["b", "a", "b"], dtype=object)))
        >>> codes.values.tolist(), dictionary.tolist()
        ([1, 0, 1], ['a', 'b'])
    """
    if column not in _NARROW:
        codes, dictionary = _coded(column)
        narrow = _narrowest(len(dictionary))
        _NARROW[column] = (made(ColumnType.of(narrow), codes.astype(narrow), None), dictionary)
    return _NARROW[column]
