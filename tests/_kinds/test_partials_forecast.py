"""A keyed combine's plan counts per-key partials, not input rows: each task sends one per distinct key it holds,
counted on the client where the keys are there (integers, strings), else bounded soundly by its rows, each of its
key's and the combiner's partial bytes; the runs then stay within what their plans said."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfmapreduce as tmr
from tfmapreduce._native.loader import has, kernels

BUDGET = 50_000
"""A reducer's budget in these tests."""


def test_plan_by_key_counts_a_combining_recipes_partials_of_its_own_bytes(cluster: tmr.LocalCluster) -> None:
    keys = np.arange(60_000) % 1_500  # 1,500 keys in each of two tasks' 30,000 rows
    values = np.ones(keys.size)
    options = {"max_bytes": BUDGET, "reducers": 2, "sizes": 2, "cluster": cluster}
    rows = tmr.plan_by_key(keys, values, **options)  # no recipe: every row sent whole, what a group recipe sends
    assert (rows.spill.spills, rows.spill.share) == (True, 480_000)
    assert "each reducer's share of (key, value) rows" in str(rows)
    for recipe, partial in [
        (tmr.count_by_key, 8),  # an int64 count
        (tmr.sum_by_key, 8),  # a float64 sum
        (tmr.mean_by_key, 16),  # a sum and a count
        (tmr.variance_by_key, 24),  # three moments
    ]:
        plan = tmr.plan_by_key(keys, values, recipe=recipe, **options)
        row = 8 + partial
        assert plan.spill.share == 2 * 1_500 * row // 2, recipe  # 1,500 partials per task, spread over 2 reducers
        assert not plan.spill.spills
        assert (
            f"in memory: each reducer's share of per-key partials (each key's bytes and {partial} of partial; a task's "
            in str(plan)
        )
    median = tmr.plan_by_key(keys, values, recipe=tmr.median_by_key, **options)
    assert median.spill.share == rows.spill.share  # a group recipe sends its rows
    with pytest.raises(TypeError, match=r"recipe= names the by-key recipe planned, e.g. recipe=tmr.sum_by_key.*got <built-in"):
        tmr.plan_by_key(keys, values, recipe=len, **options)


def _exact(plan: tmr.KeyedPlan, keys: np.ndarray, partial: int, key_bytes: Callable[[object], int]) -> list[int]:
    """Each task's partials' bytes, from pandas: its distinct keys' own bytes and ``partial`` each."""
    tasks: dict[object, list[int]] = {}
    for shard in plan.plan.shards:
        tasks.setdefault(shard.task, []).extend(range(shard.start, shard.stop))
    return [sum(key_bytes(k) + partial for k in pd.unique(keys[rows])) for rows in tasks.values()]


