"""LocalCluster's workers in a network namespace of their own: nothing on the network reaches them.

Real processes throughout: the workers, the namespace keeper and its relays, and a second
network namespace the test makes itself, linked to this host by a veth pair with private test
addresses, from which a process knocks on the workers' ports like another machine would.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from namespaces import connect_from, outside_address

import tfmapreduce as tmr
from tfmapreduce._cluster import logdir as _logdir
from tfmapreduce._cluster.relay import Owners


def _ports(cluster: tmr.Cluster) -> list[int]:
    return [int(address.rpartition(":")[2]) for addresses in cluster.spec.values() for address in addresses]


def test_by_default_no_worker_answers_from_a_non_loopback_address(cluster: tmr.LocalCluster) -> None:
    """The regression: TensorFlow binds 0.0.0.0, so before isolation a worker answered from another address."""
    if not cluster.isolated:
        pytest.skip(f"this machine refuses network namespaces: {cluster.isolation}")
    assert "isolated in a network namespace" in repr(cluster), repr(cluster)
    with outside_address() as (netns, host_ip), tmr.LocalCluster(1, isolate=False) as exposed:
        assert not exposed.isolated
        assert "not isolated (isolate=False)" in repr(exposed)
        isolated, control = _ports(cluster), _ports(exposed)
        knocked = connect_from(netns, host_ip, isolated + control)
        assert {port: knocked[port] for port in control} == dict.fromkeys(control, "answers")  # the test can see a worker
        assert {port: knocked[port] for port in isolated} == dict.fromkeys(isolated, "ConnectionRefusedError"), knocked
    assert tmr.mean(np.arange(10.0), cluster=cluster) == 4.5  # the client still reaches them, through its loopback


STRANGER = """
import socket, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
    s.settimeout(3)
    print("data" if s.recv(1) else "closed")
except TimeoutError:
    print("held open")
except OSError as e:
    print("reset", type(e).__name__)
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to act as another user")
def test_the_relays_admit_only_this_users_connections(cluster: tmr.LocalCluster) -> None:
    if not cluster.isolated:
        pytest.skip(f"this machine refuses network namespaces: {cluster.isolation}")
    port = str(_ports(cluster)[0])
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    other = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-I", "-c", STRANGER, port]
    stranger = subprocess.run(other, capture_output=True, text=True, timeout=60, check=False)
    assert stranger.stdout.split()[:1] in (["reset"], ["closed"]), (stranger.stdout, stranger.stderr[-500:])
    owner = subprocess.run([python, "-I", "-c", STRANGER, port], capture_output=True, text=True, timeout=60, check=False)
    assert owner.stdout.strip() == "data", owner.stderr[-500:]  # the worker speaks first (its HTTP/2 settings)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to act as another user")
@pytest.mark.parametrize("asked", ["sock_diag", "/proc/net/tcp"])
def test_the_relays_name_who_owns_a_connection_however_they_ask_the_kernel(asked: str) -> None:
    """By one sock_diag lookup, or by a scan of /proc/net/tcp where the kernel answers none: IPv4, IPv4 through a
    dual-stack socket, IPv6, another user's connection, and a connection that is not there."""
    owners = Owners(diag=asked == "sock_diag")
    me = os.geteuid()
    with socket.create_server(("::", 0), family=socket.AF_INET6, dualstack_ipv6=True) as server:
        port = server.getsockname()[1]
        code = f"import socket, sys; s = socket.create_connection(('127.0.0.1', {port})); sys.stdin.read()"
        other = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code]
        with subprocess.Popen(other, stdin=subprocess.PIPE) as stranger:
            try:
                found = []
                for host in ("127.0.0.1", "::1", None):
                    mine = socket.create_connection((host, port)) if host else None
                    accepted, peer = server.accept()
                    with accepted:
                        found.append(owners.uid(peer[:2], accepted.getsockname()[:2]))
                    if mine:
                        mine.close()
                assert sorted(found, key=str) == sorted([me, me, 65534], key=str), found
                assert owners.uid(("127.0.0.1", 1), ("127.0.0.1", port)) is None
            finally:
                stranger.communicate(b"")


def test_isolate_must_be_auto_true_or_false() -> None:
    with pytest.raises(TypeError, match=r"isolate must be 'auto', True or False, got str 'yes'"):
        tmr.LocalCluster(1, isolate="yes")
    with pytest.raises(TypeError, match=r"isolate must be 'auto', True or False, got int 1"):
        tmr.LocalCluster(1, isolate=1)


