"""Resident and range-partitioned group reducers over their budget, spilled: kept on their reducers (``resident=True``,
ragged leaves too) or fetched in key order, against pandas and the in-memory run on real workers, no spill file left."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from kept import in_key_order, placed_as_in_memory

import tfmapreduce as tmr
from tfmapreduce._native.loader import has, kernels

BUDGET = 100_000
"""A reducer's budget in these tests, against shares of about 240 kB of keys and values."""

pytestmark = pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")


def _spread(keys: tf.Tensor, values: tf.RaggedTensor) -> tf.Tensor:
    return tf.reduce_max(values, axis=1) - tf.reduce_min(values, axis=1)


def test_a_resident_median_over_its_budget_is_kept_where_the_in_memory_run_keeps_it(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, spilled_parts: Callable[[], int]
) -> None:
    rng = np.random.default_rng(31)
    keys = rng.integers(0, 3_000, 30_000)  # 480 kB of int64 keys and float64 values: 240 kB per reducer of two
    values = rng.normal(size=keys.size)
    values[rng.integers(0, keys.size, 20)] = np.nan
    sizes = [0, 12_000, 18_000]  # an empty shard
    expected = pd.Series(values).groupby(keys).median(skipna=False)
    with caplog.at_level(logging.INFO, logger="tfmapreduce.spill"):
        kept = tmr.median_by_key(keys, values, max_bytes=BUDGET, reducers=2, sizes=sizes, cluster=cluster, resident=True)
        assert spilled_parts() >= 2
        caplog.clear()
        memory = tmr.median_by_key(keys, values, reducers=2, sizes=sizes, cluster=cluster, resident=True)
    assert not caplog.records  # without a budget: in memory, nothing spilled
    with kept, memory:
        assert isinstance(kept, tmr.KeyedSharded)
        got = kept.gather()
        np.testing.assert_array_equal(got.keys, expected.index.to_numpy())
        np.testing.assert_array_equal(got.values, expected.to_numpy())
        placed_as_in_memory(kept, memory, expected.size)
    assert os.listdir(spill) == []


def test_a_resident_top_k_over_unicode_keys_spilled_keeps_its_ragged_values(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, spilled_parts: Callable[[], int]
) -> None:
    rng = np.random.default_rng(32)
    words = np.array([f"wört-{c}-é" for c in rng.integers(0, 1_500, 6_000)], dtype=object)
    values = rng.integers(-(10**6), 10**6, words.size)
    with caplog.at_level(logging.INFO, logger="tfmapreduce.spill"):
        kept = tmr.top_k_by_key(words, values, 3, max_bytes=BUDGET, reducers=2, cluster=cluster, resident=True)
    assert spilled_parts() >= 2
    with kept:
        assert isinstance(kept.values, tmr.RaggedSharded)
        got = kept.gather()
    expected = pd.Series(values).groupby(words).apply(lambda v: np.sort(v.to_numpy())[::-1][:3])
    assert list(got.keys) == expected.index.tolist()
    for key, top in expected.items():
        np.testing.assert_array_equal(got[key], top)
    assert os.listdir(spill) == []


def test_a_resident_range_partitioned_median_over_its_budget_is_kept_in_key_order(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, spilled_parts: Callable[[], int]
) -> None:
    rng = np.random.default_rng(33)
    keys = rng.integers(-20_000, 20_000, 30_000)
    values = rng.normal(size=keys.size)
    expected = pd.Series(values).groupby(keys).median()
    with caplog.at_level(logging.INFO, logger="tfmapreduce.spill"):
        kept = tmr.median_by_key(keys, values, max_bytes=BUDGET, reducers=2, partitioner="range", cluster=cluster, resident=True)
    assert spilled_parts() >= 2
    with kept:
        got = in_key_order(kept, expected.index.tolist())
    np.testing.assert_array_equal(got.keys, expected.index.to_numpy())
    np.testing.assert_array_equal(got.values, expected.to_numpy())
    assert os.listdir(spill) == []


def test_a_range_partitioned_per_group_over_string_keys_spilled_equals_pandas(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, spilled_parts: Callable[[], int]
) -> None:
    rng = np.random.default_rng(34)
    words = np.array([f"k{c:05d}" for c in rng.integers(0, 1_500, 5_500)])
    values = rng.integers(0, 1_000, words.size)
    job = tmr.MapReduce(lambda k, v: (k, v), tmr.per_group(_spread, max_bytes=BUDGET), by_key=True)
    with caplog.at_level(logging.INFO, logger="tfmapreduce.spill"):
        got = job.run((words, values), reducers=2, partitioner="range", cluster=cluster)
    assert spilled_parts() >= 2
    frame = pd.DataFrame({"k": words, "v": values}).groupby("k")["v"]
    expected = frame.max() - frame.min()
    assert list(got.keys) == expected.index.tolist()  # in key order, as fetched
    np.testing.assert_array_equal(got.values, expected.to_numpy())
    assert os.listdir(spill) == []


def test_a_hot_key_of_a_resident_median_or_distinct_count_is_kept_on_its_reducer_a_collected_one_refused(
    cluster: tmr.LocalCluster, spill: Path
) -> None:
    rng = np.random.default_rng(33)
    keys = rng.permutation(np.concatenate([np.arange(1_000), np.full(10_000, 42)]))  # key 42 alone: 160 kB
    values = rng.integers(0, 3_000, keys.size).astype(np.float64)
    for recipe, expected in (
        (tmr.median_by_key, pd.Series(values).groupby(keys).median()),
        (tmr.count_distinct_by_key, pd.Series(values).groupby(keys).nunique()),
    ):
        kept = recipe(keys, values, max_bytes=BUDGET, reducers=2, cluster=cluster, resident=True)
        memory = recipe(keys, values, reducers=2, cluster=cluster, resident=True)
        with kept, memory:
            got = kept.gather()
            np.testing.assert_array_equal(got.keys, expected.index.to_numpy())
            np.testing.assert_array_equal(got.values, expected.to_numpy())
            placed_as_in_memory(kept, memory, expected.size)
        assert os.listdir(spill) == []
    with pytest.raises(
        tmr.ReducerMemoryError,
        match=r"would receive 10,001 values of the key 42 alone, about 160,016 bytes .*even spilled to disk.*"
        r"Raise max_bytes= where the host has the memory, split the hot key",
    ):
        tmr.collect_by_key(keys, values, max_bytes=BUDGET, reducers=2, cluster=cluster, resident=True)
    assert os.listdir(spill) == []
