"""The client as the master (``client_master=True``): an in-process server for the spec's ``client`` task.

By default a run's session talks gRPC to task 0, the master, which receives every
fed byte and forwards the other tasks' shards.  When the workers were started
with a spec that also names the client — a job called ``client`` with one
address — the client can start a ``tf.distribute.Server`` for that task in its
own process and use it as the master: the session then reaches its master in
process (no gRPC hop, no serialization of the feeds), and each worker fetches
its shards from the client directly.

The server listens on the port of the spec's ``client`` address, on **every
interface** (TensorFlow binds ``0.0.0.0``) with no authentication, like a
worker: whoever reaches that port can run any operation in the client's process.
A ``LocalCluster`` that isolates its workers (``isolate=``) starts this server
from a thread inside the workers' network namespace (see ``_netns``), where
``0.0.0.0`` is that namespace's loopback.  TensorFlow cannot stop an in-process
server (``TF_ServerStop`` is unimplemented, and the server is leaked on
purpose), so when the last cluster using it closes, :func:`release` shuts its
listening socket down: the port refuses connections from then on, and that
address cannot be served again by this process (TensorFlow keeps the old
server's master registered under it).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .._base.errors import ClusterError
from .._base.log import CLUSTER
from .network import network_interfaces
from .spec import CLIENT_JOB, split_address
from .worker import check_port_free

T = TypeVar("T")

_servers: dict[
    str, tuple[dict[str, list[str]], Any, int]
] = {}  # client address → (spec it serves, its server, clusters using it)
_stopped: set[str] = set()  # addresses whose server was released: TensorFlow cannot serve them again in this process
_lock = threading.Lock()


def client_address(spec: Mapping[str, list[str]]) -> str:
    """The address of the spec's client task.

    Raises:
        ClusterError: the spec has no ``client`` job, or one with other than one address.

    Example:
        >>> client_address({"local": ["localhost:2222"], "client": ["localhost:2230"]})
        'localhost:2230'
    """
    addresses = spec.get(CLIENT_JOB)
    if addresses is None or len(addresses) != 1:
        got = "no 'client' job" if addresses is None else f"a 'client' job of {len(addresses)} addresses"
        raise ClusterError(
            f"client_master=True needs the client's task in the cluster spec — a job 'client' with one address, "
            f'e.g. {{"local": ["host1:2222"], "client": ["myhost:2230"]}}, which the workers were started with too — '
            f"but the spec has {got}"
        )
    return addresses[0]


def _here(fn: Callable[[], T]) -> T:
    return fn()


def serve(spec: Mapping[str, list[str]], *, inside: Callable[[Callable[[], Any]], Any] = _here, exposed: bool = True) -> Any:
    """The in-process server of the spec's client task, shared by the open clusters of the same spec.

    Each call must be paired with one :func:`release`.  ``inside(make)`` runs ``make`` where the
    server must listen (a thread in the workers' network namespace; by default here), and
    ``exposed`` says whether that place is on the machine's network (it warns then).

    Raises:
        ClusterError: no client task in the spec, its port is taken, this process already serves that
            address with another spec (TensorFlow cannot stop a server to start another), or served it
            for a cluster that closed.
    """
    address = client_address(spec)
    where = f"/job:{CLIENT_JOB}/task:0"
    _, port = split_address(address, where=where)
    wanted = {job: list(addresses) for job, addresses in spec.items()}
    with _lock:
        found = _servers.get(address)
        if found is not None:
            if found[0] != wanted:
                raise ClusterError(
                    f"client_master=True: this process already serves {where} on {address} for the cluster "
                    f"{found[0]!r}; TensorFlow cannot stop that server, so another spec needs another client port"
                )
            _servers[address] = (found[0], found[1], found[2] + 1)
            return found[1]
        if address in _stopped:
            raise ClusterError(
                f"client_master=True: this process served {where} on {address} for a cluster that closed, and TensorFlow "
                "cannot serve one address twice in a process; give the spec's client task another port"
            )

        def make() -> Any:
            check_port_free(port, where=where)
            import tensorflow as tf

            try:
                return tf.distribute.Server(tf.train.ClusterSpec(wanted), job_name=CLIENT_JOB, task_index=0, start=True)
            except tf.errors.OpError as e:
                raise ClusterError(
                    f"{where}: the client's server could not start on {address}: {e.message.splitlines()[0]}"
                ) from None

        server = inside(make)
        _servers[address] = (wanted, server, 1)
    interfaces = network_interfaces() if exposed else ()
    CLUSTER.info("the client serves %s on port %d as the master (until its cluster closes)", where, port)
    if interfaces:
        CLUSTER.warning(
            "client_master=True: port %d of this process is open on every interface (%s) with no authentication until "
            "its cluster closes: admit only the workers with a firewall (docs/security.md)",
            port,
            ", ".join(interfaces),
        )
    return server


def used(port: int) -> bool:
    """Whether this process serves, or served, a client task on ``port`` (a new local cluster must pick another)."""
    with _lock:
        return any(address.rpartition(":")[2] == str(port) for address in (*_servers, *_stopped))


def release(spec: Mapping[str, list[str]]) -> None:
    """One cluster of ``spec`` no longer uses the client's server: the last one shuts its listening port down."""
    address = client_address(spec)
    with _lock:
        found = _servers.get(address)
        if found is None:
            return
        if found[2] > 1:
            _servers[address] = (found[0], found[1], found[2] - 1)
            return
        del _servers[address]
        _stopped.add(address)
    port = int(address.rpartition(":")[2])
    shut = _shut_listeners(port)
    CLUSTER.info("the client's server for %s stopped listening on port %d (%d sockets)", CLIENT_JOB, port, shut)


def _shut_listeners(port: int) -> int:
    """Shut down this process's listening TCP sockets on ``port`` (TensorFlow's server then refuses); how many."""
    shut = 0
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return shut
    for name in names:
        try:
            copy = os.dup(int(name))
        except (OSError, ValueError):
            continue  # closed meanwhile
        try:
            s = socket.socket(fileno=copy)
        except OSError:
            os.close(copy)  # not a socket
            continue
        try:
            listening = s.type == socket.SOCK_STREAM and s.family in (socket.AF_INET, socket.AF_INET6)
            if listening and s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) and s.getsockname()[1] == port:
                s.shutdown(socket.SHUT_RDWR)
                shut += 1
        except OSError:
            pass
        finally:
            s.close()  # the duplicate only
    return shut
