"""Clusters: LocalCluster's workers come and go with their client, whatever happens to it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import attrs
import pytest
import tensorflow as tf
from ports import free_port, listening

from tfmapreduce import Cluster, ClusterError, LocalCluster, WorkerUnavailableError
from tfmapreduce._cluster.cluster import DEVICES_TIMEOUT

pytestmark = pytest.mark.alone  # measures time or speed: scripts/test runs it with no other test beside it

PARENT_ENV = "TFMAPREDUCE_PARENT_PID"  # what LocalCluster puts in each worker's environment


# --- processes and ports -----------------------------------------------------------------------------


def alive(pid: int) -> bool:
    """Whether any thread of ``pid`` still runs (an exited, unreaped process is a zombie with one thread)."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return False
    return status["State"].split()[0] not in ("Z", "X") or int(status["Threads"]) > 1


def running(pids: Iterable[int], within: float = 0.0) -> list[int]:
    """The ``pids`` still running after waiting up to ``within`` seconds for all to end."""
    deadline = time.monotonic() + within
    while True:
        left = [pid for pid in pids if alive(pid)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def workers_started_by(parent: int, *, job: str | None = None) -> set[int]:
    """Running worker processes that ``parent`` started, found through their environment (orphans too)."""
    marker = f"{PARENT_ENV}={parent}".encode()
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if marker in environ and b"worker" in argv and (job is None or job.encode() in argv) and alive(int(entry)):
            found.add(int(entry))
    return found


def ports_of(cluster: Cluster) -> list[int]:
    return [int(address.rpartition(":")[2]) for addresses in cluster.spec.values() for address in addresses]


def assert_nothing_left(pids: Iterable[int], ports: Iterable[int], *, within: float = 0.0) -> None:
    """No process of ``pids`` runs and nothing listens on ``ports``, after waiting up to ``within`` seconds."""
    deadline = time.monotonic() + within
    left = running(pids, within)
    assert not left, f"worker processes {left} outlived their cluster"
    while True:
        open_ports = [port for port in ports if listening(port)]
        if not open_ports or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    assert not open_ports, f"ports {open_ports} still listen"


def add_one_on(task: str) -> tuple[tf.Graph, tf.Tensor, tf.Tensor]:
    """A tiny graph: a placeholder fed on the client, plus one on ``task``."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        with tf.device(task):
            y = x + 1
    return graph, x, y


def add_one(cluster: Cluster, task: str, value: float = 41.0) -> float:
    graph, x, y = add_one_on(task)
    return cluster.run(graph, y, {x: value}, tasks=[task], timeout=20)


# --- the shared cluster ---------------------------------------------------------------------------------


def test_devices_are_the_full_names_of_every_device(cluster: LocalCluster) -> None:
    assert [str(d) for d in cluster.devices] == [
        f"/job:local/replica:0/task:{task}/device:CPU:{index}" for task in (0, 1) for index in (0, 1)
    ]


def test_spec_tasks_and_processes_agree(cluster: LocalCluster) -> None:
    assert cluster.jobs == ("local",)
    assert tuple(map(str, cluster.tasks)) == ("/job:local/task:0", "/job:local/task:1")
    assert [a.rpartition(":")[0] for a in cluster.spec["local"]] == ["localhost", "localhost"]
    assert cluster.target == f"grpc://{cluster.spec['local'][0]}"
    assert len(cluster.pids) == 2
    assert running(cluster.pids) == list(cluster.pids)
    assert all(listening(port) for port in ports_of(cluster))


def test_a_graph_runs_on_every_device(cluster: LocalCluster) -> None:
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        parts = []
        for device in cluster.devices:
            with tf.device(device):
                parts.append(x * 2)
        total = tf.add_n(parts)
    assert cluster.run(graph, total, {x: 1.5}, tasks=list(cluster.tasks), timeout=20) == 12.0


# --- starting and stopping ------------------------------------------------------------------------------


def test_bad_arguments_start_nothing() -> None:
    before = workers_started_by(os.getpid())
    for kwargs, error in [
        ({"workers": 0}, ValueError),
        ({"workers": True}, TypeError),
        ({"workers": "2"}, TypeError),
        ({"cpu_devices": 0}, ValueError),
        ({"startup_timeout": 0}, ValueError),
        ({"job": "map-reduce"}, ClusterError),
    ]:
        with pytest.raises(error):
            LocalCluster(**kwargs)
    assert workers_started_by(os.getpid()) == before


def test_a_worker_that_is_not_ready_in_time_is_stopped() -> None:
    try:
        with pytest.raises(ClusterError, match=r"did not become ready within startup_timeout=0\.3 s"):
            LocalCluster(workers=1, job="tooslow", startup_timeout=0.3)
        assert running(workers_started_by(os.getpid(), job="tooslow"), within=2.0) == []
    finally:
        for pid in workers_started_by(os.getpid(), job="tooslow"):
            os.kill(pid, signal.SIGKILL)


def test_clusters_one_after_the_other_leave_nothing_behind(cluster: LocalCluster) -> None:
    with LocalCluster(workers=1, job="first") as first:
        pids, ports = first.pids, ports_of(first)
        assert add_one(first, "/job:first/task:0") == 42.0
    assert_nothing_left(pids, ports)  # normal exit
    assert first.closed
    with pytest.raises(ClusterError, match="closed"):
        add_one(first, "/job:first/task:0")
    first.close()  # closing twice is fine

    seen: list[tuple[tuple[int, ...], list[int]]] = []

    def use_and_fail() -> None:
        with LocalCluster(workers=1, job="second") as second:
            seen.append((second.pids, ports_of(second)))
            assert add_one(second, "/job:second/task:0") == 42.0
            raise RuntimeError("inside the with block")

    with pytest.raises(RuntimeError, match="inside the with block"):
        use_and_fail()
    [(pids, ports)] = seen
    assert_nothing_left(pids, ports)  # exit through an exception

    assert add_one(cluster, "/job:local/task:1") == 42.0  # the process's other cluster is unaffected


def test_a_dead_worker_leaves_its_cluster_and_others_usable(cluster: LocalCluster) -> None:
    with LocalCluster(workers=2, job="doomed") as doomed:
        pids, ports = doomed.pids, ports_of(doomed)
        assert add_one(doomed, "/job:doomed/task:1") == 42.0
        os.kill(pids[1], signal.SIGKILL)
        assert running([pids[1]], within=2.0) == []
        with pytest.raises(WorkerUnavailableError) as info:
            add_one(doomed, "/job:doomed/task:1")
        assert str(info.value.task) == "/job:doomed/task:1"
        assert add_one(doomed, "/job:doomed/task:0") == 42.0  # the survivor still works
        assert add_one(cluster, "/job:local/task:1") == 42.0  # and so does another cluster
    assert_nothing_left(pids, ports)


# --- existing clusters that are not there ---------------------------------------------------------------


def test_an_address_where_nothing_listens_is_named_without_hanging(cluster: LocalCluster) -> None:
    live, dead = cluster.spec["local"][0], f"localhost:{free_port()}"
    started = time.monotonic()
    with pytest.raises(ClusterError) as info:
        Cluster.from_spec({"local": [live, dead]}).devices  # noqa: B018 - the property does the probing
    assert time.monotonic() - started < 2 * DEVICES_TIMEOUT  # a refusal named, not a hang (the probe's bound: 10 s)
    message = str(info.value)
    assert f"task /job:local/task:1 at {dead} is unreachable" in message
    assert live not in message


# --- the client dies ------------------------------------------------------------------------------------

CLIENT = """
import json, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a terminal, even where the test runs with it ignored
import tfmapreduce
print("starting", flush=True)
with tfmapreduce.LocalCluster(workers=2, job=sys.argv[1]) as cluster:
    ports = [int(a.rpartition(":")[2]) for a in cluster.spec[sys.argv[1]]]
    print(json.dumps({"pids": list(cluster.pids), "ports": ports}), flush=True)
    time.sleep(600)
"""


@attrs.define
class Client:
    process: subprocess.Popen
    stdout: Path
    stderr: Path

    def line(self, index: int, timeout: float) -> str:
        """Line ``index`` of what the client printed, waiting up to ``timeout`` seconds for it."""
        deadline = time.monotonic() + timeout
        while True:
            lines = self.stdout.read_text().splitlines(keepends=True)
            if len(lines) > index and lines[index].endswith("\n"):
                return lines[index].strip()
            assert self.process.poll() is None, f"the client exited: {self.stderr.read_text()}"
            assert time.monotonic() < deadline, f"the client printed {lines} in {timeout} s"
            time.sleep(0.05)

    def started_cluster(self) -> tuple[list[int], list[int]]:
        """The worker pids and ports of the client's cluster, once it is ready."""
        assert self.line(0, 60) == "starting"
        started = json.loads(self.line(1, 90))
        pids, ports = started["pids"], started["ports"]
        assert len(pids) == 2
        assert running(pids) == pids
        assert all(listening(port) for port in ports)
        return pids, ports


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Client]]:
    """Client processes, started at once, each running a LocalCluster of its own job."""
    directory = tmp_path_factory.mktemp("clients")
    started: dict[str, Client] = {}
    try:
        for job in ("sigint", "sigkill", "sigintstarting", "sigkillstopped"):
            stdout, stderr = directory / f"{job}.out", directory / f"{job}.err"
            with stdout.open("wb") as out, stderr.open("wb") as err:
                process = subprocess.Popen([sys.executable, "-c", CLIENT, job], stdout=out, stderr=err, stdin=subprocess.DEVNULL)
            started[job] = Client(process, stdout, stderr)
        yield started
    finally:
        for client in started.values():
            if client.process.poll() is None:
                client.process.kill()
            client.process.wait(timeout=10)
            for pid in workers_started_by(client.process.pid):
                os.kill(pid, signal.SIGKILL)


