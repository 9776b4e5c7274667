"""A keyed combine's plan counts per-key partials, not input rows: each task sends at most one per distinct key it
holds, bounded soundly before the run (min(its rows, its integer keys' range)), each of the combiner's partial bytes;
the runs then stay within what their plans said."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

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
        assert f"in memory: each reducer's share of per-key partials ({row} bytes each; a task's at most min(its rows, " in str(
            plan
        )
    median = tmr.plan_by_key(keys, values, recipe=tmr.median_by_key, **options)
    assert median.spill.share == rows.spill.share  # a group recipe sends its rows
    with pytest.raises(TypeError, match=r"recipe= names the by-key recipe planned, e.g. recipe=tmr.sum_by_key.*got <built-in"):
        tmr.plan_by_key(keys, values, recipe=len, **options)


def test_keys_of_unknown_distinct_count_are_bounded_by_the_rows(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(31)
    spread = rng.integers(-(2**62), 2**62, 20_000)  # a range far over the rows: the rows bound them
    words = np.array([f"wört{i % 100}" for i in range(20_000)], dtype=object)  # strings: the rows bound them
    options = {"reducers": 2, "sizes": 2, "cluster": cluster, "max_bytes": 10**9}
    assert tmr.plan_by_key(spread, np.ones(spread.size), recipe=tmr.sum_by_key, **options).spill.share == 20_000 * 16 // 2
    text = tmr.plan_by_key(words, np.ones(words.size), recipe=tmr.sum_by_key, **options).spill
    assert text.share == 20_000 * (32 + 7 + 8) // 2  # 32 per string and its UTF-8 bytes, 6.9 on average
    made = tmr.MapReduce(lambda k, v: (k * 2, v), tmr.combiners.mean, by_key=True, max_bytes=10**9)
    plan = made.plan((spread, np.ones(spread.size)), **{k: v for k, v in options.items() if k != "max_bytes"})
    assert plan.spill.share == 20_000 * 24 // 2  # keys the map makes: one partial a row, of the partial's 24 bytes
    assert "per-key partials, one a row at most (24 bytes each)" in str(plan)


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
