"""The spill run of a grace-hash group or keyed job: what its reducers receive written to its worker's disk, in sub-partitions.

A group run (``grouped.Grouped``) or a keyed combine (``keyed.Keyed``, whose per-key partials are
what travels: external aggregation) whose reducer would receive more than its budget is run again through the spill
folders (``spilled_group`` runs the rounds), in 1 + P distributed runs::

    run 1, the spill          each shard mapped as the in-memory run maps it (``map_shards``: a group job's rows, or
                              a recipe's precombined rows; a keyed job's per-key partials), each task's rows merged,
                              then split by the stable key hash (a range-partitioned job's: by sampled ranges;
                              ``sub_partition_ids``) into R × P sub-partitions (P per reducer, enough that
                              one fits the budget ``MARGIN`` times over); each piece's keys and value leaves written
                              (``serialize_tensor``) to the spill folder on the task's own disk:
                              SPILL/tfmapreduce-spill-<job>/<attempt>/b<sub-partition>-t<task>-c<leaf>; the client
                              fetches each piece's rows and bytes
    client                    each sub-partition's bytes checked against the budget; one key over it is refused, named
    run 2 + j, j < P          reducer r reads sub-partition r·P + j from every task's disk and reduces it as the
                              in-memory run reduces its whole share (a group job: groups it and calls ``fn``; a keyed
                              job: merges the tasks' partials by key and finalizes them); the rows come back
    every task, always        the job's spill folder removed (``TmrRemoveSpill``), after success, failure or timeout

A key's rows all hash to one sub-partition, so each key is reduced once, over all its values: the results are the
in-memory run's.  A reducer holds one sub-partition at a time; the map side holds what it holds in memory (each task's
mapped rows, as the in-memory run).
"""

from __future__ import annotations

import math
import os
import re
import secrets
import tempfile
from collections.abc import Hashable, Mapping
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import attrs
import numpy as np
import tensorflow as tf

from .._base.device import Device
from .._base.errors import JobError, OutputError
from .._base.plan import Plan
from .._base.task import Task
from .._engine.call import Call
from .._engine.kind import Kind, KindBase
from .._engine.program import Builder, Program
from .._io.source import Sources
from .._native.loader import has
from .._ops.grouping import nbytes
from .._ops.per_key import buckets
from .._ops.splitters import choose, ranges_of, sample
from .grouped import Grouped, group_native, map_side
from .keyed import Keyed
from .shuffle.map_side import map_shards
from .shuffle.plan import KeyedPlan
from .spill import _FULL, PREFIX, OverBudget

MARGIN = 2
"""Sub-partitions are planned at half the budget, so one the hash fills unevenly still fits."""

_SPILL = re.compile(r"\bgrace_spill(\d+)/")


class Reducing(Protocol):
    """The refused run's plan as a grace spill sees it (a ``KeyedPlan``, a join's ``JoinPlan``): its shards, its
    reducers, the tasks it uses."""

    @property
    def plan(self) -> Plan: ...

    @property
    def reducers(self) -> tuple[str, ...]: ...

    @property
    def tasks(self) -> tuple[Task, ...]: ...

    def explain(self) -> str: ...


K = TypeVar("K", bound=Reducing)


def spill_root() -> str:
    """Where a group or join spill makes its run's spill folder: the client's temporary directory (``TMPDIR``), the same
    path on each task."""
    return tempfile.gettempdir()


def planned_folder() -> str:
    """The spill folder a plan names before any run (each run names its own: ``<tmp>/tfmapreduce-spill-<run>``)."""
    return os.path.join(spill_root(), PREFIX + "<run>")


def sub_partitions(refusal: OverBudget) -> int:
    """Sub-partitions per reducer: the refused share, split evenly, fits the budget ``MARGIN`` times over.

    Example:
        >>> from tfmapreduce._ops.budget import Overrun
        >>> sub_partitions(OverBudget(Overrun(0, "/job:w/task:0", 10, 3_000, 1_000, "max_bytes=1000"), "refused"))
        6
    """
    return max(2, math.ceil(refusal.overrun.size * MARGIN / max(1, refusal.overrun.budget)))


