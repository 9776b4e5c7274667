"""A join over its devices' budget, spilled: grace hash through each worker's disk (``grace``'s spill folders, attempt
folders, removal and full-disk error; one mechanism with the group spill), in 1 + P distributed runs::

    run 1, the spill          each task's rows of each side (as the hash join takes them) split by the stable key hash
                              into R × P sub-partitions (P per reducer, planned from the refused device's output as
                              the group spill plans from a refused share, ``grace.sub_partitions``, at most one per
                              ``ROWS_PER_PART`` rows of the sides per reducer); each piece's keys
                              and value columns written to the spill folder on the task's own disk:
                              SPILL/tfmapreduce-spill-<job>/<attempt>/s<side>/b<sub-partition>-t<task>-c<column>;
                              the client fetches each piece's rows and bytes
    run 2 + j, j < P          reducer r reads sub-partition r·P + j of both sides from every task's disk and joins it
                              as the in-memory hash join joins its bucket (``Join._join``: the same kernels, ``how`` and
                              output budget check); the rows come back
    every task, always        the job's spill folder removed (``TmrRemoveSpill``), after success, failure or timeout

A key's rows of both sides hash to one sub-partition, so every pair of a key's rows is made once, and a left, right or
outer join's unmatched rows are those of the in-memory join: the result is the in-memory join's multiset of rows (a
join promises no row order).  A round whose output would still exceed the budget is refused naming its largest key and
the bytes that key makes alone (one key's pairs are made on one device however the rows are split).

Example:
    >>> keys = np.arange(3_000) % 500
    >>> r = tmr.join((keys, np.arange(3_000.0)), (keys, np.ones(3_000)), max_bytes=200_000, cluster=cluster)
    >>> len(r.keys), float(r.left.sum()) == 6 * float(np.arange(3_000.0).sum())  # 6 × 6 rows per key
    (18000, True)
"""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf

from ..._base.device import Device
from ..._base.errors import JobError, ReducerMemoryError
from ..._base.plan import Plan
from ..._base.task import Task
from ..._engine import driver as _engine
from ..._engine.call import Call
from ..._engine.program import Builder, Program
from ..._native.loader import has
from ..._ops.budget import Overrun, over_budget
from ..._ops.grouping import nbytes
from ..._ops.per_key import buckets
from ..._options import RunOptions
from ..grace import Graced, GraceKind, GracePlan, read_pieces, spill_root, sub_partitions
from ..spill import OverBudget, again_after_spill, log
from ..spilled_sort import SpillCall
from .kind import _TOO_BIG, Join, _concat, _pieces
from .plan import JoinPlan, choose

ROWS_PER_PART = 256
"""The fewest rows of both sides a sub-partition is planned to hold on average: a many-to-many join's output asks for
more sub-partitions than its rows can fill (a key's rows stay together however many there are), and each is a run."""


