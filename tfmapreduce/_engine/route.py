"""Routing: which shards travel through same-host shared memory (see ``_shm``) and which through gRPC feeds.

Whether a task can open the client's files is asked of the task itself once per
cluster (:func:`visible`): it reads a random token from a staged file; a task that
cannot (another host, another user, a client that is not dumpable) is fed through
gRPC instead, and the plan says so.
"""

from __future__ import annotations

import functools
import os
import secrets
import time
from collections.abc import Sequence
from typing import cast

import attrs
import tensorflow as tf

from .._base.errors import ClusterError, JobError
from .._base.plan import Plan
from .._base.state import ClusterVar, Memo
from .._base.task import Task
from .._cluster.cluster import Cluster
from .._io.shm import MIN_BYTES, Stageable, Staging, default_mechanism
from .._io.source import implements

PROBE_TIMEOUT = 10.0
"""Seconds a task gets to answer whether it sees the client's files."""

_SEES = ClusterVar("tasks that open the client's files", lambda cluster: Memo[Task, bool]())


def _identity(stat_line: bytes) -> tuple[bytes, bytes]:
    """(pid and command, start time) from a ``/proc/<pid>/stat`` line: what names one process for its whole life."""
    head, _, rest = stat_line.rpartition(b")")
    fields = rest.split()
    return head, fields[19] if len(fields) > 19 else b""


def _probe(cluster: Cluster, task: Task, mechanism: str, timeout: float) -> bool:
    """Whether ``task`` reads back a random token the client staged, asked within ``timeout`` seconds.

    With memfd paths the task first reads ``/proc/<client pid>/stat``: only when it names this very
    process (same pid, command and start time: not another pid namespace or host) does it open the
    token's file, so a probe never opens another process's descriptor (which could be a pipe).
    """
    token = secrets.token_bytes(16)
    end = time.monotonic() + min(timeout, PROBE_TIMEOUT)
    graph = tf.Graph()
    with graph.as_default(), tf.device(f"{task}/device:CPU:0"):
        path = tf.compat.v1.placeholder(tf.string, (), name="probe_path")
        fetch = tf.io.read_file(path)
    try:
        if mechanism == "memfd":
            with open(f"/proc/{os.getpid()}/stat", "rb") as f:
                mine = _identity(f.read())
            seen = cluster.run(
                graph, fetch, {path: f"/proc/{os.getpid()}/stat"}, tasks=[task], timeout=_left(end), hang_check=True
            )
            if _identity(bytes(seen)) != mine:
                return False
        with Staging(mechanism) as staging:
            got = cluster.run(graph, fetch, {path: staging.write(token)}, tasks=[task], timeout=_left(end), hang_check=True)
    except JobError:  # NotFound, PermissionDenied: the task cannot open the client's files
        return False
    finally:  # a task that is down or hung raises its named error: the run would fail on it anyway
        cluster.forget(graph)
    return bytes(got) == token


def _left(end: float) -> float:
    return max(0.001, end - time.monotonic())


def visible(cluster: Cluster, task: Task, mechanism: str | None = None, timeout: float = PROBE_TIMEOUT) -> bool:
    """Whether ``task`` of ``cluster`` opens the files this client stages (asked of the task once per cluster).

    Raises:
        WorkerTimeoutError, WorkerUnavailableError: the task did not answer within ``timeout`` (named).
    """
    mechanism = mechanism or default_mechanism()
    return cluster.state(_SEES).get(task, lambda: _probe(cluster, task, mechanism, timeout))


def route(plan: Plan, srcs: Sequence[object], cluster: Cluster, transfer: str | None, timeout: float = PROBE_TIMEOUT) -> Plan:
    """``plan`` with each shard's path: ``"shm"`` when a host input of it is big enough (any size for
    ``transfer="shm"``) and its task sees the client's files, else ``"feed"``; unchanged when no input is
    shipped from the host (resident data).

    Raises:
        ClusterError: ``transfer="shm"`` and a shard's task cannot open the client's files.
    """
    stageable = [cast(Stageable, s) for s in srcs if implements(s, Stageable)]
    if not stageable:
        return plan
    transfer = transfer or "auto"
    min_bytes = 1 if transfer == "shm" else MIN_BYTES
    paths = []
    for shard in plan.shards:
        path = "feed"
        if transfer != "feed" and shard.rows and any(s.stageable(shard, min_bytes) for s in stageable):
            if visible(cluster, shard.task, timeout=timeout):
                path = "shm"
            elif transfer == "shm":
                raise ClusterError(
                    f"transfer='shm': task {shard.task} at {cluster.address(shard.task)} cannot open this client's "
                    "shared-memory files (it runs on another host or as another user, or this process is not dumpable); "
                    "pass transfer='auto' to feed its shards through gRPC instead"
                )
        paths.append(path)
    if plan.measured is not None:  # sizes="auto": a plan of its own (its speeds are not part of its identity)
        return _with_paths(plan, tuple(paths))
    return _remembered(plan, tuple(paths))


def _with_paths(plan: Plan, paths: tuple[str, ...]) -> Plan:
    return attrs.evolve(plan, shards=tuple(attrs.evolve(s, path=p) for s, p in zip(plan.shards, paths, strict=True)))


_remembered = functools.lru_cache(maxsize=256)(_with_paths)
