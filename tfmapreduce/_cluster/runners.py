"""Runner threads: each makes session calls handed to it, so a caller can stop waiting on one that hangs."""

from __future__ import annotations

import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any


class _Call:
    """A session call handed to a runner: ``done`` is released once ``value`` or ``error`` is set.

    A bare lock rather than a ``concurrent.futures.Future`` (a condition variable
    and its bookkeeping): the hand-off is on the path of every watched run.
    """

    __slots__ = ("done", "error", "fn", "value")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.value: Any = None
        self.error: BaseException | None = None
        self.done = threading.Lock()
        self.done.acquire()

    def ended(self, timeout: float) -> bool:
        """Whether the call has ended, after waiting at most ``timeout`` seconds."""
        if not self.done.acquire(timeout=timeout):
            return False
        self.done.release()  # later waiters see it ended too
        return True

    def result(self) -> Any:
        """The ended call's value, or its error raised."""
        if self.error is not None:
            raise self.error
        return self.value


class _Runner:
    """One daemon thread that runs session calls handed to it, one at a time."""

    def __init__(self, pool: Runners) -> None:
        self._pool = pool
        self._jobs: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self.busy = False
        _runners.add(self)
        threading.Thread(target=self._serve, name="tfmapreduce-run", daemon=True).start()

    def submit(self, fn: Callable[[], Any]) -> _Call:
        call = _Call(fn)
        self._jobs.put(call)
        return call

    def _serve(self) -> None:
        while True:
            call = self._jobs.get()
            self.busy = True
            try:
                call.value = call.fn()
            except BaseException as e:  # handed to the waiting caller
                call.error = e
            self.busy = False
            self._pool.release(self)  # a call the caller gave up on returns here too, whenever it ends
            call.done.release()  # last before the next wait: the caller wakes to a free GIL


class Runners:
    """Threads that make session calls for a cluster, so a caller can stop waiting on one that hangs.

    A call blocked in TensorFlow's C++ (a stopped master while a large feed is in
    flight; a killed master that gRPC keeps redialling until the deadline) cannot
    be interrupted; the caller stops waiting, and the thread rejoins the pool when
    the call ends.  Concurrent calls each get a thread.
    """

    def __init__(self) -> None:
        self._idle: list[_Runner] = []
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], Any]) -> _Call:
        with self._lock:
            runner = self._idle.pop() if self._idle else None
        if runner is None:
            runner = _Runner(self)
        return runner.submit(fn)

    def release(self, runner: _Runner) -> None:
        with self._lock:
            self._idle.append(runner)


_runners: weakref.WeakSet[_Runner] = weakref.WeakSet()


def wait_for_runners(seconds: float) -> None:
    """Wait at most ``seconds`` for the runners' calls still in TensorFlow (at exit; an idle runner waits in Python)."""
    deadline = time.monotonic() + seconds
    for runner in list(_runners):
        while runner.busy and time.monotonic() < deadline:
            time.sleep(0.01)
