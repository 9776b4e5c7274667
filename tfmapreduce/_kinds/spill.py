"""The spilled sort: a sort whose ranges exceed their reducers' memory, through each worker's local disk, into part files.

``tmr.sort(x, directory=...)`` / ``tmr.sort_by_key(keys, values, directory=...)``: an external *distribution* sort
(TeraSort's sampled ranges, finer), in 1 + B distributed runs::

    run 1, the spill          as ``tmr.sort`` samples and partitions (``ranges.partition_ranges``), but into R × B
                              buckets: B per reducer, enough that one bucket held ``COPIES`` times fits the budget
                              (``MARGIN`` times over, for the sample's error).  Each shard, a chunk of rows at a time
                              (one chunk held ``COPIES`` times fits the budget; the next starts once it is written),
                              writes each bucket's piece of each column (``serialize_tensor``) to the spill folder on
                              its own task's disk: SPILL/tfmapreduce-spill-<job>/<attempt>/b<bucket>-s<shard>-k<chunk>-c<column>;
                              the client fetches the rows of every piece, so it knows each bucket's exact size
    client                    each bucket's bytes × COPIES checked against the budget (ReducerMemoryError, naming it)
    run 2 + j, j < B          reducer r reads bucket r·B + j: each shard's piece read on that shard's task (its disk)
                              and sent to the reducer, concatenated in shard order, stably sorted as ``tmr.sort`` sorts
                              a range, encoded and written as part r·B + j (``write_npy``'s .npy, through the writers'
                              commit protocol: an attempt folder, committed by the client once every part is written);
                              one graph for every round, compiled once and fed j (``spilled_sort.Rounds``)
    every task, always        the job's spill folder removed (``TmrRemoveSpill``: stock ops remove no file), after
                              success, failure or a run given up at its deadline

A reducer thus holds one bucket at a time, never its range, and a shard one chunk: within ``max_bytes`` whatever the
data's size, beside the input itself (resident or shipped shards, and each row's range, 4 bytes, and key image, up to
8 bytes, while it spills), as long as the spill folders can hold it.  In a bucket round a task holds its pieces
of every reducer's bucket (read and parsed: about two buckets in all) beside its own reducer's five copies: seven
buckets, within the budget planned at ten.  The
buckets are ranges of the sampled (key, row) order, so the parts in order are ``np.sort`` (stable ``argsort`` for
``sort_by_key``), NaN placement and ``descending`` included.  Not a k-way merge of sorted runs: finer ranges make
every bucket a whole in-memory sort, with stock TensorFlow ops; a bucket the sample under-estimated past the budget
is refused after the spill, naming it.
"""

from __future__ import annotations

import math
import os
import re
import secrets
from collections.abc import Callable, Hashable, Mapping
from typing import Any, ClassVar, Protocol

import attrs
import numpy as np
import tensorflow as tf

from .._base.device import Device
from .._base.errors import JobError, OutputError, ReducerMemoryError, WorkerTimeoutError, WorkerUnavailableError
from .._base.log import ROOT
from .._base.plan import Plan
from .._base.task import Task
from .._engine.call import Call
from .._engine.kind import KindBase
from .._engine.program import Builder, Program
from .._engine.retry import leave_out, recoverable
from .._io.source import Sources
from .._native.loader import has
from .._ops.budget import Overrun
from .._options import RunOptions
from .ranges import range_ids
from .shuffle import forecast
from .shuffle.partials import STRING_BYTES
from .shuffle.plan import resolve_reducers


class RangeSorter(Protocol):
    """What the spilled sort takes of ``sort.Sort``: its inputs' checks, and how it sorts one range."""

    descending: bool
    max_bytes: int | None
    argument: str

    @property
    def identity(self) -> Hashable: ...

    def sources(self, x: Any) -> tuple[Sources, Any]: ...

    def _sorted(self, columns: list[tf.Tensor], native: Any | None) -> list[tf.Tensor]: ...


