"""Clusters: who is there, how to reach them, which devices they really have, and the sessions that run graphs on them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import tensorflow as tf

from . import _backend, _versions
from ._errors import ClusterError
from ._spec import load_tf_config, validate_spec
from ._task import Task

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
        >>> tuple(str(t) for t in c.tasks)
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
        return cls.from_spec(load_tf_config().cluster)

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
    def tasks(self) -> tuple[Task, ...]:
        """Every task, job by job."""
        return tuple(Task(job, i) for job, addresses in self._spec.items() for i in range(len(addresses)))

    def address(self, task: Task | str) -> str:
        """The ``host:port`` of a task (a :class:`Task` or ``/job:NAME/task:I``)."""
        task = Task.of(task)
        return self._spec[task.job][task.index]

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

        The first call also checks that every task runs this client's TensorFlow release.

        Raises:
            ClusterError: a task does not answer (the message names its address), or runs another TensorFlow.
        """
        if self._devices is None:
            self.check_open()
            answers = _backend.probe({t: self.address(t) for t in self.tasks}, timeout=10.0)
            errors = [a for a in answers.values() if isinstance(a, ClusterError)]
            if len(errors) == 1:
                raise errors[0]  # keeps its class (timeout or unavailable) and its .task
            if errors:
                raise ClusterError("cannot list the cluster's devices:\n  " + "\n  ".join(map(str, errors)))
            _versions.check({t: self.address(t) for t in self.tasks}, timeout=10.0)
            self._devices = tuple(name for names in answers.values() if isinstance(names, list) for name in names)
        return self._devices

    def check_open(self) -> None:
        """Raise ClusterError if the cluster was closed."""
        if self._closed:
            raise ClusterError(f"{self!r} is closed; open a new cluster (or use it inside its 'with' block)")

    def run(
        self, graph: tf.Graph, fetches: Any, feed_dict: dict[Any, Any], *, tasks: Sequence[Task | str], timeout: float
    ) -> Any:
        """Run ``fetches`` of ``graph`` as one distributed execution over ``tasks``, with a deadline.

        The session for ``graph`` is opened once and kept until the cluster
        closes or a run on it fails.
        """
        self.check_open()
        used = [self.tasks[0], *map(Task.of, tasks)]  # the master takes part in every run
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
        result = _backend.run(
            lambda options: call(*values, options=options), timeout=timeout, addresses=addresses, on_failure=drop
        )
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
