"""The ``tfmapreduce worker`` command, run as real processes.

Every process imports TensorFlow (seconds of CPU), so each fixture starts its
processes all at once and the tests read the results.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import tensorflow as tf
from ports import free_port, free_ports, listening

from tfmapreduce import Cluster
from tfmapreduce._cluster.network import exposure, network_interfaces, refusal

WORKER = [sys.executable, "-m", "tfmapreduce", "worker"]
START_TIMEOUT = 90.0


def env_without_tf_config(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env.update(extra)
    return env


def kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(timeout=10)


# --- command lines that must fail ------------------------------------------------------------------


@attrs.frozen
class Finished:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture(scope="module")
def busy_port() -> Iterator[int]:
    """A port that something else already listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def spec_arg(*addresses: str, job: str = "local") -> list[str]:
    return ["--cluster", json.dumps({job: list(addresses)})]


@pytest.fixture(scope="module")
def failed(busy_port: int) -> dict[str, Finished]:
    """Run every bad command line at once; their results by case name.

    Only what the command line itself adds is run here; every way a spec can be wrong is in test_spec.py.
    """
    two = spec_arg("localhost:2222", "localhost:2223")
    cases = {
        "malformed JSON": ["--cluster", '{"local": ["localhost:2222",', "--job", "local", "--task", "0"],
        "unknown job": [*two, "--job", "nope", "--task", "0"],
        "task out of range": [*two, "--job", "local", "--task", "2"],
        "port in use": [*spec_arg(f"localhost:{busy_port}"), "--job", "local", "--task", "0"],
        "address with a name for a port": [*spec_arg("localhost:http"), "--job", "local", "--task", "0"],
        "no spec and no TF_CONFIG": ["--job", "local", "--task", "0"],
        "TF_CONFIG without a cluster": ["--job", "local", "--task", "0"],
        "on a network without --allow-network": [*spec_arg(f"localhost:{free_port()}"), "--job", "local", "--task", "0"],
    }
    environments = {"TF_CONFIG without a cluster": env_without_tf_config(TF_CONFIG='{"task": {"type": "local"}}')}
    processes = {
        name: subprocess.Popen(
            [*WORKER, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environments.get(name, env_without_tf_config()),
        )
        for name, args in cases.items()
    }
    results = {}
    try:
        for name, p in processes.items():
            try:
                stdout, stderr = p.communicate(timeout=START_TIMEOUT)
            except subprocess.TimeoutExpired:  # a worker that started (only loopback here): stop it, keep its output
                p.kill()
                stdout, stderr = p.communicate(timeout=10)
            results[name] = Finished(p.returncode, stdout, stderr)
    finally:
        for p in processes.values():
            kill(p)
    return results


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("malformed JSON", ["cluster spec JSON string is not valid JSON", "line 1 column"]),
        ("unknown job", ["job 'nope' is not in the cluster spec", "['local']"]),
        ("task out of range", ["task 2 is out of range for job 'local'", "0..1"]),
        ("port in use", ["/job:local/task:0", "already in use"]),
        ("address with a name for a port", ["job 'local' task 0", "'localhost:http'", "1 to 65535"]),
        ("no spec and no TF_CONFIG", ["TF_CONFIG is not set", "--cluster"]),
        ("TF_CONFIG without a cluster", ["TF_CONFIG has no 'cluster' entry", "['task']"]),
    ],
)
def test_bad_command_line_gives_one_error_line_and_exit_2(failed: dict[str, Finished], case: str, expected: list[str]) -> None:
    result = failed[case]
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "ready" not in result.stdout
    # TensorFlow's own start-up log lines may come first; the error is the last line, and only one line.
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines, "nothing on stderr"
    assert lines[-1].startswith("tfmapreduce worker: error: "), result.stderr
    assert sum(line.startswith("tfmapreduce") for line in lines) == 1, result.stderr
    for text in expected:
        assert text in lines[-1], (text, lines[-1])


def test_a_worker_on_a_networked_machine_needs_allow_network(failed: dict[str, Finished]) -> None:
    """Real: this machine's own interfaces decide.  Only loopback: the worker starts (the fixture
    stops it after START_TIMEOUT); any other interface: exit 2 with the one-line reason."""
    result = failed["on a network without --allow-network"]
    exposed = network_interfaces()
    if not exposed:
        assert " ready on " in result.stdout, result.stderr
        return
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    port = int(lines[0].split("port ")[1].split()[0])
    assert lines == [f"tfmapreduce worker: error: {refusal(exposure(), port)}"]
    assert lines[0].startswith(f"tfmapreduce worker: error: this machine is on a network ({exposed[0]}")
    assert "ready" not in result.stdout


def test_network_interfaces_matches_the_kernel() -> None:
    """Every up interface but loopback is named when an address of this machine other than loopback's and the
    interfaces' own IPv6 link-local ones exists (an interface reaches them all); else those with a link-local one."""
    if shutil.which("ip") is None:
        pytest.skip("no ip command here to compare with")
    links = subprocess.run(["ip", "-o", "link", "show", "up"], capture_output=True, text=True, check=True).stdout
    up = {line.split(":")[1].strip().split("@")[0] for line in links.splitlines() if "LOOPBACK" not in line.split()[2]}
    addresses = subprocess.run(["ip", "-o", "addr", "show", "up"], capture_output=True, text=True, check=True).stdout
    rows = [(line.split()[1], line.split()[2], line.split("scope ")[1].split()[0]) for line in addresses.splitlines()]
    shared = [row for row in rows if row[2] != "host" and not (row[1] == "inet6" and row[2] == "link")]
    linked = {name for name, family, scope in rows if family == "inet6" and scope == "link"}
    assert set(network_interfaces()) == (up if shared else up & linked)


