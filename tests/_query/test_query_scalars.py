"""Scalar subqueries (``query.scalar()``) run in their query's ``collect()``, in one plan: what the query and its
subquery both compute runs once (TPC-H Q11's shape), the answer equal to DuckDB's and to the subquery collected
first; the value is a literal of the nodes that read it (a run input: new values compile nothing)."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

import tfmapreduce as tmr
from tfmapreduce import col
from tfmapreduce._query import client_steps
from tfmapreduce._query.execute import execute, physical
from tfmapreduce._query.rules import RULES, optimize, share

SUPPLY = pd.DataFrame(
    {
        "part": pd.array([1, 2, 1, 3, None, 2, 4, 3, 5], dtype="Int64"),
        "supplier": np.array([10, 10, 11, 12, 11, 13, 12, 14, 13]),
        "cost": [5.0, 7.5, 12.0, 3.0, 9.0, 1.25, 20.0, 4.5, 2.0],
        "qty": np.array([1, 2, 3, 1, 4, 2, 5, 7, 1], np.int32),
    }
)
SUPPLIERS = pd.DataFrame(
    {"supplier": np.array([10, 11, 12, 13, 14, 14]), "nation": ["DE", "DE", "日本", None, "DE", "日本"]}
)  # supplier 14 twice: the nation's filter is a step of its own (a lookup evaluates filters of a unique side only)
SQL = """
WITH stock AS (SELECT part, cost * qty AS value FROM supply WHERE supplier IN (SELECT supplier FROM suppliers
               WHERE nation = 'DE'))
SELECT part, SUM(value) AS value FROM stock GROUP BY part
HAVING SUM(value) > (SELECT SUM(value) FROM stock) * 0.2 ORDER BY value DESC
"""


def stock(supply: tmr.Table, suppliers: tmr.Table) -> tmr.LazyTable:
    """Q11's join, built anew on each call: equal plans, not one object (``share`` makes them one node)."""
    german = tmr.lazy(suppliers).filter(col("nation") == "DE")
    return tmr.lazy(supply).join(german, on="supplier", how="semi").with_columns(value=col("cost") * col("qty"))


def q11(supply: tmr.Table, suppliers: tmr.Table, threshold: tmr.Expr | float | None = None) -> tmr.LazyTable:
    total = stock(supply, suppliers).agg(total=("value", "sum")).scalar() * 0.2 if threshold is None else threshold
    parts = stock(supply, suppliers).group_by("part").agg(value=("value", "sum"))
    return parts.filter(col("value") > total).sort("value", descending=True)


def test_a_scalar_subquery_runs_in_its_query_and_what_both_compute_runs_once(
    cluster: tmr.LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_steps, "CLIENT_ROWS", 6)  # the 6 suppliers and the groups small, the 9 supplies large
    supply, suppliers = tmr.table(SUPPLY), tmr.table(SUPPLIERS)
    q = q11(supply, suppliers)
    explained = q.explain().split("physical steps:")[1].splitlines()
    assert sum("found_in(table(1))" in line for line in explained) == 2  # the shared semi join: a lookup in each map
    assert sum("filter (col('nation') == 'DE')" in line for line in explained) == 1
    assert explained[-1].strip() == "2 distributed runs"  # the filter and the sort after the group-by: on the client
    assert "filter (col('value') > (scalar(0) * 0.2))" in q.explain()
    with tmr.stats() as seen:
        got = q.collect(cluster=cluster).to_pandas()
    assert len(seen.runs) == 2  # two group-bys; the suppliers' filter once, on the client (a lookup's small side),
    # its lookup in both maps; the HAVING and the sort on the client

    want = duckdb.sql(SQL, connection=_duck()).df()
    assert got["part"].tolist() == want["part"].astype("Int64").tolist()
    np.testing.assert_allclose(got["value"].to_numpy(float), want["value"].to_numpy(float), rtol=1e-12)
    assert len(got) >= 2

    with tmr.stats() as seen:  # the old way: the subquery collected first, its value a literal of the query
        value = stock(supply, suppliers).agg(total=("value", "sum")).collect(cluster=cluster).to_dict()["total"][0]
        first = q11(supply, suppliers, float(value) * 0.2).collect(cluster=cluster).to_pandas()
    assert len(seen.runs) == 2  # its filter twice, on the client
    pd.testing.assert_frame_equal(got, first)
    for rules in ((), [r for r in RULES if r is not share]):  # no rule; every rule but share: the filter twice
        plan = optimize(q.plan, rules)
        assert sum("filter (col('nation') == 'DE')" in line for line in physical(plan)) == 2
        with tmr.stats() as seen:
            off = execute(plan, {"cluster": cluster}).to_pandas()
        pd.testing.assert_frame_equal(got, off)
        assert physical(plan)[-1].strip() == f"{len(seen.runs)} distributed runs"  # as explained
        assert len(seen.runs) == (2 if rules else 0)  # no rule: the semi join and the few rows it keeps on the client


def test_a_scalar_in_new_columns_is_a_run_input_and_new_values_compile_nothing(cluster: tmr.LocalCluster) -> None:
    def q(frame: pd.DataFrame) -> tmr.LazyTable:
        supply = tmr.lazy(frame)
        return supply.with_columns(part_of=col("cost") / supply.agg(total=("cost", "sum")).scalar()).select("part", "part_of")

    got = q(SUPPLY).collect(cluster=cluster).to_pandas()
    np.testing.assert_allclose(got["part_of"].to_numpy(float), (SUPPLY.cost / SUPPLY.cost.sum()).to_numpy())
    dearer = SUPPLY.assign(cost=SUPPLY.cost * 3 + 1)
    again, runs = q(dearer).collect(cluster=cluster, stats=True)
    np.testing.assert_allclose(again.to_pandas()["part_of"].to_numpy(float), (dearer.cost / dearer.cost.sum()).to_numpy())
    assert [r.compiled for r in runs] == [False] * len(runs)

    supply = tmr.lazy(SUPPLY)  # read in a group-by's own map: the keyed run's literal
    dear = supply.filter(col("cost") > supply.agg(mean=("cost", "mean")).scalar()).group_by("supplier").agg(n=("*", "count"))
    assert "after [filter (col('cost') > scalar(0))]" in dear.explain()
    want = SUPPLY[SUPPLY.cost > SUPPLY.cost.mean()].groupby("supplier").size()
    got = dear.collect(cluster=cluster).to_pandas()
    assert dict(zip(got["supplier"], got["n"], strict=True)) == want.to_dict()


def test_a_scalar_subquery_of_other_than_one_value_is_refused_naming_it(cluster: tmr.LocalCluster) -> None:
    supply = tmr.lazy(SUPPLY)
    with pytest.raises(ValueError, match=r"scalar: a scalar subquery gives one column, this query gives \['a', 'b'\]"):
        supply.agg(a=("cost", "sum"), b=("qty", "sum")).scalar()
    none = supply.filter(col("qty") > 99).select("cost").scalar()
    with pytest.raises(ValueError, match=r"scalar\(0\): a scalar subquery must give one row of one column, got 0 rows"):
        supply.filter(col("cost") > none).collect(cluster=cluster)


def _duck() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.register("supply", SUPPLY)
    con.register("suppliers", SUPPLIERS)
    return con
