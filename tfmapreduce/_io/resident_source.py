"""The source a job reads resident ``Sharded`` data through: each shard's variable, read where it lives (nothing shipped).

On CPUs a run feeds each shard's variable handle (``variables.handle``), so a program names no data and reads each
run's own: jobs over fresh data (a filter's output) of one dtype, row shape and placement share one program.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Any, Protocol, cast

import attrs
import numpy as np
import tensorflow as tf

from .._base.errors import JobError, ShardLostError
from .._base.plan import Plan, Shard
from .._base.task import Task
from .._cluster.cluster import Cluster
from .source import RowsFree, ShardTensor, implements
from .variables import handle, named_per_run, read_named


class ResidentData(Protocol):
    """What the source reads of a ``Sharded`` (the public class, made in ``resident``)."""

    @property
    def cluster(self) -> Cluster: ...

    @property
    def plan(self) -> Plan: ...

    @property
    def dtype(self) -> np.dtype[Any]: ...

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def name(self) -> str: ...

    def read(self, shard: Shard) -> tf.Tensor:
        """In a graph, inside the shard's device scope: the shard's current value, by the name in the graph."""

    def survive(self, lost: frozenset[Task]) -> object:
        """Move the shards of ``lost`` tasks to surviving devices and rebuild them there."""


@attrs.frozen(eq=False)
class Resident:
    """The source a job reads a Sharded through: a variable handle per shard, nothing fed."""

    sharded: ResidentData

    @property
    def rows(self) -> int:
        return self.sharded.plan.rows

    @property
    def home_plan(self) -> Plan:
        return self.sharded.plan

    @property
    def home(self) -> Cluster:
        return self.sharded.cluster

    @property
    def dtype(self) -> np.dtype:
        return self.sharded.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.sharded.shape

    @property
    def fed(self) -> bool:
        """Whether a run feeds each shard's variable handle (its shards are on CPUs: a handle is made on a CPU, and a
        variable lives where its handle is made), so its programs name no data and serve any resident input of the
        same dtype, row shape and placement; else the data's name is in the graph."""
        return named_per_run([s.device for s in self.sharded.plan.shards])

    def signature(self, plan: Plan) -> Hashable:
        name = () if self.fed else (self.sharded.name,)
        return ("resident", *name, self.sharded.dtype.str, self.sharded.shape[1:])

    def tensor(self, shard: Shard) -> ShardTensor:
        if not self.fed or shard.rows == 0:  # named in the graph; or no rows: no variable, nothing to feed
            return ShardTensor(self.sharded.read(shard))
        serialized, value = read_named(shard.device, tf.as_dtype(self.dtype), self.shape[1:])
        return ShardTensor(value, serialized)

    def feed(self, shard: Shard) -> bytes | None:
        """A fed source's: the serialized handle of shard ``shard.index`` of this run's data (read where it lives: its
        index and device are the program's, as the program's key says)."""
        if not self.fed or shard.rows == 0:
            return None
        return handle(shard.device, self.sharded.name, shard.index, tf.as_dtype(self.dtype))

    def bytes_sent(self, shard: Shard) -> int:
        return 0

    def survive(self, lost: frozenset[Task]) -> None:
        self.sharded.survive(lost)

    def input_error(self, error: JobError, plan: Plan, cluster: Cluster) -> ShardLostError | None:
        """Shards whose variables vanished (their worker restarted): a ShardLostError naming them and their task."""
        if self.sharded.name not in error.details or "does not exist" not in error.details:
            return None
        found = [int(i) for i in re.findall(r"Could not find (?:variable|resource: [\w/]*?)shard(\d+)", error.details)]
        shards = tuple(sorted(set(found))) or tuple(s.index for s in plan.shards)
        task = plan.shards[shards[0]].task
        return ShardLostError(
            f"shard(s) {list(shards)} of {self.sharded!r} on {task} are gone: the worker restarted (or lost them); "
            "a run with retries= rebuilds them from how they were made, or call .rebuild()",
            shards=shards,
            task=task,
        )


def rows_free(src: object, plan: Plan) -> bool:
    """Whether ``src``'s graph over ``plan`` can hold none of its shards' row counts: resident data read through fed
    handles, or host arrays whose every shard is fed (``RowsFree.fed_only``: placeholders of unknown rows)."""
    if implements(src, RowsFree):
        return cast(RowsFree, src).fed_only(plan)
    return isinstance(src, Resident) and src.fed
