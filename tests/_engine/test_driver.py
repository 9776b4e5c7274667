"""The run driver's seam: every kind of job gets shared memory, quick reruns, auto sizes and speculation (or a clear
refusal) from the one driver, and a new kind plugs in with its plan, graph and finish alone."""

from __future__ import annotations

import statistics
import time
from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr
from tfmapreduce._base.plan import Plan
from tfmapreduce._engine import driver as _engine
from tfmapreduce._engine.call import Call
from tfmapreduce._engine.kind import KindBase
from tfmapreduce._engine.program import Builder, Program
from tfmapreduce._io.source import Sources, sources
from tfmapreduce._options import RunOptions


def _median_seconds(run: Any, times: int = 3) -> float:
    run()  # compiled and warm
    spans = []
    for _ in range(times):
        began = time.perf_counter()
        run()
        spans.append(time.perf_counter() - began)
    return statistics.median(spans)


@pytest.mark.alone  # compares two timings
@pytest.mark.slow
def test_a_keyed_job_over_host_arrays_ships_through_shared_memory_faster_than_feeds(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(0)
    keys, values = rng.integers(0, 1000, 4_000_000), rng.random(4_000_000)
    job = tmr.MapReduce(lambda k, v: (k, v), tmr.combiners.sum, by_key=True)
    plan = job.plan((keys, values), cluster=cluster)
    assert {s.path for s in plan.plan.shards} == {"shm"}
    assert {s.path for s in job.plan((keys, values), cluster=cluster, transfer="feed").plan.shards} == {"feed"}
    expected = np.bincount(keys, values)
    for transfer in ("shm", "feed"):
        result = job.run((keys, values), cluster=cluster, transfer=transfer)
        np.testing.assert_allclose(result.values, expected[result.keys])
    shm = _median_seconds(lambda: job.run((keys, values), cluster=cluster, transfer="shm"))
    feed = _median_seconds(lambda: job.run((keys, values), cluster=cluster, transfer="feed"))
    assert shm < feed, f"shared memory {shm:.3f} s, feeds {feed:.3f} s"


def test_a_keyed_run_like_the_last_goes_straight_to_its_program(cluster: tmr.LocalCluster) -> None:
    traced = []
    job = tmr.MapReduce(lambda k: traced.append(1) or (k, tf.ones_like(k)), tmr.combiners.sum, by_key=True)
    rng = np.random.default_rng(1)
    first = 0
    for _ in range(4):
        keys = rng.integers(0, 50, 200)
        result, stats = job.run(keys, cluster=cluster, return_stats=True)
        assert result.to_dict() == {int(k): int(n) for k, n in zip(*np.unique(keys, return_counts=True), strict=True)}
        first = first or len(traced)
    assert not stats.compiled
    assert len(job._kind.ready) == 1
    assert len(traced) == first == len(stats.shards)  # traced once per shard, by the first run only


def test_keyed_jobs_size_their_shards_by_measured_speeds(cluster: tmr.LocalCluster) -> None:
    keys = np.arange(1_000_000) % 97
    for _ in range(3):
        result, stats = tmr.count_by_key(keys, cluster=cluster, sizes="auto", return_stats=True)
        assert result.to_dict() == {k: int(n) for k, n in zip(*np.unique(keys, return_counts=True), strict=True)}
    assert sum(s.rows for s in stats.shards) == keys.size
    job = tmr.MapReduce(lambda k: (k, tf.ones_like(k)), tmr.combiners.sum, by_key=True)
    assert job.plan(keys, cluster=cluster, sizes="auto").plan.measured is not None


def test_a_keyed_run_refuses_speculation_before_anything_runs(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(lambda k: (k, tf.ones_like(k)), tmr.combiners.sum, by_key=True)
    with pytest.raises(TypeError, match="speculate=True applies to whole-input jobs only"):
        job.run(np.arange(10), cluster=cluster, speculate=True)


@attrs.define(eq=False, repr=False)
class RowsPerShard(KindBase[Plan]):
    """A kind of job written against the seam alone: each shard's rows counted on its device, one count per shard."""

    identity: ClassVar[Hashable] = "rows per shard"
    phase: ClassVar[str] = "count"  # what its progress bar says once every shard is mapped
    refused: ClassVar[Mapping[str, str]] = {"speculate": "speculate={value!r}: this kind does not back up shards"}

    def sources(self, x: Any) -> tuple[Sources, Any]:
        return sources(x), None

    def plan(self, shards: Plan, call: Call) -> Plan:
        return shards

    def variant(self, plan: Plan, call: Call) -> Hashable:
        return ()

    def build(self, builder: Builder, plan: Plan, call: Call) -> Program:
        counts = []
        for shard in plan.shards:
            with tf.device(shard.device):
                [x] = builder.inputs(shard)
                count = tf.shape(x, out_type=tf.int64)[0]
                builder.mapped(shard, count)
                counts.append(count)
        return builder.program(counts, plan.tasks)

    def finish(self, value: Any, program: Program | None, plan: Plan, call: Call) -> Any:
        return [int(n) for n in value]


def test_a_new_kind_plugs_into_the_driver_with_its_plan_graph_and_finish(cluster: tmr.LocalCluster) -> None:
    kind = RowsPerShard()
    x = np.arange(3_000_000, dtype=np.float64)  # large enough to travel through shared memory
    settings = RunOptions.of(cluster=cluster, sizes=(1_000_000, 0, 2_000_000))
    assert [s.path for s in _engine.plan(kind, x, settings).shards] == ["shm", "feed", "shm"]
    with tmr.stats() as collected:  # the driver's stats, for a kind it has never heard of
        counts = _engine.run(kind, x, settings)
        assert _engine.run(kind, x, settings) == counts  # the same run again: ready
    assert counts == [1_000_000, 0, 2_000_000]
    assert [run.compiled for run in collected.runs] == [True, False]
    assert [s.rows for s in collected.last.shards] == counts
    assert len(kind.ready) == 1
    with pytest.raises(TypeError, match="does not back up shards"):
        _engine.run(kind, x, RunOptions.of(cluster=cluster, speculate=True))
