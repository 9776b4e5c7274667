"""Same-host shipping: shards handed to workers on the client's machine through private shared memory.

A program's :class:`MappedBuffer` buffer (a memfd the worker's graph maps with ``ImmutableConst``),
filled each run; or a private file per run (:class:`Staging`: a memfd passed as
``/proc/<pid>/fd/<n>``, or a 0600 file under ``/dev/shm/tfmapreduce-<uid>``) whose path is fed.
Every staged file is closed or unlinked when its run ends, however it ends.  The design and its
measurements are in docs/architecture.md ("Same-host shipping").
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import queue
import secrets
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar, runtime_checkable

import attrs
import numpy as np
import tensorflow as tf

from .._base.errors import ClusterError
from .._base.plan import Shard
from .shmdir import client_dir
from .strings import unpacked

R = TypeVar("R")

MIN_BYTES = 1 << 20
"""Shards smaller than this go through feeds: staging a file costs more than feeding a few kB."""

STAGED = "shm-staged"
"""The path of a shard whose shared memory is staged per run (a file fed by path), never a program's mapped buffer:
speculative copies, whose losers may still run when the next run starts."""

TRANSFERS = ("auto", "shm", "feed")
"""What ``transfer=`` accepts: shared memory where visible (auto), shared memory or an error, feeds always."""

MAPPED_SHARE = 0.25
"""At most this share of the host's memory is held by the mapped buffers of kept programs."""


DECODABLE = frozenset(
    np.dtype(t)
    for t in (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.bool_)
)
"""Element types ``tf.io.decode_raw`` reads (in native byte order)."""


@functools.cache
def default_mechanism() -> str:
    """``"memfd"`` where the kernel and Python offer ``memfd_create`` (Linux), else ``"file"``."""
    return "memfd" if hasattr(os, "memfd_create") and os.path.isdir(f"/proc/{os.getpid()}/fd") else "file"


def can_stage(dtype: np.dtype[Any], nbytes: int, min_bytes: int = MIN_BYTES) -> bool:
    """Whether ``nbytes`` of ``dtype`` may go through shared memory: a type the graph decodes (objects: 1-D strings,
    as ``strings.packed`` bytes), at least ``min_bytes``.

    Example:
        >>> can_stage(np.dtype(np.float32), 4 << 20), can_stage(np.dtype(np.float32), 400), can_stage(np.dtype(np.uint64), 4 << 20)
        (True, False, False)
    """
    decodable = dtype.kind == "O" or (dtype in DECODABLE and dtype.isnative)
    return decodable and nbytes >= max(1, min_bytes)


def read_tensor(path: tf.Tensor, dtype: np.dtype[Any], shape: Sequence[int]) -> tf.Tensor:
    """Inside a graph, on the reading device: the array of ``dtype`` and ``shape`` held by the file named by ``path``
    (1-D strings: the bytes ``strings.packed`` made)."""
    if dtype.kind == "O":
        return unpacked(tf.io.read_file(path), shape[0])
    raw = tf.io.decode_raw(tf.io.read_file(path), tf.as_dtype(dtype))
    return tf.reshape(raw, tuple(shape))


_mapped_bytes = [0]  # bytes held by live MappedBuffer buffers
_mapped_lock = threading.Lock()


def _mapped_limit() -> int:
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * MAPPED_SHARE)


