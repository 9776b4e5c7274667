"""Child processes bound to the client's life: started from one long-lived thread, killed by the kernel when it dies."""

from __future__ import annotations

import ctypes
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any


class _Spawner:
    """One long-lived thread that starts every child process.

    A child asks the kernel for SIGKILL when its parent dies (PR_SET_PDEATHSIG);
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


def die_with_parent() -> None:
    """In a child before exec: ask the kernel to SIGKILL it when the spawning thread ends (Linux; elsewhere nothing)."""
    if sys.platform.startswith("linux"):
        # PR_SET_PDEATHSIG with SIGKILL: a SIGTERM would wait, pending, in a worker that is stopped (SIGSTOP)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def start(
    argv: Sequence[str],
    *,
    log: str,
    env: Mapping[str, str] | None = None,
    pass_fds: Sequence[int] = (),
    before: Callable[[], None] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session of its own, stdout and stderr to the file ``log``, dying with this process.

    ``before`` runs in the child between fork and exec, before :func:`die_with_parent`.
    """
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = _Spawner()

    def prepare() -> None:
        if before is not None:
            before()
        die_with_parent()

    with open(log, "wb") as out:
        process: subprocess.Popen[bytes] = _spawner.call(
            lambda: subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=None if env is None else dict(env),
                pass_fds=tuple(pass_fds),
                preexec_fn=prepare,
                start_new_session=True,
            )
        )
    return process
