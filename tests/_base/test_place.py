"""The placer: shards go to devices the cluster really has, decided here and shown in the plan."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle import assert_covers
from strategies import device_lists, spellings

import tfmapreduce as tmr
from tfmapreduce._base.device import Device
from tfmapreduce._base.place import default_devices, place

T0C0 = "/job:local/replica:0/task:0/device:CPU:0"
T0C1 = "/job:local/replica:0/task:0/device:CPU:1"
T1C0 = "/job:local/replica:0/task:1/device:CPU:0"
T1C1 = "/job:local/replica:0/task:1/device:CPU:1"
T0G0 = "/job:local/replica:0/task:0/device:GPU:0"

# A device list as a cluster would report it: task 1 has a GPU, task 0 does not.
WITH_GPU = [Device.parse(d) for d in (T0C0, T0C1, T1C0, T1C1, "/job:local/task:1/gpu:0", "/job:local/task:1/gpu:1")]

_job = tmr.MapReduce(lambda t: t, tmr.combiners.sum)  # plans only: nothing runs


def _devices(plan: tmr.Plan) -> list[str]:
    return [s.device for s in plan.shards]


def test_the_cluster_reports_two_tasks_with_two_cpus(cluster: tmr.LocalCluster) -> None:
    assert sorted(cluster.devices) == [T0C0, T0C1, T1C0, T1C1]


def test_round_robin_interleaves_the_tasks(cluster: tmr.LocalCluster) -> None:
    plan = _job.plan(np.zeros(12), cluster=cluster, sizes=6)
    assert _devices(plan) == [T0C0, T1C0, T0C1, T1C1, T0C0, T1C0]
    assert tuple(map(str, plan.tasks)) == ("/job:local/task:0", "/job:local/task:1")


def test_default_devices_prefer_gpus_and_interleave_tasks() -> None:
    assert [str(d) for d in default_devices(WITH_GPU)] == [
        T0C0,
        "/job:local/replica:0/task:1/device:GPU:0",
        T0C1,
        "/job:local/replica:0/task:1/device:GPU:1",
    ]


def test_short_device_strings(cluster: tmr.LocalCluster) -> None:
    plan = _job.plan(np.zeros(100), cluster=cluster, sizes=[30, 70], devices=["/job:local/task:1", "/job:local/task:0/cpu:1"])
    assert _devices(plan) == [T1C0, T0C1]


def test_full_device_strings(cluster: tmr.LocalCluster) -> None:
    plan = _job.plan(np.zeros(100), cluster=cluster, sizes=[30, 70], devices=[T1C1, "/job:local/task:0/device:CPU:0"])
    assert _devices(plan) == [T1C1, T0C0]


def test_shard_i_goes_to_devices_i_mod_len(cluster: tmr.LocalCluster) -> None:
    plan = _job.plan(np.zeros(10), cluster=cluster, sizes=5, devices=["/job:local/task:1", "/job:local/task:0"])
    assert _devices(plan) == [T1C0, T0C0, T1C0, T0C0, T1C0]


def test_one_device_takes_every_shard(cluster: tmr.LocalCluster) -> None:
    plan = _job.plan(np.zeros(10), cluster=cluster, sizes=[2, 0, 8], devices=["/job:local/task:1/cpu:1"])
    assert _devices(plan) == [T1C1] * 3
    assert tuple(map(str, plan.tasks)) == ("/job:local/task:1",)


def test_without_sizes_one_shard_per_listed_device(cluster: tmr.LocalCluster) -> None:
    plan = _job.plan(np.zeros(9), cluster=cluster, devices=["/job:local/task:0", "/job:local/task:1", "/job:local/task:1/cpu:1"])
    assert plan.sizes == (3, 3, 3)
    assert _devices(plan) == [T0C0, T1C0, T1C1]


def test_fallback_cpu_shows_the_substitution_in_the_plan(cluster: tmr.LocalCluster) -> None:
    plan = _job.plan(
        np.zeros(10), cluster=cluster, sizes=[4, 6], devices=["/job:local/task:0/gpu:0", "/job:local/task:1"], fallback="cpu"
    )
    assert _devices(plan) == [T0C0, T1C0]
    assert plan.shards[0].requested == T0G0
    assert plan.shards[1].requested is None
    table = plan.explain()
    line = table.splitlines()[2]
    assert T0C0 in line
    assert T0G0 in line
    assert "fell back to CPU" in line
    assert "fell back" not in table.splitlines()[3]
    assert str(plan) == table


def test_fallback_does_not_touch_a_gpu_that_exists() -> None:
    [p] = place(1, ["/job:local/task:1/gpu:1"], WITH_GPU, fallback="cpu")
    assert str(p.device) == "/job:local/replica:0/task:1/device:GPU:1"
    assert p.requested is None


def test_fallback_goes_to_the_task_of_the_missing_gpu() -> None:
    [p] = place(1, ["/job:local/task:0/gpu:3"], WITH_GPU, fallback="cpu")
    assert str(p.device) == T0C0
    assert str(p.requested) == "/job:local/replica:0/task:0/device:GPU:3"


def test_fallback_is_only_for_gpus() -> None:
    with pytest.raises(tmr.PlacementError, match=r"has no CPU:7") as info:
        place(1, ["/job:local/task:0/cpu:7"], WITH_GPU, fallback="cpu")
    assert "fallback" not in str(info.value)


def test_an_unknown_fallback_is_refused() -> None:
    with pytest.raises(ValueError, match=r"fallback must be None or 'cpu', got 'gpu'"):
        place(1, None, WITH_GPU, fallback="gpu")


def test_devices_must_be_a_list_not_one_string() -> None:
    with pytest.raises(TypeError, match=r"devices must be a list of device strings"):
        place(1, "/job:local/task:0", WITH_GPU)


@given(data=st.data(), shards=st.integers(1, 12))
def test_every_spelling_places_on_the_named_device(data: st.DataObject, shards: int) -> None:
    available = [Device.parse(d) for d in (T0C0, T0C1, T1C0, T1C1)]
    names = data.draw(device_lists([str(d) for d in available]))
    placed = place(shards, names, available)
    assert len(placed) == shards
    for i, p in enumerate(placed):
        assert Device.parse(names[i % len(names)]) == p.device
        assert p.requested is None


@pytest.mark.parametrize("device", [T0C0, T1C1])
def test_spellings_parse_to_the_same_device(device: str) -> None:
    assert {str(Device.parse(name)) for name in spellings(device)} == {device}


def test_plans_cover_the_rows_on_real_devices(cluster: tmr.LocalCluster) -> None:
    plan = _job.plan(np.zeros((7, 3)), cluster=cluster, sizes=[0, 3, 0, 4, 0], devices=[T1C1, "/job:local/task:0"])
    assert_covers(plan, 7, sizes=[0, 3, 0, 4, 0], devices=cluster.devices)
    assert _devices(plan) == [T1C1, T0C0, T1C1, T0C0, T1C1]
