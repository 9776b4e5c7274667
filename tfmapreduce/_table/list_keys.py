"""A list column as a key (``unique``, ``group_by``) of a client table: each list is replaced by the rank of its
value among the column's distinct lists (an int64 code, a null list a null), the run groups by the codes, and the
result's codes become the lists again.

Lists rank as polars orders them: the whole list compared, element by element (each element's order-preserving bytes
of ``order.py``: numbers as 8 sign-flipped big-endian bytes, -0.0 as 0.0, every NaN one NaN and the largest; strings
their escaped UTF-8 bytes and a terminator), a list that is a prefix of another first, so the empty list first of
all; equal lists are one code, and a null list is null (a group of its own, sorted last).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from .column import Column, made
from .order import fixed_bytes
from .schema import STRING, ColumnType

INT64 = ColumnType.of(np.dtype(np.int64))


@attrs.frozen(eq=False)
class ListCodes:
    """A list column's rows as int64 codes (``column``), and one list of each code (``lists``, in code order).

    Example:
        >>> lists = np.empty(4, object)
        >>> lists[:] = [np.array([2, 1]), np.array([2]), np.array([], np.int64), np.array([2, 1])]
        >>> codes = ListCodes.of(Column(ColumnType("list<int64>", np.dtype(object)), lists))
        >>> codes.column.values.tolist()
        [2, 1, 0, 2]
    """

    type: ColumnType
    column: Column
    lists: np.ndarray[Any, Any]

    @classmethod
    def of(cls, column: Column) -> ListCodes:
        """The codes of a client list column's rows (each list's rank among the distinct lists, a null list null)."""
        inner = column.type.inner
        assert inner is not None
        valid = np.ones(len(column), bool) if column.valid is None else np.asarray(column.valid, bool)
        codes = _fixed_ranks(column.values, valid, inner) if inner != STRING else None
        if codes is None:
            pairs = zip(column.values, valid, strict=True)
            keys = [_list_bytes(np.asarray(v, inner.storage), inner) if ok else b"" for v, ok in pairs]
            rank = {k: i for i, k in enumerate(sorted({k for k, ok in zip(keys, valid, strict=True) if ok}))}
            codes = np.array([rank[k] if ok else 0 for k, ok in zip(keys, valid, strict=True)], np.int64)
        rows = np.flatnonzero(valid)
        first = rows[np.unique(codes[rows], return_index=True)[1]]  # each code's first row, in code order
        lists = np.empty(len(first), object)
        lists[:] = [column.values[i] for i in first.tolist()]
        return cls(column.type, made(INT64, codes, valid), lists)

    def decoded(self, codes: Column) -> Column:
        """The list column of a run's result ``codes`` (a null code a null list)."""
        valid = np.ones(len(codes), bool) if codes.valid is None else codes.valid
        values = np.empty(len(codes), object)
        values[:] = [self.lists[c] if ok else None for c, ok in zip(codes.values.tolist(), valid.tolist(), strict=True)]
        return made(self.type, values, valid)


_MATRIX = 1 << 26
"""The most bytes a column's lists take as one matrix (else their bytes are made one list at a time)."""


def _fixed_ranks(values: np.ndarray[Any, Any], valid: np.ndarray[Any, Any], inner: ColumnType) -> np.ndarray[Any, Any] | None:
    """Each valid list's rank (0 for a null) where the lists are of numbers and their matrix is small enough (else
    None): each row the list's bytes (``_list_bytes``, each element after a 1) padded with zeros to the longest,
    so that the matrix's rows sort as the lists do (a prefix's padding 0 before the longer one's 1), ranked at once."""
    lengths = np.array([len(v) if ok else 0 for v, ok in zip(values, valid, strict=True)], np.int64)
    width = -(-(9 * int(lengths.max(initial=0)) + 1) // 8) * 8  # (whole 8-byte words)
    if len(values) * width > _MATRIX:
        return None
    parts = [np.asarray(v, inner.storage) for v, n in zip(values, lengths.tolist(), strict=True) if n]
    flat = np.concatenate(parts) if parts else np.zeros(0, inner.storage)
    row = np.repeat(np.arange(len(values)), lengths)
    slot = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    matrix = np.zeros((len(values), width), np.uint8)
    matrix[row, 9 * slot] = 1
    matrix[row[:, None], (9 * slot + 1)[:, None] + np.arange(8)] = fixed_bytes(flat)
    words = matrix[valid].view(">u8")  # big-endian words: they compare as their bytes
    order = np.lexsort(words.T[::-1])
    change = np.ones(len(order), bool)
    change[1:] = np.any(words[order[1:]] != words[order[:-1]], axis=1)
    codes = np.zeros(len(values), np.int64)
    codes[np.flatnonzero(valid)[order]] = np.cumsum(change) - 1
    return codes


def _list_bytes(values: np.ndarray[Any, Any], inner: ColumnType) -> bytes:
    """A list's order-preserving bytes: its elements' (``order.py``'s), in order."""
    if inner == STRING:
        return b"".join(str(s).encode("utf-8").replace(b"\0", b"\0\xff") + b"\0\x01" for s in values.tolist())
    return fixed_bytes(values).tobytes()


def coded(columns: Sequence[Column]) -> list[Column]:
    """``columns``, each list column as its codes: a sort by them is a sort by the lists (polars' order)."""
    return [c if c.type.inner is None else ListCodes.of(c).column for c in columns]
