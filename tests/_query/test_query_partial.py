"""``partial_aggregates``: a group-by of a join aggregating only the right side's columns aggregates the right side
first; the plan before and after, and the same answer as pandas and as the plan without the rule (a left row that
meets nothing, duplicate left keys, null values and null keys on the right), and where it is left alone."""

from __future__ import annotations

import numpy as np
import pandas as pd

import tfmapreduce as tmr
from tfmapreduce import col
from tfmapreduce._query.execute import execute
from tfmapreduce._query.plan import show
from tfmapreduce._query.rules import RULES, optimize, partial_aggregates

PEOPLE = pd.DataFrame({"id": np.array([1, 2, 3, 4, 2]), "city": ["Oslo", "Zürich", "Oslo", "東京", "Zürich"]})
SALES = pd.DataFrame(
    {
        "who": pd.array([1, 1, 2, 2, 2, 3, None, 5, 1, 3, 2, 1], dtype="Int64"),
        "amount": [5.0, np.nan, 2.5, 1.0, 4.0, np.nan, 9.0, 8.0, 3.0, np.nan, 0.5, 7.0],
        "note": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"],
    }
)


def answer(q: tmr.LazyTable, cluster: tmr.LocalCluster, on: bool) -> pd.DataFrame:
    rules = RULES if on else [r for r in RULES if r is not partial_aggregates]
    return execute(optimize(q.plan, rules), {"cluster": cluster}).to_pandas()


def test_a_group_by_of_a_left_join_counts_the_right_side_first(cluster: tmr.LocalCluster) -> None:
    q = (
        tmr.lazy(PEOPLE)
        .join(tmr.lazy(SALES).filter(col("note") != "l"), left_on="id", right_on="who", how="left")
        .group_by("city")
        .agg(n=("amount", "count"), total=("amount", "sum"), low=("amount", "min"), high=("note", "max"))
    )
    assert show(partial_aggregates(q.plan)) == [
        "group_by [city] agg n=sum(n), total=sum(total), low=min(low), high=max(high)",
        "  with_columns n=when(col('n').is_null()).then(0).otherwise(col('n'))",
        "    join how=left on id=who",
        "      scan table of 5 rows [*]",
        "      group_by [who] agg n=count(amount), total=sum(amount), low=min(amount), high=max(note)",
        "        filter (col('note') != 'l')",
        "          scan table of 12 rows [*]",
    ]
    merged = PEOPLE.merge(SALES[SALES.note != "l"], left_on="id", right_on="who", how="left")
    groups = merged.groupby("city", sort=True)
    on, off = answer(q, cluster, True), answer(q, cluster, False)
    assert on.city.tolist() == off.city.tolist() == groups.amount.count().index.tolist()
    assert on.n.tolist() == off.n.tolist() == groups.amount.count().tolist()  # 東京 (id 4) met nothing: 0
    np.testing.assert_allclose(on.total, groups.amount.sum(min_count=1).to_numpy())
    np.testing.assert_allclose(off.total, on.total)
    np.testing.assert_array_equal(on.low, off.low)
    np.testing.assert_allclose(on.low, groups.amount.min().to_numpy())
    assert [None if pd.isna(v) else v for v in on.high] == ["j", "k", None]  # 東京: no note
    assert [None if pd.isna(v) else v for v in off.high] == ["j", "k", None]


def test_an_inner_join_by_its_key_and_where_the_rule_does_not_apply(cluster: tmr.LocalCluster) -> None:
    q = tmr.lazy(PEOPLE).join(tmr.lazy(SALES), left_on="id", right_on="who").group_by("id").agg(n=("note", "count"))
    assert show(partial_aggregates(q.plan))[:3] == [
        "group_by [id] agg n=sum(n)",
        "  join how=inner on id=who",
        "    scan table of 5 rows [*]",
    ]
    on = answer(q, cluster, True)
    assert on.to_dict("list") == answer(q, cluster, False).to_dict("list") == {"id": [1, 2, 3], "n": [4, 8, 2]}
    joined = tmr.lazy(PEOPLE).join(tmr.lazy(SALES), left_on="id", right_on="who")
    alone = [
        joined.group_by("city").agg(n=("*", "count")),  # a count of rows: the left rows count too
        joined.group_by("city").agg(n=("amount", "mean")),  # means do not combine
        joined.group_by("note").agg(n=("amount", "sum")),  # a key of the right side
        joined.group_by("city").agg(n=("id", "count")),  # a column of the left side
        tmr.lazy(SALES).join(tmr.lazy(PEOPLE), left_on="who", right_on="id").group_by("who").agg(n=("city", "count")),
    ]
    for other in alone:  # the last: the right side (5 rows) is not larger than the left (12)
        assert show(partial_aggregates(other.plan)) == show(other.plan)
