"""Speculative execution (``speculate=True``): stragglers backed up on idle tasks; the first copy of a shard to finish counts.

With ``speculate=True`` — over host data (shipped arrays), with at least two non-empty
shards on two tasks — a run's graph holds each non-empty shard's map and
``combiner.partial`` on its own device (its *own copy*) and on one device of each
other task of the plan (its *backup copies*); each copy is its own fetch, run on its
own thread through the run's one session.  The client starts every own copy, starts
a backup of the largest unfinished shard on each task that runs out of work (at most
one backup per shard), takes the first copy of each shard to finish and merges the
winners' partials in shard order: each shard counts exactly once.  A loser runs on to
its end or deadline; its result is never looked at.  Resident shards and file splits
are read on their own task only, so a run over them is one graph as usual and its
plan says so.  See docs/architecture.md for the design.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any, Protocol

import attrs
import numpy as np
import tensorflow as tf

from .._base.plan import Plan, Shard
from .._base.task import Task
from .._cluster.cluster import Cluster
from .._io.models import place
from .._io.shm import STAGED, Staging
from .._io.source import Shipped, Source
from .._ops.combine import Combiner
from .._ops.mapfn import check_same_outputs, map_shard
from .._ops.merge import merge_tree
from .._ops.models import Use, recording
from .._options import RunOptions
from . import autosize as _autosize
from .call import Call
from .retry import can_retry
from .route import visible


class Backed(Protocol):
    """A kind of job whose shards can be backed up: a map and a combiner merged on the client."""

    @property
    def identity(self) -> Hashable: ...
    @property
    def map_fn(self) -> Callable[..., Any]: ...
    @property
    def combiner(self) -> Combiner: ...
    def combine_partials(
        self, partials: dict[Task, list[Any]], devices: dict[Task, str], master: str, first: tuple[Shard, Any] | None
    ) -> Any: ...


BACKUPS = (
    "each shard is its own fetch; a task that runs out of work backs up an unfinished shard of another task, "
    "and the first copy to finish counts"
)
"""The plan's line when the run can back up its stragglers."""


def why_not(plan: Plan, srcs: Sequence[Source]) -> str | None:
    """Why a ``speculate=True`` run over ``plan`` cannot back up its shards, or None when it can.

    Example:
        >>> from tfmapreduce._base.device import Device
        >>> from tfmapreduce._base.plan import make_plan
        >>> devices = [Device.parse("/job:local/task:0"), Device.parse("/job:local/task:1")]
        >>> x = (Shipped(np.zeros(10)),)
        >>> why_not(make_plan(10, [5, 5], None, devices), x) is None
        True
        >>> why_not(make_plan(10, [10, 0], None, devices), x)
        'no backups: that takes two non-empty shards on two tasks, so this run is one graph as usual'
    """
    if not all(isinstance(s, Shipped) for s in srcs):
        return "no backups: resident and file data is read on its own task only, so this run is one graph as usual"
    mapped = [s for s in plan.shards if s.rows]
    if len({s.task for s in mapped}) < 2:
        return "no backups: that takes two non-empty shards on two tasks, so this run is one graph as usual"
    return None


def note(plan: Plan, srcs: Sequence[Source]) -> Plan:
    """``plan`` with its ``speculation`` line: what ``speculate=True`` does in it."""
    return attrs.evolve(plan, speculation=why_not(plan, srcs) or BACKUPS)


@attrs.frozen(eq=False)
class _Copy:
    """One copy of a shard in the speculative graph: the shard as placed there, its partial, its placeholders."""

    shard: Shard
    fetch: Any
    feeds: tuple[tuple[Any, int, bool], ...]  # (placeholder, position of its source in the job's inputs, staged)


@attrs.frozen(eq=False)
class CopiesProgram:
    """A speculative run's compiled graph: a copy of every non-empty shard on every task of the plan."""

    graph: tf.Graph
    copies: dict[tuple[int, Task], _Copy]
    """(shard index, task) → the shard's copy on that task."""
    broadcast: tuple[Any, ...]
    tasks: tuple[Task, ...]
    models: tuple[Use, ...] = ()
    """The variables its map functions read, by device: placed there before each run (``_io/models.place``)."""

    def close(self) -> None:
        """Nothing to free: speculative copies stage their shared memory per copy."""