@attrs.define(eq=False, repr=False)
class JoinSpill(GraceKind[JoinPlan]):
    """The spill run of ``join`` (see the module) as the run driver sees it: its stacked sides spilled."""

    join: Join
    refused: ClassVar[Mapping[str, str]] = Join.refused

    @property
    def job(self) -> Join:
        return self.join

    def plan(self, shards: Plan, call: Call) -> GracePlan[JoinPlan]:
        """The hash join's reducers (whatever the refused run's strategy), each with P sub-partitions: as many as its
        refused output needs, but no more than gives each ``ROWS_PER_PART`` rows of the sides on average."""
        joined = choose(self.join.how, "hash", self.join.layout, shards, call)
        parts = min(sub_partitions(self.refusal), max(2, math.ceil(shards.rows / len(joined.reducers) / ROWS_PER_PART)))
        folder = os.path.join(self.root, call.note[1])
        return GracePlan(joined, parts, self.refusal.overrun.budget, folder, secrets.token_hex(4))

    def build(self, builder: Builder, plan: GracePlan[JoinPlan], call: Call) -> Program:
        """Each task's rows of each side split by key hash, each piece written on the task; their rows and bytes."""
        if not has(call.native, "tmr_remove_spill"):
            raise self.refusal  # (no spill without the kernels that remove it)
        layout = self.join.layout
        per_task: dict[Task, list[list[Any]]] = {}
        for index, found in _pieces(builder, plan.keyed, call, layout).items():
            sides = per_task.setdefault(plan.keyed.plan.shards[index].task, [[], []])
            for side, piece in enumerate(found):
                if piece is not None:
                    sides[side].append(piece)
        folder = builder.per_run("spill")
        counts, leaves = [], []
        for t, (task, sides) in enumerate(per_task.items()):
            with tf.device(f"{task}/device:CPU:0"), tf.name_scope(f"grace_spill{t}"):
                for side in (0, 1):
                    keys, values = _concat(sides[side], call, layout, side)
                    ids = buckets(keys, plan.ranges)
                    pieces = [tf.dynamic_partition(x, ids, plan.ranges) for x in [keys, *values]]
                    written = [
                        tf.io.write_file(
                            tf.strings.join([folder, f"s{side}/b{b:05d}-t{t:05d}-c{c}"], separator="/"),
                            tf.io.serialize_tensor(column[b]),
                        )
                        for c, column in enumerate(pieces)
                        for b in range(plan.ranges)
                    ]
                    with tf.control_dependencies(written):
                        rows = tf.stack([tf.size(k, tf.int64) for k in pieces[0]])
                        size = tf.stack([nbytes(pieces[0][b], [c[b] for c in pieces[1:]]) for b in range(plan.ranges)])
                    counts.append((rows, size))
                    if t == 0:
                        leaves.append(tuple((v.dtype, tuple(v.shape[1:])) for v in [keys, *values]))
        return builder.program(counts, plan.tasks, (tuple(leaves), tuple(per_task)))

    def finish(self, value: Any, program: Program | None, plan: GracePlan[JoinPlan], call: Call) -> tuple[Graced[JoinPlan], ...]:
        """Each side's ``Graced``: its folder, its pieces' rows and bytes (``[task, sub-partition]``), its columns' types."""
        assert program is not None
        leaves, tasks = program.info
        rows = np.array([np.asarray(r) for r, _ in value], np.int64).reshape(len(tasks), 2, plan.ranges)
        size = np.array([np.asarray(s) for _, s in value], np.int64).reshape(len(tasks), 2, plan.ranges)
        folder = self.fed(plan, "spill")
        return tuple(
            Graced(plan, f"{folder}/s{s}", tasks, rows[:, s], size[:, s], leaves[s][0][0], None, leaves[s][1:]) for s in (0, 1)
        )


def join_spilled(join: Join, x: Any, settings: RunOptions, refused: OverBudget) -> Any:
    """Run ``join`` over the stacked sides ``x`` through each worker's disk (see the module), after the in-memory run
    was ``refused``: its result, as the in-memory run returns it.  A task lost after the spill while ``retries=`` are
    left makes the whole join run again on the survivors (``spill.again_after_spill``).

    Raises:
        ReducerMemoryError: one round's output over the budget (its largest key named, with the bytes it makes alone).
        OutputError: a spill folder could not be written (the spill files are removed).
    """

    def again(settings: RunOptions) -> Any:
        try:
            return _engine.run(join, x, settings)
        except OverBudget as refusal:
            return join_spilled(join, x, settings, refusal)

    return again_after_spill(lambda done: _joined(join, x, settings, refused, done), again, settings)


def _joined(join: Join, x: Any, settings: RunOptions, refused: OverBudget, done: list[Call]) -> Any:
    """One attempt of :func:`join_spilled`; the spill run's call is appended to ``done`` once it is done."""
    run: SpillCall[GracePlan[JoinPlan]] = SpillCall(JoinSpill(join, root=spill_root(), refusal=refused))
    try:
        with run.stage("the spill (each task writing its sub-partitions of both sides)"):
            out = _engine.run(run, x, settings)
        sides: tuple[Graced[JoinPlan], ...] = out[0] if settings.return_stats else out
        call, plan = run.call, sides[0].plan
        assert call is not None  # (set as the run planned)
        done.append(call)
        spilled = sides[0].size + sides[1].size
        log.info(
            "%r spilled %s bytes to %s: %d sub-partition(s) per reducer, the largest %d bytes of both sides' rows",
            join,
            f"{int(spilled.sum()):,}",
            plan.folder,
            plan.parts,
            int(spilled.sum(axis=0).max()),
        )
        joiner = attrs.evolve(join, max_bytes=plan.budget)  # each round within the refused run's budget
        rounds = []
        for j in range(plan.parts):
            with run.stage(f"round {j + 1} of {plan.parts} (each reducer joining one sub-partition)"):
                rounds.append(_round(joiner, sides, j, call, refused.overrun, settings.seconds()))
    finally:
        run.remove()
    parts = [
        tuple(np.concatenate([done[r][c] for done in rounds]) for c in range(len(rounds[0][r])))
        for r in range(len(plan.keyed.reducers))
    ]
    result = join.finish(parts, None, plan.keyed, call)
    return (result, out[1]) if settings.return_stats else result


