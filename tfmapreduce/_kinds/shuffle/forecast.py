"""What a keyed, group or join plan would do with its memory budget, said before any run: in memory, or spilled.

A run decides in its graph, from the rows its reducers would really receive (``_ops.budget``): over the budget, a group
job, a keyed combine or a fetched join runs again through the workers' disks (``grace``,
``spilled_group``, ``join.spilled``).  ``MapReduce.plan``, ``tmr.plan_by_key`` and ``tmr.plan_join`` cannot know those rows without running,
so they estimate them from the input's bytes, as the spill plans its sub-partitions from a refused share
(``grace.sub_partitions``), and print the estimate: the bytes per reducer against its budget, and where it is over,
the sub-partitions (one round each), their bytes and what each task writes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from ..._base.plan import Plan
from ..._base.task import Task
from ..._cluster.cluster import Cluster
from ..._io.files.csv import CsvTable
from ..._io.files.source import FileSource
from ..._io.resident_source import Resident
from ..._io.source import Source
from ..._ops.budget import budget_of
from .csv_sample import sample
from .on_workers import sample_lengths
from .partials import STRING_BYTES, UNKNOWN_STRING, Partials

MARGIN = 2
"""Sub-partitions are planned at half the budget (as ``grace.MARGIN``)."""

SAMPLE = 10_000
"""The strings whose lengths estimate a string column's bytes."""


@attrs.frozen
class SpillForecast:
    """A plan's estimate of what one reducer holds against its budget, and, over it, how the run would spill.

    Example:
        >>> f = SpillForecast("each reducer's share", 3_000, 1_000, "max_bytes=1000", 2, ((tmr.Task("w", 0), 6_000),), "/tmp/x")
        >>> f.spills, f.parts, f.part_bytes
        (True, 6, 500)
    """

    what: str
    """What is estimated, and from what: ``"each reducer's share of (key, value) rows, from the input's rows"``."""
    share: int
    """The bytes one reducer would hold (its even share of the estimate)."""
    budget: int
    """The bytes it may hold: ``max_bytes``, else a quarter of this host's available memory."""
    limit: str
    """Where the budget came from, for the printed plan."""
    reducers: int
    written: tuple[tuple[Task, int], ...]
    """The bytes each task would write to its spill folder (its rows), in the plan's task order."""
    folder: str
    """Where each task would write: the run's spill folder, named as a run names it (``<tmp>/tfmapreduce-spill-<run>``)."""
    instead: str = "resident=True keeps each reducer's rounds concatenated there"
    """What does not spill, for the printed plan."""
    cap: int | None = None
    """The most sub-partitions per reducer the run plans whatever the bytes (a join's: one per 256 rows of its sides)."""
    partitioner: str = "hash"
    """How the sub-partitions split the keys: ``"hash"``, or ``"range"`` (a range-partitioned keyed combine's)."""

    @property
    def spills(self) -> bool:
        """Whether the run is expected to spill: its share over the budget."""
        return self.share > self.budget

    @property
    def parts(self) -> int:
        """Sub-partitions per reducer, one round each, where it spills (0 where it fits)."""
        if not self.spills:
            return 0
        parts = max(2, math.ceil(self.share * MARGIN / max(1, self.budget)))
        return min(parts, self.cap) if self.cap is not None else parts

    @property
    def part_bytes(self) -> int:
        """The bytes of one sub-partition, on average (the share where it fits)."""
        return math.ceil(self.share / max(1, self.parts))

    def explain(self) -> str:
        """One line where it fits; else the spill, then the bytes each task writes."""
        estimate = f"{self.what}: about {self.share:,} bytes"
        budget = f"the budget of {self.budget:,} bytes ({self.limit})"
        if not self.spills:
            return f"in memory: {estimate}, within {budget}"
        total = sum(size for _, size in self.written)
        lines = [
            f"spills: {estimate}, over {budget}; the in-memory run is refused before a row travels, then "
            f"{total:,} bytes are written to {self.folder} on their tasks, in {self.reducers} × {self.parts} "
            f"{self.partitioner} sub-partitions of about {self.part_bytes:,} bytes, each reducer reducing one per round "
            f"({self.parts} rounds; {self.instead}):"
        ]
        lines += [f"  {task}: {size:,} bytes" for task, size in self.written]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


def row_bytes(srcs: Sequence[Source]) -> int:
    """The bytes of one row of ``srcs`` as the budget checks count them: numbers their size, strings ``STRING_BYTES``
    each and their UTF-8 bytes, the mean over a sample of them, rounded up: the first ``SAMPLE`` where the array is on
    the host, about ``SAMPLE`` rows drawn on the workers where it is resident (``on_workers.sample_lengths``: one
    small run), a CSV file's from its first records' fields (``csv_sample``), else (other files) ``UNKNOWN_STRING``.

    Example:
        >>> from tfmapreduce._io.source import Shipped
        >>> row_bytes([Shipped(np.arange(2)), Shipped(np.array(["ab", "abcd"], object))])  # 8 + 32 + 3
        43
    """
    total = 0
    for src in srcs:
        per_row = math.prod(src.shape[1:])
        if np.dtype(src.dtype).kind in "OSU":
            total += per_row * (STRING_BYTES + _string_bytes(src))
        else:
            total += per_row * np.dtype(src.dtype).itemsize
    return total


