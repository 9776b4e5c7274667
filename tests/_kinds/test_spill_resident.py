"""Resident and range-partitioned keyed combines over their budget, spilled: kept on their reducers (``resident=True``)
or fetched in key order, against pandas and the in-memory run on real workers, and no spill file left behind."""

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

BUDGET = 150_000
"""A reducer's budget in these tests, against shares of about 450 kB of keys and partials."""

pytestmark = pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")


def _pairs(k: tf.Tensor, v: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return k, v


def test_a_resident_keyed_sum_over_its_budget_is_kept_where_the_in_memory_run_keeps_it(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, spilled_parts: Callable[[], int]
) -> None:
    rng = np.random.default_rng(21)
    keys = rng.integers(0, 12_000, 30_000)  # ~8.6k distinct keys per task: about 140 kB of keys and sums per reducer
    values = rng.normal(size=keys.size)
    sizes = [0, 15_000, 15_000]  # an empty shard
    job = tmr.MapReduce(_pairs, tmr.combiners.sum, by_key=True, max_bytes=100_000)
    roomy = tmr.MapReduce(_pairs, tmr.combiners.sum, by_key=True)
    expected = pd.Series(values).groupby(keys).sum()
    with caplog.at_level(logging.INFO, logger="tfmapreduce.spill"):
        kept = job.run((keys, values), reducers=2, sizes=sizes, cluster=cluster, resident=True)
        assert spilled_parts() >= 2
        caplog.clear()
        memory = roomy.run((keys, values), reducers=2, sizes=sizes, cluster=cluster, resident=True)
    assert not caplog.records  # without a budget: in memory, nothing spilled
    with kept, memory:
        assert isinstance(kept, tmr.KeyedSharded)
        got = kept.gather()
        np.testing.assert_array_equal(got.keys, expected.index.to_numpy())
        np.testing.assert_allclose(got.values, expected.to_numpy(), rtol=1e-12)
        placed_as_in_memory(kept, memory, expected.size)
        total = tmr.sum(kept.values)  # a second job reads it in place
        np.testing.assert_allclose(total, values.sum(), rtol=1e-9)
    assert os.listdir(spill) == []


def test_a_resident_mean_over_unicode_keys_spilled_equals_pandas(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, spilled_parts: Callable[[], int]
) -> None:
    rng = np.random.default_rng(22)
    codes = rng.integers(0, 5_000, 12_000)
    words = np.array([f"wört-{c}-é" for c in codes], dtype=object)
    values = rng.normal(size=codes.size)
    with caplog.at_level(logging.INFO, logger="tfmapreduce.spill"):
        kept = tmr.mean_by_key(words, values, max_bytes=BUDGET, reducers=2, cluster=cluster, resident=True)
    assert spilled_parts() >= 2
    with kept:
        got = kept.gather()
    expected = pd.Series(values).groupby(words).mean()
    assert list(got.keys) == expected.index.tolist()
    np.testing.assert_allclose(got.values, expected.to_numpy(), rtol=1e-12)
    assert os.listdir(spill) == []


@pytest.mark.parametrize("resident", [False, True])
def test_a_range_partitioned_keyed_count_over_its_budget_spills_in_key_order(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, spilled_parts: Callable[[], int], resident: bool
) -> None:
    rng = np.random.default_rng(23)
    keys = rng.integers(-50_000, 50_000, 60_000)
    expected = pd.Series(keys).value_counts().sort_index()
    with caplog.at_level(logging.INFO, logger="tfmapreduce.spill"):
        got = tmr.count_by_key(keys, max_bytes=BUDGET, reducers=2, partitioner="range", cluster=cluster, resident=resident)
    assert spilled_parts() >= 2
    if isinstance(got, tmr.KeyedSharded):
        with got:
            got = in_key_order(got, expected.index.tolist())
    np.testing.assert_array_equal(got.keys, expected.index.to_numpy())
    np.testing.assert_array_equal(got.values, expected.to_numpy())
    assert os.listdir(spill) == []


@pytest.mark.parametrize("recipe", [tmr.sum_by_key, tmr.median_by_key], ids=lambda r: r.__name__)
def test_the_plan_of_a_keyed_run_says_a_resident_or_ranged_run_spills_too(cluster: tmr.LocalCluster, recipe: object) -> None:
    keys = np.arange(60_000) % 40_000
    options = {"max_bytes": BUDGET, "reducers": 2, "cluster": cluster, "recipe": recipe}
    plan = tmr.plan_by_key(keys, np.ones(keys.size), partitioner="range", **options)
    assert plan.spill.spills
    assert "range sub-partitions" in str(plan)
    assert "resident=True keeps each reducer's rounds concatenated" in str(plan)
    hashed = tmr.plan_by_key(keys, np.ones(keys.size), **options)
    assert "hash sub-partitions" in str(hashed)
    assert "is refused instead" not in str(hashed)
