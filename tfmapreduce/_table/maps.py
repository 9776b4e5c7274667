"""A table's rows through a map function on the workers: ``filter`` (which rows stay) and ``with_columns`` (new
columns), each one map-only run over the table's columns shipped as co-partitioned inputs.

The function receives a :class:`TableRows`, a dict ``{name: tensor}`` of a shard's batch: numbers and bool as their
dtype, strings ``tf.string`` (UTF-8), dates int32 days since 1970-01-01, timestamps int64 counts of their unit. A
null's slot holds 0, ``""`` or day 0; ``rows.valid[name]`` is each column's validity (a bool tensor, all True where
the column holds no null). A list column (a ``top_k``'s) is a ``tf.RaggedTensor`` ``[rows, None]`` of its elements
(of those types), a null list an empty row whose ``rows.valid[name]`` is False. What ``with_columns``' and ``map``'s
``fn`` return is ``outputs``': a function returning a list column costs one run more, before (:func:`widths`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from .._io.resident import Sharded, delete_all
from .._kinds.map_api import map as map_rows
from .column import Column, ResidentColumn, column_arrays, travelling
from .outputs import Output, client_columns, output_check, resident_columns


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
    columns: Columns, fn: Callable[[TableRows], Any], check: Callable[[Any], tuple[tf.Tensor, ...]], options: Mapping[str, Any]
) -> list[Any]:
    """``check(fn(rows))``'s tensors of every row from one map-only run over ``columns`` (client columns in their
    travelling form, or resident ones): ``Sharded`` outputs, or numpy arrays from an eager call where there is no row
    on the client."""
    arrays, mapped = arrays_of(columns), row_function(columns, fn, check)
    if not isinstance(arrays[0], Sharded) and not len(arrays[0]):
        return [t.numpy() for t in mapped(*(tf.constant(a) for a in arrays))]
    out = map_rows(mapped, arrays, **options)
    return list(out) if isinstance(out, tuple) else [out]


def _gathered(parts: list[Any]) -> list[np.ndarray[Any, Any]]:
    """The run's outputs fetched, in row order, and freed."""
    if not parts or not isinstance(parts[0], Sharded):
        return parts
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
    travelled = {name: travelling(c) for name, c in columns.items()}  # a list column as the workers hold one
    return _gathered(_run(travelled, fn, mask_check("filter"), options))[0]


def widths(
    columns: Columns, fn: Callable[[TableRows], Any], method: str, options: Mapping[str, Any]
) -> tuple[list[Output], dict[str, int]]:
    """The forms of the columns ``fn`` returns (traced here, on no row), and each list column's width: its longest
    list over every shard (at least 1), from one whole-input run where ``fn`` returns a list column and there are rows."""
    forms: list[Output] = []
    check = output_check(forms, method)
    arrays, traced = arrays_of(columns), row_function(columns, fn, check)
    specs = [tf.TensorSpec([None, *a.shape[1:]], tf.string if a.dtype.kind in "OS" else a.dtype) for a in arrays]
    try:
        tf.function(lambda *t: traced(*t), autograph=False).get_concrete_function(*specs)  # (traced's signature is fn's)
    except Exception:  # the map run raises it again, a MapFunctionError naming the shard, as every map's
        return forms, {}
    listed = [f.name for f in forms if f.listed]
    if not listed or not arrays[0].shape[0]:
        return forms, dict.fromkeys(listed, 1)
    each = _gathered(_run(columns, fn, lambda out: (tf.expand_dims(check(out)[0], 0),), options))[0]  # a row a shard
    return forms, {name: max(1, int(w)) for name, w in zip(listed, each.max(axis=0).tolist(), strict=True)}


def computed(columns: Mapping[str, Column], fn: Callable[[TableRows], Any], options: Mapping[str, Any]) -> dict[str, Column]:
    """The columns ``fn`` returns (see ``outputs``: one value a row, a list a row, nulls where paired with a validity),
    from one map-only run (and one before it where a column is a list)."""
    travelled = {name: travelling(c) for name, c in columns.items()}
    forms, width = widths(travelled, fn, "with_columns", options)
    arrays = _gathered(_run(travelled, fn, output_check(forms, "with_columns", width), options))
    return client_columns(forms, iter(arrays))


def mapped(
    columns: Mapping[str, ResidentColumn], fn: Callable[[TableRows], Any], options: Mapping[str, Any]
) -> dict[str, ResidentColumn]:
    """A resident table's ``map``: the columns ``fn`` returns, kept on the workers (a run before where one is a list)."""
    forms, width = widths(columns, fn, "map", options)
    return resident_columns(forms, iter(_run(columns, fn, output_check(forms, "map", width), options)))
