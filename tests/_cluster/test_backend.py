"""Every run has a deadline: a stopped worker times out, a killed one fails fast, and each is named.

These tests stop and kill workers, so they use a cluster of their own, not the shared one.
The test that kills a worker comes last in this file.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from stopping import stop

import tfmapreduce as tmr
from tfmapreduce import JobError, LocalCluster, WorkerTimeoutError, WorkerUnavailableError
from tfmapreduce._cluster import backend as _backend

pytestmark = pytest.mark.alone  # measures time or speed: scripts/test runs it with no other test beside it

TIMEOUT = 3.0
GRACE = 2.0  # how much later than its deadline a failed run may end


@pytest.fixture(scope="module")
def own() -> Iterator[LocalCluster]:
    with LocalCluster(workers=2) as cluster:
        yield cluster


def both_tasks() -> tuple[tf.Graph, tf.Tensor, tf.Tensor]:
    """The lesson's graph with a feed: y = (x + 300 on task 0) + (x - 66 on task 1)."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.int32, [])
        with tf.device("/job:local/task:1"):
            y2 = x - 66
        with tf.device("/job:local/task:0"):
            y = (x + 300) + y2
    return graph, x, y


def run_both(cluster: LocalCluster, *, timeout: float = 20.0, graph: tuple[tf.Graph, tf.Tensor, tf.Tensor] | None = None) -> int:
    g, x, y = graph or both_tasks()
    return int(cluster.run(g, y, {x: 2}, tasks=["/job:local/task:0", "/job:local/task:1"], timeout=timeout))


def run_on_task_0(cluster: LocalCluster, *, timeout: float = 20.0) -> float:
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        with tf.device("/job:local/task:0"):
            y = x * 3
    return float(cluster.run(graph, y, {x: 2.0}, tasks=["/job:local/task:0"], timeout=timeout))


def test_a_healthy_run_uses_both_tasks(own: LocalCluster) -> None:
    assert run_both(own) == 238


def quick(cluster: LocalCluster, graph: tuple[tf.Graph, tf.Tensor, tf.Tensor]) -> None:
    """Run ``graph`` until its runs are made on the caller's thread (see ``_backend.run``)."""
    for _ in range(_backend.QUICK_AFTER + 3):
        assert run_both(cluster, graph=graph) == 238


@pytest.mark.parametrize("task", [1, 0], ids=["worker", "master"])
@pytest.mark.parametrize("runs", ["one run", "quick runs"])
def test_a_stopped_worker_ends_the_run_at_its_deadline_naming_the_task(own: LocalCluster, task: int, runs: str) -> None:
    pid, name = own.pids[task], f"/job:local/task:{task}"
    graph = both_tasks()
    assert run_both(own, graph=graph) == 238  # a session exists: the stop hits a run, not a session creation
    if runs == "quick runs":
        quick(own, graph)
    stop(pid)
    try:
        started = time.monotonic()
        with pytest.raises(WorkerTimeoutError) as info:
            run_both(own, timeout=TIMEOUT, graph=graph)
        elapsed = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert elapsed <= TIMEOUT + GRACE, f"the run ended {elapsed:.2f} s after it started"
    assert str(info.value.task) == name
    assert info.value.address == own.address(name)
    message = str(info.value)
    assert f"task {name} at {own.address(name)}" in message
    assert "3 s deadline" in message
    assert isinstance(info.value, TimeoutError)
    assert run_both(own) == 238  # it works again once the worker continues


def test_a_stopped_worker_ends_a_new_session_at_its_deadline(own: LocalCluster) -> None:
    pid = own.pids[1]
    stop(pid)
    try:
        started = time.monotonic()
        with pytest.raises(WorkerTimeoutError) as info:
            run_both(own, timeout=TIMEOUT)
        elapsed = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert elapsed <= TIMEOUT + GRACE
    assert str(info.value.task) == "/job:local/task:1"
    assert run_both(own) == 238


def test_a_stopped_task_that_the_run_does_not_use_does_not_matter(own: LocalCluster) -> None:
    pid = own.pids[1]
    stop(pid)
    try:
        assert run_on_task_0(own, timeout=TIMEOUT) == 6.0  # a run that waited for the stopped task would have timed out
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_run_slower_than_its_deadline_blames_no_task(own: LocalCluster) -> None:
    graph = tf.Graph()
    with graph.as_default(), tf.device("/job:local/task:1"):
        never = tf.queue.FIFOQueue(1, tf.float32).dequeue()  # waits forever, using no CPU
    started = time.monotonic()
    with pytest.raises(WorkerTimeoutError) as info:
        own.run(graph, never, {}, tasks=["/job:local/task:1"], timeout=1.0)
    assert time.monotonic() - started <= 1.0 + GRACE
    assert info.value.task is None
    assert "every task answers a probe" in str(info.value)
    assert "timeout=" in str(info.value)  # and says how to give it more time
    assert run_both(own) == 238


