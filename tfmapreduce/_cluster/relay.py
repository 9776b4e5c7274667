"""The keeper of a LocalCluster's network namespace and its relays: a small stdlib-only program, run by ``_netns``.

Started as ``python -I _relay.py UID FD`` with a ``SOCK_SEQPACKET`` control socket on file
descriptor FD, it moves into a new network namespace (``unshare(CLONE_NEWNET)``, or
``CLONE_NEWUSER | CLONE_NEWNET`` mapping only its own uid and gid when it may not create a
network namespace alone), brings that namespace's loopback up and answers ``ok`` (or
``error <why>``).  The workers join the namespace (see ``_netns``); this process relays to them.

Control messages (ASCII words, file descriptors by ``SCM_RIGHTS``), each answered ``ok`` or
``error <why>``:

``relay PORT`` with listening sockets (bound on the host's loopback by the client, which keeps
the port reserved) and optionally a pidfd last (``relay PORT pidfd``): each connection accepted on
them whose peer socket belongs to ``UID`` is joined to a new connection to ``127.0.0.1:PORT``
inside the namespace; any other connection is reset.  When the pidfd's process exits, the
listeners are closed (so connections are refused, as they would be by a dead worker) and so are
the port's relayed connections.  A later ``relay PORT`` replaces the port's listeners and pidfd.

The program exits when the control socket closes (the client closed the cluster or died).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import selectors
import socket
import struct
import sys
import threading

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_F_SETPIPE_SZ = 1031
CHUNK = 1 << 20
_ESTABLISHED = 1
_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST = 4, 20, 1
_UID_AT = 16 + 4 + 48 + 12
"""Where a sock_diag reply's uid is: after the netlink header, inet_diag_msg's first 4 bytes, socket id and 3 counters."""


def _unshare(flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def enter_namespace() -> bool:
    """Move into a new network namespace (in a new user namespace when need be); whether a user namespace was made.

    Raises:
        OSError: the kernel refused both (the message says what each attempt got).
    """
    try:
        _unshare(CLONE_NEWNET)
        return False
    except OSError as alone:
        try:
            uid, gid = os.geteuid(), os.getegid()
            _unshare(CLONE_NEWUSER | CLONE_NEWNET)
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
            return True
        except OSError as both:
            raise OSError(
                both.errno, f"unshare(CLONE_NEWNET): {alone.strerror}; unshare(CLONE_NEWUSER|CLONE_NEWNET): {both.strerror}"
            ) from None


def loopback_up() -> None:
    """Bring up ``lo`` of the current network namespace."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack_from("H", fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, request), 16)[0]
        fcntl.ioctl(s.fileno(), _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def _packed(host: str) -> tuple[int, bytes]:
    """An address as sock_diag wants it: (family, 16 bytes), an IPv4-mapped IPv6 address as the IPv4 one it maps."""
    host = host.removeprefix("::ffff:")
    try:
        return socket.AF_INET, socket.inet_pton(socket.AF_INET, host).ljust(16, b"\0")
    except OSError:
        return socket.AF_INET6, socket.inet_pton(socket.AF_INET6, host)


class Owners:
    """Who owns the client side of a loopback TCP connection, asked of the host's socket tables (opened before the
    namespace): one exact lookup by ``NETLINK_SOCK_DIAG`` (what ``ss`` uses), or, on a kernel that answers none (no
    ``tcp_diag``), a scan of ``/proc/net/tcp``, which walks every bucket of the table (3.3 ms a read on a 24 GiB
    machine, four reads a connection). ``diag=False`` always scans.
    """

    def __init__(self, diag: bool = True) -> None:
        self._tables = [os.open(path, os.O_RDONLY) for path in ("/proc/self/net/tcp", "/proc/self/net/tcp6")]
        self._netlink: socket.socket | None = None
        if diag:
            self._netlink = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG)
            with socket.create_server(("127.0.0.1", 0)) as server, socket.create_connection(server.getsockname()):
                accepted, peer = server.accept()
                with accepted:
                    found = self._diag(peer, accepted.getsockname())
            if found is None:  # its own connection not found: scan
                self._netlink.close()
                self._netlink = None

    def uid(self, peer: tuple[str, int], local: tuple[str, int]) -> int | None:
        """The uid owning the established socket at ``peer`` connected to ``local``, or None if there is none."""
        return self._scan(peer, local) if self._netlink is None else self._diag(peer, local)

    def _diag(self, peer: tuple[str, int], local: tuple[str, int]) -> int | None:
        assert self._netlink is not None
        family, src = _packed(peer[0])
        _, dst = _packed(local[0])
        # inet_diag_req_v2 (family, protocol, states) and its inet_diag_sockid: ports and addresses big-endian, any
        # interface, no cookie.
        request = struct.pack("=BBxxI", family, socket.IPPROTO_TCP, 0xFFFFFFFF)
        request += struct.pack("!HH16s16s", peer[1], local[1], src, dst) + struct.pack("=I8s", 0, b"\xff" * 8)
        header = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 0, 0)
        self._netlink.send(header + request)
        reply = self._netlink.recv(1 << 16)
        if len(reply) < _UID_AT + 4 or struct.unpack_from("=H", reply, 4)[0] != _SOCK_DIAG_BY_FAMILY:
            return None  # NLMSG_ERROR: no such socket
        if reply[17] != _ESTABLISHED:  # inet_diag_msg's state
            return None
        return int(struct.unpack_from("=I", reply, _UID_AT)[0])

    def _scan(self, peer: tuple[str, int], local: tuple[str, int]) -> int | None:
        want = (_packed(peer[0])[1], peer[1]), (_packed(local[0])[1], local[1])
        for fd in self._tables:
            os.lseek(fd, 0, os.SEEK_SET)
            chunks = []
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
            for line in b"".join(chunks).decode("ascii").splitlines()[1:]:
                fields = line.split()
                if len(fields) >= 8 and int(fields[3], 16) == _ESTABLISHED and (_address(fields[1]), _address(fields[2])) == want:
                    return int(fields[7])
        return None


