"""The output directory of a write on a shared file system: claimed, committed and cleaned up by the client.

A write claims its directory by making ``directory/_temporary`` (one ``mkdir``: atomic on a local or POSIX shared
file system), so a second write into the same directory at once is refused instead of mixing its parts with the
first's.  Each attempt writes under ``_temporary/<attempt>/``, beside a marker file the graph reads just before it
writes a part: an attempt whose folder is gone (abandoned, failed or committed past) writes nothing.  The commit
moves the old entries aside (``overwrite=True``), the new parts in, writes ``_SUCCESS`` and only then removes
``_temporary``, releasing the claim.  Nothing here follows a symbolic link: a link is moved or removed, never its
target.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from .._base.errors import OutputError
from .._io.files.encode import SUCCESS

TEMPORARY = "_temporary"
"""The folder of a write's attempts, inside its directory; it exists exactly while a write holds the directory."""

MARKER = "_attempt"
"""The empty file in each attempt's folder that the graph reads before it writes a part there."""

_OLD = "_old"
"""The folder under ``_temporary`` that holds the old entries of an overwrite until the new parts are in place."""

SETTLE_SECONDS = 0.5
"""How long a failed write's clean-up keeps removing its attempt folder should a part still being written reappear."""


def _local(path: str) -> bool:
    return "://" not in path


def remove(path: str) -> None:
    """Remove ``path``: a file or link unlinked (never its target), a folder with everything under it; absent is fine."""
    if not _local(path):
        if tf.io.gfile.isdir(path):
            tf.io.gfile.rmtree(path)
        elif tf.io.gfile.exists(path):
            tf.io.gfile.remove(path)
        return
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)  # unlinks the links inside, never follows them


def _exists(path: str) -> bool:
    return os.path.lexists(path) if _local(path) else bool(tf.io.gfile.exists(path))


def _entries(directory: str) -> list[str]:
    return sorted(e.rstrip("/") for e in (os.listdir(directory) if _local(directory) else tf.io.gfile.listdir(directory)))


def _rename(source: str, target: str) -> None:
    if _local(source):
        os.replace(source, target)  # renames a link itself
    else:
        tf.io.gfile.rename(source, target, overwrite=True)


def absolute(name: str, directory: Any, overwrite: bool) -> str:
    """``directory`` as an absolute path (or a URL as it is), its arguments checked.

    Raises:
        TypeError: ``directory`` is not a path, or ``overwrite`` not a bool.
        OutputError: the path holds a NUL byte (no file system can name it).
    """
    if not isinstance(directory, str | os.PathLike):
        raise TypeError(f"{name}: directory must be a path (str or os.PathLike), got {type(directory).__name__} {directory!r}")
    if not isinstance(overwrite, bool):
        raise TypeError(f"{name}: overwrite must be True or False, got {type(overwrite).__name__} {overwrite!r}")
    path = os.fspath(directory)
    if not isinstance(path, str):
        raise TypeError(f"{name}: directory must be a str path, got bytes {path!r}")
    if "\0" in path:
        raise OutputError(f"{name}: directory {path!r} holds a NUL byte, which no file name can hold; remove it")
    return path if "://" in path else os.path.abspath(os.path.expanduser(path))


def claim(name: str, directory: Any, overwrite: bool) -> tuple[str, bool]:
    """The directory as an absolute path, made if new and claimed for this write; and whether this call made it.

    Raises:
        OutputError: it is a file, another write holds it (its ``_temporary`` exists), it holds entries and
            ``overwrite`` is False, or it cannot be made.
        TypeError: ``directory`` is not a path, or ``overwrite`` not a bool.
    """
    path = absolute(name, directory, overwrite)
    if _exists(path) and not tf.io.gfile.isdir(path):
        raise OutputError(f"{name}: {path} is a file; pass a directory for the part files")
    made = not _exists(path)
    temporary = os.path.join(path, TEMPORARY)
    try:
        if made:
            tf.io.gfile.makedirs(path)
        if _local(path):
            os.mkdir(temporary)  # atomic: of two writes at once, one makes it
        elif tf.io.gfile.exists(temporary):
            raise FileExistsError(temporary)
        else:
            tf.io.gfile.mkdir(temporary)
    except FileExistsError:
        raise OutputError(
            f"{name}: another write into {path} is in progress (its {TEMPORARY} folder exists); a directory takes one "
            f"write at a time: wait for it and pass overwrite=True, or choose another directory (if no write is running, "
            f"one was interrupted: remove {temporary})"
        ) from None
    except (OSError, tf.errors.OpError) as e:
        cause = e.message if isinstance(e, tf.errors.OpError) else e.strerror or str(e)
        what = "cannot be made" if made else f"cannot take a write (no {TEMPORARY} folder can be made in it)"
        raise OutputError(f"{name}: {path} {what} ({cause}); choose a directory the client and workers can write") from None
    entries = [e for e in _entries(path) if e != TEMPORARY]
    if entries and not overwrite:
        remove(temporary)
        shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
        raise OutputError(
            f"{name}: {path} is not empty ({len(entries)} entries: {shown}); pass overwrite=True to replace what it holds "
            "once the write succeeds, or choose a new directory"
        )
    return path, made