def test_client_keys_are_counted_exactly_strings_and_sparse_integers(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(31)
    spread = rng.choice(rng.integers(-(2**62), 2**62, 700), 20_000)  # 700 keys over a range far over the rows
    words = np.array([f"wört{i % 150}" + "ü" * (i % 7) for i in range(20_000)], dtype=object)  # unicode, 7 lengths
    options = {"reducers": 2, "sizes": [9_000, 11_000], "cluster": cluster, "max_bytes": 10**9}
    plan = tmr.plan_by_key(spread, np.ones(spread.size), recipe=tmr.sum_by_key, **options)
    exact = _exact(plan, spread, 8, lambda _: 8)
    assert [size for _, size in plan.spill.written] == exact
    assert plan.spill.share == -(-sum(exact) // 2)  # not the rows' 20,000 × 16 bytes over 2
    text = tmr.plan_by_key(words, np.ones(words.size), recipe=tmr.mean_by_key, **options)
    exact = _exact(text, words, 16, lambda k: 32 + len(str(k).encode()))  # 32 a string beside its UTF-8 bytes
    assert [size for _, size in text.spill.written] == exact
    assert text.spill.share == -(-sum(exact) // 2)
    assert "a task's distinct keys counted on the client" in str(text)
    empty = tmr.plan_by_key(words[:0], np.ones(0), recipe=tmr.sum_by_key, cluster=cluster, max_bytes=10**9)
    assert empty.spill.share == 0
    made = tmr.MapReduce(lambda k, v: (k * 2, v), tmr.combiners.mean, by_key=True, max_bytes=10**9)
    plan = made.plan((spread, np.ones(spread.size)), **{k: v for k, v in options.items() if k != "max_bytes"})
    assert plan.spill.share == 20_000 * 24 // 2  # keys the map makes: one partial a row, of the partial's 24 bytes
    assert "per-key partials, one a row at most (24 bytes each)" in str(plan)


@pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")
def test_a_run_over_few_distinct_strings_is_planned_and_run_in_memory(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keys = np.array([f"clé-{i % 1_000}" for i in range(40_000)], dtype=object)  # 40,000 rows, 1,000 distinct keys
    values = np.arange(keys.size, dtype=np.float64)
    options = {"max_bytes": 100_000, "reducers": 2, "sizes": 2, "cluster": cluster}
    assert tmr.plan_by_key(keys, values, **options).spill.spills  # the rows (what the rows' bound said): 1.9 MB
    plan = tmr.plan_by_key(keys, values, recipe=tmr.sum_by_key, **options)
    assert not plan.spill.spills  # 2 tasks × 1,000 partials of 32 + a key's UTF-8 bytes + 8, over 2 reducers
    assert plan.spill.share == 1_000 * (32 + 8) + sum(len(k.encode()) for k in set(keys))
    with caplog.at_level(logging.INFO, logger="tfmapreduce.spill"):
        got = tmr.sum_by_key(keys, values, **options)
    assert not caplog.records  # in memory, as planned
    expected = pd.Series(values).groupby(keys).sum()
    assert got.to_dict() == expected.to_dict()
    assert not any(spill.iterdir())


@pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")
def test_a_combining_run_spills_no_more_than_its_plan_said(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, spilled_parts: Callable[[], int]
) -> None:
    rng = np.random.default_rng(32)
    few = rng.integers(0, 1_000, 20_000)  # 24 kB of partials per reducer, planned
    many = rng.integers(0, 3_000, 20_000)  # 72 kB planned, about 70 kB in the run
    values = rng.normal(size=few.size)
    options = {"max_bytes": BUDGET, "reducers": 2, "sizes": 2, "cluster": cluster}
    assert not tmr.plan_by_key(few, values, recipe=tmr.mean_by_key, **options).spill.spills
    with caplog.at_level(logging.INFO, logger="tfmapreduce.spill"):
        tmr.mean_by_key(few, values, **options)
        assert not caplog.records  # in memory, as planned
        plan = tmr.plan_by_key(many, values, recipe=tmr.mean_by_key, **options)
        got = tmr.mean_by_key(many, values, **options)
    assert plan.spill.spills
    assert spilled_parts() <= plan.spill.parts  # the plan's share is the most the run holds
    np.testing.assert_allclose(got[int(many[0])], values[many == many[0]].mean(), rtol=1e-12)


@pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")
def test_resident_strings_are_planned_from_lengths_sampled_on_the_workers(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, spilled_parts: Callable[[], int]
) -> None:
    rows = 4_000
    short = np.array([f"k{i % 1_000:03d}" for i in range(rows)], dtype=object)  # 4 bytes each, 1,000 keys
    long = np.array(["é" * 100 + f"{i % 1_000:03d}" for i in range(rows)], dtype=object)  # 203 bytes each
    values = np.random.default_rng(33).normal(size=rows)
    options = {"max_bytes": 160_000, "reducers": 2, "cluster": cluster}
    with tmr.scatter(values, cluster=cluster) as resident_values:
        for keys, length, spills in [(short, 4, False), (long, 203, True)]:
            with tmr.scatter(keys, cluster=cluster) as resident_keys:
                plan = tmr.plan_by_key(resident_keys, resident_values, **options)  # rows whole, as median_by_key's
                assert plan.spill.share == rows * (32 + length + 8) // 2
                assert plan.spill.spills is spills
                sums = tmr.plan_by_key(resident_keys, resident_values, recipe=tmr.sum_by_key, **options)
                exact = _exact(sums, keys, 8, lambda k: 32 + len(str(k).encode()))  # counted on the workers
                assert [size for _, size in sums.spill.written] == exact
                caplog.clear()
                with caplog.at_level(logging.INFO, logger="tfmapreduce.spill"):
                    got = tmr.median_by_key(resident_keys, resident_values, **options)
                assert bool(caplog.records) is spills
                if spills:
                    assert spilled_parts() <= plan.spill.parts
                expected = pd.Series(values).groupby(keys).median()
                assert dict(zip(got.keys, got.values, strict=True)) == pytest.approx(expected.to_dict(), rel=1e-12)
    assert not any(spill.iterdir())


def test_resident_keys_of_few_distinct_values_are_counted_on_the_workers(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(34)
    numbers = rng.choice(rng.integers(-(2**62), 2**62, 300), 12_000)  # 300 sparse keys
    words = np.array([f"ключ{i % 200}" + "é" * (i % 5) for i in range(12_000)], dtype=object)  # unicode, 1,000 keys
    sizes = [0, 5_000, 4_000, 3_000]  # an empty shard; task 0's 4,000 rows, task 1's 8,000
    for keys, key_bytes in [(numbers, lambda _: 8), (words, lambda k: 32 + len(str(k).encode()))]:
        with (
            tmr.scatter(keys, sizes=sizes, cluster=cluster) as k,
            tmr.scatter(np.ones(keys.size), sizes=sizes, cluster=cluster) as v,
        ):
            with tmr.stats() as runs:
                plan = tmr.plan_by_key(k, v, recipe=tmr.mean_by_key, reducers=2, cluster=cluster, max_bytes=10**9)
            assert len(runs.runs) == 1  # the count alone: a string's lengths are not sampled beside it
        exact = _exact(plan, keys, 16, key_bytes)  # a mean's partial: a sum and a count
        assert [size for _, size in plan.spill.written] == exact
        assert plan.spill.share == -(-sum(exact) // 2)  # not the rows' bound
        assert "a task's distinct keys counted on the workers" in str(plan)


@pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")
def test_a_resident_combine_once_planned_to_spill_runs_in_memory(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keys = np.arange(40_000) % 500  # 40,000 resident rows, 500 distinct keys
    values = np.random.default_rng(35).normal(size=keys.size)
    options = {"max_bytes": 100_000, "reducers": 2, "cluster": cluster}
    with tmr.scatter(keys, cluster=cluster) as resident_keys, tmr.scatter(values, cluster=cluster) as resident_values:
        rows = tmr.plan_by_key(resident_keys, resident_values, **options)
        assert rows.spill.spills  # the rows' bound (what a combine was planned with before): 320,000 bytes a reducer
        plan = tmr.plan_by_key(resident_keys, resident_values, recipe=tmr.sum_by_key, **options)
        assert (plan.spill.spills, plan.spill.share) == (False, 2 * 500 * 16 // 2)  # 500 partials on each task
        with caplog.at_level(logging.INFO, logger="tfmapreduce.spill"):
            got = tmr.sum_by_key(resident_keys, resident_values, **options)
    assert not caplog.records  # in memory, as planned
    expected = pd.Series(values).groupby(keys).sum()
    assert dict(zip(got.keys, got.values, strict=True)) == pytest.approx(expected.to_dict(), rel=1e-12)
    assert not any(spill.iterdir())


def test_a_csv_string_key_plan_uses_the_width_sampled_from_its_first_records(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    keys = [f"ключ-{i % 300}" + "é" * (i % 40) for i in range(12_000)]  # unicode keys of 12 to 89 bytes
    keys[5] = "a,b"  # a quoted field: its bytes as parsed
    path = tmp_path / "orders.csv"
    pd.DataFrame({"user": keys, "amount": np.arange(12_000) * 0.25}).to_csv(path, index=False)
    orders = tmr.read_csv(str(path), dtypes={"amount": "float64"})
    plan = tmr.plan_by_key(orders, keys="user", values="amount", max_bytes=10**6, reducers=2, cluster=cluster)  # rows
    first = pd.read_csv(path, dtype=str, keep_default_na=False).head(10_000)  # the first 10,000 records, as text
    width = -(-sum(len(k.encode()) for k in first.user) // len(first))  # the keys' mean UTF-8 bytes, rounded up
    record = sum(len(k.encode()) + len(a) + 2 for k, a in zip(first.user, first.amount, strict=True)) // len(first)
    assert width > 16  # not the guess of 16 a CSV string was taken as
    row = 32 + width + 8  # a string key beside a float64 value
    assert plan.spill.share == -(-(path.stat().st_size // record) * row // 2)
    assert f"over {record} a record, its rows {row} bytes each in memory" in str(plan)


@pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")
def test_file_keys_of_few_distinct_values_are_counted_where_the_files_are_read(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    files = {p: [f"{p}-ключ{i % 250:03d}" for i in range(15_000)] for p in "ab"}  # 2 files of equal bytes, unicode
    for prefix, words in files.items():
        (tmp_path / f"{prefix}.txt").write_text("".join(w + "\n" for w in words), encoding="utf-8")
    np.save(tmp_path / "numbers.npy", np.arange(30_000) % 400)
    options = {"max_bytes": 50_000, "reducers": 2, "sizes": 2, "cluster": cluster}
    lines = tmr.read_text(str(tmp_path / "*.txt"))
    assert tmr.plan_by_key(lines, **options).spill.spills  # the rows' bound, what a combine was planned with before
    with tmr.stats() as runs:
        plan = tmr.plan_by_key(lines, recipe=tmr.count_by_key, **options)
    assert len(runs.runs) == 1  # one small run reading the files
    # each file read whole on one task (each holds one's middle byte): a key's 32 and UTF-8 bytes beside an int64 count
    exact = [sum(32 + len(k.encode()) + 8 for k in pd.unique(np.array(words, object))) for words in files.values()]
    assert [size for _, size in plan.spill.written] == exact
    assert (plan.spill.spills, plan.spill.share) == (False, -(-sum(exact) // 2))
    assert "distinct keys counted on the workers reading its files" in str(plan)
    numbers = tmr.plan_by_key(tmr.read_npy(str(tmp_path / "numbers.npy")), recipe=tmr.count_by_key, **options)
    assert [size for _, size in numbers.spill.written] == [400 * 16, 400 * 16]  # 15,000 rows of 400 keys a task
    with caplog.at_level(logging.INFO, logger="tfmapreduce.spill"):
        got = tmr.count_by_key(lines, **options)
    assert not caplog.records  # in memory, as planned
    expected = pd.Series(files["a"] + files["b"]).value_counts().to_dict()
    assert dict(zip(got.keys, got.values, strict=True)) == expected
    assert not list(spill.glob("tfmapreduce-spill-*")), list(spill.iterdir())  # no spill folder written


@pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")
def test_a_csv_tables_combine_counts_its_key_columns_distinct_values(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    frames = {
        p: pd.DataFrame({"user": [f"{p}-ключ{i % 300:03d}" for i in range(12_000)], "amount": np.arange(12_000) * 0.5})
        for p in "ab"
    }  # 2 files of equal bytes, read whole on one task each
    for prefix, frame in frames.items():
        frame.to_csv(tmp_path / f"{prefix}.csv", index=False)
    orders = tmr.read_csv(str(tmp_path / "*.csv"), dtypes={"amount": "float64"})
    options = {"keys": "user", "values": "amount", "max_bytes": 50_000, "reducers": 2, "sizes": 2, "cluster": cluster}
    assert tmr.plan_by_key(orders, **options).spill.spills  # its rows, as the files' bytes say
    with tmr.stats() as runs:
        plan = tmr.plan_by_key(orders, recipe=tmr.sum_by_key, **options)
    assert len(runs.runs) == 1  # one small run reading the key column
    exact = [sum(32 + len(k.encode()) + 8 for k in pd.unique(f.user)) for f in frames.values()]  # key, float64 sum
    assert [size for _, size in plan.spill.written] == exact
    assert (plan.spill.spills, plan.spill.share) == (False, -(-sum(exact) // 2))
    with caplog.at_level(logging.INFO, logger="tfmapreduce.spill"):
        got = tmr.sum_by_key(orders, **options)
    assert not caplog.records  # in memory, as planned
    expected = pd.concat(frames.values()).groupby("user").amount.sum()
    assert dict(zip(got.keys, got.values, strict=True)) == expected.to_dict()
    assert not list(spill.glob("tfmapreduce-spill-*"))


def test_a_plan_of_file_keys_no_run_takes_is_refused_as_the_run_is(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    np.save(tmp_path / "floats.npy", np.arange(1_000) % 7 * 0.5)  # float keys: no exact equality to group by
    np.save(tmp_path / "pairs.npy", (np.arange(2_000) % 7).reshape(1_000, 2))  # keys of two columns
    sums = tmr.MapReduce(lambda k: (k, tf.ones_like(k, tf.int64)), tmr.combiners.sum, by_key=True, max_bytes=1_000)
    groups = tmr.MapReduce(lambda k: (k, tf.ones_like(k, tf.int64)), tmr.per_group(tf.reduce_sum), by_key=True)
    for name, refused in [("floats", r"keys of dtype float64 on placeholders"), ("pairs", r"keys of shape \(None, 2\)")]:
        src = tmr.read_npy(str(tmp_path / f"{name}.npy"))
        for job in (sums, groups):
            with pytest.raises(tmr.MapFunctionError, match=refused):  # was a plan of a spill the run then refused
                job.plan(src, cluster=cluster, sizes=2)
        with pytest.raises(tmr.MapFunctionError, match=refused.replace("on placeholders", "on shard")):
            sums.run(src, cluster=cluster, sizes=2)
