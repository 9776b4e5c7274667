"""How a graph runs on the cluster: distributed Sessions with a deadline on everything.

TF2's remote eager blocks forever on a stopped worker; a ``tf.compat.v1.Session``
honours ``operation_timeout_in_ms`` on creation, every run and close.  So every
session here gets that deadline, a device filter naming just the tasks it needs,
and hard placement (no silent soft fallback).  TensorFlow's errors for a hung or
dead task become WorkerTimeoutError / WorkerUnavailableError naming the task.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import operator
import re
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.python.client import pywrap_tf_session
from tensorflow.python.framework import op_def_registry

from .._base.errors import ClusterError, JobError, TfMapReduceError, WorkerTimeoutError, WorkerUnavailableError
from .._base.task import Task
from .runners import Runners, wait_for_runners

PROBE_TIMEOUT = 1.0
"""Seconds each task gets to answer when a run timed out and the culprit is sought."""


def session_config(tasks: Iterable[Task], timeout: float, *, fold_constants: bool = True) -> tf.compat.v1.ConfigProto:
    """A ConfigProto that bounds every call by ``timeout`` and talks only to ``tasks``.

    ``fold_constants=False`` turns off the classic graph optimizer (opt level L0) for graphs that map
    shared memory: it would read an ``ImmutableConst`` once and fold its first contents into the graph.

    Grappler is off: besides the graph, it optimized every ``tf.data`` function again each time a run made its
    dataset, about 3 ms a function (7.4 → 2.5 ms a run for ``range.map.reduce`` in one process); a file job over 4
    files read 42 → 18 ms a run, a 200 MB ``.npy`` mean 91 → 67 ms, with no slower job in the benchmarks.
    """
    config = tf.compat.v1.ConfigProto(
        operation_timeout_in_ms=max(1, int(timeout * 1000)),
        device_filters=sorted({str(t) for t in tasks}),
        allow_soft_placement=False,
    )
    if not fold_constants:
        config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    return config


REPEATABLE = frozenset(
    {"Assert", "If", "While", "StatefulPartitionedCall", "Timestamp", "ReadVariableOp", "VarHandleOp", "VarIsInitializedOp"}
    | {"TmrCheckCancelled"}
    | {"RandomStandardNormal", "RandomUniform", "RandomUniformInt", "TruncatedNormal", "Multinomial", "RandomShuffle"}
)
"""Stateful ops a run may repeat with no effect beyond its own result: checks, control flow (whose bodies are looked at
too), clocks, variable reads and random draws; datasets (reads) besides.  A graph with any other stateful op (a print,
an assignment, a file write, a py_function) is never cancelled and made again (see :func:`run`)."""


COUNTING = "tmr_progress"
"""The name of every op that counts a run's progress (``_progress``): a run sets its counters to 0 first, so a run made
again counts right too."""


def repeatable(graph: tf.Graph) -> bool:
    """Whether a run of ``graph`` may be cancelled and made again without doing anything twice (see :data:`REPEATABLE`)."""
    types = {op.type for op in graph.get_operations() if not op.name.split("/")[-1].startswith(COUNTING)}
    types |= {
        node.op
        for function in graph.as_graph_def().library.function
        for node in function.node_def
        if not node.name.startswith(COUNTING)
    }
    for name in types:
        if name in REPEATABLE or re.search(r"Dataset(V\d+)?$", name):
            continue
        op_def = op_def_registry.get(name)
        if op_def is None or op_def.is_stateful:
            return False
    return True


EXIT_WAIT = 5.0
"""Seconds the interpreter's exit waits for sessions still closing in the background."""

_closing: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