def _string_bytes(src: Source) -> int:
    """The mean UTF-8 bytes of one of ``src``'s strings, rounded up: sampled (:func:`_lengths`), a CSV file's from its
    first records' text columns (``csv_sample``), else ``UNKNOWN_STRING``."""
    if isinstance(src, FileSource):
        found = sample(src, src.layout.columns or range(src.layout.fields))
        return UNKNOWN_STRING if found is None else found.field
    lengths = _lengths(src) or [UNKNOWN_STRING]
    return math.ceil(sum(lengths) / len(lengths))


def _lengths(src: Source) -> list[int]:
    """The UTF-8 bytes of a sample of ``src``'s strings: a host array's first ``SAMPLE``, a resident one's sampled on
    its workers; empty where neither (a file's)."""
    if isinstance(src, Resident):
        return [int(n) for n in sample_lengths(src.sharded, SAMPLE)]
    array = getattr(src, "array", None)
    sample = np.asarray(array).ravel()[:SAMPLE].tolist() if array is not None and src.rows else []
    return [len(s.encode() if isinstance(s, str) else s) for s in sample]


def written(plan: Plan, bytes_of: Any) -> tuple[tuple[Task, int], ...]:
    """Each task's bytes: ``bytes_of(shard)`` summed over its shards, in the plan's task order."""
    out: dict[Task, int] = {}
    for s in plan.shards:
        out[s.task] = out.get(s.task, 0) + int(bytes_of(s))
    return tuple(out.items())


def limit_of(max_bytes: int | None) -> tuple[int, str]:
    """The budget of ``max_bytes`` and where it came from."""
    if max_bytes is not None:
        return max_bytes, f"max_bytes={max_bytes}"
    return budget_of(None), "a quarter of this host's available memory"


