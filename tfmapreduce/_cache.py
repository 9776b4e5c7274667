"""Compiled programs, kept per cluster: the least recently used is dropped first."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, Protocol

import attrs
import tensorflow as tf

from ._cluster import Cluster
from ._log import COMPILE
from ._state import ClusterVar

SIZE = 64
"""Compiled programs a cluster keeps (each holds a graph and a session)."""


class Program(Protocol):
    """Anything compiled into a graph that a cluster keeps a session for."""

    @property
    def graph(self) -> tf.Graph: ...

    def close(self) -> None:
        """Free what the program holds beyond its graph (shared-memory buffers)."""


@attrs.define(eq=False)
class Kept:
    """A program as the cache keeps it: ``alive`` until it leaves the cache (a holder may then no longer run it)."""

    program: Any
    alive: bool = True


@attrs.define(eq=False)
class ProgramCache:
    """A cluster's compiled programs by key (a job's identity first, then what else the program depends on).

    Evicting a program closes its session; closing the cache (its cluster closes) also frees its buffers.

    Example:
        >>> cache = ProgramCache(forget=lambda graph: None, size=2)
        >>> len(cache)
        0
    """

    forget: Callable[[tf.Graph], None]
    """Closes the sessions kept for a graph (``Cluster.forget``)."""
    size: int = SIZE
    """How many programs to keep."""
    _entries: collections.OrderedDict[Hashable, Kept] = attrs.field(factory=collections.OrderedDict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def get(self, key: Hashable, build: Callable[[], Any]) -> tuple[Kept, bool]:
        """The program kept for ``key``, built by ``build()`` if absent; and whether it was built now."""
        with self._lock:
            kept = self._entries.get(key)
            if kept is not None:
                self._entries.move_to_end(key)
                return kept, False
        started = time.perf_counter()
        program = build()  # outside the lock: tracing a map function may take a while
        if COMPILE.isEnabledFor(logging.DEBUG):
            COMPILE.debug(
                "compiled a graph of %d ops in %.1f ms (%d programs kept)",
                len(program.graph.get_operations()),
                1000 * (time.perf_counter() - started),
                len(self._entries) + 1,
            )
        kept = Kept(program)
        with self._lock:
            self._entries[key] = kept
            self._entries.move_to_end(key)
            evicted = [self._entries.popitem(last=False)[1] for _ in range(len(self._entries) - self.size)]
        for old in evicted:
            old.alive = False
            self.forget(old.program.graph)  # its buffers go with the program, once no run holds it
        return kept, True

    def close(self) -> None:
        """Forget every program and free its buffers (the cluster is closing)."""
        with self._lock:
            dropped, self._entries = list(self._entries.values()), collections.OrderedDict()
        for kept in dropped:
            kept.alive = False
            kept.program.close()

    def of(self, owner: Hashable) -> list[Any]:
        """The programs kept whose key starts with ``owner`` (a job's identity)."""
        with self._lock:
            return [kept.program for key, kept in self._entries.items() if isinstance(key, tuple) and key[:1] == (owner,)]

    def count(self, owner: Hashable) -> int:
        """How many programs are kept for ``owner``."""
        return len(self.of(owner))

    def __len__(self) -> int:
        return len(self._entries)


PROGRAMS = ClusterVar("compiled programs", lambda cluster: ProgramCache(cluster.forget), close=ProgramCache.close)
"""Each cluster's :class:`ProgramCache`."""


def programs(cluster: Cluster) -> ProgramCache:
    """The programs compiled for ``cluster``."""
    return cluster.state(PROGRAMS)
