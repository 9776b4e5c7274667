"""The new columns a table's row function returns (``with_columns``, a resident table's ``map``), and the tensors a
map run keeps of them.

``fn`` returns a dict ``{name: column}``, each column one of:

- a 1-D tensor, one value a row (no null);
- a ``tf.RaggedTensor`` ``[rows, None]``, one list a row: a list column (``tf.strings.split(rows["text"])``), as
  pandas' ``str.split`` gives one;
- either in a pair ``(column, valid)``, ``valid`` one bool a row: a null where it is False (a null list for a
  ragged one), e.g. ``(tf.strings.split(rows["text"]), rows.valid["text"])``, so a null text gives a null list.

A list column leaves the run as it lives on the workers (``column.ResidentColumn``): ``[rows, width]`` values (each
list, then the filler), the slot mask, and the rows' validity where it came in a pair. A run's outputs have one row
shape on every shard, so ``width`` is the longest list of all shards, which :func:`output_check` without widths
gives (the run before the map, ``maps.widths``).

Example:
    >>> forms: list[Output] = []
    >>> check = output_check(forms, "with_columns", {"w": 2})
    >>> values, slots = check({"w": tf.ragged.constant([["a"], [], ["b", "c"]])})
    >>> forms[0].listed, values.numpy().tolist(), slots.numpy().tolist()
    (True, [[b'a', b''], [b'', b''], [b'b', b'c']], [[True, False], [False, False], [True, True]])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from .._io.resident import Sharded
from .column import Column, ResidentColumn, made, unpadded
from .schema import STRING, ColumnType, list_of


@attrs.frozen
class Output:
    """A returned column's form: its ``name``, whether it holds a list a row (``listed``, a ``tf.RaggedTensor``) and
    whether it came with its validity (``nullable``, a pair)."""

    name: str
    listed: bool
    nullable: bool


def _parts(out: Any, method: str) -> list[tuple[str, Any, tf.Tensor | None]]:
    """``fn``'s dict as ``(name, values, valid or None)``, each checked."""
    if not isinstance(out, Mapping) or not out:
        raise TypeError(
            f"{method}: fn must return a dict of new columns, e.g. lambda rows: {{'y': rows['x'] * 2}}; got {type(out).__name__}"
        )
    parts = []
    for key, value in out.items():
        name, valid = str(key), None
        if isinstance(value, tuple):
            if len(value) != 2:
                raise TypeError(
                    f"{method}: column {name!r} must be a tensor or a pair (values, valid), e.g. "
                    f"(tf.strings.split(rows['s']), rows.valid['s']); got a tuple of {len(value)}"
                )
            value, valid = value[0], tf.convert_to_tensor(value[1])
            if valid.dtype != tf.bool or valid.shape.rank != 1:
                raise TypeError(
                    f"{method}: column {name!r}'s validity must be one bool a row (a 1-D tf.bool tensor, True where "
                    f"not null), e.g. rows.valid['s']; got {valid.dtype.name} of shape {valid.shape}"
                )
        if isinstance(value, tf.RaggedTensor):
            if value.ragged_rank != 1 or value.flat_values.shape.rank != 1:
                raise TypeError(
                    f"{method}: column {name!r} must be a tf.RaggedTensor of shape [rows, None] (a list of values a "
                    f"row), got shape {value.shape}; flatten the inner lists with .merge_dims(1, -1)"
                )
        else:
            value = tf.convert_to_tensor(value)
            if value.shape.rank != 1:
                raise TypeError(f"{method}: column {name!r} must be 1-D (one value a row), got shape {value.shape}")
        parts.append((name, value, valid))
    return parts


def output_check(
    forms: list[Output], method: str, widths: Mapping[str, int] | None = None
) -> Callable[[Any], tuple[tf.Tensor, ...]]:
    """What a ``with_columns`` or a table map's ``fn`` must return (see the module); the returned columns' forms are
    put in ``forms`` as it is traced. With ``widths`` (each list column's width), the tensors a map run keeps, each
    column's in the order of :func:`column.column_arrays`; without, one int64 vector: each list column's longest list."""

    def check(out: Any) -> tuple[tf.Tensor, ...]:
        parts = _parts(out, method)
        forms[:] = [Output(name, isinstance(v, tf.RaggedTensor), valid is not None) for name, v, valid in parts]
        if widths is None:
            longest = [tf.reduce_max(tf.concat([[0], v.row_lengths()], 0)) for _, v, _ in parts if isinstance(v, tf.RaggedTensor)]
            return (tf.stack(longest) if longest else tf.zeros([0], tf.int64),)
        return tuple(t for name, v, valid in parts for t in _kept(name, v, valid, widths))

    return check


def _kept(name: str, values: Any, valid: tf.Tensor | None, widths: Mapping[str, int]) -> tuple[tf.Tensor, ...]:
    """A column's tensors as a run keeps them: a null's slot (a null list's slots) the filler, 0 or ``""``."""
    if isinstance(values, tf.RaggedTensor):
        width = widths.get(name)
        if width is None:
            raise TypeError(
                f"column {name!r}: fn returned a list column here but not when traced on no row, so its width is "
                "unknown; return a tf.RaggedTensor whatever the rows (no Python branch on a tensor)"
            )
        lengths = values.row_lengths()
        if valid is not None:
            lengths = tf.where(valid, lengths, tf.zeros_like(lengths))
        slots = tf.sequence_mask(lengths, width)
        dense = values.to_tensor(shape=[None, width])
        dense = tf.where(slots, dense, tf.zeros_like(dense))
        return (dense, slots) if valid is None else (dense, slots, valid)
    if valid is None:
        return (values,)
    return tf.where(valid, values, tf.zeros_like(values)), valid


def _type(dtype: np.dtype) -> ColumnType:
    return STRING if dtype.kind in "OS" else ColumnType.of(dtype)


def client_columns(forms: list[Output], arrays: Iterator[np.ndarray[Any, Any]]) -> dict[str, Column]:
    """The client columns of a run's fetched ``arrays`` (:func:`output_check`'s tensors, in order)."""
    out = {}
    for form in forms:
        values = next(arrays)
        if form.listed:
            slots = next(arrays)
            out[form.name] = unpadded(list_of(_type(values.dtype)), values, slots, next(arrays) if form.nullable else None)
            continue
        valid = next(arrays) if form.nullable else None
        if values.dtype.kind in "OS":
            text = np.array([v.decode("utf-8") if isinstance(v, bytes) else v for v in values], dtype=object)
            out[form.name] = made(STRING, text, valid)
        else:
            out[form.name] = made(ColumnType.of(values.dtype), values, valid)
    return out


def resident_columns(forms: list[Output], parts: Iterator[Sharded]) -> dict[str, ResidentColumn]:
    """The resident columns of a map run's outputs (:func:`output_check`'s tensors, in order)."""
    out = {}
    for form in forms:
        values = next(parts)
        valid = next(parts) if form.listed or form.nullable else None
        type_ = list_of(_type(values.dtype)) if form.listed else _type(values.dtype)
        out[form.name] = ResidentColumn(type_, values, valid, next(parts) if form.listed and form.nullable else None)
    return out
