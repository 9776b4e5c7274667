"""How a graph runs on the cluster: one distributed Session call with a deadline on everything, watched.

TF2's remote eager blocks forever on a stopped worker; a ``tf.compat.v1.Session``
honours ``operation_timeout_in_ms`` on creation, every run and close.  So every
session gets that deadline, a device filter naming just the tasks it needs, and
hard placement (``sessions``).  A run is handed to a runner thread and watched:
a dead task is named within a poll, a hung one by probes (``probe``), and the
caller stops waiting half a second past the deadline whatever TensorFlow does.
TensorFlow's errors for a hung or dead task become WorkerTimeoutError /
WorkerUnavailableError naming the task.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from .._base.errors import ClusterError, JobError, TfMapReduceError, WorkerTimeoutError, WorkerUnavailableError
from .._base.task import Task
from .probe import check_listening, first_line, probe, stopped
from .runners import Runners

POLL = 1.0
"""Seconds between the watchdog's checks that every task of a running call still listens."""

GRACE = 0.5
"""Seconds past its deadline the watchdog waits for TensorFlow's own deadline before giving up on a call."""

WATCH_CONNECT = 0.25
"""Seconds the watchdog's check that a task still listens waits for a connection: a refusal (nothing listens) comes at
once; a host that drops packets (a cut link) passes after this, and the hang probes decide about it."""

HANG_SILENCE = 5.0
"""Seconds a task must leave every probe unanswered during a run to be called hung, unless its process is known
(see :func:`_check_answering`).  Under load a busy, healthy worker misses a one-second probe now and then: two in a
row once made a loaded test's only live task "hung", and its run failed."""


QUICK_RUN = 0.02
"""Seconds under which a run counts as quick: after :data:`QUICK_AFTER` such runs in a row, its session's runs are
made on the caller's thread (see :func:`run`)."""

QUICK_AFTER = 3
"""Quick runs in a row after which a session's runs are made on the caller's thread."""

QUICK_LIMIT = 0.25
"""The deadline of a run made on the caller's thread: past it, the run is cancelled and made again, watched."""

QUICK_FEED = 1 << 20
"""Bytes fed at most to a run made on the caller's thread (a large feed to a stopped master ignores deadlines)."""


def run(
    call: Callable[[tf.compat.v1.RunOptions], Any],
    *,
    timeout: float,
    addresses: dict[Task, str],
    on_failure: Callable[[ClusterError], None],
    runners: Runners,
    hang_check: bool = False,
    process: Callable[[Task], int | None] = lambda task: None,
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
    poll, and names a hung task before the deadline, so a retry has time left
    (:func:`_check_answering`; ``process(task)``: the id of its worker process
    on this machine, or None).  ``addresses``
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
        hang = functools.partial(_check_answering, addresses, {}, process) if hang_check else None
        return _watch(runners, lambda: call(options), timeout=timeout, rest=rest, addresses=addresses, hang_check=hang)
    except ClusterError as error:
        on_failure(error)
        raise


@functools.lru_cache(maxsize=64)
def _run_options(timeout_ms: int, traced: bool = False) -> tf.compat.v1.RunOptions:
    """A run's options, with its deadline (made once per deadline: most runs have the default one)."""
    level = tf.compat.v1.RunOptions.FULL_TRACE if traced else tf.compat.v1.RunOptions.NO_TRACE
    return tf.compat.v1.RunOptions(timeout_in_ms=timeout_ms, trace_level=level)


def _watch(
    runners: Runners,
    fn: Callable[[], Any],
    *,
    timeout: float,
    rest: float,
    addresses: dict[Task, str],
    hang_check: Callable[[], None] | None,
) -> Any:
    """The result of ``fn``, a session call handed to ``runners`` and watched as :func:`run` says, with ``rest`` seconds
    left of its ``timeout``; a failure of the cluster raises ClusterError.  ``hang_check()`` raises for a hung task."""
    begun = time.monotonic()
    end = begun + rest + GRACE
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
            if hang_check is not None and time.monotonic() - begun >= POLL:
                hang_check()
    except tf.errors.OpError as e:
        raise _named(e, addresses, timeout) from None


def _named(e: tf.errors.OpError, addresses: dict[Task, str], timeout: float) -> TfMapReduceError:
    """TensorFlow's error from a session call as ours: a cluster failure names its task, an op's failure is a JobError."""
    if isinstance(e, tf.errors.DeadlineExceededError):
        return _culprit(
            addresses, f"the run did not finish within its {timeout:g} s deadline (its step was cancelled on the workers)"
        )
    if isinstance(e, (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.CancelledError)):
        task = _refusing(addresses) or Task.find(e.message or "")
        if task is not None and task in addresses:
            return WorkerUnavailableError(
                f"task {task} at {addresses[task]} is gone ({first_line(e)}); its worker process died or "
                "cannot be reached: restart it, or run on the tasks that remain",
                task=task,
                address=addresses[task],
            )
        return _culprit(addresses, f"the run failed ({first_line(e)})")
    error = JobError(f"the job failed on the cluster: {first_line(e)}")
    error.details = e.message or ""
    return error


def _refusing(addresses: dict[Task, str]) -> Task | None:
    """The first task whose address refuses a connection (its process is gone), or None: the one to name when a step
    fails on a lost peer, whichever task's message reported the failure first."""
    try:
        check_listening(addresses, WATCH_CONNECT)
    except WorkerUnavailableError as gone:
        return gone.task
    return None


def _check_answering(addresses: dict[Task, str], silent: dict[Task, float], process: Callable[[Task], int | None]) -> None:
    """Probe every task once; raise for a dead one, or a hung one.  ``silent`` maps each task that has not answered
    since to when its silence began.  A task whose worker process runs on this machine (``process(task)``: its id) is
    hung when that process is stopped, and never while it runs: a busy worker is left to the deadline.  Any other
    task is hung once it has answered no probe for :data:`HANG_SILENCE` seconds."""
    asked = time.monotonic()
    for task, answer in probe(addresses).items():
        if isinstance(answer, WorkerUnavailableError):
            raise answer
        if not isinstance(answer, WorkerTimeoutError):
            silent.pop(task, None)
            continue
        since = silent.setdefault(task, asked)
        pid = process(task)
        state = None if pid is None else stopped(pid)
        if state:
            why = f"its process {pid} is stopped: continue it (kill -CONT {pid}) or stop it for good"
        elif state is None and time.monotonic() - since >= HANG_SILENCE:
            why = f"it answered no probe for {HANG_SILENCE:g} s: the worker is stopped, hung or overloaded"
        else:
            continue
        raise WorkerTimeoutError(
            f"task {task} at {addresses[task]} stopped answering while the run was under way ({why})",
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
