"""Tables on the workers (``tmr.scatter(table)`` → ``tmr.ResidentTable``), on real workers: drawn tables with nulls,
unicode and empty strings, dates, timestamps and numbers of several widths, on uneven partitions with empty shards,
scattered and fetched back equal; filter, with_columns, map and group-by aggregates equal to pandas and to the eager
table's; no run over a resident table ships a row (``tmr.stats``); and ``Table.to_arrow`` / ``tmr.table(pyarrow)``."""

from __future__ import annotations

import datetime
import math
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples, size_lists, table_columns

import tfmapreduce as tmr


def cells(series: pd.Series) -> list[Any]:
    """A column's values as Python values, None for every spelling of a null, dates as ``datetime.date``."""
    out: list[Any] = []
    for v in series.tolist():
        if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v)):
            out.append(None)
        elif isinstance(v, pd.Timestamp | np.datetime64):
            out.append(pd.Timestamp(v).to_pydatetime())
        else:
            out.append(v.item() if isinstance(v, np.generic) else v)
    return out


def assert_cells(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns)
    for name in got.columns:
        for g, w in zip(cells(got[name]), cells(want[name]), strict=True):
            if isinstance(w, float) and g is not None:
                assert g == pytest.approx(w, rel=1e-9, abs=1e-9), name
            else:
                assert g == w, (name, got[name], want[name])


@st.composite
def scattered(draw: st.DrawFn) -> tuple[tmr.Table, list[int]]:
    """A drawn table and a partition of its rows (uneven, often with empty shards; no rows at all sometimes)."""
    rows = draw(st.integers(0, 30))
    return tmr.table(draw(table_columns(rows))), draw(size_lists(rows))


@settings(max_examples=examples(4), deadline=None)
@given(drawn=scattered())
def test_a_scattered_table_comes_back_equal(cluster: tmr.LocalCluster, drawn: tuple[tmr.Table, list[int]]) -> None:
    t, sizes = drawn
    with tmr.scatter(t, cluster=cluster, sizes=sizes) as r:
        assert isinstance(r, tmr.ResidentTable)
        assert len(r) == len(t)
        assert r.columns == t.columns
        assert r.schema == t.schema
        assert list(r.shards) == sizes
        for name in r.columns:  # every column (and mask) on the same shards and devices
            c = r.column(name)
            for part in (c.values, c.valid):
                if part is not None:
                    assert part.plan.sizes == tuple(sizes)
                    assert [s.device for s in part.plan.shards] == [s.device for s in c.values.plan.shards]
        pd.testing.assert_frame_equal(r.to_pandas(), t.to_pandas())
        got = r.to_dict()
        assert all(isinstance(v, str) for v in got["s"] if v is not None)  # str, not bytes


def keep(rows: Any) -> tf.Tensor:
    """Rows with a non-empty string, or a first number column above 0 (a null's slot holds 0 or "")."""
    positive = tf.cast(rows["x0"], tf.float64) > 0
    return (tf.strings.length(rows["s"]) > 0) | (rows.valid["x0"] & positive)


def kept_by_pandas(frame: pd.DataFrame) -> pd.Series:
    positive = (frame["x0"].astype("Float64") > 0).fillna(False).astype(bool)
    return (frame["s"].str.len() > 0).fillna(False).astype(bool) | positive


def added(rows: Any) -> dict[str, tf.Tensor]:
    return {"chars": tf.strings.length(rows["s"], unit="UTF8_CHAR"), "x0": tf.cast(rows.valid["x0"], tf.int8)}


@settings(max_examples=examples(4), deadline=None)
@given(drawn=scattered())
def test_filter_and_with_columns_equal_pandas_and_ship_no_row(
    cluster: tmr.LocalCluster, drawn: tuple[tmr.Table, list[int]]
) -> None:
    t, sizes = drawn
    frame = t.to_pandas()
    with tmr.scatter(t, cluster=cluster, sizes=sizes) as r:
        with tmr.stats() as runs:
            kept = r.filter(keep)
            wide = kept.with_columns(added)
        try:
            assert runs.runs
            assert all(run.bytes_sent == 0 for run in runs.runs)
            assert isinstance(kept, tmr.ResidentTable)
            assert kept.columns == t.columns
            want = frame[kept_by_pandas(frame)].reset_index(drop=True)
            pd.testing.assert_frame_equal(kept.to_pandas(), t.filter(keep, cluster=cluster).to_pandas())
            assert_cells(kept.to_pandas(), want)
            assert wide.columns == (*t.columns, "chars")  # x0 replaced in place, chars added
            got = wide.to_pandas()
            assert got["chars"].tolist() == [len(s) if isinstance(s, str) else 0 for s in want["s"]]
            assert got["x0"].tolist() == want["x0"].notna().astype(int).tolist()
            assert_cells(got[["s", "d", "t", "x1", "x2"]], want[["s", "d", "t", "x1", "x2"]])
        finally:
            wide.delete()
            kept.delete()