@attrs.frozen
class GracePlan(Generic[K]):
    """The plan of a grace-hash run: the keyed plan, and the ``parts`` sub-partitions each reducer reduces in turn.

    Example:
        >>> job = tmr.MapReduce(lambda k, v: (k, v), tmr.per_group(lambda k, v: v[:, :1]), by_key=True)
        >>> keyed = job.plan((np.arange(4), np.arange(4.0)), cluster=cluster, reducers=2)
        >>> GracePlan(keyed, 3, 1000, "/tmp/tfmapreduce-spill-0").ranges  # 2 reducers × 3 sub-partitions
        6
    """

    keyed: K
    """The refused run's plan: its shards, its reducers (a join's: its hash reducers, see ``join.spilled``)."""
    parts: int
    """Sub-partitions per reducer (one distributed run each, after the spill)."""
    budget: int
    """The bytes of keys and values one reducer may receive at a time."""
    folder: str = attrs.field(eq=False)
    """The run's spill folder, the same path on each task's own disk."""
    attempt: str = attrs.field(default="1", eq=False)
    """This attempt's folder in it (a retried run writes a new one)."""

    @property
    def ranges(self) -> int:
        """Sub-partitions in all: reducer r reduces r·P to r·P + P − 1."""
        return len(self.keyed.reducers) * self.parts

    @property
    def tasks(self) -> tuple[Task, ...]:
        return self.keyed.tasks

    def explain(self) -> str:
        """The keyed plan, then how its reducers' shares spill."""
        return (
            f"{self.keyed.explain()}\nspills every (key, value) row to {self.folder} on its task, in "
            f"{len(self.keyed.reducers)} × {self.parts} {getattr(self.keyed, 'partitioner', 'hash')} sub-partitions; "
            "each reducer reduces one at a time, "
            f"within {self.budget:,} bytes"
        )

    def __str__(self) -> str:
        return self.explain()


@attrs.frozen
class Graced(Generic[K]):
    """What the spill run left: its plan, its attempt folder, the tasks in order, each piece's rows and bytes, and
    the rows' types (key dtype, the values' structure and each leaf's dtype and row shape)."""

    plan: GracePlan[K]
    folder: str
    tasks: tuple[Task, ...]
    rows: np.ndarray[Any, np.dtype[np.int64]]
    """``rows[t, b]``: the rows task ``t`` wrote of sub-partition ``b``."""
    size: np.ndarray[Any, np.dtype[np.int64]]
    """``size[t, b]``: their bytes of keys and values (as the in-memory budget counts them)."""
    key_dtype: tf.DType
    structure: Any
    leaves: tuple[tuple[tf.DType, tuple[int, ...]], ...]


@attrs.define(eq=False, repr=False)
class GraceKind(KindBase[GracePlan[K]]):
    """What a grace-hash spill run is besides its plan and its graph (``GraceSpill``, ``join.spilled.JoinSpill``): the
    job it spills (``job``), where each task makes its folder and the refusal it plans from; its name, identity and
    inputs are the job's, its program is fed the attempt's folder, and a failure is read as a spill's, then as the
    job's.  Keeps nothing of a run."""

    root: str = attrs.field(kw_only=True)
    """Where each task makes the job's spill folder."""
    refusal: OverBudget = attrs.field(kw_only=True)
    """The in-memory run's refusal: what the sub-partitions are planned from, and what is raised where no spill can
    be made (kernels without the spill family)."""
    phase: ClassVar[str] = "spill"

    @property
    def job(self) -> Kind[K]:
        """The kind whose run was refused, and is spilled."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"spilled {self.job!r}"

    @property
    def identity(self) -> Hashable:
        return ("grace", self.job.identity)

    def sources(self, x: Any) -> tuple[Sources, Any]:
        """The job's inputs, and its note with the run's spill folder's name (each run its own)."""
        srcs, note = self.job.sources(x)
        return srcs, (note, PREFIX + secrets.token_hex(6))

    def variant(self, plan: GracePlan[K], call: Call) -> Hashable | None:
        return ()  # the attempt's folder is fed

    def fed(self, plan: GracePlan[K], name: str) -> str:
        """The attempt's spill folder (a retried run writes a new one)."""
        return os.path.join(plan.folder, plan.attempt)

    def failure(self, error: JobError, plan: GracePlan[K]) -> Exception | None:
        """A spill folder that could not be written (full, not writable), named with its task; else the job's reading."""
        return spill_failure(repr(self.job), error, plan) or self.job.failure(error, plan.keyed)


