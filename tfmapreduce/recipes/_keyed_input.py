"""What a by-key or group recipe runs over: keys and values (one array, or a tuple of value columns), or a CSV table's
columns named by ``keys=`` and ``values=``; the keys checked.

Example:
    >>> keys, values = keyed_input("sum_by_key", np.array([1, 2]), (np.ones(2), np.zeros(2)), {})
    >>> is_columns(values)
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from .._base.errors import InputError
from .._io.files.csv import Csv
from .._io.files.files import Files, csv_table
from .._io.source import Input
from .._table.table import Table
from ._tables import call_of, table_columns


def is_table(data: Any) -> bool:
    """Whether ``data`` is a ``read_csv`` table (whose columns a by-key recipe takes by name)."""
    return isinstance(data, Files) and isinstance(data.reader, Csv)


def is_columns(values: Any) -> bool:
    """Whether ``values`` is a tuple of value columns (a tuple holding anything but scalars), each its own result."""
    return isinstance(values, tuple) and any(not np.isscalar(v) for v in values)


def keyed_input(name: str, keys: Any, values: Any, options: Any, *, with_values: bool = True, columns: bool = True) -> Any:
    """What a by-key recipe runs over: ``(keys, values)`` (or ``keys`` alone), a CSV table's columns read as a pair,
    or a ``Table``'s columns named by ``keys=`` and ``values=`` (:func:`table_columns`).

    ``options`` (the recipe's keywords) loses its ``keys=`` and ``values=``, which name a table's columns.  With
    ``columns``, ``values`` may be a tuple of arrays (:func:`is_columns`); without, such a tuple is refused.

    Raises:
        TypeError: a table without ``keys=`` (and ``values=``), or those with arrays, or values missing.
        InputError: keys not a 1-D array of a key dtype; a tuple of values where ``columns`` is False.
    """
    if not columns and is_columns(values):
        raise InputError(
            f"values of {name} must be one array (one value per key), got a tuple of {len(values)} arrays; "
            f"{name} has no several-column form: run it once per column, e.g. tmr.{name}(keys, values[0])"
        )
    named: dict[str, Any] = options
    column_keys, column_values = named.pop("keys", None), named.pop("values", None)
    if isinstance(keys, Table):
        if values is not None:
            raise TypeError(
                f"{name}: the first argument is a Table: pass it alone and name its columns, e.g. {call_of(name, with_values)}"
            )
        x = table_columns(name, keys, column_keys, column_values if with_values else None, with_values)
        _check_keys(x[0] if with_values else x)
        return x
    call = f"tmr.{name}(tmr.read_csv(paths), keys='k'" + (", values='v')" if with_values else ")")
    if is_table(keys):
        if values is not None:
            raise TypeError(
                f"{name}: the first argument is a CSV table ({keys!r}): pass it alone and name its columns, e.g. {call}"
            )
        if column_keys is None or (with_values and column_values is None):
            raise TypeError(
                f"{name}: {keys!r} is a CSV table: name its key column with keys="
                + (" and its value column(s) with values=" if with_values else "")
                + f", e.g. {call}"
            )
        return csv_table(keys, column_keys, column_values if with_values else None, name)
    if column_keys is not None or column_values is not None:
        raise TypeError(
            f"{name}: keys= and values= name the columns of a CSV table ({call}); "
            f"pass arrays positionally: tmr.{name}(keys" + (", values)" if with_values else ")")
        )
    if with_values and values is None:
        raise TypeError(f"{name}: values are missing: pass tmr.{name}(keys, values), or a CSV table as {call}")
    _check_keys(keys)
    return (keys, values) if with_values else keys


def _check_keys(keys: Any) -> None:
    """InputError for keys that are not a 1-D array of int32/int64 or strings."""
    if isinstance(keys, Input):
        source = keys.as_source()
        dtype, shape = source.dtype, tuple[int | None, ...](source.shape)
        if isinstance(keys, Files) and keys.reader.unit == "bytes":
            shape = (None, *shape[1:])  # rows known only once read: not the bytes the plan counts
    else:
        try:
            array = keys.numpy() if isinstance(keys, (tf.Tensor, tf.Variable)) else np.asarray(keys)
        except ValueError as e:
            raise InputError(f"keys must be a rectangular 1-D array, got a ragged {type(keys).__name__} ({e})") from None
        dtype, shape = array.dtype, array.shape
    if len(shape) != 1:
        raise InputError(
            f"keys must be 1-D (one key per row), got rows of shape {shape[1:]} (shape {shape}); flatten them, "
            "e.g. keys.ravel(), and the values to match"
            + (
                "; a file source cannot be flattened: read a 1-D column (read_csv(..., columns=['k']))"
                if isinstance(keys, Input)
                else ""
            )
        )
    if not (dtype.kind in "USO" or dtype in (np.dtype(np.int32), np.dtype(np.int64))):
        raise InputError(
            f"keys have dtype {dtype}; keys must be int32, int64 or strings (str or bytes): float, bool and complex keys "
            "have no exact equality to group by; convert them, e.g. keys.astype(np.int64)"
        )


def pair(keys: tf.Tensor, values: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The map function of a recipe over ``(keys, values)``: the pair as it is."""
    return keys, values
