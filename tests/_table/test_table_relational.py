"""Tables joined, sorted and deduplicated on real workers, against pandas.

Joins equal ``pandas.merge`` with SQL's nulls (a null key matches nothing: pandas merges on the rows whose keys
hold no null, and the unmatched rows of a kept side are added), semi and anti joins ``isin`` on the same rows;
sorts equal ``sort_values(kind="stable")`` (exactly, row for row), with or without ``limit=``; ``unique`` equals
``drop_duplicates`` sorted by the columns.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples, size_lists

import tfmapreduce as tmr
from tfmapreduce._table import join_keys as keys_module
from tfmapreduce._table.convert import from_numpy
from tfmapreduce._table.order import sort_keys

WORDS = np.array(["", "a", "a\0", "ab", "é", "日本", "\0"], dtype=object)
"""Strings whose bytes are prefixes of each other's, hold a NUL, or are not ASCII."""


def generated(seed: int, rows: int, value: str = "v") -> tmr.Table:
    """A table of key columns of several types (few distinct values, nulls in some) and a value column."""
    rng = np.random.default_rng(seed)

    def nulls() -> np.ndarray:
        return rng.random(rows) < 0.15

    words = WORDS[rng.integers(0, len(WORDS), rows)]
    words[nulls()] = None
    days = (np.datetime64("2024-02-27") + rng.integers(0, 3, rows)).astype("datetime64[D]")
    days[nulls()] = np.datetime64("NaT")
    return tmr.table(
        {
            "s": words,
            "i": np.ma.MaskedArray(rng.integers(-2, 2, rows).astype(np.int32), mask=nulls()),
            "d": days,
            "f": np.ma.MaskedArray(rng.choice([-1.5, 0.0, 2.0], rows), mask=nulls()),
            "u": rng.choice(np.array([0, 2**53, 2**63], np.uint64), rows),
            "b": rng.random(rows) < 0.5,
            "t": np.datetime64("2024-01-01T00:00", "ms") + rng.integers(0, 3, rows).astype("timedelta64[h]"),
            value: rng.normal(size=rows).round(3),
        }
    )


def cell(v: Any) -> Any:
    """A value as Python compares it, None for every spelling of a null."""
    if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, pd.Timestamp | np.datetime64):
        return pd.Timestamp(v).to_pydatetime()
    v = v.item() if isinstance(v, np.generic) else v
    return int(v) if isinstance(v, float) and v.is_integer() else v  # pandas makes uint64 with a null float


def rows_of(frame: pd.DataFrame, columns: list[str]) -> list[tuple[Any, ...]]:
    return [tuple(cell(v) for v in row) for row in frame[columns].itertuples(index=False)]


def pandas_join(left: pd.DataFrame, right: pd.DataFrame, lkeys: list[str], rkeys: list[str], how: str) -> pd.DataFrame:
    """pandas' merge with SQL's nulls: only rows whose keys hold no null match; the kept sides' others added."""
    lnull, rnull = left[lkeys].isna().any(axis=1), right[rkeys].isna().any(axis=1)
    left = left.assign(_row=np.arange(len(left)))  # for the order: pandas adds no row of a null key in place
    if how in ("semi", "anti"):
        found = set(rows_of(right[~rnull], rkeys))
        hit = np.array([not n and r in found for n, r in zip(lnull, rows_of(left, lkeys), strict=True)], bool)
        return left[hit if how == "semi" else ~hit].drop(columns="_row")
    merged = left[~lnull].merge(right[~rnull], left_on=lkeys, right_on=rkeys, how=how, suffixes=("", "_right"))
    merged = merged.drop(columns=[r for r, k in zip(rkeys, lkeys, strict=True) if r != k and r in merged])
    extra = []
    if how in ("left", "outer"):
        extra.append(left[lnull])
    if how in ("right", "outer"):
        names = {c: c + "_right" for c in right.columns if c not in rkeys and c in left.columns}
        extra.append(right[rnull].rename(columns={**names, **dict(zip(rkeys, lkeys, strict=True))}))
    joined = pd.concat([merged, *extra], ignore_index=True) if extra else merged
    if how in ("inner", "left"):
        joined = joined.sort_values("_row", kind="stable")
    return joined.drop(columns="_row")


def by_repr(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=repr)


@pytest.fixture(scope="module")
def sides() -> tuple[tmr.Table, tmr.Table]:
    return generated(1, 40), generated(2, 30, value="w").select(["s", "i", "d", "f", "u", "b", "t", "w"])


