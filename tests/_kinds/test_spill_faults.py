"""Spilled runs that end badly, on real workers: one whose deadline ends it, one that loses a worker mid-spill.  Each
raises an error naming the spilled job's stage (and the lost task), and leaves no spill folder on a worker that lives."""

from __future__ import annotations

import glob
import logging
import os
import re
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr
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
