"""The plan of a keyed job: its shards, the reducer devices its keys shuffle to, and the rows mapped at once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np

from ..._base.device import Device
from ..._base.errors import PlacementError
from ..._base.place import default_devices
from ..._base.plan import Plan
from ..._base.task import Task
from ..._cluster.cluster import Cluster
from ..._io.source import Source, streamed
from ..._options import RunOptions

if TYPE_CHECKING:
    from .forecast import SpillForecast

STREAM_BATCH_ROWS = 1 << 16
"""Default ``batch_rows`` of a keyed job over files or strings: each batch's partial is merged into the running state,
and smaller batches keep that merge and the batch's strings cache-sized (measured in docs/keyed.md)."""

BATCH_ROWS = 1 << 22
"""Rows of a shard mapped at once when ``batch_rows=None``: a larger shard is folded batch by batch (2²²: a numeric
map's batch of 64 MiB or so; 2²⁰ took 0.99 s against 0.67 s for mean_by_key over 2e7 rows, 1e6 keys)."""


@attrs.frozen
class KeyedPlan:
    """The plan of a keyed run: the shards (as for any job), the reducer devices, the batch size and the partitioner.

    Keys go to reducer ``buckets(key) mod len(reducers)`` (``_per_key``'s stable hash), or with ``partitioner="range"``
    to the reducer of their key range (``_splitters``: ranges chosen from a sample in the run).

    Examples:
        >>> keyed = tmr.MapReduce(lambda k: (k, k), tmr.combiners.count, by_key=True)
        >>> plan = keyed.plan(np.array([3, 1, 3, 2]), cluster=cluster, sizes=2, reducers=2)
        >>> plan.plan.sizes, len(plan.reducers)
        ((2, 2), 2)
    """

    plan: Plan
    """The shards: which rows are mapped on which device."""
    reducers: tuple[str, ...]
    """The reducer devices: bucket ``r`` of the key hash is merged on ``reducers[r]``."""
    batch_rows: int
    """Rows of a shard mapped at once; larger shards are folded batch by batch."""
    partitioner: str = "hash"
    """``"hash"`` (keys by a stable hash) or ``"range"`` (contiguous key ranges, reducer r's keys below reducer r + 1's)."""
    spill: SpillForecast | None = attrs.field(default=None, eq=False)
    """What ``MapReduce.plan`` estimates of the reducers' budget: in memory or spilled, how (None: a run's own plan)."""

    @property
    def tasks(self) -> tuple[Task, ...]:
        """The tasks the run uses: the shards' and the reducers', in order."""
        reducer_tasks = (Device.parse(d).task for d in self.reducers)
        return tuple(dict.fromkeys([*self.plan.tasks, *reducer_tasks]))

    def explain(self) -> str:
        """The shard table, then the reducers, then what the budget says (in memory or spilled), where it is known."""
        lines = [
            self.plan.explain(),
            f"batches of at most {self.batch_rows} rows per shard",
            f"{len(self.reducers)} reducer(s), keys by stable hash:"
            if self.partitioner == "hash"
            else f"{len(self.reducers)} reducer(s), keys by sampled range (partitioner='range': reducer r's keys below reducer r + 1's):",
        ]
        what = "bucket" if self.partitioner == "hash" else "range"
        lines += [f"  {what} {r} → {d}" for r, d in enumerate(self.reducers)]
        lines += [self.spill.explain()] if self.spill is not None else []
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


def resolve_reducers(reducers: int | Sequence[str] | None, plan: Plan, cluster: Cluster) -> tuple[str, ...]:
    """The reducer devices: None (one per task of the plan, its first CPU), a count, or device strings.

    Raises:
        PlacementError: 0, negative or more reducers than the cluster's devices, or an unknown device.
        TypeError: neither None, an int nor a list of strings.
    """
    available = [Device.parse(d) for d in cluster.devices]
    listing = "\n  ".join(str(d) for d in available)
    if reducers is None:
        chosen = []
        for task in plan.tasks:
            cpus = [d for d in available if d.task == task and d.type == "CPU"]
            chosen.append(str(cpus[0]) if cpus else str(Device.parse(f"{task}/cpu:0")))
        return tuple(chosen)
    if isinstance(reducers, (int, np.integer)) and not isinstance(reducers, bool):
        n = int(reducers)
        if not 1 <= n <= len(available):
            raise PlacementError(
                f"reducers={n}: expected a number of reducer devices from 1 to {len(available)} (the cluster's devices), "
                f"got {n}; pass reducers=None for one per task, or a list of device strings"
            )
        cpus = list(default_devices([d for d in available if d.type == "CPU"]))
        others = [d for d in default_devices(available) if d not in cpus]
        rest = [d for d in available if d not in cpus and d not in others]
        return tuple(str(d) for d in [*cpus, *others, *rest][:n])
    if isinstance(reducers, str) or not isinstance(reducers, Sequence):
        raise TypeError(
            f"reducers must be None, a number of reducer devices, or a list of device strings such as ['/job:local/task:0'], "
            f"got {type(reducers).__name__} {reducers!r}"
        )
    if not reducers:
        raise PlacementError(
            "reducers=[] names no reducer device; pass at least one device string, a count, or None (one per task)"
        )
    if len(reducers) > len(available):
        raise PlacementError(
            f"reducers lists {len(reducers)} devices, more than the cluster's {len(available)}; pass at most {len(available)}"
        )
    known = set(available)
    chosen = []
    for i, name in enumerate(reducers):
        device = Device.parse(name, argument=f"reducers[{i}]")
        if device not in known:
            raise PlacementError(f"reducers[{i}]={name!r}: the cluster has no such device; its devices are:\n  {listing}")
        chosen.append(str(device))
    if len(set(chosen)) != len(chosen):
        raise PlacementError(f"reducers={list(reducers)!r} names a device twice; each reducer device must appear once")
    return tuple(chosen)


def keyed_plan(shards: Plan, srcs: Sequence[Source], cluster: Cluster, settings: RunOptions) -> KeyedPlan:
    """The :class:`KeyedPlan` of a run over ``shards`` (nothing runs)."""
    strings = any(np.dtype(s.dtype).kind in "OSU" for s in srcs)
    default = STREAM_BATCH_ROWS if strings or streamed(srcs) is not None else BATCH_ROWS
    reducers = resolve_reducers(settings.reducers, shards, cluster)
    return KeyedPlan(shards, reducers, settings.batch_rows or default, settings.partitioner)