JOIN_KEYS = [["s"], ["i"], ["s", "i", "d"], ["f", "u", "b", "t"]]


@pytest.mark.parametrize("how", ["inner", "left", "right", "outer", "semi", "anti"])
def test_join_equals_pandas_merge_with_sql_nulls(cluster: tmr.LocalCluster, sides: tuple[tmr.Table, tmr.Table], how: str) -> None:
    left, right = sides
    lf, rf = left.to_pandas(), right.to_pandas()
    for j, keys in enumerate(JOIN_KEYS):
        # the right side's other key columns are values there, which clash with the left's names
        strategy = ("hash", "broadcast")[j % 2]
        got = left.join(right, on=keys, how=how, cluster=cluster, strategy=strategy, reducers=1 + j % 3).to_pandas()
        want = pandas_join(lf, rf, keys, keys, how)
        assert set(got.columns) == set(want.columns), (keys, got.columns, want.columns)
        columns = list(got.columns)
        if how in ("semi", "anti"):
            assert columns == list(lf.columns)
            assert rows_of(got, columns) == rows_of(want, columns)  # the left's rows, in order
        else:
            assert columns[: len(keys)] == keys
            assert by_repr(rows_of(got, columns)) == by_repr(rows_of(want, columns)), (how, keys)
        if how in ("inner", "left"):  # in the left's order, as pandas gives it
            assert rows_of(got, columns) == rows_of(want, columns)


KEY_POOLS: dict[str, tuple[list[Any], Any]] = {
    "string": (WORDS.tolist(), object),
    "float": ([-0.0, 0.0, 1.5, -1.5, math.nan], np.float64),
    "wide": ([-(2**62), 0, 7, 2**62], np.int64),  # a range far wider than the rows: coded by distinct values
    "small": ([-2, 0, 1], np.int32),
    "uint64": ([0, 2**63, 2**64 - 1], np.uint64),
    "bool": ([False, True], np.bool_),
    "date": (["2024-02-28", "2024-02-29"], "datetime64[D]"),
}


def _comparable(v: Any) -> Any:
    return "NaN" if isinstance(v, float) and math.isnan(v) else v  # every NaN one value, as a group-by's key


@settings(max_examples=examples(60), deadline=None)
@given(data=st.data(), tight=st.booleans())
def test_join_keys_are_equal_exactly_where_every_key_column_is(data: st.DataObject, tight: bool) -> None:
    # one int64 key a row, made on the client without a per-row Python step; ``tight``: the packed key re-coded
    # after every column (as where the product of the columns' ranges would overflow an int64)
    kinds = data.draw(st.lists(st.sampled_from(sorted(KEY_POOLS)), min_size=1, max_size=4))
    rows = (data.draw(st.integers(0, 25)), data.draw(st.integers(0, 25)))
    sides: tuple[list[Any], list[Any]] = ([], [])
    for j, kind in enumerate(kinds):
        pool, dtype = KEY_POOLS[kind]
        for side, n in zip(sides, rows, strict=True):
            side.append(from_numpy(f"k{j}", np.array(data.draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n)), dtype)))
    with pytest.MonkeyPatch.context() as patch:
        if tight:
            patch.setattr(keys_module, "_FITS", 2.0)
        lkey, rkey = keys_module.join_keys(*sides, (np.arange(rows[0]), np.arange(rows[1])))
    assert lkey.dtype == rkey.dtype == np.int64
    tuples = [
        [tuple(_comparable(c.values[i : i + 1].tolist()[0]) for c in side) for i in range(n)]
        for side, n in zip(sides, rows, strict=True)
    ]
    keys = [*lkey.tolist(), *rkey.tolist()]
    every = [*tuples[0], *tuples[1]]
    for a in range(len(keys)):
        for b in range(len(keys)):
            assert (keys[a] == keys[b]) == (every[a] == every[b]), (every[a], every[b])


