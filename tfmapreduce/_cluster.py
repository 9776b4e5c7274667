"""Clusters: who is there, how to reach them, and which devices they really have."""

from __future__ import annotations

import atexit
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

import attrs
import tensorflow as tf

from . import _backend
from ._errors import ClusterError
from ._spec import validate_spec
from ._worker import PARENT_ENV

IDLE_CHECK = 1.0
"""Seconds without a run after which the next run first checks that the master still listens."""


@attrs.define(eq=False)
class _Session:
    """A session kept for one graph, with a callable per (fetches, feeds) it has run."""

    session: tf.compat.v1.Session
    callables: dict[Any, Callable[..., Any]] = attrs.field(factory=dict)


@attrs.define(eq=False)
class Cluster:
    """A running TensorFlow cluster: its spec, its tasks and their devices.

    Build one for workers that already run with :meth:`from_spec`,
    :meth:`from_tf_config` or :meth:`from_resolver`, or start workers on this
    machine with :class:`LocalCluster`.  A cluster is a context manager; closing
    it closes its sessions (and, for a LocalCluster, stops its workers).

    Example:
        >>> c = Cluster.from_spec({"local": ["localhost:2222", "localhost:2223"]})
        >>> c.tasks
        ('/job:local/task:0', '/job:local/task:1')
        >>> c.target
        'grpc://localhost:2222'
    """

    _spec: dict[str, list[str]]
    _devices: tuple[str, ...] | None = None
    _sessions: dict[int, _Session] = attrs.field(factory=dict)
    _closed: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    _last_run: float = 0.0

    @classmethod
    def from_spec(cls, spec: Any) -> Cluster:
        """Describe workers that already run, from a ``{job: [address, ...]}`` dict,
        a ``tf.train.ClusterSpec``, a JSON string or the path of a JSON file.

        Raises:
            ClusterError: the spec is malformed (every problem is listed).
        """
        return cls(validate_spec(spec))

    @classmethod
    def from_tf_config(cls) -> Cluster:
        """Describe the cluster named by the ``TF_CONFIG`` environment variable's ``cluster`` entry.

        Raises:
            ClusterError: ``TF_CONFIG`` is unset or holds no valid cluster.
        """
        text = os.environ.get("TF_CONFIG")
        if not text:
            raise ClusterError('TF_CONFIG is not set; set it to e.g. {"cluster": {"local": ["localhost:2222"]}}')
        try:
            config = json.loads(text)
        except json.JSONDecodeError as e:
            raise ClusterError(f"TF_CONFIG is not valid JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(config, dict) or "cluster" not in config:
            raise ClusterError(f"TF_CONFIG has no 'cluster' entry; got keys {sorted(config) if isinstance(config, dict) else config!r}")
        return cls.from_spec(config["cluster"])

    @classmethod
    def from_resolver(cls, resolver: Any) -> Cluster:
        """Describe the cluster of a ``tf.distribute.cluster_resolver.ClusterResolver`` (TF_CONFIG, Slurm, ...).

        Raises:
            ClusterError: the resolver cannot produce a cluster spec here.
        """
        try:
            spec = resolver.cluster_spec()
        except Exception as e:  # resolvers raise many kinds, e.g. outside a Slurm step
            raise ClusterError(f"{type(resolver).__name__} cannot resolve a cluster here: {e}") from None
        return cls.from_spec(spec)

    @property
    def spec(self) -> dict[str, list[str]]:
        """The cluster spec as a plain dict (a copy)."""
        return {job: list(addresses) for job, addresses in self._spec.items()}

    @property
    def jobs(self) -> tuple[str, ...]:
        """The job names, in spec order."""
        return tuple(self._spec)

    @property
    def tasks(self) -> tuple[str, ...]:
        """Every task as ``/job:NAME/task:I``, job by job."""
        return tuple(f"/job:{job}/task:{i}" for job, addresses in self._spec.items() for i in range(len(addresses)))

    def address(self, task: str) -> str:
        """The ``host:port`` of a task given as ``/job:NAME/task:I``."""
        job, index = task[len("/job:") :].split("/task:")
        return self._spec[job][int(index)]

    @property
    def target(self) -> str:
        """The gRPC target of the master (the first task), e.g. ``grpc://localhost:2222``."""
        return f"grpc://{self.address(self.tasks[0])}"

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def devices(self) -> tuple[str, ...]:
        """The full names of the devices present on every task, asked of the tasks (once, with a bounded wait).

        Raises:
            ClusterError: a task does not answer; the message names its address.
        """
        if self._devices is None:
            self.check_open()
            answers = _backend.probe({t: self.address(t) for t in self.tasks}, timeout=10.0)
            errors = [a for a in answers.values() if isinstance(a, ClusterError)]
            if len(errors) == 1:
                raise errors[0]  # keeps its class (timeout or unavailable) and its .task
            if errors:
                raise ClusterError("cannot list the cluster's devices:\n  " + "\n  ".join(map(str, errors)))
            self._devices = tuple(name for names in answers.values() if isinstance(names, list) for name in names)
        return self._devices

    def check_open(self) -> None:
        """Raise ClusterError if the cluster was closed."""
        if self._closed:
            raise ClusterError(f"{self!r} is closed; open a new cluster (or use it inside its 'with' block)")

    def run(self, graph: tf.Graph, fetches: Any, feed_dict: dict[Any, Any], *, tasks: list[str], timeout: float) -> Any:
        """Run ``fetches`` of ``graph`` as one distributed execution over ``tasks``, with a deadline.

        The session for ``graph`` is opened once and kept until the cluster
        closes or a run on it fails.
        """
        self.check_open()
        used = [self.tasks[0], *tasks]  # the master takes part in every run
        addresses = {t: self.address(t) for t in used}
        key = id(graph)
        feeds = tuple(feed_dict)
        with self._lock:
            entry = self._sessions.get(key)
            if entry is None or entry.session.graph is not graph:
                _backend.check_listening(addresses)  # a new session would wait out its deadline for a dead task
                entry = _Session(tf.compat.v1.Session(self.target, graph=graph, config=_backend.session_config(used, timeout)))
                self._sessions[key] = entry
            elif time.monotonic() - self._last_run > IDLE_CHECK:
                # A kept session also waits out its deadline if the master died; a task that died
                # mid-loop fails fast anyway, so only look after a pause (no connection per run).
                _backend.check_listening({used[0]: addresses[used[0]]})
            call = entry.callables.get((id(fetches), feeds))
            if call is None:  # without feeds, a callable skips session.run's per-call parsing of the fetches
                call = entry.session.make_callable(fetches, feed_list=list(feeds) or None, accept_options=True)
                entry.callables[(id(fetches), feeds)] = call
        session = entry.session

        def drop() -> None:
            with self._lock:
                if self._sessions.get(key) is entry:
                    del self._sessions[key]
            _backend.close_in_background(session)

        values = list(feed_dict.values())
        result = _backend.run(lambda options: call(*values, options=options), timeout=timeout, addresses=addresses, on_failure=drop)
        self._last_run = time.monotonic()
        return result

    def forget(self, graph: tf.Graph) -> None:
        """Close the session kept for ``graph``, if any."""
        with self._lock:
            entry = self._sessions.pop(id(graph), None)
        if entry is not None:
            _backend.close_in_background(entry.session)

    def close(self) -> None:
        """Close every session this cluster opened.  Safe to call twice."""
        self._closed = True
        with self._lock:
            entries, self._sessions = list(self._sessions.values()), {}
        closing = [_backend.close_in_background(entry.session) for entry in entries]
        deadline = time.monotonic() + 2.0  # let healthy sessions close before workers stop
        for thread in closing:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"{type(self).__name__}({self.spec!r}, {state})"


_live: weakref.WeakSet[LocalCluster] = weakref.WeakSet()


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
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


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
    """Start ``workers`` worker processes on free loopback ports; stop them on close.

    The workers start in parallel and the constructor returns once every one
    accepts connections.  No worker outlives its client: they stop on
    :meth:`close` (or the end of the ``with`` block), on interpreter exit, and
    within milliseconds if the client process is killed.

    Args:
        workers: how many worker processes (tasks) to start.
        job: the job name of the tasks.
        cpu_devices: CPU devices each worker exposes (``CPU:0`` .. ``CPU:n-1``),
            to exercise placement over several devices per task without GPUs.
        startup_timeout: seconds to wait for every worker to accept connections.

    Raises:
        ClusterError: a worker failed to start in time (its log is quoted).

    Example:
        >>> with LocalCluster(workers=2) as cluster:  # doctest: +SKIP
        ...     print(cluster.devices)
        ('/job:local/replica:0/task:0/device:CPU:0', '/job:local/replica:0/task:1/device:CPU:0')
    """

    def __init__(self, workers: int = 2, *, job: str = "local", cpu_devices: int = 1, startup_timeout: float = 60.0):
        for name, value in (("workers", workers), ("cpu_devices", cpu_devices)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        startup_timeout = _backend.check_timeout(startup_timeout, argument="startup_timeout")
        validate_spec({job: ["localhost:1"]})  # checks the job name
        self._processes: list[subprocess.Popen[bytes]] = []
        self._logdir = tempfile.mkdtemp(prefix="tfmapreduce-")
        super().__init__({})
        _live.add(self)
        try:
            for attempt in range(3):
                ports = _free_ports(workers)
                spec = {job: [f"localhost:{p}" for p in ports]}
                self._processes = [self._spawn(spec, job, i, cpu_devices) for i in range(workers)]
                if self._wait_ready(startup_timeout, retry=attempt < 2):
                    break
                self._stop_workers()
            self._spec = spec
        except BaseException:
            self.close()
            raise

    def _spawn(self, spec: dict[str, list[str]], job: str, task: int, cpu_devices: int) -> subprocess.Popen[bytes]:
        global _spawner
        with _spawner_lock:
            if _spawner is None:
                _spawner = _Spawner()
        argv = [sys.executable, "-m", "tfmapreduce", "worker", "--cluster", json.dumps(spec)]
        argv += ["--job", job, "--task", str(task), "--cpu-devices", str(cpu_devices)]
        env = dict(os.environ, **{PARENT_ENV: str(os.getpid())})
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        log = open(os.path.join(self._logdir, f"task{task}.log"), "wb")  # noqa: SIM115 - handed to the child
        try:
            return _spawner.call(
                lambda: subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                    preexec_fn=_die_with_parent, start_new_session=True,
                )
            )
        finally:
            log.close()

    def _log(self, task: int) -> str:
        with open(os.path.join(self._logdir, f"task{task}.log"), encoding="utf-8", errors="replace") as f:
            return f.read()

    def _wait_ready(self, timeout: float, *, retry: bool) -> bool:
        """True once all workers are ready; False if one lost its port to a race (and ``retry``)."""
        deadline = time.monotonic() + timeout
        pending = set(range(len(self._processes)))
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
        self._stop_workers()
        shutil.rmtree(self._logdir, ignore_errors=True)
        _live.discard(self)
