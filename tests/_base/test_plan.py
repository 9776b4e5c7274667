"""Plans: frozen values that cover the rows exactly once, in order, and print as a table."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import assert_covers
from strategies import MAX_ROWS, examples, placements, sizes_specs

import tfmapreduce as tmr
from tfmapreduce._engine import cache as _cache

T0C0 = "/job:local/replica:0/task:0/device:CPU:0"
T1C0 = "/job:local/replica:0/task:1/device:CPU:0"


def _plan_only() -> tmr.MapReduce:
    return tmr.MapReduce(lambda t: t, tmr.combiners.sum)


@settings(max_examples=examples(100))
@given(data=st.data(), rows=st.integers(0, MAX_ROWS * 5))
def test_every_plan_covers_the_rows_exactly_once_in_order(cluster: tmr.LocalCluster, data: st.DataObject, rows: int) -> None:
    sizes = data.draw(sizes_specs(rows), label="sizes")
    devices = data.draw(placements(cluster.devices), label="devices")
    plan = _plan_only().plan(np.zeros((rows, 2), np.float32), cluster=cluster, sizes=sizes, devices=devices)
    assert_covers(plan, rows, sizes=sizes if isinstance(sizes, list) else None, devices=cluster.devices)
    if isinstance(sizes, int):
        assert len(plan.shards) == sizes
    if sizes is None:
        assert len(plan.shards) == (len(devices) if devices else len(cluster.devices))
        assert max(plan.sizes) - min(plan.sizes) <= 1


def test_the_plan_table(cluster: tmr.LocalCluster) -> None:
    plan = _plan_only().plan(
        np.zeros(100), cluster=cluster, sizes=[30, 0, 70], devices=["/job:local/task:0", "/job:local/task:1"]
    )
    assert plan.explain().splitlines() == [
        "Plan: 100 rows in 3 shards on 2 tasks",
        "  shard  rows    size  via   device",
        f"      0  0:30      30  feed  {T0C0}",
        f"      1  30:30      0  feed  {T1C0}  (empty: skipped)",
        f"      2  30:100    70  feed  {T0C0}",
    ]
    assert str(plan) == plan.explain()


def test_planning_runs_nothing(cluster: tmr.LocalCluster) -> None:
    calls = []
    job = tmr.MapReduce(lambda t: calls.append(1) or t, tmr.combiners.sum)
    plan = job.plan(np.zeros(10), cluster=cluster)
    assert calls == []
    assert _cache.programs(cluster).count(job.identity) == 0
    assert plan.rows == 10


def test_plans_are_frozen_values(cluster: tmr.LocalCluster) -> None:
    job = _plan_only()
    a = job.plan(np.zeros(10), cluster=cluster, sizes=[3, 7])
    b = job.plan(np.ones(10), cluster=cluster, sizes=tmr.weights(3, 7))
    assert a == b
    assert hash(a) == hash(b)
    assert a != job.plan(np.zeros(10), cluster=cluster, sizes=[7, 3])
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        a.rows = 11  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        a.shards[0].stop = 4  # type: ignore[misc]


def test_remembered_plans_still_check_their_arguments(cluster: tmr.LocalCluster) -> None:
    job = _plan_only()
    assert job.plan(np.zeros(3), cluster=cluster, sizes=1).sizes == (3,)
    assert job.plan(np.zeros(3), cluster=cluster, sizes=1) is job.plan(np.zeros(3), cluster=cluster, sizes=1)
    for bad in (True, 1.0):  # equal to 1 as keys go, refused as sizes
        with pytest.raises(TypeError, match="sizes must be"):
            job.plan(np.zeros(3), cluster=cluster, sizes=bad)
    job.plan(np.zeros(3), cluster=cluster, sizes=[1, 2])
    with pytest.raises(tmr.PartitionError, match="not an integer"):
        job.plan(np.zeros(3), cluster=cluster, sizes=[True, 2])


def test_shard_properties(cluster: tmr.LocalCluster) -> None:
    plan = _plan_only().plan(
        np.zeros(10), cluster=cluster, sizes=[4, 0, 6], devices=["/job:local/task:1", "/job:local/task:0/cpu:1"]
    )
    s0, s1, s2 = plan.shards
    assert (s0.index, s0.start, s0.stop, s0.rows, s0.task) == (0, 0, 4, 4, tmr.Task("local", 1))
    assert (s1.index, s1.start, s1.stop, s1.rows, s1.task) == (1, 4, 4, 0, tmr.Task("local", 0))
    assert (s2.start, s2.stop, s2.rows, s2.device) == (4, 10, 6, T1C0)
    assert tuple(map(str, plan.tasks)) == ("/job:local/task:1", "/job:local/task:0")


def _shard(index: int, start: int, stop: int) -> tmr.Shard:
    return tmr.Shard(index, start, stop, T0C0)


@pytest.mark.parametrize(
    ("shards", "message"),
    [
        ((_shard(0, 0, 4), _shard(1, 5, 10)), r"shard 1 \(5:10\) does not continue the rows at 4"),  # a gap
        ((_shard(0, 0, 6), _shard(1, 4, 10)), r"shard 1 \(4:10\) does not continue the rows at 6"),  # an overlap
        ((_shard(0, 0, 4), _shard(2, 4, 10)), r"shard 1 \(4:10\) does not continue"),  # misnumbered
        ((_shard(0, 1, 10),), r"shard 0 \(1:10\) does not continue the rows at 0"),  # a missing first row
        ((_shard(0, 0, 4), _shard(1, 4, 2)), r"shard 1 \(4:2\)"),  # backwards
        ((_shard(0, 0, 9),), r"the shards cover 9 rows, not the 10 rows"),  # short
    ],
)
def test_a_plan_that_does_not_cover_the_rows_is_refused(shards: tuple[tmr.Shard, ...], message: str) -> None:
    with pytest.raises(tmr.PartitionError, match=message):
        tmr.Plan(10, shards)
