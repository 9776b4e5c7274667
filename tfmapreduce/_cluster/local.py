"""LocalCluster: worker processes on this machine, started and supervised so that none outlives the client."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import weakref
from typing import Any

from .._base.deadline import check_timeout
from .._base.errors import ClusterError
from .._base.log import CLUSTER
from .._base.task import Task
from .._native.loader import kernels
from . import client as _client
from . import logdir as _logdir
from . import spawn as _spawn
from .cluster import Cluster
from .netns import IsolationError, Namespace, shared
from .network import network_interfaces
from .spec import CLIENT_JOB, validate_spec
from .worker import PARENT_ENV

_live: weakref.WeakSet[LocalCluster] = weakref.WeakSet()
_warned_network = False  # LocalCluster warns once per process that its workers are reachable from the network


@atexit.register
def _stop_all() -> None:
    for cluster in list(_live):
        cluster.close()


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


_ISOLATE = ("auto", True, False)


def _spawn_keeper(argv: list[str], fds: Any) -> subprocess.Popen[bytes]:
    return _spawn.start(argv, log=os.devnull, pass_fds=fds)  # it answers on its control socket


class LocalCluster(Cluster):
    """Start ``workers`` worker processes on free ports of this machine; stop them on close.

    The workers start in parallel and the constructor returns once every one
    accepts connections.  No worker outlives its client: they stop on
    [`close`][tfmapreduce.LocalCluster.close] (or the end of the ``with`` block), on interpreter exit, and
    within milliseconds if the client process is killed.

    **Security:** TensorFlow's server listens on *all* interfaces (``0.0.0.0``,
    hard-coded in TensorFlow) and has no authentication.  So by default
    (``isolate="auto"``) the workers start in a network namespace of their own
    that has only its loopback, and this process reaches them through relays on
    its own loopback that admit only connections from this user's sockets:
    nothing on the network can reach them.  Where the operating system refuses a
    namespace (see [`isolation`][tfmapreduce.LocalCluster.isolation] and ``repr(cluster)``), they start as
    before, reachable from the network, and a warning is logged once per process
    (logger ``tfmapreduce.cluster``) when the machine has a network interface.
    See the Security page.

    Args:
        workers: how many worker processes (tasks) to start.
        job: the job name of the tasks.
        cpu_devices: CPU devices each worker exposes (``CPU:0`` .. ``CPU:n-1``),
            to exercise placement over several devices per task without GPUs.
        startup_timeout: seconds to wait for every worker to accept connections.
        allow_network: with ``False``, refuse to start workers that would be reachable
            from a network interface of this machine (not isolated, and the machine has one).
        client_master: give the spec a ``client`` task on one more free port, start the
            workers with it, and make this process's own server for it the master of every
            run (see [`Cluster.from_spec`][tfmapreduce.Cluster.from_spec]).  Isolated, that server listens inside the
            workers' namespace too; either way its port stops listening when the cluster
            closes (TensorFlow cannot stop the server itself, so that address is not served
            again by this process).
        isolate: ``"auto"`` (default): the workers in a network namespace of their own where
            the operating system permits, else reachable as before (with the warning);
            ``True``: require the namespace; ``False``: never (workers on the machine's
            network, e.g. to be reached from elsewhere through a firewall).

    Raises:
        ClusterError: a worker failed to start in time (its log is quoted),
            ``isolate=True`` where no namespace can be made (the message says why), or
            ``allow_network=False`` when the workers would be reachable from a network interface.

    Examples:
        >>> with tmr.LocalCluster(workers=2, job="doc") as local:
        ...     print(local.devices)
        ('/job:doc/replica:0/task:0/device:CPU:0', '/job:doc/replica:0/task:1/device:CPU:0')
    """

    def __init__(
        self,
        workers: int = 2,
        *,
        job: str = "local",
        cpu_devices: int = 1,
        startup_timeout: float = 60.0,
        allow_network: bool = True,
        client_master: bool = False,
        isolate: bool | str = "auto",
    ):
        for name, value in (("workers", workers), ("cpu_devices", cpu_devices)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        startup_timeout = check_timeout(startup_timeout, argument="startup_timeout")
        validate_spec({job: ["localhost:1"]})  # checks the job name
        if not isinstance(client_master, bool):
            raise TypeError(f"client_master must be True or False, got {type(client_master).__name__} {client_master!r}")
        if job == CLIENT_JOB:
            raise ValueError(f"job must not be {CLIENT_JOB!r}: that name is the client's own task (client_master=True)")
        if not isinstance(allow_network, bool):
            raise TypeError(f"allow_network must be True or False, got {type(allow_network).__name__} {allow_network!r}")
        if not any(isolate is choice for choice in _ISOLATE):
            raise TypeError(f"isolate must be 'auto', True or False, got {type(isolate).__name__} {isolate!r}")
        started = time.monotonic()
        self._processes: list[subprocess.Popen[bytes]] = []
        self._job, self._cpu_devices, self._startup_timeout = job, cpu_devices, startup_timeout
        self._namespace: Namespace | None = None
        self._reserved: list[int] = []  # ports held on this machine's loopback for the relays into the namespace
        self._isolation = "not isolated (isolate=False)"
        self._logdir = _logdir.make()
        super().__init__({})
        _live.add(self)
        try:
            exposed = self._isolate(isolate, client_master=client_master)
            if exposed and not allow_network:
                raise ClusterError(
                    f"LocalCluster(allow_network=False): the workers would be {self._isolation} and this machine is on a "
                    f"network ({', '.join(exposed)}); TensorFlow's server listens on all interfaces with no authentication, "
                    "so they would be reachable from it. Run where network namespaces are permitted (isolate='auto'), "
                    "or where only loopback exists (e.g. unshare -rn, see docs/security.md), or pass allow_network=True"
                )
            self._allow_network = allow_network
            for attempt in range(3):
                ports = self._ports(workers + client_master)
                spec = {job: [f"localhost:{p}" for p in ports[:workers]]}
                if client_master:
                    spec[CLIENT_JOB] = [f"localhost:{ports[workers]}"]
                kernels()  # built once here, not by each worker as it starts (see _native)
                self._processes = [self._spawn(spec, job, i, cpu_devices) for i in range(workers)]
                if self._wait_ready(startup_timeout, retry=attempt < 2):
                    break
                self._stop_workers()
            self._spec = spec
            if client_master:
                if self._namespace is not None:
                    self._namespace.relay(ports[workers])  # this process's own check that its server listens
                self.serve_client()
        except BaseException:
            self.close()
            raise
        CLUSTER.info(
            "LocalCluster started %d workers of job %r on %s in %.1f s (pids %s), %s",
            workers,
            job,
            ", ".join(spec[job]),
            time.monotonic() - started,
            ", ".join(map(str, self.pids)),
            self._isolation,
        )
        global _warned_network
        if exposed and not _warned_network:
            _warned_network = True
            CLUSTER.warning(
                "LocalCluster workers listen on every interface of this machine (%s) with no authentication (%s): while "
                "they run, anyone who reaches ports %s can run code as this user; see docs/security.md "
                "(warned once per process)",
                ", ".join(exposed),
                self._isolation,
                ", ".join(a.rpartition(":")[2] for a in spec[job]),
            )

    def _isolate(self, isolate: bool | str, *, client_master: bool) -> tuple[str, ...]:
        """Make the workers' namespace as ``isolate`` asks; the network interfaces they will then be reachable from."""
        if isolate is False:
            return network_interfaces()
        try:
            namespace = shared(_spawn_keeper)
            if client_master:
                why = namespace.can_enter()
                if why is not None:
                    raise IsolationError(f"client_master=True needs the client's own server inside too, but {why}")
        except IsolationError as e:
            if isolate is True:
                raise ClusterError(
                    f"LocalCluster(isolate=True): {e}; pass isolate='auto' to start the workers without a namespace "
                    "(reachable from the network) where none can be made"
                ) from None
            self._isolation = f"not isolated ({e})"
            return network_interfaces()
        self._namespace = namespace
        kind = "a user and network namespace" if namespace.user else "a network namespace"
        self._isolation = f"isolated in {kind} (loopback only; relays admit uid {os.geteuid()})"
        return ()

    def _ports(self, n: int) -> list[int]:
        """``n`` free ports, the last one never a port this process served a client task on."""
        while True:
            ports = self._namespace.reserve(n) if self._namespace is not None else _free_ports(n)
            if self._namespace is not None:
                self._reserved += ports
            if not _client.used(ports[-1]):
                return ports

    @property
    def isolation(self) -> str:
        """How the workers are kept from the network: ``"isolated in a network namespace (...)"``, or
        ``"not isolated (why)"`` (also part of ``repr(cluster)``)."""
        return self._isolation

    @property
    def isolated(self) -> bool:
        """Whether the workers run in a network namespace of their own (see [`isolation`][tfmapreduce.LocalCluster.isolation])."""
        return self._namespace is not None

    def serve_client(self) -> None:
        """Make this process's server for the spec's ``client`` task the master; isolated, it listens inside the namespace."""
        if self._client is not None:
            return
        namespace = self._namespace
        place = {} if namespace is None else {"inside": namespace.inside, "exposed": False}
        server = _client.serve(self._spec, **place)  # type: ignore[arg-type]
        with self._lock:
            self._client = server
        self.drop_sessions()

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, {self._isolation})"

    def _spawn(self, spec: dict[str, list[str]], job: str, task: int, cpu_devices: int) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "tfmapreduce", "worker", "--cluster", json.dumps(spec)]
        argv += ["--job", job, "--task", str(task), "--cpu-devices", str(cpu_devices)]
        argv += ["--allow-network"] if self._allow_network else []
        env = dict(os.environ, **{PARENT_ENV: str(os.getpid())})
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        namespace = self._namespace
        log = os.path.join(self._logdir, f"task{task}.log")
        process = _spawn.start(argv, log=log, env=env, before=None if namespace is None else namespace.join)
        if namespace is not None:
            try:
                namespace.relay(int(spec[job][task].rpartition(":")[2]), process.pid)
            except BaseException:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                raise
        return process

    def _log(self, task: int) -> str:
        with open(os.path.join(self._logdir, f"task{task}.log"), encoding="utf-8", errors="replace") as f:
            return f.read()

    def restart(self, task: int) -> None:
        """Start task ``task``'s worker again on its port (stopping the old process if it still runs), and use it again.

        Its resident shards are gone with the old process: the next run rebuilds
        them from their lineage, or raises ``ShardLostError``.

        Raises:
            ClusterError: the worker did not come back within ``startup_timeout``.
        """
        if isinstance(task, bool) or not isinstance(task, int) or not 0 <= task < len(self._processes):
            raise ValueError(f"task must be a task index from 0 to {len(self._processes) - 1}, got {task!r}")
        self.check_open()
        old = self._processes[task]
        if old.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(old.pid, signal.SIGKILL)
        old.wait()
        self._processes[task] = self._spawn(self._spec, self._job, task, self._cpu_devices)
        self._wait_ready(self._startup_timeout, retry=False, tasks={task})
        self.drop_sessions()  # sessions through the old process are dead
        self.mark_live(Task(self._job, task))

    def _wait_ready(self, timeout: float, *, retry: bool, tasks: set[int] | None = None) -> bool:
        """True once the workers (all, or ``tasks``) are ready; False if one lost its port to a race (and ``retry``)."""
        deadline = time.monotonic() + timeout
        pending = set(range(len(self._processes))) if tasks is None else set(tasks)
        while pending:
            for task in sorted(pending):
                code = self._processes[task].poll()
                log = self._log(task)
                if code is not None:
                    if retry and "already in use" in log:
                        return False
                    tail = "\n    ".join(log.strip().splitlines()[-5:])
                    raise ClusterError(f"worker task {task} exited with code {code} while starting:\n    {tail}")
                if " ready on " in log:
                    pending.discard(task)
            if pending and time.monotonic() > deadline:
                raise ClusterError(
                    f"worker tasks {sorted(pending)} did not become ready within startup_timeout={timeout:g} s; "
                    "the machine may be overloaded: pass a larger startup_timeout"
                )
            if pending:
                time.sleep(0.05)
        return True

    @property
    def pids(self) -> tuple[int, ...]:
        """The process ids of the workers (one per task)."""
        return tuple(p.pid for p in self._processes)

    def _process(self, task: Task) -> int | None:
        return self._processes[task.index].pid if task.job == self._job and task.index < len(self._processes) else None

    def _stop_workers(self) -> None:
        for p in self._processes:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                    os.killpg(p.pid, signal.SIGCONT)  # a stopped worker must wake to die
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 5.0
        for p in self._processes:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self._processes = []

    def close(self) -> None:
        """Close the sessions, stop the workers and free their ports.  Safe to call twice."""
        super().close()
        if self._processes:
            CLUSTER.info("LocalCluster stopping %d workers (pids %s)", len(self._processes), ", ".join(map(str, self.pids)))
        self._stop_workers()
        if self._namespace is not None:
            self._namespace.release(self._reserved)
            self._reserved = []
        shutil.rmtree(self._logdir, ignore_errors=True)
        _live.discard(self)
