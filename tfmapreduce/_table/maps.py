"""A table's rows through a map function on the workers: ``filter`` (which rows stay) and ``with_columns`` (new
columns), each one map-only run over the table's columns shipped as co-partitioned inputs.

The function receives a :class:`TableRows`, a dict ``{name: tensor}`` of a shard's batch: numbers and bool as their
dtype, strings ``tf.string`` (UTF-8), dates int32 days since 1970-01-01, timestamps int64 counts of their unit. A
null's slot holds 0, ``""`` or day 0; ``rows.valid[name]`` is each column's validity (a bool tensor, all True where
the column holds no null). A list column (a ``top_k``'s) is a ``tf.RaggedTensor`` ``[rows, None]`` of its elements
(of those types), a null list an empty row whose ``rows.valid[name]`` is False.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from .._io.resident import delete_all
from .._kinds.map_api import map as map_rows
from .column import Column, ResidentColumn, column_arrays, made, travelling
from .schema import STRING, ColumnType


class TableRows(dict[str, tf.Tensor]):
    """A batch of a table's rows as ``{name: tensor}`` (a list column's a ``tf.RaggedTensor``); ``valid`` maps each name to
    its validity (a bool tensor, one a row)."""

    def __init__(self, values: Mapping[str, tf.Tensor], valid: Mapping[str, tf.Tensor]) -> None:
        super().__init__(values)
        self.valid = dict(valid)


Columns = Mapping[str, Column] | Mapping[str, ResidentColumn]
"""A table's columns, on the client or on the workers: the same functions build the map over either."""


def arrays_of(columns: Columns) -> tuple[Any, ...]:
    """The inputs of a map over ``columns``: each column's values, then its validity where it has one (numpy arrays
    on the client, ``Sharded`` on the workers: co-partitioned either way)."""
    return tuple(a for c in columns.values() for a in column_arrays(c))


def row_function(
    columns: Columns, fn: Callable[[TableRows], Any], check: Callable[[Any], tuple[tf.Tensor, ...]]
) -> Callable[..., tuple[tf.Tensor, ...]]:
    """The map function of a job over ``columns`` (whose inputs are :func:`arrays_of`): ``check(fn(rows))``."""
    names = list(columns)
    forms = [(len(column_arrays(columns[n])), columns[n].type.inner is not None) for n in names]

    def mapped(*tensors: tf.Tensor) -> tuple[tf.Tensor, ...]:
        values, valid, i = {}, {}, 0
        for name, (n, listed) in zip(names, forms, strict=True):
            values[name], valid[name] = _seen(tensors[i : i + n], listed)
            i += n
        return check(fn(TableRows(values, valid)))

    return functools.update_wrapper(mapped, fn, assigned=("__name__", "__qualname__"), updated=())  # errors name fn


def _seen(parts: tuple[tf.Tensor, ...], listed: bool) -> tuple[Any, tf.Tensor]:
    """A column as a map function sees it, from its arrays: its values and its validity (all True where it has none);
    a list column as a ``tf.RaggedTensor`` of its rows' elements (a null list an empty row) and its rows' validity."""
    values = parts[0]
    if listed:  # values [rows, width], the slot mask, [the rows' validity]
        lists = tf.ragged.boolean_mask(values, parts[1])
        return lists, parts[2] if len(parts) > 2 else tf.ones(tf.shape(values)[:1], tf.bool)
    return values, parts[1] if len(parts) > 1 else tf.ones(tf.shape(values), tf.bool)


def _run(
    columns: Mapping[str, Column],
    fn: Callable[[TableRows], Any],
    check: Callable[[Any], tuple[tf.Tensor, ...]],
    options: Mapping[str, Any],
) -> list[np.ndarray[Any, Any]]:
    """``check(fn(rows))``'s tensors of every row, in row order, from one map-only run (an eager call on no rows)."""
    columns = {name: travelling(c) for name, c in columns.items()}  # a list column as the workers hold one
    arrays, mapped = arrays_of(columns), row_function(columns, fn, check)
    if not len(arrays[0]):
        return [t.numpy() for t in mapped(*(tf.constant(a) for a in arrays))]
    out = map_rows(mapped, arrays, **options)
    parts = list(out) if isinstance(out, tuple) else [out]
    try:
        return [p.gather() for p in parts]
    finally:
        delete_all(parts)


def mask_check(method: str) -> Callable[[Any], tuple[tf.Tensor, ...]]:
    """What a filter's ``fn`` must return: one bool a row (a 1-D ``tf.bool`` tensor)."""

    def check(mask: Any) -> tuple[tf.Tensor, ...]:
        if not isinstance(mask, tf.Tensor) or mask.dtype != tf.bool or mask.shape.rank != 1:
            raise TypeError(
                f"{method}: fn must return one bool a row (a 1-D tf.bool tensor), e.g. lambda rows: rows['x'] > 0; got {mask!r}"
            )
        return (mask,)

    return check


def kept(columns: Mapping[str, Column], fn: Callable[[TableRows], Any], options: Mapping[str, Any]) -> np.ndarray[Any, Any]:
    """The rows ``fn`` keeps (a bool mask), ``fn`` returning one bool per row."""
    return _run(columns, fn, mask_check("filter"), options)[0]


def dict_check(names: list[str], method: str) -> Callable[[Any], tuple[tf.Tensor, ...]]:
    """What a ``with_columns`` or a table map's ``fn`` must return: a dict ``{name: 1-D tensor}``; its names are put
    in ``names`` as it is traced."""

    def check(out: Any) -> tuple[tf.Tensor, ...]:
        if not isinstance(out, Mapping) or not out:
            raise TypeError(
                f"{method}: fn must return a dict of new columns, e.g. lambda rows: {{'y': rows['x'] * 2}}; got {type(out).__name__}"
            )
        names[:] = [str(n) for n in out]
        for name, t in zip(names, out.values(), strict=True):
            if isinstance(t, tf.RaggedTensor):
                raise TypeError(
                    f"{method}: column {name!r} is a tf.RaggedTensor (a list a row), and new columns hold one value a "
                    "row yet; reduce each list (e.g. tf.reduce_sum(rows['top'], axis=1)), or return its .flat_values "
                    "from map() (one row an element)"
                )
        tensors = tuple(tf.convert_to_tensor(t) for t in out.values())
        for name, t in zip(names, tensors, strict=True):
            if t.shape.rank != 1:
                raise TypeError(f"{method}: column {name!r} must be 1-D (one value a row), got shape {t.shape}")
        return tensors

    return check


def computed(columns: Mapping[str, Column], fn: Callable[[TableRows], Any], options: Mapping[str, Any]) -> dict[str, Column]:
    """The columns ``fn`` returns (a dict ``{name: 1-D tensor}``, one value a row), with no nulls."""
    names: list[str] = []
    arrays = _run(columns, fn, dict_check(names, "with_columns"), options)
    return {name: _column(a) for name, a in zip(names, arrays, strict=True)}


def _column(array: np.ndarray[Any, Any]) -> Column:
    if array.dtype.kind in "OS":
        text = np.array([v.decode("utf-8") if isinstance(v, bytes) else v for v in array], dtype=object)
        return made(STRING, text, None)
    return made(ColumnType.of(array.dtype), array, None)
