"""``tmr.ResidentTable``: a table whose columns live on the workers (``tmr.scatter(table)``, a scan with
``resident=True``, or a job over another), each a ``Sharded`` (its values, and a bool ``Sharded`` of its validity
where it may hold a null), all on one row partition.

Its jobs read the columns where they are: ``map``, ``filter`` and ``with_columns`` are map-only runs whose outputs
stay on the workers (a new resident table), ``join`` and ``sort`` (``resident_join``, ``resident_join_order``,
``resident_order``) the join and sort kinds over keys made on the workers, and ``unique`` a keyed move of the rows
then a sort (``resident_unique``), their results resident too; ``group_by(...).agg(...)`` is the eager table's keyed
run over the resident columns, whose result (one row a group) comes back as a client :class:`Table`, or with
``resident=True`` stays on the reducers (``resident_aggregate``). The functions that build those runs
(``maps.row_function``, ``aggregate``) are the eager table's own: only the inputs differ."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, overload

import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._io.resident import Sharded, delete_all, gather_all
from .._kinds.map_api import filter as filter_rows
from .._options import Options
from .column import ResidentColumn, column_arrays, made, refilled, travelling, unpadded
from .explode import explode_names, resident_exploded
from .join import HOWS, key_names
from .maps import TableRows, arrays_of, mapped, mask_check, row_function
from .order import per_column
from .resident_aggregate import kept_aggregate
from .resident_join import resident_joined
from .resident_join_order import ORDERS, joined_in_left_order
from .resident_list_keys import list_sorted
from .resident_unique import resident_distinct
from .schema import STRING, Field, Schema, check_name
from .table import GroupBy, Table

_holders: Counter[int] = Counter()
"""How many live resident tables hold each ``Sharded`` (by id): tables made by ``select`` or ``with_columns`` share
the columns they keep, and a column's shards are freed when the last table holding it is deleted."""