def close_in_background(
    session: tf.compat.v1.Session, *, check: dict[Task, str] | None = None, keep: object = None
) -> threading.Thread:
    """Close a session without waiting for its master's answer.

    The thread is not a daemon: the interpreter waits for it before it finalizes, because a daemon
    thread that returns from TensorFlow's C++ close while Python is finalizing is unwound by force
    and the C++ runtime aborts the process ("FATAL: exception not rethrown", exit 134).  So a close
    that cannot finish must not be started: it waits out the session's whole deadline (the run's
    timeout, 60 s by default), and so does the interpreter's exit.  A dead or stopped master never
    answers (gRPC redials it until the deadline), and a live master's ``MasterSession::Close`` first
    waits for the cleanup of a failed step on each of its tasks, which never ends on a dead one.
    Such sessions are abandoned (:func:`abandon`) instead: a run that fails naming a task abandons
    its session at once, and ``check`` (a session's tasks and their addresses, for one whose task is
    suspect) probes them first, abandoning the session unless every one answers.  The deadline is
    not shortened for closes instead: a session's ``operation_timeout_in_ms`` also bounds its
    creation and callables, which ship and register the whole graph.

    ``keep`` (the session's callables) stays referenced until the session is closed or abandoned:
    a callable freed before then releases itself with a call to the master, which blocks the same way.
    """

    def close(keep: object) -> None:
        if check is not None and any(isinstance(answer, ClusterError) for answer in probe(check).values()):
            abandon(session)
            return
        with contextlib.suppress(tf.errors.OpError):  # a dead or hung master: nothing to close, nobody to tell
            session.close()

    thread = threading.Thread(target=close, args=(keep,), name="tfmapreduce-close", daemon=False)
    _closing.add(thread)
    thread.start()
    return thread


def abandon(session: tf.compat.v1.Session) -> None:
    """Let go of a session without a call to its master, now or when it and its callables are freed.

    Its state stays on a master that survives until that worker process exits: a close could not
    free it while a task of its failed step is dead, and a stopped task's is given up on.
    """
    session._closed = True  # private: BaseSession.close() and _Callable.__del__ then send nothing