def _release(fd: int, nbytes: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
    with _mapped_lock:
        _mapped_bytes[0] -= nbytes


class MappedBuffer:
    """A shard's shared-memory buffer for the life of a compiled program: filled in place each run, mapped by its graph.

    Example:
        >>> buffer = MappedBuffer.reserve(16)
        >>> with tf.Graph().as_default():
        ...     tensor = buffer.tensor(np.dtype(np.int32), (4,))
        >>> buffer.fill(np.arange(4, dtype=np.int32))
        >>> np.frombuffer(open(buffer.path, "rb").read(), np.int32)
        array([0, 1, 2, 3], dtype=int32)
    """

    def __init__(self, nbytes: int) -> None:
        fd = os.memfd_create("tfmapreduce-program", os.MFD_CLOEXEC)
        self._finalizer = weakref.finalize(self, _release, fd, nbytes)  # closed with the program that holds it
        os.ftruncate(fd, nbytes)  # never shrunk: a worker mapping it must not fault past its end
        self._mmap = mmap.mmap(fd, nbytes)
        self._view: np.ndarray[Any, Any] | None = np.frombuffer(self._mmap, np.uint8)
        self.path = f"/proc/{os.getpid()}/fd/{fd}"
        self.lock = threading.Lock()
        """Held from a run's write until that run ends: runs of one program take turns."""

    @classmethod
    def reserve(cls, nbytes: int) -> MappedBuffer | None:
        """A new buffer of ``nbytes``, or None where there is no memfd or mapped buffers already hold their share of memory."""
        if default_mechanism() != "memfd":
            return None
        with _mapped_lock:
            if _mapped_bytes[0] + nbytes > _mapped_limit():
                return None
            _mapped_bytes[0] += nbytes
        try:
            return cls(nbytes)
        except OSError:
            with _mapped_lock:
                _mapped_bytes[0] -= nbytes
            return None

    def tensor(self, dtype: np.dtype[Any], shape: Sequence[int]) -> tf.Tensor:
        """Inside a graph, on the reading device: the buffer's bytes as an array of ``dtype`` and ``shape``, without a copy."""
        return tf.raw_ops.ImmutableConst(dtype=tf.as_dtype(dtype), shape=tuple(shape), memory_region_name=self.path)

    def fill(self, array: np.ndarray[Any, Any]) -> None:
        """Copy ``array``'s bytes (C order) into the buffer (numpy lets go of the GIL: fills run in parallel)."""
        if self._view is None:
            raise ClusterError("this program's cluster was closed; run the job on an open cluster")
        np.copyto(self._view, np.ascontiguousarray(array).reshape(-1).view(np.uint8))

    def close(self) -> None:
        """Free the buffer now (its program's cluster closed), unless a run holds it: then it goes with its program."""
        if not self.lock.acquire(blocking=False):
            return
        try:
            if self._view is not None:
                self._view = None  # the mapping's only export: it can close now
                self._mmap.close()
                self._finalizer()
        finally:
            self.lock.release()


def guard(mapped: tf.Tensor, after: Any) -> tf.Tensor:
    """One element of a mapped shard, read once ``after`` (its partial) is computed: fetch it with the run.

    The mapping is read-only, and TensorFlow lets an op write its output into an input buffer that
    nothing else references (``x - mean`` over the shard would, and the worker would crash).  The
    guard's pending input is a second reference for as long as the shard's ops run.
    """
    with tf.control_dependencies([t for t in tf.nest.flatten(after) if isinstance(t, tf.Tensor | tf.Operation)]):
        return tf.reshape(mapped, [-1])[:1]


@runtime_checkable
class Stageable(Protocol):
    """A source whose shards can travel through shared memory (host arrays)."""

    def stageable(self, shard: Shard, min_bytes: int) -> bool:
        """Whether ``shard`` of this source may go through shared memory (see :func:`can_stage`)."""
        ...


def _write_all(fd: int, data: memoryview) -> None:
    done = 0
    while done < len(data):
        done += os.write(fd, data[done:])


_to_close: queue.SimpleQueue[list[int]] = queue.SimpleQueue()
_closer_started = False
_closer_lock = threading.Lock()


def _close_later(fds: list[int]) -> None:
    """Close ``fds`` on the one closing thread (a daemon: it runs no TensorFlow, and the kernel closes what it leaves)."""
    global _closer_started
    with _closer_lock:
        if not _closer_started:
            threading.Thread(target=_close_forever, name="tfmapreduce-memfd-close", daemon=True).start()
            _closer_started = True
    _to_close.put(fds)


def _close_forever() -> None:
    while True:
        for fd in _to_close.get():
            with contextlib.suppress(OSError):
                os.close(fd)


@attrs.define(eq=False)
class Staging:
    """The files of one run: written on entry to :meth:`feed_dict`, closed or unlinked on exit, whatever happened.

    Example:
        >>> with Staging(mechanism="file") as staging:
        ...     path = staging.write(np.arange(4, dtype=np.int32))
        ...     len(open(path, "rb").read())
        16
        >>> os.path.exists(path)
        False
    """

    mechanism: str = attrs.field(factory=default_mechanism)
    """``"memfd"`` or ``"file"`` (see the module's documentation)."""
    _fds: list[int] = attrs.field(factory=list)
    _paths: list[str] = attrs.field(factory=list)
    _held: list[threading.Lock] = attrs.field(factory=list)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def write(self, array: np.ndarray[Any, Any] | bytes) -> str:
        """Stage ``array``'s bytes (C order) in a new private file; return the path a same-host worker opens."""
        data = memoryview(array) if isinstance(array, bytes) else np.ascontiguousarray(array).data.cast("B")
        if self.mechanism == "memfd":
            fd = os.memfd_create("tfmapreduce", os.MFD_CLOEXEC)
            with self._lock:
                self._fds.append(fd)
            _write_all(fd, data)
            return f"/proc/{os.getpid()}/fd/{fd}"
        path = os.path.join(client_dir(), secrets.token_hex(8))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with self._lock:
            self._paths.append(path)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        return path

    def returned(self) -> str:
        """A new empty private file a same-host worker writes a run's result into (see :func:`read_returned`): its path."""
        if self.mechanism == "memfd":
            fd = os.memfd_create("tfmapreduce-result", os.MFD_CLOEXEC)
            with self._lock:
                self._fds.append(fd)
            return f"/proc/{os.getpid()}/fd/{fd}"
        path = os.path.join(client_dir(), secrets.token_hex(8))
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        with self._lock:
            self._paths.append(path)
        return path

    def feed_dict(self, entries: Iterable[tuple[Any, Any, bool]]) -> dict[Any, Any]:
        """``{placeholder: value}`` from ``(placeholder, value, staged)``, staged values written in parallel: into their
        program's :class:`MappedBuffer` buffer (locked until :meth:`close`) when the key is one, else to a file fed by path."""
        entries = list(entries)
        feed = {key: value for key, value, staged in entries if not staged}
        writes: list[Callable[[], None]] = []
        for key, value, staged in entries:
            if not staged:
                continue
            if isinstance(key, MappedBuffer):
                key.lock.acquire()  # in the program's order: two runs of it cannot hold each other's buffers
                self._held.append(key.lock)
                writes.append(functools.partial(key.fill, value))
            else:
                writes.append(functools.partial(_feed_path, feed, key, self.write, value))
        in_parallel(writes)  # the copies let go of the GIL
        return feed

    def close(self) -> None:
        """Release the mapped buffers, close every memfd (on a background thread) and unlink every file staged so far.
        Safe to call twice.

        Freeing a memfd's pages takes time in proportion to its size, so the closes are handed to a
        thread and the run returns at once; a client that exits first has them freed by the kernel.
        """
        with self._lock:
            fds, self._fds = self._fds, []
            paths, self._paths = self._paths, []
            held, self._held = self._held, []
        for lock in held:
            lock.release()
        if fds:
            _close_later(fds)
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_pool: list[ThreadPoolExecutor] = []
_pool_lock = threading.Lock()


def in_parallel(calls: Sequence[Callable[[], R]]) -> list[R]:
    """The results of ``calls``, run on a pool of one thread per core (the caller's thread runs the last one).

    For work that lets go of the GIL (numpy copies and reductions, file writes).
    """
    if len(calls) <= 1:
        return [call() for call in calls]
    with _pool_lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="tfmapreduce-copy"))
    started = [_pool[0].submit(call) for call in calls[:-1]]
    last = calls[-1]()
    return [future.result() for future in started] + [last]


def _feed_path(feed: dict[Any, Any], placeholder: Any, write: Callable[[Any], str], value: Any) -> None:
    feed[placeholder] = np.asarray(write(value).encode())