@attrs.define(eq=False, repr=False)
class GraceSpill(GraceKind[KeyedPlan]):
    """The spill run of ``group`` (see the module) as the run driver sees it."""

    group: Grouped | Keyed
    """The job: a group reducer's rows, or a keyed combine's per-key partials, are what spill."""

    @property
    def job(self) -> Grouped | Keyed:
        return self.group

    @property
    def budget(self) -> int:
        """The bytes one reducer may receive at a time: the refused run's budget."""
        return self.refusal.overrun.budget

    @property
    def parts(self) -> int:
        """Sub-partitions per reducer, planned from the refusal (:func:`sub_partitions`)."""
        return sub_partitions(self.refusal)

    refused: ClassVar[Mapping[str, str]] = Grouped.refused

    def plan(self, shards: Plan, call: Call) -> GracePlan[KeyedPlan]:
        keyed = self.group.plan(shards, call)
        folder = os.path.join(self.root, call.note[1])
        return GracePlan(keyed, self.parts, self.budget, folder, secrets.token_hex(4))

    def build(self, builder: Builder, plan: GracePlan[KeyedPlan], call: Call) -> Program:
        """Map every shard, merge each task's rows, split them by key hash and write each piece on the task."""
        group, keyed = self.group, plan.keyed
        if not has(call.native, "tmr_remove_spill"):
            raise self.refusal  # (no spill without the kernels that remove it)
        if isinstance(group, Grouped):
            native = group_native(keyed, call)
            side = map_side(group.form, native)
        else:
            native = call.native
            side = group.side(native)
        mapped = map_shards(group.map_fn, side, builder, keyed, call)
        if isinstance(group, Grouped) and group.form.sort_values:
            group._check_sortable(mapped.first)
        folder = builder.per_run("spill")
        counts, first, merged = [], mapped.first[1], []
        for t, (task, parts) in enumerate(mapped.per_task.items()):
            with tf.device(mapped.device[task]), tf.name_scope(f"grace_split{t}"):
                merged.append((mapped.device[task], side.merge(parts)))
        split = sub_partition_ids([(device, keys) for device, (keys, _) in merged], keyed, plan.parts)
        for t, (task, (device, (keys, values)), ids) in enumerate(zip(mapped.per_task, merged, split, strict=True)):
            with tf.device(device), tf.name_scope(f"grace_split{t}"):
                pieces = [tf.dynamic_partition(x, ids, plan.ranges) for x in [keys, *tf.nest.flatten(values)]]
            with tf.device(f"{task}/device:CPU:0"), tf.name_scope(f"grace_spill{t}"):
                written = [
                    tf.io.write_file(
                        tf.strings.join([folder, f"b{b:05d}-t{t:05d}-c{c}"], separator="/"), tf.io.serialize_tensor(column[b])
                    )
                    for c, column in enumerate(pieces)
                    for b in range(plan.ranges)
                ]
                with tf.control_dependencies(written):
                    rows = tf.stack([tf.size(k, tf.int64) for k in pieces[0]])
                    size = tf.stack([nbytes(pieces[0][b], [c[b] for c in pieces[1:]]) for b in range(plan.ranges)])
                counts.append((rows, size))
        leaves = tuple((v.dtype, tuple(v.shape[1:])) for v in tf.nest.flatten(first[1]))
        info = (first[0].dtype, tf.nest.map_structure(lambda _: None, first[1]), leaves, tuple(mapped.per_task))
        return builder.program(counts, plan.tasks, info)

    def finish(self, value: Any, program: Program | None, plan: GracePlan[KeyedPlan], call: Call) -> Graced[KeyedPlan]:
        assert program is not None
        key_dtype, structure, leaves, tasks = program.info
        rows = np.array([np.asarray(r) for r, _ in value], np.int64).reshape(len(tasks), plan.ranges)
        size = np.array([np.asarray(s) for _, s in value], np.int64).reshape(len(tasks), plan.ranges)
        return Graced(plan, self.fed(plan, "spill"), tasks, rows, size, key_dtype, structure, leaves)


