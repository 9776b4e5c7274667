"""The network guard: TensorFlow's server binds every interface, so exposed workers start on a networked machine only when allowed.

Nothing is faked: this machine's own interfaces decide what each test expects.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
from namespaces import free_octet, ip, require_netns

import tfmapreduce as tmr
from tfmapreduce._cluster.network import network_interfaces

EXPOSED = network_interfaces()


def test_local_cluster_allow_network_false_refuses_exposed_workers_before_starting_anything() -> None:
    if not EXPOSED:
        with tmr.LocalCluster(1, allow_network=False, isolate=False) as local:
            assert len(local.pids) == 1
        return
    before = set(network_interfaces())
    with pytest.raises(tmr.ClusterError) as error:
        tmr.LocalCluster(1, allow_network=False, isolate=False)
    message = str(error.value)
    assert message.startswith(
        "LocalCluster(allow_network=False): the workers would be not isolated (isolate=False) and this machine is on a network"
    )
    for name in before & set(network_interfaces()):  # (other tests' interfaces come and go meanwhile)
        assert name in message
    assert "unshare -rn" in message
    assert "allow_network=True" in message


def test_local_cluster_allow_network_false_starts_isolated_workers() -> None:
    with tmr.LocalCluster(1, allow_network=False) as local:
        if EXPOSED:  # started: so they are isolated (else it would have refused)
            assert local.isolated, local.isolation
        assert len(local.pids) == 1


def test_allow_network_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="allow_network must be True or False, got str 'no'"):
        tmr.LocalCluster(1, allow_network="no")  # type: ignore[arg-type]


SCRIPT = textwrap.dedent(
    """
    import logging, sys
    import numpy as np
    import tfmapreduce as tmr
    from tfmapreduce._cluster.network import network_interfaces

    logging.basicConfig(level="INFO", stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    print("interfaces", ",".join(network_interfaces()))
    for _ in range(2):
        with tmr.LocalCluster(1, **OPTIONS) as local:
            assert local.devices  # the first devices probe also checks every worker's TensorFlow version
            print("mean", float(tmr.mean(np.arange(10.0), cluster=local)))
    """
)


def run_script(options: str, *prefix: str) -> subprocess.CompletedProcess[str]:
    code = SCRIPT.replace("OPTIONS", options)
    return subprocess.run(
        [*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False, env=None
    )


def tfmapreduce_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("tfmapreduce.")]


@pytest.mark.parametrize("options", ["{}", "{'isolate': False}"], ids=["default", "isolate=False"])
def test_local_cluster_warns_once_per_process_when_its_workers_are_exposed(options: str) -> None:
    result = run_script(options)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("mean 4.5") == 2
    lines = tfmapreduce_lines(result.stderr)
    warnings = [line for line in lines if "WARNING" in line]
    isolated = sum("isolated in a" in line for line in lines if "LocalCluster started" in line)
    assert isolated in (0, 2), lines
    if options != "{}":
        assert isolated == 0, lines
    if EXPOSED and not isolated:
        assert len(warnings) == 1, lines
        assert "LocalCluster workers listen on every interface of this machine" in warnings[0]
        named = set(warnings[0].split("this machine (", 1)[1].split(")", 1)[0].split(", "))
        assert set(EXPOSED) & set(network_interfaces()) <= named  # (other tests' interfaces come and go meanwhile)
    else:
        assert warnings == [], lines
    # start and stop at INFO, twice; the version check passed without a word (every worker reported 2.x == client)
    assert sum("LocalCluster started 1 workers of job 'local'" in line for line in lines) == 2
    assert sum("LocalCluster stopping 1 workers" in line for line in lines) == 2
    assert not [line for line in lines if "TensorFlow" in line], lines


def _unshare_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(["unshare", "-rn", "sh", "-c", "ip link set lo up"], capture_output=True, timeout=30, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="no unprivileged network namespaces (unshare -rn) here")
def test_a_program_in_its_own_network_namespace_runs_with_allow_network_false_and_no_warning() -> None:
    """The protection docs/security.md recommends for local-only work: client and workers see only loopback."""
    result = run_script("{'allow_network': False}", "unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$0" "$@"')
    assert result.returncode == 0, result.stderr
    assert "interfaces \n" in result.stdout  # nothing but loopback inside
    assert result.stdout.count("mean 4.5") == 2
    assert not [line for line in tfmapreduce_lines(result.stderr) if "WARNING" in line]


@contextlib.contextmanager
def unnumbered_namespace() -> Iterator[tuple[str, str]]:
    """A network namespace of the test's own whose veth end is up with no address at all (no IPv6 link-local either),
    linked to this host, and only 127.0.0.1 on its ``lo``: (namespace, that interface), removed at the end."""
    require_netns("an unnumbered interface in a network namespace")
    tag = secrets.token_hex(3)
    netns, host_if, ns_if = f"tmr{tag}", f"tmrh{tag}", f"tmrn{tag}"
    try:
        for args in (
            ["netns", "add", netns],
            ["link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", netns],
            ["-n", netns, "link", "set", ns_if, "addrgenmode", "none"],
            ["-n", netns, "link", "set", ns_if, "up"],
            ["-n", netns, "link", "set", "lo", "up"],
            ["link", "set", host_if, "up"],
        ):
            done = ip(*args)
            if done.returncode != 0:
                pytest.skip(f"cannot set up the namespace here: ip {' '.join(args)}: {done.stderr.strip()}")
        yield netns, ns_if
    finally:
        ip("link", "del", host_if)
        ip("netns", "del", netns)


def _in_namespace(netns: str, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", netns, sys.executable, *argv], capture_output=True, text=True, timeout=timeout, check=False
    )


INTERFACES = "import json; from tfmapreduce._cluster.network import network_interfaces; print(json.dumps(network_interfaces()))"


def test_a_worker_refuses_where_an_interface_without_address_delivers_to_an_address_on_loopback() -> None:
    """Linux accepts a packet for any local address on any interface: an up interface with no address of its own
    ("unnumbered", as on routers and anycast or VIP setups) reaches an address added to ``lo``."""
    with unnumbered_namespace() as (netns, ns_if):
        # only loopback addresses: nothing an outside packet may reach (127.0.0.0/8 is dropped when it comes from ns_if)
        alone = _in_namespace(netns, "-c", INTERFACES)
        assert alone.returncode == 0, alone.stderr
        assert json.loads(alone.stdout) == []
        address = f"10.233.{free_octet('10.233.{}.{}')}.1"
        assert ip("-n", netns, "addr", "add", f"{address}/32", "dev", "lo").returncode == 0
        spec = json.dumps({"local": ["localhost:2222"]})
        # a worker that starts in spite of the guard is killed by the timeout, which fails the test
        result = _in_namespace(netns, "-m", "tfmapreduce", "worker", "--cluster", spec, "--task", "0")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "ready" not in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("tfmapreduce worker: error: this machine is on a network ("), line
    assert f"{ns_if} (no address of its own, but it delivers to {address} on this machine)" in line
    assert "port 2222 of ALL interfaces" in line
    assert "pass --allow-network once a firewall admits only the client and the other tasks" in line
    assert "a network namespace of its own" in line