class ResidentTable:
    """A table whose columns live on the workers, on one row partition: made by [`scatter`][tfmapreduce.scatter] of a
    [`Table`][tfmapreduce.Table], or by a job over another resident table. Jobs over it ship no row.

    Free it with [`delete`][tfmapreduce.ResidentTable.delete] or a ``with`` block; tables made from it by ``select``
    or ``with_columns`` share its unchanged columns (no copy), which are freed with the last table holding them.

    Examples:
        >>> t = tmr.table({"city": np.array(["Oslo", "Rome", "Oslo"]), "n": np.array([1, 2, 3])})
        >>> with tmr.scatter(t, cluster=cluster) as r:
        ...     big = r.filter(lambda rows: rows["n"] > 1)
        ...     print(len(big), big.to_dict()["city"].tolist())
        ...     big.delete()
        2 ['Rome', 'Oslo']
    """

    def __init__(self, columns: Mapping[str, ResidentColumn]) -> None:
        plans = {c.values.plan.sizes for c in columns.values()}
        if len(plans) > 1:
            raise ValueError(f"ResidentTable: every column must have the same row partition, got {sorted(plans)}")
        self._columns = dict(columns)
        self._deleted = False
        for a in self._arrays():
            _holders[id(a)] += 1

    def _arrays(self) -> list[Sharded]:
        return [a for c in self._columns.values() for a in column_arrays(c)]

    @property
    def columns(self) -> tuple[str, ...]:
        """The column names, in order."""
        return tuple(self._columns)

    @property
    def schema(self) -> Schema:
        """Each column's name, type and whether it may hold nulls."""
        return Schema(tuple(Field(name, c.type, c.nullable) for name, c in self._columns.items()))

    @property
    def shards(self) -> tuple[int, ...]:
        """The rows of each shard (every column has the same partition)."""
        return next(iter(self._columns.values())).values.plan.sizes if self._columns else ()

    def column(self, name: str) -> ResidentColumn:
        """The column ``name``: its type, and its values and validity as ``Sharded`` data."""
        self._check()
        return self._columns[check_name(name, self.columns, "column")]

    def __len__(self) -> int:
        return len(next(iter(self._columns.values()))) if self._columns else 0

    def collect(self, *, timeout: float | None = None) -> Table:
        """The whole table fetched to the client (one run), with its names, types and nulls."""
        self._check()
        fetched = iter(gather_all(self._arrays(), timeout=timeout)) if self._columns else iter(())
        out = {}
        for name, c in self._columns.items():
            values = next(fetched)
            valid = next(fetched) if c.valid is not None else None
            if c.type.inner is not None and valid is not None:  # a list column: padded rows, slot mask, [rows' validity]
                out[name] = unpadded(c.type, values, valid, next(fetched) if c.present is not None else None)
            else:
                out[name] = made(c.type, _text(values) if c.type == STRING else values, valid)
        return Table(out)

    def to_dict(self, *, timeout: float | None = None) -> dict[str, np.ndarray[Any, Any]]:
        """``{name: numpy array}`` fetched to the client, as [`Table.to_dict`][tfmapreduce.Table.to_dict] gives it."""
        return self.collect(timeout=timeout).to_dict()

    def to_pandas(self, *, timeout: float | None = None) -> Any:
        """A ``pandas.DataFrame`` fetched to the client, as [`Table.to_pandas`][tfmapreduce.Table.to_pandas] gives it."""
        return self.collect(timeout=timeout).to_pandas()

    def to_arrow(self, *, timeout: float | None = None) -> Any:
        """A ``pyarrow.Table`` fetched to the client, as [`Table.to_arrow`][tfmapreduce.Table.to_arrow] gives it."""
        return self.collect(timeout=timeout).to_arrow()

    def select(self, names: str | Sequence[str]) -> ResidentTable:
        """The columns ``names``, in that order: nothing runs, the columns are shared (see the class)."""
        self._check()
        names = [names] if isinstance(names, str) else list(names)
        return ResidentTable({n: self._columns[check_name(n, self.columns, "select")] for n in names})

    def map(self, fn: Callable[[TableRows], Any], /, **options: Unpack[Options]) -> ResidentTable:
        """A new resident table of the columns ``fn`` returns, from one map-only run over this table's shards; each
        output shard stays on its input shard's device (as [`tmr.map`][tfmapreduce.map]: ``tmr.map(fn, table)`` is
        this call).

        ``fn(rows)`` gets a shard's rows as [`Table.filter`][tfmapreduce.Table.filter]'s does (``{name: tensor}``,
        ``rows.valid[name]`` each column's validity) and returns a dict ``{name: 1-D tensor}`` of any one row count
        (fewer rows, more, or as many), each column as ``with_columns``' (a list column, or one paired with its validity).

        Examples:
            >>> with tmr.scatter(tmr.table({"s": np.array(["a b", "c"])}), cluster=cluster) as r:
            ...     with tmr.map(lambda rows: {"w": tf.strings.split(rows["s"]).flat_values}, r) as words:
            ...         words.to_dict()["w"].tolist()
            ['a', 'b', 'c']
        """
        self._check()
        return ResidentTable(mapped(self._columns, fn, options))

    def filter(self, fn: Callable[[TableRows], Any], /, **options: Unpack[Options]) -> ResidentTable:
        """A new resident table of the rows for which ``fn`` is True, in order, from one map-only run: each shard
        keeps its rows on its device. ``fn`` as [`Table.filter`][tfmapreduce.Table.filter]'s."""
        self._check()
        check = mask_check("filter")
        arrays = arrays_of(self._columns)
        out = filter_rows(lambda *t: row_function(self._columns, fn, check)(*t)[0], arrays, **options)
        parts = iter(list(out) if isinstance(out, tuple) else [out])
        return ResidentTable({name: refilled(c, parts) for name, c in self._columns.items()})

    def with_columns(self, fn: Callable[[TableRows], Any], /, **options: Unpack[Options]) -> ResidentTable:
        """A new resident table: this one's columns (shared) with those ``fn`` returns added or replaced, from one
        map-only run. ``fn`` as [`Table.with_columns`][tfmapreduce.Table.with_columns]'s: one value a row.

        Raises:
            ValueError: a returned column has another number of rows than its shard (nothing is kept).
        """
        new = self.map(fn, **options)
        if new.shards != self.shards:
            shards, changed = self.shards, new.shards
            new.delete()
            raise ValueError(
                f"with_columns: fn must return one value a row (or one list), got {list(changed)} rows for shards of {list(shards)}; "
                "use map() for a table of another length"
            )
        try:
            return ResidentTable({**self._columns, **new._columns})
        finally:
            new._release()

    def group_by(self, keys: str | Sequence[str]) -> ResidentGroupBy:
        """The rows grouped by the key columns ``keys``, as [`Table.group_by`][tfmapreduce.Table.group_by]: its
        [`agg`][tfmapreduce.GroupBy.agg] runs the same keyed job over the resident columns and returns a client
        [`Table`][tfmapreduce.Table] (one row a group), or with ``resident=True`` a ``ResidentTable`` kept on the
        reducers, in the same order (sorted by the keys, nulls last)."""
        self._check()
        return ResidentGroupBy(self, GroupBy.of(self, keys).keys)

    @overload
    def agg(self, *, resident: Literal[False] = False, **aggregates: Any) -> Table: ...
    @overload
    def agg(self, *, resident: Literal[True], **aggregates: Any) -> ResidentTable: ...
    def agg(self, *, resident: bool = False, **aggregates: Any) -> Table | ResidentTable:
        """Aggregates of the whole table, one row, as [`Table.agg`][tfmapreduce.Table.agg]; with ``resident=True``
        a one-row ``ResidentTable`` on a reducer."""
        self._check()
        grouped = ResidentGroupBy(self, ())
        return grouped.agg(resident=True, **aggregates) if resident else grouped.agg(**aggregates)

    def join(
        self,
        other: ResidentTable | Table,
        /,
        on: str | Sequence[str] | None = None,
        *,
        left_on: str | Sequence[str] | None = None,
        right_on: str | Sequence[str] | None = None,
        how: str = "inner",
        suffix: str = "_right",
        maintain_order: str = "none",
        **options: Any,
    ) -> ResidentTable:
        """This table joined with ``other`` (a resident table, or a client [`Table`][tfmapreduce.Table]) on equal keys,
        on the workers: a new resident table, and no row of a resident side passes through the client.

        Arguments, SQL's null rules and the result's columns as [`Table.join`][tfmapreduce.Table.join]'s; the
        rows are those of the eager join. ``maintain_order="none"`` (the default): in no set order (as Spark's, and
        polars' default): each shard holds the rows one device joined, and with ``strategy="hash"`` every row of a key
        without nulls is on that key's reducer's shard. ``maintain_order="left"`` (polars' name): the left rows' order,
        each with its matches in the right's order, then the unmatched right rows (``how="right"``, ``"outer"``) in
        the right's order — pandas' ``merge`` order for the inner, left, semi and anti joins — at the cost of one
        resident sort of the result. The keywords are the join's run options
        (``strategy=``, ``reducers=``, ``timeout=``, ...). A client ``other`` travels for this run alone.

        Examples:
            >>> orders = tmr.table({"user": np.array([1, 2, 1]), "amount": np.array([5.0, 7.0, 9.0])})
            >>> users = tmr.table({"user": np.array([1, 3]), "name": np.array(["ann", "cy"])})
            >>> with tmr.scatter(orders, cluster=cluster) as r, r.join(users, on="user", how="anti") as lone:
            ...     lone.to_dict()["amount"].tolist()
            [7.0]
        """
        self._check()
        if isinstance(other, ResidentTable):
            other._check()
        elif not isinstance(other, Table):
            raise TypeError(
                f"join: expected a ResidentTable or a Table to join with, got {type(other).__name__}; e.g. tmr.table(df)"
            )
        if how not in HOWS:
            raise ValueError(f"join: how= must be one of {list(HOWS)}, got {how!r}")
        if maintain_order not in ORDERS:
            raise ValueError(
                f"join: maintain_order= must be one of {list(ORDERS)} ('none': no set order, the cheapest; 'left': the "
                f"left rows' order, as pandas' merge), got {maintain_order!r}"
            )
        _resident_only(options, "join")
        keys = key_names(on, left_on, right_on, self.columns, other.columns)
        right = other._columns if isinstance(other, ResidentTable) else {n: travelling(other.column(n)) for n in other.columns}
        join = joined_in_left_order if maintain_order == "left" else resident_joined
        return ResidentTable(join(self._columns, right, keys, how, suffix, dict(options)))

    def sort(
        self,
        by: str | Sequence[str],
        /,
        *,
        descending: bool | Sequence[bool] = False,
        nulls_last: bool | Sequence[bool] = True,
        limit: int | None = None,
        **options: Unpack[Options],
    ) -> ResidentTable:
        """The rows sorted by the columns ``by``, on the workers: a new resident table whose shards are the sorted
        ranges, in order, and no row passes through the client.

        Arguments and order as [`Table.sort`][tfmapreduce.Table.sort]'s (stable; nulls last unless asked; equal to
        pandas' ``sort_values(..., kind="stable")``). With ``limit=n``, the first ``n`` rows (one shard): each shard
        keeps its ``n`` first in a map-only run, and only those candidates are sorted.

        Examples:
            >>> t = tmr.table({"k": np.array(["b", "a", "b"]), "x": np.array([1, 2, 3])})
            >>> with tmr.scatter(t, cluster=cluster) as r, r.sort(["k", "x"], descending=[False, True]) as s:
            ...     s.to_dict()["x"].tolist()
            [2, 3, 1]
        """
        self._check()
        _resident_only(options, "sort")
        names = [by] if isinstance(by, str) else list(by)
        if not names:
            raise ValueError("sort: expected at least one column to sort by, e.g. r.sort(['a', 'b']); got none")
        names = [check_name(n, self.columns, "sort") for n in names]
        down, last = per_column(descending, names, "descending"), per_column(nulls_last, names, "nulls_last")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 0):
            raise ValueError(f"sort: limit= must be None or an int ≥ 0, got {limit!r}")
        if len(self) == 0:
            return self.select(list(self.columns))  # nothing runs: no row to sort
        if limit == 0:
            return self.filter(lambda rows: tf.zeros(tf.shape(rows[names[0]])[:1], tf.bool), **options)
        at_most = None if limit is None else int(limit)
        return ResidentTable(list_sorted(self._columns, names, down, last, at_most, dict(options)))

    def unique(self, columns: str | Sequence[str] | None = None, /, **options: Unpack[Options]) -> ResidentTable:
        """The distinct rows of the ``columns`` (all by default), sorted by them (nulls last), on the workers: a new
        resident table equal to [`Table.unique`][tfmapreduce.Table.unique]'s, and no row passes through the client.

        Examples:
            >>> t = tmr.table({"a": np.array([2, 1, 2]), "b": np.array(["x", "y", "x"])})
            >>> with tmr.scatter(t, cluster=cluster) as r, r.unique(["a", "b"]) as d:
            ...     d.to_dict()["a"].tolist()
            [1, 2]
        """
        self._check()
        names = list(self.columns) if columns is None else [columns] if isinstance(columns, str) else list(columns)
        if not names:
            raise ValueError("unique: expected at least one column, e.g. r.unique(['a', 'b']); got none")
        names = [check_name(n, self.columns, "unique") for n in names]
        if len(self) == 0:
            return self.select(names)  # nothing runs: no row
        return ResidentTable(resident_distinct(self._columns, names, dict(options)))

    def explode(
        self, columns: str | Sequence[str], /, *, empty_as_null: bool = True, keep_nulls: bool = True, **options: Unpack[Options]
    ) -> ResidentTable:
        """Each element of the list column(s) ``columns`` a row, as [`Table.explode`][tfmapreduce.Table.explode], on
        the workers: one map-only run, each shard exploded on its device (a small run before where several columns
        explode, to check that their lists give as many rows); a new resident table, no row through the client."""
        self._check()
        names = explode_names(self._columns, columns)
        return ResidentTable(resident_exploded(self._columns, names, empty_as_null, keep_nulls, dict(options)))

    def delete(self, *, timeout: float | None = None) -> None:
        """Free the columns' shards on the workers that no other resident table holds. Safe to call twice."""
        delete_all(self._release(), timeout=timeout)

    def _release(self) -> list[Sharded]:
        """Let go of the columns; the arrays no other table holds (to free)."""
        if self._deleted:
            return []
        self._deleted = True
        free = []
        for a in self._arrays():
            _holders[id(a)] -= 1
            if _holders[id(a)] <= 0:
                del _holders[id(a)]
                free.append(a)
        return list({id(a): a for a in free}.values())

    def _check(self) -> None:
        if self._deleted:
            raise ValueError("this ResidentTable was deleted; scatter the table again")

    def __enter__(self) -> ResidentTable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()

    def __repr__(self) -> str:
        state = "deleted" if self._deleted else f"shards of {list(self.shards)} rows"
        fields = ", ".join(str(f) for f in self.schema.fields)
        return f"ResidentTable({len(self)} rows: {fields}; {state})"


