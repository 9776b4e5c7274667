"""Spilled runs that end badly, on real workers: one whose deadline ends it, one that loses a worker mid-spill, a resident
one that loses a worker as it keeps its rounds.  Each raises an error naming the spilled job's stage (and the lost
task), and leaves no spill folder (nor a half-kept result) on a worker that lives."""

from __future__ import annotations

import glob
import logging
import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfmapreduce as tmr
from tfmapreduce._base.device import Device
from tfmapreduce._kinds import spilled_group, spilled_keep, spilled_sort
from tfmapreduce._kinds.join import spilled as join_spill
from tfmapreduce._native.loader import has, kernels

pytestmark = pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")

BUDGET = 40_000
"""A reducer's budget: 40 kB, against shares of 64 kB (8,000 rows of 16 bytes over two reducers)."""


def _stuck(keys: tf.Tensor, values: tf.RaggedTensor) -> tf.Tensor:
    """Each key's sum, once its reducer has rows to reduce, waits on an empty queue: a round never ends by itself (the
    in-memory run, refused by its budget before a row travels, never reaches it)."""
    queue = tf.queue.FIFOQueue(1, tf.float64, shapes=[()])
    with tf.control_dependencies([values.flat_values]):
        never = queue.dequeue()
    return tf.reduce_sum(values, axis=1) + never


def _stuck_job() -> tmr.MapReduce[tmr.KeyedResult]:
    return tmr.MapReduce(lambda k, v: (k, v), tmr.per_group(_stuck, max_bytes=BUDGET), by_key=True)


def _spill_folders(root: Path) -> list[str]:
    return [name for name in os.listdir(root) if name.startswith("tfmapreduce-spill-")]