def _side(graced: Graced[JoinPlan], b: int) -> tuple[tf.Tensor, list[tf.Tensor]]:
    """Sub-partition ``b`` of one side, read from every task that wrote rows of it: (keys, value columns)."""
    columns = []
    for c, (dtype, row) in enumerate([(graced.key_dtype, ()), *graced.leaves]):
        pieces = read_pieces(graced, b, c)
        columns.append(tf.concat(pieces, 0) if len(pieces) > 1 else pieces[0] if pieces else tf.zeros((0, *row), dtype))
    return columns[0], columns[1:]


def _round(join: Join, sides: tuple[Graced[JoinPlan], ...], j: int, call: Call, refused: Overrun, timeout: float) -> list[Any]:
    """Round ``j``: each reducer r joins sub-partition r·P + j of both sides; each reducer's output columns (flat)."""
    plan = sides[0].plan
    keep = (join.how in ("left", "outer"), join.how in ("right", "outer"))
    graph = tf.Graph()
    with graph.as_default():
        outputs = []
        for r, device in enumerate(plan.keyed.reducers):
            b = r * plan.parts + j
            with tf.device(device), tf.name_scope(f"part{b}"):
                left, right = (_side(graced, b) for graced in sides)
                outputs.append(join._join(b, device, left, right, keep, plan.keyed.small, call.native, call))
    try:
        done = call.cluster.run(graph, outputs, {}, tasks=list(plan.tasks), timeout=timeout)
    except JobError as e:
        big = over_budget(e, _TOO_BIG, join.max_bytes)
        raise (_refused(join, sides, big, call, refused, timeout) if big else join.failure(e, plan.keyed) or e) from None
    finally:
        call.cluster.forget(graph)
    return [[np.asarray(c) for c in tf.nest.flatten(o)] for o in done]


def _refused(
    join: Join, sides: tuple[Graced[JoinPlan], ...], big: Overrun, call: Call, refused: Overrun, timeout: float
) -> ReducerMemoryError:
    """Sub-partition ``big.part``'s output over the budget: the error naming its key of most pairs and their bytes."""
    plan = sides[0].plan
    key, pairs = _largest_key(join, sides, big.part, call, timeout)
    row, r = big.size // max(1, big.rows), big.part // plan.parts
    where = f"reducer {r} ({plan.keyed.reducers[r]})"
    limit = f"more than its budget of {plan.budget:,} bytes ({refused.limit})"
    spilled = f"even spilled to disk in {plan.parts} sub-partitions per reducer"
    if pairs * row > plan.budget:
        return ReducerMemoryError(
            f"{join!r}: {where} would make {pairs:,} rows of the key {key!r} alone, about {pairs * row:,} bytes of keys "
            f"and values, {limit}, {spilled}: a join makes every pair of a key's rows on one device; no output row was "
            "kept. Pre-aggregate a side (e.g. tmr.sum_by_key) so the key has fewer rows, split the hot key (salt it on one "
            "side and repeat the other side's rows per salt), or raise max_bytes= where the host has the memory"
        )
    return ReducerMemoryError(
        f"{join!r}: sub-partition {big.part} of {where} would make {big.rows:,} rows, {big.size:,} bytes of keys and "
        f"values, {limit}, {spilled}: its keys hashed unevenly (the largest, {key!r}, makes {pairs:,} rows); no output "
        "row was kept. Spread the keys over more reducers (reducers=N), or raise max_bytes= where the host has the memory"
    )


def _largest_key(join: Join, sides: tuple[Graced[JoinPlan], ...], b: int, call: Call, timeout: float) -> tuple[Any, int]:
    """The key of sub-partition ``b`` that makes the most output rows (its left rows × its right rows, or its kept
    unmatched rows), and their number."""
    device = f"{Device.parse(sides[0].plan.keyed.reducers[0]).task}/device:CPU:0"
    graph = tf.Graph()
    with graph.as_default(), tf.device(device):
        fetch = []
        for graced in sides:
            pieces = read_pieces(graced, b, 0)
            keys = tf.concat(pieces, 0) if pieces else tf.zeros([0], graced.key_dtype)
            distinct, _, counts = tf.unique_with_counts(keys, out_idx=tf.int64)
            fetch.append((distinct, counts))
    try:
        fetched = call.cluster.run(graph, fetch, {}, tasks=list(sides[0].plan.tasks), timeout=timeout)
    finally:
        call.cluster.forget(graph)
    left, right = (dict(zip(k.tolist(), n.tolist(), strict=True)) for k, n in fetched)
    keep = (join.how in ("left", "outer"), join.how in ("right", "outer"))

    def made(key: Any) -> int:
        n, m = left.get(key, 0), right.get(key, 0)
        return int(n * m or (n if keep[0] else 0) or (m if keep[1] else 0))

    key = max({**left, **right}, key=made)
    return (key.decode() if isinstance(key, bytes) else key), made(key)
