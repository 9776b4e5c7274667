"""Each optimizer rule on its own: the plan before and after it, and the same answer (equal to pandas) with the rule
on and off, on real workers; runs counted with the rule on and off."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfmapreduce as tmr
from tfmapreduce import col
from tfmapreduce._query.execute import execute
from tfmapreduce._query.lookups import lookup_joins
from tfmapreduce._query.plan import show
from tfmapreduce._query.rules import (
    RULES,
    Rule,
    fuse,
    into_aggregates,
    optimize,
    prune,
    push_predicates,
    semi_groups,
    share,
    sorted_groups,
    top_k,
)

ORDERS = pd.DataFrame(
    {
        "user": pd.array([1, 2, 1, 3, None, 2, 4], dtype="Int64"),
        "price": [5.0, 7.5, 12.0, 3.0, 9.0, np.nan, 20.0],
        "qty": np.array([1, 2, 3, 1, 4, 2, 5], np.int32),
        "note": ["x", "y", "z", "x", "y", "z", "x"],
    }
)
USERS = pd.DataFrame({"user": np.array([1, 2, 3, 5]), "name": ["ann", "bob", "cy", "dee"], "note": ["u", "v", "w", "x"]})


def answer(q: tmr.LazyTable, rules: Sequence[Rule], cluster: tmr.LocalCluster) -> pd.DataFrame:
    return execute(optimize(q.plan, rules), {"cluster": cluster}).to_pandas()


def without(rule: Rule) -> list[Rule]:
    return [r for r in RULES if r is not rule]


def same_with_and_without(q: tmr.LazyTable, rule: Rule, cluster: tmr.LocalCluster, expected: pd.DataFrame) -> None:
    on, off = answer(q, RULES, cluster), answer(q, without(rule), cluster)
    pd.testing.assert_frame_equal(on, off)
    pd.testing.assert_frame_equal(on.reset_index(drop=True), expected.reset_index(drop=True), check_dtype=False)


def runs(q: tmr.LazyTable, rules: Sequence[Rule], cluster: tmr.LocalCluster) -> int:
    with tmr.stats() as seen:
        execute(optimize(q.plan, rules), {"cluster": cluster})
    return len(seen.runs)


def test_predicate_pushdown_moves_filters_below_with_columns_that_do_not_define_their_columns(
    cluster: tmr.LocalCluster,
) -> None:
    q = tmr.lazy(ORDERS).with_columns(total=col("price") * col("qty")).filter((col("qty") > 1) & (col("total") > 10))
    assert show(q.plan) == [
        "filter ((col('qty') > 1) & (col('total') > 10))",
        "  with_columns total=(col('price') * col('qty'))",
        "    scan table of 7 rows [*]",
    ]
    assert show(push_predicates(q.plan)) == [
        "filter (col('total') > 10)",
        "  with_columns total=(col('price') * col('qty'))",
        "    filter (col('qty') > 1)",
        "      scan table of 7 rows [*]",
    ]
    frame = ORDERS.assign(total=ORDERS.price * ORDERS.qty)
    same_with_and_without(q, push_predicates, cluster, frame[(frame.qty > 1) & (frame.total > 10)])


def test_predicate_pushdown_moves_filters_into_the_join_side_that_owns_their_columns(cluster: tmr.LocalCluster) -> None:
    q = tmr.lazy(ORDERS).join(tmr.lazy(USERS), on="user").filter((col("price") > 4.0) & (col("name") != "cy") & (col("user") < 3))
    assert show(push_predicates(q.plan)) == [
        "join how=inner on user",
        "  filter (col('price') > 4.0)",
        "    filter (col('user') < 3)",  # a key of an inner join: both sides
        "      scan table of 7 rows [*]",
        "  filter (col('name') != 'cy')",
        "    filter (col('user') < 3)",
        "      scan table of 4 rows [*]",
    ]
    merged = ORDERS.dropna(subset=["user"]).astype({"user": np.int64}).merge(USERS, on="user", suffixes=("", "_right"))
    expected = merged[(merged.price > 4.0) & (merged.name != "cy") & (merged.user < 3)]
    same_with_and_without(q, push_predicates, cluster, expected)


def test_predicate_pushdown_keeps_a_filter_on_the_null_side_of_a_left_join_above_it(cluster: tmr.LocalCluster) -> None:
    q = tmr.lazy(ORDERS).join(tmr.lazy(USERS), on="user", how="left").filter(col("name").is_null() & (col("qty") > 1))
    assert show(push_predicates(q.plan)) == [
        "filter col('name').is_null()",
        "  join how=left on user",
        "    filter (col('qty') > 1)",
        "      scan table of 7 rows [*]",
        "    scan table of 4 rows [*]",
    ]
    assert answer(q, RULES, cluster)["qty"].tolist() == [4, 5]  # user null and user 4: no match
    same_with_and_without(q, push_predicates, cluster, answer(q, [], cluster))


def test_predicate_pushdown_moves_filters_below_a_sort(cluster: tmr.LocalCluster) -> None:
    q = tmr.lazy(ORDERS).sort("price", descending=True).filter(col("note") == "x")
    assert show(push_predicates(q.plan)) == [
        "sort price desc",
        "  filter (col('note') == 'x')",
        "    scan table of 7 rows [*]",
    ]
    expected = ORDERS[ORDERS.note == "x"].sort_values("price", ascending=False, kind="stable")
    same_with_and_without(q, push_predicates, cluster, expected)


def test_predicate_pushdown_moves_a_filter_on_group_keys_below_the_group_by(cluster: tmr.LocalCluster) -> None:
    q = tmr.lazy(ORDERS).group_by("note").agg(spent=("price", "sum")).filter((col("note") != "y") & (col("spent") > 10.0))
    assert show(push_predicates(q.plan)) == [
        "filter (col('spent') > 10.0)",  # an aggregate's value: it stays above
        "  group_by [note] agg spent=sum(price)",
        "    filter (col('note') != 'y')",
        "      scan table of 7 rows [*]",
    ]
    sums = ORDERS.groupby("note", as_index=False).agg(spent=("price", lambda s: s.sum(min_count=1)))
    same_with_and_without(q, push_predicates, cluster, sums[(sums.note != "y") & (sums.spent > 10.0)])


def test_projection_pushdown_reads_only_the_columns_used_down_to_the_source(cluster: tmr.LocalCluster) -> None:
    q = (
        tmr.lazy(ORDERS)
        .with_columns(unused=col("qty") * 2)
        .join(tmr.lazy(USERS), on="user")
        .select("price", "name", "note_right")
    )
    assert show(prune(q.plan)) == [
        "select price, name, note_right",
        "  join how=inner on user",
        "    scan table of 7 rows [user, price, note]",  # note: the right's note keeps its suffix
        "    scan table of 4 rows [*]",  # its three columns are used
    ]
    merged = ORDERS.dropna(subset=["user"]).astype({"user": np.int64}).merge(USERS, on="user", suffixes=("", "_right"))
    same_with_and_without(q, prune, cluster, merged[["price", "name", "note_right"]])


@pytest.mark.usefixtures("steps_on_workers")
def test_fusion_makes_filters_new_columns_and_selects_one_map_run(cluster: tmr.LocalCluster) -> None:
    q = (
        tmr.lazy(ORDERS)
        .filter(col("qty") >= 2)
        .with_columns(total=col("price") * col("qty"))
        .select("note", "total")
        .group_by("note")
        .agg(total=("total", "sum"))
    )
    assert show(fuse(q.plan)) == [
        "group_by [note] agg total=sum(total)",
        "  fused [filter (col('qty') >= 2); with_columns total=(col('price') * col('qty')); select note, total]",
        "    scan table of 7 rows [*]",
    ]
    assert runs(q, without(into_aggregates), cluster) == 2  # one map run, one keyed run
    assert runs(q, [r for r in RULES if r not in (fuse, into_aggregates)], cluster) == 3  # filter, with_columns, group-by
    kept = ORDERS[ORDERS.qty >= 2].assign(total=lambda f: f.price * f.qty)
    expected = kept.groupby("note", as_index=False).agg(total=("total", lambda s: s.sum(min_count=1)))
    same_with_and_without(q, fuse, cluster, expected)


@pytest.mark.usefixtures("steps_on_workers")
def test_a_fused_step_read_by_a_group_by_alone_runs_in_its_map(cluster: tmr.LocalCluster) -> None:
    def q(least: int) -> tmr.LazyTable:
        priced = tmr.lazy(ORDERS).filter(col("qty") >= least).with_columns(total=col("price") * col("qty"))
        return priced.group_by(["note", "user"]).agg(total=("total", "sum"), n=("*", "count"), mean=("price", "mean"))

    assert show(optimize(q(2).plan))[0].endswith(
        "after [filter (col('qty') >= 2); with_columns total=(col('price') * col('qty'))]"
    )
    assert runs(q(2), RULES, cluster) == 1  # one keyed run: the filter and the product in its map
    kept = ORDERS[ORDERS.qty >= 2].assign(total=lambda f: f.price * f.qty)
    expected = kept.groupby(["note", "user"], as_index=False, dropna=False).agg(
        total=("total", lambda s: s.sum(min_count=1)), n=("qty", "size"), mean=("price", "mean")
    )
    same_with_and_without(q(2), into_aggregates, cluster, expected.sort_values(["note", "user"], na_position="last"))
    with tmr.stats() as seen:
        none = answer(q(99), RULES, cluster)  # a new literal: no compile; no row kept: no group
    assert len(none) == 0
    assert not any(r.compiled for r in seen.runs)
    whole = tmr.lazy(ORDERS).filter(col("qty") >= 99).agg(n=("*", "count"), top=("price", "max"))
    out = answer(whole, RULES, cluster)
    assert out["n"].tolist() == [0]
    assert out["top"].isna().all()


@pytest.mark.usefixtures("steps_on_workers")
def test_a_sort_of_a_group_by_s_result_by_its_keys_is_dropped(cluster: tmr.LocalCluster) -> None:
    sums = tmr.lazy(ORDERS).group_by(["note", "user"]).agg(total=("qty", "sum"))
    q = sums.sort(["note", "user"])
    assert show(sorted_groups(q.plan))[0] == "group_by [note, user] agg total=sum(qty)"
    assert show(sorted_groups(sums.sort("note", limit=2).plan))[0] == "limit 2"
    assert show(sorted_groups(sums.sort("user").plan))[0] == "sort user"  # not the groups' order: kept
    assert show(sorted_groups(sums.sort("note", descending=True).plan))[0] == "sort note desc"
    assert runs(q, RULES, cluster) == 1
    expected = ORDERS.groupby(["note", "user"], as_index=False, dropna=False).agg(total=("qty", "sum"))
    same_with_and_without(q, sorted_groups, cluster, expected.sort_values(["note", "user"], na_position="last"))


@pytest.mark.usefixtures("steps_on_workers")
def test_top_k_makes_a_limit_of_a_sort_the_sort_s_limit(cluster: tmr.LocalCluster) -> None:
    q = tmr.lazy(ORDERS).sort(["price", "qty"], descending=[True, False]).limit(5).limit(3)
    assert show(top_k(q.plan)) == ["sort price desc, qty limit 3", "  scan table of 7 rows [*]"]
    with tmr.stats() as seen:
        answer(q, RULES, cluster)
    assert len(seen.runs) == 1  # one map-only run: each shard's first 3
    expected = ORDERS.sort_values(["price", "qty"], ascending=[False, True], na_position="last", kind="stable").head(3)
    same_with_and_without(q, top_k, cluster, expected)


@pytest.mark.usefixtures("steps_on_workers")
def test_a_subplan_of_equal_structure_is_computed_once(cluster: tmr.LocalCluster) -> None:
    orders = tmr.table(ORDERS)

    def big() -> tmr.LazyTable:  # built twice: two plans of one structure
        return tmr.lazy(orders).filter(col("price") > 6.0)

    q = big().join(big().group_by("user").agg(n=("*", "count")), on="user")
    shared = share(q.plan)
    assert shared.left is shared.right.input  # type: ignore[union-attr]
    assert q.plan.left is not q.plan.right.input  # type: ignore[union-attr]
    assert runs(q, RULES, cluster) == 2  # the filter once, the group-by (the join: a lookup, in the filter's map)
    off = (share, into_aggregates, lookup_joins)
    assert runs(q, [r for r in RULES if r not in off], cluster) == 4  # the filter twice, the group-by, the join
    kept = ORDERS[ORDERS.price > 6.0].dropna(subset=["user"])
    expected = kept.merge(kept.groupby("user", as_index=False).agg(n=("qty", "size")), on="user")
    same_with_and_without(q, share, cluster, expected)


def test_a_group_by_joined_on_its_keys_with_a_much_smaller_side_groups_only_that_side_s_keys(
    cluster: tmr.LocalCluster,
) -> None:
    lines = tmr.table(pd.DataFrame({"order": np.arange(40) % 20, "supplier": np.arange(40) % 7}))
    few = tmr.table(pd.DataFrame({"order": np.array([3, 5, 99]), "tag": ["a", "b", "c"]}))
    groups = tmr.lazy(lines).group_by("order").agg(n=("supplier", "count_distinct"))
    q = tmr.lazy(few).join(groups, on="order")
    reduced = semi_groups(q.plan)
    assert show(reduced) == [
        "join how=inner on order",
        "  scan table of 3 rows [*]",
        "  group_by [order] agg n=count_distinct(supplier)",
        "    join how=semi on order",
        "      scan table of 40 rows [*]",
        "      scan table of 3 rows [*]",
    ]
    assert reduced.right.input.right is reduced.left  # type: ignore[union-attr]  # read twice, computed once
    wide = tmr.lazy(lines).filter(col("supplier") >= 0).select("order")  # 40 rows / 3: not a tenth of them
    assert semi_groups(wide.join(groups, on="order").plan).right.input is groups.plan.input  # type: ignore[union-attr]
    filtered = semi_groups(tmr.lazy(few).join(groups.filter(col("n") > 1), on="order").plan)
    assert show(filtered)[2:4] == ["  filter (col('n') > 1)", "    group_by [order] agg n=count_distinct(supplier)"]
    assert show(filtered)[4] == "      join how=semi on order"  # below a filter of its groups
    twice = q.join(groups.select("order", (col("n") + 1).alias("m")), on="order")  # the group-by has two readers
    assert "join how=semi on order" not in show(semi_groups(twice.plan))
    expected = pd.DataFrame({"order": [3, 5], "tag": ["a", "b"], "n": [2, 2]})
    same_with_and_without(q, semi_groups, cluster, expected)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_every_rule_keeps_a_plan_that_uses_traced_functions_answering_the_same(cluster: tmr.LocalCluster, rule: Rule) -> None:
    q = (
        tmr.lazy(ORDERS)
        .with_columns(lambda rows: {"double": rows["qty"] * 2})
        .filter(col("double") > 2)
        .filter(lambda rows: tf.not_equal(rows["note"], "y"))
        .select("note", "double")
    )
    same_with_and_without(
        q, rule, cluster, ORDERS.assign(double=ORDERS.qty * 2).query("double > 2 and note != 'y'")[["note", "double"]]
    )
