"""Compiled programs, kept per cluster: the least recently used is dropped first."""

from __future__ import annotations

import collections
import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, Protocol

import attrs
import tensorflow as tf

from .._base.log import COMPILE
from .._base.state import ClusterVar
from .._cluster.cluster import Cluster
from .._ops.mapfn import unstamped

SIZE = 64
"""Compiled programs a cluster keeps (each holds a graph and a session)."""


class Compiled(Protocol):
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

    A program built for a new key whose graph equals, byte for byte, one kept under a key with the same rest (the
    same job written again, as a new ``lambda`` each call) is dropped for the kept one, whose session the workers
    have set up already (a new graph's first run costs about half a second more). Evicting a program closes its
    session once no key holds it; closing the cache (its cluster closes) also frees its buffers.

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
    _graphs: dict[Hashable, Kept] = attrs.field(factory=dict)
    """The programs kept, by their graph's digest and their key's rest."""
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
        same = (_digest(program), key[1:] if isinstance(key, tuple) else key)
        with self._lock:
            kept = self._graphs.get(same)
            shared = kept is not None and kept.alive
            if kept is None or not shared:
                kept = self._graphs[same] = Kept(program)
            self._entries[key] = kept
            self._entries.move_to_end(key)
            evicted = [self._entries.popitem(last=False)[1] for _ in range(len(self._entries) - self.size)]
            held = {id(k) for k in self._entries.values()}
            evicted = [old for old in evicted if id(old) not in held]  # another key holds it still
            for old in evicted:
                old.alive = False
            self._graphs = {digest: k for digest, k in self._graphs.items() if k.alive}
        if shared:  # the same graph is kept: this one is dropped before it ever ran
            program.close()
            self.forget(program.graph)
        for old in evicted:
            self.forget(old.program.graph)  # its buffers go with the program, once no run holds it
        return kept, not shared

    def close(self) -> None:
        """Forget every program and free its buffers (the cluster is closing)."""
        with self._lock:
            dropped = list({id(kept): kept for kept in self._entries.values()}.values())
            self._entries, self._graphs = collections.OrderedDict(), {}
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


def _digest(program: Any) -> bytes:
    """A digest of everything ``program``'s graph computes: its nodes with their attributes and constants, the
    functions they call.

    What the program fetches and what its kind keeps of the build (``info``: a map's output structure) are part of it:
    a map whose outputs are its inputs passed through adds no node for them. What differs between two builds of one
    job is left out: a function's name ends in a number TensorFlow counts up
    for every function traced in the process (each tf.data function of a program), so the names are numbered again
    in the order the nodes, then the functions named, first name them; the progress counters' token; the rows of the
    shards its in-graph messages name (``mapfn.unstamped``: a program kept by its plan's shape serves other rows, and
    a failed run's message names its own, ``mapfn.restamp``).
    """
    graph_def = program.graph.as_graph_def()
    functions = {f.signature.name: unstamped(str(f)) for f in graph_def.library.function}
    # what the kind fetches and keeps of the build too: two maps whose outputs pass inputs through make one graph
    nodes = repr(getattr(program, "fetch", None)) + repr(getattr(program, "info", None)) + "".join(map(str, graph_def.node))
    nodes = unstamped(nodes)
    counters = getattr(program, "counters", None)
    if counters is not None:
        nodes = nodes.replace(counters.token, "<counters>")
    if not functions:
        return hashlib.sha256(nodes.encode()).digest()
    pattern = re.compile("|".join(map(re.escape, sorted(functions, key=len, reverse=True))))
    order = list(dict.fromkeys(m.group() for m in pattern.finditer(nodes)))
    for name in order:  # then the functions each function named calls (the list grows as it is read)
        order += [called for called in dict.fromkeys(m.group() for m in pattern.finditer(functions[name])) if called not in order]
    numbers = {name: f"<function {i}>" for i, name in enumerate(order)}
    text = "".join([nodes, *(functions[name] for name in order)])
    return hashlib.sha256(pattern.sub(lambda m: numbers[m.group()], text).encode()).digest()


PROGRAMS = ClusterVar("compiled programs", lambda cluster: ProgramCache(cluster.forget), close=ProgramCache.close)
"""Each cluster's :class:`ProgramCache`."""


def programs(cluster: Cluster) -> ProgramCache:
    """The programs compiled for ``cluster``."""
    return cluster.state(PROGRAMS)
