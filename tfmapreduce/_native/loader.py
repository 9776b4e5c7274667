"""Native kernels: TensorFlow custom ops that tfmapreduce compiles on the machine that runs it, where it can.

The kernels come in families (:data:`FAMILIES`), each one C++ file in this folder that opens with the catalogue of its
ops, beside ``tmr.h`` (what the families share):

- ``words``: ``TmrWordCounts`` splits strings on ASCII whitespace and counts each distinct word in one pass (the
  map-side combine of ``word_count``).
- ``sorting``: ``TmrStableArgsort``, ``TmrSortValues`` and ``TmrSortPairs`` are radix sorts (``tmr.sort``, group jobs'
  sorted values); ``TmrStringRanks`` ranks strings in byte order.
- ``by_key``: ``TmrSelectByKey`` and ``TmrTopKByKey`` select each key's order statistics or top k in place (the median,
  quantile and top-k recipes by key); ``TmrPartition`` splits (key, value) rows to reducers by the stable key hash;
  ``TmrSumsByKey`` makes the built-in sums, counts and means by key in one pass.
- ``csv``: ``TmrDecodeCsv`` parses CSV lines as numbers; ``TmrReadCsv`` reads and parses a byte range of a CSV file.
- ``csv_scan``: ``TmrScanCsv`` decodes a byte range of a CSV file into typed, nullable columns (``scan_csv``).
- ``joins``: ``TmrJoinMatch`` finds a join's matches and ``TmrJoinTake`` writes its rows.
- ``files``: ``TmrReadRows`` reads rows of a file (its own pages, mapped, where it can); ``TmrWriteResult`` writes a
  returned result's raw bytes into the client's shared-memory file.
- ``spill``: ``TmrRemoveSpill`` removes a spilled job's folder on a worker (stock ops write files but remove none).
- ``runtime``: ``TmrCheckCancelled`` stops a given-up run between ops; ``TmrWideSum`` sums float32 values in float64.
- ``parquet``: ``TmrReadParquet`` decodes row groups of a Parquet file; ``TmrEncodeParquet`` encodes columns as one
  Parquet file.  Built against the Arrow and Parquet C++ libraries of the installed pyarrow wheel (its headers and
  libraries, found without importing it): where pyarrow is not installed this family alone is not built.

The C++ source ships with the package.  The first process that needs the kernels compiles each family, at the same
time, with the machine's C++ compiler (``$CXX``, else ``g++`` or ``c++``) against the installed TensorFlow's headers
into ``$XDG_CACHE_HOME/tfmapreduce`` (``~/.cache/tfmapreduce``): a library per family, each under a temporary name,
then renamed (whole or absent, whoever builds at the same time) to ``native-<digest>-<family>-<hash>.so``, where the
digest names every source file of this folder, TensorFlow and the flags, and the hash is the library's SHA-256, also
recorded in ``native-<digest>-<family>.sha256``.  A process loads only a library it can trust: the folder and both
files owned by this user and writable by nobody else, and the library's bytes hashing to the record, checked on the
very file it then loads.  A library that does not match its record (truncated, changed) is built again; a folder
others can write is never used (see docs/deploy.md).

A family that does not build (or load) leaves the others usable: one warning names it and the compiler's first error,
and :func:`kernels` lacks its ops, which callers ask for one by one (:func:`has`).  Workers load the kernels as they
start, and a ``LocalCluster`` builds them before it starts its workers.  A job uses the kernels only where the client
and every task of the cluster have them (asked once per cluster); elsewhere it runs the same job with stock ops: the
same result, slower.  Without a compiler, when the cache cannot be trusted (each logged), or with
``TFMAPREDUCE_NATIVE=0`` in the environment, nothing is built or loaded.
"""

from __future__ import annotations

import concurrent.futures
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
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeGuard

import tensorflow as tf

from .._base.log import ROOT
from .arrow import extra

ENV = "TFMAPREDUCE_NATIVE"
"""Set to ``0`` to build and load no native kernel (every job uses stock TensorFlow ops)."""

BUILD_TIMEOUT = 300.0
"""Seconds the compiler may take for one family."""

STOCK = "jobs use stock TensorFlow ops"

FAMILIES: dict[str, tuple[str, ...]] = {
    "words": ("tmr_word_counts",),
    "sorting": ("tmr_stable_argsort", "tmr_sort_values", "tmr_sort_pairs", "tmr_string_ranks"),
    "by_key": ("tmr_select_by_key", "tmr_top_k_by_key", "tmr_partition", "tmr_sums_by_key"),
    "csv": ("tmr_decode_csv", "tmr_read_csv"),
    "csv_scan": ("tmr_scan_csv",),
    "joins": ("tmr_join_match", "tmr_join_take"),
    "files": ("tmr_read_rows", "tmr_write_result"),
    "runtime": ("tmr_check_cancelled", "tmr_wide_sum"),
    "parquet": ("tmr_read_parquet", "tmr_encode_parquet"),
    "spill": ("tmr_remove_spill",),
}
"""Each family of kernels (built from ``<family>.cc``) and its ops, as :func:`kernels` names them."""

