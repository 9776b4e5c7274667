"""Small steps done on the client (``client_steps``): new columns, a filter and a sort of at most ``CLIENT_ROWS`` rows
cost no run, after a group-by or not. The same answer as DuckDB (string keys with nulls and unicode, a null aggregate,
nulls first in the sort)."""

from __future__ import annotations

import gc
import logging
import weakref

import duckdb
import numpy as np
import pandas as pd
import pytest

import tfmapreduce as tmr
from tfmapreduce import col
from tfmapreduce._query import client_steps, rowwise

LINES = pd.DataFrame(
    {
        "k": ["birne", "äpfel ✓", None, "三", "birne", "äpfel ✓", "kiwi", "三"],
        "v": pd.array([1, 2, 3, None, 5, 6, 7, None], dtype="Int64"),
    }
)
SQL = """SELECT k, t, s FROM (SELECT k, sum(v) AS t, sum(v) * 2 - 9 AS s FROM l GROUP BY k)
         WHERE s <> 3 OR s IS NULL ORDER BY s DESC NULLS FIRST, k"""


def test_steps_after_the_last_group_by_run_on_the_client(cluster: tmr.LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_steps, "CLIENT_ROWS", 5)  # the 8 lines grouped in a run, the 5 groups on the client
    q = (
        tmr.lazy(LINES)
        .group_by("k")
        .agg(t=("v", "sum"))
        .with_columns(s=col("t") * 2 - 9)
        .filter((col("s") != 3) | col("s").is_null())
        .sort(["s", "k"], descending=[True, False], nulls_last=[False, True])
    )
    steps = q.explain().split("physical steps:")[1]
    assert "client: sort s desc" in steps
    assert "client: fused" in steps
    assert "1 distributed run" in steps
    with tmr.stats() as seen:
        got = q.to_pandas(cluster=cluster)
    connection = duckdb.connect()
    connection.register("l", LINES)
    want = connection.sql(SQL).df()
    assert got["k"].tolist() == want["k"].tolist()  # 三 (a null sum), äpfel ✓ 7, kiwi 5, the null key -3
    assert got["t"].astype("Float64").tolist() == want["t"].astype("Float64").tolist()
    assert got["s"].astype("Float64").tolist() == want["s"].astype("Float64").tolist()
    assert len(seen.runs) == 1  # the group-by; the new column, the filter and the sort were 2 runs more


