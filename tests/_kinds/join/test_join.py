"""tmr.join: every how and strategy against pandas.merge, on real workers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfmapreduce as tmr
from tests.strategies import examples, size_lists
from tfmapreduce._engine import call as _call

HOWS = ("inner", "left", "right", "outer")


def frame(keys: np.ndarray, values: Any, name: str) -> pd.DataFrame:
    columns = values if isinstance(values, tuple) else (values,)
    names = [f"{name}_{j}" for j in range(len(columns))] if isinstance(values, tuple) else [name]
    return pd.DataFrame({"key": keys, **dict(zip(names, columns, strict=True))})


def rows(df: pd.DataFrame) -> list[tuple[Any, ...]]:
    """The rows as a sorted multiset, NaN (a missing value) as None, floats rounded away from representation noise."""

    def cell(v: Any) -> Any:
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return None
        return round(float(v), 9) if isinstance(v, (float, np.floating)) else v

    return sorted((tuple(cell(v) for v in r) for r in df.itertuples(index=False)), key=repr)


def check(result: tmr.JoinResult, left: tuple[Any, Any], right: tuple[Any, Any], how: str) -> None:
    """The join equals pandas.merge(on="key", how=how) row for row, as a multiset; masks agree with the filled values."""
    expected = pd.merge(frame(*left, "left"), frame(*right, "right"), on="key", how=how)
    got = result.to_pandas()
    assert list(got.columns) == list(expected.columns)
    assert rows(got) == rows(expected)
    assert len(result) == len(expected) == len(result.left_matched) == len(result.right_matched)
    assert sum(n for _, n in result.parts) == len(result)
    if how == "inner":
        assert result.left_matched.all()
        assert result.right_matched.all()


@st.composite
def sides(draw: st.DrawFn) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Two sides whose keys come from one small pool (so they repeat and match), of any length including 0."""
    kind = draw(st.sampled_from(["int32", "int64", "str"]))
    if kind == "str":
        pool: list[Any] = draw(st.lists(st.text(max_size=3), min_size=1, max_size=6, unique=True))
    else:
        pool = draw(st.lists(st.integers(-(2**31) + 1, 2**31 - 1), min_size=1, max_size=6, unique=True))
    dtype = object if kind == "str" else np.dtype(kind)

    def side(n: int) -> np.ndarray:
        return np.array([draw(st.sampled_from(pool)) for _ in range(n)], dtype=dtype)

    lk, rk = side(draw(st.integers(0, 25))), side(draw(st.integers(0, 25)))
    lv = np.arange(len(lk), dtype=np.float64) + 0.5
    rv = np.arange(len(rk), dtype=np.int64) * 10
    return (lk, lv), (rk, rv)


@settings(max_examples=examples(30))
@given(sides(), st.sampled_from(HOWS), st.sampled_from(["hash", "broadcast", "auto"]), st.integers(1, 4), st.data())
def test_join_equals_pandas_merge_for_any_keys_partition_and_reducers(
    cluster: tmr.LocalCluster, case: Any, how: str, strategy: str, reducers: int, data: st.DataObject
) -> None:
    left, right = case
    sizes = data.draw(size_lists(len(left[0]) + len(right[0]), max_shards=4))
    result = tmr.join(left, right, how=how, strategy=strategy, cluster=cluster, sizes=sizes, reducers=reducers)
    check(result, left, right, how)
    if strategy != "auto":
        assert result.strategy == strategy


@pytest.mark.parametrize("how", HOWS)
def test_the_stock_join_where_a_task_lacks_the_native_kernels(cluster: tmr.LocalCluster, how: str) -> None:
    rng = np.random.default_rng(3)
    left = (rng.integers(0, 30, 400), rng.random(400))
    right = (rng.integers(10, 40, 300), rng.integers(0, 9, 300))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_call, "available", lambda cluster, timeout, *ops: False)
        for strategy in ("hash", "broadcast"):
            check(tmr.join(left, right, how=how, strategy=strategy, cluster=cluster, reducers=3), left, right, how)