AGGREGATES: dict[str, Any] = {
    "rows": ("*", "count"),
    "n": ("x0", "count"),
    "total": ("x1", "sum"),
    "avg": ("x2", "mean"),
    "lo": ("t", "min"),
    "hi": ("s", "max"),
    "mid": ("x2", "median"),
    "kinds": ("s", "count_distinct"),
}


@pytest.mark.parametrize("keys", [["s"], ["d", "s"], []], ids=["s", "d-s", "whole"])
@settings(max_examples=examples(3), deadline=None)
@given(drawn=scattered(), reducers=st.integers(1, 3))
def test_group_by_on_the_workers_equals_pandas(
    cluster: tmr.LocalCluster, keys: list[str], drawn: tuple[tmr.Table, list[int]], reducers: int
) -> None:
    t, sizes = drawn
    with tmr.scatter(t, cluster=cluster, sizes=sizes) as r, tmr.stats() as runs:
        grouped = r.group_by(keys) if keys else r
        got = grouped.agg(**AGGREGATES, cluster=cluster, reducers=reducers)
    assert all(run.bytes_sent == 0 for run in runs.runs)
    eager = (t.group_by(keys) if keys else t).agg(**AGGREGATES, cluster=cluster, reducers=reducers)
    pd.testing.assert_frame_equal(got.to_pandas(), eager.to_pandas())
    frame = t.to_pandas().assign(one=1)
    for name in ("x1", "x2"):
        frame[name] = frame[name].astype("Float64")
    named = {
        "rows": ("one", "size"),
        "n": ("x0", "count"),
        "total": ("x1", lambda x: x.sum(min_count=1)),
        "avg": ("x2", "mean"),
        "lo": ("t", "min"),
        "hi": ("s", "max"),
        "mid": ("x2", "median"),
        "kinds": ("s", "nunique"),
    }
    if not keys:
        if not len(frame):
            return  # (pandas' aggregates of no rows differ in type: the eager table's are checked above)
        want = pd.DataFrame({out: [frame[c].agg(f) if not callable(f) else f(frame[c])] for out, (c, f) in named.items()})
    else:
        want = frame.groupby(keys, dropna=False, sort=True).agg(**named).reset_index()
    assert_cells(got.to_pandas(), want)


def test_map_returns_a_resident_table_of_other_rows(cluster: tmr.LocalCluster) -> None:
    t = tmr.table({"line": np.array(["to be", "", "ör not", "to be"]), "n": np.array([1, 2, 3, 4], np.int16)})
    with tmr.scatter(t, cluster=cluster, sizes=[0, 3, 1]) as r:
        with tmr.map(lambda rows: {"word": tf.strings.split(rows["line"]).flat_values}, r, cluster=cluster) as words:
            assert isinstance(words, tmr.ResidentTable)
            assert words.columns == ("word",)
            assert words.to_dict()["word"].tolist() == ["to", "be", "ör", "not", "to", "be"]
            assert words.group_by("word").agg(n=("*", "count")).to_dict()["n"].tolist() == [2, 1, 2, 1]
        with pytest.raises(TypeError, match="by_key"):
            tmr.map(lambda rows: rows, r, by_key=True)


def test_select_shares_columns_and_delete_frees_them_with_the_last_holder(cluster: tmr.LocalCluster) -> None:
    t = tmr.table({"a": np.ma.MaskedArray([1, 2, 3], mask=[0, 1, 0]), "b": np.array(["x", "y", "z"])})
    r = tmr.scatter(t, cluster=cluster)
    view = r.select(["b", "a"])
    a = r.column("a")
    r.delete()
    assert view.to_pandas()["a"].tolist()[0] == 1  # still held by the view
    view.delete()
    assert a.values._deleted
    assert a.valid is not None
    assert a.valid._deleted
    with pytest.raises(ValueError, match="deleted"):
        view.to_dict()


