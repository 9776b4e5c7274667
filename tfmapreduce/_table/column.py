"""One column of a table: on the host (``Column``: its type, its values in their storage dtype, and its validity
mask) or on the workers (``ResidentColumn``: the same as ``Sharded`` data; ``placed`` sends host columns there,
``unmasked`` drops the validity of those that hold no null).

A null's slot holds a canonical filler (0, ``""``, day 0), so equal keys are equal bytes and a null never leaks a value.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from .._io.resident import Sharded, delete_all
from .._io.resident import scatter as scatter_array
from .._kinds.mapreduce import MapReduce
from .._ops.combine import SUM
from .schema import DATE, STRING, ColumnType

_TAKING = threading.Lock()
_NUMBERS = [np.zeros(0, np.int64)]  # 0, 1, ... read-only, grown by doubling (row_numbers)


def row_numbers(n: int) -> np.ndarray[Any, Any]:
    """``np.arange(n)`` as int64, read-only: a view of one kept array, so a join or sort over millions of rows writes
    no fresh row numbers each time (fresh memory is slow to touch in a busy client).

    Example:
        >>> row_numbers(3).tolist(), row_numbers(3).flags.writeable
        ([0, 1, 2], False)
    """
    numbers = _NUMBERS[0]
    if len(numbers) < n:
        numbers = np.arange(max(n, 2 * len(numbers)), dtype=np.int64)
        numbers.flags.writeable = False
        _NUMBERS[0] = numbers
    return numbers[:n]


@attrs.frozen(eq=False)
class Column:
    """A column: ``values`` (1-D, ``type.storage``), and ``valid`` (bool, True where not null) or None (no nulls).

    A list column's travelling form (:func:`travelling`) is the resident one: ``[rows, width]`` values, ``valid`` the
    slot mask, and ``present`` the rows' validity (None where no list is null); ``present`` is None in any other.

    :meth:`take` defers its values: they are taken at their first read, and a take of a take composes the row numbers,
    so a filter then a join copies only the rows the join keeps, and only of the columns read.

    Example:
        >>> c = Column(STRING, np.array(["a", "b", "c"], object)).take(np.array([True, False, True])).take(np.array([1]))
        >>> len(c), c.values
        (1, array(['c'], dtype=object))
    """

    type: ColumnType
    _values: np.ndarray[Any, Any] = attrs.field(alias="values")
    valid: np.ndarray[Any, Any] | None = None
    present: np.ndarray[Any, Any] | None = None
    _rows: np.ndarray[Any, Any] | None = attrs.field(default=None, kw_only=True, alias="rows", repr=False)
    """The row numbers of ``_values`` still to take (None: taken)."""

    @property
    def values(self) -> np.ndarray[Any, Any]:
        """The values, taken now where a take deferred them (once: later reads get the same array)."""
        if self._rows is not None:
            with _TAKING:  # (the values are set before the rows are cleared: a reader outside the lock sees them)
                if self._rows is not None:
                    object.__setattr__(self, "_values", self._values[self._rows])
                    object.__setattr__(self, "_rows", None)
        return self._values

    def __len__(self) -> int:
        rows = self._rows
        return len(self._values) if rows is None else len(rows)

    @property
    def nullable(self) -> bool:
        """Whether the column has a validity mask (holds a null)."""
        return self.valid is not None

    def take(self, rows: np.ndarray[Any, Any] | slice) -> Column:
        """The column's ``rows`` (indices, a bool mask or a slice), in that order; the values are taken when read."""
        if isinstance(rows, slice):
            return made(self.type, self.values[rows], None if self.valid is None else self.valid[rows])
        rows = np.asarray(rows)
        numbers = np.flatnonzero(rows) if rows.dtype == bool else rows.astype(np.int64, copy=False)
        valid = None if self.valid is None else self.valid[numbers]
        if valid is not None and bool(np.all(valid)):
            valid = None
        pending = self._rows
        return Column(self.type, self._values, valid, rows=numbers if pending is None else pending[numbers])

    def to_numpy(self) -> np.ndarray[Any, Any]:
        """The values as the user sees them: strings an ``object`` array of ``str`` (None for a null), dates and
        timestamps ``datetime64`` (NaT for a null), numbers their dtype (a ``np.ma.MaskedArray`` when nulls); a list
        column an ``object`` array of one such array a row."""
        inner = self.type.inner
        if inner is not None:  # (None for a null list: a join's unmatched row, as polars gives it)
            cell = _cell(inner)
            cells = (cell(np.asarray(v, inner.storage)) if ok else None for v, ok in zip(self.values, self._mask(), strict=True))
            return np.fromiter(cells, dtype=object, count=len(self))  # (fromiter: equal lengths never broadcast)
        if self.type == STRING:
            text: np.ndarray[Any, Any] = self.values.copy()
            if self.valid is not None:
                text[~self.valid] = None
            return text
        if self.type.host.kind == "M":
            times: np.ndarray[Any, Any] = self.values.astype(np.int64).astype(self.type.host)
            if self.valid is not None:
                times[~self.valid] = np.datetime64("NaT")
            return times
        if self.valid is not None:
            masked: np.ndarray[Any, Any] = np.ma.MaskedArray(self.values, mask=~self.valid)
            return masked
        return np.array(self.values, copy=True)

    def to_pandas(self, name: str) -> Any:
        """A ``pandas.Series``: nullable ints and bools as pandas' ``Int64``/``boolean``... dtypes, floats with NaN
        for a null, strings ``object`` with None, dates ``object`` of ``datetime.date``, timestamps ``datetime64``;
        a list column ``object``, one numpy array a row (a date's ``object`` of ``datetime.date``), None a null list."""
        import pandas as pd  # type: ignore[import-untyped]  # optional; no stubs installed

        if self.type.name == "date":
            days = self.values.astype("datetime64[D]").astype(datetime.date)
            data = [d if ok else None for d, ok in zip(days, self._mask(), strict=True)]
            return pd.Series(data, name=name, dtype=object)
        if self.type.host.kind == "M":
            return pd.Series(self.to_numpy(), name=name)
        if self.type.inner is not None:  # one numpy array a row (dates datetime.date), as pyarrow's to_pandas gives one
            lists = self.to_numpy()
            for i, v in enumerate(list(lists) if self.type.inner == DATE else []):
                lists[i] = None if v is None else v.astype(datetime.date)
            return pd.Series(lists, name=name, dtype=object)
        if self.type == STRING:  # pandas' own default for text: "str" from pandas 3 on, object before
            text = "str" if int(pd.__version__.split(".")[0]) >= 3 else object
            return pd.Series(self.to_numpy(), name=name, dtype=text)
        if self.valid is None:
            return pd.Series(self.to_numpy(), name=name, dtype=self.type.storage)
        if self.type.storage.kind == "f":
            return pd.Series(np.where(self.valid, self.values, np.nan).astype(self.type.storage), name=name)
        dtype = "boolean" if self.type.name == "bool" else self.type.name.capitalize().replace("Ui", "UI")
        return pd.Series(pd.array(self.values, dtype=dtype), name=name).mask(~self.valid)

    def _mask(self) -> np.ndarray[Any, Any]:
        return np.ones(len(self), bool) if self.valid is None else self.valid