class Spilling(Protocol):
    """A spilled run's plan as its removal sees it: the run's spill folder and the tasks that may hold it."""

    @property
    def folder(self) -> str: ...

    @property
    def tasks(self) -> tuple[Task, ...]: ...


class OverBudget(ReducerMemoryError):
    """A keyed or group run's reducer over its budget, with the failed check's figures (what a spilled rerun of a
    group or keyed job plans its sub-partitions from: ``spilled_group``)."""

    def __init__(self, overrun: Overrun, message: str) -> None:
        super().__init__(message)
        self.overrun = overrun


COPIES = 5
"""A bucket is held at most five times over on its reducer: the rows received, their order, the sorted copy, the
encoded part and its file's bytes."""

MARGIN = 2
"""Buckets are planned at half the size that fits, so a bucket the sample under-estimated still fits."""

PREFIX = "tfmapreduce-spill-"
"""The name of a job's spill folder starts so (the only folders ``TmrRemoveSpill`` removes)."""

REMOVE_SECONDS = 10.0
"""How long the removal of a job's spill folders may take (a task that does not answer is logged)."""

_SPILL = re.compile(r"\bspill(\d+)_chunk\d+/")
_FULL = ("No space left", "Disk quota", "RESOURCE_EXHAUSTED", "ResourceExhausted")

log = ROOT.getChild("spill")