REFUSED = textwrap.dedent(
    """
    import logging, sys
    import numpy as np
    import tfmapreduce as tmr

    logging.basicConfig(level="WARNING", stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    try:
        tmr.LocalCluster(1, isolate=True)
    except tmr.ClusterError as e:
        print("isolate=True:", e)
    with tmr.LocalCluster(1) as local:
        print("auto:", repr(local))
        print("mean", float(tmr.mean(np.arange(10.0), cluster=local)))
    """
)


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_where_namespaces_are_refused_auto_falls_back_and_isolate_true_raises() -> None:
    """A user namespace whose limit of network namespaces is 0: the kernel refuses them, as some distributions do."""
    limit = 'echo 0 > /proc/sys/user/max_net_namespaces && exec "$0" "$@"'
    argv = ["unshare", "-Ur", "sh", "-c", limit, sys.executable, "-c", REFUSED]
    if subprocess.run(["unshare", "-Ur", "sh", "-c", limit, "true"], capture_output=True, timeout=30).returncode != 0:
        pytest.skip("cannot make a user namespace with no network namespaces here")
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("isolate=True: LocalCluster(isolate=True): cannot make a network namespace here: "), lines
    assert "No space left on device" in lines[0]
    assert "isolate='auto'" in lines[0]
    assert lines[1].startswith("auto: LocalCluster(")
    assert "not isolated (cannot make a network namespace here" in lines[1]
    assert lines[2] == "mean 4.5"
    warnings = [line for line in result.stderr.splitlines() if line.startswith("tfmapreduce.cluster WARNING")]
    assert len(warnings) == 1, result.stderr[-2000:]
    assert "not isolated (cannot make a network namespace here" in warnings[0]


CLIENT_MASTER = textwrap.dedent(
    """
    import json, socket, sys
    import numpy as np, tfmapreduce as tmr

    x = np.random.default_rng(3).random(200_000)
    with tmr.LocalCluster(2, client_master=True) as local:
        assert local.isolated and local.client_master, repr(local)
        assert np.isclose(tmr.mean(x, cluster=local, transfer="feed"), x.mean())
        ports = [int(a.rpartition(":")[2]) for addresses in local.spec.values() for a in addresses]
        print(json.dumps({"ports": ports, "client": ports[-1], "pids": list(local.pids)}), flush=True)
        sys.stdin.readline()  # the test knocks from outside meanwhile
    try:
        socket.create_connection(("127.0.0.1", ports[-1]), timeout=2).close()
        print("client port after close: answers")
    except OSError as e:
        print("client port after close:", type(e).__name__)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()[0] != "Z"


def test_client_master_isolated_its_port_unreachable_from_outside_and_closed_with_its_cluster(
    cluster: tmr.LocalCluster,
) -> None:
    """The client's own server listens inside the workers' namespace, and stops listening when the cluster closes."""
    if not cluster.isolated:
        pytest.skip(f"this machine refuses network namespaces: {cluster.isolation}")
    with outside_address() as (netns, host_ip):
        client = subprocess.Popen(
            [sys.executable, "-c", CLIENT_MASTER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert client.stdout is not None
            line = client.stdout.readline()
            assert line, client.communicate(timeout=60)[1][-3000:]
            report = json.loads(line)
            knocked = connect_from(netns, host_ip, report["ports"])
            assert knocked == dict.fromkeys(report["ports"], "ConnectionRefusedError"), knocked
            out, err = client.communicate("go\n", timeout=120)
        finally:
            if client.poll() is None:
                client.kill()
                client.wait()
    assert client.returncode == 0, err[-3000:]
    assert out.strip().splitlines()[-1] == "client port after close: ConnectionRefusedError", out
    assert not [pid for pid in report["pids"] if _alive(pid)]


KILLED = textwrap.dedent(
    """
    import json, time
    import tfmapreduce as tmr

    local = tmr.LocalCluster(1)
    print(json.dumps({"logs": local._logdir, "pids": list(local.pids)}), flush=True)
    time.sleep(600)
    """
)


def test_a_sigkilled_clients_log_folder_is_swept_by_the_next_cluster() -> None:
    client = subprocess.Popen([sys.executable, "-c", KILLED], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert client.stdout is not None
        line = client.stdout.readline()
        assert line, client.communicate(timeout=60)[1][-3000:]
        report = json.loads(line)
    finally:
        client.kill()
        client.wait()
    logs = report["logs"]
    assert os.path.isdir(logs)  # a SIGKILL leaves no chance to remove it
    assert os.path.basename(logs).startswith(f"{_logdir.PREFIX}{client.pid}-")
    deadline = time.monotonic() + 10
    while [pid for pid in report["pids"] if _alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in report["pids"] if _alive(pid)]  # its workers died with it
    mine = _logdir.make()  # what the next LocalCluster does
    try:
        assert not os.path.exists(logs)
        assert os.path.basename(mine) not in _logdir.sweep()  # a live client's folder stays
        assert os.path.isdir(mine)
    finally:
        os.rmdir(mine)
