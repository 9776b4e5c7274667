"""Joins of two tables on key columns through the join kind, in one distributed run.

Both sides' key columns become one int64 key a row on the client, coded over the two sides' values together
(``join_keys``: an integer column's value, each other column's index among the distinct values, several columns
packed into one number; vectorized, no per-row Python work). The values that travel are the rows' numbers (int64),
so the run moves two int64 columns only, and the client takes every column of the result from the two tables by
those numbers. A row with a null in any key column never matches (SQL): it does not travel, and the joins that keep
its side's unmatched rows add it back as one.

Semi and anti joins make no run: each left key is looked up among the right side's keys on the client (a table of
seen keys where their range is narrow, as coded keys are, else ``np.isin``), cheaper than sending both sides' keys
anywhere; semi keeps the matched rows, anti the others (a null key's row among them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._kinds.join.api import join as join_kind
from .column import Column, made, row_numbers
from .join_keys import join_keys
from .schema import ColumnType, check_name

HOWS = ("inner", "left", "right", "outer", "semi", "anti")

_WIDENED = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")
"""Integer types two key columns of which, when they differ, meet as int64 (exactly)."""


def key_names(on: Any, left_on: Any, right_on: Any, left: tuple[str, ...], right: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The left and right key columns from ``on=`` or ``left_on=``/``right_on=`` (a name or a list of names).

    Raises:
        ValueError: neither or both given, no key, or lists of different lengths. KeyError: an unknown column.
    """
    if (on is None) == (left_on is None and right_on is None) or (on is None and (left_on is None or right_on is None)):
        raise ValueError(
            "join: give the key columns either as on=['a', 'b'] (the same names on both sides) or as both left_on= "
            f"and right_on=, got on={on!r}, left_on={left_on!r}, right_on={right_on!r}"
        )
    lnames, rnames = (on, on) if on is not None else (left_on, right_on)
    lnames = [lnames] if isinstance(lnames, str) else list(lnames)
    rnames = [rnames] if isinstance(rnames, str) else list(rnames)
    if not lnames or len(lnames) != len(rnames):
        raise ValueError(
            f"join: expected one right key column for each left one (at least one), got left {lnames} and right {rnames}"
        )
    return (
        [check_name(n, left, "join: left key") for n in lnames],
        [check_name(n, right, "join: right key") for n in rnames],
    )


def common_type(left: ColumnType, right: ColumnType, names: tuple[str, str]) -> ColumnType:
    """The type two key columns meet as: their own where equal, int64 for integers of two types (bool and unsigned
    up to uint32 included), float64 for floats of two widths.

    Raises:
        TypeError: any other pair (the message names the columns and how to cast one).
    """
    if left == right:
        return left
    if left.name in _WIDENED and right.name in _WIDENED:
        return ColumnType.of(np.dtype(np.int64))
    if left.storage.kind == "f" and right.storage.kind == "f":
        return ColumnType.of(np.dtype(np.float64))
    if left.inner is not None or right.inner is not None:
        raise TypeError(
            f"join: left key {names[0]!r} is {left.name} and right key {names[1]!r} is {right.name}; a list key "
            "matches only a list key of its type: join on another column, or explode() the list first"
        )
    raise TypeError(
        f"join: left key {names[0]!r} is {left.name} and right key {names[1]!r} is {right.name}; keys that are not "
        "both integers or both floats must be of one type: make one side's column the other's type first, "
        "e.g. with_columns(lambda rows: {'k': tf.cast(rows['k'], tf.int64)})"
    )


def joined(
    left: Mapping[str, Column],
    right: Mapping[str, Column],
    keys: tuple[Sequence[str], Sequence[str]],
    how: str,
    suffix: str,
    options: dict[str, Any],
) -> dict[str, Column]:
    """The columns of ``left`` joined with ``right`` on the key columns ``keys`` (left names, right names)."""
    lkeys, rkeys = keys
    types = [common_type(left[a].type, right[b].type, (a, b)) for a, b in zip(lkeys, rkeys, strict=True)]
    lcols = [_as(left[a], t) for a, t in zip(lkeys, types, strict=True)]
    rcols = [_as(right[b], t) for b, t in zip(rkeys, types, strict=True)]
    lrows, rrows = _with_keys(lcols), _with_keys(rcols)
    lkey, rkey = join_keys(lcols, rcols, (lrows, rrows))
    n_left, n_right = len(lcols[0]), len(rcols[0])
    if how in ("semi", "anti"):
        matched = np.zeros(n_left, bool)
        matched[lrows] = _found(lkey, rkey)
        rows = np.flatnonzero(matched if how == "semi" else ~matched)
        return {name: c.take(rows) for name, c in left.items()}
    if len(lkey) and len(rkey):
        r = join_kind((lkey, lrows), (rkey, rrows), how=how, **options)
        li = np.where(r.left_matched, r.left, -1).astype(np.int64)
        ri = np.where(r.right_matched, r.right, -1).astype(np.int64)
    else:  # a side without a row that can match: no run
        li, ri = np.zeros(0, np.int64), np.zeros(0, np.int64)
        if how in ("left", "outer"):
            li, ri = lrows, np.full(len(lrows), -1, np.int64)
        if how in ("right", "outer"):
            li, ri = np.concatenate([li, np.full(len(rrows), -1)]), np.concatenate([ri, rrows])
    if how in ("left", "outer"):  # the rows a null key kept from matching
        lost = _without(n_left, lrows)
        li, ri = np.concatenate([li, lost]), np.concatenate([ri, np.full(len(lost), -1)])
    if how in ("right", "outer"):
        lost = _without(n_right, rrows)
        li, ri = np.concatenate([li, np.full(len(lost), -1)]), np.concatenate([ri, lost])
    first, then = (_last(ri, n_right), li) if how == "right" else (_last(li, n_left), ri)
    if not _ordered(first, then):  # a broadcast join's rows come in order already: no sort
        order = np.lexsort((then, first))
        li, ri = li[order], ri[order]
    return _columns(left, right, lkeys, rkeys, (lcols, rcols), (li, ri), suffix)


