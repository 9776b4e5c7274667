"""Asking tasks whether they are there: a TCP connect (dead or not), and a device listing with its own deadline (hung
or not).  TensorFlow's errors become WorkerTimeoutError / WorkerUnavailableError naming the task."""

from __future__ import annotations

import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import tensorflow as tf

from .._base.errors import ClusterError, WorkerTimeoutError, WorkerUnavailableError
from .._base.task import Task
from .closing import close_in_background
from .sessions import session_config

PROBE_TIMEOUT = 1.0
"""Seconds each task gets to answer when a run timed out and the culprit is sought."""


def check_listening(addresses: dict[Task, str], timeout: float = PROBE_TIMEOUT) -> None:
    """Raise WorkerUnavailableError naming the first task whose address refuses a TCP connection.

    A new session waits until its deadline for a task that is dead (gRPC keeps reconnecting),
    while a refused connection says at once that nothing listens there.  A task that does not
    answer at all (a stopped process still accepts; a host that drops packets times out) passes:
    the session's deadline decides about it.
    """
    for task, address in addresses.items():
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=min(timeout, PROBE_TIMEOUT)).close()
        except TimeoutError:
            continue
        except OSError as e:
            raise WorkerUnavailableError(
                f"task {task} at {address} is unreachable (cannot connect: {e.strerror or e}): start its worker "
                f"(tfmapreduce worker --cluster SPEC --job {task.job} --task {task.index}) or fix the address in the spec",
                task=task,
                address=address,
            ) from None


def list_task_devices(address: str, task: Task, timeout: float, *, first: bool = False) -> list[str]:
    """The full device names of ``task``, asked of that task itself.

    ``first``: the cluster's first listing, when another task may already be stopped.  A session asked for its devices
    before its first run is made without its config, so its master would wait for every task of the cluster, the
    stopped one too: a first run of a no-op on the task makes it with its device filter.  (The hang checks of a run
    leave it out: a second round trip would be one more chance for a slow but live task to miss the probe's deadline.)

    Raises:
        WorkerTimeoutError / WorkerUnavailableError: the task does not answer in time.
    """
    return [d.name for d in device_attributes(address, task, timeout, first=first)]


def device_attributes(address: str, task: Task, timeout: float, *, first: bool = False) -> list[Any]:
    """What ``task`` says of each of its devices: TensorFlow's ``DeviceAttributes`` (``name``, ``device_type``,
    ``memory_limit_bytes``: what its allocator may hold), asked of that task itself (``first``: see
    :func:`list_task_devices`).

    Raises:
        WorkerTimeoutError / WorkerUnavailableError: the task does not answer in time.
    """
    prefix = f"/job:{task.job}/replica:0/task:{task.index}/"
    end = time.monotonic() + timeout
    check_listening({task: address}, timeout)
    # A host that drops packets (a cut link) used the whole connect timeout: the session gets what is left of it, so a
    # probe of such a task still ends within ``timeout`` (not twice that).
    left = max(0.001, end - time.monotonic())
    graph = tf.Graph() if first else None
    if graph is not None:
        with graph.as_default(), tf.device(f"/job:{task.job}/task:{task.index}"):
            noop = tf.no_op()
    session = tf.compat.v1.Session(f"grpc://{address}", graph=graph, config=session_config([task], left))
    try:
        if graph is not None:
            session.run(noop)
        return [d for d in session.list_devices() if d.name.startswith(prefix)]
    except tf.errors.DeadlineExceededError:
        raise WorkerTimeoutError(
            f"task {task} at {address} did not answer within {timeout:g} s: the worker is stopped, hung or "
            "overloaded (check that its process is running and not suspended)",
            task=task,
            address=address,
        ) from None
    except tf.errors.OpError as e:
        raise WorkerUnavailableError(
            f"task {task} at {address} is unreachable ({first_line(e)}): start its worker "
            f"(tfmapreduce worker --cluster SPEC --job {task.job} --task {task.index}) or fix the address in the spec",
            task=task,
            address=address,
        ) from None
    finally:
        close_in_background(session)


def probe(
    addresses: dict[Task, str], timeout: float = PROBE_TIMEOUT, *, first: bool = False
) -> dict[Task, list[str] | ClusterError]:
    """Ask every task for its devices at once; each answer is a device list or the error it gave (``first``: see
    :func:`list_task_devices`)."""

    def one(task: Task) -> list[str] | ClusterError:
        try:
            return list_task_devices(addresses[task], task, timeout, first=first)
        except ClusterError as e:
            return e

    if not addresses:
        return {}
    with ThreadPoolExecutor(max_workers=min(32, len(addresses))) as pool:
        return dict(zip(addresses, pool.map(one, addresses), strict=True))


def stopped(pid: int) -> bool | None:
    """Whether process ``pid`` of this machine is stopped (SIGSTOP, job control, a debugger): False where it runs or
    sleeps, None where that cannot be read (no such process, or no ``/proc``).

    Examples:
        >>> import os
        >>> stopped(os.getpid())
        False
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return None


def answering(addresses: dict[Task, str]) -> bool:
    """Whether every task answers a probe (see :func:`probe`) within :data:`PROBE_TIMEOUT`."""
    return not any(isinstance(answer, ClusterError) for answer in probe(addresses).values())


def first_line(error: tf.errors.OpError) -> str:
    """The line of TensorFlow's message that says what went wrong, with the node and task that failed.

    Session errors start with "Graph execution error:" and a Python trace of where
    the node was defined; the cause is the first line after those.
    """
    text = error.message or type(error).__name__
    node = re.search(r"^Node: '([^']+)'", text, re.M)
    task = re.search(r"^From (/job:[^:]+:\d+|/job:\S+):?$", text, re.M)
    skip = ("Graph execution error", "Detected at node", "File ", "Node: ", "From /job:", "[[", "=", "Additional GRPC error")
    noise = ("root error(s) found", "successful operations", "derived errors ignored")
    lines = []
    for line in text.splitlines():
        line = re.sub(r"^(\(\d+\)\s*)?([A-Z_]+:\s+)?", "", line.strip())  # "(0) INVALID_ARGUMENT: " prefixes
        if line and not line.startswith(skip) and not any(n in line for n in noise):
            lines.append(line)
    cause = lines[0] if lines else type(error).__name__
    if node:
        where = f" on {task.group(1).rstrip(':')}" if task else ""
        return f"op {node.group(1)}{where}: {cause}"
    return cause
