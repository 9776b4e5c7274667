"""The worker process: one ``tf.distribute.Server`` for one task, served until SIGTERM or SIGINT.

This is the lesson's ``create_worker.py`` done properly: validated arguments, one
ready line naming the task, its address and its devices, and a clean exit.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from typing import TextIO

from .._base.errors import ClusterError
from .._base.log import WORKER
from .._base.quiet import import_tensorflow_without_keras
from .._base.task import Task
from .network import exposure, refusal
from .spec import CLIENT_JOB, split_address, task_address, validate_spec

PARENT_ENV = "TFMAPREDUCE_PARENT_PID"
"""Set by LocalCluster: the worker exits when this process is no longer its parent."""


def _exit_now(signum: int, frame: object) -> None:
    os._exit(0)  # server.join() blocks in C++, so exit without unwinding Python


def check_port_free(port: int, *, where: str) -> None:
    """Raise ClusterError if something on this machine already listens on ``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a killed worker's TIME_WAIT connections do not hold the port
        try:
            s.bind(("", port))
        except OSError:
            raise ClusterError(f"{where}: port {port} is already in use on this machine; pick a free port in the spec") from None


def serve(
    spec: object, job: str, task: int, *, cpu_devices: int = 1, allow_network: bool = False, out: TextIO = sys.stdout
) -> None:
    """Start the server for ``/job:JOB/task:TASK`` of ``spec`` and serve forever.

    TensorFlow's server listens on every local address without authentication, so on a
    machine with an interface that can deliver to one of them (see :func:`exposure`) it
    starts only when ``allow_network`` is true.  The worker publishes its TensorFlow version for
    clients to check (see ``_versions``) and prints one ready line on ``out``.

    Raises:
        ClusterError: the spec, job, task or address is wrong, the port is taken, or the
            machine is on a network and ``allow_network`` is false.
    """
    signal.signal(signal.SIGTERM, _exit_now)
    signal.signal(signal.SIGINT, _exit_now)
    cluster = validate_spec(spec)
    if job == CLIENT_JOB:
        raise ClusterError(
            f"job {CLIENT_JOB!r} is the client's own task (its in-process master, client_master=True), not a worker: "
            "start workers for the spec's other jobs"
        )
    address = task_address(cluster, job, task)
    where = f"/job:{job}/task:{task}"
    _, port = split_address(address, where=where)
    if cpu_devices < 1:
        raise ClusterError(f"--cpu-devices must be at least 1, got {cpu_devices}")
    check_port_free(port, where=where)
    exposed = exposure()
    if exposed and not allow_network:
        raise ClusterError(refusal(exposed, port))
    if exposed:
        WORKER.warning(
            "%s: port %d is open on every interface (%s) with no authentication: admit only the client and the other "
            "tasks with a firewall (docs/security.md)",
            where,
            port,
            ", ".join(exposed),
        )

    import_tensorflow_without_keras()
    import tensorflow as tf

    from .._native.loader import kernels
    from .versions import publish

    kernels()  # the native kernels, registered before any graph arrives (built first if need be; see _native)

    config = tf.compat.v1.ConfigProto(device_count={"CPU": cpu_devices})
    try:
        server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=job, task_index=task, config=config, start=True)
    except tf.errors.OpError as e:
        raise ClusterError(f"{where}: the server could not start on {address}: {e.message.splitlines()[0]}") from None
    probe = tf.compat.v1.ConfigProto(device_filters=[where], operation_timeout_in_ms=30_000)
    with tf.compat.v1.Session(server.target, config=probe) as session:
        devices = [d.name for d in session.list_devices() if d.name.startswith(f"/job:{job}/replica:0/task:{task}/")]
    publish(server.target, Task(job, task))
    WORKER.info("%s serves on %s with TensorFlow %s and %d devices", where, address, tf.__version__, len(devices))
    print(
        f"tfmapreduce worker {where} ready on {address} (all interfaces, no authentication) "
        f"with TensorFlow {tf.__version__} and devices: {', '.join(devices)}",
        file=out,
        flush=True,
    )

    parent = os.environ.get(PARENT_ENV)
    while True:
        time.sleep(0.5)
        if parent is not None and os.getppid() != int(parent):
            os._exit(0)  # the client that started us is gone
