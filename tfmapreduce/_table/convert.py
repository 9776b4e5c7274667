"""Columns from the host's data: numpy arrays (``np.ma`` masks, None and NaT as nulls) and pandas Series (NaN,
None, ``pd.NA`` and NaT as nulls, as ``pyarrow.Table.from_pandas`` reads them)."""

from __future__ import annotations

import datetime
import math
from typing import Any

import numpy as np

from .arrow import from_arrow, pyarrow_module
from .column import Column, made
from .list_cells import LISTS, from_cells
from .schema import DATE, STRING, ColumnType


def _is_null(v: Any) -> bool:
    if v is None or v is getattr(_pandas(), "NA", None) or v is getattr(_pandas(), "NaT", None):
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    return isinstance(v, np.datetime64) and np.isnat(v)


def _pandas() -> Any:
    try:
        import pandas as pd  # type: ignore[import-untyped]  # optional; no stubs installed
    except ImportError:  # pragma: no cover - pandas is only needed for DataFrames
        return None
    return pd


def from_objects(name: str, values: np.ndarray[Any, Any]) -> Column:
    """A column of Python objects: every non-null one a ``str`` (a string column), a ``datetime.date`` (a date), or a
    list, tuple or 1-D numpy array (a list column, :func:`from_cells`).

    Raises:
        TypeError: another kind of object, or strings mixed with dates; the message names the column and the row.
    """
    valid = np.array([not _is_null(v) for v in values], dtype=bool)
    present = values[valid]
    if len(present) and isinstance(present[0], LISTS):
        return from_cells(name, [v if ok else None for v, ok in zip(values, valid, strict=True)])
    if all(isinstance(v, str) for v in present):
        return made(STRING, np.where(valid, values, "").astype(object), valid)
    if all(isinstance(v, datetime.date) and not isinstance(v, datetime.datetime) for v in present):
        days = np.array([np.datetime64(v, "D") if ok else np.datetime64(0, "D") for v, ok in zip(values, valid, strict=True)])
        return made(DATE, days.astype(np.int64).astype(np.int32), valid)
    row = next((i for i, v in enumerate(values) if valid[i] and not isinstance(v, type(present[0]))), None)
    first = type(present[0]).__name__
    what = f"holds {first} values" if row is None else f"mixes {first} with {type(values[row]).__name__}"
    row = int(np.argmax(valid)) if row is None else row
    raise TypeError(
        f"table: column {name!r} {what} (row {row}: {values[row]!r}); expected every value a str (a string column), "
        "a datetime.date (a date column) or a list (a list column), None for a null: convert the column first, "
        "e.g. df[name].astype(str)"
    )


def from_numpy(name: str, data: Any) -> Column:
    """A column from a 1-D numpy array (or anything ``np.asarray`` takes); a masked array's mask marks nulls.

    Raises:
        TypeError: not 1-D, bytes, or a dtype no column type stores.
    """
    mask = np.ma.getmaskarray(data) if isinstance(data, np.ma.MaskedArray) else None
    array = np.ma.getdata(data) if mask is not None else np.asarray(data)
    if array.ndim != 1:
        raise TypeError(
            f"table: column {name!r} must be 1-D (one value a row), got shape {array.shape}; pass each column as its own array"
        )
    if array.dtype.kind == "S":
        raise TypeError(
            f"table: column {name!r} holds bytes ({array.dtype}); columns hold text: decode it first, e.g. np.char.decode(a, 'utf-8')"
        )
    if array.dtype.kind == "O":
        column = from_objects(name, array)
    elif array.dtype.kind == "U":
        column = made(STRING, array.astype(object), None)
    else:
        try:
            type_ = ColumnType.of(array.dtype)
        except TypeError as e:
            raise TypeError(f"table: column {name!r}: {e}") from None
        if array.dtype.kind == "M":
            nat = np.isnat(array)
            column = made(type_, np.where(nat, 0, array.view(np.int64)).astype(type_.storage), ~nat)
        else:
            column = made(type_, array, None)
    if mask is None or not mask.any():
        return column
    valid = ~mask if column.valid is None else column.valid & ~mask
    return made(column.type, column.values, valid)


def from_series(name: str, series: Any) -> Column:
    """A column from a pandas Series: NaN (in float columns too), None, ``pd.NA`` and NaT are nulls; an
    ``ArrowDtype`` column (``list<...>`` too) is read as its Arrow array.

    Raises:
        TypeError: a timezone-aware, categorical, timedelta or other dtype no column type stores.
    """
    pd = _pandas()
    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        values = series.to_numpy()
        return made(ColumnType.of(dtype), np.nan_to_num(values, nan=0.0), ~np.isnan(values))
    if isinstance(dtype, np.dtype) and dtype.kind in "biuM":
        return from_numpy(name, series.to_numpy())
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        return from_objects(name, series.to_numpy())
    if hasattr(dtype, "pyarrow_dtype"):  # pandas' ArrowDtype (dtype_backend="pyarrow"), lists too: its Arrow array
        return from_arrow(name, pyarrow_module().array(series))
    if isinstance(dtype, pd.StringDtype):
        return from_objects(name, series.to_numpy(dtype=object, na_value=None))
    numpy_dtype = getattr(dtype, "numpy_dtype", None)
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and numpy_dtype is not None and numpy_dtype.kind in "biuf":
        valid = ~series.isna().to_numpy()
        values = series.to_numpy(dtype=numpy_dtype, na_value=0)
        return made(ColumnType.of(numpy_dtype), values, valid)
    raise TypeError(
        f"table: column {name!r} has pandas dtype {dtype}, which no column type stores yet (bool, ints, floats, "
        "str, dates, naive datetime64); convert it first, e.g. df[name].astype(str) or a timezone-naive datetime"
    )
