"""A ``Table`` as the by-key recipes take it: its key and value columns, named by ``keys=`` and ``values=``, as
arrays (a thin conversion at the recipes' entry, ``_by_key.keyed_input``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._table.column import no_lists
from .._table.table import Table


def call_of(name: str, with_values: bool) -> str:
    """How to call recipe ``name`` with a table, for an error message."""
    return f"tmr.{name}(table, keys='k'" + (", values='v')" if with_values else ")")


def table_columns(name: str, table: Table, keys: Any, values: Any, with_values: bool) -> Any:
    """A ``Table``'s columns as a by-key recipe takes them: ``(keys, values)`` arrays (``keys`` alone without values).

    The key column (integers, strings, or dates and timestamps as their int days and counts) must hold no null; a
    row whose value is null is left out (aggregates skip nulls, as SQL's do); a list column's values are its elements,
    each a row of its row's key (pandas' ``explode``; an empty or null list gives no row); several value columns (a
    list of names, no list column among them) become one 2-D array, as a CSV table's do, and may hold no null.

    The caller checks the keys as it checks any keys (``_by_key._check_keys``: int32, int64 or strings).

    Raises:
        TypeError: ``keys=`` (or ``values=``) missing, not column names, a list column as the key or among several
        value columns, or a null in the key column or in one of several value columns; KeyError: an unknown column
        (with the closest name).
    """
    if not isinstance(keys, str) or (with_values and not (isinstance(values, str) or _names(values))):
        raise TypeError(
            f"{name}: name the Table's key column with keys="
            + (" and its value column(s) with values=" if with_values else "")
            + f", e.g. {call_of(name, with_values)}; got keys={keys!r}"
            + (f", values={values!r}" if with_values else "")
        )
    columns_of = {n: table.column(n) for n in (keys, *([values] if isinstance(values, str) else values or []))}
    no_lists(columns_of, [keys], name, "key ", "; group by the columns it was aggregated by")
    no_lists(columns_of, [] if isinstance(values, str) else list(values or []), name, "value ", "; pass it alone")
    key = table.column(keys)
    if key.valid is not None:
        raise TypeError(
            f"{name}: the key column {keys!r} holds nulls, which no by-key result can hold; filter them out first "
            f"(t.filter(lambda rows: rows.valid[{keys!r}])), or use t.group_by({keys!r}).agg(...), where a null key is a group"
        )
    narrow = key.values.dtype.kind in "iu" and key.values.dtype not in (
        np.dtype(np.int32),
        np.dtype(np.int64),
        np.dtype(np.uint64),
    )
    key_values = key.values.astype(np.int64) if narrow else key.values
    if not with_values:
        return key_values
    if isinstance(values, str):
        column = table.column(values)
        if column.type.inner is not None:  # each element a row of its row's key, as pandas' explode (none: no row)
            lengths = [len(v) for v in column.values]
            elements = [np.zeros(0, column.type.inner.storage), *column.values]
            return np.repeat(key_values, lengths), np.concatenate(elements).astype(column.type.inner.storage)
        if column.valid is None:
            return key_values, column.values
        return key_values[column.valid], column.values[column.valid]
    columns = [table.column(v) for v in values]
    nulls = [v for v, c in zip(values, columns, strict=True) if c.valid is not None]
    if nulls:
        raise TypeError(
            f"{name}: the value column {nulls[0]!r} holds nulls; several value columns must hold none (which row "
            f"would a null leave out?): pass one column at a time, or use t.group_by({keys!r}).agg(...), which skips them"
        )
    return key_values, np.column_stack([c.values for c in columns])


def _names(values: Any) -> bool:
    return isinstance(values, (list, tuple)) and bool(values) and all(isinstance(v, str) for v in values)
