"""Native kernels: TensorFlow custom ops that tfmapreduce compiles on the machine that runs it, where it can.

The kernels (``_native.cc``, each described at its top): ``TmrWordCounts`` splits strings on ASCII
whitespace and counts each distinct word in one pass (the map-side combine of ``word_count``);
``TmrStableArgsort`` and ``TmrSortPairs`` are radix sorts (``tmr.sort``, group jobs' sorted values);
``TmrSelectByKey`` and ``TmrTopKByKey`` select each key's order statistics or top k in place (the
median, quantile and top-k recipes by key); ``TmrPartition`` splits (key, value) rows to reducers
by the stable key hash; ``TmrStringRanks`` ranks strings in byte order; ``TmrJoinMatch`` finds a
join's matches and ``TmrJoinTake`` writes its rows; ``TmrCheckCancelled`` stops a given-up run between ops; ``TmrWriteResult`` writes a
returned result's raw bytes into the client's shared-memory file.

The C++ source ships with the package.  The first process that needs the kernels compiles it
with the machine's C++ compiler (``$CXX``, else ``g++`` or ``c++``) against the installed
TensorFlow's headers into ``$XDG_CACHE_HOME/tfmapreduce`` (``~/.cache/tfmapreduce``):
under a temporary name, then renamed (whole or absent, whoever builds at the same time) to
``native-<digest>-<hash>.so``, where the digest names the source, TensorFlow and the flags, and
the hash is the library's SHA-256, also recorded in ``native-<digest>.sha256``.  A process loads
only a library it can trust: the folder and both files owned by this user and writable by nobody
else, and the library's bytes hashing to the record, checked on the very file it then loads.  A
library that does not match its record (truncated, changed) is built again; a folder others can
write is never used (see docs/deploy.md).

Workers load the kernels as they start, and a ``LocalCluster`` builds them before it starts
its workers.  A job uses a kernel only where the client and every task of the cluster have it
(asked once per cluster); elsewhere it runs the same job with stock ops: the same result, slower.
Without a compiler, when the build fails, when the cache cannot be trusted (each logged), or with
``TFMAPREDUCE_NATIVE=0`` in the environment, nothing is built or loaded.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.resources
import os
import re
import secrets
import shutil
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import tensorflow as tf

from .._base.log import ROOT

ENV = "TFMAPREDUCE_NATIVE"
"""Set to ``0`` to build and load no native kernel (every job uses stock TensorFlow ops)."""

BUILD_TIMEOUT = 300.0
"""Seconds the compiler may take."""

STOCK = "jobs use stock TensorFlow ops"

log = ROOT.getChild("native")


class _Untrusted(Exception):
    """A cache folder or file this process must not load from (the message says why and what to do)."""


class _Damaged(Exception):
    """A library that does not match the hash recorded when it was built."""


def cache_dir() -> Path:
    """Where built kernels are kept: ``$XDG_CACHE_HOME/tfmapreduce``, else ``~/.cache/tfmapreduce``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tfmapreduce"


def _flags() -> list[str]:
    return [*tf.sysconfig.get_compile_flags(), *tf.sysconfig.get_link_flags()]


@functools.cache
def digest() -> str:
    """16 hex digits naming the kernels' source, TensorFlow's version and the compiler flags: what a library is built from."""
    source = importlib.resources.files(__package__).joinpath("native.cc").read_bytes()
    return hashlib.sha256(b"\0".join([source, tf.__version__.encode(), *(f.encode() for f in _flags())])).hexdigest()[:16]


def record_name(digest: str) -> str:
    """The file that records the SHA-256 of the library built for ``digest``.

    Example:
        >>> record_name("0123456789abcdef"), library_name("0123456789abcdef", "9" * 64)
        ('native-0123456789abcdef.sha256', 'native-0123456789abcdef-9999999999999999.so')
    """
    return f"native-{digest}.sha256"


def library_name(digest: str, sha: str) -> str:
    """The library built for ``digest`` whose SHA-256 is ``sha`` (named by its content: builders never collide)."""
    return f"native-{digest}-{sha[:16]}.so"


def _private_folder(folder: Path) -> int:
    """A descriptor of ``folder`` (made 0700 if absent), checked to be a directory, not a link, owned by this user and
    writable by nobody else.

    Raises:
        _Untrusted: it is someone else's, or others may write it.  OSError: it cannot be made or opened.
    """
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700, parents=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    info = os.fstat(fd)
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        os.close(fd)
        raise _Untrusted(
            f"{folder} is not a private folder of this user (owner uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):o}; "
            f"a kernel is loaded only from a folder of uid {os.getuid()} that nobody else can write): remove it, or set "
            "XDG_CACHE_HOME to a folder of your own"
        )
    return fd


def _open_own(folder: Path, name: str, dir_fd: int) -> int:
    """A descriptor of the regular file ``name`` in the folder ``dir_fd``, checked to be this user's and writable by nobody else.

    Raises:
        FileNotFoundError: there is none.  _Untrusted: it is a link, not a file, someone else's, or others may write it.
    """
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as e:  # ELOOP: a symbolic link
        raise _Untrusted(f"{folder / name} cannot be opened as a plain file ({e}); remove it") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        os.close(fd)
        raise _Untrusted(
            f"{folder / name} is not this user's own file (owner uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):o}); "
            "remove it"
        )
    return fd


def _sha256(fd: int) -> str:
    hasher = hashlib.sha256()
    os.lseek(fd, 0, os.SEEK_SET)
    while block := os.read(fd, 1 << 20):
        hasher.update(block)
    return hasher.hexdigest()