def _address(text: str) -> tuple[bytes, int]:
    """An address of /proc/net/tcp or tcp6 (``0100007F:1F90``) as :func:`_packed` gives its host, and its port."""
    host, port = text.split(":")
    raw = bytes.fromhex(host)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return _packed(socket.inet_ntop(socket.AF_INET if len(words) == 4 else socket.AF_INET6, words))[1], int(port, 16)


def _reset(s: socket.socket) -> None:
    """Abort a connection (RST), as a dead process's would be."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _Link:
    """One relayed connection: the client's socket and the one inside, joined by a thread per direction."""

    def __init__(self, outer: socket.socket, inner: socket.socket, done: set[_Link], lock: threading.Lock) -> None:
        self.outer, self.inner, self._done, self._lock, self._left = outer, inner, done, lock, 2
        for s in (outer, inner):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def start(self) -> None:
        for src, dst in ((self.outer, self.inner), (self.inner, self.outer)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        r, w = os.pipe()
        try:
            with contextlib.suppress(OSError):  # a smaller pipe only costs more calls
                fcntl.fcntl(w, _F_SETPIPE_SZ, CHUNK)
            while True:
                n = os.splice(src.fileno(), w, CHUNK)
                if n == 0:
                    break
                while n:
                    n -= os.splice(r, dst.fileno(), n)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            self.abort()
        finally:
            os.close(r)
            os.close(w)
            with self._lock:
                self._left -= 1
                last = self._left == 0
                if last:
                    self._done.discard(self)
            if last:
                self.outer.close()
                self.inner.close()

    def abort(self) -> None:
        _reset(self.outer)
        _reset(self.inner)


class Keeper:
    """The control loop: relays per port, watched processes, and the links they carry."""

    def __init__(self, control: socket.socket, uid: int, owners: Owners) -> None:
        self._control, self._uid, self._owners = control, uid, owners
        self._selector = selectors.DefaultSelector()
        self._listeners: dict[int, list[socket.socket]] = {}
        self._pidfds: dict[int, int] = {}
        self._links: dict[int, set[_Link]] = {}
        self._lock = threading.Lock()
        self._selector.register(control, selectors.EVENT_READ, ("control", 0))

    def serve(self) -> None:
        while True:
            for key, _ in self._selector.select():
                kind, port = key.data
                if kind == "control" and not self._command():
                    return
                if kind == "accept":
                    self._accept(key.fileobj, port)  # type: ignore[arg-type]
                if kind == "exit":
                    self._down(port)

    def _command(self) -> bool:
        try:
            message, fds, _, _ = socket.recv_fds(self._control, 256, 16)
        except OSError:
            return False
        if not message:
            return False
        words = message.decode("ascii").split()
        try:
            if len(words) < 2 or words[0] != "relay" or not words[1].isdigit():
                raise ValueError(f"unknown command {message!r}")
            port = int(words[1])
            pidfd = fds.pop() if "pidfd" in words[2:] else None
            self._down(port)
            self._listeners[port] = [socket.socket(fileno=fd) for fd in fds]
            for listener in self._listeners[port]:
                self._selector.register(listener, selectors.EVENT_READ, ("accept", port))
            if pidfd is not None:
                self._pidfds[port] = pidfd
                self._selector.register(pidfd, selectors.EVENT_READ, ("exit", port))
            reply = b"ok"
        except (OSError, ValueError) as e:
            for fd in fds:
                os.close(fd)
            reply = f"error {e}".encode()
        self._control.send(reply)
        return True

    def _down(self, port: int) -> None:
        """Stop relaying ``port``: its listeners closed (refused from now on), its links reset."""
        for listener in self._listeners.pop(port, []):
            self._selector.unregister(listener)
            listener.close()
        pidfd = self._pidfds.pop(port, None)
        if pidfd is not None:
            self._selector.unregister(pidfd)
            os.close(pidfd)
        with self._lock:
            links = list(self._links.get(port, ()))
        for link in links:
            link.abort()

    def _accept(self, listener: socket.socket, port: int) -> None:
        try:
            outer, peer = listener.accept()
        except OSError:
            return
        if self._owners.uid(peer[:2], outer.getsockname()[:2]) != self._uid:
            _reset(outer)
            outer.close()
            return
        inner = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            inner.connect(("127.0.0.1", port))
        except OSError:
            inner.close()
            _reset(outer)
            outer.close()
            return
        with self._lock:
            links = self._links.setdefault(port, set())
            link = _Link(outer, inner, links, self._lock)
            links.add(link)
        link.start()


def main(argv: list[str]) -> int:
    control = socket.socket(fileno=int(argv[2]))
    uid = int(argv[1])
    try:
        owners = Owners()
        user = enter_namespace()
        loopback_up()
    except OSError as e:
        control.send(f"error {e.strerror or e}".encode())
        return 1
    control.send(b"ok user" if user else b"ok")
    with contextlib.suppress(OSError):  # a relay hop waits for a CPU on a busy machine: as root, it gets one first
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    Keeper(control, uid, owners).serve()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as e:
        if e.errno != errno.EPIPE:
            raise
        sys.exit(0)