def _as(column: Column, type_: ColumnType) -> Column:
    return column if column.type == type_ else made(type_, column.values.astype(type_.storage), column.valid)


def _with_keys(columns: Sequence[Column]) -> np.ndarray[Any, Any]:
    """The rows (int64) whose key columns hold no null: the only ones that can match."""
    if all(c.valid is None for c in columns):
        return row_numbers(len(columns[0]))
    ok = np.ones(len(columns[0]), bool)
    for c in columns:
        if c.valid is not None:
            ok &= c.valid
    return np.flatnonzero(ok).astype(np.int64)


def _without(n: int, rows: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The row numbers below ``n`` that ``rows`` (distinct, int64) lacks, ascending; none and no pass where it has all."""
    if len(rows) == n:
        return np.zeros(0, np.int64)
    lost = np.ones(n, bool)
    lost[rows] = False
    return np.flatnonzero(lost)


def _found(keys: np.ndarray[Any, Any], among: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Whether each of ``keys`` is among ``among`` (both int64): looked up in a table of the seen keys where the range
    of both is not much wider than their count (or at most 2**24; indexed by the keys themselves where none is
    negative), else by numpy's ``isin``.

    Example:
        >>> _found(np.array([5, 0, 7, 9]), np.array([7, 5, 5])).tolist()
        [True, False, True, False]
        >>> _found(np.array([5, 1 << 40, -(1 << 62)]), np.array([1 << 40, -(1 << 62)])).tolist()  # a wide range
        [False, True, True]
    """
    if not len(keys) or not len(among):
        return np.zeros(len(keys), bool)
    low, high = min(int(keys.min()), int(among.min())), max(int(keys.max()), int(among.max()))
    most = max(8 * (len(keys) + len(among)), 1 << 24)
    if high - low > most:
        return np.isin(keys, among)
    low = 0 if low >= 0 and high <= most else low  # (no subtraction)
    seen = np.zeros(high - low + 1, bool)
    seen[among - low if low else among] = True
    found: np.ndarray[Any, Any] = seen[keys - low if low else keys]
    return found


def _ordered(first: np.ndarray[Any, Any], then: np.ndarray[Any, Any]) -> bool:
    """Whether the pairs ``(first, then)`` are in ascending order (by ``first``, then ``then``).

    Example:
        >>> _ordered(np.array([0, 1, 1]), np.array([5, 2, 3])), _ordered(np.array([0, 1, 1]), np.array([5, 3, 2]))
        (True, False)
    """
    if len(first) < 2:
        return True
    step, same = first[1:] - first[:-1], then[1:] >= then[:-1]
    return bool(np.all((step > 0) | ((step == 0) & same)))


def _last(rows: np.ndarray[Any, Any], n: int) -> np.ndarray[Any, Any]:
    """Row numbers for ordering, a missing one (-1) after every present one (each after the others in their order)."""
    return np.where(rows < 0, n, rows)


def _columns(
    left: Mapping[str, Column],
    right: Mapping[str, Column],
    lkeys: Sequence[str],
    rkeys: Sequence[str],
    keys: tuple[Sequence[Column], Sequence[Column]],
    rows: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]],
    suffix: str,
) -> dict[str, Column]:
    """The result: the key columns once (left names; each row's key from the side it has), the left's other columns,
    then the right's (``suffix`` added to a name the result already has); null where a row has no such side."""
    li, ri = rows
    out: dict[str, Column] = {}
    for name, lc, rc in zip(lkeys, *keys, strict=True):
        a, b = _taken(lc, li), _taken(rc, ri)
        values = np.where(li >= 0, a.values, b.values)
        valid = np.where(li >= 0, _valid(a), _valid(b))
        out[name] = made(lc.type, values, valid)
    for name, c in left.items():
        if name not in out:
            out[name] = _taken(c, li)
    for name, c in right.items():
        if name in rkeys:
            continue
        named = name if name not in out else name + suffix
        if named in out:
            raise ValueError(
                f"join: the right column {name!r} would be {named!r}, which the result already has; pass another "
                f"suffix= or select() other columns first"
            )
        out[named] = _taken(c, ri)
    return out


def _taken(column: Column, rows: np.ndarray[Any, Any]) -> Column:
    """``column``'s ``rows``; null where a row is -1 (no row of that side)."""
    missing = rows < 0
    taken = (
        column.take(np.where(missing, 0, rows))
        if len(column)
        else made(column.type, np.zeros(len(rows), column.type.storage), None)
    )
    if not missing.any():
        return taken
    return made(column.type, taken.values, _valid(taken) & ~missing)


def _valid(column: Column) -> np.ndarray[Any, Any]:
    return np.ones(len(column), bool) if column.valid is None else column.valid
