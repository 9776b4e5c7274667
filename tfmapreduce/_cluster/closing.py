"""Closing sessions without waiting for a master that may never answer, and the interpreter's exit that waits for them."""

from __future__ import annotations

import atexit
import contextlib
import threading
import weakref
from collections.abc import Callable

import tensorflow as tf

from .runners import wait_for_runners

EXIT_WAIT = 5.0
"""Seconds the interpreter's exit waits for sessions still closing in the background."""

_closing: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


def close_in_background(
    session: tf.compat.v1.Session, *, check: Callable[[], bool] | None = None, keep: object = None
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
    its session at once, and ``check`` (for a session whose task is suspect: whether every task of the
    session answers, e.g. ``probe.answering``) is called first on the closing thread, abandoning the
    session unless it says yes.  The deadline is
    not shortened for closes instead: a session's ``operation_timeout_in_ms`` also bounds its
    creation and callables, which ship and register the whole graph.

    ``keep`` (the session's callables) stays referenced until the session is closed or abandoned:
    a callable freed before then releases itself with a call to the master, which blocks the same way.
    """

    def close(keep: object) -> None:
        if check is not None and not check():
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