@settings(max_examples=examples(6), deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    rows=st.tuples(st.integers(0, 30), st.integers(0, 30)),
    keys=st.lists(st.sampled_from(["s", "i", "d", "f", "u", "b", "t"]), min_size=1, max_size=4, unique=True),
    how=st.sampled_from(["inner", "left", "right", "outer", "semi", "anti"]),
)
def test_join_on_drawn_keys_of_mixed_types_equals_pandas(
    cluster: tmr.LocalCluster, seed: int, rows: tuple[int, int], keys: list[str], how: str
) -> None:
    # null keys, unicode and empty strings, several key columns of mixed types, empty tables
    left, right = generated(seed, rows[0]), generated(seed + 1, rows[1], value="w")
    joined = left.join(right, on=keys, how=how, cluster=cluster)
    got, want = joined.to_pandas(), pandas_join(left.to_pandas(), right.to_pandas(), keys, keys, how)
    columns = list(got.columns)  # the keys first (the left's columns as they are for semi and anti)
    assert set(columns) == set(want.columns)
    assert columns[: len(keys)] == keys if how not in ("semi", "anti") else columns == list(left.columns)
    if how in ("inner", "left", "semi", "anti"):  # in the left's order, as pandas gives it
        assert rows_of(got, columns) == rows_of(want, columns), (how, keys)
    else:
        assert by_repr(rows_of(got, columns)) == by_repr(rows_of(want, columns)), (how, keys)
    for name in columns:  # each column of its table's type
        side = left if name in left.columns else right
        assert joined.schema[name].type == side.schema[name.removesuffix("_right")].type, name


@pytest.mark.parametrize("how", ["semi", "anti"])
def test_semi_and_anti_joins_on_keys_of_any_range_make_no_run(cluster: tmr.LocalCluster, how: str) -> None:
    wide = np.array([3, 1 << 40, -(1 << 62), 7, 3, 9], np.int64)  # a range no table of seen keys holds
    left = tmr.table({"k": wide, "v": np.arange(6.0)})
    for keys in (np.array([1 << 40, 3, 3], np.int64), np.array([3, 7, 8], np.int64), np.zeros(0, np.int64)):
        right = tmr.table({"k": keys})
        with tmr.stats() as seen:
            got = left.join(right, on="k", how=how, cluster=cluster).to_pandas()
        want = pandas_join(left.to_pandas(), right.to_pandas(), ["k"], ["k"], how)
        assert rows_of(got, ["k", "v"]) == rows_of(want, ["k", "v"])
        assert seen.runs == []  # each left key looked up on the client


def test_join_left_on_right_on_widens_integers_and_keeps_left_names(cluster: tmr.LocalCluster) -> None:
    left = tmr.table({"id": np.array([1, 2, 3], np.int64), "x": np.array(["a", "b", "c"])})
    right = tmr.table({"key": np.array([3, 1, 1], np.int32), "x": np.array([30.0, 10.0, 11.0])})
    got = left.join(right, left_on="id", right_on="key", how="outer", cluster=cluster).to_dict()
    assert list(got) == ["id", "x", "x_right"]
    assert got["id"].tolist() == [1, 1, 2, 3]
    assert got["x_right"].tolist() == [10.0, 11.0, None, 30.0]


def test_join_on_several_integer_keys_packs_them_into_one(cluster: tmr.LocalCluster) -> None:
    left = pd.DataFrame({"a": [3, -2, None, 3, 7], "b": np.array([1, 2**40, 5, 2, 1], np.int64), "x": np.arange(5)})
    right = pd.DataFrame({"a": np.array([3, 3, 7, -2], np.int32), "b": np.array([1, 1, 5, 2**40], np.int64), "y": [9, 8, 7, 6]})
    lt, rt = tmr.table(left.astype({"a": "Int64"})), tmr.table(right)
    for how in ("inner", "semi", "anti"):
        got = lt.join(rt, on=["a", "b"], how=how, cluster=cluster).to_pandas()
        want = pandas_join(lt.to_pandas(), right, ["a", "b"], ["a", "b"], how)
        assert rows_of(got, list(want.columns)) == rows_of(want, list(want.columns)), how


def test_join_keys_are_exact_and_nulls_never_match(cluster: tmr.LocalCluster) -> None:
    # ("ab", "c") and ("a", "bc") join to the same text; a null key meets no null key
    left = tmr.table({"a": np.array(["ab", "a", None], object), "b": np.array(["c", "bc", "c"])})
    right = tmr.table({"a": np.array(["a", None], object), "b": np.array(["bc", "c"]), "n": np.array([1, 2])})
    got = left.join(right, on=["a", "b"], how="outer", cluster=cluster).to_dict()
    assert got["a"].tolist() == ["ab", "a", None, None]
    assert got["n"].tolist() == [None, 1, None, 2]
    assert len(left.join(right, on=["a", "b"], how="anti", cluster=cluster)) == 2
    empty = right.filter(lambda rows: rows["n"] > 5, cluster=cluster)
    assert len(left.join(empty, on=["a", "b"], how="left", cluster=cluster)) == 3  # no run: nothing can match