def _verified(folder: Path, dir_fd: int, digest: str) -> tuple[int, str] | None:
    """A descriptor and the name of the library the record names, whose bytes hash to the record; None without a record.

    Raises:
        _Damaged: the library is missing or its hash is not the recorded one.  _Untrusted: see :func:`_open_own`.
    """
    try:
        record = _open_own(folder, record_name(digest), dir_fd)
    except FileNotFoundError:
        return None
    try:
        sha = os.read(record, 128).decode("ascii", "replace").strip()
    finally:
        os.close(record)
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise _Damaged(f"{folder / record_name(digest)} holds no SHA-256")
    name = library_name(digest, sha)
    try:
        fd = _open_own(folder, name, dir_fd)
    except FileNotFoundError:
        raise _Damaged(f"{folder / name}, recorded when it was built, is gone") from None
    if _sha256(fd) != sha:
        os.close(fd)
        raise _Damaged(f"{folder / name} does not match the hash recorded when it was built (truncated or changed since)")
    return fd, name


@contextlib.contextmanager
def _library() -> Iterator[tuple[int, Path] | None]:
    """The kernels' library for this source and TensorFlow, built now if absent or damaged, as an open descriptor of the
    very file that was checked and its path; None where there is none to trust (logged)."""
    try:
        folder = cache_dir()
    except RuntimeError as e:  # no HOME, and no home directory for this user
        log.warning("no folder to keep the native kernels in (%s; set XDG_CACHE_HOME): %s", e, STOCK)
        yield None
        return
    try:
        dir_fd = _private_folder(folder)
    except _Untrusted as e:
        log.warning("%s: %s", e, STOCK)
        yield None
        return
    except OSError as e:  # a file where the folder should be, a read-only home
        log.warning("the folder for the native kernels, %s, is unusable (%s; set XDG_CACHE_HOME): %s", folder, e, STOCK)
        yield None
        return
    found = None
    try:
        found = _find_or_build(folder, dir_fd)
        yield (found[0], folder / found[1]) if found else None
    finally:
        if found:
            os.close(found[0])
        os.close(dir_fd)


def _find_or_build(folder: Path, dir_fd: int) -> tuple[int, str] | None:
    try:
        try:
            found = _verified(folder, dir_fd, digest())
        except _Damaged as e:
            log.warning("%s: building it again", e)
            found = None
        if found is None and _build(folder, dir_fd):
            found = _verified(folder, dir_fd, digest())
    except (_Untrusted, _Damaged, OSError) as e:
        log.warning("%s: %s", e, STOCK)
        return None
    return found


def _build(folder: Path, dir_fd: int) -> bool:
    """Compile the kernels into ``folder`` (a temporary name, then renamed whole) and record their hash; False if that
    fails (logged)."""
    compiler = next(filter(None, map(shutil.which, [os.environ.get("CXX") or "", "g++", "c++"])), None)
    if compiler is None:
        log.info("no C++ compiler (set CXX, or install g++): %s instead of native kernels", STOCK)
        return False
    partial = f".partial-{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(4)}"
    try:
        with importlib.resources.as_file(importlib.resources.files(__package__).joinpath("native.cc")) as path:
            command = [compiler, "-O2", "-shared", "-fPIC", str(path), "-o", str(folder / f"{partial}.so"), *_flags()]
            done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
        if done.returncode != 0:
            tail = " | ".join(done.stderr.strip().splitlines()[-3:])
            raise OSError(f"{compiler} exited {done.returncode}: {tail}")
        fd = os.open(f"{partial}.so", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask made it: nobody else may write it
            sha = _sha256(fd)
        finally:
            os.close(fd)
        os.replace(f"{partial}.so", library_name(digest(), sha), src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        fd = os.open(
            f"{partial}.sha256", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
        )
        try:
            os.write(fd, sha.encode() + b"\n")
        finally:
            os.close(fd)
        os.replace(f"{partial}.sha256", record_name(digest()), src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except (OSError, subprocess.TimeoutExpired) as e:  # no compiler that works, a read-only cache, a build too slow
        log.warning("building the native kernels in %s failed (%s): %s", folder, e, STOCK)
        for leftover in (f"{partial}.so", f"{partial}.sha256"):
            with contextlib.suppress(OSError):
                os.unlink(leftover, dir_fd=dir_fd)
        return False
    return True


def build() -> str | None:
    """The path of the kernels' shared library for this source and TensorFlow, checked against its recorded hash and
    compiled now if absent or damaged; None if there is none to trust (no compiler, a cache folder others can write,
    a failed build: logged)."""
    with _library() as found:
        return str(found[1]) if found else None


@functools.cache
def kernels() -> Any | None:
    """The native kernels' op module (``kernels().tmr_word_counts(text)``), loaded in this process; None where
    they cannot be built or loaded, or ``TFMAPREDUCE_NATIVE=0``.

    Example:
        >>> ops = kernels()  # None where no C++ compiler is found
        >>> counts = ops.tmr_word_counts(["to be or", "not to be"])[1] if ops else tf.constant([2, 2, 1, 1])
        >>> counts.numpy().tolist()  # to, be, or, not
        [2, 2, 1, 1]
    """
    if os.environ.get(ENV, "1") == "0":
        return None
    with _library() as found:
        if found is None:
            return None
        fd, path = found
        # The descriptor's file is the one whose hash was checked, whatever happens to the name meanwhile.
        by_fd = f"/proc/self/fd/{fd}"
        try:
            return tf.load_op_library(by_fd if os.path.exists(by_fd) else str(path))
        except (tf.errors.OpError, OSError) as e:
            log.warning("loading the native kernels from %s failed (%s): %s", path, e, STOCK)
            return None