def _cell(inner: ColumnType) -> Callable[[np.ndarray[Any, Any]], np.ndarray[Any, Any]]:
    """How one list of a list column of ``inner`` values becomes what ``to_numpy`` gives (a list holds no null):
    times ``datetime64`` of their unit, any other a copy."""
    if inner.host.kind == "M":
        return lambda values: values.astype(np.int64).astype(inner.host)
    return np.copy


@attrs.frozen(eq=False)
class ResidentColumn:
    """A column whose shards live on the workers: ``values`` (a ``Sharded`` of ``type.storage``, strings as
    ``tf.string``) and ``valid`` (a ``Sharded`` of bool, True where not null) or None; a resident table's columns share
    one row partition. Jobs take it where they take a host :class:`Column` (the same ``type``, ``values``, ``valid``).

    A list column (``type.inner``, a ``top_k``'s result) is three arrays: its ``values`` are ``[rows, width]`` (each
    row's list, then the filler), its ``valid`` the ``[rows, width]`` mask of the slots that hold an element, and its
    ``present`` the rows' validity, 1-D bool (False: a null list, whose slots are all empty; an empty list is True
    with no slot), or None where no list is null, as polars and Arrow tell a null list from an empty one."""

    type: ColumnType
    values: Sharded
    valid: Sharded | None = None
    present: Sharded | None = None

    def __len__(self) -> int:
        return self.values.shape[0]

    @property
    def nullable(self) -> bool:
        """Whether the column may hold a null: a validity mask, or for a list column a ``present`` (null lists)."""
        return self.present is not None if self.type.inner is not None else self.valid is not None


