"""Same-host shipping through shared memory: identical results, the plan's paths, cleanup whatever happens, fallback.

Real workers throughout: the session cluster (2 tasks x 2 CPU devices), a dedicated
LocalCluster where a worker must be stopped, and client processes started here
(to kill one mid-run, or to make one whose files the workers cannot open).
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from namespaces import unshare_works
from stopping import stop

import tfmapreduce as tmr
from tfmapreduce._engine import cache as _cache
from tfmapreduce._io import results as _results
from tfmapreduce._io import shm as _shm
from tfmapreduce._io import shmdir as _shmdir

pytestmark = pytest.mark.alone  # it watches all of /dev/shm: scripts/test runs it with no other test beside it

ROOT = str(Path(__file__).resolve().parents[2])


def _memfds(pid: int | None = None, name: str = "tfmapreduce") -> list[str]:
    """The shared-memory files named ``name`` a process holds open (this one by default): files staged for one run by
    default, ``"tfmapreduce-program"`` for the buffers compiled programs keep."""
    folder = f"/proc/{pid or os.getpid()}/fd"
    found = []
    for fd in os.listdir(folder):
        try:
            target = os.readlink(os.path.join(folder, fd))
        except OSError:
            continue
        if target.split(" ")[0] == f"/memfd:{name}":
            found.append(target)
    return found


def _buffers() -> int:
    """The shared-memory buffers compiled programs of this process keep (each is open twice: its own fd and its mapping's)."""
    folder = f"/proc/{os.getpid()}/fd"
    inodes = set()
    for fd in os.listdir(folder):
        with contextlib.suppress(OSError):
            if os.readlink(os.path.join(folder, fd)).startswith("/memfd:tfmapreduce-program "):
                inodes.add(os.stat(os.path.join(folder, fd)).st_ino)
    return len(inodes)


def _shm_entries() -> set[str]:
    """Everything of ours under /dev/shm (the file mechanism's per-user directory and its contents), leaving out the
    folders of other live clients (``<pid>-<token>``: other test processes on this machine) and the per-user
    directory that holds them."""
    found, others = set(), set()
    for top, dirs, files in os.walk(_shmdir.SHM_ROOT):
        for name in dirs + files:
            path = os.path.join(top, name)
            if "tfmapreduce" not in path:
                continue
            found.add(path)
            pid = name.split("-", 1)[0]
            if top.endswith(f"tfmapreduce-{os.getuid()}") and pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
                others.add(path)
    root = os.path.join(_shmdir.SHM_ROOT, f"tfmapreduce-{os.getuid()}")
    return {p for p in found if not any(p.startswith(o) for o in others)} - ({root} if others else set())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _no_memfds_soon() -> None:
    """No memfd of ours is open in this process within 2 s (they are closed on a background thread after the run)."""
    deadline = time.monotonic() + 2
    while _memfds() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _memfds() == []


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    """The test leaves no open shared-memory file in this process and nothing new under /dev/shm."""
    before = _shm_entries()
    yield
    _no_memfds_soon()
    assert _shm_entries() <= before


def _numpy_sum(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64).sum(axis=0)


@pytest.mark.usefixtures("no_leftovers")
@pytest.mark.parametrize(
    "x",
    [
        np.arange(1000, dtype=np.float32),
        np.arange(3000, dtype=np.int64).reshape(1000, 3) - 1500,
        np.linspace(-1, 1, 777).reshape(777, 1, 1),  # float64, 3-D
        np.arange(500) % 3 == 0,  # bool
        np.arange(999, dtype=np.int8).astype(np.int16),
    ],
    ids=["f32", "i64-2d", "f64-3d", "bool", "i16"],
)
def test_shared_memory_and_feeds_give_identical_results(cluster: tmr.LocalCluster, x: np.ndarray) -> None:
    job = tmr.MapReduce(lambda t: tf.reduce_sum(tf.cast(t, tf.float64), axis=0), tf.add)
    sizes = [100, 0, len(x) - 400, 300]  # uneven, one empty shard, two devices per task
    plan = job.plan(x, cluster=cluster, sizes=sizes, transfer="shm")
    assert [s.path for s in plan.shards] == ["shm", "feed", "shm", "shm"]  # the empty shard is skipped: nothing ships
    by_shm = job.run(x, cluster=cluster, sizes=sizes, transfer="shm")
    by_feed = job.run(x, cluster=cluster, sizes=sizes, transfer="feed")
    np.testing.assert_array_equal(by_shm, by_feed)
    np.testing.assert_allclose(by_shm, _numpy_sum(x), rtol=1e-12, atol=1e-9)


@pytest.mark.usefixtures("no_leftovers")
@pytest.mark.parametrize(
    "map_fn",
    [
        lambda t: tf.reduce_sum(t - 1.0),
        lambda t: tf.reduce_sum(tf.square(t) + t),
        lambda t: tf.reduce_sum(tf.nn.relu(tf.cast(t, tf.float32))),
        lambda t: tf.reduce_sum(tf.reshape(t, (-1, 10)) * 2.0, axis=0),
    ],
    ids=["sub", "square-add", "cast-relu", "reshape-mul"],
)
def test_ops_that_write_in_place_leave_the_read_only_mapping_alone(cluster: tmr.LocalCluster, map_fn: object) -> None:
    x = np.random.default_rng(5).random(100_000, dtype=np.float32)
    job = tmr.MapReduce(map_fn, tf.add)
    for _ in range(2):
        by_shm = job.run(x, cluster=cluster, transfer="shm", sizes=[25_000] * 4)
        np.testing.assert_allclose(by_shm, job.run(x, cluster=cluster, transfer="feed", sizes=[25_000] * 4), rtol=1e-6)


@pytest.mark.usefixtures("no_leftovers")
def test_co_partitioned_inputs_and_recipes_through_shared_memory(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(1)
    x, w = rng.random(5000).astype(np.float32), rng.random(5000)
    for transfer in ("shm", "feed"):
        got = tmr.weighted_mean(x, w, cluster=cluster, sizes=[1234, 3766], transfer=transfer)
        assert got == pytest.approx(np.average(x.astype(np.float64), weights=w), rel=1e-12)
    assert tmr.variance(x, cluster=cluster, transfer="shm") == tmr.variance(x, cluster=cluster, transfer="feed")


@pytest.mark.usefixtures("no_leftovers")
def test_auto_ships_big_shards_through_shared_memory_and_small_ones_through_feeds(cluster: tmr.LocalCluster) -> None:
    big = np.random.default_rng(2).random(_shm.MIN_BYTES, dtype=np.float32)  # 4 MiB: 1 MiB on each of the 4 devices
    job = tmr.MapReduce(tf.reduce_sum, tf.add)
    plan = job.plan(big, cluster=cluster)
    assert {s.path for s in plan.shards} == {"shm"}
    assert "  shm   /job:local" in plan.explain()
    assert {s.path for s in job.plan(big[:1000], cluster=cluster).shards} == {"feed"}
    assert {s.path for s in job.plan(big, cluster=cluster, transfer="feed").shards} == {"feed"}
    assert {s.path for s in job.plan(big.astype(np.uint64), cluster=cluster, transfer="shm").shards} == {"feed"}  # no decoder
    result, stats = job.run(big, cluster=cluster, return_stats=True)
    assert result == job.run(big, cluster=cluster, transfer="feed")
    assert stats.bytes_sent == big.nbytes


def test_resident_data_has_no_path(cluster: tmr.LocalCluster) -> None:
    with tmr.scatter(np.arange(10.0), cluster=cluster) as data:
        plan = tmr.MapReduce(tf.reduce_sum, tf.add).plan(data)
        assert {s.path for s in plan.shards} == {None}
        assert "via" not in plan.explain()


@pytest.mark.usefixtures("no_leftovers")
def test_one_compiled_graph_serves_every_run_with_new_data(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(tf.reduce_sum, tf.add)
    rng = np.random.default_rng(3)
    first = rng.random(4096).astype(np.float32)
    _, stats = job.run(first, cluster=cluster, transfer="shm", return_stats=True)
    for _ in range(3):
        x = rng.random(4096).astype(np.float32)
        result, stats = job.run(x, cluster=cluster, transfer="shm", return_stats=True)
        assert not stats.compiled
        assert result == job.run(x, cluster=cluster, transfer="feed")  # the data of THIS run, not a baked-in one


@pytest.mark.usefixtures("no_leftovers")
def test_a_program_maps_its_own_buffers_and_its_concurrent_runs_take_turns(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(lambda t: tf.reduce_sum(tf.cast(t, tf.float64)), tf.add)
    before = _buffers()
    job.run(np.zeros(40_000, np.float32), cluster=cluster, sizes=[10_000] * 4, transfer="shm")
    assert _buffers() == before + 4  # one buffer per shard, kept with the program
    inputs = [np.full(40_000, i, np.float32) for i in range(8)]
    results: dict[int, float] = {}

    def run(i: int) -> None:
        for _ in range(5):
            results[i] = job.run(inputs[i], cluster=cluster, sizes=[10_000] * 4, transfer="shm")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: 40_000.0 * i for i in range(8)}  # no run saw another's data
    assert _buffers() == before + 4


@pytest.mark.usefixtures("no_leftovers")
def test_past_their_share_of_memory_shards_are_staged_per_run(cluster: tmr.LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_shm, "MAPPED_SHARE", 0.0)
    job = tmr.MapReduce(tf.reduce_sum, tf.add)
    rng = np.random.default_rng(4)
    for _ in range(2):
        x = rng.random(4096).astype(np.float32)
        assert job.run(x, cluster=cluster, transfer="shm") == job.run(x, cluster=cluster, transfer="feed")
    programs = _cache.programs(cluster).of(job.identity)
    assert programs
    assert all(not p.buffers for p in programs)  # read from files staged per run instead
    assert any(f.staged for p in programs for f in p.feeds)


@pytest.mark.usefixtures("no_leftovers")
def test_files_are_closed_when_the_run_fails(cluster: tmr.LocalCluster) -> None:
    def must_be_small(t: tf.Tensor) -> tf.Tensor:
        with tf.control_dependencies([tf.debugging.assert_less(t, np.float32(0.5), message="too big")]):
            return tf.reduce_sum(t)

    job = tmr.MapReduce(must_be_small, tf.add)
    with pytest.raises(tmr.JobError, match="too big"):
        job.run(np.ones(1000, np.float32), cluster=cluster, transfer="shm")


def test_files_are_closed_when_the_run_times_out_and_buffers_when_the_cluster_closes() -> None:
    before = _shm_entries()
    kept = _buffers()
    with tmr.LocalCluster(2) as local:
        job = tmr.MapReduce(tf.reduce_sum, tf.add)
        x = np.ones(100_000, np.float32)
        assert job.run(x, cluster=local, transfer="shm") == 100_000  # compiled, session open
        stop(local.pids[1])
        try:
            started = time.monotonic()
            with pytest.raises(tmr.WorkerTimeoutError):
                job.run(x, cluster=local, transfer="shm", timeout=2)
            assert time.monotonic() - started < 15
            _no_memfds_soon()
        finally:
            os.kill(local.pids[1], signal.SIGCONT)
        assert _buffers() == kept + 2  # the program's two shards' buffers
    gc.collect()
    assert _buffers() == kept  # closed with the cluster's programs
    assert _shm_entries() <= before


def _client(code: str, spec: dict[str, list[str]], prefix: list[str] | None = None) -> subprocess.Popen[str]:
    """A client process of its own, on the given cluster's workers."""
    script = f"import numpy as np, tensorflow as tf, tfmapreduce as tmr\ncluster = tmr.Cluster.from_spec({spec!r})\n"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]), TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.Popen(
        [*(prefix or []), sys.executable, "-c", script + textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_nothing_is_left_when_the_client_is_killed_mid_run(cluster: tmr.LocalCluster) -> None:
    before = _shm_entries()
    child = _client(
        """
        x = np.random.default_rng(0).random(4_000_000, dtype=np.float32)
        job = tmr.MapReduce(lambda t: tf.reduce_sum(tf.sort(t)), tf.add)
        while True:
            job.run(x, cluster=cluster, transfer="shm", sizes=[2_000_000, 2_000_000])
        """,
        cluster.spec,
    )
    try:
        deadline = time.monotonic() + 60
        while not _memfds(child.pid, "tfmapreduce-program"):  # the program's buffers exist: runs are in flight
            assert child.poll() is None, child.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the client never staged a file"
            time.sleep(0.01)
        child.kill()
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    assert not os.path.exists(f"/proc/{child.pid}")  # its memfds died with it: the kernel frees them
    assert _shm_entries() <= before
    assert tmr.mean(np.arange(8.0), cluster=cluster) == 3.5  # the workers serve on


def test_the_file_mechanism_is_private_unlinked_after_the_run_and_swept_after_a_kill(cluster: tmr.LocalCluster) -> None:
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    graph = tf.Graph()
    with graph.as_default(), tf.device("/job:local/task:1/device:CPU:0"):
        path = tf.compat.v1.placeholder(tf.string, ())
        value = _shm.read_tensor(path, x.dtype, x.shape)
    try:
        with _shm.Staging("file") as staging:
            name = staging.write(x)
            assert stat.S_IMODE(os.stat(name).st_mode) == 0o600
            assert stat.S_IMODE(os.stat(os.path.dirname(name)).st_mode) == 0o700
            assert stat.S_IMODE(os.stat(_shmdir.user_root()).st_mode) == 0o700
            got = cluster.run(graph, value, {path: name}, tasks=["/job:local/task:1"], timeout=10)
        np.testing.assert_array_equal(got, x)
        assert not os.path.exists(name)
    finally:
        cluster.forget(graph)

    child = _client(
        """
        from tfmapreduce._io import shm as _shm
        print(_shm.Staging("file").write(np.zeros(10)), flush=True)
        import time; time.sleep(60)
        """,
        cluster.spec,
    )
    try:
        assert child.stdout is not None
        left = child.stdout.readline().strip()
        assert os.path.exists(left), child.communicate()[1][-2000:]
    finally:
        child.kill()
        child.wait()
    assert os.path.exists(left)  # SIGKILL: nothing in the client ran; the next client sweeps it
    assert os.path.basename(os.path.dirname(left)) in _shmdir.sweep()
    assert not os.path.exists(os.path.dirname(left))
    _shmdir.remove_client_dir()  # what the interpreter's exit does: this process's folder, then the empty per-user one
    assert _shm_entries() == set()


def test_tasks_that_cannot_open_the_clients_files_are_fed(cluster: tmr.LocalCluster) -> None:
    # A client whose files the workers cannot open, on this one machine: as root (which may open any
    # process's files), a client in its own pid namespace (its /proc/<pid> names another process for
    # the workers, as on another host); otherwise a client that is not dumpable (nobody else may open
    # its /proc/<pid>/fd files).
    in_namespace = os.getuid() == 0 and unshare_works("--pid", "--fork")
    if os.getuid() == 0 and not in_namespace:
        pytest.skip("root here, and no pid namespace available: every worker can open the client's files")
    setup = "" if in_namespace else "import ctypes\nctypes.CDLL(None).prctl(4, 0)  # PR_SET_DUMPABLE = 0\n"
    child = _client(
        setup
        + textwrap.dedent(
            """
        x = np.arange(1 << 20, dtype=np.float32)
        job = tmr.MapReduce(tf.reduce_sum, tf.add)
        print(sorted({s.path for s in job.plan(x, cluster=cluster).shards}))
        print(job.run(x, cluster=cluster) == job.run(x, cluster=cluster, transfer="feed") == np.float32(x.sum(dtype=np.float64)))
        try:
            job.run(x, cluster=cluster, transfer="shm")
        except tmr.ClusterError as e:
            print(type(e).__name__, e)
        """
        ),
        cluster.spec,
        prefix=["unshare", "--pid", "--fork"] if in_namespace else [],
    )
    out, err = child.communicate(timeout=120)
    lines = out.splitlines()
    assert lines[:2] == ["['feed']", "True"], err[-3000:]
    assert len(lines) == 3, err[-3000:]
    assert lines[2].startswith("ClusterError transfer='shm': task /job:local/task:0")
    assert "pass transfer='auto'" in lines[2]
    # and in this process, where the workers do see the files, the same input goes through shared memory
    assert {
        s.path for s in tmr.MapReduce(tf.reduce_sum, tf.add).plan(np.arange(1 << 20, dtype=np.float32), cluster=cluster).shards
    } == {"shm"}


def test_transfer_is_checked() -> None:
    with pytest.raises(ValueError, match=r"transfer must be 'auto' .* got 'gpu'"):
        tmr.mean(np.arange(3.0), cluster=None, transfer="gpu")  # type: ignore[typeddict-item]


_HOLDER = """
import os, sys, time
if len(sys.argv) > 1:  # in a pid namespace of its own: become the process numbered sys.argv[1] there
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(int(sys.argv[1]) - 1))
    if os.fork():
        os.wait()
        raise SystemExit
from tfmapreduce._io import shmdir as _shmdir
print(os.getpid(), os.readlink("/proc/self"), _shmdir.client_dir(), flush=True)  # its pid there, here, and its folder
time.sleep(120)
"""


@contextlib.contextmanager
def _holder(prefix: list[str], *args: str) -> Iterator[tuple[int, int, str]]:
    """A client process that makes its shared-memory folder and holds it: (its pid where it runs, its pid here, the
    folder), killed on exit (with the namespace it runs in: its first process exits when it does)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen([*prefix, sys.executable, "-c", _HOLDER, *args], stdout=subprocess.PIPE, text=True, env=env)
    here = None
    try:
        assert child.stdout is not None
        line = child.stdout.readline().split()
        assert len(line) == 3, f"the holder printed {line!r}"
        here = int(line[1])
        yield int(line[0]), here, line[2]
    finally:
        if here is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(here, signal.SIGKILL)
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        assert child.stdout is not None
        child.stdout.close()


def test_a_sweep_keeps_a_live_clients_folder_and_removes_it_once_the_client_is_gone() -> None:
    with _holder([]) as (inside, here, folder):
        assert inside == here
        assert os.path.basename(folder) not in _shmdir.sweep()  # its owner holds the folder's lock
        assert os.path.isdir(folder)
    assert os.path.basename(folder) in _shmdir.sweep()  # the kernel dropped the lock with the process
    assert not os.path.exists(folder)
    _shmdir.remove_client_dir()


@pytest.mark.skipif(
    os.getuid() != 0 or not unshare_works("--pid", "--fork"), reason="needs root and `unshare --pid --fork` (a pid namespace)"
)
def test_a_sweep_keeps_the_folder_of_a_live_client_in_another_pid_namespace() -> None:
    # Before: the sweep asked kill(pid, 0) about the pid in the folder's name; a client in another pid
    # namespace (a container sharing /dev/shm) has a pid that names nothing here, and lost its folder.
    free = next(p for p in range(1000, 1 << 22) if not os.path.exists(f"/proc/{p}"))
    with _holder(["unshare", "--pid", "--fork"], str(free)) as (inside, here, folder):
        assert inside == free != here
        assert os.path.basename(folder).startswith(f"{free}-")  # a pid that names no process here
        assert os.path.basename(folder) not in _shmdir.sweep()
        assert os.path.isdir(folder)
    assert os.path.basename(folder) in _shmdir.sweep()
    _shmdir.remove_client_dir()


@pytest.mark.parametrize("mechanism", ["memfd", "file"])
def test_results_written_as_raw_bytes_or_as_a_tensor_proto_read_back_alike(mechanism: str) -> None:
    """TmrWriteResult (a header, then the raw bytes) and the TensorProto fallback give the client the same arrays:
    every decodable dtype, rows of several values, empty results; a header that disagrees is refused."""
    from tfmapreduce._native.loader import kernels

    ops = kernels()
    arrays = [
        np.arange(12, dtype=np.float32).reshape(4, 3),
        np.array([np.nan, -0.0, 1.5]),
        np.zeros((0, 2), np.int64),
        np.array([True, False, True]),
        np.arange(-3, 4, dtype=np.int8),
        np.arange(5, dtype=np.float16),
        np.arange(24, dtype=np.uint16).reshape(2, 3, 4),
    ]
    for native in (ops, None) if ops is not None else (None,):
        with _shm.Staging(mechanism=mechanism) as staging:
            for array in arrays:
                path = staging.returned()
                graph = tf.Graph()
                with graph.as_default():
                    placeholder = tf.compat.v1.placeholder(tf.string, ())
                    written = _results.write_result(placeholder, tf.constant(array), native)
                with tf.compat.v1.Session(graph=graph) as session:
                    session.run(written, {placeholder: path})
                with open(path, "rb") as f:
                    assert (f.read(8) == _results.RESULT_MAGIC) == (native is not None)
                (got,) = _results.read_returned(path, array.dtype, array.shape[1:])
                assert (got.dtype, got.shape) == (array.dtype, array.shape)
                assert got.flags.writeable
                np.testing.assert_array_equal(got, array)
                if native is not None:
                    with pytest.raises(ValueError, match="holds"):
                        _results.read_returned(path, np.dtype(np.complex64), array.shape[1:])


@pytest.mark.parametrize("mechanism", ["memfd", "file"])
def test_the_parts_of_a_result_written_into_one_file_map_as_their_concatenation(mechanism: str) -> None:
    """Parts written by TmrWriteResult at their rows' places, in any order and some empty, read back as views of one
    mapping that concatenate without a copy; a part outside the total is refused."""
    from tfmapreduce._io.concat import concatenated
    from tfmapreduce._native.loader import kernels

    ops = kernels()
    if ops is None:
        pytest.skip("no native kernels here (no C++ compiler, or TFMAPREDUCE_NATIVE=0)")
    rng = np.random.default_rng(3)
    for sizes in ([3, 0, 5, 1], [0, 0], [4], [0, 7]):
        parts = [rng.random((n, 2)).astype(np.float32) for n in sizes]
        with _shm.Staging(mechanism=mechanism) as staging:
            path = staging.returned()
            graph = tf.Graph()
            with graph.as_default():
                placeholder = tf.compat.v1.placeholder(tf.string, ())
                values = [tf.constant(p) for p in parts]
                rows = [tf.shape(v, out_type=tf.int64)[0] for v in values]
                writes = [_results.write_result(placeholder, v, ops, part=i, rows=rows) for i, v in enumerate(values)]
            with tf.compat.v1.Session(graph=graph) as session:
                for i in rng.permutation(len(parts)):
                    session.run(writes[i], {placeholder: path})
            got = _results.read_returned(path, np.dtype(np.float32), (2,))
            assert [g.shape for g in got] == [p.shape for p in parts]
            whole = concatenated(got)
            np.testing.assert_array_equal(whole, np.concatenate(parts))
            if len(parts) > 1 and len(whole):
                assert np.shares_memory(whole, got[-1] if len(got[-1]) else got[0])
            assert whole.flags.writeable
    with _shm.Staging(mechanism=mechanism) as staging, tf.compat.v1.Session(graph=tf.Graph()) as session:
        with session.graph.as_default():
            placeholder = tf.compat.v1.placeholder(tf.string, ())
            bad = _results.write_result(
                placeholder, tf.zeros([3]), ops, part=1, rows=[tf.constant(2, tf.int64), tf.constant(2, tf.int64)]
            )
        with pytest.raises(tf.errors.InvalidArgumentError, match="not within"):
            session.run(bad, {placeholder: staging.returned()})
