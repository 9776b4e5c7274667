"""A host side beside a resident one: where the join's run will scatter it, known before anything moves.

A join runs over two sides that live alike, so a host side joined with a resident one goes to the workers for that
run alone.  Where it goes is decided here, once (:func:`placement`), from its rows and the cluster's devices: the
plan (``plan_join``) reads it from a :class:`Placed` column and moves nothing; the run (``join``) scatters the column
there (:meth:`Placed.scatter`) and frees it after.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import attrs
import numpy as np

from ..._base.device import Device
from ..._base.errors import JobError, TfMapReduceError
from ..._base.plan import Plan, Shard, make_plan
from ..._base.task import Task
from ..._cluster.cluster import Cluster
from ..._io.resident import Sharded, scatter
from ..._io.source import ShardTensor, Source


def placement(rows: int, cluster: Cluster) -> Plan:
    """Where a host side of ``rows`` rows goes beside a resident side: as ``scatter`` places data by default (rows
    split evenly over the cluster's default devices)."""
    return make_plan(rows, None, None, [Device.parse(d) for d in cluster.devices])


@attrs.frozen(eq=False)
class Placed:
    """One column of a host side, as the run will hold it: on ``plan``'s shards of ``cluster``, read nowhere yet.

    A join plans over it as over resident data (same rows, dtype, shape and plan); only the run's :meth:`scatter`
    moves its rows, to exactly that plan.
    """

    inner: Source
    plan: Plan
    cluster: Cluster

    @property
    def rows(self) -> int:
        return self.inner.rows

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.inner.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.inner.shape

    @property
    def home(self) -> Cluster:
        return self.cluster

    @property
    def home_plan(self) -> Plan:
        return self.plan

    def signature(self, plan: Plan) -> Hashable:
        return ("placed", self.dtype.str, self.shape[1:])

    def tensor(self, shard: Shard) -> ShardTensor:
        raise AssertionError("a placed column is planned over, never read: its run scatters it first (Placed.scatter)")

    def feed(self, shard: Shard) -> None:
        return None

    def bytes_sent(self, shard: Shard) -> int:
        return 0

    def input_error(self, error: JobError, plan: Plan, cluster: Cluster) -> TfMapReduceError | None:
        return None

    def survive(self, lost: frozenset[Task]) -> None:
        return None

    def scatter(self) -> Sharded:
        """The column sent to the workers, shard for shard where its plan says (the caller deletes it after the run)."""
        sizes, devices = [s.rows for s in self.plan.shards], [s.device for s in self.plan.shards]
        moved = scatter(self.inner.array, cluster=self.cluster, sizes=sizes, devices=devices)  # type: ignore[attr-defined]
        assert moved.plan == self.plan, (moved.plan, self.plan)
        return moved
