"""``lookup_joins``: a join of a small right side as a lookup in the map of the step that reads it. The plan before
and after the rule, the same answer as DuckDB and as the rule off (null keys on both sides, unicode strings, nulls
in the right side's columns, an empty right side, duplicate right keys), and fewer runs."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tfmapreduce as tmr
from tfmapreduce import col
from tfmapreduce._query import client_steps
from tfmapreduce._query.execute import execute
from tfmapreduce._query.lookup_table import _texts
from tfmapreduce._query.lookups import lookup_joins
from tfmapreduce._query.plan import show
from tfmapreduce._query.rules import RULES, optimize, prune

LINES = pd.DataFrame(
    {
        "id": np.arange(8),
        "k": pd.array([1, 2, None, 3, 9, 2, 1, 3], dtype="Int64"),
        "v": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, np.nan, 8.0],
    }
)
SMALL = pd.DataFrame(
    {
        "k": pd.array([2, 3, 1, None], dtype="Int64"),
        "name": ["zwei", "drei ✓ 三", "eins", "null key"],
        "w": pd.array([20, None, 10, 40], dtype="Int64"),
    }
)
OFF = [r for r in RULES if r is not lookup_joins]
SQL = {
    "inner": "SELECT l.id, l.k, l.v, s.name, s.w FROM l JOIN s ON l.k = s.k",
    "left": "SELECT l.id, l.k, l.v, s.name, s.w FROM l LEFT JOIN s ON l.k = s.k",
    "semi": "SELECT l.id, l.k, l.v FROM l WHERE l.k IN (SELECT k FROM s)",
    "anti": "SELECT l.id, l.k, l.v FROM l WHERE NOT EXISTS (SELECT 1 FROM s WHERE s.k = l.k)",
}


def answers(q: tmr.LazyTable, cluster: tmr.LocalCluster) -> tuple[pd.DataFrame, pd.DataFrame, int, int]:
    """The answer with every rule and without ``lookup_joins``, and the runs each made."""
    out = []
    for rules in (RULES, OFF):
        with tmr.stats() as seen:
            out.append((execute(optimize(q.plan, rules), {"cluster": cluster}).to_pandas(), len(seen.runs)))
    (on, on_runs), (off, off_runs) = out
    return on, off, on_runs, off_runs


def duckdb_answer(how: str, small: pd.DataFrame) -> pd.DataFrame:
    connection = duckdb.connect()
    connection.register("l", LINES)
    connection.register("s", small)
    return connection.sql(SQL[how] + " ORDER BY l.id").df()


@pytest.mark.usefixtures("steps_on_workers")
def test_a_join_of_a_small_side_becomes_a_lookup_the_next_step_s_map_reads() -> None:
    q = tmr.lazy(LINES).join(tmr.lazy(SMALL), on="k").filter(col("v") > 1.0).select("id", "name")
    before = prune(q.plan)
    assert show(before)[1:3] == ["  filter (col('v') > 1.0)", "    join how=inner on k"]
    after = lookup_joins(before)
    assert show(after) == [
        "bind table(0) by k (the queries below, in order; the plan last)",
        "  scan table of 4 rows [k, name]",
        "  select id, name",
        "    filter (col('v') > 1.0)",
        "      select k, id, v, name",
        "        with_columns name=col('k').lookup(table(0), 'name')",
        "          filter col('k').found_in(table(0))",
        "            scan table of 8 rows [*]",
    ]
    physical = q.explain().split("physical steps:")[1].splitlines()
    assert physical[-1] == "  1 distributed run"
    assert "filter col('k').found_in(table(0)); with_columns name=col('k').lookup(table(0), 'name')" in physical[-3]
    semi = tmr.lazy(LINES).join(tmr.lazy(SMALL), on="k", how="anti")
    assert show(lookup_joins(prune(semi.plan)))[2:4] == [
        "  filter ~col('k').found_in(table(0))",
        "    scan table of 8 rows [*]",
    ]


@pytest.mark.parametrize("how", ["inner", "left", "semi", "anti"])
@pytest.mark.parametrize("rows", [4, 0], ids=["small", "empty"])
def test_a_lookup_answers_as_duckdb_and_the_join(cluster: tmr.LocalCluster, how: str, rows: int) -> None:
    small = SMALL.iloc[:rows]
    q = tmr.lazy(LINES).join(tmr.lazy(small), on="k", how=how)
    assert "(table(0)" in q.explain()  # found_in, or lookup alone for a left join
    on, off, on_runs, off_runs = answers(q, cluster)
    pd.testing.assert_frame_equal(on, off)
    expected = duckdb_answer(how, small)
    ours = on.sort_values("id").reset_index(drop=True)[list(expected.columns)]
    pd.testing.assert_frame_equal(
        ours.astype(object).where(ours.notna(), None), expected.astype(object).where(expected.notna(), None), check_dtype=False
    )
    assert on_runs <= max(off_runs, 1)  # the eager join of an empty side runs nothing; its lookup one map run


def test_duplicate_right_keys_keep_an_inner_join_and_a_semi_join_looks_them_up(cluster: tmr.LocalCluster) -> None:
    twice = pd.concat([SMALL, SMALL.iloc[:1]], ignore_index=True)  # key 2 twice: a left row meets two rows
    inner = tmr.lazy(LINES).join(tmr.lazy(twice), on="k")
    assert "found_in" not in inner.explain()
    on, off, _, _ = answers(inner, cluster)
    assert len(on) == 8  # rows 1 and 5 (key 2) twice each
    pd.testing.assert_frame_equal(on, off)
    semi = tmr.lazy(LINES).join(tmr.lazy(twice), on="k", how="semi")
    assert "found_in" in semi.explain()
    on, off, _, _ = answers(semi, cluster)
    pd.testing.assert_frame_equal(on, off)
    assert on["id"].tolist() == [0, 1, 3, 5, 6, 7]
    grouped = tmr.lazy(twice).group_by("k").agg(n=("name", "count"))  # unique on k by its group-by: looked up
    assert "found_in" in tmr.lazy(LINES).join(grouped, on="k").explain()


def test_chained_small_joins_read_by_a_group_by_run_in_its_map_and_new_small_data_compiles_nothing(
    cluster: tmr.LocalCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(client_steps, "CLIENT_ROWS", 3)  # the nations and regions small, the 8 lines large
    regions = pd.DataFrame({"r": np.array([7, 8]), "region": ["north", "süd"]})
    nations = pd.DataFrame({"k": np.array([1, 2, 3]), "r": np.array([7, 8, 8])})
    q = (
        tmr.lazy(LINES)
        .join(tmr.lazy(nations), on="k")
        .join(tmr.lazy(regions), on="r")
        .group_by("region")
        .agg(total=("v", "sum"), n=("*", "count"))
    )
    on, off, on_runs, off_runs = answers(q, cluster)
    pd.testing.assert_frame_equal(on, off)
    assert on.to_dict("list") == {"region": ["north", "süd"], "total": [1.0, 20.0], "n": [2, 4]}
    assert (on_runs, off_runs) == (1, 3)  # the regions meet the nations first (join_order), on the client (client_steps)
    again, runs = (
        tmr.lazy(LINES)
        .join(tmr.lazy(nations.assign(r=np.array([8, 7, 8]))), on="k")
        .join(tmr.lazy(regions), on="r")
        .group_by("region")
        .agg(total=("v", "sum"), n=("*", "count"))
        .collect(cluster=cluster, stats=True)
    )
    assert [r.compiled for r in runs] == [False]  # new values of the small sides: run inputs, nothing compiled
    assert again.to_dict()["n"].tolist() == [2, 4]


def test_a_large_left_side_is_looked_up_only_where_the_join_keeps_most_of_its_rows() -> None:
    big = tmr.lazy({"k": np.arange(200_000) % 4, "v": np.zeros(200_000)})  # above LARGE_LEFT: planned, never run
    every = big.join(tmr.lazy(SMALL), on="k", how="semi")  # the right side unfiltered: estimated to keep every row
    assert "found_in" in "\n".join(show(lookup_joins(prune(every.plan))))
    few = big.join(tmr.lazy(SMALL).filter(col("w") == 20), on="k", how="semi")  # estimated to keep a fifth
    assert "found_in" not in "\n".join(show(lookup_joins(prune(few.plan))))
    small = tmr.lazy(LINES).join(tmr.lazy(SMALL).filter(col("w") == 20), on="k", how="semi")  # a small left side
    assert "found_in" in "\n".join(show(lookup_joins(prune(small.plan))))


PAIRS = pd.DataFrame(
    {
        "id": np.arange(9),
        "a": pd.array([1, 1, 2, 2, None, 1, 3, 2, 1], dtype="Int64"),
        "s": ["x", "ü三", "x", "", "x", None, "x", "ü三", "ü三"],
        "v": np.arange(9, dtype=np.float64),
    }
)
KEYED = pd.DataFrame(  # unique on (a, s) only: a and s each repeat; a null in each key column never matches
    {
        "a": pd.array([1, 1, 2, 2, None, 1], dtype="Int64"),
        "s": ["x", "ü三", "x", "", "x", None],
        "label": ["1x", "1ü", "2x", "2 empty", "null a", "null s"],
    }
)
PAIR_SQL = {
    "inner": "SELECT p.id, p.a, p.s, p.v, k.label FROM p JOIN k ON p.a = k.a AND p.s = k.s",
    "left": "SELECT p.id, p.a, p.s, p.v, k.label FROM p LEFT JOIN k ON p.a = k.a AND p.s = k.s",
    "semi": "SELECT p.id, p.a, p.s, p.v FROM p WHERE EXISTS (SELECT 1 FROM k WHERE k.a = p.a AND k.s = p.s)",
    "anti": "SELECT p.id, p.a, p.s, p.v FROM p WHERE NOT EXISTS (SELECT 1 FROM k WHERE k.a = p.a AND k.s = p.s)",
}


def test_a_join_on_two_keys_is_a_lookup_of_both_coded_as_one() -> None:
    q = tmr.lazy(PAIRS).join(tmr.lazy(KEYED), on=["a", "s"]).select("id", "label")
    before = prune(q.plan)
    assert show(before)[1] == "  join how=inner on a, s"
    assert show(lookup_joins(before))[:2] == [
        "bind table(0) by a, s (the queries below, in order; the plan last)",
        "  scan table of 6 rows [*]",
    ]
    assert "with_columns label=keys(col('a'), col('s')).lookup(table(0), 'label')" in q.explain()
    assert "filter keys(col('a'), col('s')).found_in(table(0))" in q.explain()
    repeated = pd.concat([KEYED, KEYED.iloc[:1]], ignore_index=True)  # (1, 'x') twice: the inner join stays
    assert "found_in" not in tmr.lazy(PAIRS).join(tmr.lazy(repeated), on=["a", "s"]).explain()
    assert "found_in" in tmr.lazy(PAIRS).join(tmr.lazy(repeated), on=["a", "s"], how="semi").explain()


@pytest.mark.parametrize("how", ["inner", "left", "semi", "anti"])
@pytest.mark.parametrize("rows", [6, 0], ids=["small", "empty"])
def test_a_lookup_on_an_int_and_a_string_key_answers_as_duckdb_and_the_join(
    cluster: tmr.LocalCluster, how: str, rows: int
) -> None:
    keyed = KEYED.iloc[:rows]
    q = tmr.lazy(PAIRS).join(tmr.lazy(keyed), on=["a", "s"], how=how)
    assert "keys(col('a'), col('s'))" in q.explain()
    on, off, on_runs, off_runs = answers(q, cluster)
    pd.testing.assert_frame_equal(on, off)
    connection = duckdb.connect()
    connection.register("p", PAIRS)
    connection.register("k", keyed)
    expected = connection.sql(PAIR_SQL[how] + " ORDER BY p.id").df()
    ours = on.sort_values("id").reset_index(drop=True)[list(expected.columns)]
    pd.testing.assert_frame_equal(
        ours.astype(object).where(ours.notna(), None), expected.astype(object).where(expected.notna(), None), check_dtype=False
    )
    assert on_runs <= max(off_runs, 1)


@pytest.mark.parametrize("how", ["inner", "left", "anti"])
def test_a_lookup_on_one_string_key_matches_whole_strings(cluster: tmr.LocalCluster, how: str) -> None:
    names = pd.DataFrame({"s": ["x", "ü三", "", None], "label": ["ex", "umlaut", "empty", "null"]})
    q = tmr.lazy(PAIRS).join(tmr.lazy(names), on="s", how=how)
    assert "col('s').found_in(table(0))" in q.explain() or "col('s').lookup(table(0)" in q.explain()
    on, off, _, _ = answers(q, cluster)
    pd.testing.assert_frame_equal(on, off)
    expected = pd.merge(PAIRS, names.dropna(), on="s", how="left" if how != "inner" else "inner")
    if how == "anti":
        expected = expected[expected["label"].isna()].drop(columns="label")
    ours = on.sort_values("id").reset_index(drop=True)[list(expected.columns)]
    expected = expected.sort_values("id").reset_index(drop=True)
    pd.testing.assert_frame_equal(
        ours.astype(object).where(ours.notna(), None), expected.astype(object).where(expected.notna(), None), check_dtype=False
    )


@pytest.mark.usefixtures("steps_on_workers")
@pytest.mark.parametrize(("files", "how"), [("parquet", "inner"), ("csv", "anti")])
def test_a_left_side_read_from_files_is_looked_up_in_the_step_that_reads_them(
    tmp_path: Path, cluster: tmr.LocalCluster, files: str, how: str
) -> None:
    path = tmp_path / f"pairs.{files}"
    if files == "parquet":
        pq.write_table(pa.Table.from_pandas(PAIRS, preserve_index=False), path)
        scan = tmr.plan_parquet(path)
    else:
        PAIRS.to_csv(path, index=False)  # an empty string reads as a null here
        scan = tmr.plan_csv(path)
    q = tmr.lazy(scan).join(tmr.lazy(KEYED), on=["a", "s"], how=how).select("id", *(["label"] if how == "inner" else []))
    assert "keys(col('a'), col('s')).found_in(table(0))" in q.explain()
    on, off, on_runs, off_runs = answers(q, cluster)
    pd.testing.assert_frame_equal(on, off)
    # the files' read is a map run of its own, as for any step over files (a CSV's nulls counted in a run of its own);
    # without the rule, the join is a run, or none where it is an anti join (a lookup on the client, join.py)
    assert (on_runs, off_runs) == ((2, 2) if files == "parquet" else (2, 1))
    counted = q.group_by("id").agg(n=("id", "count"))  # the lookup in the group-by's map: no join run
    assert any("after [filter" in line and "found_in(table(0))" in line for line in counted.explain().splitlines())
    on_counts, off_counts, on_runs, off_runs = answers(counted, cluster)
    pd.testing.assert_frame_equal(on_counts.sort_values("id", ignore_index=True), off_counts.sort_values("id", ignore_index=True))
    # kept on the workers that read them (a CSV's nulls counted in a run of its own), grouped there: no join run
    assert (on_runs, off_runs) == ((2, 3) if files == "parquet" else (3, 2))
    read = pd.read_parquet(path) if files == "parquet" else pd.read_csv(path, dtype={"a": "Int64"}, keep_default_na=True)
    connection = duckdb.connect()
    connection.register("p", read)
    connection.register("k", KEYED)
    sql = PAIR_SQL[how].replace("p.id, p.a, p.s, p.v, k.label", "p.id, k.label").replace("p.id, p.a, p.s, p.v", "p.id")
    expected = connection.sql(sql + " ORDER BY p.id").df()
    ours = on.sort_values("id").reset_index(drop=True)
    assert ours["id"].tolist() == expected["id"].tolist()
    if how == "inner":
        assert ours["label"].tolist() == expected["label"].tolist()


def test_a_right_side_with_its_keys_renamed_is_looked_up(cluster: tmr.LocalCluster) -> None:
    renamed = tmr.lazy(KEYED).select(col("a").alias("ka"), col("s").alias("ks"), col("label").alias("tag"))
    q = tmr.lazy(PAIRS).join(renamed, left_on=["a", "s"], right_on=["ka", "ks"], how="left")
    assert "with_columns tag=keys(col('a'), col('s')).lookup(table(0), 'tag')" in q.explain()
    on, off, _, _ = answers(q, cluster)
    pd.testing.assert_frame_equal(on, off)
    expected = pd.merge(PAIRS, KEYED.dropna(), on=["a", "s"], how="left").sort_values("id", ignore_index=True)
    assert on.sort_values("id")["tag"].tolist() == expected["label"].where(expected["label"].notna(), None).tolist()


@given(st.lists(st.text(), max_size=20), st.integers(0, 5))
def test_strings_travel_as_their_code_points_nuls_and_astral_characters_too(texts: list[str], extra: int) -> None:
    points, lengths = _texts(texts, len(texts) + extra)
    assert lengths.tolist() == [len(t) for t in texts] + [0] * extra
    assert points.shape[1] > max(map(len, texts), default=0)
    assert ["".join(map(chr, row[:n])) for row, n in zip(points[: len(texts)], lengths, strict=False)] == texts
    assert not points[len(texts) :].any()
