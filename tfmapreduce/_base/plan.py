"""Plans: the frozen value of a partition and a placement, read before paying for a run."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import attrs

from .device import Device
from .errors import PartitionError
from .partition import SizesLike, canonical_sizes
from .place import default_devices, place
from .task import Task


@attrs.frozen(cache_hash=True)
class Shard:
    """One slice of the rows and the device that maps it."""

    index: int
    """Position of the shard in the plan."""
    start: int
    """First row (inclusive)."""
    stop: int
    """Last row (exclusive)."""
    device: str
    """The full name of the device that runs the map, e.g. ``/job:local/replica:0/task:1/device:CPU:0``."""
    requested: str | None = None
    """The device asked for, when it was missing and a fallback ran the shard on ``device`` instead."""
    path: str | None = attrs.field(default=None, eq=False)
    """How host data reaches the shard: ``"shm"`` (a shared-memory file on the client's host), ``"feed"`` (gRPC), or None
    (resident).  Not part of the plan's identity (where rows go); the shipped inputs' signatures include it."""
    task: Task = attrs.field(init=False, eq=False, repr=False)
    """The task holding ``device`` (parsed once, from ``device``)."""

    @task.default
    def _task_of_device(self) -> Task:
        return Device.parse(self.device).task

    @property
    def rows(self) -> int:
        """``stop - start``; 0 for an empty shard."""
        return self.stop - self.start


@attrs.frozen
class Measured:
    """How ``sizes="auto"`` chose a plan's sizes: the speeds it used."""

    speeds: tuple[float | None, ...]
    """Per shard: its device's measured rows per second for the job (None: not measured yet)."""
    runs: int
    """Timed runs behind the speeds; 0: none yet, so the sizes are even (and this run measures)."""


def _check_cover(plan: Plan, attribute: object, shards: tuple[Shard, ...]) -> None:
    expected = 0
    for i, s in enumerate(shards):
        if s.index != i or s.start != expected or s.stop < s.start:
            raise PartitionError(f"shard {i} ({s.start}:{s.stop}) does not continue the rows at {expected}")
        expected = s.stop
    if expected != plan.rows:
        raise PartitionError(f"the shards cover {expected} rows, not the {plan.rows} rows of the input")


@attrs.frozen(cache_hash=True)
class Plan:
    """Which rows go to which device: every row in exactly one shard, in order.

    ``print(plan)`` shows the table; nothing runs until ``MapReduce.run``.

    Examples:
        >>> job = tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum)
        >>> tasks = ["/job:local/task:0", "/job:local/task:1"]
        >>> print(job.plan(np.zeros(100, np.float32), cluster=cluster, sizes=[30, 70], devices=tasks))
        Plan: 100 rows in 2 shards on 2 tasks
          shard  rows    size  via   device
              0  0:30      30  feed  /job:local/replica:0/task:0/device:CPU:0
              1  30:100    70  feed  /job:local/replica:0/task:1/device:CPU:0
    """

    rows: int
    """Rows of the input (its length on axis 0)."""
    shards: tuple[Shard, ...] = attrs.field(validator=_check_cover)
    """The shards, in row order."""
    measured: Measured | None = attrs.field(default=None, eq=False)
    """For ``sizes="auto"``: the devices' measured speeds behind the sizes.  Not part of the plan's identity."""
    speculation: str | None = attrs.field(default=None, eq=False)
    """For ``speculate=True``: what speculation does in this plan (backups, or why there are none).  Not part of its identity."""

    @property
    def sizes(self) -> tuple[int, ...]:
        """Rows per shard."""
        return tuple(s.rows for s in self.shards)

    @property
    def tasks(self) -> tuple[Task, ...]:
        """The distinct tasks the shards run on, in order of first use."""
        return tuple(dict.fromkeys(s.task for s in self.shards))

    def explain(self, units: Sequence[str] | None = None) -> str:
        """The plan as a table: each shard's rows, size and device (and any fallback).

        ``units``: what each shard's span and size count, ``"rows"`` (the default) or ``"bytes"``
        (a CSV file's shard, whose rows are known only once read); a join's stacked plan mixes them.
        """
        unit = list(units) if units is not None else ["rows"] * len(self.shards)
        spans = [f"{s.start}:{s.stop}" for s in self.shards]
        mixed = len(set(unit)) > 1
        span_head = "span" if mixed else (unit[0] if unit else "rows")
        w_span = max(len(span_head), *(len(t) for t in spans))
        w_size = max(4, *(len(str(s.rows)) for s in self.shards))
        w_unit = max(len(u) for u in unit) if mixed else 0
        if mixed:
            totals = {u: sum(s.rows for s, v in zip(self.shards, unit, strict=True) if v == u) for u in dict.fromkeys(unit)}
            amount = " and ".join(f"{n} {u}" for u, n in totals.items())
        else:
            amount = f"{self.rows} {span_head}"
        lines = [f"Plan: {amount} in {len(self.shards)} shards on {len(self.tasks)} tasks"]
        if self.speculation:
            lines.append(f"  speculate=True: {self.speculation}")
        auto = self.measured
        rates: list[str] = []
        w_rate = 0
        if auto is not None:
            lines.append(
                f"  sizes='auto': sized to the speeds measured over {auto.runs} earlier run{'s' if auto.runs != 1 else ''} of this job"
                if auto.runs
                else "  sizes='auto': no speed measured yet for this job: even sizes, this run measures them"
            )
            rates = [f"{r:.3g}" if r is not None else "-" for r in auto.speeds]
            w_rate = max(6, *(len(r) for r in rates))
        via = any(s.path for s in self.shards)  # host data: each shard's path (shared memory or feed)
        rate_head = f"{'rows/s':>{w_rate}}  " if auto is not None else ""
        unit_head = f"{'unit':<{w_unit}}  " if mixed else ""
        lines.append(f"  shard  {span_head:<{w_span}}  {'size':>{w_size}}  {unit_head}{rate_head}{'via   ' if via else ''}device")
        for s, span, u in zip(self.shards, spans, unit, strict=True):
            note = f"  (asked for {s.requested}: absent, fell back to CPU)" if s.requested else ""
            note += "  (empty: skipped)" if s.rows == 0 else ""
            path = f"{s.path or '':<4}  " if via else ""
            rate = f"{rates[s.index]:>{w_rate}}  " if auto is not None else ""
            shown = f"{u:<{w_unit}}  " if mixed else ""
            lines.append(f"  {s.index:>5}  {span:<{w_span}}  {s.rows:>{w_size}}  {shown}{rate}{path}{s.device}{note}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


def make_plan(
    rows: int, sizes: SizesLike, devices: Sequence[object] | None, available: Sequence[Device], *, fallback: str | None = None
) -> Plan:
    """Partition ``rows`` by ``sizes`` and place the shards on ``devices`` (see ``MapReduce.plan``).

    Plans are values: the same arguments give the same plan, made once and remembered (every run plans).
    """
    key = (rows, _frozen(sizes), _frozen(devices), tuple(available), fallback)
    try:
        with _plans_lock:
            plan = _plans.get(key)
    except TypeError:  # unhashable sizes (a numpy array): made anew
        return _make_plan(rows, sizes, devices, available, fallback)
    if plan is None:
        plan = _make_plan(rows, sizes, devices, available, fallback)
        with _plans_lock:
            _plans[key] = plan
            while len(_plans) > 256:
                del _plans[next(iter(_plans))]
    return plan


_plans: dict[tuple[Any, ...], Plan] = {}
_plans_lock = threading.Lock()


def _frozen(value: object) -> object:
    """``value`` as a cache key that tells ``1``, ``1.0`` and ``True`` apart (each may be valid or not)."""
    if isinstance(value, list | tuple):
        return tuple((type(v), v) for v in value)
    return (type(value), value)


def _make_plan(
    rows: int, sizes: SizesLike, devices: Sequence[object] | None, available: Sequence[Device], fallback: str | None
) -> Plan:
    default_shards = (
        len(devices) if devices is not None and not isinstance(devices, str) and len(devices) else len(default_devices(available))
    )
    canonical = canonical_sizes(sizes, rows=rows, default_shards=default_shards)
    placements = place(len(canonical), devices, available, fallback=fallback)
    shards, start = [], 0
    for i, (size, p) in enumerate(zip(canonical, placements, strict=True)):
        shards.append(Shard(i, start, start + size, str(p.device), str(p.requested) if p.requested else None))
        start += size
    return Plan(rows, tuple(shards))
