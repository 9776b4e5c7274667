"""The ``file`` mechanism's folders under ``/dev/shm``: one per user, and in it one per client, locked for its life.

A client's folder is ``/dev/shm/tfmapreduce-<uid>/<pid>-<random>``, mode 0700.  The client
holds an exclusive ``flock`` on the folder from the moment it makes it until it exits; the
kernel drops the lock when the process dies, however it dies.  A sweep removes a folder only
when it can take that lock itself: its owner is gone.  A process id would not tell: a client
in another pid namespace (a container sharing ``/dev/shm``) has a pid that names another
process here, or none.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import secrets
import shutil
import stat
import threading

from .._base.errors import ClusterError

SHM_ROOT = "/dev/shm"
"""Where the ``file`` mechanism keeps its per-user directory."""


def user_root() -> str:
    """The ``file`` mechanism's per-user directory, created 0700 and checked to be the user's own (not a link).

    Raises:
        ClusterError: the path exists but is not a private directory of this user.
    """
    root = os.path.join(SHM_ROOT, f"tfmapreduce-{os.getuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(root, 0o700)
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        raise ClusterError(
            f"{root} must be a directory owned by uid {os.getuid()} with mode 0700 (got mode {stat.S_IMODE(info.st_mode):o}, "
            f"uid {info.st_uid}); remove it, or pass transfer='feed'"
        )
    return root


def _lock(path: str, *, wait: bool) -> int | None:
    """An open descriptor of the folder ``path`` holding its exclusive lock; None where another process holds it
    (``wait=False``) or the folder is gone or not a folder."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except OSError:  # BlockingIOError: its owner lives
        os.close(fd)
        return None
    return fd


def sweep(root: str | None = None) -> list[str]:
    """Remove the per-client directories under the per-user directory whose owner is gone (their lock is free);
    return their names.

    Example:
        >>> mine = client_dir()
        >>> os.path.basename(mine) in sweep()  # this process holds its folder's lock: kept
        False
    """
    root = root or user_root()
    removed = []
    for name in os.listdir(root):
        path = os.path.join(root, name)
        fd = _lock(path, wait=False)  # a descriptor of its own: refused while any process, this one too, holds it
        if fd is None:
            continue
        try:
            shutil.rmtree(path, ignore_errors=True)
        finally:
            os.close(fd)
        removed.append(name)
    return removed


_client_dir: list[str] = []  # this process's directory for the file mechanism, made once
_client_fd: list[int] = []  # the descriptor that holds its lock
_client_dir_lock = threading.Lock()


def client_dir() -> str:
    """This process's private directory for the ``file`` mechanism, locked for the process's life (made on first
    use, after a sweep of the folders of clients that are gone)."""
    with _client_dir_lock:
        if not _client_dir or not os.path.isdir(_client_dir[0]):
            _release()
            for attempt in range(3):
                root = user_root()
                sweep(root)
                path = os.path.join(root, f"{os.getpid()}-{secrets.token_hex(8)}")
                try:
                    os.mkdir(path, 0o700)
                except FileNotFoundError:  # another client removed the empty per-user folder meanwhile
                    if attempt == 2:
                        raise
                    continue
                fd = _lock(path, wait=True)
                # A sweep may have taken the lock between mkdir and flock and removed the folder: make another.
                if fd is not None and _same_file(fd, path):
                    _client_dir[:], _client_fd[:] = [path], [fd]
                    break
                if fd is not None:
                    os.close(fd)
                if attempt == 2:
                    raise ClusterError(f"{root}: a sweep removed this client's new folder three times; pass transfer='feed'")
        return _client_dir[0]


def _same_file(fd: int, path: str) -> bool:
    try:
        here, there = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _release() -> None:
    for fd in _client_fd:
        with contextlib.suppress(OSError):
            os.close(fd)
    _client_fd.clear()
    _client_dir.clear()


def remove_client_dir() -> None:
    """Remove this process's directory, and the per-user folder if that leaves it empty (at exit; safe when there is none)."""
    with _client_dir_lock:
        for path in _client_dir:
            shutil.rmtree(path, ignore_errors=True)
            with contextlib.suppress(OSError):  # not empty: other clients' folders
                os.rmdir(os.path.dirname(path))
        _release()


atexit.register(remove_client_dir)
