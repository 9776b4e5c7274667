"""Lazy tables on real workers: nothing runs until ``collect()``, every verb equal to pandas, runs counted per query,
``explain()`` (which runs nothing), and literals as run inputs: the same query with new values, or over new data of
the same schema, compiles nothing."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfmapreduce as tmr
from tfmapreduce import col

LINES = pd.DataFrame(
    {
        "order": np.array([1, 1, 2, 3, 3, 3, 4, 5]),
        "part": ["a", "b", "a", "c", "a", None, "b", "c"],
        "price": [10.0, 20.0, 5.0, np.nan, 7.0, 3.0, 12.0, 1.0],
        "qty": np.array([1, 2, 3, 4, 5, 6, 7, 8], np.int32),
        "ship": [
            datetime.date.fromisoformat(d) if d else None
            for d in ("2024-01-05", "2024-02-01", "2024-01-20", None, "2024-03-01", "2024-01-02", "2024-02-10", "2024-01-15")
        ],
    }
)


def query(day: datetime.date, factor: float, data: pd.DataFrame = LINES) -> tmr.LazyTable:
    return (
        tmr.lazy(data)
        .filter((col("ship") <= day) & col("part").isin(["a", "b"]))
        .with_columns(revenue=col("price") * col("qty") * factor)
        .select("part", "revenue")
    )


@pytest.mark.usefixtures("steps_on_workers")
def test_nothing_runs_until_collect_and_explain_runs_nothing(cluster: tmr.LocalCluster) -> None:
    with tmr.stats() as seen:
        q = query(datetime.date(2024, 2, 1), 0.5).group_by("part").agg(total=("revenue", "sum"))
        text = q.explain()
    assert seen.runs == []
    assert text.splitlines() == [
        "logical plan:",
        "  group_by [part] agg total=sum(revenue)",
        "    select part, revenue",
        "      with_columns revenue=((col('price') * col('qty')) * 0.5)",
        "        filter ((col('ship') <= datetime.date(2024, 2, 1)) & col('part').isin(['a', 'b']))",
        "          scan table of 8 rows [*]",
        "optimized plan:",
        "  group_by [part] agg total=sum(revenue) after [filter col('part').isin(['a', 'b']); "
        "filter (col('ship') <= datetime.date(2024, 2, 1)); with_columns revenue=((col('price') * col('qty')) * 0.5); "
        "select part, revenue]",
        "    scan table of 8 rows [part, price, qty, ship]",
        "physical steps:",
        "  client: scan table of 8 rows [part, price, qty, ship]  [~8 rows, ~199 B]",  # part: 8 + 7/8 bytes a row
        "  run 1 (keyed run): group_by [part] agg total=sum(revenue) after [filter col('part').isin(['a', 'b']); "
        "filter (col('ship') <= datetime.date(2024, 2, 1)); with_columns revenue=((col('price') * col('qty')) * 0.5); "
        "select part, revenue]  [~1 row, ~17 B]",
        "  1 distributed run",
    ]
    table, runs = q.collect(cluster=cluster, stats=True)
    assert len(runs) == 1  # as explain() said: the filters and the new column in the group-by's map
    kept = LINES[(LINES.ship <= datetime.date(2024, 2, 1)) & LINES.part.isin(["a", "b"])]
    expected = kept.assign(revenue=kept.price * kept.qty * 0.5).groupby("part").revenue.sum(min_count=1)
    assert table.to_dict()["part"].tolist() == expected.index.tolist()
    np.testing.assert_allclose(table.to_dict()["total"], expected.to_numpy())


@pytest.mark.usefixtures("steps_on_workers")
def test_new_literal_values_and_new_data_of_the_same_schema_compile_nothing(cluster: tmr.LocalCluster) -> None:
    first, runs = query(datetime.date(2024, 2, 1), 0.5).collect(cluster=cluster, stats=True)
    assert len(runs) == 1
    again, runs = query(datetime.date(2024, 3, 1), 2.0).collect(cluster=cluster, stats=True)
    assert [r.compiled for r in runs] == [False]
    assert len(again) > len(first)
    kept = LINES[(LINES.ship <= datetime.date(2024, 3, 1)) & LINES.part.isin(["a", "b"])]
    np.testing.assert_allclose(again.to_dict()["revenue"], (kept.price * kept.qty * 2.0).to_numpy())
    other = LINES.assign(price=LINES.price * 3, qty=LINES.qty[::-1].to_numpy())
    _, runs = query(datetime.date(2024, 3, 1), 2.0, other).collect(cluster=cluster, stats=True)
    assert [r.compiled for r in runs] == [False]


def test_every_verb_equals_pandas(cluster: tmr.LocalCluster) -> None:
    parts = tmr.lazy(pd.DataFrame({"part": ["a", "b", "c", "d"], "weight": [1.5, 2.0, 0.5, 9.0]}))
    q = (
        tmr.lazy(LINES)
        .join(parts, on="part")
        .with_columns(heavy=col("weight") * col("qty"))
        .sort(["heavy", "order"], descending=[True, False])
        .limit(4)
    )
    frame = LINES.dropna(subset=["part"]).merge(pd.DataFrame({"part": ["a", "b", "c", "d"], "weight": [1.5, 2.0, 0.5, 9.0]}))
    frame = frame.assign(heavy=frame.weight * frame.qty).sort_values(["heavy", "order"], ascending=[False, True], kind="stable")
    got = q.to_pandas(cluster=cluster)
    assert got["order"].tolist() == frame["order"].head(4).tolist()
    np.testing.assert_allclose(got["heavy"], frame["heavy"].head(4))
    top = tmr.lazy(LINES).sort("qty", descending=True, limit=2).collect(cluster=cluster)
    assert top.to_dict()["qty"].tolist() == [8, 7]
    assert tmr.lazy(LINES).unique("order").collect(cluster=cluster).to_dict()["order"].tolist() == [1, 2, 3, 4, 5]
    whole = tmr.lazy(LINES).filter(col("qty") > 2).agg(n=("*", "count"), most=("price", "max")).collect(cluster=cluster)
    assert whole.to_dict()["n"].tolist() == [6]
    assert whole.to_dict()["most"].tolist() == [12.0]


@pytest.mark.usefixtures("steps_on_workers")
def test_traced_functions_stay_opaque_steps_of_one_run_each(cluster: tmr.LocalCluster) -> None:
    q = (
        tmr.lazy(LINES)
        .filter(lambda rows: tf.equal(rows["qty"] % 2, 0))
        .with_columns(lambda rows: {"label": tf.strings.join([rows["part"], "!"])})
        .filter(col("price") > 4.0)
    )
    table, runs = q.collect(cluster=cluster, stats=True)
    assert len(runs) == 3
    assert table.to_dict()["label"].tolist() == ["b!"]  # even qty: b 20.0, c null, (null) 3.0, c 1.0
    assert "filter <lambda>(traced)" in q.explain()


@pytest.mark.usefixtures("steps_on_workers")
def test_a_query_used_twice_in_one_plan_is_computed_once(cluster: tmr.LocalCluster) -> None:
    cheap = tmr.lazy(LINES).filter(col("price") < 11.0)
    q = cheap.join(cheap.group_by("order").agg(lines=("*", "count")), on="order")
    table, runs = q.collect(cluster=cluster, stats=True)
    assert len(runs) == 2  # the filter, the group-by (the join: a lookup of its counts, lookup_joins)
    kept = LINES[LINES.price < 11.0]
    assert table.to_dict()["lines"].tolist() == kept.order.map(kept.order.value_counts()).tolist()


@pytest.mark.usefixtures("steps_on_workers")
def test_strings_compared_with_literals_travel_as_codes_and_new_strings_compile_nothing(cluster: tmr.LocalCluster) -> None:
    from tfmapreduce._query.coded import coded

    t = tmr.table({"mode": np.array(["MAIL", "SHIP", "AIR", "MAIL", "RAIL"], dtype=object), "x": np.arange(5)})
    rewrite, inputs = coded([col("mode").isin(["MAIL", "TRUCK"])], {"mode": t.column("mode")})
    assert inputs["mode"].values.tolist() == [1, 3, 0, 1, 2]  # codes in the sorted AIR, MAIL, RAIL, SHIP
    assert repr(rewrite(col("mode").isin(["MAIL", "TRUCK"]))) == "col('mode').isin([1, -1])"  # TRUCK: no row's code
    assert coded([col("mode").startswith("M")], {"mode": t.column("mode")})[1]["mode"] is t.column("mode")  # text read

    def ships(modes: list[str], other: str) -> tmr.LazyTable:
        kept = tmr.lazy(t).filter(col("mode").isin(modes) | (col("mode") == other))
        return kept.with_columns(ship=col("mode") != "SHIP")

    got = ships(["MAIL", "TRUCK"], "AIR").collect(cluster=cluster).to_dict()
    assert got["mode"].tolist() == ["MAIL", "AIR", "MAIL"]
    assert got["x"].tolist() == [0, 2, 3]
    assert got["ship"].tolist() == [True, True, True]
    again, runs = ships(["SHIP", "RAIL"], "NONE").collect(cluster=cluster, stats=True)
    assert again.to_dict()["mode"].tolist() == ["SHIP", "RAIL"]
    assert again.to_dict()["ship"].tolist() == [False, True]
    assert [r.compiled for r in runs] == [False]
    counted = tmr.lazy(t).filter(col("mode") != "MAIL").group_by("x").agg(n=("*", "count"))  # in a group-by's map
    assert counted.collect(cluster=cluster).to_dict()["x"].tolist() == [1, 2, 4]
