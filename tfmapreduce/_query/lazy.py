"""``tmr.lazy`` and ``tmr.LazyTable``: table steps that build a logical plan; nothing runs until ``collect()``
(optimized by the rules of ``rules.py``, then run by ``execute.py``), and ``explain()`` runs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._engine.stats import RunStats, stats
from .._io.files.csv_scan import CsvScan
from .._io.files.parquet import ParquetPlan
from .._table.aggregate import Aggregate
from .._table.join import HOWS
from .._table.make import table
from .._table.table import Table
from . import client_steps
from .estimate import csv_sizes, parquet_sizes
from .execute import execute, physical
from .expr import Col, Expr, Subquery, named, wrap
from .plan import (
    Aggregated,
    Apply,
    Assign,
    CsvFiles,
    Distinct,
    Exploded,
    Joined,
    Keep,
    Limited,
    Node,
    ParquetFiles,
    Scan,
    Sorted,
    Where,
    names,
    show,
)
from .rules import optimize


def lazy(data: Any, /) -> LazyTable:
    """A [`LazyTable`][tfmapreduce.LazyTable] over a [`Table`][tfmapreduce.Table] (or what
    [`table`][tfmapreduce.table] takes: a dict of arrays, a pandas ``DataFrame``), or over files read when the query
    runs: ``tmr.lazy(tmr.plan_parquet(paths))`` (only the columns the query uses are read; the files' footers give
    ``explain()`` its estimates) or ``tmr.lazy(tmr.plan_csv(paths))`` (estimated from the files' sizes).

    Examples:
        >>> sales = tmr.lazy({"city": np.array(["Oslo", "Rome", "Oslo"]), "price": np.array([10.0, 20.0, 30.0])})
        >>> q = sales.filter(tmr.col("price") > 15).group_by("city").agg(total=("price", "sum"))
        >>> q.collect(cluster=cluster).to_dict()["total"].tolist()
        [30.0, 20.0]
    """
    if isinstance(data, ParquetPlan):
        if data.filters:
            raise ValueError(
                "lazy: a Parquet scan's filters= are the query's to place: give tmr.plan_parquet(paths) without "
                "filters and filter the lazy table instead, e.g. .filter(tmr.col('x') > 10)"
            )
        return LazyTable(ParquetFiles(data, parquet_sizes(data)))
    if isinstance(data, CsvScan):
        return LazyTable(CsvFiles(data, *csv_sizes(data)))
    return LazyTable(Scan(data if isinstance(data, Table) else table(data)))


def _names(value: str | Sequence[str], argument: str) -> tuple[str, ...]:
    items = (value,) if isinstance(value, str) else tuple(value)
    if not items or not all(isinstance(n, str) for n in items):
        raise TypeError(f"{argument}: expected a column name or a list of them, e.g. ['a', 'b']; got {value!r}")
    return items


class LazyTable:
    """A query: table steps recorded as a logical plan, optimized and run by [`collect`][tfmapreduce.LazyTable.collect].

    Filters and new columns take expressions ([`col`][tfmapreduce.col]) that the planner reads, moves and fuses, or a
    traced function of the rows (as [`Table.filter`][tfmapreduce.Table.filter]'s), which stays where it is, one run.

    Examples:
        >>> t = tmr.lazy({"k": np.array(["a", "b", "a"]), "x": np.array([1, 2, 3])})
        >>> q = t.with_columns((tmr.col("x") * 10).alias("y")).filter(tmr.col("k") == "a").select("y")
        >>> q.collect(cluster=cluster).to_dict()["y"].tolist()
        [10, 30]
        >>> print(q.explain().splitlines()[-2].strip())  # 3 rows: on the client
        client: fused [filter (col('k') == 'a'); with_columns y=(col('x') * 10); select y]  [~1 row, ~8 B]
        >>> print(q.explain(client_rows=0).splitlines()[-2].strip())  # as over a large table
        run 1 (map run): fused [filter (col('k') == 'a'); with_columns y=(col('x') * 10); select y]  [~1 row, ~8 B]
    """

    def __init__(self, plan: Node) -> None:
        self.plan = plan

    def filter(self, predicate: Expr | Callable[..., Any], /) -> LazyTable:
        """The rows where ``predicate`` is true: an expression (a null is not true), or a traced function of the rows
        returning one bool a row."""
        if isinstance(predicate, Expr):
            return LazyTable(Where(self.plan, predicate))
        if not callable(predicate):
            raise TypeError(f"filter: expected an expression (tmr.col('x') > 0) or a function of the rows, got {predicate!r}")
        return LazyTable(Apply(self.plan, "filter", predicate))

    def with_columns(self, *exprs: Expr | Callable[..., Any], **named_exprs: Any) -> LazyTable:
        """New columns (or replacing those of the same names): ``with_columns((col("x") * 2).alias("y"), z=col("x") + 1)``,
        or one traced function returning ``{name: tensor}``; a literal is a constant column."""
        if len(exprs) == 1 and not isinstance(exprs[0], Expr) and callable(exprs[0]) and not named_exprs:
            return LazyTable(Apply(self.plan, "with_columns", exprs[0]))
        columns = [named(wrap(e, "with_columns"), "with_columns") for e in exprs]
        columns += [(n, wrap(e, "with_columns")) for n, e in named_exprs.items()]
        if not columns:
            raise ValueError("with_columns: expected at least one column, e.g. with_columns(y=tmr.col('x') * 2); got none")
        return LazyTable(Assign(self.plan, tuple(columns)))

    def select(self, *columns: str | Expr | Sequence[str]) -> LazyTable:
        """The columns named (or computed: ``select("a", (col("b") * 2).alias("b2"))``), in that order."""
        flat: list[str | Expr] = []
        for c in columns:
            flat.extend([c] if isinstance(c, (str, Expr)) else c)
        if not flat:
            raise ValueError("select: expected at least one column, e.g. select('a', 'b'); got none")
        pairs = [(c, Col(c)) if isinstance(c, str) else named(c, "select") for c in flat]
        computed = tuple((n, e) for n, e in pairs if not (isinstance(e, Col) and e.name == n))
        plan = Assign(self.plan, computed) if computed else self.plan
        return LazyTable(Keep(plan, tuple(n for n, _ in pairs)))

    def join(
        self,
        other: LazyTable | Table,
        /,
        on: str | Sequence[str] | None = None,
        *,
        left_on: str | Sequence[str] | None = None,
        right_on: str | Sequence[str] | None = None,
        how: str = "inner",
        suffix: str = "_right",
    ) -> LazyTable:
        """This query joined with ``other`` as [`Table.join`][tfmapreduce.Table.join] joins (its keys, ``how``, nulls,
        names and row order)."""
        right = other if isinstance(other, LazyTable) else lazy(other)
        if how not in HOWS:
            raise ValueError(f"join: how= must be one of {list(HOWS)}, got {how!r}")
        if on is not None and (left_on is not None or right_on is not None):
            raise TypeError("join: give on= (the same names on both sides) or left_on= and right_on=, not both")
        left_keys = _names(on if on is not None else left_on or (), "join")
        right_keys = _names(on if on is not None else right_on or (), "join")
        if len(left_keys) != len(right_keys):
            raise ValueError(f"join: left_on= and right_on= must name as many columns, got {left_keys} and {right_keys}")
        return LazyTable(Joined(self.plan, right.plan, left_keys, right_keys, how, suffix))

    def group_by(self, keys: str | Sequence[str]) -> LazyGroupBy:
        """The rows grouped by ``keys``: call [`agg`][tfmapreduce.LazyGroupBy.agg] on it."""
        return LazyGroupBy(self, _names(keys, "group_by"))

    def agg(self, **aggregates: tuple[str, Any]) -> LazyTable:
        """Aggregates of the whole query, one row: ``agg(total=("x", "sum"), rows=("*", "count"))``."""
        return LazyGroupBy(self, ()).agg(**aggregates)

    def sort(
        self,
        by: str | Sequence[str],
        /,
        *,
        descending: bool | Sequence[bool] = False,
        nulls_last: bool | Sequence[bool] = True,
        limit: int | None = None,
    ) -> LazyTable:
        """The rows ordered as [`Table.sort`][tfmapreduce.Table.sort] orders them (the first ``limit`` of them)."""
        cols = _names(by, "sort")
        down = (descending,) * len(cols) if isinstance(descending, (bool, np.bool_)) else tuple(descending)
        last = (nulls_last,) * len(cols) if isinstance(nulls_last, (bool, np.bool_)) else tuple(nulls_last)
        if len(down) != len(cols) or len(last) != len(cols):
            raise TypeError(f"sort: descending= and nulls_last= must be a bool or one for each of {list(cols)}")
        return LazyTable(Sorted(self.plan, cols, tuple(map(bool, down)), tuple(map(bool, last)), limit))

    def limit(self, n: int) -> LazyTable:
        """The first ``n`` rows."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"limit: expected an int ≥ 0, got {n!r}")
        return LazyTable(Limited(self.plan, int(n)))

    def explode(self, columns: str | Sequence[str], /, *, empty_as_null: bool = True, keep_nulls: bool = True) -> LazyTable:
        """Each element of the list column(s) ``columns`` a row, the other columns repeated, as
        [`Table.explode`][tfmapreduce.Table.explode] (an empty or a null list one null row unless ``empty_as_null`` or
        ``keep_nulls`` is False); done on the client where the step's input is. A filter above it that reads none of
        the exploded columns runs before it.

        Examples:
            >>> t = tmr.lazy({"k": np.array(["a", "b", "c"]), "x": np.array([3, 1, 2])})
            >>> q = t.group_by("k").agg(top=("x", ("top_k", 1))).explode("top").filter(tmr.col("k") != "b")
            >>> q.collect(cluster=cluster).to_dict()["top"].tolist()
            [3, 2]
        """
        for flag, value in (("empty_as_null", empty_as_null), ("keep_nulls", keep_nulls)):
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"explode: {flag}= must be True or False, got {value!r}")
        return LazyTable(Exploded(self.plan, _names(columns, "explode"), bool(empty_as_null), bool(keep_nulls)))

    def unique(self, columns: str | Sequence[str] | None = None, /) -> LazyTable:
        """The distinct rows of ``columns`` (all by default), sorted by them, as [`Table.unique`][tfmapreduce.Table.unique]."""
        cols = names(self.plan) if columns is None else _names(columns, "unique")
        if cols is None:
            raise ValueError("unique: the columns come from a traced function here; name them, e.g. unique(['a', 'b'])")
        return LazyTable(Distinct(self.plan, cols))

    def scalar(self) -> Expr:
        """The one value of this one-row, one-column query, as an expression of another query (SQL's scalar
        subquery): computed in the other query's ``collect()``, in the same plan, so a step both read runs once.

        Example (TPC-H Q11): ``total = stock.agg(total=("value", "sum")).scalar()``, then
        ``stock.group_by("part").agg(value=("value", "sum")).filter(tmr.col("value") > total * 0.0001)``.

        Raises:
            ValueError: a query of other than one column (when it runs: other than one row, or a null value).
        """
        columns = names(self.plan)
        if columns is not None and len(columns) != 1:
            raise ValueError(
                f"scalar: a scalar subquery gives one column, this query gives {list(columns)}; select one, e.g. "
                ".agg(total=('x', 'sum')).scalar()"
            )
        return Subquery(self.plan)

    def collect(self, *, stats: bool = False, client_rows: int | None = None, **options: Any) -> Any:
        """The optimized plan run on the workers: a [`Table`][tfmapreduce.Table]; with ``stats=True`` the pair
        ``(table, runs)``, ``runs`` a list of each distributed run's [`RunStats`][tfmapreduce.RunStats] (its
        ``compiled`` says whether it compiled). ``options`` are the runs' options (``cluster=``, ...).

        A sort, row-wise steps, or a group-by of counts, sums, means, minima and maxima whose input holds at most
        ``client_rows`` rows (default 10,000) is done on the client, not in a run: ``client_rows=0`` runs every
        step on the workers, as over a large table."""
        table, runs = _collect(self.plan, options, _client_rows(client_rows))
        return (table, runs) if stats else table

    def to_pandas(self, **options: Any) -> Any:
        """``collect(**options).to_pandas()``."""
        return self.collect(**options).to_pandas()

    def explain(self, *, client_rows: int | None = None) -> str:
        """What ``collect(client_rows=...)`` will do, running nothing: the logical plan, the optimized plan, and the
        physical steps (one line per distributed run, with its kind, and the steps done on the client, each with its
        estimated rows and bytes: ``[~267 rows, ~2.1 KiB]``), then the number of runs."""
        optimized = optimize(self.plan)
        return "\n".join(
            [
                "logical plan:",
                *("  " + line for line in show(self.plan)),
                "optimized plan:",
                *("  " + line for line in show(optimized)),
                "physical steps:",
                *("  " + line for line in physical(optimized, _client_rows(client_rows))),
            ]
        )

    def __repr__(self) -> str:
        return "LazyTable\n" + "\n".join("  " + line for line in show(self.plan))


def _collect(plan: Node, options: dict[str, Any], client_rows: int | None) -> tuple[Table, list[RunStats]]:
    with stats() as seen:
        out = execute(optimize(plan), options, client_rows)
    for name in out.columns:  # its deferred takes made: they would keep every row of their sources alive
        _ = out.column(name).values
    return out, list(seen.runs)


def _client_rows(value: object) -> int | None:
    """``client_rows=`` checked: None, or an int ≥ 0."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError(
        f"client_rows: expected an int ≥ 0 (the most rows a small step's input holds to be done on the client) or None "
        f"({client_steps.CLIENT_ROWS:,}), got {value!r}; pass client_rows=0 to run every step on the workers"
    )


class LazyGroupBy:
    """A query's rows grouped by key columns; [`agg`][tfmapreduce.LazyGroupBy.agg] adds the step."""

    def __init__(self, query: LazyTable, keys: tuple[str, ...]) -> None:
        self.query, self.keys = query, keys

    def agg(self, **aggregates: tuple[str, Any]) -> LazyTable:
        """One row per group: the keys, then ``output=(column, op)`` as [`GroupBy.agg`][tfmapreduce.GroupBy.agg]
        computes them (``"sum"``, ``"mean"``, ``"min"``, ``"max"``, ``"count"``, ``"median"``, ``"count_distinct"``,
        ``("quantile", q)``, ``("top_k", k)``; ``("*", "count")`` counts rows)."""
        if not aggregates:
            raise ValueError("agg: expected at least one aggregate, e.g. agg(total=('x', 'sum')); got none")
        columns = names(self.query.plan)
        specs = []
        for out, spec in aggregates.items():
            known = columns if columns is not None else (spec[0],) if isinstance(spec, tuple) and spec else ()
            Aggregate.parse(out, spec, known)  # raises what the eager agg() would
            specs.append((out, spec[0], spec[1]))
        return LazyTable(Aggregated(self.query.plan, self.keys, tuple(specs)))
