"""Per-cluster state: each subsystem owns a typed slot (a :class:`ClusterVar`); the cluster holds the values and closes them.

Like trio's ``RunVar``: the program cache, the measured speeds of ``sizes="auto"`` and the facts
asked of a cluster's tasks each declare one ``ClusterVar`` at module level and read it with
``cluster.state(VAR)``; nothing is kept in a module-level registry keyed by the cluster.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar, cast

import attrs

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@attrs.frozen(eq=False)
class ClusterVar(Generic[T]):
    """A typed slot of per-cluster state, made on first use by ``factory(owner)`` and closed with its cluster.

    Example:
        >>> HITS = ClusterVar("hits", lambda owner: [0])
        >>> state = State(owner=None)
        >>> state.get(HITS)[0] += 1
        >>> state.get(HITS)
        [1]
    """

    name: str
    """What it holds, for messages and repr."""
    factory: Callable[[Any], T]
    """Makes the value from the cluster that holds it."""
    close: Callable[[T], None] | None = None
    """Called with the value when its cluster closes."""


@attrs.define(eq=False)
class State:
    """The values of the :class:`ClusterVar` slots of one owner (a cluster)."""

    owner: Any
    _values: dict[ClusterVar[Any], Any] = attrs.field(factory=dict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def get(self, var: ClusterVar[T]) -> T:
        """The value of ``var``, made once."""
        with self._lock:
            if var not in self._values:
                self._values[var] = var.factory(self.owner)
            return cast(T, self._values[var])

    def close(self) -> None:
        """Close every value made (in the order they were made) and forget them."""
        with self._lock:
            values, self._values = self._values, {}
        for var, value in values.items():
            if var.close is not None:
                var.close(value)


@attrs.define(eq=False)
class Memo(Generic[K, V]):
    """Answers asked once per key and kept (facts about a cluster's tasks); an ask that raises keeps nothing.

    Example:
        >>> memo: Memo[str, int] = Memo()
        >>> memo.get("a", lambda: 1), memo.get("a", lambda: 2)
        (1, 1)
    """

    _answers: dict[K, V] = attrs.field(factory=dict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def get(self, key: K, ask: Callable[[], V]) -> V:
        """The answer for ``key``: ``ask()``'s, the first time it returns."""
        with self._lock:
            if key in self._answers:
                return self._answers[key]
        answer = ask()  # outside the lock: asking a task may take a while
        with self._lock:
            return self._answers.setdefault(key, answer)
