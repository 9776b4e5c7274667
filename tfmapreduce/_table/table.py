"""``tmr.Table``: an ordered set of named, typed, nullable columns of equal length, on the client (made by ``tmr.table``, ``make.py``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
from typing_extensions import Unpack

from .._options import Options
from .aggregate import Aggregate, aggregate
from .arrow import to_arrow
from .column import Column, ResidentColumn, no_lists
from .explode import explode_names, exploded
from .join import HOWS, joined, key_names
from .list_keys import coded
from .maps import TableRows, computed, kept
from .ops import LIST_OPS
from .order import per_column, sorted_rows
from .schema import Field, Schema, check_name


class Tabular(Protocol):
    """What a group-by reads of a table, on the client (``Table``) or on the workers (``ResidentTable``)."""

    @property
    def columns(self) -> tuple[str, ...]: ...

    def column(self, name: str) -> Column | ResidentColumn: ...


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

    def to_arrow(self) -> Any:
        """A ``pyarrow.Table`` with the same names and order: numbers and bool their type, strings ``string``, dates
        ``date32``, timestamps ``timestamp[unit]``, lists ``list<...>``, nulls as Arrow's (``tmr.table`` reads it back equal)."""
        return to_arrow(self._columns)

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
        ``rows.valid[name]`` says which are not null; a list column a ``tf.RaggedTensor``, a null list an empty row)
        and returns one bool a row.

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
        ``{name: 1-D tensor}``, one value a row: numbers, bool or ``tf.string`` (text, UTF-8); a ``tf.RaggedTensor``
        ``[rows, None]`` is a list column (one run more, before, finds its longest list); ``(column, valid)`` (one bool
        a row) holds a null where ``valid`` is False (a null list for a ragged one). Other new columns hold no null.

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
        return GroupBy.of(self, keys)

    def agg(self, **aggregates: Any) -> Table:
        """Aggregates of the whole table, one row: ``t.agg(total=("x", "sum"), rows=("*", "count"), cluster=c)``.

        The same aggregates and run options as [`GroupBy.agg`][tfmapreduce.GroupBy.agg]; one keyed run whose only
        key is the whole table. A table with no rows gives counts 0 and nulls (as SQL does).
        """
        return GroupBy(self, ()).agg(**aggregates)

    def join(
        self,
        other: Table,
        /,
        on: str | Sequence[str] | None = None,
        *,
        left_on: str | Sequence[str] | None = None,
        right_on: str | Sequence[str] | None = None,
        how: str = "inner",
        suffix: str = "_right",
        **options: Any,
    ) -> Table:
        """This table joined with ``other`` on equal keys of one or several columns, in one distributed run (eager).

        ``on=`` names the key columns of both sides (``left_on=``/``right_on=`` where their names differ); keys of
        any types, the same on both sides (integers of two types meet as int64, floats as float64; lists match
        element by element). SQL's rules: a row whose key holds a null matches no row, in every ``how``. ``how``:
        ``"inner"``, ``"left"``, ``"right"``, ``"outer"`` (every matching pair of rows, and the unmatched rows of the
        side(s) kept, nulls for the other's columns), ``"semi"`` (the left rows with a match, once each, the left's
        columns) or ``"anti"`` (the others; these two make no run: the keys are looked up on the client).

        The result has the key columns once, under the left's names (each row's key from the side it has), the
        left's other columns, then the right's; a right column whose name the result already has takes ``suffix``.
        Rows come in the left's order (for each left row, its matches in the right's order), then the unmatched right
        rows in the right's order; ``how="right"`` orders by the right side first. The other keywords are the join's
        run options (``cluster=``, ``strategy=``, ``reducers=``, ...; see [`join`][tfmapreduce.join]); ``sizes=``
        counts the rows that travel (those of a key without null: the left's, then the right's).

        Examples:
            >>> orders = tmr.table({"user": np.array([1, 2, 1]), "amount": np.array([5.0, 7.0, 9.0])})
            >>> users = tmr.table({"user": np.array([1, 3]), "name": np.array(["ann", "cy"])})
            >>> orders.join(users, on="user", how="left", cluster=cluster).to_dict()["name"].tolist()
            ['ann', None, 'ann']
        """
        if not isinstance(other, Table):
            raise TypeError(f"join: expected another Table to join with, got {type(other).__name__}; e.g. tmr.table(df)")
        if how not in HOWS:
            raise ValueError(f"join: how= must be one of {list(HOWS)}, got {how!r}")
        _eager_only(options, "join")
        keys = key_names(on, left_on, right_on, self.columns, other.columns)
        return Table(joined(self._columns, other._columns, keys, how, suffix, dict(options)))

    def sort(
        self,
        by: str | Sequence[str],
        /,
        *,
        descending: bool | Sequence[bool] = False,
        nulls_last: bool | Sequence[bool] = True,
        limit: int | None = None,
        **options: Unpack[Options],
    ) -> Table:
        """The rows sorted by the columns ``by`` (the first first), stably: rows of equal keys keep their order.

        Each column may be of any type: numbers as numbers (NaN, a value, the largest, as numpy sorts), strings by
        their UTF-8 bytes, dates and timestamps in time, lists as polars (element-wise). ``descending`` and ``nulls_last`` are one
        bool or one for each column (nulls come last, or first, whatever the direction). One distributed sort of the
        rows (range-partitioned; see [`sort_by_key`][tfmapreduce.sort_by_key]); with ``limit=n``, the first ``n``
        rows from one map-only run in which each shard keeps only its ``n`` first, so nothing sorts every row.
        Equal to pandas' ``sort_values(by, ascending=..., na_position=..., kind="stable")``.

        Examples:
            >>> t = tmr.table({"k": np.array(["b", "a", "b"]), "x": np.array([1, 2, 3])})
            >>> t.sort(["k", "x"], descending=[False, True], cluster=cluster).to_dict()["x"].tolist()
            [2, 3, 1]
            >>> t.sort("x", descending=True, limit=1, cluster=cluster).to_dict()["k"].tolist()
            ['b']
        """
        _eager_only(options, "sort")
        names = [by] if isinstance(by, str) else list(by)
        if not names:
            raise ValueError("sort: expected at least one column to sort by, e.g. t.sort(['a', 'b']); got none")
        columns = coded([self._columns[check_name(n, self.columns, "sort")] for n in names])  # a list by its rank
        down, last = per_column(descending, names, "descending"), per_column(nulls_last, names, "nulls_last")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 0):
            raise ValueError(f"sort: limit= must be None or an int ≥ 0, got {limit!r}")
        if len(self) == 0 or limit == 0:
            return self.limit(0)
        rows = sorted_rows(columns, down, last, None if limit is None else int(limit), options)
        return Table({n: c.take(rows) for n, c in self._columns.items()})

    def limit(self, n: int) -> Table:
        """The first ``n`` rows (all of them where there are fewer); on the client, nothing runs. For the first ``n``
        of a sort without sorting every row, use ``t.sort(by, limit=n)``."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"limit: expected an int ≥ 0, got {n!r}")
        return Table({name: c.take(np.arange(min(int(n), len(self)))) for name, c in self._columns.items()})

    def explode(self, columns: str | Sequence[str], /, *, empty_as_null: bool = True, keep_nulls: bool = True) -> Table:
        """Each element of the list column(s) ``columns`` a row, the other columns repeated, in order; on the client
        (nothing runs). An empty list gives one null row (``empty_as_null=False``: none, polars 2's default), a null
        list one (``keep_nulls=False``: none); several columns explode together (their lists as long). As polars'.

        Examples:
            >>> t = tmr.table({"s": np.array(["a b", ""])})
            >>> words = t.with_columns(lambda rows: {"w": tf.strings.split(rows["s"])}, cluster=cluster)
            >>> words.explode("w").to_dict()["w"].tolist()
            ['a', 'b', None]
        """
        return Table(exploded(self._columns, explode_names(self._columns, columns), empty_as_null, keep_nulls))

    def unique(self, columns: str | Sequence[str] | None = None, /, **options: Unpack[Options]) -> Table:
        """The distinct rows of the ``columns`` (all by default), sorted by them (nulls last), in one keyed run: as
        pandas' ``t[columns].drop_duplicates()`` sorted, and SQL's ``SELECT DISTINCT`` (a null equals a null here).

        Examples:
            >>> t = tmr.table({"a": np.array([2, 1, 2]), "b": np.array(["x", "y", "x"])})
            >>> t.unique(["a", "b"], cluster=cluster).to_dict()["a"].tolist()
            [1, 2]
        """
        return distinct(self, columns, dict(options))

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


def distinct(table: Tabular, columns: str | Sequence[str] | None, options: dict[str, Any]) -> Table:
    """The distinct rows of ``table``'s ``columns`` (all where None), sorted by them: one keyed run (``unique``)."""
    names = list(table.columns) if columns is None else [columns] if isinstance(columns, str) else list(columns)
    if not names:
        raise ValueError("unique: expected at least one column, e.g. t.unique(['a', 'b']); got none")
    keys = tuple(check_name(n, table.columns, "unique") for n in names)
    out = aggregate({k: table.column(k) for k in keys}, keys, [Aggregate("__rows", "*", "size")], options)
    return Table({k: out[k] for k in keys})


def _eager_only(options: Mapping[str, Any], method: str) -> None:
    """Refuse the run options that would not give a table back."""
    for name in ("resident", "return_stats"):
        if options.get(name):
            raise TypeError(f"{method}: {name}= does not apply to a table, which comes back whole to the client; drop {name}=")


_OPTIONS = Options.__required_keys__ | Options.__optional_keys__
"""The run options `agg` takes beside its aggregates (so no aggregate may take their names)."""


class GroupBy:
    """A table's rows grouped by key columns; [`agg`][tfmapreduce.GroupBy.agg] computes aggregates per group."""

    def __init__(self, table: Tabular, keys: tuple[str, ...]) -> None:
        self.table = table
        self.keys = keys

    @classmethod
    def of(cls, table: Tabular, keys: str | Sequence[str]) -> GroupBy:
        """``table``'s rows grouped by ``keys`` (checked: at least one, each a column of the table)."""
        names = [keys] if isinstance(keys, str) else list(keys)
        if not names:
            raise ValueError(
                "group_by: expected at least one key column, got none; use table.agg(...) for whole-table aggregates"
            )
        keys = tuple(check_name(k, table.columns, "group_by") for k in names)
        return cls(table, keys)

    def agg(self, **aggregates: Any) -> Table:
        """One row per group: its key columns, then ``output=(column, op)`` for each aggregate, in one keyed run.

        ``op`` is ``"sum"``, ``"mean"``, ``"min"``, ``"max"`` or ``"count"`` (non-null values); ``("*", "count")``
        counts rows; ``"median"``, ``("quantile", q)`` (numpy's "linear"), ``"count_distinct"`` (nulls excluded, as
        SQL's ``COUNT(DISTINCT)``) and ``("top_k", k)`` (a list column, largest first) see every value of a group:
        with one of them, every aggregate of the call runs in one group-reducer run. Nulls are skipped; a group with
        no value gives null (SQL's rule; 0 distinct values, an empty top-k). The other keywords are the
        run's options (``cluster=``, ``sizes=``, ``reducers=``, ...). Groups come sorted by their keys, nulls last.
        Runs at once (eager) and returns a [`Table`][tfmapreduce.Table].

        Examples:
            >>> t = tmr.table({"k": np.array(["a", "b", "a"]), "x": np.array([1.0, 2.0, 4.0])})
            >>> t.group_by("k").agg(avg=("x", "mean"), n=("*", "count"), cluster=cluster).to_dict()["avg"]
            array([2.5, 2. ])
            >>> t.group_by("k").agg(top=("x", ("top_k", 1)), mid=("x", "median"), cluster=cluster).to_dict()["mid"]
            array([2.5, 2. ])
        """
        columns, parsed, options = self.parsed(aggregates)
        return Table(aggregate(columns, self.keys, parsed, options))

    def parsed(self, aggregates: dict[str, Any]) -> tuple[dict[str, Any], list[Aggregate], dict[str, Any]]:
        """``agg``'s keywords read: the columns the run reads (keys, then aggregated), the aggregates, the run options."""
        options = {k: aggregates.pop(k) for k in list(aggregates) if k in _OPTIONS}
        if isinstance(aggregates.get("resident"), bool):
            raise TypeError(
                "agg: resident= keeps a group-by's result on the workers for a ResidentTable's group-by only; "
                "tmr.scatter(table) first (or scan it with resident=True), or drop resident="
            )
        if not aggregates:
            raise ValueError("agg: expected at least one aggregate, e.g. agg(total=('x', 'sum')); got none")
        parsed = [Aggregate.parse(out, spec, self.table.columns) for out, spec in aggregates.items()]
        clash = [a.output for a in parsed if a.output in self.keys]
        if clash:
            raise ValueError(f"agg: {clash[0]}= is also a key column; name the aggregate otherwise, e.g. {clash[0]}_agg=")
        columns = {n: self.table.column(n) for n in dict.fromkeys([*self.keys, *(a.column for a in parsed if a.column != "*")])}
        no_lists(
            columns,
            [a.column for a in parsed if a.column != "*" and a.op not in LIST_OPS],
            "agg",
            "aggregates ",
            f" (of a list column: {', '.join(sorted(LIST_OPS))}); aggregate another column, or explode it first",
        )
        if not columns:  # ('*', 'count') alone, without keys: any column gives the rows
            columns = {n: self.table.column(n) for n in self.table.columns[:1]}
        return columns, parsed, options
