"""speculate=True: stragglers backed up on idle tasks, with real workers (one stopped by SIGSTOP in the straggler test)."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import numpy as np
import pytest
import stopping
import tensorflow as tf

import tfmapreduce as tmr

pytestmark = pytest.mark.alone  # measures time or speed: scripts/test runs it with no other test beside it

T0 = "/job:local/replica:0/task:0/device:CPU:0"
T1 = "/job:local/replica:0/task:1/device:CPU:0"


def _sum_and_rows(t: Any) -> Any:
    """(sum, rows) of a shard: a second count of every row, to check that no shard is counted twice."""
    return tf.reduce_sum(t, axis=0), tf.shape(t, out_type=tf.int64)[0]


@pytest.mark.parametrize(
    "sizes",
    [[30, 70], [0, 50, 50, 0], 4, [1, 0, 0, 99], [99, 1], tmr.weights(1, 3)],
    ids=["30-70", "empty-ends", "4-even", "empty-middle", "99-1", "weights"],
)
def test_speculative_results_equal_numpy_and_the_one_graph_run(cluster: tmr.LocalCluster, sizes: Any) -> None:
    rng = np.random.default_rng(7)
    x = rng.random((100, 3))
    n = np.arange(100, dtype=np.int64)
    mean = tmr.MapReduce(lambda t: tf.reduce_mean(t, axis=0), tmr.combiners.weighted_mean)
    got, stats = mean.run(x, cluster=cluster, sizes=sizes, speculate=True, return_stats=True)
    np.testing.assert_allclose(got, x.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(got, mean.run(x, cluster=cluster, sizes=sizes), rtol=1e-12)
    assert sum(s.rows for s in stats.shards) == 100
    assert all(s.backup != s.device for s in stats.shards)
    assert all(not s.backup_won or s.backup is not None for s in stats.shards)
    total, rows = tmr.MapReduce(_sum_and_rows, tmr.combiners.sum).run(n, cluster=cluster, sizes=sizes, speculate=True)
    assert (int(total), int(rows)) == (int(n.sum()), 100)  # exact integers: every row counted once
    low, high = (
        tmr.MapReduce(tf.reduce_min, tmr.combiners.min).run(x[:, 0], cluster=cluster, sizes=sizes, speculate=True),
        tmr.MapReduce(tf.reduce_max, tmr.combiners.max).run(x[:, 0], cluster=cluster, sizes=sizes, speculate=True),
    )
    assert (float(low), float(high)) == (x[:, 0].min(), x[:, 0].max())


def test_broadcast_values_and_co_partitioned_inputs_reach_every_copy(cluster: tmr.LocalCluster) -> None:
    x = np.arange(60, dtype=np.float64).reshape(30, 2)
    w = np.arange(30, dtype=np.float64)
    job = tmr.MapReduce(lambda a, b, scale: tf.reduce_sum(a * b[:, None] * scale, axis=0), tmr.combiners.sum)
    got = job.run((x, w), cluster=cluster, sizes=[10, 20], broadcast=[np.float64(2.0)], speculate=True)
    np.testing.assert_allclose(got, (x * w[:, None] * 2).sum(axis=0))
    assert float(tmr.mean(x[:, 1], cluster=cluster, sizes=[10, 20], speculate=True)) == pytest.approx(
        x[:, 1].mean()
    )  # recipes too


def test_the_plan_says_what_speculation_does(cluster: tmr.LocalCluster) -> None:
    x = np.arange(100.0)
    job = tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum)
    plan = job.plan(x, cluster=cluster, sizes=[30, 70], speculate=True)
    assert "speculate=True: each shard is its own fetch" in str(plan)
    assert plan == job.plan(x, cluster=cluster, sizes=[30, 70])  # the same shards on the same devices
    assert "speculate" not in str(job.plan(x, cluster=cluster, sizes=[30, 70]))
    one_task = job.plan(x, cluster=cluster, devices=[T0], sizes=2, speculate=True)
    assert "no backups: that takes two non-empty shards on two tasks" in str(one_task)
    with tmr.scatter(x, cluster=cluster, sizes=[30, 70]) as resident:
        assert "no backups: resident and file data is read on its own task only" in str(job.plan(resident, speculate=True))
        total, stats = job.run(resident, speculate=True, return_stats=True)  # one graph, as usual
        assert float(total) == x.sum()
        assert stats.backed_up == ()


def test_bad_and_unsupported_uses_name_the_option(cluster: tmr.LocalCluster) -> None:
    x = np.arange(10.0)
    with pytest.raises(TypeError, match=r"speculate must be True or False, got str 'yes'"):
        tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum).run(x, cluster=cluster, speculate="yes")  # type: ignore[typeddict-item]
    keyed = tmr.MapReduce(lambda k: (k, tf.ones_like(k)), tmr.combiners.sum, by_key=True)
    keys = np.array([1, 2, 1], np.int64)
    with pytest.raises(TypeError, match=r"speculate=True applies to whole-input jobs only"):
        keyed.run(keys, cluster=cluster, speculate=True)
    with pytest.raises(TypeError, match=r"speculate=True applies to whole-input jobs only"):
        keyed.plan(keys, cluster=cluster, speculate=True)
    with pytest.raises(TypeError, match=r"speculate=True applies to whole-input jobs only"):
        tmr.count_by_key(keys, cluster=cluster, speculate=True)


def test_sizes_auto_learns_from_speculative_runs(cluster: tmr.LocalCluster) -> None:
    x = np.random.default_rng(3).random((400_000, 2))
    job = tmr.MapReduce(lambda t: tf.reduce_sum(tf.sin(t), axis=0), tmr.combiners.sum)
    for _ in range(2):
        got = job.run(x, cluster=cluster, sizes="auto", speculate=True)
    np.testing.assert_allclose(got, np.sin(x).sum(axis=0), rtol=1e-10)
    plan = job.plan(x, cluster=cluster, sizes="auto")
    assert plan.measured is not None
    assert plan.measured.runs >= 1


def test_a_stopped_task_s_shard_is_backed_up_and_counted_once() -> None:
    """Task 1 is stopped (SIGSTOP) for STOP seconds: with speculate=True its shard's backup on task 0 wins at once."""
    stop = 1.5
    x = np.arange(2_000_000, dtype=np.int64)
    job = tmr.MapReduce(_sum_and_rows, tmr.combiners.sum)
    expected = (int(x.sum()), len(x))
    with tmr.LocalCluster(2) as local:
        assert job.run(x, cluster=local, speculate=True) == expected  # sessions open while every task answers
        worker = local.pids[1]

        def stopped_run(runs: int = 1, **options: Any) -> tuple[Any, float]:
            stopping.stop(worker)
            resume = threading.Timer(stop, os.kill, (worker, signal.SIGCONT))
            resume.start()
            try:
                started = time.perf_counter()
                for _ in range(runs):
                    out = job.run(x, cluster=local, sizes=[1_000_000, 1_000_000], return_stats=True, **options)
                return out, (time.perf_counter() - started) / runs
            finally:
                resume.cancel()
                os.kill(worker, signal.SIGCONT)

        (result, stats), fast = stopped_run(speculate=True, runs=2)  # the second starts while the first's loser runs
        assert (int(result[0]), int(result[1])) == expected  # the loser's rows never count
        assert [(s.backup, s.backup_won) for s in stats.shards] == [(None, False), (T0, True)]
        assert stats.backed_up == (1,)
        assert fast < stop / 2
        time.sleep(0.2)  # task 1 finishes the loser's step
        (result, _), slow = stopped_run(retries=0)  # no speculation: the run waits for task 1
        assert (int(result[0]), int(result[1])) == expected
        assert slow > stop * 0.9 > fast


@pytest.mark.slow
def test_a_task_stopped_before_the_first_speculative_run_is_named_and_retried_around() -> None:
    """The speculative program's new session waits for every task of its plan: a stopped one is named as hung well
    before the deadline, and the retry runs on the survivor (it used to wait out the whole deadline, twice)."""
    x = np.arange(1000.0)
    job = tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum)
    with tmr.LocalCluster(2) as local:
        assert float(tmr.sum(x, cluster=local)) == x.sum()  # connected while every task answers
        stopping.stop(local.pids[1])
        try:
            started = time.monotonic()
            total, stats = job.run(x, cluster=local, speculate=True, timeout=30, return_stats=True)
            elapsed = time.monotonic() - started
        finally:
            os.kill(local.pids[1], signal.SIGCONT)
    assert float(total) == x.sum()
    assert stats.attempts == 2
    assert [str(t) for t in stats.lost] == ["/job:local/task:1"]
    assert elapsed < 15, f"{elapsed:.1f} s"