@pytest.mark.slow
def test_a_spilled_run_ended_by_its_deadline_names_its_stage_and_leaves_no_spill(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keys = np.arange(8_000) % 500
    with caplog.at_level(logging.INFO, logger="tfmapreduce"), pytest.raises(tmr.WorkerTimeoutError) as raised:
        _stuck_job().run((keys, np.ones(keys.size)), reducers=2, cluster=cluster, timeout=5)
    message = str(raised.value)
    assert re.match(r"spilled MapReduce\(.*lambda>/per_group\(_stuck\)\), ", message)  # the spilled job, then its stage
    assert "round 1 of 4 (each reducer reducing one sub-partition): the run did not finish within its 5 s deadline" in message
    assert "the job's spill files are removed on every task that answers" in message
    assert any("spilled 128,000 bytes" in r.getMessage() for r in caplog.records)  # the spill was written ...
    assert _spill_folders(spill) == []  # ... and removed on every worker
    summed = tmr.sum_by_key(keys, np.ones(keys.size), cluster=cluster)  # the workers serve the next job
    assert summed.to_dict() == dict.fromkeys(range(500), 16.0)


@pytest.mark.slow
def test_a_worker_killed_mid_spill_fails_the_run_naming_it_and_the_survivor_keeps_no_spill(spill: Path) -> None:
    keys = np.arange(8_000) % 500
    with tmr.LocalCluster(workers=2) as pair:
        pair.devices  # noqa: B018 - ask for the devices while both workers answer
        killed = threading.Event()

        def kill_once_spilling() -> None:  # task 1 killed as the first spill file appears (mid-spill, or just after)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not glob.glob(str(spill / "tfmapreduce-spill-*" / "*" / "b*")):
                time.sleep(0.002)
            os.kill(pair.pids[1], signal.SIGKILL)
            killed.set()

        watcher = threading.Thread(target=kill_once_spilling, daemon=True)
        watcher.start()
        try:
            with pytest.raises(tmr.WorkerUnavailableError) as raised:
                _stuck_job().run((keys, np.ones(keys.size)), reducers=2, cluster=pair, retries=0, timeout=60)
        finally:
            watcher.join()
        assert killed.is_set()
        assert raised.value.task in pair.tasks  # task 1, or task 0 whose step failed first on its lost peer
        assert re.match(r"spilled MapReduce\(.*lambda>/per_group\(_stuck\)\), (the spill|round 1 of 4) ", str(raised.value))
        assert "/job:local/task:1" in str(raised.value) or "task 1" in str(raised.value)
        assert _spill_folders(spill) == []  # the survivor removed the job's folder (and, on this one disk, the rest)


@pytest.mark.slow
def test_a_worker_killed_after_the_spill_is_survived_by_running_the_job_again(
    spill: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its spill files went with it, so no round can read its pieces: with retries left, the whole job runs again on the
    survivors (refused in memory again, spilled again): a group reducer's medians and (the worker restarted each time) a
    join's pairs as pandas gives them, and a sort into files as numpy's."""
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 500, 8_000)
    values = rng.normal(size=keys.size)
    with tmr.LocalCluster(workers=3) as three:
        three.devices  # noqa: B018 - ask for the devices while every worker answers
        killed: list[str] = []

        def kill_first(module: Any, name: str) -> None:  # task 2 killed as the first round of the spilled job starts
            step = getattr(module, name)

            def killing(*args: Any, **kwargs: Any) -> Any:
                if name not in killed:  # (the job run again meets it too: once)
                    os.kill(three.pids[2], signal.SIGKILL)
                    killed.append(name)
                return step(*args, **kwargs)

            monkeypatch.setattr(module, name, killing)

        steps = [(spilled_group, "check_parts"), (join_spill, "_round"), (spilled_sort, "check_buckets")]
        kill_first(*steps[0])
        got, stats = tmr.median_by_key(keys, values, max_bytes=BUDGET, reducers=2, cluster=three, retries=2, return_stats=True)
        assert (killed, stats.lost) == (["check_parts"], (three.tasks[2],))
        assert stats.attempts >= 2
        want = pd.DataFrame({"k": keys, "v": values}).groupby("k")["v"].median().to_dict()
        assert got.to_dict() == pytest.approx(want, rel=1e-12)
        assert _spill_folders(spill) == []

        three.restart(2)
        three.mark_live()
        kill_first(*steps[1])
        right = rng.integers(250, 750, 8_000)
        pairs, stats = tmr.join(
            (keys, values), (right, np.arange(right.size)), max_bytes=BUDGET, cluster=three, return_stats=True
        )
        assert (killed, stats.lost) == (["check_parts", "_round"], (three.tasks[2],))
        merged = pd.DataFrame({"k": keys, "v": values}).merge(pd.DataFrame({"k": right, "r": np.arange(right.size)}), on="k")
        assert sorted(zip(pairs.keys.tolist(), pairs.left.tolist(), pairs.right.tolist(), strict=True)) == sorted(
            merged.itertuples(index=False, name=None)
        )
        assert _spill_folders(spill) == []

        three.restart(2)
        three.mark_live()
        kill_first(*steps[2])
        x = rng.normal(size=20_000)
        out = tmp_path / "sorted"
        written = tmr.sort(x, max_bytes=BUDGET, reducers=2, directory=out, spill_dir=spill, cluster=three, retries=2)
        assert killed == ["check_parts", "_round", "check_buckets"]
        with tmr.read_npy(written).persist(cluster=three) as back:
            np.testing.assert_array_equal(back.gather(), np.sort(x))
        assert sorted(os.listdir(out)) == ["_SUCCESS", *(os.path.basename(p) for p in written.parts)]  # one attempt's parts
        assert _spill_folders(spill) == []


def _kept_shard(cluster: tmr.LocalCluster, name: str, index: int, device: str) -> bool:
    """Whether ``device`` holds shard ``index`` of the resident keys named ``name`` (its reducer's variable)."""
    graph = tf.Graph()
    with graph.as_default(), tf.device(device):
        handle = tf.raw_ops.VarHandleOp(
            dtype=tf.int64, shape=tf.TensorShape(None), container=f"{name}_keys", shared_name=f"shard{index}"
        )
        held = tf.raw_ops.VarIsInitializedOp(resource=handle)
    try:
        return bool(cluster.run(graph, held, {}, tasks=[Device.parse(device).task], timeout=30))
    finally:
        cluster.forget(graph)


@pytest.mark.slow
def test_a_worker_killed_as_a_spilled_resident_run_keeps_its_rounds_fails_it_naming_it_and_leaves_nothing(
    spill: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = np.arange(8_000) % 500
    names: list[tuple[str, int, str]] = []
    with tmr.LocalCluster(workers=2) as pair:
        pair.devices  # noqa: B018 - ask for the devices while both workers answer
        keep, assign = spilled_group.kept, spilled_keep.assign_shard

        def kill_then_keep(graced: Any, *args: Any) -> Any:  # every round done: task 1 killed as the keep step starts
            assert [Device.parse(d).task for d in graced.plan.keyed.reducers] == list(pair.tasks)
            assert glob.glob(str(spill / "tfmapreduce-spill-*" / "*" / "kept-b*"))  # each round's results, on disk
            os.kill(pair.pids[1], signal.SIGKILL)
            return keep(graced, *args)

        def named(container: str, index: int, value: tf.Tensor) -> tf.Operation:
            if container.endswith("_keys"):
                names.append((container.removesuffix("_keys"), index, tf.no_op().device))  # (in the reducer's scope)
            if container.endswith("_keys") and index == 0:  # reducer 0 kept its half before task 1's failed the step
                graph = tf.Graph()
                with graph.as_default(), tf.device(names[-1][2]):
                    half = assign(container, 0, tf.constant([7], tf.int64))
                try:
                    pair.run(graph, half, {}, tasks=[pair.tasks[0]], timeout=30)
                finally:
                    pair.forget(graph)
            return assign(container, index, value)

        monkeypatch.setattr(spilled_group, "kept", kill_then_keep)
        monkeypatch.setattr(spilled_keep, "assign_shard", named)
        with pytest.raises(tmr.WorkerUnavailableError) as raised:
            tmr.median_by_key(keys, np.ones(keys.size), max_bytes=BUDGET, reducers=2, cluster=pair, resident=True, retries=0)
        message = str(raised.value)
        assert re.match(r"spilled MapReduce\(median_by_key\), keeping each reducer's rounds \(resident=True\): ", message)
        assert raised.value.task == pair.tasks[1]
        assert _spill_folders(spill) == []  # the survivor removed the job's folder (and, on this one disk, the rest)
        assert [index for _, index, _ in names] == [0, 1]
        assert not _kept_shard(pair, *names[0])  # the survivor keeps no half of the result


def test_a_spilled_resident_run_whose_keep_step_fails_on_one_reducer_keeps_no_half_of_its_result(
    cluster: tmr.LocalCluster, spill: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = np.arange(8_000) % 500
    names: list[tuple[str, int, str]] = []
    assign = spilled_keep.assign_shard

    def taken(container: str, index: int, value: tf.Tensor) -> tf.Operation:  # reducer 1's keys: a float variable there
        if container.endswith("_keys"):
            names.append((container.removesuffix("_keys"), index, tf.no_op().device))  # (in the reducer's scope)
        if container.endswith("_keys") and index == 1:
            graph = tf.Graph()
            with graph.as_default(), tf.device(names[-1][2]):
                held = assign(container, 1, tf.constant([0.5], tf.float32))
            try:
                cluster.run(graph, held, {}, tasks=[Device.parse(names[-1][2]).task], timeout=30)
            finally:
                cluster.forget(graph)
        return assign(container, index, value)

    monkeypatch.setattr(spilled_keep, "assign_shard", taken)
    with pytest.raises(tmr.JobError, match=r"op keep1/AssignVariableOp.*wrong dtype"):
        tmr.median_by_key(keys, np.ones(keys.size), max_bytes=BUDGET, reducers=2, cluster=cluster, resident=True)
    assert _spill_folders(spill) == []
    assert [index for _, index, _ in names] == [0, 1]
    assert not _kept_shard(cluster, *names[0])  # reducer 0's half, stored in the failed step: freed
    assert not _kept_shard(cluster, *names[1])
