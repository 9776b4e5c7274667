"""A client table join's key columns as one int64 key a row, the same code on both sides, made by vectorized numpy
and pandas (hash tables in C): no per-row Python work, no string shipped.

Each key column becomes an integer code a row over the two sides' values together: an integer-like column's value
itself (a lone column) or its value less the two sides' minimum (where their range is not much wider than their
rows), any other column (strings, floats, wide integers) its index among the distinct values of both sides
(``pandas.factorize``; ``numpy.unique`` without pandas), a list column its list's rank among both sides' distinct lists
(``list_keys``). The codes of several columns are packed into one int64,
the first column the most significant; where the product of their ranges would not fit, the key so far is
re-coded by its distinct values first. Two rows get equal keys exactly when every key column is equal: strings by
their text, floats as numbers (``-0.0`` is ``0.0``, every NaN one value), lists element by element, the rest by value.

Only rows without a null in a key column take part (a null matches nothing): the caller passes those.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .column import Column
from .dictionary import INTEGERS
from .list_keys import ListCodes
from .schema import STRING, ColumnType

_FITS = 2.0**62
"""The packed keys' bound: products of ranges under it fit an int64 with room for the arithmetic."""


def join_keys(
    left: Sequence[Column], right: Sequence[Column], rows: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The int64 key of each of the left ``rows[0]`` and right ``rows[1]`` (rows without a null key) from the key
    columns ``left`` and ``right`` (pairwise of one type): equal exactly where every key column's values are equal.

    Example:
        >>> from tfmapreduce._table.convert import from_numpy
        >>> a = [from_numpy("s", np.array(["x", "é", "x"])), from_numpy("i", np.array([1, 2, 1]))]
        >>> b = [from_numpy("s", np.array(["é", "x"])), from_numpy("i", np.array([2, 2]))]
        >>> lkey, rkey = join_keys(a, b, (np.arange(3), np.arange(2)))
        >>> lkey.dtype, bool(lkey[0] == lkey[2]), bool(lkey[1] == rkey[0]), bool(rkey[1] in lkey)
        (dtype('int64'), True, True, False)
    """
    n = len(rows[0])
    lone = len(left) == 1 and _integer(left[0].type)
    key: np.ndarray[Any, Any] | None = None
    size = 1
    if lone:  # the values themselves, each side's (no copy where every row has a key)
        return _at(left[0], rows[0]).astype(np.int64, copy=False), _at(right[0], rows[1]).astype(np.int64, copy=False)
    for lc, rc in zip(left, right, strict=True):
        values = np.concatenate([_at(lc, rows[0]), _at(rc, rows[1])])
        codes, count = _codes(values, lc.type)
        if key is None:
            key, size = codes, count
            continue
        if size * float(count) >= _FITS:
            key, size = _factorized(key)
        key = key * count + codes
        size *= count
    assert key is not None
    return _split(key, n)


def _integer(type_: ColumnType) -> bool:
    return type_.name in INTEGERS or type_.name.startswith("timestamp[")


def _at(column: Column, rows: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``column``'s values at ``rows`` (the values themselves where ``rows`` are every row: no copy)."""
    return column.values if len(rows) == len(column) else column.values[rows]


def _split(key: np.ndarray[Any, Any], n: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    return key[:n], key[n:]


def _codes(values: np.ndarray[Any, Any], type_: ColumnType) -> tuple[np.ndarray[Any, Any], int]:
    """Each value's int64 code and how many codes there can be: an integer's value less the minimum where the range
    is at most four times the values (plus 1024), else its index among the distinct values."""
    if not len(values):
        return np.zeros(0, np.int64), 1
    if type_.inner is not None:
        codes = ListCodes.of(Column(type_, values)).column.values
        return codes, int(codes.max()) + 1
    if _integer(type_):  # (not uint64, whose values may not fit an int64: coded by its distinct values)
        whole = values.astype(np.int64, copy=False)
        low, high = int(whole.min()), int(whole.max())
        if high - low < 4 * len(whole) + 1024:
            return whole - low, high - low + 1
        return _factorized(whole)
    if type_ != STRING and type_.storage.kind == "f":
        values = values.astype(np.float64) + 0.0  # -0.0 + 0.0 is 0.0
    return _factorized(values)


def _factorized(values: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], int]:
    """Each value's index (int64) among the distinct values, and their count; every NaN is one value."""
    try:
        import pandas as pd  # type: ignore[import-untyped]  # optional: a hash table, faster than numpy's sort

        codes, uniques = pd.factorize(values, use_na_sentinel=False)
        return codes.astype(np.int64, copy=False), max(len(uniques), 1)
    except ImportError:
        uniques, inverse = np.unique(values, return_inverse=True)
        return inverse.reshape(-1).astype(np.int64), max(len(uniques), 1)