def test_errors_name_the_call(cluster: tmr.LocalCluster) -> None:
    t = tmr.table({"price": np.array([1.0, 2.0, 3.0])})
    with tmr.scatter(t, cluster=cluster, sizes=[1, 2]) as r:
        with pytest.raises(KeyError, match="did you mean 'price'"):
            r.select(["prize"])
        with pytest.raises(ValueError, match="one value a row"):
            r.with_columns(lambda rows: {"y": rows["price"][:1]})
        with pytest.raises(TypeError, match="already on the workers"):
            tmr.scatter(r, cluster=cluster)
        with pytest.raises(tmr.MapFunctionError, match="one bool a row"):
            r.filter(lambda rows: rows["price"])


@settings(max_examples=examples(10), deadline=None)
@given(columns=st.integers(0, 20).flatmap(table_columns))
def test_to_arrow_keeps_names_types_and_nulls(columns: dict[str, Any]) -> None:
    t = tmr.table(columns)
    arrow = t.to_arrow()
    assert arrow.column_names == list(t.columns)
    assert arrow.schema.field("s").type == pa.string()
    assert arrow.schema.field("d").type == pa.date32()
    assert arrow.schema.field("t").type == pa.timestamp("ms")
    for name in t.columns:
        c = t.column(name)
        nulls = 0 if c.valid is None else int((~c.valid).sum())
        assert arrow.column(name).null_count == nulls
    back = tmr.table(arrow)
    assert back.schema.names == t.schema.names
    assert [f.type for f in back.schema.fields] == [f.type for f in t.schema.fields]
    pd.testing.assert_frame_equal(back.to_pandas(), t.to_pandas())
    assert_cells(arrow.to_pandas(), t.to_pandas())


def test_table_of_pyarrow_reads_dictionary_strings_and_refuses_structs() -> None:
    batch = pa.record_batch(
        {
            "k": pa.array(["a", None, "a"]).dictionary_encode(),
            "day": pa.array([datetime.date(2024, 1, 2), None, datetime.date(1969, 12, 31)], pa.date32()),
        }
    )
    t = tmr.table(batch)
    assert t.to_dict()["k"].tolist() == ["a", None, "a"]
    assert t.schema["day"].type.name == "date"
    with pytest.raises(TypeError, match="column 'l'"):
        tmr.table(pa.table({"l": pa.array([{"a": 1}])}))
    with pytest.raises(ValueError, match="repeat"):
        tmr.table(pa.table([pa.array([1]), pa.array([2])], names=["a", "a"]))


def test_a_table_of_no_rows_scatters_and_runs(cluster: tmr.LocalCluster) -> None:
    t = tmr.table({"s": np.array([], object), "x": np.zeros(0, np.float32)})
    with tmr.scatter(t, cluster=cluster, sizes=[0, 0]) as r:
        assert len(r) == 0
        assert r.shards == (0, 0)
        with r.filter(lambda rows: rows["x"] > 0) as kept:
            pd.testing.assert_frame_equal(kept.to_pandas(), t.to_pandas())
        assert r.agg(n=("*", "count"), total=("x", "sum")).to_dict()["n"].tolist() == [0]
        assert len(r.group_by("s").agg(n=("x", "count"))) == 0


PARTIALS = {k: v for k, v in AGGREGATES.items() if k not in ("hi", "mid", "kinds")}
"""The aggregates that a combiner merges (AGGREGATES' others need a group reducer)."""


@settings(max_examples=examples(2), deadline=None)
@given(drawn=scattered(), keys=st.sampled_from([["d", "s"], ["x0"], []]), reducers=st.integers(1, 3), grouped=st.booleans())
def test_group_by_kept_on_the_workers_equals_the_client_result(
    cluster: tmr.LocalCluster, drawn: tuple[tmr.Table, list[int]], keys: list[str], reducers: int, grouped: bool
) -> None:
    t, sizes = drawn
    aggregates = AGGREGATES if grouped else PARTIALS
    with tmr.scatter(t, cluster=cluster, sizes=sizes) as r:
        by = r.group_by(keys) if keys else r
        with tmr.stats() as runs, by.agg(**aggregates, resident=True, cluster=cluster, reducers=reducers) as kept:
            assert isinstance(kept, tmr.ResidentTable)
            assert kept.columns == (*keys, *aggregates)
            got = kept.to_pandas()
        fetched = by.agg(**aggregates, cluster=cluster, reducers=reducers)
    assert all(run.bytes_sent == 0 for run in runs.runs)
    pd.testing.assert_frame_equal(got, fetched.to_pandas())