@attrs.frozen
class SpillPlan:
    """The plan of a spilled sort: the shards, the reducers, and the ``buckets`` each reducer sorts one at a time.

    Example:
        >>> shards = tmr.MapReduce(tf.reduce_sum, tf.add).plan(np.arange(6.0), cluster=cluster, sizes=2)
        >>> plan = SpillPlan(shards, ("/job:local/task:0/device:CPU:0",) * 2, 3, 1000, 8, 25, "/tmp/tfmapreduce-spill-0")
        >>> plan.ranges, sum(plan.spilled().values())  # 2 reducers, 3 buckets each; 6 rows of 8 bytes
        (6, 48)
    """

    plan: Plan
    """The shards: which rows are sampled, partitioned and spilled on which task."""
    reducers: tuple[str, ...]
    buckets: int
    """Buckets per reducer (one distributed run each, after the spill)."""
    budget: int
    """The bytes one reducer may hold (``max_bytes``, else a quarter of the client host's available memory)."""
    row_bytes: int
    """The bytes of one row, every column (a string: its bytes, estimated from a sample of the input, and 32)."""
    chunk: int
    """The rows a shard partitions and writes at a time (its chunk held ``COPIES`` times fits the budget)."""
    folder: str = attrs.field(eq=False)
    """The run's spill folder, the same path on each task's own disk (each run spills under its own: it is fed, so
    not part of what the program depends on)."""
    attempt: str = attrs.field(default="1", eq=False)
    """This attempt's folder in it (a retried run writes a new one); not part of what the program depends on."""

    @property
    def ranges(self) -> int:
        """Buckets in all, in key order: reducer r sorts buckets r·B to r·B + B − 1."""
        return len(self.reducers) * self.buckets

    @property
    def tasks(self) -> tuple[Task, ...]:
        """The tasks the run uses: the shards' and the reducers', in order."""
        return tuple(dict.fromkeys([*self.plan.tasks, *(Device.parse(d).task for d in self.reducers)]))

    def spilled(self) -> dict[Task, int]:
        """The bytes each task writes to its spill folder: its shards' rows."""
        out: dict[Task, int] = {}
        for s in self.plan.shards:
            out[s.task] = out.get(s.task, 0) + s.rows * self.row_bytes
        return out

    def explain(self) -> str:
        """The shard table, then what spills where and how the reducers sort it."""
        bucket = math.ceil(self.plan.rows / max(1, self.ranges)) * self.row_bytes
        spills = f"spills {self.plan.rows * self.row_bytes:,} bytes to {self.folder} on its tasks"
        lines = [self.plan.explain(), f"{spills}, each shard {self.chunk:,} rows at a time:"]
        lines += [f"  {task}: {size:,} bytes" for task, size in self.spilled().items()]
        lines.append(
            f"{len(self.reducers)} range(s) × {self.buckets} bucket(s) of about {bucket:,} bytes, each held "
            f"{COPIES}× within a budget of {self.budget:,} bytes per reducer:"
        )
        lines += [f"  range {r} → {d}" for r, d in enumerate(self.reducers)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


@attrs.frozen
class Spilled:
    """What the spill run left: its plan, its attempt folder, and the rows of each piece of each bucket."""

    plan: SpillPlan
    """The plan of the attempt that succeeded (its spill folder is removed once the buckets are sorted)."""
    folder: str
    pieces: tuple[tuple[Task, str], ...]
    """Each piece's task and name (``s<shard>-k<chunk>``), in row order: shard by shard, each shard's chunks in order."""
    rows: np.ndarray[Any, np.dtype[np.int64]]
    """``rows[i, b]``: the rows of bucket ``b`` in piece ``i``."""
    size: np.ndarray[Any, np.dtype[np.int64]]
    """``size[i, b]``: their bytes, every column (a string counts its bytes and 32, as the in-memory sort counts it)."""
    widths: tuple[int, ...]
    """Per column: the bytes of its longest string (the width of its parts' ``S`` dtype; 0 for numbers)."""


@attrs.define(eq=False, repr=False)
class Spill(KindBase[SpillPlan]):
    """The spill run as the run driver sees it (see ``_engine.kind.Kind``): ranges of buckets written to each
    shard's task's disk; ``sort`` takes the inputs and sorts a bucket as ``tmr.sort`` sorts a range.

    The kind keeps nothing of a run: each run spills under a folder of its own (named as it takes its inputs, see
    :meth:`sources`), each attempt under its own folder in it, both carried by the plan; so one ``Spill`` serves any
    number of runs, even at once.
    """

    sort: RangeSorter
    root: str
    """Where each task makes the job's spill folder (the same path on each task)."""
    budget: int
    phase: ClassVar[str] = "spill"
    refused: ClassVar[Mapping[str, str]] = {
        "speculate": "speculate=True does not apply to a spilled sort: every shard spills a piece of every bucket, so no "
        "shard can be backed up alone; drop speculate="
    }

    def __repr__(self) -> str:
        return f"spilled {self.sort!r}"

    @property
    def identity(self) -> Hashable:
        return ("spill", self.sort.identity)

    def sources(self, x: Any) -> tuple[Sources, Any]:
        """The sort's inputs (numbers, or 1-D strings), and the run's spill folder's name (``call.note``: each run its own)."""
        srcs, _ = self.sort.sources(x)  # (the sort's note says how strings travel: a spilled sort refuses them)
        for j, src in enumerate(srcs):
            if src.dtype.kind not in "biuf" and not (src.dtype.kind == "O" and len(src.shape) == 1):
                name = self.sort.argument if j == 0 else "values"
                raise TypeError(
                    f"a sort with directory= writes .npy parts of numbers, or of 1-D strings (as numpy S arrays); {name} "
                    f"has dtype {src.dtype} and shape {src.shape}: sort it without directory= (in memory), or as numbers"
                )
        return srcs, PREFIX + secrets.token_hex(6)

    def plan(self, shards: Plan, call: Call) -> SpillPlan:
        if call.settings.reducers is None:
            reducers = tuple(dict.fromkeys(s.device for s in shards.shards))
        else:
            reducers = resolve_reducers(call.settings.reducers, shards, call.cluster)
        row_bytes = forecast.row_bytes(call.srcs)  # strings: estimated from their lengths; the spill counts them exactly
        per_range = shards.rows * row_bytes / len(reducers)
        buckets = max(1, math.ceil(per_range * COPIES * MARGIN / self.budget))
        chunk = max(1, self.budget // (max(1, row_bytes) * COPIES))
        folder = os.path.join(self.root, call.note)  # the run's (see sources); the attempt's own folder in it
        return SpillPlan(shards, reducers, buckets, self.budget, row_bytes, chunk, folder, secrets.token_hex(4))

    def variant(self, plan: SpillPlan, call: Call) -> Hashable | None:
        return ()  # the attempt's folder is fed

    def fed(self, plan: SpillPlan, name: str) -> str:
        """The attempt's spill folder (a retried run writes a new one)."""
        return os.path.join(plan.folder, plan.attempt)

    def build(self, builder: Builder, plan: SpillPlan, call: Call) -> Program:
        """Partition every shard into the buckets and write each piece on the shard's task; fetch the pieces' rows."""
        native = call.native
        if not has(native, "tmr_remove_spill"):
            raise OutputError(
                "a sort with directory= spills to each worker's disk, and needs the native kernels' spill family on the "
                "client and every task (TensorFlow's stock ops cannot remove the spill files); see docs/deploy.md"
            )
        folder = builder.per_run("spill")
        tensors, which = range_ids(builder, plan.plan, plan.ranges, plan.reducers[0], self.sort.descending, native)
        counts = []
        for shard in (s for s in plan.plan.shards if s.rows > 0):
            done: list[tf.Operation] = []  # each chunk starts once the one before is written: one chunk held at a time
            for k, start in enumerate(range(0, shard.rows, plan.chunk)):
                with tf.device(f"{shard.task}/device:CPU:0"), tf.name_scope(f"spill{shard.index}_chunk{k}"):
                    with tf.control_dependencies(done):
                        rows = slice(start, min(shard.rows, start + plan.chunk))
                        ids = which[shard.index]
                        ids = tf.zeros([rows.stop - rows.start], tf.int32) if ids is None else ids[rows]
                        columns = [t[rows] for t in tensors[shard.index]]
                        parts = [tf.dynamic_partition(column, ids, plan.ranges) for column in columns]
                    done = [
                        tf.io.write_file(path, tf.io.serialize_tensor(piece))
                        for j, pieces in enumerate(parts)
                        for path, piece in zip(
                            _paths(folder, plan.ranges, f"s{shard.index:05d}-k{k:05d}-c{j}"), pieces, strict=True
                        )
                    ]
                    with tf.control_dependencies(done):  # each bucket's rows and bytes, as ``nbytes`` counts a piece
                        rows_of = tf.math.unsorted_segment_sum(tf.ones_like(ids, tf.int64), ids, plan.ranges)
                        size = tf.math.unsorted_segment_sum(_row_bytes(columns), ids, plan.ranges)
                        counts.append((rows_of, size, tf.stack([_width(column) for column in columns])))
            builder.mapped(shard, counts[-1][0])
        return builder.program(counts, plan.tasks)

    def finish(self, value: Any, program: Program | None, plan: SpillPlan, call: Call) -> Spilled:
        pieces = tuple(
            (s.task, f"s{s.index:05d}-k{k:05d}") for s in plan.plan.shards if s.rows > 0 for k in range(-(-s.rows // plan.chunk))
        )
        rows = np.array([np.asarray(r) for r, _, _ in value], np.int64).reshape(len(pieces), plan.ranges)
        size = np.array([np.asarray(b) for _, b, _ in value], np.int64).reshape(len(pieces), plan.ranges)
        widths = np.array([np.asarray(w) for _, _, w in value], np.int64).reshape(len(pieces), -1).max(axis=0)
        return Spilled(plan, self.fed(plan, "spill"), pieces, rows, size, tuple(int(w) for w in widths))

    def failure(self, error: JobError, plan: SpillPlan) -> Exception | None:
        """A spill folder that could not be written (full, not writable), named with its task and the bytes it needs."""
        details = f"{error} {error.details}"
        found = _SPILL.search(details)
        if found is None or "WriteFile" not in details:
            return None
        shard = plan.plan.shards[int(found.group(1))]
        need = plan.spilled()[shard.task]
        why = "it is full" if any(f in details for f in _FULL) else str(error).split(": ", 1)[-1]
        return OutputError(
            f"sort: task {shard.task} could not write its spill files under {plan.folder} ({why}); it needs "
            f"{need:,} bytes there for its shards (plus what other jobs hold); the job's spill files were removed. Free "
            "space on that task's disk, or spill elsewhere with spill_dir="
        )


def _paths(folder: tf.Tensor, ranges: int, piece: str) -> list[tf.Tensor]:
    """The spill files of ``piece`` (``s<shard>-k<chunk>-c<column>``) of each bucket under ``folder``: one op for them all
    (a graph of a few ops per bucket, not ten: a spill writes chunks × buckets files)."""
    names = tf.constant([f"b{b:05d}-{piece}" for b in range(ranges)])
    paths: list[tf.Tensor] = tf.unstack(tf.strings.join([folder, names], separator="/"), num=ranges)
    return paths


def _row_bytes(columns: list[tf.Tensor]) -> tf.Tensor:
    """Each row's bytes, every column, as ``grouping.nbytes`` counts them (a string: its bytes and 32); int64."""
    rows = tf.shape(columns[0], out_type=tf.int64)[:1]
    total = tf.zeros(rows, tf.int64)
    for column in columns:
        if column.dtype == tf.string:
            total += tf.cast(tf.strings.length(column), tf.int64) + STRING_BYTES
        else:
            total += math.prod(column.shape[1:]) * column.dtype.size
    return total


def _width(column: tf.Tensor) -> tf.Tensor:
    """The bytes of the longest string of ``column`` (int64; 0 for numbers or no rows)."""
    if column.dtype != tf.string:
        return tf.constant(0, tf.int64)
    return tf.reduce_max(tf.concat([tf.cast(tf.strings.length(column), tf.int64), [0]], 0))


def remove_spill(plan: Spilling, native: Any | None, cluster: Any, timeout: float) -> None:
    """The spill folder of ``plan``'s run removed on every task it used, one task at a time (a lost task does not keep
    the others' files), with ``native``'s ``TmrRemoveSpill`` (the kernels the run was built with; None, or kernels
    without the spill family: nothing was written); a task that does not answer is logged, not raised."""
    if not has(native, "tmr_remove_spill"):
        return
    for task in plan.tasks:
        graph = tf.Graph()
        with graph.as_default(), tf.device(f"{task}/device:CPU:0"):
            removed = native.tmr_remove_spill(plan.folder)
        try:
            cluster.run(graph, removed, {}, tasks=[task], timeout=timeout)
        except Exception as e:  # the job's own error (or result) matters more; the folder is named for the operator
            log.warning("could not remove the spill folder %s on %s (%s): remove it by hand", plan.folder, task, e)
        finally:
            cluster.forget(graph)


def again_after_spill(attempt: Callable[[list[Call]], Any], again: Callable[[RunOptions], Any], settings: RunOptions) -> Any:
    """``attempt(spilled)``, a spilled job that appends its spill run's call to ``spilled`` once that run is done; where
    a task is lost after it (its spill files went with it: no round can read them) and ``settings`` leave a retry,
    ``again(settings)`` with one retry less: the whole job planned anew on the survivors (in memory where it fits now),
    ``RunStats`` counting the loss.  A loss during the spill run is that run's own retry's (``_engine.retry``)."""
    spilled: list[Call] = []
    try:
        return attempt(spilled)
    except (WorkerUnavailableError, WorkerTimeoutError) as e:
        if not spilled or not recoverable(e, spilled[0].cluster, 0, settings):
            raise
        task = leave_out(e, spilled[0].cluster, spilled[0].srcs, "running the spilled job again")
    out = again(attrs.evolve(settings, retries=settings.retries - 1))
    if not settings.return_stats:
        return out
    value, stats = out
    return value, attrs.evolve(stats, attempts=stats.attempts + 1, lost=(task, *stats.lost))