OPS = frozenset(op for ops in FAMILIES.values() for op in ops)
"""Every op of every family."""

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
    """16 hex digits naming the kernels' source (every ``.cc`` and ``.h`` file of this folder, by name and bytes),
    TensorFlow's version and the compiler flags: what the libraries are built from."""
    folder = importlib.resources.files(__package__)
    sources = sorted((f.name, f.read_bytes()) for f in folder.iterdir() if f.name.endswith((".cc", ".h")))
    parts = [part for name, text in sources for part in (name.encode(), text)]
    flags = [*_flags(), *(f for family in FAMILIES for f in extra(family) or [])]
    return hashlib.sha256(b"\0".join([*parts, tf.__version__.encode(), *(f.encode() for f in flags)])).hexdigest()[:16]


def record_name(digest: str, family: str) -> str:
    """The file that records the SHA-256 of the library of ``family`` built for ``digest``.

    Example:
        >>> record_name("0123456789abcdef", "csv"), library_name("0123456789abcdef", "csv", "9" * 64)
        ('native-0123456789abcdef-csv.sha256', 'native-0123456789abcdef-csv-9999999999999999.so')
    """
    return f"native-{digest}-{family}.sha256"


def library_name(digest: str, family: str, sha: str) -> str:
    """The library of ``family`` built for ``digest`` whose SHA-256 is ``sha`` (named by its content: builders never
    collide)."""
    return f"native-{digest}-{family}-{sha[:16]}.so"


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


def _verified(folder: Path, dir_fd: int, digest: str, family: str) -> tuple[int, str] | None:
    """A descriptor and the name of the library of ``family`` the record names, whose bytes hash to the record; None
    without a record.

    Raises:
        _Damaged: the library is missing or its hash is not the recorded one.  _Untrusted: see :func:`_open_own`.
    """
    try:
        record = _open_own(folder, record_name(digest, family), dir_fd)
    except FileNotFoundError:
        return None
    try:
        sha = os.read(record, 128).decode("ascii", "replace").strip()
    finally:
        os.close(record)
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise _Damaged(f"{folder / record_name(digest, family)} holds no SHA-256")
    name = library_name(digest, family, sha)
    try:
        fd = _open_own(folder, name, dir_fd)
    except FileNotFoundError:
        raise _Damaged(f"{folder / name}, recorded when it was built, is gone") from None
    if _sha256(fd) != sha:
        os.close(fd)
        raise _Damaged(f"{folder / name} does not match the hash recorded when it was built (truncated or changed since)")
    return fd, name


@contextlib.contextmanager
def _libraries() -> Iterator[dict[str, tuple[int, Path]]]:
    """The libraries of the families there are for this source and TensorFlow, those absent or damaged built now, each
    as an open descriptor of the very file that was checked and its path; a family missing where it has none to
    trust, none where the cache cannot be used (each logged)."""
    try:
        folder = cache_dir()
    except RuntimeError as e:  # no HOME, and no home directory for this user
        log.warning("no folder to keep the native kernels in (%s; set XDG_CACHE_HOME): %s", e, STOCK)
        yield {}
        return
    try:
        dir_fd = _private_folder(folder)
    except _Untrusted as e:
        log.warning("%s: %s", e, STOCK)
        yield {}
        return
    except OSError as e:  # a file where the folder should be, a read-only home
        log.warning("the folder for the native kernels, %s, is unusable (%s; set XDG_CACHE_HOME): %s", folder, e, STOCK)
        yield {}
        return
    found: dict[str, tuple[int, str]] = {}
    try:
        found = _find_or_build(folder, dir_fd)
        yield {family: (fd, folder / name) for family, (fd, name) in found.items()}
    finally:
        for fd, _ in found.values():
            os.close(fd)
        os.close(dir_fd)


def _find_or_build(folder: Path, dir_fd: int) -> dict[str, tuple[int, str]]:
    """The verified library of each family, those without one built first (all at once); a family whose library
    cannot be trusted or built is left out (logged)."""
    found: dict[str, tuple[int, str]] = {}
    missing = []
    for family in FAMILIES:
        if extra(family) is None:
            log.info("the %s family needs pyarrow (pip install tfmapreduce[parquet]): not built", family)
            continue
        try:
            hit = _verified(folder, dir_fd, digest(), family)
        except _Damaged as e:
            log.warning("%s: building it again", e)
            hit = None
        except (_Untrusted, OSError) as e:
            log.warning("%s: the %s family's ops: %s", e, family, STOCK)
            continue
        if hit is None:
            missing.append(family)
        else:
            found[family] = hit
    for family in _build(folder, dir_fd, missing) if missing else []:
        try:
            hit = _verified(folder, dir_fd, digest(), family)
        except (_Untrusted, _Damaged, OSError) as e:
            log.warning("%s: the %s family's ops: %s", e, family, STOCK)
            continue
        if hit is not None:
            found[family] = hit
    return found


def _compiler() -> str | None:
    return next(filter(None, map(shutil.which, [os.environ.get("CXX") or "", "g++", "c++"])), None)