def in_rows(size: int, row: int, unit: str) -> tuple[int, int]:
    """The rows of ``size`` units of an input, and the bytes a task writes per unit: ``unit="rows"``, rows of ``row``
    bytes in memory; ``unit="bytes"``, a CSV table's files' bytes (its rows are known once read), its rows estimated as
    those bytes over ``row`` (a record's bytes on file, ``csv_sample``; else a row's in memory), each byte written as
    it is.

    Example:
        >>> in_rows(1_000, 16, "bytes"), in_rows(1_000, 16, "rows")
        ((62, 1), (1000, 16))
    """
    return (size // max(1, row), 1) if unit == "bytes" else (size, row)


def table_row(srcs: Sequence[Source]) -> tuple[int, int] | None:
    """The bytes in memory of one row of a by-key recipe's CSV table (``read_csv`` with ``keys=``/``values=``), its key
    and values as the budget checks count them, and one record's bytes on file, from its files' first records
    (``csv_sample``: a string key's bytes their mean, beside ``STRING_BYTES``); None for any other input.  Where no
    record can be read, a string key is taken as 16 bytes and a record as the row's bytes in memory."""
    src = srcs[0] if len(srcs) == 1 else None
    if not (isinstance(src, FileSource) and isinstance(src.reader, CsvTable)):
        return None
    found = sample(src, src.layout.columns[:1])
    width = UNKNOWN_STRING if found is None else found.field
    key = 8 if src.reader.key_dtype == "int64" else STRING_BYTES + width
    row = key + math.prod(src.shape[1:]) * np.dtype(src.dtype).itemsize
    return row, row if found is None else found.record


def keyed_forecast(
    plan: Plan,
    reducers: int,
    srcs: Sequence[Source],
    max_bytes: int | None,
    folder: str,
    *,
    partitioner: str = "hash",
    partials: Partials | None = None,
    cluster: Cluster | None = None,
) -> SpillForecast:
    """The forecast of a keyed or group run over ``plan``: every input row sent to one of ``reducers`` by key hash (a
    CSV table's rows estimated from its files' bytes, :func:`in_rows`), split into sub-partitions by ``partitioner``
    (a resident result kept on its reducers, as in memory).
    ``partials``: a keyed combine's, traced (``partials.traced``): what each task sends is counted in per-key
    partials, one per distinct key (counted where the keys are on the client or resident where the job runs, else
    bounded soundly by the rows: ``Partials.per_task``), not in rows."""
    table = table_row(srcs)
    if partials is not None and (table is None or (partials.passes_keys and cluster is not None)):
        return _combined(plan, reducers, srcs, max_bytes, folder, partitioner, partials, cluster)
    row = row_bytes(srcs) if table is None else table[0]
    rows, per_unit = in_rows(plan.rows, row, "rows") if table is None else in_rows(plan.rows, table[1], "bytes")
    budget, limit = limit_of(max_bytes)
    share = math.ceil(rows * row / max(1, reducers))
    tasks = written(plan, lambda s: s.rows * per_unit)
    what = "each reducer's share of (key, value) rows, estimated from the input's rows"
    if table is not None:
        what += f" (a CSV table's rows as its files' bytes over {table[1]} a record, its rows {table[0]} bytes each in memory)"
    return SpillForecast(what, share, budget, limit, reducers, tasks, folder, partitioner=partitioner)


def _combined(
    plan: Plan,
    reducers: int,
    srcs: Sequence[Source],
    max_bytes: int | None,
    folder: str,
    partitioner: str,
    partials: Partials,
    cluster: Cluster | None,
) -> SpillForecast:
    """The forecast of a keyed combine whose partials were traced: each task's partials' bytes
    (:meth:`Partials.per_task`), spread evenly over the reducers."""
    budget, limit = limit_of(max_bytes)
    if partials.passes_keys:
        sent, counted = partials.per_task(plan, srcs, lambda: row_bytes(srcs[:1]), cluster)
        each = max((size // n for n, size in sent.values() if n), default=partials.row)
        what = (
            f"each reducer's share of per-key partials (each key's bytes and {partials.leaves} of partial; a task's "
            f"distinct keys counted on the {counted}), estimated before the run"
            if counted
            else f"each reducer's share of per-key partials ({each} bytes each; a task's at most its rows), "
            "estimated before the run"
        )
        tasks = tuple((task, size) for task, (_, size) in sent.items())
    else:  # the map makes its keys: its rows are unknown, counted as one a row
        row = max(partials.row, row_bytes(srcs))
        tasks = written(plan, lambda s: s.rows * row)
        what = f"each reducer's share of per-key partials, one a row at most ({row} bytes each), estimated before the run"
    share = math.ceil(sum(size for _, size in tasks) / max(1, reducers))
    return SpillForecast(what, share, budget, limit, reducers, tasks, folder, partitioner=partitioner)


ROWS_PER_PART = 256
"""A join's fewest rows of both sides per sub-partition, on average (as ``join.spilled.ROWS_PER_PART``)."""


def join_forecast(
    plan: Plan,
    sizes: tuple[int, int],
    reducers: int,
    side_row: tuple[int, int],
    out_row: int,
    max_bytes: int | None,
    folder: str,
    units: tuple[str, str] = ("rows", "rows"),
) -> SpillForecast:
    """The forecast of a join over ``plan`` (its stacked sides of ``sizes`` rows, ``side_row`` bytes a row each): its
    output estimated as its larger side's rows of ``out_row`` bytes (what a join on keys unique on its other side
    makes; a many-to-many join makes more), spread evenly over ``reducers`` devices.

    A side whose ``units`` are ``"bytes"`` (a CSV table: its rows are known once read) counts its files' bytes: they
    are what its tasks write, and its rows are estimated as those bytes over ``side_row`` (a row's bytes in memory).

    Example (a CSV side of 60,000 bytes beside 1,000 rows of 16 bytes; rows of 24 bytes out, over 2 devices):
        >>> from tfmapreduce._base.plan import make_plan
        >>> from tfmapreduce._base.device import Device
        >>> cpu = Device.parse("/job:w/task:0/device:CPU:0")
        >>> p = make_plan(61_000, [60_000, 1_000], [cpu, cpu], [cpu])
        >>> f = join_forecast(p, (60_000, 1_000), 2, (20, 16), 24, 20_000, "/tmp/s", ("bytes", "rows"))
        >>> f.share, f.parts, [size for _, size in f.written]  # 3,000 rows of the CSV side: 72,000 bytes out
        (36000, 4, [76000])
    """
    budget, limit = limit_of(max_bytes)
    counted = [in_rows(size, row, unit) for size, row, unit in zip(sizes, side_row, units, strict=True)]
    rows, per_unit = tuple(c[0] for c in counted), tuple(c[1] for c in counted)
    share = math.ceil(max(rows) * out_row / max(1, reducers))
    tasks = written(plan, lambda s: s.rows * per_unit[s.start >= sizes[0]])
    cap = max(2, math.ceil(sum(rows) / max(1, reducers) / ROWS_PER_PART))
    what = "each device's output rows, estimated as its larger side's"
    if "bytes" in units:
        what += " (a CSV side's rows as its files' bytes over a row's bytes in memory)"
    return SpillForecast(what, share, budget, limit, reducers, tasks, folder, "a resident join is refused instead", cap)