def test_string_keys_tuples_of_columns_and_rows_of_several_values(cluster: tmr.LocalCluster) -> None:
    left = (np.array(["", "é", "a", "é", "x"]), (np.arange(5), np.array(["p", "q", "r", "s", "t"])))
    right = (np.array(["é", "", "zz"]), np.array([1.5, 2.5, 3.5]))
    for how in HOWS:
        result = tmr.join(left, right, how=how, cluster=cluster)
        check(result, left, right, how)
        assert all(isinstance(k, str) for k in result.keys)
    wide = tmr.join((np.array([1, 2, 1]), np.arange(6.0).reshape(3, 2)), (np.array([1]), np.array([7])), cluster=cluster)
    order = np.argsort(wide.left[:, 0])
    np.testing.assert_array_equal(wide.left[order], [[0.0, 1.0], [4.0, 5.0]])
    np.testing.assert_array_equal(wide.right, [7, 7])


def test_no_matching_key_one_key_everywhere_and_empty_sides(cluster: tmr.LocalCluster) -> None:
    a, b = (np.array([1, 2, 3]), np.array([1.0, 2.0, 3.0])), (np.array([7, 8]), np.array([7, 8]))
    empty = (np.array([], np.int64), np.array([], np.int64))
    one = (np.full(40, 5), np.arange(40.0)), (np.full(30, 5), np.arange(30))
    for how in ("left", "outer"):
        for strategy in ("hash", "broadcast"):
            for left, right in ((a, b), one, (a, empty), (empty, b), (empty, empty)):
                check(tmr.join(left, right, how=how, strategy=strategy, cluster=cluster), left, right, how)