def test_quick_runs_are_made_on_the_callers_thread_and_one_that_turns_slow_again_watched(
    own: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = tf.Graph()
    with graph.as_default():
        seconds = tf.compat.v1.placeholder(tf.float64, [])
        with tf.device("/job:local/task:1"):  # a run that lasts at least `seconds`, however fast the machine
            began = tf.timestamp()
            (steps,) = tf.while_loop(lambda i: tf.timestamp() < began + seconds, lambda i: i + 1, [0])
        with tf.device("/job:local/task:0"):
            y = tf.minimum(steps, 0) + 1
    watched: list[float] = []
    watch = _backend._watch
    monkeypatch.setattr(_backend, "_watch", lambda *a, **k: watched.append(k["rest"]) or watch(*a, **k))
    monkeypatch.setattr(_backend, "QUICK_RUN", 10.0)  # every run counts as quick: no load can make one slow
    monkeypatch.setattr(_backend, "QUICK_LIMIT", 1.0)  # and a quick run has a second, plenty on a loaded machine
    tasks = ["/job:local/task:0", "/job:local/task:1"]
    runs = 3 * _backend.QUICK_AFTER
    for _ in range(runs):
        assert own.run(graph, y, {seconds: 0.0}, tasks=tasks, timeout=20) == 1
    assert len(watched) == _backend.QUICK_AFTER  # the first runs are watched, the quick ones after are not

    assert own.run(graph, y, {seconds: 1.5}, tasks=tasks, timeout=20) == 1  # slower than the quick run's second
    assert len(watched) == _backend.QUICK_AFTER + 1  # cancelled at the quick deadline, made again, watched
    assert watched[-1] < 20 - 1.0 + 0.01  # with what is left of its deadline
    assert own.run(graph, y, {seconds: 0.0}, tasks=tasks, timeout=20) == 1
    assert len(watched) == _backend.QUICK_AFTER + 2  # slow once: watched again until it is quick again


def test_a_run_with_side_effects_is_never_made_twice(own: LocalCluster, tmp_path: Any, monkeypatch: Any) -> None:
    printed = tmp_path / "printed.txt"
    graph = tf.Graph()
    with graph.as_default():
        n = tf.compat.v1.placeholder(tf.int32, [])
        with tf.device("/job:local/task:1"):
            effect = tf.print("ran", output_stream=f"file://{printed}")  # a side effect a second run would repeat
            with tf.control_dependencies([effect]):
                _, steps = tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a + 1), [0, 0])
        with tf.device("/job:local/task:0"):
            y = steps + 1
    monkeypatch.setattr(_backend, "QUICK_LIMIT", 0.05)
    tasks = ["/job:local/task:0", "/job:local/task:1"]
    runs = 3 * _backend.QUICK_AFTER
    for _ in range(runs):
        assert own.run(graph, y, {n: 0}, tasks=tasks, timeout=20) == 1
    assert own.run(graph, y, {n: 300}, tasks=tasks, timeout=20) == 301  # slower than the quick deadline
    assert printed.read_text().count("ran") == runs + 1  # each run printed once: none was cancelled and made again


def test_a_map_function_s_side_effects_happen_once_per_run(own: LocalCluster, tmp_path: Any, monkeypatch: Any) -> None:
    printed = tmp_path / "printed.txt"

    def busy_sum(t: tf.Tensor, n: tf.Tensor) -> tf.Tensor:
        with tf.control_dependencies([tf.print("mapped", output_stream=f"file://{printed}")]):
            _, steps = tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a + 1.0), [0, 0.0])
        return tf.reduce_sum(t) + steps

    monkeypatch.setattr(_backend, "QUICK_LIMIT", 0.05)
    job = tmr.MapReduce(busy_sum, tmr.combiners.sum)
    x = np.ones(10, np.float32)
    runs = 3 * _backend.QUICK_AFTER
    for _ in range(runs):
        assert job.run(x, cluster=own, broadcast=[np.int32(0)]) == 10
    assert job.run(x, cluster=own, broadcast=[np.int32(300)]) == 610  # slower than the quick deadline
    assert printed.read_text().count("mapped") == 2 * (runs + 1)  # two shards, each mapped once per run


def test_an_op_on_a_missing_device_is_a_job_error_not_a_silent_fallback(own: LocalCluster) -> None:
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        with tf.device("/job:local/task:1/device:GPU:0"):
            y = x + 1
    with pytest.raises(JobError) as info:
        own.run(graph, y, {x: 1.0}, tasks=["/job:local/task:1"], timeout=20)
    assert "GPU:0" in str(info.value)
    assert run_both(own) == 238


# --- last: this one kills a worker of the module's cluster ---------------------------------------------


