"""``tmr.table`` and ``tmr.Table``: an ordered set of named, typed, nullable columns of equal length, on the client."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from typing_extensions import Unpack

from .._options import Options
from .aggregate import Aggregate, aggregate
from .column import Column
from .convert import from_numpy, from_series
from .maps import TableRows, computed, kept
from .schema import Field, Schema, check_name


class Table:
    """Named, typed columns of equal length (see [`table`][tfmapreduce.table]); operations return new tables.

    Examples:
        >>> t = tmr.table({"city": np.array(["Oslo", "Rome", "Oslo"]), "n": np.array([1, 2, 3])})
        >>> len(t), t.columns
        (3, ('city', 'n'))
        >>> t.group_by("city").agg(total=("n", "sum"), cluster=cluster).to_dict()["total"]
        array([4, 2])
    """

    def __init__(self, columns: Mapping[str, Column]) -> None:
        lengths = {name: len(c) for name, c in columns.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"table: every column must have the same length, got {lengths}; pass columns of one length")
        self._columns = dict(columns)

    @property
    def columns(self) -> tuple[str, ...]:
        """The column names, in order."""
        return tuple(self._columns)

    @property
    def schema(self) -> Schema:
        """Each column's name, type and whether it holds nulls (a frozen value)."""
        return Schema(tuple(Field(name, c.type, c.nullable) for name, c in self._columns.items()))

    def column(self, name: str) -> Column:
        """The column ``name`` (its type, storage values and validity mask)."""
        return self._columns[check_name(name, self.columns, "column")]

    def __len__(self) -> int:
        return len(next(iter(self._columns.values()))) if self._columns else 0

    def to_dict(self) -> dict[str, np.ndarray[Any, Any]]:
        """``{name: numpy array}``: strings ``object`` arrays of ``str`` (None for a null), dates ``datetime64[D]`` and
        timestamps ``datetime64[unit]`` (NaT for a null), numbers and bool their dtype (``np.ma.MaskedArray`` with nulls)."""
        return {name: c.to_numpy() for name, c in self._columns.items()}

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame`` with the same names and order: nullable ints and bools as pandas' ``Int64``,
        ``boolean``... dtypes, floats with NaN for a null, strings ``object`` (None), dates ``object`` of
        ``datetime.date``, timestamps ``datetime64[unit]`` (NaT) — as ``pyarrow.Table.to_pandas`` gives them."""
        import pandas as pd  # type: ignore[import-untyped]  # optional; no stubs installed

        return pd.DataFrame({name: c.to_pandas(name) for name, c in self._columns.items()}, columns=list(self.columns))

    def select(self, names: Sequence[str]) -> Table:
        """The columns ``names``, in that order.

        Examples:
            >>> tmr.table({"a": np.array([1]), "b": np.array([2.0])}).select(["b"]).columns
            ('b',)
        """
        if isinstance(names, str):
            names = [names]
        return Table({n: self._columns[check_name(n, self.columns, "select")] for n in names})

    def filter(self, fn: Callable[[TableRows], Any], /, **options: Unpack[Options]) -> Table:
        """The rows for which ``fn`` is True, in order, from one map-only run on the workers (eager).

        ``fn(rows)`` gets a batch of rows as ``{name: tensor}`` (strings ``tf.string``, dates int32 days since
        1970-01-01, timestamps int64 counts of their unit; a null's slot holds 0, ``""`` or day 0, and
        ``rows.valid[name]`` says which are not null) and returns one bool a row.

        Examples:
            >>> t = tmr.table({"city": np.array(["Oslo", "Rome"]), "n": np.array([1, 2])})
            >>> t.filter(lambda rows: rows["n"] > 1, cluster=cluster).to_dict()["city"]
            array(['Rome'], dtype=object)
        """
        if not self._columns:
            return self
        mask = kept(self._columns, fn, options)
        return Table({n: c.take(mask) for n, c in self._columns.items()})

    def with_columns(self, fn: Callable[[TableRows], Any], /, **options: Unpack[Options]) -> Table:
        """The table with the columns ``fn`` returns added (or replacing those of the same names), from one map-only
        run on the workers (eager).

        ``fn(rows)`` gets the rows as [`filter`][tfmapreduce.Table.filter]'s does and returns a dict
        ``{name: 1-D tensor}``, one value a row: numbers, bool or ``tf.string`` (text, UTF-8). New columns hold no null.

        Examples:
            >>> t = tmr.table({"n": np.array([1, 2])})
            >>> t.with_columns(lambda rows: {"twice": rows["n"] * 2}, cluster=cluster).to_dict()["twice"]
            array([2, 4])
        """
        if not self._columns:
            raise ValueError("with_columns: the table has no columns to compute from; build it with tmr.table({...})")
        return Table({**self._columns, **computed(self._columns, fn, options)})

    def group_by(self, keys: str | Sequence[str]) -> GroupBy:
        """The rows grouped by the key columns ``keys`` (any types; a null is a group of its own, as SQL's GROUP BY
        and pandas' ``dropna=False``): call [`agg`][tfmapreduce.GroupBy.agg] on it."""
        names = [keys] if isinstance(keys, str) else list(keys)
        if not names:
            raise ValueError(
                "group_by: expected at least one key column, got none; use table.agg(...) for whole-table aggregates"
            )
        return GroupBy(self, tuple(check_name(k, self.columns, "group_by") for k in names))

    def agg(self, **aggregates: Any) -> Table:
        """Aggregates of the whole table, one row: ``t.agg(total=("x", "sum"), rows=("*", "count"), cluster=c)``.

        The same aggregates and run options as [`GroupBy.agg`][tfmapreduce.GroupBy.agg]; one keyed run whose only
        key is the whole table. A table with no rows gives counts 0 and nulls (as SQL does).
        """
        return GroupBy(self, ()).agg(**aggregates)

    def __repr__(self) -> str:
        head = Table({n: c.take(np.arange(min(len(self), 5))) for n, c in self._columns.items()})
        rows = [
            ", ".join(f"{n}={_show(v)}" for n, v in zip(head.columns, values, strict=True))
            for values in zip(*head.to_dict().values(), strict=False)
        ]
        more = [f"  ... {len(self) - 5} more rows"] if len(self) > 5 else []
        fields = ", ".join(str(f) for f in self.schema.fields)
        return "\n".join([f"Table({len(self)} rows: {fields})", *(f"  {r}" for r in rows), *more])


def _show(value: Any) -> str:
    """One value as ``repr`` shows it: ``null``, a date as ``2024-01-02``, a number or a string as Python's ``repr``."""
    if value is None or value is np.ma.masked or (isinstance(value, np.datetime64) and np.isnat(value)):
        return "null"
    if isinstance(value, np.datetime64):
        return str(value)
    return repr(value.item() if isinstance(value, np.generic) else value)


_OPTIONS = Options.__required_keys__ | Options.__optional_keys__
"""The run options `agg` takes beside its aggregates (so no aggregate may take their names)."""


class GroupBy:
    """A table's rows grouped by key columns; [`agg`][tfmapreduce.GroupBy.agg] computes aggregates per group."""

    def __init__(self, table: Table, keys: tuple[str, ...]) -> None:
        self.table = table
        self.keys = keys

    def agg(self, **aggregates: Any) -> Table:
        """One row per group: its key columns, then ``output=(column, op)`` for each aggregate, in one keyed run.

        ``op`` is ``"sum"``, ``"mean"``, ``"min"``, ``"max"`` or ``"count"`` (non-null values); ``("*", "count")``
        counts rows. Nulls are skipped; a group with no value gives null (SQL's rule). The other keywords are the
        run's options (``cluster=``, ``sizes=``, ``reducers=``, ...). Groups come sorted by their keys, nulls last.
        Runs at once (eager) and returns a [`Table`][tfmapreduce.Table].

        Examples:
            >>> t = tmr.table({"k": np.array(["a", "b", "a"]), "x": np.array([1.0, 2.0, 4.0])})
            >>> t.group_by("k").agg(avg=("x", "mean"), n=("*", "count"), cluster=cluster).to_dict()["avg"]
            array([2.5, 2. ])
        """
        options = {k: aggregates.pop(k) for k in list(aggregates) if k in _OPTIONS}
        if not aggregates:
            raise ValueError("agg: expected at least one aggregate, e.g. agg(total=('x', 'sum')); got none")
        parsed = [Aggregate.parse(out, spec, self.table.columns) for out, spec in aggregates.items()]
        clash = [a.output for a in parsed if a.output in self.keys]
        if clash:
            raise ValueError(f"agg: {clash[0]}= is also a key column; name the aggregate otherwise, e.g. {clash[0]}_agg=")
        columns = {n: self.table.column(n) for n in dict.fromkeys([*self.keys, *(a.column for a in parsed if a.column != "*")])}
        if not columns:  # ('*', 'count') alone, without keys: any column gives the rows
            columns = {n: self.table.column(n) for n in self.table.columns[:1]}
        return Table(aggregate(columns, self.keys, parsed, options))


def table(data: Any, /) -> Table:
    """A [`Table`][tfmapreduce.Table] from a dict of 1-D numpy arrays (or lists) or a pandas ``DataFrame``.

    Column types: bool, signed and unsigned ints, float16/32/64, strings (``str`` arrays, or ``object`` arrays of
    ``str``), dates (``datetime64[D]``, or ``datetime.date`` objects), timestamps (``datetime64[s|ms|us|ns]``).
    Nulls: None, NaT and ``np.ma`` masks in arrays; in a DataFrame also NaN (in float columns too) and ``pd.NA``, as
    ``pyarrow.Table.from_pandas`` reads them. A NaN in a numpy float array is a value, not a null.

    Examples:
        >>> t = tmr.table({"d": np.array(["2024-01-02", "NaT"], "datetime64[D]"), "s": np.array(["é", None], object)})
        >>> print(t.schema)
        d: date (nullable)
        s: string (nullable)

    Raises:
        TypeError: not a dict or DataFrame, a column of a type no column stores (the message names the column).
        ValueError: columns of different lengths.
    """
    if type(data).__name__ == "DataFrame" and hasattr(data, "columns"):
        names = [str(c) for c in data.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"table: the DataFrame's column names repeat ({names}); rename them first")
        return Table({str(c): from_series(str(c), data[c]) for c in data.columns})
    if not isinstance(data, Mapping):
        raise TypeError(
            f"table: expected a dict of 1-D arrays or a pandas DataFrame, got {type(data).__name__}; e.g. tmr.table({{'x': np.arange(3)}})"
        )
    for name in data:
        if not isinstance(name, str):
            raise TypeError(f"table: column names must be str, got {type(name).__name__} {name!r}")
    return Table({name: from_numpy(name, values) for name, values in data.items()})
