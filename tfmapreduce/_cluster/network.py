"""Is this machine on a network?  The guard in front of TensorFlow's server, which binds ``0.0.0.0``.

TensorFlow's gRPC server listens on every interface (``AddListeningPort("0.0.0.0:" + port)``,
hard-coded in ``grpc_server_lib.cc``) and has no authentication.  It therefore answers on every
local address of the machine, and Linux accepts a packet for any local address on any interface
(an interface needs no address of its own: an "unnumbered" one delivers to the addresses on
``lo`` of routers, anycast and VIP setups).  A worker refuses to start where some interface other
than loopback can deliver to such an address unless told it may (``tfmapreduce worker --allow-network``).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import socket
import struct
import sys

_SIOCGIFFLAGS = 0x8913
_SIOCGIFADDR = 0x8915
_IFF_UP = 0x1
_IFF_LOOPBACK = 0x8
_IPV6_LINK_SCOPE = 0x20
_IPV6_HOST_SCOPE = 0x10

_LOOPBACK_V4 = ipaddress.IPv4Network("127.0.0.0/8")


def _read(path: str) -> str:
    with contextlib.suppress(OSError), open(path, encoding="ascii") as f:
        return f.read()
    return ""


def _ipv4_local() -> list[str]:
    """The IPv4 destinations this machine accepts as its own: the ``LOCAL`` routes of the kernel's local table
    (each address of an interface that is up, and any ``ip route add local PREFIX``), as ``"A.B.C.D"`` or a prefix."""
    found, table, node = [], "", ""
    for line in _read("/proc/net/fib_trie").splitlines():
        if not line.startswith(" "):
            table = line.rstrip(":")
        elif line.lstrip().startswith("|--"):
            node = line.split()[1]
        elif table == "Local" and line.split()[-1:] == ["LOCAL"] and node:
            length = int(line.split()[0].lstrip("/"))
            found.append(node if length == 32 else f"{node}/{length}")
    return list(dict.fromkeys(found))


def _ipv6_local() -> list[tuple[str, str, int]]:
    """This machine's IPv6 addresses: (address, interface, scope) from ``/proc/net/if_inet6``."""
    found = []
    for line in _read("/proc/net/if_inet6").splitlines():
        fields = line.split()
        if len(fields) == 6:
            address = str(ipaddress.IPv6Address(bytes.fromhex(fields[0])))
            found.append((address, fields[5], int(fields[3], 16)))
    return found


def _route_localnet(interface: str) -> bool:
    """Whether ``interface`` accepts packets for 127.0.0.0/8 (``route_localnet``, on it or on ``all``)."""
    return any(_read(f"/proc/sys/net/ipv4/conf/{name}/route_localnet").strip() == "1" for name in ("all", interface))


def _flags(s: socket.socket, name: str) -> int | None:
    request = struct.pack("16s16x", name.encode()[:15])
    try:
        return int(struct.unpack_from("H", fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, request), 16)[0])
    except OSError:
        return None


def _has_ipv4(s: socket.socket, name: str) -> bool:
    with contextlib.suppress(OSError):
        fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("16s16x", name.encode()[:15]))
        return True
    return False


def exposure() -> dict[str, tuple[str, ...]]:
    """Each interface through which another machine can reach a port bound on ``0.0.0.0``, with what it reaches.

    On Linux an interface counts when it is up, is not a loopback interface and can deliver a packet to a
    local address: any of the kernel's ``LOCAL`` IPv4 routes (the addresses of every interface that is up,
    ``lo`` included, and ``ip route add local`` prefixes) except 127.0.0.0/8 (dropped when it arrives from
    outside, unless ``route_localnet`` is set), any IPv6 address except ``::1``, and its own IPv6
    link-local addresses (those of another interface are not reachable through it).  Whether the interface has
    an address of its own does not matter.  An interface whose flags cannot be read counts, with nothing named.
    Elsewhere than Linux every interface whose name does not start with ``lo`` counts.

    Example:
        >>> "lo" in exposure()
        False
    """
    interfaces = [name for _, name in socket.if_nameindex()]
    if not sys.platform.startswith("linux"):
        return {name: () for name in interfaces if not name.startswith("lo")}
    ipv4 = _ipv4_local()
    ipv6 = _ipv6_local()
    shared = [address for address, _, scope in ipv6 if scope not in (_IPV6_LINK_SCOPE, _IPV6_HOST_SCOPE)]
    found: dict[str, tuple[str, ...]] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for name in interfaces:
            flags = _flags(s, name)
            if flags is None:
                found[name] = ()  # cannot tell: count it
                continue
            if flags & _IFF_LOOPBACK or not flags & _IFF_UP:
                continue
            localnet = _route_localnet(name)
            v4 = [a for a in ipv4 if localnet or not ipaddress.IPv4Network(a, strict=False).subnet_of(_LOOPBACK_V4)]
            own_link = [address for address, where, scope in ipv6 if where == name and scope == _IPV6_LINK_SCOPE]
            reached = (*v4, *shared, *own_link)
            if reached:
                found[name] = reached
    return found


def network_interfaces() -> tuple[str, ...]:
    """The names of the interfaces of :func:`exposure`: those through which other machines may reach this one.

    Example:
        >>> "lo" in network_interfaces()
        False
    """
    return tuple(exposure())


def _own_addresses(name: str) -> bool:
    """Whether ``name`` holds an address itself (IPv4, or IPv6 of any scope)."""
    if any(where == name for _, where, _ in _ipv6_local()):
        return True
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        return _has_ipv4(s, name)


def describe(exposed: dict[str, tuple[str, ...]]) -> str:
    """The interfaces of :func:`exposure` in words: each name, and what an interface with no address of its own
    reaches (``eth0, veth1 (no address of its own, but it delivers to 192.0.2.7 on this machine)``)."""
    words = []
    for name, reached in exposed.items():
        if reached and not _own_addresses(name):
            shown = ", ".join(reached[:3]) + (f" and {len(reached) - 3} more" if len(reached) > 3 else "")
            words.append(f"{name} (no address of its own, but it delivers to {shown} on this machine)")
        else:
            words.append(name)
    return ", ".join(words)


def refusal(exposed: dict[str, tuple[str, ...]], port: int) -> str:
    """The one line a worker says when it will not start on a networked machine without ``--allow-network``."""
    return (
        f"this machine is on a network ({describe(exposed)}) and TensorFlow's server would listen on port {port} of "
        "ALL interfaces with no authentication (anyone reaching it runs code as this user); pass --allow-network once "
        "a firewall admits only the client and the other tasks (see docs/security.md), or run the worker where no "
        "interface but loopback is up, such as a network namespace of its own"
    )