def column_arrays(column: Column | ResidentColumn) -> tuple[Any, ...]:
    """A column's arrays as jobs take them, in order: its values, its validity (a list column's slot mask) where it
    has one, a list column's ``present`` where it has one."""
    return tuple(a for a in (column.values, column.valid, column.present) if a is not None)


def refilled(column: ResidentColumn, parts: Iterator[Sharded]) -> ResidentColumn:
    """``column`` made of the next arrays of ``parts`` (a job's outputs over :func:`column_arrays`, one each it has)."""
    values = next(parts)
    valid = next(parts) if column.valid is not None else None
    return ResidentColumn(column.type, values, valid, next(parts) if column.present is not None else None)


def padded(column: Column) -> Column:
    """A list column's rows as ``[rows, width]`` values (each list, then the filler), the mask of the slots that
    hold an element, ``width`` the longest list's length (at least 1), and the rows' validity where a list is null
    (its slots empty): a list column as it lives on the workers.

    Example:
        >>> lists = np.empty(3, object)
        >>> lists[:] = [np.array([3, 1]), np.array([], np.int64), None]
        >>> valid = np.array([True, True, False])
        >>> form = padded(Column(ColumnType("list<int64>", np.dtype(object)), lists, valid))
        >>> form.values.tolist(), form.valid.tolist(), form.present.tolist()
        ([[3, 1], [0, 0], [0, 0]], [[True, True], [False, False], [False, False]], [True, True, False])
    """
    inner = column.type.inner
    assert inner is not None
    present = column.valid
    lengths = [0 if present is not None and not present[i] else len(v) for i, v in enumerate(column.values)]
    width = max([1, *lengths])
    values = np.full((len(lengths), width), "" if inner == STRING else 0, inner.storage)
    slots = np.zeros((len(lengths), width), bool)
    for i, (row, n) in enumerate(zip(column.values, lengths, strict=True)):
        if n:
            values[i, :n], slots[i, :n] = row, True
    return Column(column.type, values, slots, None if present is None else np.asarray(present, bool))


def unpadded(
    type_: ColumnType, values: np.ndarray[Any, Any], slots: np.ndarray[Any, Any], present: np.ndarray[Any, Any] | None
) -> Column:
    """The list column of fetched ``[rows, width]`` ``values``, their slot mask and the rows' validity (None: no
    null list; see :func:`padded`); strings fetched as ``bytes`` come back as ``str``, a null list as None."""
    inner = type_.inner
    assert inner is not None
    lists: np.ndarray[Any, Any] = np.empty(len(values), object)
    for i, (row, kept) in enumerate(zip(values, slots, strict=True)):
        row = row[kept]
        lists[i] = (
            np.array([v.decode("utf-8") if isinstance(v, bytes) else v for v in row.tolist()], object)
            if inner == STRING
            else row.astype(inner.storage)
        )
    return made(type_, lists, present)


