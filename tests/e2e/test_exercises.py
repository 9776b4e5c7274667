"""The lesson's three exercises, as tests on real worker processes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pytest
import tensorflow as tf
from oracle import assert_covers, assert_eq, reference

import tfmapreduce as tmr

X = np.arange(100, dtype=np.float32)  # the slices [0:30] and [30:100] have very different means


@pytest.fixture(scope="module")
def renamed() -> Iterator[tmr.LocalCluster]:
    """Two workers whose job is called ``mapreduce`` instead of ``local``."""
    with tmr.LocalCluster(workers=2, job="mapreduce") as cluster:
        yield cluster


def lesson(cluster: tmr.Cluster) -> dict[str, object]:
    """The user's code: it names no job, task or device, only the cluster it is given."""
    job = tmr.MapReduce(tf.reduce_mean, tmr.combiners.weighted_mean)
    plan = job.plan(X, cluster=cluster, sizes=[30, 70])
    return {
        "plan": plan,
        "weighted": job.run(X, cluster=cluster, sizes=[30, 70]),
        "mean": tmr.mean(X, cluster=cluster),
        "sum": tmr.MapReduce(tf.reduce_sum, tf.add).run(X, cluster=cluster, sizes=tmr.weights(1, 3)),
        "variance": tmr.variance(X, cluster=cluster, sizes=[10, 0, 90]),
    }


def _results(out: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in out.items() if k != "plan"}


# -- 1. renaming the job ---------------------------------------------------------------------------


def test_renaming_the_job_needs_no_change_to_user_code(cluster: tmr.LocalCluster, renamed: tmr.LocalCluster) -> None:
    assert renamed.jobs == ("mapreduce",)
    before, after = lesson(cluster), lesson(renamed)
    assert_eq(_results(after), _results(before))
    assert_eq(after["mean"], reference(X).mean())
    assert [s.device for s in after["plan"].shards] == [
        "/job:mapreduce/replica:0/task:0/device:CPU:0",
        "/job:mapreduce/replica:0/task:1/device:CPU:0",
    ]
    assert all(s.device.startswith("/job:local/") for s in before["plan"].shards)
    assert_covers(after["plan"], len(X), sizes=[30, 70], devices=renamed.devices)


def test_only_the_spec_names_the_job(renamed: tmr.LocalCluster) -> None:
    spec = {"mapreduce": renamed.spec["mapreduce"]}  # what a user writes down for running workers
    with tmr.Cluster.from_spec(spec) as cluster:
        assert_eq(_results(lesson(cluster)), _results(lesson(renamed)))


def test_the_spec_may_come_from_tf_config(renamed: tmr.LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": renamed.spec, "task": {"type": "mapreduce", "index": 0}}))
    with tmr.Cluster.from_tf_config() as cluster:
        assert tuple(map(str, cluster.tasks)) == ("/job:mapreduce/task:0", "/job:mapreduce/task:1")
        assert_eq(_results(lesson(cluster)), _results(lesson(renamed)))


def test_device_strings_left_over_from_the_old_name_are_refused_with_the_new_devices(renamed: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.PlacementError) as error:
        tmr.mean(X, cluster=renamed, devices=["/job:local/task:1"])
    assert "no task /job:local/task:1" in str(error.value)
    assert "/job:mapreduce/replica:0/task:1/device:CPU:0" in str(error.value)
    assert tmr.mean(X, cluster=renamed, devices=["/job:mapreduce/task:1"]) == 49.5


# -- 2. uneven slices ------------------------------------------------------------------------------


def test_the_unweighted_average_of_slice_means_is_wrong(cluster: tmr.LocalCluster) -> None:
    sum_of_means = tmr.MapReduce(tf.reduce_mean, tf.add).run(X, cluster=cluster, sizes=[30, 70])
    unweighted = sum_of_means / 2
    assert unweighted == pytest.approx((14.5 + 64.5) / 2)  # 39.5
    assert unweighted != pytest.approx(X.mean(), rel=0.1)  # the true mean is 49.5


def test_the_size_weighted_mean_is_right(cluster: tmr.LocalCluster) -> None:
    sizes = [30, 70]
    slices = [reference(X[:30]), reference(X[30:])]
    formula = sum(n * s.mean() for n, s in zip(sizes, slices, strict=True)) / sum(sizes)  # Σ size_i·mean_i / Σ size_i
    assert formula == 49.5
    assert_eq(tmr.mean(X, cluster=cluster, sizes=sizes), formula)
    assert_eq(tmr.MapReduce(tf.reduce_mean, tmr.combiners.weighted_mean).run(X, cluster=cluster, sizes=sizes), formula)


def test_an_even_split_hides_the_mistake(cluster: tmr.LocalCluster) -> None:
    sum_of_means = tmr.MapReduce(tf.reduce_mean, tf.add).run(X, cluster=cluster, sizes=[50, 50])
    assert sum_of_means / 2 == pytest.approx(49.5)


@pytest.mark.parametrize("sizes", [[0, 30, 0, 70], [1, 99], [99, 1], [97, 1, 1, 1]])
def test_the_weighted_mean_is_right_for_any_uneven_split(cluster: tmr.LocalCluster, sizes: list[int]) -> None:
    job = tmr.MapReduce(tf.reduce_mean, tmr.combiners.weighted_mean)
    assert_eq(
        job.run(X, cluster=cluster, sizes=sizes), 49.5, plan=job.plan(X, cluster=cluster, sizes=sizes), rows=100, sizes=sizes
    )
    assert_eq(tmr.mean(X, cluster=cluster, sizes=sizes), 49.5)


# -- 3. a GPU device string on a CPU-only cluster --------------------------------------------------

GPU = "/job:local/task:0/gpu:0"


def test_a_missing_gpu_is_an_error_by_default(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(tf.reduce_mean, tmr.combiners.weighted_mean)
    for call in (lambda: job.plan(X, cluster=cluster, devices=[GPU]), lambda: job.run(X, cluster=cluster, devices=[GPU])):
        with pytest.raises(tmr.PlacementError) as error:
            call()
        assert "task /job:local/task:0 has no GPU:0" in str(error.value)
        assert "fallback='cpu'" in str(error.value)


def test_fallback_cpu_runs_on_the_tasks_cpu_and_says_so(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(tf.reduce_mean, tmr.combiners.weighted_mean)
    devices = [GPU, "/job:local/task:1"]
    plan = job.plan(X, cluster=cluster, sizes=[30, 70], devices=devices, fallback="cpu")
    assert plan.shards[0].device == "/job:local/replica:0/task:0/device:CPU:0"
    assert plan.shards[0].requested == "/job:local/replica:0/task:0/device:GPU:0"
    assert "asked for /job:local/replica:0/task:0/device:GPU:0: absent, fell back to CPU" in str(plan)
    result, stats = job.run(X, cluster=cluster, sizes=[30, 70], devices=devices, fallback="cpu", return_stats=True)
    assert_eq(result, 49.5)
    assert stats.shards[0].device == "/job:local/replica:0/task:0/device:CPU:0"
    assert_eq(tmr.mean(X, cluster=cluster, devices=[GPU], fallback="cpu"), 49.5)
