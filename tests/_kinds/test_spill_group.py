"""Group reducers over their budget, spilled (grace hash): median, top-k and per_group over data several times a
reducer's budget, through the workers' disks, against pandas and the in-memory run on real workers."""

from __future__ import annotations

import collections
import logging
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfmapreduce as tmr
from tests._kinds.test_spill import _tmpfs
from tfmapreduce._native.loader import has, kernels

BUDGET = 200_000
"""A reducer's budget in these tests: 200 kB, against shares of 3× that and more."""

pytestmark = pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")


def _spilled(caplog: pytest.LogCaptureFixture) -> tuple[int, int, int]:
    """The last spilled group run's sub-partitions per reducer, its largest sub-partition's bytes, and its budget."""
    found = [
        re.search(r"(\d+) sub-partition\(s\) per reducer, the largest (\d+) bytes within the budget of (\d+)", r.getMessage())
        for r in caplog.records
    ]
    parts, largest, budget = next(f for f in reversed(found) if f is not None).groups()
    return int(parts), int(largest), int(budget)


def test_median_by_key_over_three_times_its_budget_equals_pandas_and_leaves_no_spill(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 3000, 80_000)  # 1.28 MB of int64 keys and float64 values: 640 kB per reducer of two
    values = rng.normal(size=keys.size)
    values[rng.integers(0, keys.size, 50)] = np.nan
    with caplog.at_level(logging.INFO, logger="tfmapreduce"):
        got = tmr.median_by_key(keys, values, max_bytes=BUDGET, reducers=2, cluster=cluster)
    parts, largest, budget = _spilled(caplog)
    assert parts >= 3  # each reducer held one sub-partition at a time, within its budget
    assert largest <= budget == BUDGET
    expected = pd.Series(values).groupby(keys).median(skipna=False)
    np.testing.assert_array_equal(got.keys, expected.index.to_numpy())
    np.testing.assert_array_equal(got.values, expected.to_numpy())
    memory = tmr.median_by_key(keys, values, reducers=2, cluster=cluster)
    np.testing.assert_array_equal(got.keys, memory.keys)
    np.testing.assert_array_equal(got.values, memory.values)
    assert os.listdir(spill) == []