def test_a_sort_or_filter_of_a_small_table_not_grouped_is_made_on_the_client(
    cluster: tmr.LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = pd.DataFrame({"x": [3, None, 1, 2, 5], "s": ["c", "ä", None, "b", "a"]})
    q = tmr.lazy(frame).filter(col("x") != 2).with_columns(y=col("x") * 2).sort("s", descending=True)
    with tmr.stats() as seen:
        got = q.to_pandas(cluster=cluster)
    want = duckdb.sql("SELECT *, x * 2 AS y FROM frame WHERE x <> 2 ORDER BY s DESC NULLS LAST").df()
    assert got["s"].fillna("-").tolist() == want["s"].fillna("-").tolist() == ["c", "a", "-"]  # ä's null x: no row
    assert got["y"].astype("Float64").tolist() == want["y"].astype("Float64").tolist()
    assert len(seen.runs) == 0
    assert "client: sort s desc" in q.explain()
    monkeypatch.setattr(client_steps, "CLIENT_ROWS", 3)  # fewer than the table's and the filter's estimated rows
    assert q.explain().splitlines()[-1] == "  2 distributed runs"
    with tmr.stats() as seen:
        assert q.to_pandas(cluster=cluster)["s"].fillna("-").tolist() == ["c", "a", "-"]
    assert len(seen.runs) == 1  # the filter's run kept 3 rows: the sort, estimated a run, is made on the client


PARTS = pd.DataFrame(
    {
        "name": ["birne", "äpfel ✓", None, "三", "kiwi", "pflaume"],
        "size": pd.array([1, 5, 7, None, 9, 4], dtype="Int64"),
        "maker": ["a", "ü", "b", "c", None, "ü"],
    }
)
SIDE_SQL = """SELECT maker, sum(v) AS t, count(*) AS n, sum(size) AS s
              FROM l JOIN (SELECT name AS part, maker, size FROM p WHERE maker IN ('ü', 'b', 'a', 'c')) ON k = part
              GROUP BY maker ORDER BY maker"""


def test_a_lookups_small_side_is_made_on_the_client(cluster: tmr.LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_steps, "CLIENT_ROWS", 6)  # the 6 parts on the client, the 8 lines grouped in a run
    side = tmr.lazy(PARTS).filter(col("maker").isin(["ü", "b", "a", "c"])).select(col("name").alias("part"), "maker", "size")
    q = tmr.lazy(LINES).join(side, left_on="k", right_on="part").group_by("maker")
    q = q.agg(t=("v", "sum"), n=("*", "count"), s=("size", "sum")).sort("maker")
    steps = q.explain().split("physical steps:")[1]
    assert "client: fused [filter col('maker').isin(" in steps  # the side's filter and renamed key: no run
    assert "1 distributed run" in steps
    with tmr.stats() as seen:
        got = q.to_pandas(cluster=cluster)
    connection = duckdb.connect()
    connection.register("l", LINES)
    connection.register("p", PARTS)
    want = connection.sql(SIDE_SQL).df()
    assert got["maker"].tolist() == want["maker"].tolist() == ["a", "c", "ü"]  # 三's lines: c, a null sum of v
    for name in ("t", "n", "s"):
        assert got[name].astype("Float64").tolist() == want[name].astype("Float64").tolist()
    assert len(seen.runs) == 1  # the group-by, the side looked up in its map; the side's filter was a map run more


@pytest.mark.parametrize("bad", [-1, 2.5, True, "10"])
def test_client_rows_must_be_an_int_of_at_least_0(bad: object) -> None:
    q = tmr.lazy(LINES).group_by("k").agg(t=("v", "sum"))
    with pytest.raises(ValueError, match=rf"client_rows: expected an int ≥ 0 .* or None \(10,000\), got {bad!r}; pass"):
        q.collect(client_rows=bad)
    with pytest.raises(ValueError, match=r"client_rows: expected an int ≥ 0"):
        q.explain(client_rows=bad)


def test_a_client_step_is_one_function_a_shape_traced_once_and_quietly(cluster: tmr.LocalCluster) -> None:
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    tensorflow = logging.getLogger("tensorflow")
    tensorflow.addHandler(handler)
    try:
        for size in (5, 3):  # new rows, new numbers: the same function, not traced again
            frame = pd.DataFrame({"x": range(size), "s": ["ab\0c", "é✓", "", "三四", "z"][:size]})
            for ops in range(1, 9):  # 8 shapes: 8 functions, which TensorFlow must not call retracing
                y = col("x")
                for _ in range(ops):
                    y = y * 2 + size
                got = tmr.lazy(frame).with_columns(y=y, t=col("s").substr(2, 2)).to_pandas(cluster=cluster)
                assert got["y"].tolist() == [x * 2**ops + size * (2**ops - 1) for x in frame["x"]]
                assert got["t"].tolist() == [s[1:3] for s in frame["s"]]  # a NUL inside a string kept
    finally:
        tensorflow.removeHandler(handler)
    assert [r.getMessage() for r in seen if r.levelno >= logging.WARNING] == []
    steps = [t for t in rowwise._TRACED.values() if t.on_client is not None]
    assert len(steps) >= 8
    assert all(t.on_client.experimental_get_tracing_count() == 1 for t in steps)


def test_a_collected_table_keeps_no_row_of_the_tables_it_was_taken_from(cluster: tmr.LocalCluster) -> None:
    keys = np.arange(1_000, dtype=np.int64)
    names = np.array([f"n{i}é" for i in range(1_000)], dtype=object)
    left = tmr.table({"k": keys, "name": names})
    kept = weakref.ref(left.column("name").values)
    right = tmr.table({"k": keys[::7].copy(), "w": np.arange(0, 1_000, 7) * 0.5})
    q = tmr.lazy(left).filter(col("k") >= 300).join(tmr.lazy(right), on="k")
    got = q.collect(cluster=cluster, client_rows=0)  # a filter run, then a join: row takes deferred in between
    del keys, names, left, q
    gc.collect()
    assert kept() is None  # the result's columns hold their own rows
    want = [(k, f"n{k}é", k * 0.5) for k in range(0, 1_000, 7) if k >= 300]
    assert list(zip(*(got.column(n).to_numpy().tolist() for n in ("k", "name", "w")), strict=True)) == want