def test_join_errors_name_the_argument_and_the_fix(cluster: tmr.LocalCluster) -> None:
    t = tmr.table({"city": np.array(["a"]), "n": np.array([1])})
    with pytest.raises(KeyError, match="did you mean 'city'"):
        t.join(t, on="cty", cluster=cluster)
    with pytest.raises(ValueError, match="how= must be one of"):
        t.join(t, on="city", how="full", cluster=cluster)
    with pytest.raises(ValueError, match="either as on="):
        t.join(t, on="city", left_on="city", cluster=cluster)
    with pytest.raises(TypeError, match="left key 'city' is string and right key 'n' is int64"):
        t.join(t, left_on="city", right_on="n", cluster=cluster)
    with pytest.raises(TypeError, match="resident= does not apply"):
        t.join(t, on="city", resident=True, cluster=cluster)
    with pytest.raises(TypeError, match="return_stats= does not apply"):
        t.sort("city", return_stats=True, cluster=cluster)


def pandas_sort(frame: pd.DataFrame, by: list[str], descending: list[bool], nulls_last: bool) -> pd.DataFrame:
    return frame.sort_values(
        by, ascending=[not d for d in descending], na_position="last" if nulls_last else "first", kind="stable"
    ).reset_index(drop=True)


SORT_KEYS = ["s", "i", "d", "f", "u", "b", "t"]


@settings(max_examples=examples(40), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 50), data=st.data())
def test_sort_keys_order_rows_as_pandas(seed: int, rows: int, data: st.DataObject) -> None:
    # the encoding alone (no run): keys sorted as bytes give pandas' stable order
    t = generated(seed, rows)
    by = data.draw(st.lists(st.sampled_from(SORT_KEYS), min_size=1, max_size=4, unique=True))
    down = data.draw(st.lists(st.booleans(), min_size=len(by), max_size=len(by)))
    last = data.draw(st.booleans())
    keys = sort_keys([t.column(c) for c in by], down, [last] * len(by))
    order = sorted(range(rows), key=lambda r: (bytes(keys[r]), r))
    want = pandas_sort(t.to_pandas(), by, down, last)
    assert rows_of(t.to_pandas().iloc[order], list(t.columns)) == rows_of(want, list(t.columns))


@settings(max_examples=examples(3), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), data=st.data())
def test_sort_and_limit_equal_pandas(cluster: tmr.LocalCluster, seed: int, data: st.DataObject) -> None:
    rows = data.draw(st.integers(1, 60))
    t = generated(seed, rows)
    by = data.draw(st.lists(st.sampled_from(SORT_KEYS), min_size=1, max_size=3, unique=True))
    down = data.draw(st.lists(st.booleans(), min_size=len(by), max_size=len(by)))
    last = data.draw(st.booleans())
    sizes = data.draw(size_lists(rows))
    want = pandas_sort(t.to_pandas(), by, down, last)
    columns = list(t.columns)
    got = t.sort(by, descending=down, nulls_last=last, cluster=cluster, sizes=sizes, reducers=2)
    assert rows_of(got.to_pandas(), columns) == rows_of(want, columns)
    n = data.draw(st.integers(1, rows + 2))
    top = t.sort(by, descending=down, nulls_last=last, limit=n, cluster=cluster, sizes=sizes)
    assert rows_of(top.to_pandas(), columns) == rows_of(want.head(n), columns)


def test_a_sort_on_several_columns_makes_its_keys_in_its_one_run_and_equals_duckdb(cluster: tmr.LocalCluster) -> None:
    duckdb = pytest.importorskip("duckdb")
    frame = pd.DataFrame(
        {
            "s": ["b", None, "", "日本", "b", "ü", "a", None, "b", ""],
            "i": pd.array([1, None, 3, 2, 5, None, 0, 4, None, 3], dtype="Int64"),
            "d": pd.to_datetime(["2024-01-02", None, "2023-12-31", "2024-01-01", "2024-01-02"] * 2).date,
        }
    )
    want = duckdb.sql("SELECT s, i, d FROM frame ORDER BY s ASC NULLS LAST, i DESC NULLS FIRST, d DESC NULLS LAST").df()
    want["d"] = [None if pd.isna(v) else v.date() for v in want["d"]]  # (DuckDB gives a DATE as datetime64)
    t = tmr.table(frame)
    with tmr.stats() as runs:  # the rows' keys made on the workers, in the sort's own (range-partitioned) run
        got = t.sort(
            ["s", "i", "d"],
            descending=[False, True, True],
            nulls_last=[True, False, True],
            cluster=cluster,
            sizes=[0, 4, 0, 6],
            reducers=3,
        )
    assert len(runs.runs) == 1
    assert rows_of(got.to_pandas(), ["s", "i", "d"]) == rows_of(want, ["s", "i", "d"])
    top = t.sort(["s", "i", "d"], descending=[False, True, True], nulls_last=[True, False, True], limit=4, cluster=cluster)
    assert rows_of(top.to_pandas(), ["s", "i", "d"]) == rows_of(want.head(4), ["s", "i", "d"])


