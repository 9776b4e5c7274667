"""Columns to and from Arrow (``pyarrow``, imported only here and only when called): ``Table.to_arrow`` and
``tmr.table(pyarrow_table)``. Each type maps to its Arrow type and back — numbers and bool as themselves, strings
``string`` (``large_string`` and dictionary-encoded strings read too), dates ``date32``, timestamps
``timestamp[unit]`` without a time zone — and a null is Arrow's null (its validity bitmap)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .column import Column, made
from .schema import DATE, STRING, ColumnType, timestamp


def _pyarrow() -> Any:
    try:
        import pyarrow as pa  # type: ignore[import-untyped]  # optional; no stubs installed
    except ImportError:  # pragma: no cover - pyarrow is optional
        raise ImportError("Arrow tables need pyarrow: pip install tfmapreduce[parquet]") from None
    return pa


def to_arrow(columns: Mapping[str, Column]) -> Any:
    """A ``pyarrow.Table`` of ``columns``, names, order, types and nulls kept.

    Raises:
        TypeError: a list column (a ``top_k``'s result), which Arrow holds but this conversion does not yet.
    """
    pa = _pyarrow()
    arrays = []
    for name, c in columns.items():
        mask = None if c.valid is None else ~c.valid
        if c.type.inner is not None:
            raise TypeError(f"to_arrow: column {name!r} is a {c.type.name} column; take it with to_pandas() or to_dict()")
        if c.type == STRING:
            arrays.append(pa.array(c.values.tolist(), pa.string(), mask=mask))
        elif c.type == DATE:
            arrays.append(pa.array(c.values.astype(np.int32), pa.int32(), mask=mask).cast(pa.date32()))
        elif c.type.unit is not None:
            arrays.append(pa.array(c.values.astype(np.int64), pa.int64(), mask=mask).cast(pa.timestamp(c.type.unit)))
        else:
            arrays.append(pa.array(c.values, mask=mask))
    return pa.table(arrays, names=list(columns))


def from_arrow(name: str, data: Any) -> Column:
    """A column from a pyarrow ``Array`` or ``ChunkedArray``: its type and nulls kept.

    Raises:
        TypeError: a type no column stores (nested, binary, decimal, a time of day, a timestamp with a time zone);
            the message names the column.
    """
    pa = _pyarrow()
    if isinstance(data, pa.ChunkedArray):
        data = data.combine_chunks() if data.num_chunks else pa.array([], data.type)
    if pa.types.is_dictionary(data.type):
        data = data.dictionary_decode()
    kind = data.type
    valid = np.asarray(data.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        values = np.array(data.fill_null("").to_pylist(), dtype=object)
        return made(STRING, values, valid)
    if pa.types.is_date32(kind):
        return made(DATE, _numbers(data.cast(pa.int32())), valid)
    if pa.types.is_timestamp(kind) and kind.tz is None and kind.unit in ("s", "ms", "us", "ns"):
        return made(timestamp(kind.unit), _numbers(data.cast(pa.int64())), valid)
    if pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_floating(kind):
        type_ = ColumnType.of(np.dtype(kind.to_pandas_dtype()))
        return made(type_, _numbers(data), valid)
    raise TypeError(
        f"table: column {name!r} has Arrow type {kind}, which no column type stores (bool, ints, floats, string, date32, "
        "timestamp without a time zone); cast it first, e.g. table.cast(...) in pyarrow, or leave it out"
    )


def _numbers(data: Any) -> np.ndarray[Any, Any]:
    """An Arrow array of numbers or bool as numpy, a null's slot 0 (False)."""
    pa = _pyarrow()
    filler = pa.scalar(False) if pa.types.is_boolean(data.type) else pa.scalar(0, data.type)
    return np.asarray(data.fill_null(filler).to_numpy(zero_copy_only=False))
