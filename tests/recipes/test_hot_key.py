"""One hot key over a group recipe's budget: median, quantiles and top-k of a key whose values alone exceed
``max_bytes=``, selected from the workers' disks in passes, its distinct values counted in hash buckets and its values
collected straight to the client (``_kinds.spilled_hot``), against numpy and pandas."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tfmapreduce as tmr
from tfmapreduce._native.loader import has, kernels

BUDGET = 4_000
"""A reducer's budget here: 4 kB, against a hot key of 800 values (12.8 kB with its keys) beside 100 normal keys."""

pytestmark = pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")


def _data(seed: int, dtype: str = "float64", hot: int = 800) -> tuple[np.ndarray, np.ndarray]:
    """100 keys of a few values each and key 7 with ``hot`` more, shuffled; floats with ties, NaN in key 3 and ±inf."""
    rng = np.random.default_rng(seed)
    keys = np.concatenate([rng.integers(0, 100, 200), np.full(hot, 7)])
    values = rng.integers(-50, 50, keys.size).astype(dtype)  # ties everywhere
    if dtype == "float64":
        values[keys == 3] = np.nan
        values[rng.integers(0, keys.size, 20)] = np.inf
        values[rng.integers(0, keys.size, 20)] = -np.inf
    order = rng.permutation(keys.size)
    return keys[order], values[order]


