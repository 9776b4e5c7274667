"""The folder of a LocalCluster's worker logs, named after its client so that a dead client's folder can be swept.

A folder is ``tfmapreduce-logs-<pid>-<start>-<random>`` in the temporary directory, where
``<start>`` is the client's start time (``/proc/<pid>/stat``, field 22) and tells a reused pid
apart.  The cluster removes its folder when it closes; a client killed with SIGKILL cannot, so
each new folder first sweeps those of clients that are gone (as shared memory does).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile

PREFIX = "tfmapreduce-logs-"


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot, or None if there is no such process (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return None


def _owner_gone(pid: int, start: str) -> bool:
    if not os.path.isdir("/proc/self"):
        return False  # no way to tell here: keep it
    return _start_time(pid) != start


def sweep(root: str | None = None) -> list[str]:
    """Remove this user's log folders whose client process is gone; return their names.

    Example:
        >>> isinstance(sweep(), list)
        True
    """
    root = root or tempfile.gettempdir()
    removed: list[str] = []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(PREFIX):
            continue
        pid, _, rest = name[len(PREFIX) :].partition("-")
        start = rest.partition("-")[0]
        if not pid.isdigit() or not start.isdigit() or int(pid) == os.getpid():
            continue
        path = os.path.join(root, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and _owner_gone(int(pid), start):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(name)
    return removed


def make() -> str:
    """A new private log folder for this process, after a sweep of dead clients' folders.

    Example:
        >>> path = make()
        >>> os.path.basename(path).startswith(f"{PREFIX}{os.getpid()}-")
        True
        >>> os.rmdir(path)
    """
    sweep()
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-{_start_time(os.getpid()) or 0}-")
