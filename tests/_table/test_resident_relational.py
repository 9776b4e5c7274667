"""Resident tables joined, sorted and deduplicated on real workers, against pandas and the eager table.

Joins of a resident table with a resident table or a client table equal ``pandas.merge`` with SQL's nulls (as a
multiset of rows: a resident join's rows come in no set order), semi and anti joins equal it row for row as a
multiset; sorts equal ``sort_values(kind="stable")`` row for row, with or without ``limit=``; ``unique`` equals
``drop_duplicates`` sorted. Drawn tables with nulls, unicode, empty strings and NULs, on uneven partitions with
empty shards; no run over resident tables ships a row (``tmr.stats``). The keys' bytes made on the workers equal
the eager sort's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples, size_lists, table_columns
from test_table_relational import WORDS, by_repr, generated, pandas_join, pandas_sort, rows_of

import tfmapreduce as tmr
from tfmapreduce._table.order import sort_keys
from tfmapreduce._table.resident_order import order_key

HOWS = ["inner", "left", "right", "outer", "semi", "anti"]
JOIN_KEYS = [["s"], ["i"], ["s", "i", "d"], ["f", "u", "b", "t"]]
SORT_KEYS = ["s", "i", "d", "f", "u", "b", "t"]


def shipped_nothing(runs: Any) -> None:
    assert runs.runs
    assert all(run.bytes_sent == 0 for run in runs.runs), [run.bytes_sent for run in runs.runs]


@pytest.mark.parametrize("how", HOWS)
@settings(max_examples=examples(2), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), data=st.data())
def test_resident_join_equals_pandas_and_ships_no_row(
    cluster: tmr.LocalCluster, how: str, seed: int, data: st.DataObject
) -> None:
    nl, nr = data.draw(st.integers(0, 40)), data.draw(st.integers(0, 30))
    left = generated(seed, nl)
    right = generated(seed + 1, nr, value="w").select(["s", "i", "d", "f", "u", "b", "t", "w"])
    keys = data.draw(st.sampled_from(JOIN_KEYS))
    lsizes, rsizes = data.draw(size_lists(nl)), data.draw(size_lists(nr))
    strategy = data.draw(st.sampled_from(["auto", "hash", "broadcast"]))
    with tmr.scatter(left, cluster=cluster, sizes=lsizes) as lr, tmr.scatter(right, cluster=cluster, sizes=rsizes) as rr:
        with tmr.stats() as runs:
            joined = lr.join(rr, on=keys, how=how, strategy=strategy, reducers=data.draw(st.integers(1, 3)))
        try:
            shipped_nothing(runs)
            assert isinstance(joined, tmr.ResidentTable)
            got = joined.to_pandas()
        finally:
            joined.delete()
    want = pandas_join(left.to_pandas(), right.to_pandas(), keys, keys, how)
    eager = left.join(right, on=keys, how=how, cluster=cluster).to_pandas()
    columns = list(eager.columns)
    assert list(got.columns) == columns
    assert set(columns) == set(want.columns)
    assert by_repr(rows_of(got, columns)) == by_repr(rows_of(want, columns)) == by_repr(rows_of(eager, columns))


@settings(max_examples=examples(2), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), data=st.data())
def test_a_resident_join_in_the_left_order_equals_pandas_row_for_row(
    cluster: tmr.LocalCluster, seed: int, data: st.DataObject
) -> None:
    nl, nr = data.draw(st.integers(0, 30)), data.draw(st.integers(0, 20))
    left = generated(seed, nl)
    right = generated(seed + 1, nr, value="w").select(["s", "i", "d", "w"])
    how, keys = data.draw(st.sampled_from(HOWS)), data.draw(st.sampled_from([["s"], ["s", "i", "d"]]))
    lsizes, rsizes = data.draw(size_lists(nl)), data.draw(size_lists(nr))
    with tmr.scatter(left, cluster=cluster, sizes=lsizes) as lr, tmr.scatter(right, cluster=cluster, sizes=rsizes) as rr:
        other = data.draw(st.sampled_from([rr, right]))
        with tmr.stats() as runs, lr.join(other, on=keys, how=how, maintain_order="left", reducers=2) as joined:
            got = joined.to_pandas()
        shipped_nothing(runs)
    # pandas: every left row in order, each with its matches in the right's order, then the right rows left alone
    lf, rf = left.to_pandas().assign(_l=np.arange(nl)), right.to_pandas().assign(_r=np.arange(nr))
    want = pandas_join(lf, rf, keys, keys, how)
    order = [c for c in ("_l", "_r") if c in want.columns]
    want = want.sort_values(order, kind="stable", na_position="last")
    columns = list(left.join(right, on=keys, how=how, cluster=cluster).columns)
    assert list(got.columns) == columns
    assert rows_of(got, columns) == rows_of(want, columns)


@pytest.mark.parametrize("how", HOWS)
def test_a_resident_table_joins_a_client_table(cluster: tmr.LocalCluster, how: str) -> None:
    left, right = generated(3, 35), generated(4, 25, value="w").select(["s", "i", "d", "w"])
    keys = ["s", "i"]
    with tmr.scatter(left, cluster=cluster, sizes=[10, 0, 25]) as lr, lr.join(right, on=keys, how=how) as joined:
        got = joined.to_pandas()
    want = pandas_join(left.to_pandas(), right.to_pandas(), keys, keys, how)
    columns = list(left.join(right, on=keys, how=how, cluster=cluster).columns)
    assert list(got.columns) == columns
    assert by_repr(rows_of(got, columns)) == by_repr(rows_of(want, columns))


def test_joins_with_an_empty_side_equal_the_eager_table(cluster: tmr.LocalCluster) -> None:
    left = generated(5, 12)
    nothing = generated(6, 0, value="w").select(["s", "i", "w"])
    with tmr.scatter(left, cluster=cluster, sizes=[5, 7]) as lr, tmr.scatter(nothing, cluster=cluster) as er:
        for how in HOWS:
            eager = left.join(nothing, on=["s", "i"], how=how, cluster=cluster).to_pandas()
            for other in (nothing, er):
                with lr.join(other, on=["s", "i"], how=how) as joined:
                    got = joined.to_pandas()
                assert list(got.columns) == list(eager.columns)
                assert by_repr(rows_of(got, list(got.columns))) == by_repr(rows_of(eager, list(got.columns))), how
            with er.join(lr, on=["s", "i"], how=how) as joined:
                assert len(joined) == len(nothing.join(left, on=["s", "i"], how=how, cluster=cluster))
        with pytest.raises(TypeError, match="resident= does not apply"):
            lr.join(er, on="s", resident=True)
        with pytest.raises(TypeError, match="return_stats= does not apply"):
            lr.sort("s", return_stats=True)


def test_resident_join_widens_keys_keeps_left_names_and_nulls_never_match(cluster: tmr.LocalCluster) -> None:
    left = tmr.table({"id": np.array([1, 2, 3], np.int64), "x": np.array(["a", "b", "c"])})
    right = tmr.table({"key": np.ma.MaskedArray(np.array([3, 1, 1, 0], np.int32), [0, 0, 0, 1]), "x": np.arange(4.0)})
    with tmr.scatter(left, cluster=cluster) as lr, tmr.scatter(right, cluster=cluster, sizes=[0, 4]) as rr:
        with lr.join(rr, left_on="id", right_on="key", how="outer") as j:
            assert j.columns == ("id", "x", "x_right")
            assert j.schema.fields[0].type.name == "int64"
            got = by_repr(rows_of(j.to_pandas(), list(j.columns)))
        assert got == by_repr([(1, "a", 1), (1, "a", 2), (2, "b", None), (3, "c", 0), (None, None, 3)])
        # ("ab", "c") and ("a", "bc") join to the same text; a null key meets no null key
        a = tmr.table({"a": np.array(["ab", "a", None], object), "b": np.array(["c", "bc", "c"])})
        b = tmr.table({"a": np.array(["a", None], object), "b": np.array(["bc", "c"]), "n": np.array([1, 2])})
        with tmr.scatter(a, cluster=cluster) as ar, tmr.scatter(b, cluster=cluster) as br:
            with ar.join(br, on=["a", "b"], how="outer") as j:
                assert by_repr(rows_of(j.to_pandas(), ["a", "b", "n"])) == by_repr(
                    [("ab", "c", None), ("a", "bc", 1), (None, "c", None), (None, "c", 2)]
                )
            with ar.join(br, on=["a", "b"], how="anti") as j:
                assert sorted(j.to_dict()["b"].tolist()) == ["c", "c"]
            with pytest.raises(TypeError, match="left key 'a' is string and right key 'n' is int64"):
                ar.join(br, left_on="a", right_on="n")
            with pytest.raises(ValueError, match="how= must be one of"):
                ar.join(br, on="a", how="full")
            with pytest.raises(ValueError, match=r"maintain_order= must be one of \['none', 'left'\].*got 'right'"):
                ar.join(br, on="a", maintain_order="right")
            with pytest.raises(TypeError, match="a ResidentTable or a Table"):
                ar.join(b.to_pandas(), on="a")


@pytest.mark.parametrize("how", ["inner", "outer"])
def test_a_resident_join_keeps_each_key_on_one_shard_and_sorts_into_pandas_order(cluster: tmr.LocalCluster, how: str) -> None:
    # the documented order: none set (as Spark, and polars without maintain_order), but with strategy="hash" every row
    # of a key without nulls lies on its reducer's shard; sort() gives an order, equal to pandas' merge sorted so
    left = tmr.table({"k": np.array([3, 1, 2, 3, 1, 5, 3]), "x": np.arange(7.0)})
    right = tmr.table({"k": np.ma.MaskedArray(np.array([1, 3, 4, 3, 0]), [0, 0, 0, 0, 1]), "y": np.array(list("abcde"))})
    with (
        tmr.scatter(left, cluster=cluster, sizes=[4, 3]) as lr,
        tmr.scatter(right, cluster=cluster, sizes=[2, 3]) as rr,
        lr.join(rr, on="k", how=how, strategy="hash", reducers=3) as joined,
    ):
        keys = joined.column("k")
        shard = np.repeat(np.arange(len(joined.shards)), joined.shards)
        valid = keys.valid.gather() if keys.valid is not None else np.ones(len(joined), bool)
        homes: dict[int, set[int]] = {}
        for key, where in zip(keys.values.gather()[valid].tolist(), shard[valid].tolist(), strict=True):
            homes.setdefault(key, set()).add(where)
        assert all(len(h) == 1 for h in homes.values()), homes
        with joined.sort(["k", "x", "y"]) as ordered:
            got = ordered.to_pandas()
    want = pandas_sort(pandas_join(left.to_pandas(), right.to_pandas(), ["k"], ["k"], how), ["k", "x", "y"], [False] * 3, True)
    assert rows_of(got, ["k", "x", "y"]) == rows_of(want, ["k", "x", "y"])


@settings(max_examples=examples(20), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(0, 40), data=st.data())
def test_order_keys_made_by_tensorflow_equal_the_eager_sort_keys(seed: int, rows: int, data: st.DataObject) -> None:
    t = tmr.table({**generated(seed, rows).to_dict(), "x": data.draw(table_columns(rows))["x0"]})
    by = data.draw(st.lists(st.sampled_from([*SORT_KEYS, "x"]), min_size=1, max_size=4, unique=True))
    down = data.draw(st.lists(st.booleans(), min_size=len(by), max_size=len(by)))
    last = data.draw(st.lists(st.booleans(), min_size=len(by), max_size=len(by)))
    columns = [t.column(c) for c in by]
    tensors = [
        (
            tf.constant(c.values.tolist() if c.values.dtype == object else c.values, shape=[rows]),
            None if c.valid is None else tf.constant(c.valid),
        )
        for c in columns
    ]
    got = order_key(tensors, down, last).numpy().tolist() if rows else []
    want = sort_keys(columns, down, last)
    if want.dtype.kind == "S":  # numpy's fixed-width bytes drop trailing NULs (equal widths: the same order)
        got = [k.rstrip(b"\0") for k in got]
    assert got == [bytes(k) for k in want.tolist()]


@settings(max_examples=examples(3), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), data=st.data())
def test_resident_sort_and_limit_equal_pandas_and_ship_no_row(cluster: tmr.LocalCluster, seed: int, data: st.DataObject) -> None:
    rows = data.draw(st.integers(0, 60))
    t = generated(seed, rows)
    by = data.draw(st.lists(st.sampled_from(SORT_KEYS), min_size=1, max_size=3, unique=True))
    down = data.draw(st.lists(st.booleans(), min_size=len(by), max_size=len(by)))
    last = data.draw(st.booleans())
    n = data.draw(st.integers(0, rows + 2))
    want = pandas_sort(t.to_pandas(), by, down, last)
    columns = list(t.columns)
    with tmr.scatter(t, cluster=cluster, sizes=data.draw(size_lists(rows))) as r:
        with tmr.stats() as runs:
            ordered = r.sort(by, descending=down, nulls_last=last, reducers=2)
            top = r.sort(by, descending=down, nulls_last=last, limit=n)
        try:
            if rows:
                shipped_nothing(runs)
            assert isinstance(ordered, tmr.ResidentTable)
            assert isinstance(top, tmr.ResidentTable)
            assert ordered.schema == r.schema
            assert rows_of(ordered.to_pandas(), columns) == rows_of(want, columns)
            assert rows_of(top.to_pandas(), columns) == rows_of(want.head(n), columns)
        finally:
            ordered.delete()
            top.delete()


def test_resident_sort_orders_nan_as_numpy_and_strings_by_bytes(cluster: tmr.LocalCluster) -> None:
    x = np.array([np.nan, 1.0, -0.0, 0.0, np.nan, -np.inf, np.inf, -2.0])
    t = tmr.table({"x": x, "row": np.arange(len(x))})
    words = tmr.table({"w": WORDS[::-1].copy()})
    with tmr.scatter(t, cluster=cluster, sizes=[3, 0, 5]) as r, tmr.scatter(words, cluster=cluster, sizes=[3, 0, 4]) as w:
        with r.sort("x") as s:
            assert s.to_dict()["row"].tolist() == np.argsort(x, kind="stable").tolist()
        down = pd.Series(x).sort_values(ascending=False, na_position="first", kind="stable").index.tolist()
        with r.sort("x", descending=True, limit=3) as s:
            assert s.to_dict()["row"].tolist() == down[:3]
        with w.sort("w", descending=True) as s:
            assert s.to_dict()["w"].tolist() == sorted(WORDS.tolist(), key=str.encode, reverse=True)
        with r.sort("x", limit=0) as s:
            assert len(s) == 0
            assert s.columns == ("x", "row")
        with pytest.raises(TypeError, match="descending= must be a bool or one bool for each"):
            r.sort(["x", "row"], descending=[True])
        with pytest.raises(KeyError, match="did you mean 'row'"):
            r.sort("rows")
        with pytest.raises(ValueError, match="limit= must be None or an int"):
            r.sort("x", limit=-1)


@pytest.mark.parametrize("columns", [["s"], ["s", "i", "d"], ["f", "b", "t", "u"]], ids="-".join)
def test_resident_unique_equals_drop_duplicates_and_ships_no_row(cluster: tmr.LocalCluster, columns: list[str]) -> None:
    t = generated(7, 50)
    with tmr.scatter(t, cluster=cluster, sizes=[20, 0, 30]) as r:
        with tmr.stats() as runs:
            distinct = r.unique(columns, reducers=2)
        with distinct:
            shipped_nothing(runs)
            assert isinstance(distinct, tmr.ResidentTable)
            assert distinct.schema == t.select(columns).schema
            got = distinct.to_pandas()
        with r.filter(lambda rows: tf.zeros(tf.shape(rows["s"]), tf.bool)) as empty, empty.unique(columns) as none:
            assert len(none) == 0
            assert none.columns == tuple(columns)
    want = pandas_sort(t.to_pandas()[columns].drop_duplicates(), columns, [False] * len(columns), True)
    assert rows_of(got, columns) == rows_of(want, columns)
