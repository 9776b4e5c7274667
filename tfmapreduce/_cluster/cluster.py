"""Clusters: who is there, how to reach them, which devices they really have, and the sessions that run graphs on them."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs
import tensorflow as tf

from .._base.deadline import effective_timeout
from .._base.errors import ClusterError
from .._base.state import ClusterVar, State
from .._base.task import Task
from . import backend as _backend
from . import client as _client
from . import closing as _closing
from . import probe as _probe
from . import sessions as _sessions
from . import versions as _versions
from .feeds import check_feed_size
from .runners import Runners
from .spec import CLIENT_JOB, load_tf_config, validate_spec

T = TypeVar("T")

DEVICES_TIMEOUT = 10.0
"""Seconds each task gets to list its devices when the cluster first asks (less when the run's deadline is nearer)."""


@attrs.define(eq=False)
class _Session:
    """A session kept for one graph, with a runner per (fetches, feeds) it has run (``_sessions.runner``), and the
    addresses of its tasks."""

    session: tf.compat.v1.Session
    addresses: dict[Task, str]
    callables: dict[Any, Callable[..., Any]] = attrs.field(factory=dict)
    quick: int = 0  # runs in a row that took under _backend.QUICK_RUN
    repeatable: bool = False  # whether a run may be cancelled and made again (_sessions.repeatable)


@attrs.define(eq=False)
class Cluster:
    """A running TensorFlow cluster: its spec, its tasks and their devices.

    Build one for workers that already run with [`from_spec`][tfmapreduce.Cluster.from_spec],
    [`from_tf_config`][tfmapreduce.Cluster.from_tf_config] or [`from_resolver`][tfmapreduce.Cluster.from_resolver], or start workers on this
    machine with [`LocalCluster`][tfmapreduce.LocalCluster].  A cluster is a context manager; closing
    it closes its sessions (and, for a LocalCluster, stops its workers).

    Examples:
        >>> c = Cluster.from_spec({"local": ["localhost:2222", "localhost:2223"]})
        >>> tuple(str(t) for t in c.tasks)
        ('/job:local/task:0', '/job:local/task:1')
        >>> c.target
        'grpc://localhost:2222'
    """

    _spec: dict[str, list[str]]
    _devices: dict[Task, tuple[str, ...]] = attrs.field(factory=dict)  # each task's devices, once it answered
    _listed: tuple[tuple[Task, ...], tuple[str, ...]] | None = None  # the live tasks last listed, and their devices
    _sessions: dict[tuple[int, Task], _Session] = attrs.field(factory=dict)
    _closed: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    _lost: set[Task] = attrs.field(factory=set)
    _runners: Runners = attrs.field(factory=Runners)
    _client: Any = None  # client_master=True: the in-process server of the spec's client task
    _tasks: tuple[dict[str, list[str]], tuple[Task, ...]] | None = None  # (the spec, its tasks), made once per spec
    _state: State = attrs.field(init=False)  # see state()

    def __attrs_post_init__(self) -> None:
        self._state = State(self)

    @classmethod
    def from_spec(cls, spec: Any, *, client_master: bool = False) -> Cluster:
        """Describe workers that already run, from a ``{job: [address, ...]}`` dict,
        a ``tf.train.ClusterSpec``, a JSON string or the path of a JSON file.

        A job named ``client`` (one address) is the client's own task, never a worker.  With
        ``client_master=True`` (off by default) this process starts a server for that task and
        makes it the master of every run: fed data enters the cluster in process instead of through
        gRPC to task 0 (see ``_client``: the workers must have been started with that spec; the port
        listens on every interface until the cluster closes).

        Raises:
            ClusterError: the spec is malformed (every problem is listed), names no worker, or
                ``client_master=True`` and it has no client task (or its port is taken).
        """
        if not isinstance(client_master, bool):
            raise TypeError(f"client_master must be True or False, got {type(client_master).__name__} {client_master!r}")
        cluster = cls(validate_spec(spec))
        if not cluster.tasks:
            raise ClusterError(f"the cluster spec names no worker, only the client's task {CLIENT_JOB!r}: {cluster.spec!r}")
        if client_master:
            cluster.serve_client()
        return cluster

    def serve_client(self) -> None:
        """Make this process's server for the spec's ``client`` task the master (``client_master=True``).

        Raises:
            ClusterError: the spec has no client task, or its port is taken.
        """
        if self._client is not None:
            return  # already the master
        server = _client.serve(self._spec)
        with self._lock:
            self._client = server
        self.drop_sessions()  # later runs go through the new master

    @property
    def client_master(self) -> bool:
        """Whether runs go through this process's own server for the spec's ``client`` task (``client_master=True``)."""
        return self._client is not None

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
        """The workers' job names, in spec order (the client's task, if the spec names one, is not a worker)."""
        return tuple(job for job in self._spec if job != CLIENT_JOB)

    @property
    def tasks(self) -> tuple[Task, ...]:
        """Every worker task, job by job."""
        known = self._tasks
        if known is None or known[0] is not self._spec:
            known = self._tasks = (self._spec, tuple(Task(job, i) for job in self.jobs for i in range(len(self._spec[job]))))
        return known[1]

    def address(self, task: Task | str) -> str:
        """The ``host:port`` of a task (a [`Task`][tfmapreduce.Task] or ``/job:NAME/task:I``)."""
        task = Task.of(task)
        return self._spec[task.job][task.index]

    @property
    def lost(self) -> frozenset[Task]:
        """Tasks a run found dead or hung; later runs leave them out (see [`mark_lost`][tfmapreduce.Cluster.mark_lost])."""
        return frozenset(self._lost)

    @property
    def live_tasks(self) -> tuple[Task, ...]:
        """The tasks not [`lost`][tfmapreduce.Cluster.lost], in spec order."""
        return tuple(t for t in self.tasks if t not in self._lost)

    @property
    def master(self) -> Task:
        """The task runs go through: the client's own task with ``client_master=True``, else the first live task
        (task 0 unless it was lost).

        Raises:
            ClusterError: every task was lost.
        """
        if self._client is not None:
            return Task(CLIENT_JOB, 0)
        live = self.live_tasks
        if not live:
            raise ClusterError(
                f"every task of {self!r} was lost; restart the workers and call mark_live(), or open a new cluster"
            )
        return live[0]

    @property
    def target(self) -> str:
        """The gRPC target of the master, e.g. ``grpc://localhost:2222`` (this process's own server with ``client_master=True``)."""
        if self._client is not None:
            return str(self._client.target)
        return f"grpc://{self.address(self.master)}"

    def state(self, var: ClusterVar[T]) -> T:
        """This cluster's value of ``var`` (a subsystem's typed slot: its compiled programs, facts about its tasks),
        made on first use and closed with the cluster."""
        return self._state.get(var)

    def mark_lost(self, task: Task | str) -> None:
        """Leave ``task`` out of later plans and never use it as the master (what a retry does with a dead task)."""
        task = Task.of(task)
        with self._lock:
            self._lost.add(task)
            stale = [key for key in self._sessions if key[1] == task]
            entries = [self._sessions.pop(key) for key in stale]
        for entry in entries:  # its master is dead or hung (or was only set aside): closed only if it answers
            _closing.close_in_background(entry.session, check=functools.partial(_probe.answering, entry.addresses), keep=entry)

    def mark_live(self, task: Task | str | None = None) -> None:
        """Use ``task`` (every task when None) again, e.g. after its worker was restarted."""
        with self._lock:
            if task is None:
                self._lost.clear()
            else:
                self._lost.discard(Task.of(task))

    @property
    def closed(self) -> bool:
        """Whether [`close`][tfmapreduce.Cluster.close] was called."""
        return self._closed

    @property
    def devices(self) -> tuple[str, ...]:
        """The full names of the devices of every live task, asked of the tasks (each once, with a bounded wait).

        The first time a task is asked also checks that it runs this client's TensorFlow release.

        Raises:
            ClusterError: a task does not answer (the message names its address), or runs another TensorFlow.
        """
        return self.list_devices(min(DEVICES_TIMEOUT, effective_timeout(None)))

    def list_devices(self, timeout: float) -> tuple[str, ...]:
        """[`devices`][tfmapreduce.Cluster.devices], each live task not asked before given ``timeout`` seconds to answer.

        A [`lost`][tfmapreduce.Cluster.lost] task is not asked: a retry after a task stopped during the cluster's
        first listing does not wait for it again.  The tasks that answered are remembered even when another did not.
        """
        live = self.live_tasks
        listed = self._listed
        if listed is not None and listed[0] == live:
            return listed[1]
        self._ask_devices([t for t in live if t not in self._devices], timeout)
        devices = tuple(name for task in live for name in self._devices[task])
        self._listed = (live, devices)
        return devices

    def _ask_devices(self, tasks: list[Task], timeout: float) -> None:
        """Ask ``tasks`` for their devices and TensorFlow release at once; remember those that answered, then raise for
        those that did not (a single failure keeps its class and its ``.task``)."""
        if not tasks:
            return
        self.check_open()
        answers = _probe.probe({t: self.address(t) for t in tasks}, timeout=timeout, first=True)
        listed = {task: names for task, names in answers.items() if isinstance(names, list)}
        _versions.check({t: self.address(t) for t in listed}, timeout=timeout)
        self._devices.update((task, tuple(names)) for task, names in listed.items())
        errors = [a for a in answers.values() if isinstance(a, ClusterError)]
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ClusterError("cannot list the cluster's devices:\n  " + "\n  ".join(map(str, errors)))

    def check_open(self) -> None:
        """Raise ClusterError if the cluster was closed."""
        if self._closed:
            raise ClusterError(f"{self!r} is closed; open a new cluster (or use it inside its 'with' block)")

    def run(
        self,
        graph: tf.Graph,
        fetches: Any,
        feed_dict: dict[Any, Any],
        *,
        tasks: Sequence[Task | str],
        timeout: float,
        hang_check: bool = False,
        fold_constants: bool = True,
        trace: tf.compat.v1.RunMetadata | None = None,
        master: Task | None = None,
    ) -> Any:
        """Run ``fetches`` of ``graph`` as one distributed execution over ``tasks``, with a deadline.

        The session for ``graph`` is opened once and kept until the cluster
        closes or a run on it fails.  ``hang_check`` names a hung task before
        the deadline (for runs a retry can repeat elsewhere; see ``_backend.run``).
        ``fold_constants=False`` for a graph that maps shared memory (see ``_sessions.session_config``).
        ``trace``: a ``RunMetadata`` the run fills with its step stats (on every task).
        ``master``: the task the run goes through instead of the cluster's ``master`` (a run that must not wait
        for a master that just failed).
        """
        self.check_open()
        fed = check_feed_size(feed_dict)
        target = self.target if master is None else f"grpc://{self.address(master)}"
        master = self.master if master is None else master
        key = (id(graph), master)
        feeds = tuple(feed_dict)
        values = list(feed_dict.values())
        with self._lock:
            entry = self._sessions.get(key)
            if entry is None or entry.session.graph is not graph:
                used = [master, *map(Task.of, tasks)]  # the master takes part in every run
                addresses = {t: self.address(t) for t in used}
                # A new session would wait out its deadline for a dead task; a cut link (no answer) must not stall it.
                _probe.check_listening(addresses, _backend.WATCH_CONNECT)
                config = _sessions.session_config(used, timeout, fold_constants=fold_constants)
                session = tf.compat.v1.Session(target, graph=graph, config=config)
                entry = _Session(session, addresses, repeatable=_sessions.repeatable(graph))
                self._sessions[key] = entry
        addresses = entry.addresses

        def call(options: tf.compat.v1.RunOptions) -> Any:  # on a runner thread: the session's first contact may block too
            if trace is not None:  # a traced run (rare): TensorFlow's own callable fills its RunMetadata
                return _sessions.session_callable(entry.session, fetches, feeds)(values, options, trace)
            runnable = entry.callables.get((id(fetches), feeds))
            if runnable is None:
                runnable = entry.callables[(id(fetches), feeds)] = _sessions.runner(entry.session, fetches, feeds)
            began = time.monotonic()
            try:
                result = runnable(values, options)
            except BaseException:
                entry.quick = 0
                raise
            entry.quick = entry.quick + 1 if time.monotonic() - began < _backend.QUICK_RUN else 0
            return result

        def drop(error: ClusterError) -> None:
            with self._lock:
                if self._sessions.get(key) is entry:
                    del self._sessions[key]
            if getattr(error, "task", None) is not None:  # a dead or hung task: closing would wait out the deadline
                _closing.abandon(entry.session)
            else:  # every task answers (a job slower than its deadline): the master cancels the step and closes
                _closing.close_in_background(entry.session, keep=entry)

        return _backend.run(
            call,
            timeout=timeout,
            addresses=addresses,
            on_failure=drop,
            runners=self._runners,
            hang_check=hang_check,
            process=self._process,
            quick=entry.repeatable and entry.quick >= _backend.QUICK_AFTER and fed <= _backend.QUICK_FEED,
            traced=trace is not None,
        )

    def _process(self, task: Task) -> int | None:
        """The id of ``task``'s worker process where this client started it (a LocalCluster), else None: how a hang
        check tells a stopped worker from a busy one."""
        return None

    def forget(self, graph: tf.Graph) -> None:
        """Close the sessions kept for ``graph``, if any."""
        with self._lock:
            stale = [key for key in self._sessions if key[0] == id(graph)]
            entries = [self._sessions.pop(key) for key in stale]
        for entry in entries:
            _closing.close_in_background(entry.session)

    def drop_sessions(self) -> list[threading.Thread]:
        """Close every kept session in the background (later runs open new ones), e.g. after a worker restarted."""
        with self._lock:
            entries, self._sessions = list(self._sessions.values()), {}
        return [_closing.close_in_background(entry.session) for entry in entries]

    def close(self) -> None:
        """Close its state (the programs compiled for it, the model copies it placed on workers it did not start),
        then every session this cluster opened.  Safe to call twice."""
        if not self._closed:
            self._state.close()  # while runs still go: a slot's close may free what the workers hold for this client
        self._closed = True
        self._state.close()  # what a run made meanwhile
        closing = self.drop_sessions()
        deadline = time.monotonic() + 2.0  # let healthy sessions close before workers stop; the rest finish in the background
        for thread in closing:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        with self._lock:
            server, self._client = self._client, None
        if server is not None:  # client_master=True: its port stops listening once no other open cluster uses it
            _client.release(self._spec)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"{type(self).__name__}({self.spec!r}, {state})"
