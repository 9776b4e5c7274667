"""``sizes="auto"``: shards sized to each device's measured speed for a job, adapting run after run.

A run planned with ``sizes="auto"`` is *timed*: each shard's device reads
``tf.timestamp()`` before the shard's map and again once its partial result is made
(the device's own work, not its wait for the run to reach it); the per-shard clocks
(two float64 scalars each) are fetched with the result.  Each device's speed for the job is its rows divided by the span of its
shards' clocks, folded into a per-(job, cluster) record:

- an exponentially weighted moving average (:data:`ALPHA`; :data:`ALPHA_UP` for a
  measurement faster than the average), each measurement
  first clipped to within ×:data:`STEP` of the current speed (a device's first one:
  of the median of its run), so one noisy run cannot swing the sizes;
- a device never weighs less than :data:`FLOOR` of the fastest one, so a slowed
  device keeps some rows, keeps being measured, and wins rows back when it recovers;
- sizes are multiples of 1/:data:`GRID` of the rows, and move only when the new
  split would finish at least :data:`HYSTERESIS` sooner at the recorded speeds (each
  new split is a new compiled graph: no recompiling for noise, and a split seen
  before reuses its graph);
- every timed run counts, every device of it too, however short its shard (timing only the
  runs where noise made a small shard slow would keep a slowed device small after it recovers).

The first run of a job on a cluster has no record: it uses even sizes and measures.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from typing import Any

import attrs
import numpy as np

from .._base.device import Device
from .._base.partition import Weights, canonical_sizes, even_sizes
from .._base.place import default_devices, place
from .._base.plan import Measured, Plan, Shard, make_plan
from .._base.state import ClusterVar
from .._cluster.cluster import Cluster

ALPHA = 0.3
"""Weight of the newest measurement in a device's moving average of rows/s."""
ALPHA_UP = 0.8
"""Weight of a measurement faster than the average: noise mostly slows a run, so a device measured faster has
most likely recovered; it wins its rows back within a few runs (from 5% of them to about even in four)."""
STEP = 4.0
"""A measurement counts as at most ×STEP (at least ÷STEP) of the speed it updates."""
FLOOR = 0.05
"""The least weight of a device, as a fraction of the fastest device's speed."""
HYSTERESIS = 0.1
"""Sizes change only when the new split would finish at least this fraction sooner, at the recorded speeds."""
GRID = 64
"""Sizes are multiples of 1/GRID of the rows: a split seen before reuses its compiled graph."""


@attrs.define
class Speeds:
    """What ``sizes="auto"`` knows of one job on one cluster."""

    rates: dict[str, float] = attrs.field(factory=dict)
    """Each device's moving average of rows per second."""
    runs: int = 0
    """Timed runs folded into ``rates``."""
    last: tuple[tuple[int, tuple[str, ...]], tuple[int, ...]] | None = None
    """(rows, shard devices) and the sizes of the last timed run: kept while the speeds barely move."""


_SPEEDS = ClusterVar("measured speeds of sizes='auto' jobs", lambda cluster: dict[Hashable, Speeds]())
_lock = threading.Lock()


def speeds(job: Hashable, cluster: Cluster) -> Speeds:
    """A copy of the record of ``job`` (a job's identity) on ``cluster``; empty when it never ran timed there."""
    with _lock:
        found = cluster.state(_SPEEDS).get(job)
        return Speeds() if found is None else Speeds(dict(found.rates), found.runs, found.last)


def forget(job: Hashable, cluster: Cluster) -> None:
    """Drop the record of ``job`` on ``cluster``: its next ``sizes="auto"`` run starts from even sizes."""
    with _lock:
        cluster.state(_SPEEDS).pop(job, None)


