"""Fault injection with real worker processes: every case ends in the right answer or a named error, in time.

Each test starts its own small LocalCluster (the session cluster must not lose a task), kills or
stops one of its workers, and checks the outcome and how long it took.  Loopback only.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
import tensorflow as tf
from namespaces import unshare_works
from stopping import stop

import tfmapreduce as tmr
from tfmapreduce._native.loader import kernels

pytestmark = [pytest.mark.slow, pytest.mark.alone]  # measures time: scripts/test runs it with no other test beside it

GRACE = 2.0  # a failure must be named within its deadline (or at once, for a killed task) + this


@pytest.fixture
def pair() -> Iterator[tmr.LocalCluster]:
    """Two fresh workers for one test (job "local", one CPU each)."""
    with tmr.LocalCluster(workers=2) as local:
        local.devices  # noqa: B018 - ask for the devices (and versions) while every worker lives
        yield local


def _kill(cluster: tmr.LocalCluster, task: int) -> None:
    os.kill(cluster.pids[task], signal.SIGKILL)
    time.sleep(0.1)  # let the kernel close its port


@pytest.mark.parametrize("task", [0, 1])
def test_a_killed_task_is_named_within_2_s_whichever_it_is(pair: tmr.LocalCluster, task: int) -> None:
    x = np.arange(100.0)
    assert tmr.mean(x, cluster=pair) == 49.5  # sessions exist: the next run reuses them
    _kill(pair, task)
    started = time.monotonic()
    with pytest.raises(tmr.WorkerUnavailableError) as info:
        tmr.mean(x, cluster=pair, retries=0, timeout=60)
    assert time.monotonic() - started < GRACE
    assert info.value.task == tmr.Task("local", task)


@pytest.mark.parametrize("task", [0, 1])
def test_a_run_survives_a_killed_task_on_the_others(pair: tmr.LocalCluster, task: int) -> None:
    x = np.random.default_rng(task).random(10_001)
    assert tmr.count(x, cluster=pair) == len(x)
    _kill(pair, task)
    started = time.monotonic()
    value, stats = tmr.mean(x, cluster=pair, return_stats=True)
    assert time.monotonic() - started < GRACE + 1
    assert value == pytest.approx(np.mean(x), rel=1e-12)
    assert stats.attempts == 2
    assert stats.lost == (tmr.Task("local", task),)
    assert {s.device for s in stats.shards} == {f"/job:local/replica:0/task:{1 - task}/device:CPU:0"}
    assert pair.master == tmr.Task("local", 1 - task)
    assert tmr.count(x, cluster=pair, devices=[f"/job:local/task:{task}"]) == len(x)  # asked of the lost task: re-placed


def test_a_kill_in_the_middle_of_a_run_counts_every_row_once(pair: tmr.LocalCluster) -> None:
    x = np.ones(30_000_000, np.int8)  # 30 MB shipped: the kill lands while the run is under way
    assert tmr.count(x[:10], cluster=pair) == 10
    killer = threading.Timer(0.05, _kill, (pair, 1))
    killer.start()
    try:
        total, stats = tmr.count(x, cluster=pair, return_stats=True)
    finally:
        killer.join()
    assert total == len(x)
    assert stats.attempts in (1, 2)  # 1 when the run finished before the kill


def test_a_sort_survives_a_killed_task_and_a_kill_in_the_middle(pair: tmr.LocalCluster) -> None:
    x = np.random.default_rng(5).normal(size=3_000_000)
    y = x[:10_000]
    with tmr.sort(y, cluster=pair) as warm:
        np.testing.assert_array_equal(warm.gather(), np.sort(y))
    _kill(pair, 1)  # the next sort's first attempt meets the dead task: repeated on task 0
    ordered, stats = tmr.sort(y, cluster=pair, retries=2, return_stats=True)
    with ordered:
        assert stats.attempts == 2
        assert {s.task for s in ordered.plan.shards} == {tmr.Task("local", 0)}
        np.testing.assert_array_equal(ordered.gather(), np.sort(y))
    pair.restart(1)
    killer = threading.Timer(0.05, _kill, (pair, 1))  # lands while the sort is under way (or just after it)
    killer.start()
    try:
        ordered, stats = tmr.sort(x, cluster=pair, retries=2, return_stats=True)
    finally:
        killer.join()
    with ordered:
        assert stats.attempts in (1, 2)  # 1 when the run finished before the kill (its ranges on task 1 then lost)
        if stats.attempts == 2:
            np.testing.assert_array_equal(ordered.gather(), np.sort(x))


def test_a_join_killed_in_the_middle_gives_every_row_once(pair: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(6)
    left = (rng.integers(0, 100_000, 3_000_000), rng.random(3_000_000))
    right = (rng.permutation(100_000), np.arange(100_000))
    killer = threading.Timer(0.05, _kill, (pair, 1))  # lands while the join is under way (or just after it)
    killer.start()
    try:
        result, stats = tmr.join(left, right, cluster=pair, strategy="hash", retries=2, return_stats=True)
    finally:
        killer.join()
    assert stats.attempts in (1, 2)
    assert len(result) == 3_000_000
    np.testing.assert_array_equal(np.sort(result.left), np.sort(left[1]))
    np.testing.assert_array_equal(right[0][result.right], result.keys)


def test_a_stopped_master_receiving_a_large_feed_ends_by_the_deadline(pair: tmr.LocalCluster) -> None:
    x = np.ones(20_000_000, np.float32)  # 80 MB: TensorFlow's own deadline does not bound this call
    assert tmr.mean(x[:10], cluster=pair) == 1.0
    stop(pair.pids[0])
    try:
        started = time.monotonic()
        with pytest.raises(tmr.WorkerTimeoutError) as info:
            tmr.mean(x, cluster=pair, timeout=3, retries=0)
        assert time.monotonic() - started < 3 + GRACE
        assert info.value.task == tmr.Task("local", 0)
    finally:
        os.kill(pair.pids[0], signal.SIGCONT)
    assert tmr.mean(x[:1000], cluster=pair, timeout=30) == 1.0  # the client is still usable


KEPT = {  # jobs that keep their result on the workers (a few seconds each on this input), and the values they keep
    "sort": (lambda x, **kw: tmr.sort(x, **kw), lambda x: x),
    "sort_by_key": (lambda x, **kw: tmr.sort_by_key(x, -x, **kw)[1], lambda x: -x),
    "map": (lambda x, **kw: tmr.map(lambda v: tf.sort(v) * 2, x, **kw), lambda x: x * 2),
    "resident=True": (
        lambda x, **kw: tmr.sum_by_key((x > 0).astype(np.int64), x, resident=True, **kw).values,
        lambda x: [x[x <= 0].sum(), x[x > 0].sum()],
    ),
}


@pytest.mark.parametrize("kind", KEPT)
def test_a_job_keeping_its_result_survives_a_master_stopped_in_the_run(pair: tmr.LocalCluster, kind: str) -> None:
    """The failed run's stored result is freed through a task it used, not through the stopped master: that waited
    out the rest of the deadline, and the retry had none left (WorkerTimeoutError instead of the result)."""
    job, kept = KEPT[kind]
    x = np.random.default_rng(7).normal(size=3_000_000)
    job(x[:1000], cluster=pair)  # compiled and warm: the run itself meets the stopped master
    stop(pair.pids[0])  # before the run, not a moment into it: a quick run under load could finish first
    try:
        with tmr.stats() as seen:
            result = job(x, cluster=pair, timeout=30, retries=2)
    finally:
        os.kill(pair.pids[0], signal.SIGCONT)
    assert seen.last.lost == (tmr.Task("local", 0),)
    np.testing.assert_allclose(np.sort(result.gather()), np.sort(kept(x)))


def test_a_hung_worker_is_left_out_and_the_run_finishes_on_the_others(pair: tmr.LocalCluster) -> None:
    x = np.arange(1000.0)
    assert tmr.mean(x, cluster=pair) == 499.5
    stop(pair.pids[1])
    try:
        started = time.monotonic()
        value, stats = tmr.mean(x, cluster=pair, timeout=8, return_stats=True)
        assert time.monotonic() - started < 8 + GRACE
        assert value == 499.5
        assert stats.lost == (tmr.Task("local", 1),)
    finally:
        os.kill(pair.pids[1], signal.SIGCONT)


def test_resident_shards_of_a_lost_task_are_rebuilt_on_the_survivors(pair: tmr.LocalCluster) -> None:
    x = np.random.default_rng(3).random((2000, 3))
    data = tmr.scatter(x, cluster=pair, sizes=[700, 1300])
    assert tmr.mean(data) == pytest.approx(np.mean(x))
    _kill(pair, 1)
    value, stats = tmr.mean(data, axis=0, return_stats=True)
    np.testing.assert_allclose(value, np.mean(x, axis=0), rtol=1e-12)
    assert stats.moved == (1,)
    assert data.plan.tasks == (tmr.Task("local", 0),)
    assert tmr.count(data) == len(x)
    np.testing.assert_array_equal(data.gather(), x)


def test_generated_data_is_rebuilt_from_its_generator(pair: tmr.LocalCluster) -> None:
    data = tmr.generate(lambda a, b: tf.range(a, b, dtype=tf.float64), rows=1000, cluster=pair)
    _kill(pair, 0)
    assert tmr.sum(data) == sum(range(1000))


def test_resident_data_without_lineage_says_which_shards_are_lost(pair: tmr.LocalCluster) -> None:
    data = tmr.scatter(np.arange(10.0), cluster=pair, keep_source=False)
    _kill(pair, 1)
    with pytest.raises(tmr.ShardLostError, match="keep_source=False") as info:
        tmr.mean(data)
    assert info.value.shards == (1,)


def test_a_restarted_worker_is_used_again_and_its_shards_rebuilt(pair: tmr.LocalCluster) -> None:
    x = np.arange(12.0)
    data = tmr.scatter(x, cluster=pair)
    pair.restart(1)  # same port; its shard's variable is gone with the old process
    with pytest.raises(tmr.ShardLostError) as info:
        tmr.mean(data, retries=0)
    assert info.value.task == tmr.Task("local", 1)
    assert "rebuild" in str(info.value)
    assert tmr.mean(data) == 5.5  # retries rebuild the shard
    _kill(pair, 1)
    assert tmr.mean(x, cluster=pair) == 5.5  # task 1 lost ...
    pair.restart(1)
    assert tmr.count(x, cluster=pair, devices=["/job:local/task:1"]) == 12  # ... and back on its port


def test_a_keyed_shuffle_survives_a_killed_reducer(pair: tmr.LocalCluster) -> None:
    lines = np.array(["a b a", "c b", "a"] * 100)
    assert tmr.recipes.word_count(lines, cluster=pair, reducers=2)["a"] == 300
    _kill(pair, 1)
    counts = tmr.recipes.word_count(lines, cluster=pair, reducers=1)
    assert counts.to_dict() == dict(collections.Counter(w for line in lines for w in line.split()))


def _endless(t: tf.Tensor) -> tf.Tensor:
    def body(i: tf.Tensor, acc: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        m = tf.random.normal([200, 200])
        return i + 1, acc + tf.reduce_sum(tf.matmul(m, m))

    _, acc = tf.while_loop(lambda i, a: i < 10**9, body, [tf.constant(0), tf.constant(0.0)])
    return acc + tf.reduce_sum(t)


def _cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()  # noqa: SIM115 - a one-shot read
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_timed_out_run_stops_computing_on_the_workers(pair: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.WorkerTimeoutError, match="its step was cancelled on the workers"):
        tmr.MapReduce(_endless, tmr.combiners.sum).run(np.ones(4, np.float32), cluster=pair, timeout=2, retries=0)
    time.sleep(0.5)
    before = [_cpu_seconds(pid) for pid in pair.pids]
    time.sleep(2)
    used = [_cpu_seconds(pid) - b for pid, b in zip(pair.pids, before, strict=True)]
    assert max(used) < 0.5, f"workers kept computing after the deadline: {used} CPU seconds in 2 s"
    started = time.monotonic()
    assert tmr.mean(np.arange(10.0), cluster=pair, timeout=5) == 4.5
    assert time.monotonic() - started < 2


def _chained(t: tf.Tensor) -> tf.Tensor:
    """Many medium kernels, no loop: 150 chained 500×500 products (a few seconds a shard), no op that waits."""
    m = tf.reshape(t[:250_000], [500, 500])
    for _ in range(150):
        m = tf.matmul(m, m) * 1e-3
    return tf.reduce_sum(m)


@pytest.mark.skipif(kernels() is None, reason="the native kernels (the check before each op) could not be built here")
def test_a_timed_out_chain_of_kernels_stops_at_its_next_kernel(pair: tmr.LocalCluster) -> None:
    """TensorFlow's executor runs scheduled kernels on after a step is cancelled; the check before each op stops it."""
    x = np.random.default_rng(0).random(4 * 250_000)
    job = tmr.MapReduce(_chained, tf.add)
    with pytest.raises(tmr.WorkerTimeoutError):  # compiled (building the graph counts against its deadline)
        job.run(x, cluster=pair, sizes=4, timeout=1.5, retries=0)
    for _ in range(3):  # a loaded machine may spend the second's 1 s before the step starts: then try again
        time.sleep(1)
        with pytest.raises(tmr.WorkerTimeoutError) as info:
            job.run(x, cluster=pair, sizes=4, timeout=1, retries=0)
        if "its step was cancelled on the workers" in str(info.value):
            break
    else:
        pytest.fail(f"no run's step started within its deadline: {info.value}")
    time.sleep(1)  # the kernels running when the step was cancelled end
    before = [_cpu_seconds(pid) for pid in pair.pids]
    time.sleep(2)
    used = [_cpu_seconds(pid) - b for pid, b in zip(pair.pids, before, strict=True)]
    assert max(used) < 0.6, f"workers kept computing after the deadline: {used} CPU seconds in 2 s"