def sub_partition_ids(keys: list[tuple[str, tf.Tensor]], keyed: KeyedPlan, parts: int) -> list[tf.Tensor]:
    """Each task's sub-partition of each of its keys (``keys``: each task's device and merged keys, in task order), in
    ``range(R · parts)``: ``b = r · parts + j``, read by reducer ``r`` in round ``j``.

    By hash, ``r`` is the key's reducer in the in-memory run (its stable hash mod R) and ``j`` its hash mod R·P, div R:
    a spilled run's reducer holds the keys it holds in memory (a resident result is partitioned as the in-memory one).
    By range (``partitioner="range"``), R·P ranges of splitters sampled from every task's keys, as the in-memory run
    samples R: reducer r's rounds are consecutive ranges, each below the next.

    Example (R = 2, P = 3: a key of reducer 1 is in sub-partition 3, 4 or 5):
        >>> from tfmapreduce._ops.per_key import int_bucket
        >>> plan = tmr.MapReduce(lambda k: (k, k), tmr.combiners.sum, by_key=True).plan(np.arange(8), reducers=2, cluster=cluster)
        >>> ids = sub_partition_ids([("", tf.constant([5, 6, 7]))], plan, 3)[0]
        >>> [int(b) // 3 for b in ids] == [int_bucket(k, 2) for k in (5, 6, 7)]  # each key on its in-memory reducer
        True
    """
    reducers = len(keyed.reducers)
    ranges = reducers * parts
    if keyed.partitioner == "range":
        samples = []
        for i, (device, k) in enumerate(keys):
            with tf.device(device), tf.name_scope(f"sample{i}"):
                samples.append(sample(k, i, ranges))
        with tf.device(f"{Device.parse(keyed.reducers[0]).task}/device:CPU:0"), tf.name_scope("splitters"):
            splitters = choose(samples, ranges)
        ids = []
        for device, k in keys:
            with tf.device(device):
                ids.append(ranges_of(k, splitters))
        return ids
    ids = []
    for device, k in keys:
        with tf.device(device):
            b = buckets(k, ranges)
            ids.append(tf.math.floormod(b, reducers) * parts + tf.math.floordiv(b, reducers))
    return ids


def spill_failure(job: str, error: JobError, plan: GracePlan[Any]) -> OutputError | None:
    """The ``OutputError`` of a grace spill run (of ``job``) that could not write its spill folder (full, not writable),
    naming the task (the ``t`` of its ``grace_spill<t>`` scope: the plan's tasks with rows, in order) and the bytes it
    needs there; None where the run failed otherwise."""
    details = f"{error} {error.details}"
    found = _SPILL.search(details)
    if found is None or "WriteFile" not in details:
        return None
    tasks = list(dict.fromkeys(s.task for s in plan.keyed.plan.shards if s.rows > 0))
    task = tasks[int(found.group(1))] if int(found.group(1)) < len(tasks) else Device.parse(plan.keyed.reducers[0]).task
    why = "it is full" if any(f in details for f in _FULL) else str(error).split(": ", 1)[-1]
    need = math.ceil(plan.budget * plan.parts / MARGIN) * len(plan.keyed.reducers) // max(1, len(tasks))
    return OutputError(
        f"{job}: task {task} could not write its spill files under {plan.folder} ({why}); it needs about "
        f"{need:,} bytes there for its share of each reducer's rows (plus what other jobs hold); the job's spill "
        "files were removed. Free space on that task's disk, or raise max_bytes= where the reducers have the memory"
    )


def read_pieces(graced: Graced[Any], b: int, c: int) -> list[tf.Tensor]:
    """Leaf ``c`` (0: the keys) of sub-partition ``b``, read and parsed on each task that wrote rows of it."""
    dtype, row = (graced.key_dtype, ()) if c == 0 else graced.leaves[c - 1]
    pieces = []
    for t, task in enumerate(graced.tasks):
        n = int(graced.rows[t, b])
        if n:
            with tf.device(f"{task}/device:CPU:0"), tf.name_scope(f"read{b}_{t}"):
                data = tf.io.read_file(f"{graced.folder}/b{b:05d}-t{t:05d}-c{c}")
                pieces.append(tf.ensure_shape(tf.io.parse_tensor(data, dtype), (n, *row)))
    return pieces