def no_lists(columns: Mapping[str, Column | ResidentColumn], names: Sequence[str], method: str, which: str, fix: str) -> None:
    """Refuse a list column (a ``top_k``'s, a function's) among ``names``, where ``method`` takes one value a row.

    Raises:
        TypeError: naming the column, its type, and ``fix``.
    """
    for name in names:
        if columns[name].type.inner is not None:
            raise TypeError(
                f"{method}: {which}column {name!r}, a list column ({columns[name].type.name}), which "
                f"{method} does not take yet: it takes columns of one value a row{fix}"
            )


def travelling(column: Column) -> Column:
    """A client column as it travels beside a resident table: a list column as its ``[rows, width]`` values, slot
    mask and rows' validity (:func:`padded`), any other as it is."""
    return column if column.type.inner is None else padded(column)


def made(type_: ColumnType, values: np.ndarray[Any, Any], valid: np.ndarray[Any, Any] | None) -> Column:
    """A column of ``values`` with nulls where ``valid`` is False: the mask is dropped where nothing is null, and
    each null's slot holds the canonical filler."""
    values = np.asarray(values, dtype=type_.storage)
    if valid is None or bool(np.all(valid)):
        return Column(type_, values, None)
    valid = np.asarray(valid, dtype=bool)
    values = values.copy()
    if type_.inner is not None:  # a null list: an empty list in its slot
        for i in np.flatnonzero(~valid).tolist():
            values[i] = np.zeros(0, type_.inner.storage)
    else:
        values[~valid] = "" if type_ == STRING else 0
    return Column(type_, values, valid)


def placed(columns: Mapping[str, Column], keep_source: bool, place: dict[str, Any]) -> dict[str, ResidentColumn]:
    """Each column's values and validity scattered (``place``: the scatter's options), all on the partition and
    devices of the first: the columns of a resident table (a list column :func:`padded`)."""
    out: dict[str, ResidentColumn] = {}
    sent: list[Sharded] = []
    try:
        for name, c in columns.items():
            host = travelling(c)
            values = scatter_array(host.values, keep_source=keep_source, **place)
            sent.append(values)
            place.update(sizes=list(values.plan.sizes), devices=[s.device for s in values.plan.shards])
            valid = present = None
            if host.valid is not None:
                valid = scatter_array(host.valid, keep_source=keep_source, **place)
                sent.append(valid)
            if host.present is not None:
                present = scatter_array(host.present, keep_source=keep_source, **place)
                sent.append(present)
            out[name] = ResidentColumn(c.type, values, valid, present)
    except BaseException:
        delete_all(sent)
        raise
    return out


def _nulls(*valid: tf.Tensor) -> tf.Tensor:
    """A shard's count of nulls in each validity column (the map of :data:`_NULLS`)."""
    return tf.stack([tf.reduce_sum(tf.cast(tf.logical_not(v), tf.int64)) for v in valid])


_NULLS: MapReduce[Any] = MapReduce(_nulls, SUM, name="table_nulls")
"""The nulls of each validity column, summed over the shards: one whole-input run."""


def unmasked(columns: Mapping[str, ResidentColumn], options: Mapping[str, Any]) -> dict[str, ResidentColumn]:
    """``columns``, each validity that holds no null dropped (and freed): one run over the validity columns (none
    where there is none, or no row), so a resident table's schema says "nullable" where the client's would. A table
    made on the workers (a scan) knows its nulls only so."""
    masked = [name for name, c in columns.items() if c.nullable and c.type.inner is None]
    if not masked:
        return dict(columns)
    rows = len(next(iter(columns.values())))
    run = {k: options[k] for k in ("cluster", "timeout", "retries") if k in options}
    counts = np.asarray(_NULLS.run(tuple(columns[n].valid for n in masked), **run)) if rows else np.zeros(len(masked))
    out = dict(columns)
    full = [name for name, count in zip(masked, counts.reshape(-1).tolist(), strict=True) if count == 0]
    delete_all([v for v in (columns[n].valid for n in full) if v is not None])
    for name in full:
        out[name] = ResidentColumn(columns[name].type, columns[name].values, None)
    return out
