"""``explode`` in a lazy query, and the parametric aggregates (``("top_k", k)``, ``("quantile", q)``) whose list columns
it explodes: pandas' ``explode`` then DuckDB over its rows give the same table (string keys with nulls and unicode,
empty and null lists), with its steps on the workers and on the client; a filter of the other columns runs before
it, and a select after it keeps its rows."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import tfmapreduce as tmr
from tfmapreduce import col

LISTS = pa.table(
    {
        "k": ["birne", "äpfel ✓", None, "三", "birne", "", "三"],
        "l": pa.array([[1, 2], [], None, [3], [4, 5, 6], [7], [8, 8]], pa.list_(pa.int64())),
        "m": pa.array([["a", "b"], [], None, ["c"], ["d", "e", "f"], ["g"], ["h", "i"]], pa.list_(pa.string())),
        "x": [1.0, 2.0, 3.0, 4.0, 0.5, 6.0, 7.0],
    }
)


def _cells(series: pd.Series) -> list[object]:
    """A column's values, None for a null (NaN, ``pd.NA``)."""
    return [None if pd.isna(v) else v for v in series]


def _plan(q: tmr.LazyTable) -> list[str]:
    """The optimized plan's lines, the root first."""
    return [line.strip() for line in q.explain().split("optimized plan:\n")[1].split("physical steps:")[0].splitlines()]


@pytest.mark.usefixtures("steps_placed")
def test_an_exploded_query_equals_pandas_explode_then_duckdb(cluster: tmr.LocalCluster) -> None:
    q = (
        tmr.lazy(tmr.table(LISTS))
        .explode("l")
        .filter(col("x") > 1.5)
        .with_columns(y=col("l") * 2)
        .group_by("k")
        .agg(n=("*", "count"), s=("y", "sum"), c=("l", "count"))
        .sort("k")
    )
    rows = LISTS.to_pandas().explode("l")  # an empty list and a null list: one row each, its element null
    rows["l"] = rows["l"].astype("Int64")
    want = duckdb.sql(
        "SELECT k, count(*) AS n, sum(l * 2) AS s, count(l) AS c FROM rows WHERE x > 1.5 GROUP BY k ORDER BY k NULLS LAST"
    ).df()
    got = q.to_pandas(cluster=cluster)
    for name in ("k", "n", "s", "c"):
        assert _cells(got[name]) == _cells(want[name]), name


@pytest.mark.usefixtures("steps_placed")
@pytest.mark.parametrize(("empty_as_null", "keep_nulls"), [(True, True), (False, True), (True, False), (False, False)])
def test_several_columns_and_the_flags_give_the_eager_tables_rows(
    cluster: tmr.LocalCluster, empty_as_null: bool, keep_nulls: bool
) -> None:
    t = tmr.table(LISTS.slice(0, 5))  # rows 0-4: l and m of one length each row
    q = tmr.lazy(t).explode(["l", "m"], empty_as_null=empty_as_null, keep_nulls=keep_nulls).select("m", "k", "l")
    want = t.explode(["l", "m"], empty_as_null=empty_as_null, keep_nulls=keep_nulls).select(["m", "k", "l"])
    assert q.collect(cluster=cluster).to_arrow().equals(want.to_arrow())
    assert _plan(q)[1:] == [
        f"explode l, m{'' if empty_as_null else ', empty_as_null=False'}{'' if keep_nulls else ', keep_nulls=False'}",
        "scan table of 5 rows [k, l, m]",
    ]


def test_a_filter_of_the_other_columns_runs_before_the_explode_one_of_its_column_after(cluster: tmr.LocalCluster) -> None:
    t = tmr.table(LISTS)
    below = tmr.lazy(t).explode("l").filter(col("x") > 1.5).select("k")
    assert _plan(below) == [
        "fused [select k]",
        "explode l",
        "fused [filter (col('x') > 1.5)]",
        "scan table of 7 rows [k, l, x]",  # l read for the rows it gives, m not at all
    ]
    assert below.to_pandas(cluster=cluster)["k"].tolist() == t.explode("l").to_pandas().query("x > 1.5")["k"].tolist()
    above = tmr.lazy(t).explode("l").filter(col("l") > 3)
    assert _plan(above)[:2] == ["fused [filter (col('l') > 3)]", "explode l"]
    assert above.to_pandas(cluster=cluster)["l"].tolist() == [4, 5, 6, 7, 8, 8]


@pytest.mark.usefixtures("steps_placed")
def test_top_k_and_quantiles_in_a_query_then_exploded(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"g": rng.choice(["ä", "b", "三"], 500), "v": rng.permutation(500).astype(np.float64)})
    q = tmr.lazy(frame).group_by("g").agg(top=("v", ("top_k", 3)), p9=("v", ("quantile", 0.9)), med=("v", "median"))
    assert "group_by [g] agg top=top_k(v, 3), p9=quantile(v, 0.9), med=median(v)" in q.explain()
    got = q.explode("top").to_pandas(cluster=cluster)
    want = frame.sort_values("v", ascending=False).groupby("g").head(3).sort_values(["g", "v"], ascending=[True, False])
    assert got["g"].tolist() == want["g"].tolist()
    assert got["top"].tolist() == want["v"].tolist()
    groups = frame.groupby("g")["v"]
    assert np.allclose(got.drop_duplicates("g")["p9"], groups.quantile(0.9).to_numpy())
    assert np.allclose(got.drop_duplicates("g")["med"], groups.median().to_numpy())


def test_bad_calls_name_the_argument(cluster: tmr.LocalCluster) -> None:
    t = tmr.lazy(tmr.table(LISTS))
    with pytest.raises(TypeError, match="column 'x' is a float64 column, not a list column"):
        t.explode("x").collect(cluster=cluster)
    with pytest.raises(TypeError, match="explode: keep_nulls= must be True or False"):
        t.explode("l", keep_nulls="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="explode: expected a column name"):
        t.explode([])
    with pytest.raises(ValueError, match="takes a parameter; pass \\('x', \\('top_k', 3\\)\\)"):
        t.group_by("k").agg(top=("x", "top_k"))
    with pytest.raises(KeyError, match="did you mean 'x'"):
        t.group_by("k").agg(top=("xx", ("top_k", 3)))
    with pytest.raises(TypeError, match=r"agg: top= expected a pair \(column, op\)"):
        t.with_columns(lambda rows: rows).group_by("k").agg(top=3)  # type: ignore[arg-type]