def test_sort_orders_nan_as_numpy_and_strings_by_bytes(cluster: tmr.LocalCluster) -> None:
    x = np.array([np.nan, 1.0, -0.0, 0.0, np.nan, -np.inf, np.inf, -2.0])
    t = tmr.table({"x": x, "row": np.arange(len(x))})
    assert t.sort("x", cluster=cluster).to_dict()["row"].tolist() == np.argsort(x, kind="stable").tolist()
    down = pd.Series(x).sort_values(ascending=False, na_position="first", kind="stable").index.tolist()
    assert t.sort("x", descending=True, cluster=cluster).to_dict()["row"].tolist() == down
    assert t.sort("x", descending=True, limit=3, cluster=cluster).to_dict()["row"].tolist() == down[:3]
    words = tmr.table({"w": WORDS[::-1].copy()})
    assert words.sort("w", cluster=cluster).to_dict()["w"].tolist() == sorted(WORDS.tolist(), key=str.encode)
    desc = words.sort("w", descending=True, limit=4, cluster=cluster, sizes=[3, 0, 4]).to_dict()["w"].tolist()
    assert desc == sorted(WORDS.tolist(), key=str.encode, reverse=True)[:4]
    assert t.limit(2).to_dict()["row"].tolist() == [0, 1]
    assert len(t.sort("x", limit=0, cluster=cluster)) == 0
    with pytest.raises(TypeError, match="descending= must be a bool or one bool for each"):
        t.sort(["x", "row"], descending=[True], cluster=cluster)
    with pytest.raises(KeyError, match="did you mean 'row'"):
        t.sort("rows", cluster=cluster)


@pytest.mark.parametrize("columns", [["s"], ["s", "i", "d"], ["f", "b", "t", "u"]], ids="-".join)
def test_unique_equals_drop_duplicates(cluster: tmr.LocalCluster, columns: list[str]) -> None:
    t = generated(7, 50)
    distinct = t.unique(columns, cluster=cluster, reducers=2)
    assert distinct.schema == t.select(columns).schema  # types kept (dates stay dates)
    got = distinct.to_pandas()
    want = pandas_sort(t.to_pandas()[columns].drop_duplicates(), columns, [False] * len(columns), True)
    assert list(got.columns) == columns
    assert rows_of(got, columns) == rows_of(want, columns)


def test_a_join_sort_and_unique_of_tables_of_other_row_counts_compile_nothing(cluster: tmr.LocalCluster) -> None:
    """Client tables of new row counts (and values: nulls, unicode) at the same places run the programs of the first."""
    compiled = []
    for n in (45, 71):
        left, right = generated(n, n), generated(n + 1, n // 3, value="w").select(["s", "i", "w"])
        lf, rf = left.to_pandas(), right.to_pandas()
        with tmr.stats() as runs:
            for how in ("inner", "outer"):
                got = left.join(right, on=["s"], how=how, cluster=cluster, reducers=2).to_pandas()
                want = pandas_join(lf, rf, ["s"], ["s"], how)
                assert by_repr(rows_of(got, list(want.columns))) == by_repr(rows_of(want, list(want.columns)))
            got = left.sort(["s", "f"], descending=[True, False], cluster=cluster, sizes=[0, n - 9, 9], reducers=2)
            want = pandas_sort(lf, ["s", "f"], [True, False], True)
            assert rows_of(got.to_pandas(), list(lf.columns)) == rows_of(want, list(lf.columns))
            distinct = left.unique(["s", "i"], cluster=cluster, reducers=2).to_pandas()
            want = pandas_sort(lf[["s", "i"]].drop_duplicates(), ["s", "i"], [False, False], True)
            assert rows_of(distinct, ["s", "i"]) == rows_of(want, ["s", "i"])
        compiled.append([r.compiled for r in runs.runs])
    assert not any(compiled[1]), compiled
