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
TensorFlow cannot stop an in-process server (``TF_ServerStop`` is unimplemented,
and the server is leaked on purpose), so the port stays bound until the client's
process exits; a later cluster with the same spec reuses the server.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ._errors import ClusterError
from ._log import CLUSTER
from ._network import network_interfaces
from ._spec import CLIENT_JOB, split_address
from ._worker import check_port_free

_servers: dict[str, tuple[dict[str, list[str]], Any]] = {}  # client address → (spec it serves, its server), for the process
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


def serve(spec: Mapping[str, list[str]]) -> Any:
    """The in-process server of the spec's client task: started once per process, reused by later clusters of the same spec.

    Raises:
        ClusterError: no client task in the spec, its port is taken, or this process already serves that
            address with another spec (TensorFlow cannot stop a server to start another).
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
            return found[1]
        check_port_free(port, where=where)
        import tensorflow as tf

        try:
            server = tf.distribute.Server(tf.train.ClusterSpec(wanted), job_name=CLIENT_JOB, task_index=0, start=True)
        except tf.errors.OpError as e:
            raise ClusterError(
                f"{where}: the client's server could not start on {address}: {e.message.splitlines()[0]}"
            ) from None
        _servers[address] = (wanted, server)
    exposed = network_interfaces()
    CLUSTER.info("the client serves %s on port %d as the master (until this process exits)", where, port)
    if exposed:
        CLUSTER.warning(
            "client_master=True: port %d of this process is open on every interface (%s) with no authentication until "
            "the process exits: admit only the workers with a firewall (docs/security.md)",
            port,
            ", ".join(exposed),
        )
    return server