def test_group_by_kept_on_the_workers_equals_pandas_for_lone_keys(cluster: tmr.LocalCluster) -> None:
    frame = pd.DataFrame({"k": [3, 1, 3, 2, 1], "s": ["é", "", "é", "b", ""], "x": [1.5, None, 4.0, 2.0, 8.0]})
    t = tmr.table(frame)
    with tmr.scatter(t, cluster=cluster, sizes=[2, 3]) as r:
        for key in ("k", "s"):  # a lone key column without nulls is the key itself
            with r.group_by(key).agg(n=("x", "count"), avg=("x", "mean"), mid=("x", "median"), resident=True) as kept:
                want = frame.groupby(key, sort=True).agg(n=("x", "count"), avg=("x", "mean"), mid=("x", "median"))
                assert_cells(kept.to_pandas(), want.reset_index())
        with pytest.raises(TypeError, match=r"ResidentTable's group-by only; tmr.scatter\(table\) first"):
            t.group_by("k").agg(n=("x", "count"), resident=True)
    empty = tmr.table({"k": np.zeros(0, np.int64), "x": np.zeros(0)})
    with tmr.scatter(empty, cluster=cluster) as r:
        with r.group_by("k").agg(total=("x", "sum"), resident=True, cluster=cluster) as none:
            assert len(none) == 0
            assert none.columns == ("k", "total")
        with r.agg(total=("x", "sum"), n=("*", "count"), resident=True, cluster=cluster) as one:
            assert one.to_dict()["n"].tolist() == [0]
            assert one.to_pandas()["total"].isna().all()


@settings(max_examples=examples(2), deadline=None)
@given(drawn=scattered(), keys=st.sampled_from([["s"], ["d", "x0"], []]), reducers=st.integers(1, 3))
def test_a_top_k_kept_on_the_workers_equals_the_client_result_and_pandas(
    cluster: tmr.LocalCluster, drawn: tuple[tmr.Table, list[int]], keys: list[str], reducers: int
) -> None:
    t, sizes = drawn
    aggregates = {"top": ("s", ("top_k", 2)), "tops": ("t", ("top_k", 3)), "n": ("s", "count")}
    with tmr.scatter(t, cluster=cluster, sizes=sizes) as r:
        by = r.group_by(keys) if keys else r
        fetched = by.agg(**aggregates, cluster=cluster, reducers=reducers)
        with tmr.stats() as runs, by.agg(**aggregates, resident=True, cluster=cluster, reducers=reducers) as kept:
            assert kept.schema == fetched.schema
            got = kept.to_pandas()
            with kept.filter(lambda rows: rows["n"] >= 0) as again:  # a list column travels with its rows
                assert [x.tolist() for x in again.to_dict()["top"]] == [x.tolist() for x in got["top"]]
    assert all(run.bytes_sent == 0 for run in runs.runs)
    want = fetched.to_pandas()
    assert_cells(got.drop(columns=["top", "tops"]), want.drop(columns=["top", "tops"]))
    for name in ("top", "tops"):
        assert [x.tolist() for x in got[name]] == [x.tolist() for x in want[name]]
    frame = t.to_pandas()
    if keys and len(frame):  # pandas: each group's 2 largest strings (nulls skipped, a null key its own group)
        largest = frame.groupby(keys, dropna=False, sort=True)["s"].agg(lambda s: sorted(s.dropna(), reverse=True)[:2])
        assert sorted(map(tuple, got["top"])) == sorted(map(tuple, largest.tolist()))


