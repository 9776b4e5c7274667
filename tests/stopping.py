"""Stopping a worker for a test: SIGSTOP, then wait until the kernel has stopped every thread of the process.

``kill(pid, SIGSTOP)`` returns once the signal is queued; each thread stops only when it next runs, and on a loaded
machine that took up to 0.2 s (83 ms at the median) after ``kill`` returned.  A gRPC thread of the "stopped" worker could
serve a whole run in that time, so a test that needs the task silent waits for it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

STOP_WAIT = 10.0
"""Seconds a process may take to stop entirely before the test fails saying so."""


def running_threads(pid: int) -> list[int]:
    """The threads of ``pid`` that are not stopped (a thread that exited meanwhile is left out)."""
    left = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("T", "t"):
            left.append(int(stat.parent.name))
    return left


def stop(pid: int) -> None:
    """SIGSTOP ``pid`` and return once every thread of it has stopped.

    Raises:
        AssertionError: a thread still runs after :data:`STOP_WAIT` seconds (the process is continued first).
    """
    os.kill(pid, signal.SIGSTOP)
    end = time.monotonic() + STOP_WAIT
    while left := running_threads(pid):
        if time.monotonic() > end:
            os.kill(pid, signal.SIGCONT)
            raise AssertionError(f"threads {left} of process {pid} still ran {STOP_WAIT:g} s after its SIGSTOP")
        time.sleep(0.001)
