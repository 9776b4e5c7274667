"""Run statistics: what one run did, per shard and in total."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import attrs

from .._base.task import Task


@attrs.frozen
class ShardStats:
    """What one shard cost in a run."""

    index: int
    """The shard's position in the plan."""
    device: str
    """The device that mapped it."""
    rows: int
    """Its rows; for files, the rows it actually read (the bytes read where a batch is a block of whole lines, as
    ``word_count`` reads text)."""
    bytes_sent: int
    """Input bytes the client sent for it in this run (0 for resident data), a backup copy's included."""
    backup: str | None = None
    """``speculate=True``: the device a backup copy of the shard ran on, or None when it was not backed up."""
    backup_won: bool = False
    """``speculate=True``: True when the backup finished first and its result was counted (the original's was discarded)."""


@attrs.frozen
class RunStats:
    """What a run did: per-shard devices and bytes, wall time, and whether it compiled.

    Examples:
        >>> stats = RunStats((ShardStats(0, "/job:local/replica:0/task:0/device:CPU:0", 30, 240),), 0.01, True)
        >>> stats.bytes_sent
        240
    """

    shards: tuple[ShardStats, ...]
    """One entry per shard, in order."""
    wall_time: float
    """Seconds from the call to the result, compilation included."""
    compiled: bool
    """True when this run built (traced) a new graph; False when it reused one."""
    attempts: int = 1
    """Distributed runs made: more than 1 when a task was lost and the run repeated on the survivors."""
    lost: tuple[Task, ...] = ()
    """Tasks lost during this run (left out of the cluster's later runs)."""
    moved: tuple[int, ...] = ()
    """Shards that ran on another device than first planned, because their task was lost."""
    weight_bytes: int = 0
    """Bytes of model variables (those its map function reads) sent to the devices in this run: 0 where every device
    already held their current values (see the models guide)."""

    @property
    def bytes_sent(self) -> int:
        """Input bytes sent to the cluster in this run, all shards together."""
        return sum(s.bytes_sent for s in self.shards)

    @property
    def backed_up(self) -> tuple[int, ...]:
        """``speculate=True``: the shards that were backed up on another device (see [`ShardStats.backup_won`][tfmapreduce.ShardStats.backup_won])."""
        return tuple(s.index for s in self.shards if s.backup is not None)


@attrs.define(eq=False)
class Collected:
    """The :class:`RunStats` of every run made inside a :func:`stats` block, in order."""

    runs: list[RunStats] = attrs.field(factory=list)
    """One entry per distributed run (a multi-round recipe makes several)."""

    @property
    def last(self) -> RunStats:
        """The last run's stats.

        Raises:
            LookupError: no run was made inside the block.
        """
        if not self.runs:
            raise LookupError("no run was made inside this tmr.stats() block; call a job or recipe inside it")
        return self.runs[-1]


_collecting: contextvars.ContextVar[tuple[Collected, ...]] = contextvars.ContextVar("tfmapreduce_stats", default=())


@contextlib.contextmanager
def stats() -> Iterator[Collected]:
    """Collect the [`RunStats`][tfmapreduce.RunStats] of every run made inside the block (scopes nest; each sees its own runs).

    Examples:
        >>> with tmr.stats() as s:
        ...     total = tmr.sum(np.arange(10), cluster=cluster, sizes=[3, 7])
        >>> int(total), [shard.rows for shard in s.last.shards]
        (45, [3, 7])
    """
    collected = Collected()
    token = _collecting.set((*_collecting.get(), collected))
    try:
        yield collected
    finally:
        _collecting.reset(token)


def collecting() -> bool:
    """Whether a :func:`stats` block is open."""
    return bool(_collecting.get())


def record(run: RunStats) -> None:
    """Add a run's stats to every open :func:`stats` block."""
    for collected in _collecting.get():
        collected.runs.append(run)
