"""A network cut: one worker in a network namespace of its own, reached over a veth pair the test creates.

Taking the far end of the link down drops every packet to that worker (no refusal, no reset;
after a few seconds the kernel's neighbour discovery gives up and connects fail with "no route
to host"): the run must end by its deadline with the task named, or finish on the other task
when retries are left.  The
namespace, the veth pair and both workers are removed at the end, whatever happens.  Skipped,
with the reason, where the machine does not let this process create network namespaces.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np
import pytest
from namespaces import ip, veth_pair
from ports import free_ports

import tfmapreduce as tmr

pytestmark = [pytest.mark.slow, pytest.mark.alone]  # measures time: scripts/test runs it with no other test beside it

SUBNET = "10.231.{}.{}"  # addresses inside this test's own namespace pair only


def _worker(spec: dict[str, list[str]], task: int, netns: str | None) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-m",
        "tfmapreduce",
        "worker",
        "--cluster",
        json.dumps(spec),
        "--job",
        "local",
        "--task",
        str(task),
        "--allow-network",
    ]
    if netns is not None:
        argv = ["ip", "netns", "exec", netns, *argv]
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )


@pytest.fixture
def split_cluster() -> Iterator[tuple[tmr.Cluster, list[str]]]:
    """Task 0 on this host, task 1 in a new network namespace linked by a veth pair; yields (cluster, the `ip` words that cut it)."""
    workers: list[subprocess.Popen[bytes]] = []
    with veth_pair(SUBNET) as pair:
        try:
            p0, p1 = free_ports(2)
            spec = {"local": [f"{pair.host_ip}:{p0}", f"{pair.ns_ip}:{p1}"]}
            workers = [_worker(spec, 0, None), _worker(spec, 1, pair.netns)]
            cluster = tmr.Cluster.from_spec(spec)
            deadline = time.monotonic() + 90
            while True:
                try:
                    cluster.devices  # noqa: B018 - both workers answer
                    break
                except tmr.ClusterError:
                    assert all(w.poll() is None for w in workers), [w.stdout.read().decode()[-500:] for w in workers if w.stdout]
                    assert time.monotonic() < deadline, "the workers did not start"
                    cluster = tmr.Cluster.from_spec(spec)
                    time.sleep(0.5)
            yield cluster, ["-n", pair.netns, "link", "set", pair.ns_if, "down"]  # packets to it are dropped, not refused
            cluster.close()
        finally:
            for worker in workers:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(timeout=10)


def test_a_cut_link_ends_the_run_by_its_deadline_naming_the_task(split_cluster: tuple[tmr.Cluster, list[str]]) -> None:
    cluster, cut = split_cluster
    x = np.arange(1000.0)
    assert tmr.mean(x, cluster=cluster, timeout=30) == 499.5  # both tasks take part
    assert ip(*cut).returncode == 0
    started = time.monotonic()
    with pytest.raises((tmr.WorkerTimeoutError, tmr.WorkerUnavailableError)) as info:  # unanswered, or ARP gives up: unreachable
        tmr.mean(x, cluster=cluster, timeout=5, retries=0)
    assert time.monotonic() - started < 5 + 2.5
    assert info.value.task == tmr.Task("local", 1)


def test_a_cut_link_is_survived_on_the_other_task(split_cluster: tuple[tmr.Cluster, list[str]]) -> None:
    cluster, cut = split_cluster
    x = np.arange(1000.0)
    assert tmr.mean(x, cluster=cluster, timeout=30) == 499.5
    assert ip(*cut).returncode == 0
    value, stats = tmr.mean(x, cluster=cluster, timeout=15, return_stats=True)
    assert value == 499.5
    assert stats.lost == (tmr.Task("local", 1),)