SAME_PID_CLIENT = """
import json, os, sys, time
import numpy as np, tfmapreduce as tmr
cluster = tmr.Cluster.from_spec(json.loads(sys.argv[1]))
value = float(sys.argv[2])
data = tmr.scatter(np.full(1000, value), cluster=cluster)
time.sleep(2)  # the other client scatters meanwhile
means = {float(tmr.mean(data)) for _ in range(20)}
data.delete()
cluster.close()
print(os.getpid(), sorted(means), flush=True)
"""


def test_two_clients_with_the_same_pid_keep_their_own_resident_data(cluster: tmr.LocalCluster) -> None:
    if not unshare_works("--pid", "--fork"):
        pytest.skip("needs `unshare --pid` (a PID namespace) to give two clients the same pid")
    spec = json.dumps(cluster.spec)
    clients = [
        subprocess.Popen(
            ["unshare", "--pid", "--fork", sys.executable, "-c", SAME_PID_CLIENT, spec, str(value)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for value in (1.0, 2.0)
    ]
    outputs = [client.communicate(timeout=120) for client in clients]
    for (out, err), value in zip(outputs, (1.0, 2.0), strict=True):
        assert out.split() == ["1", f"[{value}]"], err[-2000:]  # pid 1 in both namespaces, each its own mean only


EXIT_AFTER_FAILURE = """
import os, signal, time
import numpy as np, tfmapreduce as tmr
with tmr.LocalCluster(workers=2) as cluster:
    x = np.arange(1000.0)
    tmr.mean(x, cluster=cluster)
    os.kill(cluster.pids[1], signal.SIGKILL)
    time.sleep(0.1)
    try:
        tmr.mean(x, cluster=cluster, retries=0)
    except tmr.WorkerUnavailableError:
        print("named", flush=True)
    tmr.mean(x, cluster=cluster)  # retried on task 0; the failed run's session spans the dead task
print("done", time.time(), flush=True)
"""

EXIT_WAIT = 15.0  # seconds from "done" to the end of the process; the session of the failed run once held it 60 s


def test_the_client_exits_cleanly_after_a_worker_failure() -> None:
    for _ in range(2):  # the crash it guards against (a close thread returning during finalization) was intermittent
        done = subprocess.run([sys.executable, "-c", EXIT_AFTER_FAILURE], capture_output=True, text=True, timeout=90, check=False)
        ended = time.time()
        assert done.returncode == 0, done.stderr[-2000:]
        named, word, printed = done.stdout.split()
        assert (named, word) == ("named", "done")
        assert ended - float(printed) < EXIT_WAIT, f"the client took {ended - float(printed):.1f} s to exit after its work"
        assert "FATAL" not in done.stderr
        assert "terminate called" not in done.stderr


def test_the_first_device_listing_is_bounded_by_the_runs_timeout(pair: tmr.LocalCluster) -> None:
    fresh = tmr.Cluster.from_spec(pair.spec)  # has not listed its devices yet
    stop(pair.pids[1])
    try:
        started = time.monotonic()
        with pytest.raises(tmr.WorkerTimeoutError) as info:
            tmr.mean(np.arange(10.0), cluster=fresh, timeout=2)
        assert time.monotonic() - started < 2 + GRACE
        assert info.value.task == tmr.Task("local", 1)
    finally:
        os.kill(pair.pids[1], signal.SIGCONT)
        fresh.close()


def test_a_worker_stopped_before_the_first_device_listing_is_left_out_by_the_retry(pair: tmr.LocalCluster) -> None:
    """The retry lists only the live tasks, and remembers those that answered: it re-asked every task (the stopped one
    too, 10 s more) and failed naming it, where a cluster that had listed its devices finished on the survivor."""
    fresh = tmr.Cluster.from_spec(pair.spec)  # has not listed its devices yet
    x = np.arange(1000.0)
    stop(pair.pids[1])
    try:
        value, stats = tmr.mean(x, cluster=fresh, timeout=40, retries=2, return_stats=True)
    finally:
        os.kill(pair.pids[1], signal.SIGCONT)
        fresh.close()
    assert value == 499.5
    assert stats.lost == (tmr.Task("local", 1),)
    assert stats.attempts == 2


def test_a_worker_killed_during_scatter_is_named(pair: tmr.LocalCluster) -> None:
    x = np.ones(40_000_000, np.uint8)  # 40 MB through feeds: the kill lands while it is sent
    killer = threading.Timer(0.05, _kill, (pair, 1))
    started = time.monotonic()
    killer.start()
    data: tmr.Sharded | None = None
    named = None
    try:
        data = tmr.scatter(x, cluster=pair, timeout=30)
    except tmr.WorkerUnavailableError as e:
        named = e.task
    finally:
        killer.join()
    assert time.monotonic() - started < 30
    if data is None:
        assert named == tmr.Task("local", 1)
    else:  # the scatter finished first: its shard on task 1 is lost, and rebuilt by the next run
        assert tmr.count(data) == len(x)