def auto_plan(
    job: Hashable,
    cluster: Cluster,
    rows: int,
    devices: Sequence[object] | None,
    available: Sequence[Device],
    *,
    fallback: str | None = None,
) -> Plan:
    """The plan of a ``sizes="auto"`` run: one shard per device, sized by the devices' recorded speeds.

    Raises:
        PlacementError: ``devices`` name a device the cluster does not have.
    """
    count = (
        len(devices) if devices is not None and not isinstance(devices, str) and len(devices) else len(default_devices(available))
    )
    names = tuple(str(p.device) for p in place(count, devices, available, fallback=fallback))
    record = speeds(job, cluster)
    known = [record.rates[d] for d in names if d in record.rates]
    if not known:
        sizes = even_sizes(rows, count)
        rates: list[float | None] = [None] * count
    else:
        middle = float(np.median(known))
        guessed = [record.rates.get(d, middle) for d in names]
        least = FLOOR * max(guessed)
        shares = [max(r, least) / names.count(d) for r, d in zip(guessed, names, strict=True)]  # rows/s of each shard
        sizes = _on_grid(Weights(tuple(s / max(shares) for s in shares)), rows)
        if record.last is not None and record.last[0] == (rows, names):
            previous = record.last[1]
            if _makespan(sizes, shares) > (1 - HYSTERESIS) * _makespan(previous, shares):
                sizes = previous  # the new split would not pay for itself (a new graph): keep the last one
        rates = [record.rates.get(d) for d in names]
    plan = make_plan(rows, list(sizes), devices, available, fallback=fallback)
    return attrs.evolve(plan, measured=Measured(tuple(rates), record.runs))


def _on_grid(shares: Weights, rows: int) -> tuple[int, ...]:
    """``rows`` split by ``shares`` in steps of 1/:data:`GRID` of the rows (the rest to the largest shard).

    Example:
        >>> _on_grid(Weights((1.0, 0.5)), 1000)
        (670, 330)
    """
    step = max(1, rows // GRID)
    sizes = [step * n for n in canonical_sizes(shares, rows=rows // step, default_shards=len(shares.values))]
    sizes[sizes.index(max(sizes))] += rows - sum(sizes)
    return tuple(sizes)


def _makespan(sizes: Sequence[int], rates: Sequence[float]) -> float:
    """Seconds until the last shard is done, each shard at its rows/s."""
    return max(n / r for n, r in zip(sizes, rates, strict=True))


def record(job: Hashable, cluster: Cluster, plan: Plan, shards: Sequence[Shard], clocks: Sequence[Any]) -> None:
    """Fold one timed run into the record of ``job`` on ``cluster``.

    ``clocks[i]`` holds the two ``tf.timestamp()`` readings (start, end) of ``shards[i]``.
    """
    spans: dict[str, list[float]] = {}
    counted: dict[str, int] = {}
    for shard, clock in zip(shards, clocks, strict=True):
        start, end = (float(c) for c in np.asarray(clock).reshape(2))
        span = spans.setdefault(shard.device, [start, end])
        span[0], span[1] = min(span[0], start), max(span[1], end)
        counted[shard.device] = counted.get(shard.device, 0) + shard.rows
    timed = {d: (counted[d], end - start) for d, (start, end) in spans.items() if counted[d] > 0 and end > start}
    measured = {d: rows / seconds for d, (rows, seconds) in timed.items()}
    middle = float(np.median(list(measured.values())))
    with _lock:
        entry = cluster.state(_SPEEDS).setdefault(job, Speeds())
        for device, rate in measured.items():
            old = entry.rates.get(device)
            if old is None:  # a first measurement is clipped to the run's other devices
                entry.rates[device] = min(max(rate, middle / STEP), middle * STEP)
                continue
            rate = min(max(rate, old / STEP), old * STEP)
            alpha = ALPHA_UP if rate > old else ALPHA
            entry.rates[device] = (1 - alpha) * old + alpha * rate
        changed = bool(measured)
        if changed:
            entry.runs += 1
            entry.last = ((plan.rows, tuple(s.device for s in plan.shards)), plan.sizes)