def abandon(temporary: str, prefix: str) -> None:
    """Remove the attempt folders in ``temporary`` whose names begin with ``prefix`` (a run's earlier attempts)."""
    if _exists(temporary):
        for entry in _entries(temporary):
            if entry.startswith(prefix):
                remove(os.path.join(temporary, entry))


def open_attempt(folder: str) -> None:
    """Make an attempt's folder and its marker (the graph writes a part only while the marker is there)."""
    tf.io.gfile.makedirs(folder)
    with tf.io.gfile.GFile(os.path.join(folder, MARKER), "w") as marker:
        marker.write("")


def commit(name: str, directory: str, folder: str, names: Sequence[str], overwrite: bool) -> None:
    """Move the parts ``names`` of the attempt in ``folder`` into ``directory`` (its old entries first moved aside where
    ``overwrite``), write ``_SUCCESS``, then remove ``_temporary``: the other attempts' folders go first, so their late
    writes find no marker.

    Raises:
        OutputError: an entry could not be moved; the directory then holds what it held before (its old output).
    """
    temporary = os.path.join(directory, TEMPORARY)
    for other in _entries(temporary):
        if os.path.join(temporary, other) != folder:
            remove(os.path.join(temporary, other))
    moved: list[tuple[str, str]] = []  # (from, to), undone in reverse on failure
    try:
        if overwrite:
            old = os.path.join(temporary, _OLD)
            tf.io.gfile.makedirs(old)
            for entry in _entries(directory):
                if entry != TEMPORARY:
                    _rename(os.path.join(directory, entry), os.path.join(old, entry))
                    moved.append((os.path.join(directory, entry), os.path.join(old, entry)))
        for part in names:
            _rename(os.path.join(folder, part), os.path.join(directory, part))
            moved.append((os.path.join(folder, part), os.path.join(directory, part)))
        with tf.io.gfile.GFile(os.path.join(directory, SUCCESS), "w") as marker:
            marker.write("")  # (a GFile never written is never made)
    except (OSError, tf.errors.OpError) as e:
        for source, target in reversed(moved):
            _rename(target, source)
        cause = e.message if isinstance(e, tf.errors.OpError) else e.strerror or str(e)
        raise OutputError(
            f"{name}: the parts were written but could not be moved into {directory} ({cause}); it holds what it held "
            "before: check that the client may rename entries there, and write again"
        ) from None
    remove(temporary)


def discard(directory: str, made: bool, settle: float = SETTLE_SECONDS) -> None:
    """After a failed write: its ``_temporary`` removed (again, for ``settle`` seconds, should a part still being
    written when the run failed reappear: 0 where the run's clean-up waited for every part, as ``Write`` does), and
    the directory too if this write made it and it is empty."""
    temporary = os.path.join(directory, TEMPORARY)
    until = time.monotonic() + settle
    while True:
        with contextlib.suppress(OSError, tf.errors.OpError):  # a part appeared as its folder was removed: next pass
            remove(temporary)
        if time.monotonic() >= until:
            break
        time.sleep(0.05)
    try:
        if made and not _entries(directory):
            os.rmdir(directory) if _local(directory) else tf.io.gfile.rmtree(directory)
    except (OSError, tf.errors.OpError):
        pass  # not empty after all (or gone): left as it is