def test_top_k_by_key_with_a_hot_key_over_its_budget_equals_the_in_memory_run(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(5)
    keys = np.concatenate([rng.integers(0, 20_000, 60_000), np.full(40_000, 7)])  # key 7 holds 40k more values
    values = rng.integers(-(10**9), 10**9, keys.size)
    with caplog.at_level(logging.INFO, logger="tfmapreduce"):
        got = tmr.top_k_by_key(keys, values, 3, max_bytes=BUDGET, reducers=2, cluster=cluster)
    parts, largest, _ = _spilled(caplog)  # the precombined top 3 per key and task still exceed the budget: spilled
    assert parts >= 2
    assert largest <= BUDGET
    memory = tmr.top_k_by_key(keys, values, 3, reducers=2, cluster=cluster)
    assert list(got.keys) == list(memory.keys) == sorted(set(keys.tolist()))
    for key in got.keys:
        np.testing.assert_array_equal(got[key], memory[key])
    np.testing.assert_array_equal(got[7], np.sort(values[keys == 7])[::-1][:3])
    assert os.listdir(spill) == []


def test_a_per_group_fn_over_string_keys_spilled_equals_pandas(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(9)
    words = np.array([f"w{i}" for i in rng.integers(0, 5000, 40_000)])
    values = rng.integers(0, 1000, words.size)
    spread = tmr.per_group(lambda k, v: tf.reduce_max(v, axis=1) - tf.reduce_min(v, axis=1), max_bytes=BUDGET)
    job = tmr.MapReduce(lambda k, v: (k, v), spread, by_key=True)
    with caplog.at_level(logging.INFO, logger="tfmapreduce"):
        got = job.run((words, values), reducers=2, cluster=cluster)
    assert _spilled(caplog)[1] <= BUDGET
    frame = pd.DataFrame({"k": words, "v": values}).groupby("k")["v"]
    expected = (frame.max() - frame.min()).to_dict()
    assert got.to_dict() == expected
    assert os.listdir(spill) == []


def test_one_key_over_the_budget_of_a_per_group_fn_is_refused_named_with_its_bytes_and_leaves_no_spill(
    cluster: tmr.LocalCluster, spill: Path
) -> None:
    keys = np.concatenate([np.arange(2000), np.full(30_000, 42)])
    values = np.arange(keys.size, dtype=np.float64)
    job = tmr.MapReduce(lambda k, v: (k, v), tmr.per_group(lambda k, v: tf.reduce_max(v, axis=1), max_bytes=BUDGET), by_key=True)
    with pytest.raises(
        tmr.ReducerMemoryError,
        match=r"reducer \d \(/job:local/.*\) would receive 30,001 values of the key 42 alone, about 480,016 bytes .*"
        r"more than its budget of 200,000 bytes \(max_bytes=200000\), even spilled to disk.*"
        r"median_by_key, quantile_by_key, top_k_by_key, count_distinct_by_key and collect_by_key take a hot key, reduced",
    ):
        job.run((keys, values), reducers=2, cluster=cluster)  # (the recipes compute it: tests/recipes/test_hot_key.py)
    assert os.listdir(spill) == []


def test_a_spilled_run_that_fails_in_a_round_leaves_no_spill(cluster: tmr.LocalCluster, spill: Path) -> None:
    def checked(keys: tf.Tensor, values: tf.RaggedTensor) -> tf.Tensor:
        ok = tf.debugging.Assert(tf.reduce_all(values.flat_values < 70_000), ["tfmapreduce test: a value too large"])
        with tf.control_dependencies([ok]):
            return tf.reduce_sum(values, axis=1)

    job = tmr.MapReduce(lambda k, v: (k, v), tmr.per_group(checked, max_bytes=BUDGET), by_key=True)
    keys = np.arange(80_000) % 3000
    with pytest.raises(tmr.JobError, match="a value too large"):
        job.run((keys, np.arange(80_000)), reducers=2, cluster=cluster)
    assert os.listdir(spill) == []
    small = job.run((keys[:1000], np.arange(1000)), reducers=2, cluster=cluster)  # under budget: in memory, as before
    assert small.to_dict() == {k: k for k in range(1000)}


def test_a_full_spill_disk_names_the_task_and_the_folder_and_leaves_nothing(
    cluster: tmr.LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = np.arange(200_000) % 5000  # 3.2 MB to spill on a 1 MiB disk
    with _tmpfs(tmp_path / "small") as small:
        monkeypatch.setattr(tempfile, "tempdir", str(small))
        with pytest.raises(
            tmr.OutputError,
            match=r"task /job:local/task:\d could not write its spill files under .*small/tfmapreduce-spill-\w+ "
            r"\(it is full\); it needs about [\d,]+ bytes there",
        ):
            tmr.median_by_key(keys, np.ones(keys.size), max_bytes=BUDGET, reducers=2, cluster=cluster, retries=0)
        assert os.listdir(small) == []


@pytest.mark.parametrize("combiner", [tmr.combiners.sum, tmr.combiners.mean, tmr.combiners.max])
def test_a_keyed_combine_with_many_keys_over_its_budget_spills_and_equals_pandas(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, combiner: tmr.Combiner
) -> None:
    rng = np.random.default_rng(11)
    keys = rng.integers(0, 60_000, 200_000)  # ~55k distinct keys: about 1.3 MB of partials, 650 kB per reducer of two
    values = rng.normal(size=keys.size)
    job = tmr.MapReduce(lambda k, v: (k, v), combiner, by_key=True, max_bytes=BUDGET)
    with caplog.at_level(logging.INFO, logger="tfmapreduce"):
        got = job.run((keys, values), reducers=2, cluster=cluster)
    parts, largest, _ = _spilled(caplog)
    assert parts >= 3
    assert largest <= BUDGET
    expected = getattr(pd.Series(values).groupby(keys), combiner.name)()
    np.testing.assert_array_equal(got.keys, expected.index.to_numpy())
    np.testing.assert_allclose(got.values, expected.to_numpy(), rtol=1e-12)
    memory = tmr.MapReduce(lambda k, v: (k, v), combiner, by_key=True).run((keys, values), reducers=2, cluster=cluster)
    np.testing.assert_array_equal(got.values, memory.values)  # the same merges, in the same order per key
    assert os.listdir(spill) == []


def test_a_keyed_combine_over_string_keys_spills(cluster: tmr.LocalCluster, spill: Path) -> None:
    words = np.array([f"word{i}" for i in range(30_000)] * 2)
    job = tmr.MapReduce(lambda k: (k, tf.ones_like(k, tf.int64)), tmr.combiners.sum, by_key=True, max_bytes=BUDGET)
    got, stats = job.run(words, reducers=2, cluster=cluster, return_stats=True)
    assert got.to_dict() == {f"word{i}": 2 for i in range(30_000)}
    assert isinstance(stats, tmr.RunStats)  # the spill run's
    roomy = tmr.MapReduce(lambda k: (k, tf.ones_like(k, tf.int64)), tmr.combiners.sum, by_key=True, max_bytes=10**9)
    with roomy.run(words, reducers=2, cluster=cluster, resident=True) as kept:  # within its budget: as before
        assert kept.gather().to_dict() == got.to_dict()
    assert os.listdir(spill) == []
    with pytest.raises(TypeError, match=r"max_bytes=10 bounds what one reducer of a keyed combine receives.*by_key=True"):
        tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum, max_bytes=10)


def test_a_word_count_over_files_with_a_budget_spills_and_equals_a_counter(
    cluster: tmr.LocalCluster, spill: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(13)
    paths = []
    for i in range(2):
        words = [f"w{j}" for j in rng.integers(0, 40_000, 60_000)]
        path = tmp_path / f"part{i}.txt"
        path.write_text("\n".join(" ".join(words[a : a + 10]) for a in range(0, len(words), 10)) + "\n")
        paths.append(str(path))
    expected = collections.Counter(w for p in paths for w in Path(p).read_text().split())

    def words(line: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        split = tf.strings.split(line).flat_values
        return split, tf.ones_like(split, tf.int64)

    job = tmr.MapReduce(words, tmr.combiners.sum, by_key=True, max_bytes=BUDGET)  # the native word count, fused
    with caplog.at_level(logging.INFO, logger="tfmapreduce"):
        got = job.run(tmr.read_text(paths), reducers=2, cluster=cluster)
    assert _spilled(caplog)[1] <= BUDGET
    assert got.to_dict() == dict(expected)
    assert os.listdir(spill) == []
