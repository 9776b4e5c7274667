"""Plans that say what their budget expects before any run: a group job's, a keyed combine's and a join's plan print
whether they run in memory or spill, in how many sub-partitions (rounds), and what each task writes; the spilled runs
then do what their plans said."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr
from tfmapreduce._native.loader import has, kernels

BUDGET = 200_000
"""A reducer's budget in these tests: 200 kB, against shares of 3× that."""


def _summed(keys: tf.Tensor, values: tf.RaggedTensor) -> tf.Tensor:
    return tf.reduce_sum(values, axis=1)


@pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")
def test_a_group_plan_over_its_budget_says_it_spills_and_the_run_does_as_planned(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, spilled_parts: Callable[[], int]
) -> None:
    keys = np.arange(40_000) % 1500  # 40,000 rows of 16 bytes: 320,000 bytes per reducer of two
    job = tmr.MapReduce(lambda k, v: (k, v), tmr.per_group(_summed, max_bytes=BUDGET), by_key=True)
    plan = job.plan((keys, np.ones(keys.size)), reducers=2, sizes=2, cluster=cluster)
    assert plan.spill is not None
    assert plan.spill.spills
    assert (plan.spill.share, plan.spill.budget, plan.spill.parts) == (320_000, BUDGET, 4)
    assert [size for _, size in plan.spill.written] == [320_000, 320_000]  # each task's shard, 16 bytes a row
    text = str(plan)
    assert "spills: each reducer's share of (key, value) rows, estimated from the input's rows: about 320,000 bytes" in text
    assert "over the budget of 200,000 bytes (max_bytes=200000)" in text
    assert f"640,000 bytes are written to {spill}/tfmapreduce-spill-<run> on their tasks, in 2 × 4 hash" in text
    assert "/job:local/task:1: 320,000 bytes" in text
    with caplog.at_level(logging.INFO, logger="tfmapreduce"):
        got = job.run((keys, np.ones(keys.size)), reducers=2, sizes=2, cluster=cluster)
    assert abs(spilled_parts() - plan.spill.parts) <= 1  # the run plans from its largest reducer's real share
    assert len(got) == 1500


@pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")
def test_a_join_plan_over_its_budget_says_it_spills_and_the_join_does_as_planned(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, spilled_parts: Callable[[], int]
) -> None:
    keys = np.arange(20_000)  # 20,000 output rows of 24 bytes: 240,000 bytes per device of two
    left, right = (keys, keys * 1.0), (keys[::-1].copy(), keys)
    plan = tmr.plan_join(left, right, max_bytes=100_000, strategy="hash", reducers=2, cluster=cluster)
    assert plan.spill is not None
    assert (plan.spill.share, plan.spill.parts) == (240_000, 5)
    assert "spills: each device's output rows, estimated as its larger side's: about 240,000 bytes" in str(plan)
    assert "(5 rounds; a resident join is refused instead)" in str(plan)
    with caplog.at_level(logging.INFO, logger="tfmapreduce"):
        joined = tmr.join(left, right, max_bytes=100_000, strategy="hash", reducers=2, cluster=cluster)
    assert abs(spilled_parts() - plan.spill.parts) <= 1
    assert len(joined.keys) == keys.size


def test_plans_within_their_budget_say_in_memory_a_keyed_combine_without_max_bytes_too(cluster: tmr.LocalCluster) -> None:
    keys = np.arange(1000)
    names = np.array(["abcd"] * 1000, object)  # 8 + 32 + 4 bytes a row
    job = tmr.MapReduce(lambda k, v: (k, v), tmr.per_group(_summed), by_key=True)
    plan = job.plan((keys, names), reducers=2, cluster=cluster)
    assert plan.spill is not None
    assert not plan.spill.spills
    assert plan.spill.parts == 0
    assert plan.spill.share == 22_000
    assert "in memory: each reducer's share of (key, value) rows, estimated from the input's rows: about 22,000 bytes, " in str(
        plan
    )
    assert "(a quarter of this host's available memory)" in str(plan)
    summed = tmr.MapReduce(lambda k, v: (k, v), tmr.combiners.sum, by_key=True)
    unbudgeted = summed.plan((keys, keys), cluster=cluster)  # no max_bytes: checked against the host's memory
    assert unbudgeted.spill is not None
    assert not unbudgeted.spill.spills
    assert "(a quarter of this host's available memory)" in str(unbudgeted)
    budgeted = tmr.MapReduce(lambda k, v: (k, v), tmr.combiners.sum, by_key=True, max_bytes=5_000)
    forecast = budgeted.plan((keys, keys), reducers=2, cluster=cluster).spill
    assert forecast is not None
    assert forecast.parts == 4
    joined = tmr.plan_join((keys, keys), (keys, keys), cluster=cluster)
    assert joined.spill is not None
    assert "in memory: each device's output rows" in str(joined)


def test_a_join_plan_of_csv_tables_estimates_their_rows_from_their_files_bytes(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    """Issue 42: a table's rows are known once read, so its files' bytes stand for them (nothing runs)."""
    (tmp_path / "orders.csv").write_text("user,amount\n" + "".join(f"{i % 500},{i}.5\n" for i in range(20_000)))
    (tmp_path / "users.csv").write_text("user,age\n" + "".join(f"{i},{i % 90}\n" for i in range(500)))
    orders = tmr.read_csv(str(tmp_path / "orders.csv"), dtypes={"amount": "float64"})
    users = tmr.read_csv(str(tmp_path / "users.csv"), dtypes={"age": "int64"})
    size = (tmp_path / "orders.csv").stat().st_size
    plan = tmr.plan_join(orders, users, max_bytes=50_000, strategy="hash", reducers=2, cluster=cluster)
    assert plan.units == ("bytes", "bytes")
    assert plan.spill is not None
    assert plan.spill.spills
    assert plan.spill.share == -(-(size // 16) * 24 // 2)  # its rows: its bytes over 16 (key, amount); 24 bytes out a row
    assert sum(written for _, written in plan.spill.written) == sum(p.stat().st_size for p in tmp_path.glob("*.csv"))
    assert "estimated as its larger side's (a CSV side's rows as its files' bytes over a row's bytes in memory)" in str(plan)
    assert f"({plan.spill.parts} rounds; a resident join is refused instead)" in str(plan)
