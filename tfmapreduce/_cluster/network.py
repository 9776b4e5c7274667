"""Is this machine on a network?  The guard in front of TensorFlow's server, which binds ``0.0.0.0``.

TensorFlow's gRPC server listens on every interface (``AddListeningPort("0.0.0.0:" + port)``,
hard-coded in ``grpc_server_lib.cc``) and has no authentication.  A worker therefore refuses to
start on a machine with an interface other than loopback unless told it may
(``tfmapreduce worker --allow-network``).
"""

from __future__ import annotations

import contextlib
import fcntl
import socket
import struct
import sys

_SIOCGIFFLAGS = 0x8913
_SIOCGIFADDR = 0x8915
_IFF_UP = 0x1
_IFF_LOOPBACK = 0x8


def _ipv6_interfaces() -> set[str]:
    names = set()
    with contextlib.suppress(OSError), open("/proc/net/if_inet6", encoding="ascii") as f:
        for line in f:
            fields = line.split()
            if len(fields) == 6:
                names.add(fields[5])
    return names


def network_interfaces() -> tuple[str, ...]:
    """The names of this machine's interfaces that other machines may reach: up, not loopback, with an address.

    On Linux an interface counts when it is up, is not a loopback interface and holds an
    IPv4 or IPv6 address (link-local included: the local network segment reaches it).
    Elsewhere every interface whose name does not start with ``lo`` counts.

    Example:
        >>> "lo" in network_interfaces()
        False
    """
    interfaces = [name for _, name in socket.if_nameindex()]
    if not sys.platform.startswith("linux"):
        return tuple(name for name in interfaces if not name.startswith("lo"))
    ipv6 = _ipv6_interfaces()
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for name in interfaces:
            request = struct.pack("16s16x", name.encode()[:15])
            try:
                flags = struct.unpack_from("H", fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, request), 16)[0]
            except OSError:
                found.append(name)  # cannot tell: count it
                continue
            if flags & _IFF_LOOPBACK or not flags & _IFF_UP:
                continue
            if name in ipv6:
                found.append(name)
                continue
            try:
                fcntl.ioctl(s.fileno(), _SIOCGIFADDR, request)
            except OSError:
                continue  # up, but no IPv4 address either: nothing can connect to it
            found.append(name)
    return tuple(found)


def refusal(interfaces: tuple[str, ...], port: int) -> str:
    """The one line a worker says when it will not start on a networked machine without ``--allow-network``."""
    return (
        f"this machine is on a network ({', '.join(interfaces)}) and TensorFlow's server would listen on port {port} of "
        "ALL interfaces with no authentication (anyone reaching it runs code as this user); pass --allow-network once "
        "a firewall admits only the client and the other tasks (see docs/security.md)"
    )