def test_port_in_use_names_the_port(failed: dict[str, Finished], busy_port: int) -> None:
    assert f"port {busy_port} is already in use" in failed["port in use"].stderr


def test_help_explains_every_flag_with_an_example_and_the_security_warning() -> None:
    result = subprocess.run([*WORKER, "--help"], capture_output=True, text=True, timeout=START_TIMEOUT, check=False)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    for flag in ("--cluster SPEC", "--job NAME", "--task I", "--cpu-devices N", "TF_CONFIG"):
        assert flag in text, flag
    assert 'tfmapreduce worker --cluster \'{"local": [' in text  # an example command line
    assert "no authentication" in text
    assert "all network interfaces" in " ".join(text.lower().split())
    assert "--allow-network" in text
    assert "refuses" in text


# --- workers that start -----------------------------------------------------------------------------


@attrs.define
class Worker:
    process: subprocess.Popen
    stdout: Path
    stderr: Path
    address: str

    @property
    def port(self) -> int:
        return int(self.address.rpartition(":")[2])

    def ready_line(self) -> str:
        lines = [line for line in self.stdout.read_text().splitlines() if " ready on " in line]
        assert len(lines) == 1, self.stdout.read_text()
        return lines[0]


def start(directory: Path, name: str, args: list[str], address: str, env: dict[str, str]) -> Worker:
    stdout, stderr = directory / f"{name}.out", directory / f"{name}.err"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen([*WORKER, *args, "--allow-network"], stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
    return Worker(process, stdout, stderr, address)


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Worker]]:
    """Three workers started at once: spec from a file (3 CPUs), from a JSON string, from TF_CONFIG."""
    directory = tmp_path_factory.mktemp("workers")
    ports = free_ports(5)  # distinct: ports picked one at a time can repeat (two tasks were given one port)
    addresses = [f"localhost:{p}" for p in ports]
    spec_file = directory / "cluster.json"
    spec_file.write_text(json.dumps({"local": addresses[:2]}))
    tf_config = json.dumps({"cluster": {"mapreduce": addresses[3:5]}, "task": {"type": "mapreduce", "index": 1}})
    started: dict[str, Worker] = {}
    try:
        started["file"] = start(
            directory,
            "file",
            ["--cluster", str(spec_file), "--job", "local", "--task", "0", "--cpu-devices", "3"],
            addresses[0],
            env_without_tf_config(),
        )
        started["json"] = start(
            directory, "json", [*spec_arg(addresses[2]), "--job", "local", "--task", "0"], addresses[2], env_without_tf_config()
        )
        started["tf_config"] = start(directory, "tf_config", [], addresses[4], env_without_tf_config(TF_CONFIG=tf_config))
        deadline = time.monotonic() + START_TIMEOUT
        for name, worker in started.items():
            while " ready on " not in worker.stdout.read_text():
                assert worker.process.poll() is None, f"worker {name} exited: {worker.stderr.read_text()}"
                assert time.monotonic() < deadline, f"worker {name} not ready after {START_TIMEOUT} s"
                time.sleep(0.05)
        yield started
    finally:
        for worker in started.values():
            kill(worker.process)


def test_ready_line_names_task_address_and_devices(workers: dict[str, Worker]) -> None:
    worker = workers["json"]
    assert worker.ready_line() == (
        f"tfmapreduce worker /job:local/task:0 ready on {worker.address} (all interfaces, no authentication) "
        f"with TensorFlow {tf.__version__} and devices: /job:local/replica:0/task:0/device:CPU:0"
    )
    assert listening(worker.port)


def test_cpu_devices_and_spec_from_a_file(workers: dict[str, Worker]) -> None:
    worker = workers["file"]
    devices = [f"/job:local/replica:0/task:0/device:CPU:{i}" for i in range(3)]
    line = worker.ready_line()
    assert f"/job:local/task:0 ready on {worker.address}" in line
    assert line.endswith("and devices: " + ", ".join(devices))
    # the devices the ready line names are the ones a client sees
    assert list(Cluster.from_spec({"local": [worker.address]}).devices) == devices


def test_spec_job_and_task_from_tf_config(workers: dict[str, Worker]) -> None:
    worker = workers["tf_config"]
    line = worker.ready_line()
    assert f"/job:mapreduce/task:1 ready on {worker.address}" in line
    assert line.endswith("and devices: /job:mapreduce/replica:0/task:1/device:CPU:0")


@pytest.mark.alone  # the worker must stop within 2 s
@pytest.mark.parametrize(("name", "signum"), [("file", signal.SIGTERM), ("json", signal.SIGINT)])
def test_signal_stops_the_worker_with_exit_0_and_no_traceback(workers: dict[str, Worker], name: str, signum: int) -> None:
    worker = workers[name]
    assert worker.process.poll() is None, "the worker is not running"
    started = time.monotonic()
    worker.process.send_signal(signum)
    assert worker.process.wait(timeout=10) == 0
    assert time.monotonic() - started < 2.0
    assert "Traceback" not in worker.stderr.read_text()
    assert not listening(worker.port)
