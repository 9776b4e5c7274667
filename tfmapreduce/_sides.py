"""Two inputs of different lengths as one: a join's left and right rows, stacked into the rows of one plan.

A job over two sides plans ``len(left) + len(right)`` rows, left first, and every column of either side
is a :class:`Side`: a source of that many rows holding only its side's range.  A shard then maps the part
of each side it covers (a shard astride the boundary gets both); the other side's columns are empty there.
Host sides are partitioned and placed as any input; resident sides keep their shards where they live (the
plan is the left side's shards followed by the right side's).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from ._cluster import Cluster
from ._errors import InputError, JobError, TfMapReduceError
from ._plan import Plan, Shard
from ._shm import Stageable
from ._source import ShardTensor, Source, Sources, implements
from ._task import Task


@attrs.frozen
class Stack:
    """Where each side's rows are in the stacked rows, and the stacked plan of resident sides."""

    rows: tuple[int, int]
    """Rows of the left and of the right side."""
    plans: tuple[Plan, Plan] | None = None
    """Where resident sides live (both), or None for host sides (planned by the run)."""

    @property
    def total(self) -> int:
        return self.rows[0] + self.rows[1]

    def offset(self, side: int) -> int:
        """The first stacked row of ``side`` (0: left, 1: right)."""
        return 0 if side == 0 else self.rows[0]

    @property
    def plan(self) -> Plan | None:
        """The stacked plan of resident sides: the left side's shards, then the right side's (indices and rows moved on)."""
        if self.plans is None:
            return None
        left, right = self.plans
        n = len(left.shards)
        moved = [attrs.evolve(s, index=s.index + n, start=s.start + left.rows, stop=s.stop + left.rows) for s in right.shards]
        return Plan(self.total, (*left.shards, *moved))


@attrs.frozen(eq=False)
class Side:
    """One column of one side of a :class:`Stack`, as a source of all the stacked rows (see the module's notes)."""

    inner: Source
    side: int
    stack: Stack

    @property
    def rows(self) -> int:
        return self.stack.total

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.inner.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.stack.total, *self.inner.shape[1:])

    @property
    def home(self) -> Cluster | None:
        return self.inner.home

    @property
    def home_plan(self) -> Plan | None:
        return self.stack.plan

    def part(self, shard: Shard) -> Shard | None:
        """The shard of the inner source that ``shard`` of the stacked plan covers; None where it holds none of this side."""
        if self.stack.plans is not None:
            own = self.stack.plans[self.side]
            at = shard.index - (len(self.stack.plans[0].shards) if self.side else 0)
            return own.shards[at] if 0 <= at < len(own.shards) else None
        cut = self._cut(shard)
        return cut if cut.rows else None

    def _cut(self, shard: Shard) -> Shard:
        """``shard`` of the stacked host rows cut to this side's rows (numbered from its first row; maybe none)."""
        lo = self.stack.offset(self.side)
        return attrs.evolve(
            shard, start=min(max(shard.start - lo, 0), self.inner.rows), stop=min(max(shard.stop - lo, 0), self.inner.rows)
        )

    def inner_plan(self, plan: Plan) -> Plan:
        """The inner source's plan: its own (resident), or each stacked shard cut to this side's rows."""
        if self.stack.plans is not None:
            return self.stack.plans[self.side]
        return Plan(self.inner.rows, tuple(self._cut(s) for s in plan.shards))

    def signature(self, plan: Plan) -> Hashable:
        return ("side", self.side, self.stack.rows, self.inner.signature(self.inner_plan(plan)))

    def tensor(self, shard: Shard) -> ShardTensor:
        part = self.part(shard)
        if part is None:
            dtype = tf.string if self.dtype == object else tf.as_dtype(self.dtype)
            return ShardTensor(tf.zeros((0, *self.inner.shape[1:]), dtype))
        return self.inner.tensor(part)

    def feed(self, shard: Shard) -> np.ndarray[Any, Any] | None:
        part = self.part(shard)
        return None if part is None else self.inner.feed(part)

    def bytes_sent(self, shard: Shard) -> int:
        part = self.part(shard)
        return 0 if part is None else self.inner.bytes_sent(part)

    def stageable(self, shard: Shard, min_bytes: int) -> bool:
        part = self.part(shard)
        return part is not None and implements(self.inner, Stageable) and bool(self.inner.stageable(part, min_bytes))  # type: ignore[attr-defined]

    def input_error(self, error: JobError, plan: Plan, cluster: Cluster) -> TfMapReduceError | None:
        return self.inner.input_error(error, self.inner_plan(plan), cluster)

    def survive(self, lost: frozenset[Task]) -> None:
        self.inner.survive(lost)


def stacked(left: Sources, right: Sources) -> Sources:
    """The columns of both sides as :class:`Side` sources of one stacked plan (left columns first).

    Raises:
        InputError: one side is resident and the other is not (the caller scatters the host side first).
    """
    plans = [srcs[0].home_plan for srcs in (left, right)]
    if (plans[0] is None) != (plans[1] is None):
        raise InputError("both sides of a join must be host data or both resident")
    stack = Stack((left[0].rows, right[0].rows), None if plans[0] is None else (plans[0], plans[1]))  # type: ignore[arg-type]
    return Sources([Side(s, 0, stack) for s in left] + [Side(s, 1, stack) for s in right])
