"""Linux namespaces for tests that need a process alone in one (its own pids, its own network), or a network outside."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator

import attrs
import pytest


def unshare_works(*flags: str) -> bool:
    """Whether ``unshare FLAGS true`` runs here (e.g. ``--pid --fork`` for a pid namespace, ``-rn`` for a network one)."""
    try:
        return subprocess.run(["unshare", *flags, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def ip(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``ip ARGS`` (iproute2), never raising."""
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20, check=False)


@attrs.frozen
class Pair:
    """A network namespace of a test's own, linked to this host by a veth pair."""

    netns: str
    """The namespace's name (``ip netns exec NAME ...`` runs a process in it)."""
    host_ip: str
    """The host end's address: private, not loopback."""
    ns_ip: str
    """The namespace end's address."""
    ns_if: str
    """The namespace end's interface (``ip -n NETNS link set NS_IF down`` cuts the link)."""


@contextlib.contextmanager
def veth_pair(subnet: str) -> Iterator[Pair]:
    """A :class:`Pair` on ``subnet`` (a format with two fields, e.g. ``"10.232.{}.{}"``), removed at the end whatever happens.

    A process in the namespace that connects to the host's address arrives on this machine from
    the network.  Skips the test where it cannot be made (needs root and ``ip netns``).
    """
    if os.geteuid() != 0 or shutil.which("ip") is None or ip("netns", "list").returncode != 0:
        pytest.skip("creating a network namespace and a veth pair needs root and iproute2's `ip netns`")
    tag = secrets.token_hex(3)
    netns, host_if, ns_if = f"tmr{tag}", f"tmrh{tag}", f"tmrn{tag}"
    octet = int(tag[:2], 16)
    host_ip, ns_ip = subnet.format(octet, 1), subnet.format(octet, 2)
    try:
        for args in (
            ["netns", "add", netns],
            ["link", "add", host_if, "type", "veth", "peer", "name", ns_if],
            ["link", "set", ns_if, "netns", netns],
            ["addr", "add", f"{host_ip}/30", "dev", host_if],
            ["link", "set", host_if, "up"],
            ["-n", netns, "addr", "add", f"{ns_ip}/30", "dev", ns_if],
            ["-n", netns, "link", "set", ns_if, "up"],
            ["-n", netns, "link", "set", "lo", "up"],
        ):
            done = ip(*args)
            if done.returncode != 0:
                pytest.skip(f"cannot set up the namespace pair here: ip {' '.join(args)}: {done.stderr.strip()}")
        yield Pair(netns, host_ip, ns_ip, ns_if)
    finally:
        ip("link", "del", host_if)
        ip("netns", "del", netns)


@contextlib.contextmanager
def outside_address(subnet: str = "10.232.{}.{}") -> Iterator[tuple[str, str]]:
    """A :func:`veth_pair`'s (namespace, host address): connecting from there comes from outside this host."""
    with veth_pair(subnet) as pair:
        yield pair.netns, pair.host_ip


CONNECT = """
import socket, sys
host = sys.argv[1]
for port in map(int, sys.argv[2:]):
    try:
        socket.create_connection((host, port), timeout=3).close()
        print(port, "answers")
    except OSError as e:
        print(port, type(e).__name__)
"""


def connect_from(netns: str, host: str, ports: list[int]) -> dict[int, str]:
    """Try a TCP connection to ``host:port`` from inside ``netns`` for each port: port → "answers" or the error's class."""
    argv = ["ip", "netns", "exec", netns, sys.executable, "-I", "-c", CONNECT, host, *map(str, ports)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    return {int(port): outcome for port, outcome in (line.split() for line in done.stdout.splitlines())}