def _resident_only(options: Mapping[str, Any], method: str) -> None:
    """Refuse the run options that would not give a resident table back."""
    for name in ("resident", "return_stats", "directory"):
        if name in options:
            raise TypeError(
                f"{method}: {name}= does not apply to a ResidentTable's {method}, whose result is a ResidentTable; drop {name}="
            )


def _text(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Fetched strings (``bytes``, UTF-8) as ``str``."""
    text = np.empty(len(values), object)
    text[:] = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values.tolist()]
    return text


class ResidentGroupBy(GroupBy):
    """A resident table's rows grouped by key columns: [`agg`][tfmapreduce.GroupBy.agg] as a client table's, whose
    result may also stay on the workers (``resident=True``).

    Examples:
        >>> t = tmr.table({"k": np.array(["b", "a", "b"]), "x": np.array([1.0, 2.0, 4.0])})
        >>> with tmr.scatter(t, cluster=cluster) as r, r.group_by("k").agg(s=("x", "sum"), resident=True) as g:
        ...     g.shards != (), g.to_dict()["s"].tolist()
        (True, [2.0, 5.0])
    """

    @overload
    def agg(self, *, resident: Literal[False] = False, **aggregates: Any) -> Table: ...
    @overload
    def agg(self, *, resident: Literal[True], **aggregates: Any) -> ResidentTable: ...
    def agg(self, *, resident: bool = False, **aggregates: Any) -> Table | ResidentTable:
        """One row per group, as [`GroupBy.agg`][tfmapreduce.GroupBy.agg]; with ``resident=True`` the result is a
        ``ResidentTable`` kept on the reducers (one keyed run, a map-only run and a sort, no row through the client),
        in the client result's order; a ``("top_k", k)`` is a list column there, and a list key (or a list column's
        min or max) is one again after a unique and a join of its lists (more runs)."""
        if not resident:
            return super().agg(**aggregates)
        columns, parsed, options = self.parsed(aggregates)
        return ResidentTable(kept_aggregate(columns, self.keys, parsed, options))