def test_a_kept_list_column_is_a_key_and_refused_where_one_value_a_row_is_taken(cluster: tmr.LocalCluster) -> None:
    t = tmr.table({"k": np.array([1, 2, 1]), "s": np.array(["b", "", "日本"], object)})
    with tmr.scatter(t, cluster=cluster) as r, r.group_by("k").agg(top=("s", ("top_k", 2)), resident=True) as kept:
        assert [x.tolist() for x in kept.to_dict()["top"]] == [["日本", "b"], [""]]
        assert str(kept.schema) == "k: int64\ntop: list<string>"
        with kept.group_by("top").agg(n=("*", "count"), resident=True) as by_top:  # (sort, unique, group_by: test_list_keys.py)
            assert by_top.collect().to_arrow().to_pylist() == [{"top": [""], "n": 1}, {"top": ["日本", "b"], "n": 1}]
        with pytest.raises(TypeError, match=r"agg: aggregates column 'top'.*explode it first"):
            kept.agg(total=("top", "sum"))
        assert kept.agg(n=("top", "count"), lo=("top", "min")).to_arrow().to_pylist() == [{"n": 2, "lo": [""]}]
        with pytest.raises(TypeError, match=r"right key 'top' is list<string>; a list key matches only a list key of its type"):
            r.join(kept, left_on="s", right_on="top")
        with tmr.scatter(kept.collect(), cluster=cluster) as back:  # a client list column scattered: the same rows
            assert [x.tolist() for x in back.to_dict()["top"]] == [["日本", "b"], [""]]


def _listed(table: tmr.Table | tmr.ResidentTable) -> list[tuple[Any, ...]]:
    """A table's rows as tuples, a list cell as a tuple of its elements, in the table's order."""
    columns = table.to_dict()
    cells = [[tuple(v.tolist()) if isinstance(v, np.ndarray) else v for v in c.tolist()] for c in columns.values()]
    return list(zip(*cells, strict=True))


@pytest.mark.parametrize("how", ["inner", "left", "semi", "anti"])
def test_a_kept_list_column_goes_through_a_join_as_the_client_join_and_pandas_give_it(
    cluster: tmr.LocalCluster, how: str
) -> None:
    t = tmr.table({"k": np.array([1, 2, 1, 3, 4, 2]), "s": np.array(["b", None, "日本", "", None, "a"], object)})
    other = tmr.table({"k": np.array([2, 4, 4, 5, 1]), "n": np.array([20, 40, 41, 50, 10])})
    with tmr.scatter(t, cluster=cluster) as r, r.group_by("k").agg(top=("s", ("top_k", 2)), resident=True) as kept:
        client = kept.collect()
        assert [x.tolist() for x in client.to_dict()["top"]] == [["日本", "b"], ["a"], [""], []]  # 4: no value, []
        want = client.join(other, on="k", how=how, cluster=cluster)
        with tmr.scatter(other, cluster=cluster) as far:
            with kept.join(other, on="k", how=how, maintain_order="left") as near, kept.join(far, on="k", how=how) as any_order:
                assert near.schema == want.schema == any_order.schema
                assert _listed(near) == _listed(want)  # the left's order, as pandas' merge
                assert sorted(_listed(any_order), key=repr) == sorted(_listed(want), key=repr)
            if how == "inner":  # the list on the right side: carried the same way
                with far.join(kept, on="k", how=how, maintain_order="left") as flipped:
                    assert _listed(flipped) == _listed(other.join(client, on="k", how=how, cluster=cluster))
    frame, right = client.to_pandas(), other.to_pandas()
    if how in ("inner", "left"):
        merged = frame.merge(right, on="k", how=how)
        rows = [(k, tuple(top), None if pd.isna(n) else int(n)) for k, top, n in merged.itertuples(index=False)]
        assert _listed(want) == rows
    else:
        hit = frame["k"].isin(right["k"])
        assert [k for k, *_ in _listed(want)] == frame[hit if how == "semi" else ~hit]["k"].tolist()