def test_a_killed_worker_fails_the_run_within_2_s_naming_it(own: LocalCluster, cluster: LocalCluster) -> None:
    graph = both_tasks()
    assert run_both(own, graph=graph) == 238
    os.kill(own.pids[1], signal.SIGKILL)
    time.sleep(0.2)  # let it die

    for what, run in [("the open session", lambda: run_both(own, graph=graph)), ("a new session", lambda: run_both(own))]:
        started = time.monotonic()
        with pytest.raises(WorkerUnavailableError) as info:
            run()
        assert time.monotonic() - started < 2.0, what
        assert str(info.value.task) == "/job:local/task:1", what
        assert f"task /job:local/task:1 at {own.address('/job:local/task:1')}" in str(info.value), what
        assert isinstance(info.value, ConnectionError)

    assert run_on_task_0(own) == 6.0  # the task that lives still works
    # and the client process is fine: another cluster runs the same graph
    g, x, y = both_tasks()
    assert cluster.run(g, y, {x: 2}, tasks=list(cluster.tasks), timeout=20) == 238


def test_a_step_failed_on_a_lost_peer_names_the_lost_task_not_the_one_whose_message_came_first() -> None:
    """A worker killed mid-run can make its live peer's step fail first, with a message that names the peer (seen in a
    spilled run: task 0 named for task 1's kill); the task whose address refuses connections is the one gone."""
    with socket.socket() as live, socket.socket() as closed:
        live.bind(("127.0.0.1", 0))
        live.listen()
        closed.bind(("127.0.0.1", 0))  # bound, never listening: a connection to it is refused, as to a killed worker's
        addresses = {
            tmr.Task("local", 0): f"127.0.0.1:{live.getsockname()[1]}",
            tmr.Task("local", 1): f"127.0.0.1:{closed.getsockname()[1]}",
        }
        error = tf.errors.UnavailableError(None, None, "Socket closed; from /job:local/replica:0/task:0 while receiving")
        named = _backend._named(error, addresses, 3.0)
    assert isinstance(named, WorkerUnavailableError)
    assert named.task == tmr.Task("local", 1)
    assert f"task /job:local/task:1 at {addresses[tmr.Task('local', 1)]} is gone" in str(named)


def test_a_busy_worker_of_this_client_is_never_called_hung_a_stopped_one_at_once_another_after_its_silence(
    monkeypatch: Any,
) -> None:
    """Under two CPU hogs a busy, healthy task 0 missed two one-second probes in a row and was called hung, failing a
    write whose other task was already lost.  A task that accepts connections and never answers stands for it here."""
    with socket.socket() as mute, subprocess.Popen(["sleep", "60"]) as sleeper:
        mute.bind(("127.0.0.1", 0))
        mute.listen()  # connections are accepted, no probe is ever answered
        task = tmr.Task("local", 0)
        addresses = {task: f"127.0.0.1:{mute.getsockname()[1]}"}
        long_ago = {task: time.monotonic() - 3600.0}
        _backend._check_answering(addresses, dict(long_ago), lambda t: os.getpid())  # its process runs: busy, not hung
        monkeypatch.setattr(_backend, "HANG_SILENCE", 3600.0)
        _backend._check_answering(addresses, {}, lambda t: None)  # another machine's: silent for less than the span
        monkeypatch.undo()
        with pytest.raises(WorkerTimeoutError, match=f"answered no probe for {_backend.HANG_SILENCE:g} s") as info:
            _backend._check_answering(addresses, dict(long_ago), lambda t: None)
        assert info.value.task == task
        stop(sleeper.pid)
        with pytest.raises(WorkerTimeoutError, match=f"its process {sleeper.pid} is stopped") as info:
            _backend._check_answering(addresses, {}, lambda t: sleeper.pid)  # the first unanswered probe is enough
        assert info.value.task == task
        sleeper.kill()


@pytest.mark.parametrize("runs", [1, _backend.QUICK_AFTER + 3], ids=["one run", "quick runs"])
def test_a_killed_master_fails_a_kept_session_within_2_s_naming_it(runs: int) -> None:
    with LocalCluster(workers=1) as lone:
        graph = tf.Graph()
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [])
            y = x * 3
        for _ in range(runs):
            assert lone.run(graph, y, {x: 2.0}, tasks=["/job:local/task:0"], timeout=20) == 6.0  # the session is kept
        os.kill(lone.pids[0], signal.SIGKILL)
        time.sleep(1.5)  # longer than the pause after which a run first checks the master
        started = time.monotonic()
        with pytest.raises(WorkerUnavailableError) as info:
            lone.run(graph, y, {x: 2.0}, tasks=["/job:local/task:0"], timeout=20)
        assert time.monotonic() - started < 2.0
        assert str(info.value.task) == "/job:local/task:0"
