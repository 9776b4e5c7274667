"""Tasks: ``/job:NAME/task:I`` parsed once into a value used everywhere."""

from __future__ import annotations

import pytest

import tfmapreduce as tmr


def test_a_task_prints_as_the_device_prefix_tensorflow_uses() -> None:
    task = tmr.Task("local", 1)
    assert str(task) == "/job:local/task:1"
    assert tmr.Task.parse("/job:local/task:1") == task
    assert tmr.Task.parse("/job:local/replica:0/task:1") == task
    assert tmr.Task.of(task) is task
    assert tmr.Task.of("/job:local/task:1") == task


def test_tasks_order_by_job_then_index_and_hash() -> None:
    tasks = [tmr.Task("b", 0), tmr.Task("a", 10), tmr.Task("a", 2)]
    assert sorted(tasks) == [tmr.Task("a", 2), tmr.Task("a", 10), tmr.Task("b", 0)]
    assert len({tmr.Task("a", 1), tmr.Task("a", 1)}) == 1


@pytest.mark.parametrize(
    "name", ["local:1", "/job:local", "/job:local/task:x", "/job:1bad/task:0", "/job:local/task:0/device:CPU:0"]
)
def test_a_malformed_task_name_says_what_is_expected(name: str) -> None:
    with pytest.raises(ValueError, match="expected '/job:NAME/task:I'"):
        tmr.Task.parse(name)


def test_a_task_is_found_in_a_tensorflow_message() -> None:
    message = "Socket closed\nAdditional GRPC error information from remote target /job:local/replica:0/task:3:\n..."
    assert tmr.Task.find(message) == tmr.Task("local", 3)
    assert tmr.Task.find("no task here") is None


def test_devices_shards_plans_and_clusters_share_the_value(cluster: tmr.LocalCluster) -> None:
    device = tmr.Device.parse("/job:local/task:1/cpu:1")
    assert device.task == tmr.Task("local", 1)
    assert device.job == "local"
    plan = tmr.MapReduce(lambda t: t, tmr.combiners.sum).plan(list(range(4)), cluster=cluster, devices=["/job:local/task:1"])
    assert plan.tasks == (tmr.Task("local", 1),)
    assert all(s.task == tmr.Task("local", 1) for s in plan.shards)
    assert cluster.tasks == (tmr.Task("local", 0), tmr.Task("local", 1))
    assert cluster.address(tmr.Task("local", 1)) == cluster.address("/job:local/task:1")
