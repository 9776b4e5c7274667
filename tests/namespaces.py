"""Linux namespaces for tests that need a process alone in one (its own pids, its own network), or a network outside."""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

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


def require_netns(what: str) -> None:
    """Skip the test, saying why, unless this process may create network namespaces (root and ``ip netns``)."""
    if os.geteuid() != 0 or shutil.which("ip") is None or ip("netns", "list").returncode != 0:
        pytest.skip(f"{what} needs root and iproute2's `ip netns`")


def tc(*args: str, netns: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``tc ARGS`` (in ``netns`` when given), never raising."""
    where = ["-n", netns] if netns is not None else []
    return subprocess.run(["tc", *where, *args], capture_output=True, text=True, timeout=20, check=False)


@functools.cache
def netem_works() -> bool:
    """Whether this kernel has the ``netem`` queueing discipline (``tc qdisc ... netem``), tried on a scratch veth pair."""
    if shutil.which("tc") is None:
        return False
    name = f"tmrq{secrets.token_hex(3)}"
    if ip("link", "add", name, "type", "veth", "peer", "name", f"{name}p").returncode != 0:
        return False
    try:
        return tc("qdisc", "add", "dev", name, "root", "netem", "delay", "1ms").returncode == 0
    finally:
        ip("link", "del", name)


def shape(dev: str, *, rate_bps: float | None = None, delay_ms: float | None = None, netns: str | None = None) -> str:
    """Shape what leaves interface ``dev`` (in ``netns``): at most ``rate_bps`` bits per second, ``delay_ms`` more latency.

    Uses ``netem`` (rate and delay) where the kernel has it, else ``tbf`` (a token bucket: the rate only; no
    qdisc of such kernels adds latency).  ``rate_bps=delay_ms=None`` removes the shaping.  Returns what was set,
    in words (e.g. ``"tbf rate 1gbit (netem missing: no delay)"``).

    Raises:
        RuntimeError: ``tc`` refused the setting.
    """
    tc("qdisc", "del", "dev", dev, "root", netns=netns)  # none yet is fine
    if rate_bps is None and delay_ms is None:
        return "unshaped"
    rate = f"{int(rate_bps)}bit" if rate_bps is not None else None
    if netem_works():
        words = ["netem", *(["delay", f"{delay_ms}ms"] if delay_ms else []), *(["rate", rate] if rate else [])]
        # netem's default queue (1000 packets) drops at 10 Gbit/s bursts; a deep one behaves like a switch's buffer
        args, said = [*words, "limit", "100000"], " ".join(words)
    elif rate is not None:
        burst = max(int(rate_bps or 0) // 8 // 1000, 256 * 1024)  # 1 ms of the rate, at least four 64 KiB GSO packets
        args = ["tbf", "rate", rate, "burst", str(burst), "latency", "50ms"]
        said = f"tbf rate {rate}" + (f" (netem missing: no {delay_ms} ms delay)" if delay_ms else "")
    else:
        return f"unshaped (netem missing: no {delay_ms} ms delay)"
    done = tc("qdisc", "add", "dev", dev, "root", *args, netns=netns)
    if done.returncode != 0:
        raise RuntimeError(f"tc qdisc add dev {dev} root {' '.join(args)}: {done.stderr.strip()}")
    return said


PRIVATE = ("/tmp", "/dev/shm")
"""The folders a machine gets empty, of its own."""


def machine_argv(netns: str, argv: list[str], keep: Sequence[str] = ()) -> list[str]:
    """``argv`` run as a machine of its own inside ``netns``: its own pid namespace (it is pid 1 there, and sees only
    its own processes in ``/proc``) and mount namespace, with an empty private tmpfs on ``/tmp`` and ``/dev/shm``.

    ``keep``: folders under those two that the machine must still see at their paths (a checkout or an interpreter
    that lies there): each is opened before the private folders are mounted and bound back onto its path after.

    ``unshare --kill-child`` kills the namespace's processes when ``unshare`` dies; killing the process group of the
    returned command ends them all.
    """
    kept = [p for p in keep if not any(Path(p).is_relative_to(q) and p != q for q in keep)]  # a folder inside another is in it
    opened = " ".join(f"exec {3 + i}< {shlex.quote(p)};" for i, p in enumerate(kept))
    mounts = " && ".join(f"mount -t tmpfs -o mode=1777 tmpfs {d}" for d in PRIVATE)
    # mount -c: the fd's path, not its name (canonicalized, the name would find the new empty folder)
    bound = "".join(
        f" && mkdir -p {shlex.quote(p)} && mount -c --bind /proc/self/fd/{3 + i} {shlex.quote(p)} && exec {3 + i}<&-"
        for i, p in enumerate(kept)
    )
    script = f'{opened} {mounts}{bound} && exec "$@"'
    unshare = ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation", "private"]
    return ["ip", "netns", "exec", netns, *unshare, "sh", "-c", script, "sh", *argv]


def private_paths(paths: Sequence[str]) -> list[str]:
    """The folders of ``paths`` (those that exist) that lie under a machine's private folders (:data:`PRIVATE`), each once."""
    folders = [p for p in map(os.path.realpath, paths) if os.path.isdir(p)]
    return sorted({p for p in folders if any(Path(p).is_relative_to(d) for d in PRIVATE)})


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


def free_octet(subnet: str) -> int:
    """An X for which no address of this host is in ``subnet.format(X, ...)`` (tests beside each other pick apart)."""
    taken = ip("-4", "-o", "addr", "show").stdout
    for octet in secrets.SystemRandom().sample(range(256), 256):
        if f" {subnet.format(octet, '')}" not in taken:
            return octet
    raise RuntimeError(f"every /24 of {subnet.format('*', '*')} is in use on this host")


@contextlib.contextmanager
def veth_pair(subnet: str) -> Iterator[Pair]:
    """A :class:`Pair` on ``subnet`` (a format with two fields, e.g. ``"10.232.{}.{}"``), removed at the end whatever happens.

    A process in the namespace that connects to the host's address arrives on this machine from
    the network.  Skips the test where it cannot be made (needs root and ``ip netns``).
    """
    require_netns("creating a network namespace and a veth pair")
    tag = secrets.token_hex(3)
    netns, host_if, ns_if = f"tmr{tag}", f"tmrh{tag}", f"tmrn{tag}"
    octet = free_octet(subnet)
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