def test_a_hot_key_median_and_quantiles_under_a_unicode_key_over_three_times_the_budget_equal_pandas(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keys, values = _data(1)
    with caplog.at_level(logging.INFO, logger="tfmapreduce"):
        median = tmr.median_by_key(keys, values, max_bytes=BUDGET, reducers=2, cluster=cluster, sizes=[0, keys.size])
    hot = r"the largest \d+ bytes within the budget of 4000; the hot key 7 \(about 12,8\d\d bytes\) reduced from the disks"
    assert any(re.search(hot, r.getMessage()) for r in caplog.records)  # key 7 (and its few normal values) never held
    expected = pd.Series(values).groupby(keys).median(skipna=False)
    np.testing.assert_array_equal(median.keys, expected.index.to_numpy())
    np.testing.assert_array_equal(median.values, expected.to_numpy())
    keys, values = _data(2, "int32", hot=300)  # 300 string keys of 41 bytes and their int32 values: 3.4 times the budget
    words = np.array([f"ключ{k}" for k in keys])
    q = [0.0, 0.3, 0.5, 0.99, 1.0]
    got = tmr.quantile_by_key(words, values, q, method="lower", max_bytes=BUDGET, reducers=2, cluster=cluster)
    assert list(got.keys) == sorted(set(words.tolist()))
    for word, row in zip(got.keys, got.values, strict=True):
        assert row.dtype == np.int32
        np.testing.assert_array_equal(row, np.quantile(values[words == word], q, method="lower"))
    assert os.listdir(spill) == []


def test_a_hot_key_top_k_whose_tasks_partials_exceed_the_budget_equals_numpy(cluster: tmr.LocalCluster, spill: Path) -> None:
    keys, values = _data(3)
    only = keys == 7
    values[np.flatnonzero(only)[:5]] = np.nan  # NaN above every number, as np.sort: the largest first
    for largest in (True, False):
        got = tmr.top_k_by_key(keys, values, 150, largest=largest, max_bytes=BUDGET, reducers=2, cluster=cluster)
        ordered = np.sort(values[only])  # NaN last, as np.sort
        np.testing.assert_array_equal(got[7], ordered[::-1][:150] if largest else ordered[:150])
        np.testing.assert_array_equal(got[3], np.full(int((keys == 3).sum()), np.nan))
    one = tmr.median_by_key(np.full(1_000, 5), np.arange(1_000.0), max_bytes=BUDGET, cluster=cluster)  # the hot key alone
    assert one.to_dict() == {5: 499.5}
    assert os.listdir(spill) == []


def test_a_hot_key_count_distinct_of_numbers_and_unicode_strings_by_hash_or_range_equals_pandas(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(5)
    keys = rng.permutation(np.concatenate([rng.integers(0, 100, 300), np.full(1_500, 7)]))
    numbers = rng.integers(0, 700, keys.size).astype(np.float64)  # key 7: about 600 distinct, each task some of them
    numbers[np.flatnonzero(keys == 7)[:6]] = [np.nan, np.nan, -0.0, 0.0, np.inf, -np.inf]  # one NaN, one zero
    words = np.array([f"знач{v:.0f}" if v == v else "" for v in numbers], object)
    for values, partitioner in ((numbers, "hash"), (words, "range")):  # range: the sub-partitions sampled ranges
        with caplog.at_level(logging.INFO, logger="tfmapreduce"):
            got = tmr.count_distinct_by_key(
                keys, values, max_bytes=BUDGET, reducers=2, cluster=cluster, sizes=[900, 900], partitioner=partitioner
            )
        assert any(
            re.search(r"the hot key 7 \(about [\d,]+ bytes\) reduced from the disks", r.getMessage()) for r in caplog.records
        )
        caplog.clear()
        expected = pd.Series(values).groupby(keys).nunique(dropna=False)
        assert got.to_dict() == expected.to_dict()
    assert os.listdir(spill) == []


def test_a_hot_key_collected_straight_to_the_client_equals_numpy_sorted_or_not(cluster: tmr.LocalCluster, spill: Path) -> None:
    keys, values = _data(6)
    for sort_values in (True, False):
        got = tmr.collect_by_key(keys, values, sort_values=sort_values, max_bytes=BUDGET, reducers=2, cluster=cluster)
        assert sorted(got.keys.tolist()) == sorted(set(keys.tolist()))
        for key, row in zip(got.keys, got.values, strict=True):
            expected = np.sort(values[keys == key])  # NaN last, as np.sort
            np.testing.assert_array_equal(row if sort_values else np.sort(row), expected)
    rows = np.stack([values, -values], axis=1)  # rows of two values stay rows
    words = np.array([f"ключ{k}" for k in keys])
    got = tmr.collect_by_key(words, rows, max_bytes=BUDGET, reducers=2, cluster=cluster)
    hot = got["ключ7"]
    assert hot.shape == (int((keys == 7).sum()), 2)
    np.testing.assert_array_equal(hot[np.lexsort(hot.T[::-1])], (r := rows[keys == 7])[np.lexsort(r.T[::-1])])
    assert os.listdir(spill) == []


def test_two_hot_keys_of_one_sub_partition_are_each_reduced_from_the_disks(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture
) -> None:
    inverse = pow(0x9E3779B97F4A7C15, -1, 2**64)  # key k + inverse hashes to k's hash + 1: one bucket, however many
    twin = int(np.array(7 + inverse, np.uint64).view(np.int64))
    keys, values = _data(7)
    keys[np.flatnonzero(keys == 7)[::2]] = twin  # two keys of 400 values each, 6.4 kB apiece, in one sub-partition
    with caplog.at_level(logging.INFO, logger="tfmapreduce"):
        median = tmr.median_by_key(keys, values, max_bytes=BUDGET // 2, reducers=2, cluster=cluster)
    both = [
        r.getMessage() for r in caplog.records if "the hot key 7 " in r.getMessage() and f"the hot key {twin} " in r.getMessage()
    ]
    assert both, "the two keys were not both reduced from the disks"
    expected = pd.Series(values).groupby(keys).median(skipna=False)
    np.testing.assert_array_equal(median.keys, expected.index.to_numpy())
    np.testing.assert_array_equal(median.values, expected.to_numpy())
    collected = tmr.collect_by_key(keys, values, sort_values=True, max_bytes=BUDGET // 2, reducers=2, cluster=cluster)
    for key in (7, twin):
        np.testing.assert_array_equal(collected[key], np.sort(values[keys == key]))
    assert os.listdir(spill) == []
