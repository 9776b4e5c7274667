"""A LocalCluster's own network namespace: its workers inside, reached from this process's loopback only.

TensorFlow's server binds ``0.0.0.0`` and authenticates nobody.  In a network namespace that
has nothing but its own loopback, ``0.0.0.0`` is that loopback: nothing outside can connect.
The client reaches the workers through relays kept by the namespace's keeper (``_relay``):
for each worker's port the client binds the same port on *its* loopback (``127.0.0.1`` and
``::1``), and the keeper joins every connection made there by a socket of this user to the
worker's port inside.  The workers join the namespace before they start
(:meth:`Namespace.join`, in the child between fork and exec), so they keep this machine's
processes and files: shared memory and ``/proc/<client pid>`` paths work as before.

All the local clusters of one process share one namespace (:func:`shared`): threads of this
process that joined it (to start ``client_master=True`` servers there) also make gRPC's
connections for the whole process, and those must reach every cluster's workers, also after
an earlier cluster closed.  A port is reserved on this machine's loopback before any worker
uses it inside, so ports are unique in both places.

Example:
    >>> import subprocess
    >>> ns = Namespace.start(lambda argv, fds: subprocess.Popen(argv, pass_fds=fds))  # doctest: +SKIP
    >>> ports = ns.reserve(2)  # doctest: +SKIP
    >>> ns.release(ports)  # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .._base.errors import ClusterError
from . import relay as _relay

T = TypeVar("T")

Spawn = Callable[[list[str], Sequence[int]], "subprocess.Popen[bytes]"]
"""Starts the keeper: ``spawn(argv, pass_fds)`` returns its process."""


class IsolationError(ClusterError):
    """The operating system refused a network namespace here; the message says what it answered."""


def _setns(fd: int, kind: int) -> None:
    if ctypes.CDLL(None, use_errno=True).setns(fd, kind) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class Namespace:
    """One network namespace held by its keeper process, with the relays into it.

    Close it to stop the keeper: the relays close and the namespace ends with its last worker.
    """

    def __init__(self, keeper: subprocess.Popen[bytes], control: socket.socket, user: bool) -> None:
        self._keeper, self._control = keeper, control
        self._lock = threading.Lock()
        self._reserved: dict[int, list[socket.socket]] = {}
        self._closed = False
        self.user = user
        """Whether the namespace lives in a user namespace of its own (made without root)."""
        base = f"/proc/{keeper.pid}/ns/"
        self._net = os.open(base + "net", os.O_RDONLY)
        self._userns = os.open(base + "user", os.O_RDONLY) if user else None

    @classmethod
    def start(cls, spawn: Spawn, *, timeout: float = 30.0) -> Namespace:
        """Start a keeper in a new network namespace with its loopback up.

        Raises:
            IsolationError: the kernel refused the namespace (or the keeper did not answer in ``timeout`` seconds).
        """
        if not sys.platform.startswith("linux"):
            raise IsolationError(f"network namespaces exist on Linux only, not on {sys.platform}")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            argv = [sys.executable, "-I", _relay.__file__, str(os.geteuid()), str(theirs.fileno())]
            keeper = spawn(argv, (theirs.fileno(),))
        finally:
            theirs.close()
        ours.settimeout(timeout)
        try:
            answer = ours.recv(512).decode("ascii", "replace")
        except OSError as e:
            answer = f"error no answer from the namespace keeper ({e})"
        if not answer.startswith("ok"):
            ours.close()
            keeper.kill()
            keeper.wait()
            reason = answer.removeprefix("error ").strip() or f"the namespace keeper exited with code {keeper.returncode}"
            raise IsolationError(f"cannot make a network namespace here: {reason}")
        ours.settimeout(None)
        try:
            return cls(keeper, ours, user=answer == "ok user")
        except OSError as e:
            ours.close()
            keeper.kill()
            keeper.wait()
            raise IsolationError(f"cannot open the namespace of the keeper: {e}") from None

    @property
    def pid(self) -> int:
        """The keeper's process id."""
        return self._keeper.pid

    def join(self) -> None:
        """Move the calling process (a child between fork and exec: one thread) into the namespace."""
        if self._userns is not None:
            _setns(self._userns, _relay.CLONE_NEWUSER)
        _setns(self._net, _relay.CLONE_NEWNET)

    def inside(self, fn: Callable[[], T]) -> T:
        """``fn()`` on a thread of this process that joined the namespace: sockets it makes live inside.

        Raises:
            IsolationError: this process may not join the namespace (it needs ``CAP_SYS_ADMIN``: root).
        """
        result: list[Any] = []

        def run() -> None:
            try:
                _setns(self._net, _relay.CLONE_NEWNET)
            except OSError as e:
                result.append(IsolationError(f"this process cannot join its cluster's network namespace: {e.strerror}"))
                return
            try:
                result.append((fn(),))
            except BaseException as e:  # handed back to the caller
                result.append(e)

        thread = threading.Thread(target=run, name="tfmapreduce-netns")
        thread.start()
        thread.join()
        if isinstance(result[0], BaseException):
            raise result[0]
        return result[0][0]  # type: ignore[no-any-return]

    def can_enter(self) -> str | None:
        """None if :meth:`inside` works in this process, else why not."""
        try:
            self.inside(lambda: None)
        except IsolationError as e:
            return str(e)
        return None

    def reserve(self, n: int) -> list[int]:
        """``n`` free ports of this machine's loopback, held (bound, not listening) until :meth:`close`."""
        ports: list[int] = []
        while len(ports) < n:
            v4 = _bound(socket.AF_INET, "127.0.0.1", 0)
            port = v4.getsockname()[1]
            try:
                held = [v4, _bound(socket.AF_INET6, "::1", port)]
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    v4.close()
                    continue
                held = [v4]  # no IPv6 loopback here
            with self._lock:
                self._reserved[port] = held
            ports.append(port)
        return ports

    def relay(self, port: int, pid: int | None = None) -> None:
        """Relay ``port`` of this machine's loopback to ``port`` inside; with ``pid``, only while that process lives.

        Raises:
            ClusterError: the keeper refused or is gone.
        """
        with self._lock:
            if self._closed:
                raise ClusterError("the cluster's network namespace is closed")
            listeners = [_bound(s.family, s.getsockname()[0], port) for s in self._reserved[port]]
            for listener in listeners:
                listener.listen(128)
            fds = [s.fileno() for s in listeners]
            words = f"relay {port}"
            pidfd = None
            if pid is not None:
                try:
                    pidfd = os.pidfd_open(pid)
                except ProcessLookupError:
                    pass  # already gone: nothing listens, as for a dead worker
                else:
                    fds.append(pidfd)
                    words += " pidfd"
            try:
                socket.send_fds(self._control, [words.encode("ascii")], fds)
                answer = self._control.recv(512).decode("ascii", "replace")
            except OSError as e:
                answer = f"error the namespace keeper is gone ({e})"
            finally:
                for listener in listeners:
                    listener.close()
                if pidfd is not None:
                    os.close(pidfd)
        if answer != "ok":
            raise ClusterError(f"cannot relay port {port} into the cluster's network namespace: {answer.removeprefix('error ')}")

    def release(self, ports: Sequence[int]) -> None:
        """Stop relaying ``ports`` and free them on this machine's loopback (a cluster closed)."""
        with self._lock:
            if self._closed:
                return
            for port in ports:
                with contextlib.suppress(OSError):
                    socket.send_fds(self._control, [f"relay {port}".encode("ascii")], [])  # no listeners: refused from now on
                    self._control.recv(512)
                for s in self._reserved.pop(port, []):
                    s.close()

    @property
    def alive(self) -> bool:
        """Whether the keeper still runs and the namespace was not closed."""
        return not self._closed and self._keeper.poll() is None

    def close(self) -> None:
        """Stop the keeper (its relays close) and free the reserved ports.  Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._control.close()
            for held in self._reserved.values():
                for s in held:
                    s.close()
            self._reserved.clear()
        for fd in (self._net, self._userns):
            if fd is not None:
                os.close(fd)
        try:
            self._keeper.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._keeper.kill()
            self._keeper.wait()


def _bound(family: int, host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` with ``SO_REUSEPORT`` (so only this user can bind the port beside it)."""
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((host, port))
    except BaseException:
        s.close()
        raise
    return s


_shared: list[Namespace] = []
_shared_lock = threading.Lock()


@atexit.register
def _close_shared() -> None:
    with _shared_lock:
        for namespace in _shared:
            namespace.close()
        _shared.clear()


def shared(spawn: Spawn) -> Namespace:
    """The namespace of this process's local clusters, started (by ``spawn``) on first use or when its keeper died.

    Raises:
        IsolationError: the kernel refused the namespace.
    """
    with _shared_lock:
        if _shared and _shared[0].alive:
            return _shared[0]
        if _shared:
            _shared.pop().close()
        namespace = Namespace.start(spawn)
        _shared.append(namespace)
        return namespace