@pytest.mark.parametrize("how", ["inner", "outer"])
@pytest.mark.parametrize("strategy", ["hash", "broadcast"])
def test_a_join_of_sides_of_other_row_counts_compiles_nothing(cluster: tmr.LocalCluster, how: str, strategy: str) -> None:
    """Host sides fed shard by shard of new row counts (and values) at the same places run the program of the first,
    an empty shard between the sides; unicode keys."""
    rng = np.random.default_rng(11)
    pool = np.array(["", "é", "ß", "k", "naïve", "zz"], dtype=object)
    runs = []
    for n, m in ((120, 50), (333, 7)):
        left = (rng.choice(pool, n), rng.random(n))
        right = (rng.choice(pool[1:], m), rng.integers(0, 9, m))
        sizes = [n // 2, n - n // 2, 0, m]
        result, stats = tmr.join(
            left, right, how=how, strategy=strategy, cluster=cluster, sizes=sizes, reducers=2, return_stats=True
        )  # type: ignore[call-arg]
        check(result, left, right, how)
        runs.append(stats.compiled)
    assert runs[1] is False


def test_resident_sides_and_a_resident_side_with_a_host_side(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(8)
    lk, lv, rk, rv = rng.integers(0, 50, 500), rng.random(500), rng.integers(0, 80, 200), rng.random(200)
    with tmr.scatter(lk, cluster=cluster) as k, tmr.scatter(lv, cluster=cluster) as v:
        with tmr.scatter(rk, cluster=cluster, sizes=3) as k2, tmr.scatter(rv, cluster=cluster, sizes=3) as v2:
            for how in HOWS:
                check(tmr.join((k, v), (k2, v2), how=how, cluster=cluster), (lk, lv), (rk, rv), how)
        check(tmr.join((k, v), (rk, rv), how="outer"), (lk, lv), (rk, rv), "outer")


def test_keyed_resident_results_on_the_same_reducers_join_where_they_are(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(9)
    keys, values = rng.integers(0, 300, 3000), rng.random(3000)
    keys2 = rng.integers(100, 400, 2000)
    with (
        tmr.sum_by_key(keys, values, cluster=cluster, reducers=3, resident=True) as sums,
        tmr.count_by_key(keys2, cluster=cluster, reducers=3, resident=True) as counts,
    ):
        plan = tmr.plan_join(sums, counts, how="outer")
        assert plan.strategy == "co-partitioned"
        assert "nothing moves" in plan.explain()
        result, stats = tmr.join(sums, counts, how="outer", return_stats=True)
        assert result.strategy == "co-partitioned"
        assert stats.bytes_sent == 0
        left, right = sums.gather(), counts.gather()
        check(result, (left.keys, left.values), (right.keys, right.values), "outer")
        assert tmr.join(sums, counts, strategy="hash").strategy == "hash"


def test_a_hot_key_on_both_sides(cluster: tmr.LocalCluster) -> None:
    """100k rows of one key × 10 of it: 1M rows on one reducer; the parts say which."""
    left = (np.concatenate([np.zeros(100_000, np.int64), np.arange(1, 1000)]), np.arange(100_999, dtype=np.int32))
    right = (np.concatenate([np.zeros(10, np.int64), np.arange(500, 600)]), np.arange(110, dtype=np.int32))
    result = tmr.join(left, right, cluster=cluster, strategy="hash", reducers=4)
    assert len(result) == 1_000_000 + 100
    assert max(n for _, n in result.parts) >= 1_000_000
    assert np.count_nonzero(result.keys == 0) == 1_000_000
    assert np.bincount(result.right[result.keys == 0]).tolist() == [100_000] * 10


@pytest.mark.slow
def test_a_key_present_1e6_times_on_one_side_and_10_on_the_other_makes_1e7_rows(cluster: tmr.LocalCluster) -> None:
    """The issue's skew case: 1e7 output rows of one key on one reducer; the parts and the stats say where."""
    hot = 1_000_000
    left = (np.concatenate([np.zeros(hot, np.int64), np.arange(1, 1001)]), np.arange(hot + 1000, dtype=np.int32))
    right = (np.concatenate([np.zeros(10, np.int64), np.arange(900, 1100)]), np.arange(210, dtype=np.int32))
    result, stats = tmr.join(left, right, cluster=cluster, strategy="hash", reducers=2, return_stats=True)
    assert len(result) == 10 * hot + 101
    rows = dict(result.parts)
    assert sum(rows.values()) == len(result)
    assert max(rows.values()) >= 10 * hot  # every row of key 0 on one reducer
    assert sum(s.rows for s in stats.shards) == hot + 1000 + 210  # the rows mapped
    assert np.count_nonzero(result.keys == 0) == 10 * hot
    zero = result.keys == 0
    np.testing.assert_array_equal(np.bincount(result.right[zero]), np.full(10, hot))
    np.testing.assert_array_equal(np.bincount(result.left[zero]), np.full(hot, 10))


def test_an_output_over_the_budget_is_refused_before_a_row_is_made(cluster: tmr.LocalCluster) -> None:
    left = (np.zeros(300, np.int64), np.ones(300))
    with pytest.raises(tmr.ReducerMemoryError, match=r"would make 90,000 rows on .*max_bytes=10000.*reducers=N"):
        tmr.join(left, left, cluster=cluster, max_bytes=10_000, resident=True)
    with pytest.raises(  # fetched: spilled (in two sub-partitions per reducer: 600 rows), then refused naming the key
        tmr.ReducerMemoryError, match=r"would make 90,000 rows of the key 0 alone, about 2,160,000 bytes .*max_bytes=10000"
    ):
        tmr.join(left, left, cluster=cluster, max_bytes=10_000)
    assert len(tmr.join(left, left, cluster=cluster, max_bytes=10_000_000)) == 90_000


def test_bad_inputs_are_named(cluster: tmr.LocalCluster) -> None:
    ints = (np.array([1, 2]), np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match=r"keys of left are int64 and those of right are int32.*astype"):
        tmr.join(ints, (np.array([1], np.int32), np.array([1])), cluster=cluster)
    with pytest.raises(TypeError, match=r"left are int64 and those of right are strings"):
        tmr.join(ints, (np.array(["a"]), np.array([1])), cluster=cluster)
    with pytest.raises(tmr.InputError, match=r"right: keys have 2 rows but values 3"):
        tmr.join(ints, (np.array([1, 2]), np.arange(3)), cluster=cluster)
    with pytest.raises(ValueError, match=r"how must be one of 'inner', 'left', 'right', 'outer'.*got 'full'"):
        tmr.join(ints, ints, how="full", cluster=cluster)
    with pytest.raises(ValueError, match=r"strategy must be one of"):
        tmr.join(ints, ints, strategy="merge", cluster=cluster)
    with pytest.raises(TypeError, match=r"left must be keyed data: a \(keys, values\) pair"):
        tmr.join(np.arange(3), ints, cluster=cluster)
    with pytest.raises(TypeError, match=r"float and bool keys have no exact equality"):
        tmr.join((np.array([1.0]), np.array([1])), ints, cluster=cluster)
    with pytest.raises(TypeError, match=r"unknown run option"):
        tmr.join(ints, ints, cluster=cluster, reducer=2)


def test_the_plan_says_what_moves(cluster: tmr.LocalCluster) -> None:
    big, small = (np.arange(1000), np.ones(1000)), (np.arange(10), np.ones(10))
    plan = tmr.plan_join(big, small, cluster=cluster)
    assert plan.strategy == "broadcast"
    assert plan.small == 1
    assert plan.sizes == (1000, 10)
    assert "the right side (10 rows) sent to each task of the left side" in plan.explain()
    hashed = tmr.plan_join(big, small, cluster=cluster, strategy="hash", reducers=3)
    assert len(hashed.reducers) == 3
    assert "shuffled by key hash to 3 reducer(s)" in str(hashed)


def test_a_resident_join_stays_where_it_was_made_and_later_jobs_read_it(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(11)
    left = (rng.integers(0, 40, 300), (rng.random(300), rng.integers(0, 5, 300)))
    right = (rng.integers(20, 60, 100), rng.random(100))
    for strategy in ("hash", "broadcast"):
        with tmr.join(left, right, how="outer", strategy=strategy, cluster=cluster, resident=True) as kept:
            result = kept.gather()
            check(result, left, right, "outer")
            assert len(kept) == len(result)
            assert int(tmr.max(kept.keys)) == result.keys.max()
            sums = tmr.sum_by_key(kept.keys, kept.left[1])
            expected = pd.Series(result.left[1]).groupby(result.keys).sum()
            np.testing.assert_array_equal(sums.keys, expected.index)
            np.testing.assert_array_equal(sums.values, expected.to_numpy())


def test_large_results_come_back_through_shared_memory_as_through_grpc(cluster: tmr.LocalCluster) -> None:
    """A part of ≥ 1 MiB is written into a file the client maps (same host); the rows equal those fetched by gRPC."""
    from tfmapreduce._engine import program as _program

    rng = np.random.default_rng(12)
    left, right = (rng.integers(0, 1000, 300_000), rng.random(300_000)), (np.arange(1000), rng.integers(0, 9, 1000))
    read: list[np.ndarray] = []
    with pytest.MonkeyPatch.context() as patch:
        original = _program.read_returned
        patch.setattr(_program, "read_returned", lambda *a: read.append(original(*a)) or read[-1])
        mapped = tmr.join(left, right, cluster=cluster, strategy="hash")
        returned = len(read)
        fed = tmr.join(left, right, cluster=cluster, strategy="hash", transfer="feed")
    assert returned == 3  # one file a column (keys, left, right): the reducers' parts written into it at their places
    assert len(read) == returned  # transfer="feed": through gRPC
    for a, b in ((mapped.keys, fed.keys), (mapped.left, fed.left), (mapped.right, fed.right)):
        np.testing.assert_array_equal(np.sort(a), np.sort(b))
    assert mapped.left.flags.writeable


def write_csv(path: Any, columns: dict[str, Any]) -> None:
    pd.DataFrame(columns).to_csv(path, index=False)


@pytest.mark.parametrize("strategy", ["hash", "broadcast", "auto"])
def test_csv_tables_join_as_sides_read_on_the_workers(cluster: tmr.LocalCluster, tmp_path: Any, strategy: str) -> None:
    """A read_csv table is a side by itself: its first column the key (int64 here), the others its values, each in
    its own dtype (a str column too); several files, beside a host side or another table."""
    rng = np.random.default_rng(21)
    lk, lv, lw = rng.integers(0, 50, 400), rng.integers(0, 1000, 400) / 8, rng.integers(0, 9, 400)
    rk, rn = rng.integers(20, 80, 120), np.array([f"n{i}" for i in rng.integers(0, 99, 120)], dtype=object)
    for i in range(3):
        write_csv(tmp_path / f"l{i}.csv", {"w": lw[i::3], "k": lk[i::3], "v": lv[i::3]})
    write_csv(tmp_path / "r.csv", {"name": rn, "k": rk})
    order = np.concatenate([np.arange(i, 400, 3) for i in range(3)])
    lk, lv, lw = lk[order], lv[order], lw[order]
    left = tmr.read_csv(str(tmp_path / "l*.csv"), columns=["k", "v", "w"], dtypes={"v": "float64", "w": "int32"})
    right = tmr.read_csv(str(tmp_path / "r.csv"), columns=["k", "name"], dtypes={"name": str})
    for how in HOWS:
        result = tmr.join(left, right, how=how, strategy=strategy, cluster=cluster, sizes=4)
        check(result, (lk, (lv, lw)), (rk, rn), how)
        assert result.left[1].dtype == np.int32
    mixed = tmr.join((rk, rn), left, how="left", strategy=strategy, cluster=cluster)
    check(mixed, (rk, rn), (lk, (lv, lw)), "left")
    if strategy == "auto":
        assert tmr.plan_join(left, right, cluster=cluster).units == ("bytes", "bytes")


def test_plan_of_a_csv_side_counts_bytes_not_rows(cluster: tmr.LocalCluster, tmp_path: Any) -> None:
    """A CSV side is sized in bytes: its shards' spans and sizes say bytes in the printed plan, a host side's say rows."""
    write_csv(tmp_path / "l.csv", {"k": np.arange(50) % 7, "v": np.arange(50)})
    table = tmr.read_csv(str(tmp_path / "l.csv"))
    plan = tmr.plan_join(table, (np.arange(5), np.ones(5)), cluster=cluster, strategy="hash")
    text = plan.explain()
    nbytes = (tmp_path / "l.csv").stat().st_size
    assert plan.units == ("bytes", "rows")
    assert plan.sizes[0] == nbytes
    assert f"Plan: {nbytes} bytes and 5 rows in" in text
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.lstrip().startswith("shard"))
    assert lines[head].split()[:4] == ["shard", "span", "size", "unit"]
    units = [line.split()[3] for line in lines[head + 1 :] if line.split()[0].isdigit()]
    stops = [int(line.split()[1].split(":")[1]) for line in lines[head + 1 :] if line.split()[0].isdigit()]
    assert all(u == ("bytes" if stop <= nbytes else "rows") for u, stop in zip(units, stops, strict=True))
    assert "bytes" in units
    assert "rows" in units
    array_only = tmr.plan_join((np.arange(6), np.ones(6)), (np.arange(5), np.ones(5)), cluster=cluster).explain()
    assert "Plan: 11 rows in" in array_only
    assert "bytes" not in "\n".join(line for line in array_only.splitlines() if "budget" not in line)  # (the memory line's)


@pytest.mark.parametrize("strategy", ["hash", "broadcast"])
def test_big_csv_tables_read_natively_in_byte_ranges_join_as_pandas_merges(
    cluster: tmr.LocalCluster, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, strategy: str
) -> None:
    """A CSV over the split size is read by the native reader in byte ranges: its columns come back 1-D, as from a
    small file (issue 38: a (None, 1) value column failed the join with "Inconsistent shapes")."""
    from tfmapreduce._io.files import csv as _csv
    from tfmapreduce._io.files import text as _text
    from tfmapreduce._native.loader import kernels

    if kernels() is None:
        pytest.skip("no native kernels on this machine (no compiler, or TFMAPREDUCE_NATIVE=0)")
    monkeypatch.setattr(_text, "TEXT_BLOCK", 4)  # every file here counts as big: split, read natively
    monkeypatch.setattr(_csv, "TEXT_BLOCK", 64)
    rng = np.random.default_rng(38)
    lk, lv, lw = rng.integers(0, 60, 300), rng.integers(0, 1000, 300) / 8, rng.integers(0, 9, 300)
    rk, rv = rng.integers(30, 90, 200), rng.integers(0, 1000, 200) / 4
    write_csv(tmp_path / "l.csv", {"key": lk, "value": lv, "w": lw})
    write_csv(tmp_path / "r.csv", {"key": rk, "value": rv})
    left = tmr.read_csv(str(tmp_path / "l.csv"), columns=["key", "value", "w"], dtypes={"w": "int64"})
    right = tmr.read_csv(str(tmp_path / "r.csv"), columns=["key", "value"])
    assert tmr.plan_join(left, right, cluster=cluster).units == ("bytes", "bytes")
    for how in HOWS:
        check(tmr.join(left, right, how=how, strategy=strategy, cluster=cluster, sizes=3), (lk, (lv, lw)), (rk, rv), how)


def test_csv_string_keys_and_npy_pairs_join_as_pandas_merges(cluster: tmr.LocalCluster, tmp_path: Any) -> None:
    """String keys (given str, or not integers in the first line) come back as str; .npy files of keys and of values
    pair as a side, read by row range."""
    rng = np.random.default_rng(22)
    pool = np.array(["é", "a", "bb", "x y", "42z"], dtype=object)
    lk, lv = pool[rng.integers(0, 5, 200)], rng.random(200)
    rk, rv = pool[rng.integers(1, 5, 30)], rng.integers(0, 100, 30)
    write_csv(tmp_path / "l.csv", {"k": lk, "v": lv})
    write_csv(tmp_path / "r.csv", {"k": rk, "v": rv})
    left = tmr.read_csv(str(tmp_path / "l.csv"), dtypes={"v": "float64"})  # every column: the first is the key
    right = tmr.read_csv(str(tmp_path / "r.csv"), dtypes=[str, "int64"])
    for strategy in ("hash", "broadcast"):
        result = tmr.join(left, right, how="outer", strategy=strategy, cluster=cluster)
        check(result, (lk, lv), (rk, rv), "outer")
        assert isinstance(result.keys[0], str)
    keys, values = rng.integers(0, 30, 500), rng.random((500, 2)).astype(np.float32)
    np.save(tmp_path / "k.npy", keys)
    np.save(tmp_path / "v.npy", values)
    side = (tmr.read_npy(str(tmp_path / "k.npy")), tmr.read_npy(str(tmp_path / "v.npy")))
    other = (np.arange(0, 40, 2), np.arange(20.0))
    for strategy in ("hash", "broadcast"):
        result = tmr.join(side, other, strategy=strategy, cluster=cluster, sizes=3)
        expected = pd.merge(pd.DataFrame({"key": keys, "row": np.arange(500)}), frame(*other, "right"), on="key")
        assert len(result) == len(expected)
        got = sorted(zip(result.keys.tolist(), result.left[:, 0].tolist(), result.right.tolist(), strict=True))
        want = sorted(zip(expected.key.tolist(), values[expected.row, 0].tolist(), expected.right.tolist(), strict=True))
        assert got == want


def test_file_sides_that_cannot_join_are_named(cluster: tmr.LocalCluster, tmp_path: Any) -> None:
    write_csv(tmp_path / "f.csv", {"k": [1.5, 2.5], "v": [1, 2]})
    np.save(tmp_path / "k.npy", np.arange(4))
    ints = (np.array([1, 2]), np.array([1.0, 2.0]))
    with pytest.raises(tmr.InputError, match=r"left: the key column .* is a float64 column .*int64 or str in dtypes="):
        tmr.join(tmr.read_csv(str(tmp_path / "f.csv"), dtypes={"k": "float64"}), ints, cluster=cluster)
    with pytest.raises(TypeError, match=r"right reads read_npy files alone.*\(tmr.read_npy\(keys\), tmr.read_npy\(values\)\)"):
        tmr.join(ints, tmr.read_npy(str(tmp_path / "k.npy")), cluster=cluster)
    with pytest.raises(TypeError, match=r"left pairs a CSV file source with other columns"):
        tmr.join((np.arange(2), tmr.read_csv(str(tmp_path / "f.csv"), columns=["v"])), ints, cluster=cluster)
    with (
        tmr.scatter(np.arange(4), cluster=cluster) as k,
        tmr.scatter(np.ones(4), cluster=cluster) as v,
        pytest.raises(TypeError, match=r"right reads files and left is resident on the workers.*gather\(\)"),
    ):
        tmr.join((k, v), (tmr.read_npy(str(tmp_path / "k.npy")), np.ones(4)), cluster=cluster)
    with pytest.raises(TypeError, match=r"left reads files pinned to tasks"):
        tmr.join(tmr.read_csv({cluster.tasks[0]: [str(tmp_path / "f.csv")]}), ints, cluster=cluster)


@pytest.mark.parametrize("strategy", ["hash", "broadcast"])
def test_inner_joins_gather_the_keys_and_left_numbers_as_one_matrix_and_give_them_back_as_given(
    cluster: tmr.LocalCluster, strategy: str
) -> None:
    """An inner join's keys and left columns of 4- and 8-byte numbers travel as one matrix of int32 words (NaN and
    negative numbers as they were); left columns of other widths go column by column."""
    rng = np.random.default_rng(23)
    keys = rng.integers(-50, 50, 300).astype(np.int32)
    floats = rng.random(300)
    floats[::7] = np.nan
    left = (
        keys,
        (floats, rng.integers(-(2**40), 2**40, 300), rng.random(300).astype(np.float32), np.arange(300, dtype=np.uint32)),
    )
    right = (rng.integers(-60, 60, 80).astype(np.int32), rng.random(80).astype(np.float32))
    result = tmr.join(left, right, strategy=strategy, cluster=cluster, reducers=2)
    check(result, left, right, "inner")
    assert [c.dtype for c in result.left] == [np.float64, np.int64, np.float32, np.uint32]
    assert result.keys.dtype == np.int32
    narrow = (keys, (np.arange(300, dtype=np.int16), floats))
    check(tmr.join(narrow, right, strategy=strategy, cluster=cluster), narrow, right, "inner")


def test_a_bad_line_of_a_csv_side_is_named_with_its_file_and_task(cluster: tmr.LocalCluster, tmp_path: Any) -> None:
    write_csv(tmp_path / "bad.csv", {"k": ["1", "2"], "v": ["1.5", "oops"]})
    table = tmr.read_csv(str(tmp_path / "bad.csv"))
    for strategy in ("hash", "broadcast"):
        with pytest.raises(tmr.InputError, match=r"bad.csv \(read on task .*\): line 3 is '2,oops'"):
            tmr.join((np.array([1, 2]), np.array([10, 20])), table, strategy=strategy, cluster=cluster)


def test_the_native_match_and_take_kernels_make_the_rows_of_every_pair_once() -> None:
    """TmrJoinMatch then TmrJoinTake against a nested loop: both probe sides, every keep flag and mask, columns of
    several dtypes and row shapes (strings, float NaN fills, bytes of odd widths), empty sides; bad entries refused."""
    import tensorflow as tf

    from tfmapreduce._kinds.join.rows import fill_value
    from tfmapreduce._native.loader import kernels

    ops = kernels()
    if ops is None:
        pytest.skip("no native kernels here (no C++ compiler, or TFMAPREDUCE_NATIVE=0)")
    rng = np.random.default_rng(14)

    def columns(n: int) -> list[np.ndarray]:
        return [
            rng.random(n).astype(np.float32),
            rng.integers(-9, 9, (n, 3)).astype(np.int16),
            np.array([f"s{i}" for i in rng.integers(0, 99, n)], dtype=object).astype(bytes),
            rng.random((n, 2)),
            rng.integers(0, 2, n).astype(bool),
        ]

    for left_keys, right_keys in (
        (rng.integers(0, 60, 200), rng.integers(30, 90, 150)),
        (rng.permutation(100).astype(np.int32), rng.permutation(100)[:40].astype(np.int32)),
        # keys too spread for the dense table (a hash table), and the extremes of int64 (the widest span)
        (rng.integers(-9, 9, 120) * 10**15, rng.integers(-9, 9, 80) * 10**15),
        (np.array([2**63 - 1, -(2**63), 5, 2**63 - 1]), np.array([-(2**63), 2**63 - 1, 6])),
        (np.array([7, 3, 7, 12]), np.array([2**31 - 1, 7, 3, 3])),
        (np.array([], np.int64), rng.integers(0, 5, 10)),
        (rng.integers(0, 5, 10), np.array([], np.int64)),
        (np.array([b"a", b"", b"\xc3\xa9", b"a"]), np.array([b"a", b"a", b"b"])),
    ):
        left_cols, right_cols = columns(len(left_keys)), columns(len(right_keys))[:3]
        for probe_left in (False, True):
            for keep_left in (False, True):
                for keep_right in (False, True):
                    probe, build = (left_keys, right_keys) if probe_left else (right_keys, left_keys)
                    keep_probe, keep_build = (keep_left, keep_right) if probe_left else (keep_right, keep_left)
                    entry, start, rows, matched, total = ops.tmr_join_match(
                        tf.constant(probe), tf.constant(build), keep_probe=keep_probe, keep_build=keep_build
                    )
                    keys, lout, rout, lm, rm = ops.tmr_join_take(
                        tf.constant(left_keys),
                        tf.constant(right_keys),
                        [tf.constant(c) for c in left_cols],
                        [tf.constant(c) for c in right_cols],
                        entry,
                        start,
                        rows,
                        matched,
                        probe_left=probe_left,
                        keep_probe=keep_probe,
                        keep_build=keep_build,
                        left_mask=True,
                        right_mask=keep_left,
                    )
                    pairs = [
                        (i, j) for i in range(len(left_keys)) for j in range(len(right_keys)) if left_keys[i] == right_keys[j]
                    ]
                    pairs += [(i, -1) for i in range(len(left_keys)) if keep_left and left_keys[i] not in set(right_keys)]
                    pairs += [(-1, j) for j in range(len(right_keys)) if keep_right and right_keys[j] not in set(left_keys)]
                    assert int(total) == len(pairs) == len(keys) == len(lm)
                    assert len(rm) == (len(pairs) if keep_left else 0)
                    assert matched.numpy().tolist() == [b in set(probe) for b in build]

                    def cell(cols: list[np.ndarray], r: int) -> tuple[Any, ...]:
                        if r >= 0:
                            return tuple(repr(np.asarray(c[r]).tolist()) for c in cols)
                        fills = [fill_value(tf.string if c.dtype.kind == "S" else tf.as_dtype(c.dtype)) for c in cols]
                        return tuple(repr(np.full(c.shape[1:], f, c.dtype).tolist()) for c, f in zip(cols, fills, strict=True))

                    want = sorted(
                        (
                            repr(np.asarray(left_keys[i] if i >= 0 else right_keys[j]).tolist()),
                            cell(left_cols, i),
                            cell(right_cols, j),
                            i >= 0,
                        )
                        for i, j in pairs
                    )
                    got = sorted(
                        (
                            repr(np.asarray(keys.numpy()[t]).tolist()),
                            tuple(repr(np.asarray(c.numpy()[t]).tolist()) for c in lout),
                            tuple(repr(np.asarray(c.numpy()[t]).tolist()) for c in rout),
                            bool(lm.numpy()[t]),
                        )
                        for t in range(len(keys))
                    )
                    assert got == want
    with pytest.raises(tf.errors.InvalidArgumentError, match="not TmrJoinMatch"):
        ops.tmr_join_take(
            tf.constant([1, 2]),
            tf.constant([1]),
            [],
            [],
            tf.constant([5, 0], tf.int64),
            tf.constant([0], tf.int64),
            tf.zeros([0], tf.int64),
            tf.constant([True]),
            probe_left=True,
            keep_probe=False,
            keep_build=False,
            left_mask=False,
            right_mask=False,
        )
