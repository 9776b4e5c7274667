"""The lesson's own TF1-style client, unchanged, against workers started with ``tfmapreduce worker``.

Parametrized over the job name: "local" is the lesson; "mapreduce" is its first exercise
(renaming the job needs no change beyond the spec and the device strings).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np
import pytest
import tensorflow as tf
from ports import free_ports

START_TIMEOUT = 90.0
WORKER = [sys.executable, "-m", "tfmapreduce", "worker"]
# Passed to every Session so that a broken worker fails the test instead of hanging it.
CONFIG = tf.compat.v1.ConfigProto(operation_timeout_in_ms=20_000)


@pytest.fixture(scope="module", params=["local", "mapreduce"])
def workers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[int]]]:
    """Two workers of the job, started like the lesson's create_worker.py; yields (job, ports)."""
    job = request.param
    ports = free_ports(2)
    spec = json.dumps({job: [f"localhost:{port}" for port in ports]})
    directory = tmp_path_factory.mktemp(job)
    processes: list[subprocess.Popen] = []
    try:
        for task in range(2):
            with (directory / f"task{task}.out").open("wb") as out:
                processes.append(
                    subprocess.Popen(
                        [*WORKER, "--cluster", spec, "--job", job, "--task", str(task), "--allow-network"],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                    )
                )
        deadline = time.monotonic() + START_TIMEOUT
        for task, process in enumerate(processes):
            log = directory / f"task{task}.out"
            while " ready on " not in log.read_text():
                assert process.poll() is None, f"worker {task} exited:\n{log.read_text()}"
                assert time.monotonic() < deadline, f"worker {task} not ready after {START_TIMEOUT} s"
                time.sleep(0.05)
        yield job, ports
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)


def test_lesson_1_two_tasks_compute_238(workers: tuple[str, list[int]]) -> None:
    job, ports = workers
    # --- the lesson's client (only the job name and the ports are parameters) ---
    with tf.Graph().as_default():
        x = tf.constant(2)

        with tf.device(f"/job:{job}/task:1"):
            y2 = x - 66

        with tf.device(f"/job:{job}/task:0"):
            y1 = x + 300
            y = y1 + y2

        with tf.compat.v1.Session(f"grpc://localhost:{ports[1]}", config=CONFIG) as sess:
            result = sess.run(y)
    # ---
    assert result == 238


def test_lesson_2_distributed_mean(workers: tuple[str, list[int]]) -> None:
    job, ports = workers
    data = np.random.random(100)
    # --- the lesson's client ---
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, 100)

        with tf.device(f"/job:{job}/task:1"):
            first_batch = tf.slice(x, [0], [50])
            mean1 = tf.reduce_mean(first_batch)

        with tf.device(f"/job:{job}/task:0"):
            second_batch = tf.slice(x, [50], [-1])
            mean2 = tf.reduce_mean(second_batch)
            mean = (mean1 + mean2) / 2

        with tf.compat.v1.Session(f"grpc://localhost:{ports[0]}", config=CONFIG) as sess:
            result = sess.run(mean, feed_dict={x: data})
    # ---
    np.testing.assert_allclose(result, data.mean(), rtol=1e-5)


def test_the_pinned_ops_really_run_on_their_tasks(workers: tuple[str, list[int]]) -> None:
    job, ports = workers
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.int32, [])  # a feed, so that nothing is folded into a constant
        with tf.device(f"/job:{job}/task:1"):
            y2 = tf.subtract(x, 66, name="on_task_1")
        with tf.device(f"/job:{job}/task:0"):
            y = tf.add(x + 300, y2, name="on_task_0")
        metadata = tf.compat.v1.RunMetadata()
        with tf.compat.v1.Session(f"grpc://localhost:{ports[0]}", config=CONFIG) as sess:
            options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
            assert sess.run(y, feed_dict={x: 2}, options=options, run_metadata=metadata) == 238
    ran_on = {node.node_name: stats.device for stats in metadata.step_stats.dev_stats for node in stats.node_stats}
    assert ran_on.get("on_task_1") == f"/job:{job}/replica:0/task:1/device:CPU:0", ran_on
    assert ran_on.get("on_task_0") == f"/job:{job}/replica:0/task:0/device:CPU:0", ran_on