def _build(folder: Path, dir_fd: int, families: list[str]) -> list[str]:
    """Compile the libraries of ``families`` into ``folder``, at the same time (up to a compiler a core); the families
    built.  One warning names those that failed, each with the compiler's first error."""
    compiler = _compiler()
    if compiler is None:
        log.info("no C++ compiler (set CXX, or install g++): %s instead of native kernels", STOCK)
        return []
    with importlib.resources.as_file(importlib.resources.files(__package__)) as source:
        workers = max(1, min(len(families), len(os.sched_getaffinity(0))))
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            errors = dict(
                zip(families, pool.map(lambda f: _build_one(compiler, source, folder, dir_fd, f), families), strict=True)
            )
    failed = {family: error for family, error in errors.items() if error is not None}
    if failed:
        detail = "; ".join(f"the {family} family ({family}.cc: {error})" for family, error in failed.items())
        ops = ", ".join(op for family in failed for op in FAMILIES[family])
        log.warning("building the native kernels in %s failed for %s: for %s %s", folder, detail, ops, STOCK)
    return [family for family in families if family not in failed]


def _build_one(compiler: str, source: Path, folder: Path, dir_fd: int, family: str) -> str | None:
    """Compile ``family`` into ``folder`` (a temporary name, then renamed whole) and record its hash; None, or why it
    failed (the compiler's first error line)."""
    partial = f".partial-{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(4)}"
    try:
        command = [compiler, "-O2", "-shared", "-fPIC", str(source / f"{family}.cc"), "-o", str(folder / f"{partial}.so")]
        done = subprocess.run(
            [*command, *_flags(), *(extra(family) or [])], capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False
        )
        if done.returncode != 0:
            lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
            first = next((line for line in lines if re.search(r"\berror\b", line)), lines[0] if lines else "")
            raise OSError(f"{compiler} exited {done.returncode}" + (f": {first}" if first else ""))
        fd = os.open(f"{partial}.so", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask made it: nobody else may write it
            sha = _sha256(fd)
        finally:
            os.close(fd)
        os.replace(f"{partial}.so", library_name(digest(), family, sha), src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        fd = os.open(
            f"{partial}.sha256", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
        )
        try:
            os.write(fd, sha.encode() + b"\n")
        finally:
            os.close(fd)
        os.replace(f"{partial}.sha256", record_name(digest(), family), src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except subprocess.TimeoutExpired:
        return f"{compiler} took more than {BUILD_TIMEOUT:.0f} s"
    except OSError as e:  # no compiler that works, a read-only cache
        for leftover in (f"{partial}.so", f"{partial}.sha256"):
            with contextlib.suppress(OSError):
                os.unlink(leftover, dir_fd=dir_fd)
        return str(e)
    return None


def build() -> dict[str, str]:
    """The path of each family's library for this source and TensorFlow, checked against its recorded hash and
    compiled now if absent or damaged; a family is missing where it has none to trust (no compiler, a cache folder
    others can write, a failed build: logged)."""
    with _libraries() as found:
        return {family: str(path) for family, (_, path) in found.items()}


@functools.cache
def kernels() -> Any | None:
    """The native kernels' ops (``kernels().tmr_word_counts(text)``), loaded in this process: those of every family
    that built and loaded here (ask :func:`has`); None where none did, or ``TFMAPREDUCE_NATIVE=0``.

    Example:
        >>> ops = kernels()  # None where no C++ compiler is found
        >>> counts = ops.tmr_word_counts(["to be or", "not to be"])[1] if has(ops, "tmr_word_counts") else tf.constant([2, 2, 1, 1])
        >>> counts.numpy().tolist()  # to, be, or, not
        [2, 2, 1, 1]
    """
    if os.environ.get(ENV, "1") == "0":
        return None
    ops: dict[str, Any] = {}
    with _libraries() as found:
        for family, (fd, path) in found.items():
            # The descriptor's file is the one whose hash was checked, whatever happens to the name meanwhile.
            by_fd = f"/proc/self/fd/{fd}"
            try:
                module = tf.load_op_library(by_fd if os.path.exists(by_fd) else str(path))
            except (tf.errors.OpError, OSError) as e:
                log.warning(
                    "loading the native kernels' %s family from %s failed (%s): its ops use stock TensorFlow ops", family, path, e
                )
                continue
            ops.update((op, getattr(module, op)) for op in FAMILIES[family])
    return types.SimpleNamespace(**ops) if ops else None


def has(native: Any | None, op: str) -> TypeGuard[Any]:
    """Whether ``native`` (what :func:`kernels` gave, or None) has the op named ``op`` (``"tmr_sort_values"``, one of
    :data:`OPS`): False where its family did not build or load here.

    Example:
        >>> has(None, "tmr_word_counts"), has(types.SimpleNamespace(tmr_word_counts=len), "tmr_word_counts")
        (False, True)
    """
    if op not in OPS:
        raise ValueError(f"{op!r} is no native op (they are {', '.join(sorted(OPS))})")
    return native is not None and hasattr(native, op)
