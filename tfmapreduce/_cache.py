"""The one cache of compiled programs: every job's graphs, least recently used dropped first."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import attrs
import tensorflow as tf

from ._log import COMPILE
from ._shm import MAPPED

if TYPE_CHECKING:
    from ._cluster import Cluster


class Program(Protocol):
    """Anything compiled into a graph that a cluster keeps a session for."""

    @property
    def graph(self) -> tf.Graph: ...


P = TypeVar("P", bound=Program)

SIZE = 64
"""Compiled programs kept, all jobs together (each holds a graph and, on its cluster, a session)."""


@attrs.define(eq=False)
class ProgramCache(Generic[P]):
    """Compiled programs by (job, cluster, plan, input signature); evicting one closes its session.

    Example:
        >>> cache = ProgramCache(size=2)
        >>> len(cache)
        0
    """

    size: int = SIZE
    """How many programs to keep."""
    _entries: collections.OrderedDict[Hashable, tuple[Cluster, P]] = attrs.field(factory=collections.OrderedDict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    generation: int = 0
    """Counts the times programs left the cache: a program found at one generation is still kept while it holds."""

    def get(self, key: Hashable, cluster: Cluster, build: Callable[[], P]) -> tuple[P, bool]:
        """The program for ``key`` on ``cluster``, built by ``build()`` if absent; and whether it was built now."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is cluster:
                self._entries.move_to_end(key)
                return entry[1], False
        started = time.perf_counter()
        program = build()  # outside the lock: tracing a map function may take a while
        if COMPILE.isEnabledFor(logging.DEBUG):
            COMPILE.debug(
                "compiled a graph of %d ops in %.1f ms (%d programs kept)",
                len(program.graph.get_operations()),
                1000 * (time.perf_counter() - started),
                len(self._entries) + 1,
            )
        evicted = []
        with self._lock:
            self._entries[key] = (cluster, program)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                evicted.append(self._entries.popitem(last=False)[1])
                self.generation += 1
        for old_cluster, old in evicted:
            old_cluster.forget(old.graph)
        return program, True

    def drop(self, cluster: Cluster) -> None:
        """Forget the programs compiled for ``cluster`` and free their shared-memory buffers (the cluster is closing)."""
        with self._lock:
            dropped = [self._entries.pop(key)[1] for key in [k for k, (owner, _) in self._entries.items() if owner is cluster]]
            self.generation += 1
        for program in dropped:
            for buffer in program.graph.get_collection(MAPPED):
                buffer.close()

    def count(self, owner: Hashable) -> int:
        """Programs kept whose key starts with ``owner`` (a job's identity)."""
        with self._lock:
            return sum(1 for key in self._entries if isinstance(key, tuple) and key[:1] == (owner,))

    def __len__(self) -> int:
        return len(self._entries)


PROGRAMS: ProgramCache[Program] = ProgramCache()
"""The process's compiled programs, shared by every job."""
