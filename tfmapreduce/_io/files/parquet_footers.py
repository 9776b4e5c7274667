"""What Parquet files' footers say about their row groups, as a frozen value: each column's least and greatest value
in its storage (a date as int32 days since 1970, a timestamp as int64 of its unit, a decimal as a float), its null
count and its uncompressed bytes. ``plan_parquet`` reads the footers once and keeps this in its plan, so a plan
narrowed by more filters, the optimizer's estimates and its row-group skipping open no file again.

Example: a row group whose ``day`` spans 2024-01-01 to 2024-04-09 keeps ``ColumnStats(low=19723, high=19822,
nulls=0, size=...)`` for it, and ``excludes(stats, rows, ">=", 19900)`` is True: no row of it passes ``day >=
2024-06-27``.
"""

from __future__ import annotations

import datetime
from typing import Any

import attrs
import numpy as np


@attrs.frozen
class ColumnStats:
    """One column of one row group: ``low`` and ``high`` in the column's storage (None: no min/max in the footer),
    ``nulls`` its null count (None: not recorded), ``size`` its uncompressed bytes."""

    low: Any = None
    high: Any = None
    nulls: int | None = None
    size: int = 0


@attrs.frozen
class Footers:
    """The files' every column (``names``, each one's ``kinds``: None where a table column cannot hold it, and
    ``leaves``: its first leaf column in the Parquet schema) and, for each row group a plan reads (its
    ``row_groups``, in order), each column's statistics (``groups[g][i]`` is column ``names[i]`` of row group ``g``)."""

    names: tuple[str, ...]
    kinds: tuple[str | None, ...]
    leaves: tuple[int, ...]
    groups: tuple[tuple[ColumnStats, ...], ...]


def leaf_starts(types: list[Any]) -> tuple[int, ...]:
    """Each field's first leaf column among a Parquet file's (Arrow ``types``, the fields in order): the index its
    footers and readers know it by, past every leaf of a struct, list or map before it.

    Example:
        >>> import pyarrow as pa
        >>> leaf_starts([pa.struct([("a", pa.int64()), ("b", pa.int64())]), pa.int64(), pa.list_(pa.int8()), pa.string()])
        (0, 2, 3, 4)
    """
    starts, at = [], 0
    for arrow_type in types:
        starts.append(at)
        at += _leaves(arrow_type)
    return tuple(starts)


def _leaves(arrow_type: Any) -> int:
    """How many leaf columns a field of ``arrow_type`` has in a Parquet file (1 unless nested)."""
    children = [arrow_type.field(i).type for i in range(arrow_type.num_fields)]  # a struct's fields, a list's item...
    return sum(_leaves(c) for c in children) if children else 1


def group_stats(group: Any, types: list[Any], kinds: tuple[str | None, ...], leaves: tuple[int, ...]) -> tuple[ColumnStats, ...]:
    """Each column's statistics in a pyarrow row group's metadata ``group`` (the files' columns of Arrow ``types``,
    their first leaves ``leaves``)."""
    out = []
    for index, (arrow_type, kind) in enumerate(zip(types, kinds, strict=True)):
        chunk = group.column(leaves[index])
        stats = chunk.statistics
        nulls = int(stats.null_count) if stats is not None and stats.has_null_count else None
        if kind is None or stats is None or not stats.has_min_max:
            out.append(ColumnStats(None, None, nulls, int(chunk.total_uncompressed_size)))
            continue
        low, high = _stat(stats.min, arrow_type), _stat(stats.max, arrow_type)
        out.append(ColumnStats(low, high, nulls, int(chunk.total_uncompressed_size)))
    return tuple(out)


def count(value: Any, unit: str) -> int:
    """A date or time as a count of ``unit`` (``"D"``, ``"ms"``...) since 1970-01-01."""
    return int(np.array([value], dtype=f"datetime64[{unit}]").astype(np.int64)[0])


def _stat(value: Any, arrow_type: Any) -> Any:
    """A statistic as the column's storage holds it."""
    text = str(arrow_type)
    if text.startswith("timestamp[") and not isinstance(value, int):
        return count(value, str(arrow_type.unit))
    if isinstance(value, datetime.date):
        return count(value, "D")
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if type(value).__name__ == "Decimal":
        return float(value)
    return value


def excludes(stats: ColumnStats, rows: int, op: str, v: Any) -> bool:
    """Whether a row group's statistics of a column prove that none of its ``rows`` passes ``column op v`` (``v`` in
    the column's storage, a tuple for ``in``; a null passes none)."""
    if stats.nulls is not None and stats.nulls == rows:
        return True  # every value is null
    if stats.low is None or stats.high is None:
        return False
    low, high = stats.low, stats.high
    try:
        if op == "==":
            return bool(v < low or v > high)
        if op == "!=":
            return bool(low == high == v)
        if op == "<":
            return bool(low >= v)
        if op == "<=":
            return bool(low > v)
        if op == ">":
            return bool(high <= v)
        if op == ">=":
            return bool(high < v)
        return all(x < low or x > high for x in v)
    except TypeError:  # a value that does not compare with the column's: the rows decide
        return False
