"""LocalCluster: worker processes on this machine, started and supervised so that none outlives the client."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from ._cluster import Cluster
from ._deadline import check_timeout
from ._errors import ClusterError
from ._log import CLUSTER
from ._native import kernels
from ._network import network_interfaces
from ._spec import CLIENT_JOB, validate_spec
from ._task import Task
from ._worker import PARENT_ENV

_live: weakref.WeakSet[LocalCluster] = weakref.WeakSet()
_warned_network = False  # LocalCluster warns once per process that its workers are reachable from the network


@atexit.register
def _stop_all() -> None:
    for cluster in list(_live):
        cluster.close()


class _Spawner:
    """One long-lived thread that starts every worker process.

    A worker asks the kernel for SIGTERM when its parent dies (PR_SET_PDEATHSIG);
    the kernel sends it when the spawning *thread* exits, so spawn from a thread
    that lives as long as the process.
    """

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[Any]]] = queue.Queue()
        threading.Thread(target=self._serve, name="tfmapreduce-spawner", daemon=True).start()

    def _serve(self) -> None:
        while True:
            fn, reply = self._jobs.get()
            try:
                reply.put((True, fn()))
            except BaseException as e:  # handed back to the caller
                reply.put((False, e))

    def call(self, fn: Callable[[], Any]) -> Any:
        reply: queue.Queue[Any] = queue.Queue()
        self._jobs.put((fn, reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        # PR_SET_PDEATHSIG with SIGKILL: a SIGTERM would wait, pending, in a worker that is stopped (SIGSTOP)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


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


class LocalCluster(Cluster):
    """Start ``workers`` worker processes on free ports of this machine; stop them on close.

    The workers start in parallel and the constructor returns once every one
    accepts connections.  No worker outlives its client: they stop on
    :meth:`close` (or the end of the ``with`` block), on interpreter exit, and
    within milliseconds if the client process is killed.

    **Security:** the spec names ``localhost``, but TensorFlow's server listens on
    *all* interfaces (``0.0.0.0``, hard-coded in TensorFlow) and has no
    authentication: while they run, anyone who can reach this machine's network
    address and the workers' ports can run any operation as your user.  By default
    (``allow_network=True``) the workers start anyway and a warning is logged once
    per process (logger ``tfmapreduce.cluster``) when the machine has a network
    interface; with ``allow_network=False`` they start only on a machine (or in a
    network namespace) that has nothing but loopback.  TensorFlow offers no way to
    bind loopback only; see the Security page for firewalls and ``unshare -rn``.

    Args:
        workers: how many worker processes (tasks) to start.
        job: the job name of the tasks.
        cpu_devices: CPU devices each worker exposes (``CPU:0`` .. ``CPU:n-1``),
            to exercise placement over several devices per task without GPUs.
        startup_timeout: seconds to wait for every worker to accept connections.
        allow_network: start the workers even though this machine has a network
            interface other than loopback (they are then reachable from it).
        client_master: give the spec a ``client`` task on one more free port, start the
            workers with it, and make this process's own server for it the master of every
            run (see :meth:`Cluster.from_spec`).  TensorFlow cannot stop that server: its port
            stays bound until this process exits, after the workers have stopped.

    Raises:
        ClusterError: a worker failed to start in time (its log is quoted), or
            ``allow_network=False`` on a machine with a network interface.

    Example:
        >>> with LocalCluster(workers=2, job="doc") as local:
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
        exposed = network_interfaces()
        if exposed and not allow_network:
            raise ClusterError(
                f"LocalCluster(allow_network=False): this machine is on a network ({', '.join(exposed)}) and TensorFlow's "
                "server listens on all interfaces with no authentication, so the workers would be reachable from it; "
                "run the program where only loopback exists (e.g. unshare -rn, see docs/security.md) or pass allow_network=True"
            )
        self._allow_network = allow_network
        started = time.monotonic()
        self._processes: list[subprocess.Popen[bytes]] = []
        self._job, self._cpu_devices, self._startup_timeout = job, cpu_devices, startup_timeout
        self._logdir = tempfile.mkdtemp(prefix="tfmapreduce-")
        super().__init__({})
        _live.add(self)
        try:
            for attempt in range(3):
                ports = _free_ports(workers + client_master)
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
                self.serve_client()
        except BaseException:
            self.close()
            raise
        CLUSTER.info(
            "LocalCluster started %d workers of job %r on %s in %.1f s (pids %s)",
            workers,
            job,
            ", ".join(spec[job]),
            time.monotonic() - started,
            ", ".join(map(str, self.pids)),
        )
        global _warned_network
        if exposed and not _warned_network:
            _warned_network = True
            CLUSTER.warning(
                "LocalCluster workers listen on every interface of this machine (%s) with no authentication: while they "
                "run, anyone who reaches ports %s can run code as this user; see docs/security.md "
                "(warned once per process)",
                ", ".join(exposed),
                ", ".join(a.rpartition(":")[2] for a in spec[job]),
            )

    def _spawn(self, spec: dict[str, list[str]], job: str, task: int, cpu_devices: int) -> subprocess.Popen[bytes]:
        global _spawner
        with _spawner_lock:
            if _spawner is None:
                _spawner = _Spawner()
        argv = [sys.executable, "-m", "tfmapreduce", "worker", "--cluster", json.dumps(spec)]
        argv += ["--job", job, "--task", str(task), "--cpu-devices", str(cpu_devices)]
        argv += ["--allow-network"] if self._allow_network else []
        env = dict(os.environ, **{PARENT_ENV: str(os.getpid())})
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        log = open(os.path.join(self._logdir, f"task{task}.log"), "wb")  # noqa: SIM115 - handed to the child
        try:
            process: subprocess.Popen[bytes] = _spawner.call(
                lambda: subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    preexec_fn=_die_with_parent,
                    start_new_session=True,
                )
            )
            return process
        finally:
            log.close()

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
        shutil.rmtree(self._logdir, ignore_errors=True)
        _live.discard(self)