def test_ctrl_c_in_the_client_stops_its_workers(clients: dict[str, Client]) -> None:
    client = clients["sigint"]
    pids, ports = client.started_cluster()
    client.process.send_signal(signal.SIGINT)
    client.process.wait(timeout=30)  # a hang, not a slow exit on a loaded machine
    assert "KeyboardInterrupt" in client.stderr.read_text()
    assert_nothing_left(pids, ports)
    assert workers_started_by(client.process.pid) == set()


def test_ctrl_c_while_the_workers_start_stops_them(clients: dict[str, Client]) -> None:
    client = clients["sigintstarting"]
    assert client.line(0, 60) == "starting"
    deadline = time.monotonic() + 30
    while not workers_started_by(client.process.pid):  # interrupt once the workers exist, before they are ready
        assert time.monotonic() < deadline, "the client started no workers"
        time.sleep(0.02)
    client.process.send_signal(signal.SIGINT)
    client.process.wait(timeout=30)  # a hang, not a slow exit on a loaded machine
    assert "KeyboardInterrupt" in client.stderr.read_text()
    assert running(workers_started_by(client.process.pid), within=1.0) == []


def test_sigkill_of_the_client_stops_even_a_stopped_worker(clients: dict[str, Client]) -> None:
    client = clients["sigkillstopped"]
    pids, ports = client.started_cluster()
    os.kill(pids[1], signal.SIGSTOP)  # a stopped process keeps a SIGTERM pending: the death signal must be SIGKILL
    client.process.kill()
    client.process.wait(timeout=5)
    assert_nothing_left(pids, ports, within=3.0)


def test_sigkill_of_the_client_stops_its_workers_within_seconds(clients: dict[str, Client]) -> None:
    client = clients["sigkill"]
    pids, ports = client.started_cluster()
    client.process.kill()
    client.process.wait(timeout=5)
    assert_nothing_left(pids, ports, within=3.0)
    assert workers_started_by(client.process.pid) == set()
