"""List columns as keys, on real workers: ``unique``, ``group_by(...).agg`` and ``sort`` of a client table and of a
resident table (an empty shard among its shards; its group-by kept on the workers too) with a list column among the
keys, equal to polars' (pandas has
no list keys): the whole list compared, equal lists one group, lists ordered element by element with a shorter
prefix first, a null list a group of its own, last (or first with ``nulls_last=False``); empty lists, unicode, an
empty string in a list, negative numbers and floats."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

import tfmapreduce as tmr
from tfmapreduce._table.column import made
from tfmapreduce._table.schema import ColumnType
from tfmapreduce._table.table import Table

DATA: dict[str, list[Any]] = {
    "l": [[2, 1], [], None, [2], [2, 1], [], None, [1, 5, 0], [-2]],
    "s": [["é", "a"], ["日本"], [], None, ["é", "a"], ["é"], [""], ["é", "a\0"], ["é"]],
    "f": [[0.5, -1.0], [], None, [0.5], [0.5, -1.0], [-0.0], [0.0], None, [0.5]],
    "k": [1, None, 1, 2, 1, 1, None, 3, 2],
    "x": [1.0, 2.0, 3.0, None, 5.0, 6.0, 7.0, 8.0, 9.0],
}
SIZES = [4, 0, 5]
"""An empty shard between two others."""


def _lists(kind: str, inner: Any, rows: list[Any]) -> Any:
    values = np.empty(len(rows), object)
    values[:] = [np.zeros(0, inner) if r is None else np.array(r, inner) for r in rows]
    return made(ColumnType(f"list<{kind}>", np.dtype(object)), values, np.array([r is not None for r in rows]))


def _scalars(dtype: Any, rows: list[Any]) -> Any:
    values = np.array([0 if r is None else r for r in rows], dtype)
    return made(ColumnType.of(np.dtype(dtype)), values, np.array([r is not None for r in rows]))


def _table() -> Table:
    return Table(
        {
            "l": _lists("int64", np.int64, DATA["l"]),
            "s": _lists("string", object, DATA["s"]),
            "f": _lists("float64", np.float64, DATA["f"]),
            "k": _scalars(np.int64, DATA["k"]),
            "x": _scalars(np.float64, DATA["x"]),
        }
    )


def _rows(table: Any) -> list[tuple[Any, ...]]:
    """A result's rows as Python values (a list a list, a null None)."""
    columns = [[None if v is None or v is np.ma.masked else v for v in c.tolist()] for c in table.to_dict().values()]
    return [tuple(list(v) if isinstance(v, np.ndarray) else v for v in row) for row in zip(*columns, strict=True)]


def _want(frame: pl.DataFrame) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in frame.rows()]


@pytest.mark.parametrize("resident", [False, True], ids=["client", "resident"])
def test_unique_and_group_by_take_list_keys_as_polars(cluster: tmr.LocalCluster, resident: bool) -> None:
    frame = pl.DataFrame(DATA)
    t = _table()
    with tmr.scatter(t, cluster=cluster, sizes=SIZES) as r:
        source: Any = r if resident else t
        run: dict[str, Any] = {} if resident else {"cluster": cluster, "sizes": SIZES}
        got = source.group_by(["l", "k", "s", "f"]).agg(n=("*", "count"), total=("x", "sum"), **run)
        some = pl.col("x").count() > 0  # SQL's rule: a group with no value sums to null
        want = frame.group_by(["l", "k", "s", "f"]).agg(n=pl.len().cast(pl.Int64), total=pl.when(some).then(pl.col("x").sum()))
        assert _rows(got) == _want(want.sort(["l", "k", "s", "f"], nulls_last=True))
        distinct = source.unique(["s", "l", "f"], **({} if resident else {"cluster": cluster}))
        got_rows = _rows(distinct.collect() if resident else distinct)
        assert got_rows == _want(frame.select("s", "l", "f").unique().sort(["s", "l", "f"], nulls_last=True))
        if resident:
            distinct.delete()
            with r.group_by(["l", "k", "s", "f"]).agg(n=("*", "count"), total=("x", "sum"), resident=True) as kept:
                assert _rows(kept.collect()) == _want(want.sort(["l", "k", "s", "f"], nulls_last=True))  # kept there
            with (
                r.filter(lambda rows: rows["k"] > 5) as none,
                none.group_by(["l", "k"]).agg(n=("*", "count"), resident=True) as e,
            ):
                assert (len(e), str(e.schema)) == (0, "l: list<int64> (nullable)\nk: int64\nn: int64")


@pytest.mark.parametrize("resident", [False, True], ids=["client", "resident"])
def test_sort_by_a_list_column_as_polars(cluster: tmr.LocalCluster, resident: bool) -> None:
    frame = pl.DataFrame(DATA).with_row_index("i")
    t = Table({"i": _scalars(np.int64, list(range(len(DATA["k"])))), **{n: _table().column(n) for n in DATA}})
    with tmr.scatter(t, cluster=cluster, sizes=SIZES) as r:
        by, down, last = ["s", "l"], [True, False], [False, True]
        if resident:
            with r.sort(by, descending=down, nulls_last=last) as s:
                got = _rows(s.collect())
        else:
            got = _rows(t.sort(by, descending=down, nulls_last=last, cluster=cluster))
    want = frame.sort(by, descending=down, nulls_last=last, maintain_order=True)
    assert [row[0] for row in got] == want["i"].to_list()