@atexit.register
def _wait_for_closes() -> None:
    """Let background closes and runner calls finish before the interpreter finalizes.

    Closes started by other exit hooks (a LocalCluster nobody closed) come after the
    interpreter has joined its threads, so they are joined here: each is quick (a session
    that cannot be closed is abandoned, see :func:`close_in_background`), and bounded by its
    session's deadline in any case.  A runner call still in TensorFlow after :data:`EXIT_WAIT`
    seconds (a call given up on, to a stopped master) is left: it returns only when
    that task resumes.
    """
    for thread in list(_closing):
        thread.join()
    wait_for_runners(EXIT_WAIT)


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
        return [d.name for d in session.list_devices() if d.name.startswith(prefix)]
    except tf.errors.DeadlineExceededError:
        raise WorkerTimeoutError(
            f"task {task} at {address} did not answer within {timeout:g} s: the worker is stopped, hung or "
            "overloaded (check that its process is running and not suspended)",
            task=task,
            address=address,
        ) from None
    except tf.errors.OpError as e:
        raise WorkerUnavailableError(
            f"task {task} at {address} is unreachable ({_first_line(e)}): start its worker "
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


POLL = 1.0
"""Seconds between the watchdog's checks that every task of a running call still listens."""

GRACE = 0.5
"""Seconds past its deadline the watchdog waits for TensorFlow's own deadline before giving up on a call."""

WATCH_CONNECT = 0.25
"""Seconds the watchdog's check that a task still listens waits for a connection: a refusal (nothing listens) comes at
once; a host that drops packets (a cut link) passes after this, and the hang probes decide about it."""

HANG_PROBES = 2
"""Consecutive probes a task must leave unanswered (:data:`PROBE_TIMEOUT` each) during a run to be called hung."""


QUICK_RUN = 0.02
"""Seconds under which a run counts as quick: after :data:`QUICK_AFTER` such runs in a row, its session's runs are
made on the caller's thread (see :func:`run`)."""

QUICK_AFTER = 3
"""Quick runs in a row after which a session's runs are made on the caller's thread."""

QUICK_LIMIT = 0.25
"""The deadline of a run made on the caller's thread: past it, the run is cancelled and made again, watched."""

QUICK_FEED = 1 << 20
"""Bytes fed at most to a run made on the caller's thread (a large feed to a stopped master ignores deadlines)."""


def session_callable(session: tf.compat.v1.Session, fetches: Any, feeds: tuple[Any, ...]) -> Callable[..., Any]:
    """As :func:`runner`, through ``Session.make_callable``: ``(values, options, run_metadata=None)``, the run's step
    stats written into ``run_metadata`` when one is given."""
    made = session.make_callable(fetches, feed_list=list(feeds) or None, accept_options=True)
    return lambda values, options, run_metadata=None: made(*values, options=options, run_metadata=run_metadata)


def runner(session: tf.compat.v1.Session, fetches: Any, feeds: tuple[Any, ...]) -> Callable[[list[Any], Any], Any]:
    """A run of ``fetches`` of ``session``'s graph: ``runner(...)(values, options)`` with the values of ``feeds`` in
    order and the run's ``RunOptions``.

    Made straight through TensorFlow's C API (``TF_SessionRun``), its errors read as ``Session.run`` reads them: that
    skips ``Session.run``'s per-call Python (its fetch handler, feed checks and conversions), measured at 0.25 ms of a
    2.5 ms run of a 100-element mean on two workers here (the tiny shipped job of ``python -m benchmarks``).  Where a
    fetch is not a tensor (an op) or a feed not an array (a resource), ``Session.make_callable`` serves instead.
    """
    flat = tf.nest.flatten(fetches)
    if not flat or not all(isinstance(t, tf.Tensor) for t in flat) or any(f.dtype in (tf.resource, tf.variant) for f in feeds):
        return session_callable(session, fetches, feeds)
    # Private: the session's C handle, and how Session._do_run calls TensorFlow and names an op's error.
    outputs = [t._as_tf_output() for t in flat]
    inputs = [f._as_tf_output() for f in feeds]
    dtypes = [f.dtype.as_numpy_dtype for f in feeds]
    pack: Callable[[list[Any]], Any]  # the fetched values in the structure of ``fetches`` (``tf.nest`` for a nested one)
    if fetches is flat[0]:
        pack = operator.itemgetter(0)
    elif type(fetches) in (tuple, list) and list(map(id, fetches)) == list(map(id, flat)):  # flat: ((a, b), (), (c,)) is not
        pack = type(fetches)
    else:
        pack = functools.partial(tf.nest.pack_sequence_as, fetches)

    extended = [-1]  # the graph's version the session last saw: ops added since are sent to it first, as run() does

    def run_once(feed: dict[Any, Any], options: Any) -> Any:
        if session.graph.version != extended[0]:
            version = session.graph.version
            session._extend_graph()
            extended[0] = version
        return pywrap_tf_session.TF_SessionRun_wrapper(session._session, options, feed, outputs, [], None)

    def run(values: list[Any], options: tf.compat.v1.RunOptions) -> Any:
        feed = {i: np.asarray(v, dtype=d) for i, v, d in zip(inputs, values, dtypes, strict=True)}
        buffer = pywrap_tf_session.TF_NewBufferFromString(options.SerializeToString())
        try:
            return pack(session._do_call(run_once, feed, buffer))
        finally:
            pywrap_tf_session.TF_DeleteBuffer(buffer)

    return run


def run(
    call: Callable[[tf.compat.v1.RunOptions], Any],
    *,
    timeout: float,
    addresses: dict[Task, str],
    on_failure: Callable[[ClusterError], None],
    runners: Runners,
    hang_check: bool = False,
    quick: bool = False,
    traced: bool = False,
) -> Any:
    """``call(options)`` — one session run — with a deadline; cluster failures become errors that name the task.

    The call runs on one of ``runners`` while this thread watches it: every
    :data:`POLL` seconds it checks that every task still accepts connections (a
    killed task is named at once, whichever it is, the master included), and
    :data:`GRACE` seconds past the deadline it stops waiting for good — even
    where TensorFlow's own deadline does not reach (a stopped master receiving
    a large feed).  With ``hang_check`` (a run that can be repeated elsewhere)
    it also asks each task for its devices every poll once the run has lasted a
    poll: a task that leaves :data:`HANG_PROBES` probes in a row unanswered is
    named hung before the deadline, so a retry has time left.  ``addresses``
    maps each task the run uses to its address; ``on_failure(error)`` is called
    (to drop the session) with the error about to be raised.

    A ``quick`` call (a run that has always been quick, with a small feed, of a
    :func:`repeatable` graph) is first made on this thread, with a deadline of
    :data:`QUICK_LIMIT`: it saves the hand-off to a runner and back (measured in the
    layouts guide).  If it is not done by then (it became slow, or a task hangs), its
    step is cancelled and it runs again, watched, with what is left of its
    deadline: its graph has no side effect that a repeat would double.  A ``traced`` run records TensorFlow's
    step stats (``FULL_TRACE``).
    """
    rest = timeout
    try:
        if quick and not traced and timeout > QUICK_LIMIT:
            began = time.monotonic()
            try:
                return call(_run_options(int(QUICK_LIMIT * 1000)))
            except tf.errors.DeadlineExceededError:
                rest -= time.monotonic() - began
            except tf.errors.OpError as e:
                raise _named(e, addresses, timeout) from None
        options = _run_options(max(1, int(rest * 1000)), traced)
        return _watch(runners, lambda: call(options), timeout=timeout, rest=rest, addresses=addresses, hang_check=hang_check)
    except ClusterError as error:
        on_failure(error)
        raise


@functools.lru_cache(maxsize=64)
def _run_options(timeout_ms: int, traced: bool = False) -> tf.compat.v1.RunOptions:
    """A run's options, with its deadline (made once per deadline: most runs have the default one)."""
    level = tf.compat.v1.RunOptions.FULL_TRACE if traced else tf.compat.v1.RunOptions.NO_TRACE
    return tf.compat.v1.RunOptions(timeout_in_ms=timeout_ms, trace_level=level)


def _watch(
    runners: Runners, fn: Callable[[], Any], *, timeout: float, rest: float, addresses: dict[Task, str], hang_check: bool
) -> Any:
    """The result of ``fn``, a session call handed to ``runners`` and watched as :func:`run` says, with ``rest`` seconds
    left of its ``timeout``; a failure of the cluster raises ClusterError."""
    begun = time.monotonic()
    end = begun + rest + GRACE
    silent: dict[Task, int] = {}
    handed = runners.submit(fn)  # last before the wait: the runner starts while this thread lets go of the GIL
    try:
        while True:
            left = end - time.monotonic()
            if handed.ended(max(0.0, min(POLL, left))):
                return handed.result()
            if left <= POLL:
                raise _culprit(
                    addresses, f"the run did not finish within its {timeout:g} s deadline (the client stopped waiting for it)"
                )
            check_listening(addresses, WATCH_CONNECT)  # refused at once when dead; a cut link must not stall the loop
            if hang_check and time.monotonic() - begun >= POLL:
                _check_answering(addresses, silent)
    except tf.errors.OpError as e:
        raise _named(e, addresses, timeout) from None


def _named(e: tf.errors.OpError, addresses: dict[Task, str], timeout: float) -> TfMapReduceError:
    """TensorFlow's error from a session call as ours: a cluster failure names its task, an op's failure is a JobError."""
    if isinstance(e, tf.errors.DeadlineExceededError):
        return _culprit(
            addresses, f"the run did not finish within its {timeout:g} s deadline (its step was cancelled on the workers)"
        )
    if isinstance(e, (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.CancelledError)):
        task = Task.find(e.message or "")
        if task is not None and task in addresses:
            return WorkerUnavailableError(
                f"task {task} at {addresses[task]} is gone ({_first_line(e)}); its worker process died or "
                "cannot be reached: restart it, or run on the tasks that remain",
                task=task,
                address=addresses[task],
            )
        return _culprit(addresses, f"the run failed ({_first_line(e)})")
    error = JobError(f"the job failed on the cluster: {_first_line(e)}")
    error.details = e.message or ""
    return error


def _check_answering(addresses: dict[Task, str], silent: dict[Task, int]) -> None:
    """Probe every task once; raise for a dead one, or one silent for :data:`HANG_PROBES` probes in a row."""
    for task, answer in probe(addresses).items():
        if isinstance(answer, WorkerUnavailableError):
            raise answer
        silent[task] = silent.get(task, 0) + 1 if isinstance(answer, WorkerTimeoutError) else 0
        if silent[task] >= HANG_PROBES:
            raise WorkerTimeoutError(
                f"task {task} at {addresses[task]} stopped answering while the run was under way ({HANG_PROBES} probes of "
                f"{PROBE_TIMEOUT:g} s in a row went unanswered): the worker is stopped, hung or overloaded",
                task=task,
                address=addresses[task],
            )


def _culprit(addresses: dict[Task, str], what: str) -> ClusterError:
    """Find which task is at fault by probing each with its own short deadline.  Each probe runs a no-op first
    (``first=True``): asked for its devices alone, a live master made its session without its device filter and
    waited for the stopped task too, and was named in its place (one run in three of a test stopping task 1)."""
    for answer in probe(addresses, first=True).values():
        if isinstance(answer, ClusterError):
            answer.args = (f"{what}: {answer}",)
            return answer
    return WorkerTimeoutError(
        f"{what}, yet every task answers a probe: the job itself is slower than the deadline; pass a larger "
        "timeout= (or set_timeout()) or give it more shards"
    )


def _first_line(error: tf.errors.OpError) -> str:
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
