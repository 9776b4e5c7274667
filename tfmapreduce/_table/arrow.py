"""Columns to and from Arrow (``pyarrow``, imported only here and only when called): ``Table.to_arrow`` and
``tmr.table(pyarrow_table)``. Each type maps to its Arrow type and back — numbers and bool as themselves, strings
``string`` (``large_string`` and dictionary-encoded strings read too), dates ``date32``, timestamps
``timestamp[unit]`` without a time zone, a list column ``list<...>`` of one of those (``large_list`` reads too) — and a
null is Arrow's null (its validity bitmap); a list column's elements hold none (a null list is one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .column import Column, made
from .schema import DATE, STRING, ColumnType, list_of, timestamp


def pyarrow_module() -> Any:
    """``pyarrow``, imported on the first call (an optional dependency)."""
    try:
        import pyarrow as pa  # type: ignore[import-untyped]  # optional; no stubs installed
    except ImportError:  # pragma: no cover - pyarrow is optional
        raise ImportError("Arrow tables need pyarrow: pip install tfmapreduce[parquet]") from None
    return pa


def to_arrow(columns: Mapping[str, Column]) -> Any:
    """A ``pyarrow.Table`` of ``columns``, names, order, types and nulls kept (a list column ``list<...>``)."""
    pa = pyarrow_module()
    return pa.table([_array(c) for c in columns.values()], names=list(columns))


def _array(c: Column) -> Any:
    """One column as a ``pyarrow.Array``: a list column its elements' array cut at each row's end."""
    pa = pyarrow_module()
    mask = None if c.valid is None else ~c.valid
    inner = c.type.inner
    if inner is not None:
        ends = np.cumsum([0, *(len(v) for v in c.values)], dtype=np.int64)
        flat = np.concatenate([np.zeros(0, inner.storage), *c.values]).astype(inner.storage)
        offsets = pa.array(ends.astype(np.int32) if ends[-1] < 2**31 else ends)
        lists = pa.ListArray if ends[-1] < 2**31 else pa.LargeListArray
        return lists.from_arrays(offsets, _array(Column(inner, flat)), mask=None if mask is None else pa.array(mask))
    if c.type == STRING:
        return pa.array(c.values.tolist(), pa.string(), mask=mask)
    if c.type == DATE:
        return pa.array(c.values.astype(np.int32), pa.int32(), mask=mask).cast(pa.date32())
    if c.type.unit is not None:
        return pa.array(c.values.astype(np.int64), pa.int64(), mask=mask).cast(pa.timestamp(c.type.unit))
    return pa.array(c.values, mask=mask)


def arrow_of(data: Any) -> Any:
    """``data`` where it is a pyarrow ``Table`` or ``RecordBatch``, a polars ``DataFrame``'s ``to_arrow()`` (its large
    strings and lists read as strings and lists), None for anything else."""
    if type(data).__name__ in ("Table", "RecordBatch") and hasattr(data, "column_names"):
        return data
    if type(data).__module__.split(".")[0] == "polars" and type(data).__name__ == "DataFrame":
        return data.to_arrow()
    return None


def from_arrow(name: str, data: Any) -> Column:
    """A column from a pyarrow ``Array`` or ``ChunkedArray``: its type and nulls kept.

    Raises:
        TypeError: a type no column stores (a struct, a list of lists, binary, decimal, a time of day, a timestamp with
            a time zone); the message names the column.
        ValueError: a null inside a list (the message names the column and the first row holding one).
    """
    pa = pyarrow_module()
    if isinstance(data, pa.ChunkedArray):
        data = data.combine_chunks() if data.num_chunks else pa.array([], data.type)
    if pa.types.is_dictionary(data.type):
        data = data.dictionary_decode()
    kind = data.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _lists(name, data)
    valid = _valid(data)
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
        "timestamp without a time zone, a list of one of those); cast it first, e.g. table.cast(...) in pyarrow, or leave it out"
    )


def _lists(name: str, data: Any) -> Column:
    """A list column from an Arrow ``list`` or ``large_list`` array: each row's elements a numpy array, a null list
    None (an empty list in its slot).

    Raises:
        TypeError: a list of a type no column stores (a list of lists, a struct...), or lists of no element at all
            (Arrow's ``list<null>``: no type to give them).
        ValueError: a null element, naming the first row that holds one.
    """
    pa = pyarrow_module()
    flat = data.flatten()  # the rows' elements, a null list's none (Arrow's offsets and slicing taken care of)
    if flat.null_count:
        row = int(pa.compute.list_parent_indices(data)[int(np.argmax(~_valid(flat)))].as_py())
        raise ValueError(
            f"table: column {name!r} holds a null inside a list (row {row}: {data[row].as_py()!r}); a list's elements "
            "hold no null (a null list is fine): drop or fill them first, e.g. [v for v in cell if v is not None] for "
            "each pandas cell, or pa.ListArray.from_arrays(a.offsets, pc.fill_null(a.values, 0), mask=a.is_null()) in pyarrow"
        )
    if pa.types.is_null(flat.type):
        raise TypeError(
            f"table: column {name!r} is a {data.type} column: its lists hold no element to tell their type; give it "
            "one, e.g. pa.array(cells, pa.list_(pa.int64()))"
        )
    if pa.types.is_list(flat.type) or pa.types.is_large_list(flat.type):
        raise TypeError(
            f"table: column {name!r} is a list of lists ({data.type}); a list column holds one level: flatten it first, e.g. pc.list_flatten(a)"
        )
    inner = from_arrow(name, flat)
    lengths = np.asarray(pa.compute.list_value_length(data).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    ends = np.cumsum(lengths)
    lists: np.ndarray[Any, Any] = np.empty(len(data), object)
    for i, (start, end) in enumerate(zip((ends - lengths).tolist(), ends.tolist(), strict=True)):
        lists[i] = inner.values[start:end]
    return made(list_of(inner.type), lists, _valid(data))


def _valid(data: Any) -> np.ndarray[Any, Any]:
    return np.asarray(data.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _numbers(data: Any) -> np.ndarray[Any, Any]:
    """An Arrow array of numbers or bool as numpy, a null's slot 0 (False)."""
    pa = pyarrow_module()
    filler = pa.scalar(False) if pa.types.is_boolean(data.type) else pa.scalar(0, data.type)
    return np.asarray(data.fill_null(filler).to_numpy(zero_copy_only=False))