@attrs.frozen
class Outcome:
    """What speculation did for one shard."""

    index: int
    backup: str | None
    """The device of its backup copy, or None when none ran."""
    backup_won: bool
    """Whether the backup's result was the one counted."""


def compile_copies(job: Backed, plan: Plan, call: Call) -> CopiesProgram:
    """Build the speculative graph: each non-empty shard mapped (and ``combiner.partial``) on each task of the plan.

    Each backup copy runs on the first device its task has in the plan, and reads
    its data through shared memory only when the original did and that task sees
    the client's files.  The combiner's merge is built too (and never run), so a
    combiner that cannot merge the outputs fails here, as in a run without speculation.
    """
    srcs, broadcast, cluster = call.srcs, call.values, call.cluster
    graph = tf.Graph()
    mapped = [s for s in plan.shards if s.rows]
    homes: dict[Task, str] = {}
    for s in mapped:
        homes.setdefault(s.task, s.device)
    copies: dict[tuple[int, Task], _Copy] = {}
    partials: dict[Task, list[Any]] = {}
    first_output: tuple[Shard, Any] | None = None
    with graph.as_default(), recording() as uses:
        bcast = tuple(
            tf.compat.v1.placeholder(tf.as_dtype(v.dtype), v.shape, name=f"broadcast{i}") for i, v in enumerate(broadcast)
        )
        for shard in mapped:
            for task, device in homes.items():
                own = task == shard.task
                placed = _staged(shard) if own else _moved(shard, device, task, cluster)
                scope = f"shard{shard.index}" if own else f"shard{shard.index}_backup_{task.job}_{task.index}"
                with tf.device(placed.device), tf.name_scope(scope):
                    tensors, feeds = [], []
                    for i, src in enumerate(srcs):
                        data = src.tensor(placed)  # staged, never mapped: no guard to fetch
                        tensors.append(data.value)
                        if data.placeholder is not None:
                            feeds.append((data.placeholder, i, data.staged))
                    output = map_shard(job.map_fn, placed, tensors, bcast)
                    if first_output is None:
                        first_output = (shard, output)
                    else:
                        check_same_outputs(job.map_fn, first_output, shard, output)
                    partial = job.combiner.partial(output, tf.constant(shard.rows, tf.int64, name="rows"))
                copies[(shard.index, task)] = _Copy(placed, partial, tuple(feeds))
                if own:
                    partials.setdefault(task, []).append(partial)
        job.combine_partials(partials, homes, f"{cluster.master}/device:CPU:0", first_output)  # the check only
    graph.finalize()
    return CopiesProgram(graph, copies, bcast, tuple(homes), tuple(uses))


def _moved(shard: Shard, device: str, task: Task, cluster: Cluster) -> Shard:
    """``shard`` as its backup on ``device`` of ``task`` runs it: shared memory only where that task sees the client's files."""
    path = STAGED if shard.path == "shm" and visible(cluster, task) else "feed" if shard.path else None
    return attrs.evolve(shard, device=device, requested=None, path=path)


def _staged(shard: Shard) -> Shard:
    """``shard`` with its shared memory staged per copy: a loser left running on a stopped task must not hold a
    buffer the next run needs (a program's mapped buffers serve one run at a time)."""
    return attrs.evolve(shard, path=STAGED) if shard.path == "shm" else shard


