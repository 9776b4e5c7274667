"""Run statistics: what one run did, per shard and in total."""

from __future__ import annotations

import attrs

from ._task import Task


@attrs.frozen
class ShardStats:
    """What one shard cost in a run."""

    index: int
    """The shard's position in the plan."""
    device: str
    """The device that mapped it."""
    rows: int
    """Its rows."""
    bytes_sent: int
    """Input bytes the client sent for it in this run (0 for resident data), a backup copy's included."""
    backup: str | None = None
    """``speculate=True``: the device a backup copy of the shard ran on, or None when it was not backed up."""
    backup_won: bool = False
    """``speculate=True``: True when the backup finished first and its result was counted (the original's was discarded)."""


@attrs.frozen
class RunStats:
    """What a run did: per-shard devices and bytes, wall time, and whether it compiled.

    Example:
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

    @property
    def bytes_sent(self) -> int:
        """Input bytes sent to the cluster in this run, all shards together."""
        return sum(s.bytes_sent for s in self.shards)

    @property
    def backed_up(self) -> tuple[int, ...]:
        """``speculate=True``: the shards that were backed up on another device (see :attr:`ShardStats.backup_won`)."""
        return tuple(s.index for s in self.shards if s.backup is not None)
