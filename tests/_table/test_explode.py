"""``explode`` of list columns, on a client table and on a resident one (an empty shard among its shards), equal to
polars' ``explode`` with the same ``empty_as_null`` and ``keep_nulls``: ints, floats, strings with unicode and an
empty string, empty and null lists, null values in the other columns (a list column and a date among them, carried), one
column or several together; several whose lists give different numbers of rows, and a column that holds no lists,
refused by name."""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
import polars as pl
import pytest

import tfmapreduce as tmr
from tfmapreduce._table.column import made
from tfmapreduce._table.schema import DATE, ColumnType
from tfmapreduce._table.table import Table

DATA: dict[str, list[Any]] = {
    "l": [[2, 1], [], None, [2], [1, 5, 0], [], [-2], None, [7]],
    "s": [["é", "a"], None, None, ["日本"], ["", "b", "c"], [], ["x"], None, ["y"]],
    "f": [[0.5, -1.0], [], None, [-0.0], [1.5, 2.5, 3.5], [], [9.0], [], [1e300]],
    "k": [1, None, 1, 2, 1, 1, None, 3, 2],
    "t": ["a", "ß", None, "d", "", "f", "g", "日", None],
    "d": [datetime.date(2024, 2, 29), None, *(datetime.date(1969, 12, 31 - i) for i in range(7))],
}
SIZES = [4, 0, 5]
"""An empty shard between two others."""
SCHEMA = {"l": pl.List(pl.Int64), "s": pl.List(pl.String), "f": pl.List(pl.Float64), "k": pl.Int64, "t": pl.String, "d": pl.Date}


def _lists(kind: str, inner: Any, rows: list[Any]) -> Any:
    values = np.empty(len(rows), object)
    values[:] = [np.zeros(0, inner) if r is None else np.array(r, inner) for r in rows]
    return made(ColumnType(f"list<{kind}>", np.dtype(object)), values, np.array([r is not None for r in rows]))


def _table(data: dict[str, list[Any]]) -> Table:
    k = np.array([0 if v is None else v for v in data["k"]])
    t = np.array(["" if v is None else v for v in data["t"]], object)
    d = np.array([v is not None for v in data["d"]])
    return Table(
        {
            "l": _lists("int64", np.int64, data["l"]),
            "s": _lists("string", object, data["s"]),
            "f": _lists("float64", np.float64, data["f"]),
            "k": made(ColumnType.of(k.dtype), k, np.array([v is not None for v in data["k"]])),
            "t": made(ColumnType("string", np.dtype(object)), t, np.array([v is not None for v in data["t"]])),
            "d": made(DATE, np.array([(v or datetime.date(1970, 1, 1)).toordinal() - 719163 for v in data["d"]]), d),
        }
    )


def _rows(table: Any) -> list[tuple[Any, ...]]:
    """A result's rows as Python values (a list a list, a null None)."""
    columns = [[None if v is None or v is np.ma.masked else v for v in c.tolist()] for c in table.to_dict().values()]
    return [tuple(list(v) if isinstance(v, np.ndarray) else v for v in row) for row in zip(*columns, strict=True)]


def _exploded(source: Any, resident: bool, columns: Any, **flags: bool) -> list[tuple[Any, ...]]:
    if not resident:
        return _rows(source.explode(columns, **flags))
    with source.explode(columns, **flags) as out:
        assert out.schema[columns if isinstance(columns, str) else columns[0]].nullable == any(flags.values())
        return _rows(out.collect())


@pytest.mark.parametrize("resident", [False, True], ids=["client", "resident"])
def test_explode_is_polars_explode(cluster: tmr.LocalCluster, resident: bool) -> None:
    frame = pl.DataFrame(DATA, schema=SCHEMA)
    t = _table(DATA)
    with tmr.scatter(t, cluster=cluster, sizes=SIZES) as r:
        source = r if resident else t
        for columns, flags in [
            ("s", {"empty_as_null": True, "keep_nulls": True}),
            ("l", {"empty_as_null": False, "keep_nulls": True}),
            (["l", "s", "f"], {"empty_as_null": True, "keep_nulls": True}),
            (["f", "l"], {"empty_as_null": False, "keep_nulls": False}),
        ]:
            got = _exploded(source, resident, columns, **flags)
            assert got == [tuple(row) for row in frame.explode(columns, **flags).rows()], (columns, flags)
        empty = t.limit(0)
        assert len(empty.explode("s")) == 0
        assert empty.explode("s").schema == t.explode("s").limit(0).schema


@pytest.mark.parametrize("resident", [False, True], ids=["client", "resident"])
def test_explode_refuses_lists_that_give_different_numbers_of_rows(cluster: tmr.LocalCluster, resident: bool) -> None:
    data = {**DATA, "s": [*DATA["s"][:6], ["x", "z"], *DATA["s"][7:]]}  # row 6: 'l' [-2], 's' two elements
    with pytest.raises(Exception, match="must have matching element counts"):
        pl.DataFrame(data, schema=SCHEMA).explode(["l", "s"])
    t = _table(data)
    with tmr.scatter(t, cluster=cluster, sizes=SIZES) as r:
        source: Any = r if resident else t
        with pytest.raises(
            ValueError,
            match=r"columns \['l', 's'\] must hold lists of one length in each row.*row 6 holds 'l' 1 element\(s\), 's' 2 element",
        ):
            source.explode(["l", "s"])
        with pytest.raises(ValueError, match=r"row 1 holds 'l' an empty list, 's' a null list; explode them in separate calls"):
            source.explode(["l", "s"], empty_as_null=False)


def test_explode_refuses_a_column_that_holds_no_lists() -> None:
    t = _table(DATA)
    with pytest.raises(TypeError, match=r"explode: column 'k' is a int64 column, not a list column"):
        t.explode(["l", "k"])
    with pytest.raises(KeyError, match=r"explode: no column 'x'"):
        t.explode("x")
    with pytest.raises(ValueError, match=r"explode: each column may be named once"):
        t.explode(["l", "l"])
    with pytest.raises(ValueError, match=r"explode: expected at least one list column"):
        t.explode([])