def test_a_client_join_gives_a_null_list_to_the_unmatched_rows_as_polars_and_the_workers_keep_it(
    cluster: tmr.LocalCluster,
) -> None:
    pl = pytest.importorskip("polars")
    t = tmr.table({"k": np.array([1, 1, 2]), "x": np.ma.MaskedArray([5.0, 7.0, 1.0], mask=[False, False, True])})
    tops = t.group_by("k").agg(top=("x", ("top_k", 2)), cluster=cluster)  # 1: [7, 5]; 2: [] (no value)
    users = tmr.table({"k": np.array([2, 4, 1]), "n": np.array([20, 40, 10])})
    got = users.join(tops, on="k", how="left", cluster=cluster)
    want = pl.DataFrame({"k": [2, 4, 1], "n": [20, 40, 10]}).join(
        pl.DataFrame({"k": [1, 2], "top": [[7.0, 5.0], []]}), on="k", how="left", maintain_order="left"
    )
    assert [None if v is None else v.tolist() for v in got.to_dict()["top"]] == want["top"].to_list() == [[], None, [7.0, 5.0]]
    assert got.schema["top"].nullable
    assert got.to_pandas()["top"].tolist()[1] is None
    with pytest.raises(TypeError, match=r"right key 'top' is list<float64>; a list key matches only a list key of its type"):
        users.join(tops, left_on="n", right_on="top", cluster=cluster)
    with tmr.scatter(got, cluster=cluster, sizes=[0, 2, 1]) as r:  # the null list stays one, the empty list empty
        assert r.schema == got.schema
        assert _listed(r) == _listed(got) == [(2, 20, ()), (4, 40, None), (1, 10, (7.0, 5.0))]
        assert r.to_pandas()["top"].tolist()[1] is None
        with r.filter(lambda rows: tf.not_equal(rows["n"], 20)) as some, r.sort("n", descending=True) as down:
            assert _listed(some) == [(4, 40, None), (1, 10, (7.0, 5.0))]
            assert _listed(down) == [(4, 40, None), (2, 20, ()), (1, 10, (7.0, 5.0))]
        with r.select(["k"]).join(got, on="k") as again:  # a client side's null lists travel with its rows
            assert sorted(_listed(again), key=repr) == sorted(_listed(got), key=repr)


def _lists(cells: list[Any]) -> list[Any]:
    """polars' list cells (lists, None) as ``_listed``'s (tuples, None)."""
    return [tuple(v) if isinstance(v, list) else v for v in cells]


@pytest.mark.parametrize("how", ["left", "right", "outer"])
def test_a_kept_list_column_on_a_side_that_may_be_missing_gets_null_lists_as_the_client_join_and_polars(
    cluster: tmr.LocalCluster, how: str
) -> None:
    pl = pytest.importorskip("polars")
    t = tmr.table({"k": np.array([1, 2, 1, 3, 4, 2]), "s": np.array(["b", None, "日本", "", None, "a"], object)})
    other = tmr.table({"k": np.array([2, 4, 4, 5, 1, 6]), "n": np.array([20, 40, 41, 50, 10, 60])})
    with (
        tmr.scatter(t, cluster=cluster, sizes=[3, 0, 3]) as r,
        r.group_by("k").agg(top=("s", ("top_k", 2)), resident=True) as kept,
    ):
        client = kept.collect()  # 1: [日本, b]; 2: [a]; 3: [""]; 4: [] (no value)
        lists = pl.DataFrame({"k": [1, 2, 3, 4], "top": [["日本", "b"], ["a"], [""], []]})
        numbers = pl.DataFrame({"k": [2, 4, 4, 5, 1, 6], "n": [20, 40, 41, 50, 10, 60]})
        with tmr.scatter(other, cluster=cluster, sizes=[0, 6]) as far:
            for a, b, a_pl, b_pl in ((kept, far, lists, numbers), (far, kept, numbers, lists)):  # the list on each side
                want = (client if a is kept else other).join(client if b is kept else other, on="k", how=how, cluster=cluster)
                may_miss = how == "outer" or (how == "left") == (b is kept)  # the list's side may be missing
                with a.join(b, on="k", how=how) as near:
                    assert near.schema == want.schema
                    assert near.schema["top"].nullable == may_miss
                    got = sorted(_listed(near), key=repr)
                    assert got == sorted(_listed(want), key=repr)
                    ours = a_pl.join(b_pl, on="k", how="full" if how == "outer" else how, coalesce=True)
                    assert got == sorted(zip(*(_lists(ours[c].to_list()) for c in near.columns), strict=True), key=repr)
                    tops = [row[near.columns.index("top")] for row in got]
                    assert (None in tops) == may_miss  # a null list: 5 and 6 have no list
                    assert () in tops  # 4's empty list stays empty
                    frame = near.to_pandas()
                    assert all(v is None or isinstance(v, np.ndarray) for v in frame["top"])
                    assert frame["top"].isna().sum() == sum(row[near.columns.index("top")] is None for row in got)


