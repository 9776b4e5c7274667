"""The by-key recipes' budget (issue 42): ``max_bytes=`` as ``MapReduce(..., by_key=True, max_bytes=)`` takes it, a
recipe over it spilled through the workers' disks with pandas' result, and ``tmr.plan_by_key`` saying so first."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import tfmapreduce as tmr
from tfmapreduce._native.loader import has, kernels

CASES = [("sum_by_key", False, 10_000, 40_000, lambda g: g.sum()), ("count_by_key", True, 4_000, 35_000, lambda g: g.size())]
"""A recipe, string keys or not, its rows (keys drawn from 0.4 as many), and a budget of about half each reducer's share of
per-key partials (3 rounds)."""


def _spills(caplog: pytest.LogCaptureFixture) -> int:
    """How many spilled runs the log records."""
    return sum("sub-partition(s) per reducer" in r.getMessage() for r in caplog.records)


@pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")
@pytest.mark.parametrize(("name", "strings", "rows", "budget", "expected"), CASES, ids=["sum_by_key-int", "count_by_key-str"])
def test_a_by_key_recipe_over_its_budget_spills_and_equals_pandas(
    cluster: tmr.LocalCluster,
    spill: Path,
    caplog: pytest.LogCaptureFixture,
    spilled_parts: Callable[[], int],
    name: str,
    strings: bool,
    rows: int,
    budget: int,
    expected: Callable[[Any], pd.Series],
) -> None:
    rng = np.random.default_rng(42)
    ids = rng.integers(0, rows * 2 // 5, rows)  # 10,000 rows: ~3k distinct keys per task of two, 90 kB of keys and sums
    keys = np.array([f"k{i}" for i in ids], object) if strings else ids
    values = rng.normal(size=ids.size)
    recipe = getattr(tmr, name)
    args = (keys,) if name == "count_by_key" else (keys, values)
    with caplog.at_level(logging.INFO, logger="tfmapreduce"):
        got = recipe(*args, max_bytes=budget, reducers=2, cluster=cluster)
        assert spilled_parts() >= 2
        if not strings:  # within its budget (None: a quarter of the host's memory) the same recipe does not spill
            within = recipe(*args, reducers=2, cluster=cluster)
            assert _spills(caplog) == 1
            np.testing.assert_array_equal(got.values, within.values)  # the same merges per key, spilled or not
    want = expected(pd.Series(values).groupby(keys))
    assert list(got.keys) == list(want.index)
    np.testing.assert_allclose(got.values, want.to_numpy(), rtol=1e-12)
    assert os.listdir(spill) == []


def test_plan_by_key_says_whether_a_recipe_spills_before_it_runs(cluster: tmr.LocalCluster, spill: Path) -> None:
    keys = np.arange(40_000) % 1_500  # 40,000 rows of 16 bytes: 320,000 bytes per reducer of two
    plan = tmr.plan_by_key(keys, np.ones(keys.size), max_bytes=200_000, reducers=2, sizes=2, cluster=cluster)
    assert isinstance(plan, tmr.KeyedPlan)
    assert plan.spill is not None
    assert (plan.spill.spills, plan.spill.share, plan.spill.parts) == (True, 320_000, 4)
    assert "spills: each reducer's share of (key, value) rows" in str(plan)
    assert "over the budget of 200,000 bytes (max_bytes=200000)" in str(plan)
    alone = tmr.plan_by_key(keys, max_bytes=200_000, reducers=2, cluster=cluster).spill  # the keys alone: 8 bytes a row
    assert alone is not None
    assert (alone.share, alone.spills) == (160_000, False)
    roomy = tmr.plan_by_key(keys, np.ones(keys.size), reducers=2, cluster=cluster)  # no max_bytes: the host's memory
    assert "in memory: each reducer's share" in str(roomy)
    assert "(a quarter of this host's available memory)" in str(roomy)
    path = spill.parent / "orders.csv"  # a CSV table's rows are known once read: its files' bytes stand for them
    path.write_text("user,amount\n" + "".join(f"{i % 500},{i}.5\n" for i in range(20_000)))
    orders = tmr.read_csv(str(path), dtypes={"amount": "float64"})
    table = tmr.plan_by_key(orders, keys="user", values="amount", max_bytes=50_000, reducers=2, cluster=cluster).spill
    assert table is not None
    first = path.read_text().splitlines()[1:10_001]  # a record's bytes on file: the mean of the first 10,000 lines'
    record = sum(len(line.encode()) + 1 for line in first) // len(first)
    assert table.share == -(-(path.stat().st_size // record) * 16 // 2)  # rows of 16 bytes (int64 key, float64 value)
    assert sum(size for _, size in table.written) == path.stat().st_size
    assert f"(a CSV table's rows as its files' bytes over {record} a record, its rows 16 bytes each in memory)" in str(table)
    assert tmr.recipes.word_count(["a b", "a"], max_bytes=10**6, cluster=cluster).to_dict() == {"a": 2, "b": 1}
    columns = tmr.mean_by_key(np.array([1, 2, 1]), (np.array([1.0, 2.0, 3.0]), np.ones(3)), max_bytes=10**6, cluster=cluster)
    assert columns.to_dict() == {1: (2.0, 1.0), 2: (2.0, 1.0)}
    with pytest.raises(ValueError, match=r"max_bytes must be None .* or an int ≥ 1 .*got 0"):
        tmr.plan_by_key(keys, max_bytes=0, cluster=cluster)
    with pytest.raises(ValueError, match=r"max_bytes must be None .* or an int ≥ 1 .*got -5"):
        tmr.sum_by_key(keys, keys, max_bytes=-5, cluster=cluster)
    assert os.listdir(spill) == []