def run(job: Backed, program: CopiesProgram, plan: Plan, call: Call, settings: RunOptions) -> tuple[Any, tuple[Outcome, ...]]:
    """Run every shard's own copy, back up stragglers on idle tasks, and combine the first copy of each shard.

    Returns the result (numpy values, as a run without speculation returns them) and
    an :class:`Outcome` per shard of the plan.

    Raises:
        ClusterError, JobError: every copy of a shard failed (the first failure of its last copy).
    """
    srcs, values, cluster = call.srcs, call.values, call.cluster
    place(cluster, program.models, settings.seconds())  # a model's variables on every task a copy may run on
    hang_check = can_retry(settings, cluster)
    end = time.monotonic() + settings.seconds()
    mapped = [s for s in plan.shards if s.rows]
    runs: dict[int, list[Task]] = {s.index: [s.task] for s in mapped}  # the tasks each shard was started on, own first
    running: dict[Future[Any], tuple[int, Task, float]] = {}
    won: dict[int, tuple[Task, Any, float, float]] = {}  # shard → (task, partial, started, finished)
    failed: set[Task] = set()  # tasks a copy failed on: no backup goes there

    def start(index: int, task: Task) -> None:
        copy = program.copies[(index, task)]
        timeout = max(0.001, end - time.monotonic())
        future = _in_thread(lambda: _run_copy(cluster, program, copy, srcs, values, timeout, hang_check))
        running[future] = (index, task, time.perf_counter())

    for shard in mapped:
        start(shard.index, shard.task)
    while len(won) < len(mapped):
        done, _ = wait(list(running), return_when=FIRST_COMPLETED)  # each copy ends by its own deadline
        for future in done:
            index, task, started = running.pop(future)
            if index in won:
                continue  # the loser: its result never counts
            error = future.exception()
            if error is None:
                won[index] = (task, future.result(), started, time.perf_counter())
                continue
            failed.add(task)
            if not any(i == index for i, _, _ in running.values()):
                raise error  # no copy of the shard is left (the others run on to their ends in the background)
        if time.monotonic() < end:
            busy = {task for index, task, _ in running.values() if index not in won} | failed
            for task in program.tasks:
                waiting = [s for s in mapped if s.index not in won and len(runs[s.index]) == 1 and runs[s.index][0] != task]
                if task not in busy and waiting:
                    shard = max(waiting, key=lambda s: s.rows)
                    runs[shard.index].append(task)
                    busy.add(task)
                    start(shard.index, task)
    winners = [won[s.index] for s in mapped]
    if plan.measured is not None:  # sizes="auto": each winner's span, on the client's clock, times its device
        shards = [program.copies[(s.index, w[0])].shard for s, w in zip(mapped, winners, strict=True)]
        _autosize.record(job.identity, cluster, plan, shards, [(w[2], w[3]) for w in winners])
    outcomes = tuple(
        Outcome(
            s.index,
            program.copies[(s.index, runs[s.index][1])].shard.device if len(runs.get(s.index, ())) > 1 else None,
            s.index in won and won[s.index][0] != s.task,
        )
        for s in plan.shards
    )
    return combine(job, [w[1] for w in winners]), outcomes


def _in_thread(fn: Callable[[], Any]) -> Future[Any]:
    """``fn()`` on a new thread; its future.

    Not a daemon, like the background session closes of ``_cluster.closing``: a thread unwound by force
    while it is inside TensorFlow's C++ at interpreter exit aborts the process, so the interpreter
    waits for a loser still running, at most until its deadline.
    """
    future: Future[Any] = Future()

    def work() -> None:
        try:
            future.set_result(fn())
        except BaseException as e:  # handed to whoever still waits, or to nobody (a loser)
            future.set_exception(e)

    threading.Thread(target=work, name="tfmapreduce-speculate", daemon=False).start()
    return future


def _run_copy(
    cluster: Cluster,
    program: CopiesProgram,
    copy: _Copy,
    srcs: Sequence[Source],
    values: Sequence[np.ndarray[Any, Any]],
    timeout: float,
    hang_check: bool,
) -> Any:
    """One copy's run (on its own thread): its shard's data fed (or staged), its partial fetched; a hung task is named
    before the deadline where a retry could go around it (its new session waits for every task of the plan)."""
    with Staging() as staging:  # this copy's shared-memory files live until this copy ends, won or lost
        feed = staging.feed_dict((ph, srcs[i].feed(copy.shard), staged) for ph, i, staged in copy.feeds)
        feed.update(zip(program.broadcast, values, strict=True))
        return cluster.run(program.graph, copy.fetch, feed, tasks=program.tasks, timeout=timeout, hang_check=hang_check)


def combine(job: Backed, partials: Sequence[Any]) -> Any:
    """The job's result from one partial per shard (numpy, in shard order): merged on the client, then finalized.

    Example:
        >>> job = tmr.MapReduce(tf.reduce_mean, tmr.combiners.weighted_mean)._kind
        >>> float(combine(job, [(np.float64(30.0), np.float64(10.0)), (np.float64(10.0), np.float64(10.0))]))
        2.0
    """
    with tf.init_scope():  # eager, on the client, whatever graph the caller builds
        tensors = [tf.nest.map_structure(tf.convert_to_tensor, p) for p in partials]
        result = job.combiner.finalize(merge_tree(tensors, job.combiner.merge))
        return tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, result)