def test_a_null_list_survives_a_second_join_and_an_empty_shard(cluster: tmr.LocalCluster) -> None:
    t = tmr.table({"k": np.array([1, 1, 2]), "x": np.array([3, 4, 5])})
    other = tmr.table({"k": np.array([2, 7]), "y": np.array(["b", "z"])})
    with tmr.scatter(t, cluster=cluster, sizes=[0, 3]) as r, r.group_by("k").agg(top=("x", ("top_k", 1)), resident=True) as kept:
        client = kept.collect()
        want = other.join(client, on="k", how="left", cluster=cluster)
        with (
            tmr.scatter(other, cluster=cluster) as far,
            far.join(kept, on="k", how="left") as once,
            once.join(far, on="k", how="inner") as twice,
            once.join(far, on="k", how="outer", maintain_order="left") as ordered,
        ):
            assert sorted(_listed(once), key=repr) == sorted(_listed(want), key=repr) == [(2, "b", (5,)), (7, "z", None)]
            assert sorted(_listed(twice), key=repr) == [(2, "b", (5,), "b"), (7, "z", None, "z")]
            assert _listed(ordered) == _listed(want.join(other, on="k", how="outer", cluster=cluster))


def test_a_list_column_reaches_a_map_function_as_a_ragged_tensor_as_pandas_sees_its_lists(cluster: tmr.LocalCluster) -> None:
    t = tmr.table(
        {
            "k": np.array([1, 2, 1, 3, 4, 2, 1]),
            "s": np.array(["b", None, "日本", "", None, "a", "c"], object),
            "x": np.ma.MaskedArray([5.0, 1.0, 7.0, 2.0, 0.0, 3.0, 6.0], mask=[False, False, False, False, True, False, False]),
        }
    )
    other = tmr.table({"k": np.array([2, 9, 4, 1, 3])})

    def counted(rows: Any) -> dict[str, tf.Tensor]:
        return {
            "n": rows["top"].row_lengths(),
            "total": tf.reduce_sum(rows["big"], axis=1),
            "first": tf.strings.reduce_join(rows["top"][:, :1], axis=1),
            "null": tf.logical_not(rows.valid["top"]),
        }

    def exploded(rows: Any) -> dict[str, tf.Tensor]:
        return {"k": tf.repeat(rows["k"], rows["top"].row_lengths()), "s": rows["top"].flat_values}

    aggregates = {"top": ("s", ("top_k", 2)), "big": ("x", ("top_k", 3))}
    with (
        tmr.scatter(t, cluster=cluster, sizes=[4, 0, 3]) as r,
        r.group_by("k").agg(**aggregates, resident=True) as kept,
        tmr.scatter(other, cluster=cluster, sizes=[2, 0, 3]) as far,
        far.join(kept, on="k", how="left", maintain_order="left") as joined,  # 9: null lists; 4: empty ones
        joined.with_columns(counted) as near,
        joined.filter(lambda rows: rows["top"].row_lengths() > 0) as some,
        joined.map(exploded) as words,
    ):
        client = joined.collect()
        frame = client.to_pandas()
        assert frame["top"].isna().tolist() == [False, True, False, False, False]
        want = pd.DataFrame(
            {
                "n": [0 if v is None else len(v) for v in frame["top"]],
                "total": [0.0 if v is None else float(sum(v)) for v in frame["big"]],
                "first": ["" if v is None or not len(v) else v[0] for v in frame["top"]],
                "null": frame["top"].isna(),
            }
        )
        for got in (near.to_pandas(), client.with_columns(counted, cluster=cluster).to_pandas()):  # resident, client
            assert_cells(got[list(want.columns)], want)
        assert (
            some.to_pandas()["k"].tolist()
            == client.filter(lambda rows: rows["top"].row_lengths() > 0, cluster=cluster).to_pandas()["k"].tolist()
            == [2, 1, 3]
        )
        pairs = [(k, s) for k, top in zip(frame["k"], frame["top"], strict=True) if top is not None for s in top]
        assert list(zip(*words.to_dict().values(), strict=True)) == pairs == [(2, "a"), (1, "日本"), (1, "c"), (3, "")]
        with joined.with_columns(lambda rows: {"top": (rows["top"], rows.valid["top"])}) as same:  # a list column out
            assert [None if v is None else list(v) for v in same.to_pandas()["top"]] == [
                None if v is None else list(v) for v in frame["top"]
            ]
