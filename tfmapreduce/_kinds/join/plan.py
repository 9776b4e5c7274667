"""A join's plan: its layout of columns, the strategy (co-partitioned, broadcast or hash) and where rows are joined.

Every strategy choice is made here, once, in :func:`choose` (the kind and the verbs only carry it out).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from ..._base.device import Device
from ..._base.place import default_devices
from ..._base.plan import Plan
from ..._cluster.cluster import DEVICES_TIMEOUT
from ..._engine.call import Call
from ..._io.source import Sources
from ..._io.strings import Encoding
from ..._options import RunOptions
from ..shuffle.plan import resolve_reducers
from .sides import FileColumn, Side

if TYPE_CHECKING:
    from ..shuffle.forecast import SpillForecast

HOWS = ("inner", "left", "right", "outer")


STRATEGIES = ("auto", "hash", "broadcast")


BROADCAST_BYTES = 1 << 25
"""``strategy="auto"`` broadcasts a side of at most this many bytes (keys and values; 32 MiB) when the other side is
larger: a 12 MB side broadcast to two tasks joined a 1e7-row side faster than hashed (the keyed guide's table)."""


@attrs.frozen
class JoinLayout:
    """The columns of the two sides: how many value columns each has, and whether its values were a tuple."""

    columns: tuple[int, int]
    tuples: tuple[bool, bool]
    unicode: tuple[Encoding, Encoding]
    """Per side: how its string keys and values decode (see ``decode_keys``): ``str`` where they were given as ``str``."""
    copartitioned: bool = False
    """Both sides are keyed results partitioned by key hash over the same reducers (a fact of the inputs; the plan
    decides what to do with it)."""

    def of(self, side: int, cols: Sequence[Any]) -> tuple[Any, list[Any]]:
        """Side ``side``'s (keys, value columns) among the stacked columns ``cols``."""
        at = 0 if side == 0 else 1 + self.columns[0]
        return cols[at], list(cols[at + 1 : at + 1 + self.columns[side]])


@attrs.frozen
class JoinPlan:
    """The plan of a join: the stacked shards (left rows, then right rows), the strategy and where rows are joined.

    Examples:
        >>> left, right = (np.arange(6), np.ones(6)), (np.array([1, 4]), np.array([2.0, 3.0]))
        >>> p = tmr.plan_join(left, right, cluster=cluster, strategy="hash", reducers=2)
        >>> p.strategy, p.sizes, len(p.reducers)
        ('hash', (6, 2), 2)
    """

    plan: Plan
    """The shards of the stacked rows: rows ``0 .. len(left)`` are the left side's, the rest the right side's."""
    how: str
    strategy: str
    """``"hash"``, ``"broadcast"`` or ``"co-partitioned"``."""
    reducers: tuple[str, ...]
    """Where rows are joined: the reducer devices (hash, co-partitioned); for broadcast, each big-side task's first device."""
    sizes: tuple[int, int]
    """Rows of the left and of the right side."""
    small: int
    """The side whose keys each device puts in its hash table (0: left, 1: right); the side broadcast for broadcast."""
    units: tuple[str, str] = ("rows", "rows")
    """What ``sizes`` counts of each side: ``"rows"``, or ``"bytes"`` for a CSV table (its rows are known once read)."""
    spill: SpillForecast | None = attrs.field(default=None, eq=False)
    """What ``plan_join`` estimates of each device's output against its budget: in memory or spilled, how (None: a
    run's own plan)."""

    @property
    def tasks(self) -> tuple[Any, ...]:
        return tuple(dict.fromkeys([*self.plan.tasks, *(Device.parse(d).task for d in self.reducers)]))

    def explain(self) -> str:
        """What moves, then the shard table, then what the budget says (in memory or spilled), where it is known."""
        side = ("left", "right")
        moves = {
            "hash": f"both sides shuffled by key hash to {len(self.reducers)} reducer(s)",
            "broadcast": f"the {side[self.small]} side ({self.sizes[self.small]} {self.units[self.small]}) sent to each task of the "
            f"{side[1 - self.small]} side, which joins its rows where they live",
            "co-partitioned": f"both sides already partitioned by key hash over the same {len(self.reducers)} reducers: nothing moves",
        }[self.strategy]
        lines = [
            f"join how={self.how!r}, {self.strategy}: {moves}",
            f"left {self.units[0]} 0:{self.sizes[0]}, right {self.units[1]} {self.sizes[0]}:{self.plan.rows}",
        ]
        lines.append(self.plan.explain([self.units[s.start >= self.sizes[0]] for s in self.plan.shards]))
        lines += [f"  joins on {d}" for d in self.reducers]
        lines += [self.spill.explain()] if self.spill is not None else []
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


def _first_device(plan: JoinPlan, index: int) -> str:
    """The device where shard ``index``'s big-side rows are joined: its task's first shard device."""
    task = plan.plan.shards[index].task
    return next(s.device for s in plan.plan.shards if s.task == task and s.device in plan.reducers)


def _first_devices(shards: Plan, big: Side) -> list[str]:
    """Each task holding rows of the big side: its first shard device (where that task joins); with none, the first
    shard's device (where the small side's unmatched rows are made)."""
    first: dict[Any, str] = {}
    for s in shards.shards:
        if big.part(s) is not None and s.rows:
            first.setdefault(s.task, s.device)
    return list(first.values()) or [shards.shards[0].device]


def _in_bytes(srcs: Sources, layout: JoinLayout, side: int) -> bool:
    """Whether ``side`` is a CSV table, whose size is known in bytes (its rows only once read)."""
    inner = layout.of(side, srcs)[0].inner
    return isinstance(inner, FileColumn) and inner.unit == "bytes"


def _bytes(srcs: Sources, layout: JoinLayout, side: int) -> int:
    """Bytes of a side's keys and values (strings: 32 bytes each, plus their length where the side is on the host; a
    CSV table: its files' bytes)."""
    keys, values = layout.of(side, srcs)
    if isinstance(keys.inner, FileColumn) and keys.inner.unit == "bytes":
        return int(keys.inner.rows)
    total = 0
    for src in [keys, *values]:
        inner = src.inner
        rows = inner.rows
        row = int(np.prod(inner.shape[1:], dtype=np.int64))
        if inner.dtype == object:
            array = getattr(inner, "array", None)
            total += rows * row * 32 + (sum(map(len, array.ravel().tolist())) if array is not None else rows * row * 16)
        else:
            total += rows * row * inner.dtype.itemsize
    return total


def _spread(left: int, right: int, settings: RunOptions) -> list[int]:
    """The default sizes of host sides: each side split evenly into one shard per default device, so that shard ``i``
    of the left and shard ``i`` of the right land on one device (``place``: shard ``i`` on device ``i % D``) and every
    task holds rows of both (a broadcast join then joins on every task, not only where the big side's rows began)."""
    assert settings.cluster is not None
    available = [Device.parse(d) for d in settings.cluster.list_devices(min(DEVICES_TIMEOUT, settings.seconds()))]
    shards = max(1, len(default_devices(available)))
    return [n // shards + (i < n % shards) for n in (left, right) for i in range(shards)]


def choose(how: str, strategy: str, layout: JoinLayout, shards: Plan, call: Call) -> JoinPlan:
    """The join's plan: where its rows are joined, by the one strategy chosen here.

    ``"auto"`` joins two keyed results on the same reducers where they are (co-partitioned); ``"broadcast"`` and
    ``"hash"`` are taken as asked; ``"auto"`` broadcasts the smaller side where it has at most
    :data:`BROADCAST_BYTES` and fewer rows (or a side is a CSV table, sized in bytes), and else hashes.
    """
    left, right = call.srcs[0], call.srcs[1 + layout.columns[0]]
    assert isinstance(left, Side)
    assert isinstance(right, Side)
    sizes = left.stack.rows
    weight = [_bytes(call.srcs, layout, side) for side in (0, 1)]
    small = 0 if weight[0] < weight[1] else 1
    in_bytes = [_in_bytes(call.srcs, layout, side) for side in (0, 1)]
    if strategy == "auto" and layout.copartitioned:
        strategy = "co-partitioned"
        assert left.stack.plans is not None
        reducers = tuple(s.device for s in left.stack.plans[0].shards)
    elif strategy == "broadcast" or (
        strategy == "auto" and weight[small] <= BROADCAST_BYTES and (sizes[small] < sizes[1 - small] or any(in_bytes))
    ):
        strategy = "broadcast"
        reducers = tuple(dict.fromkeys(_first_devices(shards, left if small else right)))
    else:
        strategy = "hash"
        reducers = resolve_reducers(call.settings.reducers, shards, call.cluster)
    units = tuple("bytes" if b else "rows" for b in in_bytes)
    return JoinPlan(shards, how, strategy, reducers, sizes, small, units)  # type: ignore[arg-type]
