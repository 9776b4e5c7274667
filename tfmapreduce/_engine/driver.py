"""The run driver: the one lifecycle of every run, whatever kind of job it is.

plan the shards → route each (shared memory or feed) → the kind's plan → compile through the
cluster's program cache → stage the inputs → ``Cluster.run`` under the deadline → a failure as a
named error → retries (and speculation, for kinds that back up shards) → the kind's finish → stats.

A *kind* of job (:class:`Kind`) supplies only what differs: its plan over the shards, the graph it
builds (through a :class:`Builder`, which feeds each shard's data and times it), and how it
finishes (values fetched to the client, or kept on the devices).
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Hashable, Sequence
from typing import Any, cast

import attrs
import tensorflow as tf

from .._base.checks import flag
from .._base.deadline import bounded, sized, time_left
from .._base.device import Device
from .._base.errors import ClusterError, JobError, TfMapReduceError
from .._base.plan import Plan, Shard
from .._base.task import Task
from .._cluster.cluster import Cluster
from .._io.models import lost, place
from .._io.resident_source import rows_free
from .._io.shm import Staging
from .._io.source import Shipped, as_array, streamed
from .._io.variables import destroy_shard, handle
from .._native.loader import has
from .._ops.mapfn import traced
from .._ops.models import recording
from .._ops.numerics import native_sums
from .._options import RunOptions
from . import autosize as _autosize
from . import progress as _progress
from . import speculate as _speculate
from . import trace as _trace
from .cache import programs
from .call import Call
from .kernels import with_kernels
from .kind import CleansUp, Kind, P, refuse
from .planner import plan_of, resolve_cluster
from .program import Builder, Fed, Program, Ready, Stored
from .retry import can_retry, moved_shards, with_retries
from .route import route
from .stats import RunStats, ShardStats, collecting, record

DISCARD_TIME = 1.0
"""Seconds freeing what a failed run stored may take at least, however little is left of the run's deadline."""

READY = 16
"""Plain runs a kind remembers ready to go again (see :func:`_ready_key`)."""


def _ready_key(call: Call, kind: Kind[Any]) -> Hashable:
    """What a plain run's plan and program depend on beyond its sources' signatures; None where a run is not plain.

    Plain runs ship host arrays with hashable options, keep nothing resident, and neither size shards by measured
    speeds nor back them up: the same run again needs no planning, routing or look-up of its program.
    """
    settings = call.settings
    if call.resident or settings.speculate or isinstance(settings.sizes, str):
        return None
    if not all(isinstance(s, Shipped) for s in call.srcs):
        return None
    key = (
        settings,
        call.cluster.lost,
        *((s.dtype.str, s.shape) for s in call.srcs),
        *((v.dtype.str, v.shape) for v in call.values),
    )
    try:
        hash(key)
    except TypeError:  # unhashable options (a list of sizes): planned each time
        return None
    return key


def shards_of(call: Call, kind: Kind[Any], settings: RunOptions) -> Plan:
    """The run's shards, each with its path (shared memory or feed), and its speculation line when asked."""
    shards = route(
        plan_of(call.srcs, call.cluster, settings, job=kind.identity),
        call.srcs,
        call.cluster,
        settings.transfer,
        timeout=settings.seconds(),
    )
    return _speculate.note(shards, call.srcs) if settings.speculate else shards


def start(kind: Kind[Any], x: Any, settings: RunOptions, broadcast: Sequence[Any] = (), *, resident: bool = False) -> Call:
    """A run's :class:`Call`: its inputs canonicalized by the kind, its cluster, its broadcast values as arrays."""
    refuse(kind.refused, settings)
    srcs, note = kind.sources(x)
    cluster = resolve_cluster(settings.cluster, srcs)
    srcs = with_kernels(srcs, cluster, settings.seconds())
    values = tuple(as_array(b, argument=f"broadcast[{i}]") for i, b in enumerate(broadcast))
    return Call(srcs, note, values, cluster, settings, resident)


def plan(kind: Kind[P], x: Any, settings: RunOptions) -> P:
    """The plan a run would follow (nothing runs)."""
    return planned(kind, x, settings)[0]


def planned(kind: Kind[P], x: Any, settings: RunOptions) -> tuple[P, Call]:
    """The plan a run would follow, with the call it was planned for (its inputs, cluster and options; nothing runs)."""
    call = start(kind, x, settings)
    return kind.plan(shards_of(call, kind, settings), call), call


def run(kind: Kind[Any], x: Any, settings: RunOptions, broadcast: Sequence[Any] = (), *, resident: bool = False) -> Any:
    """Run a job of ``kind`` over ``x``: its result (and a :class:`RunStats` with ``settings.return_stats``).

    The run's deadline starts now and bounds every step: planning and compiling use up the time its step then has.
    Without ``timeout=``, its length is the default for the rows of its input (``default_timeout``), known once
    the inputs are taken (the probe for the kernels meanwhile bounded by the default of no rows).

    Raises:
        TypeError: ``resident`` is not a bool.
    """
    resident = flag(resident, "resident", "keep the result on the workers")
    began, started = time.monotonic(), time.perf_counter()
    with bounded(settings.seconds()):
        call = start(kind, x, settings, broadcast, resident=resident)
    with sized(max((s.rows for s in call.srcs), default=0)):
        left = settings.seconds() - (time.monotonic() - began)
        with bounded(left), _native_sums(call):
            return _run_call(kind, call, settings, started)


def _native_sums(call: Call) -> contextlib.AbstractContextManager[None]:
    """Graphs built inside sum float32 with the native ``TmrWideSum`` where every task has the kernels."""

    def wide_sum(x: tf.Tensor) -> tf.Tensor | None:
        return call.native.tmr_wide_sum(x) if has(call.native, "tmr_wide_sum") else None

    return native_sums(wide_sum)


def _run_call(kind: Kind[Any], call: Call, settings: RunOptions, started: float) -> Any:
    again = _ready_key(call, kind)
    tried: list[Plan] = []
    weights: list[int] = []  # bytes of model variables each attempt placed on the devices

    def attempt(current: RunOptions) -> tuple[Any, Program | None, Any, bool, tuple[_speculate.Outcome, ...]]:
        ready = kind.ready.get(again) if again is not None and not tried else None
        if ready is not None and ready.fits(call.srcs):  # the same run again: planned, routed and compiled before
            tried.append(ready.shards)
            program = ready.kept.program
            return _execute(kind, program, ready.shards, ready.plan, call, current, weights), program, ready.plan, False, ()
        shards = shards_of(call, kind, current)
        tried.append(shards)
        if current.speculate and _speculate.why_not(shards, call.srcs) is None:
            backed = cast(_speculate.Backed, kind)  # (the kinds that speculate implement it)
            copies = (kind.identity, "speculate", shards, *_signature(call, shards))
            kept, compiled = programs(call.cluster).get(copies, lambda: _speculate.compile_copies(backed, shards, call))
            value, outcomes = _speculate.run(backed, kept.program, shards, call, current)
            return value, None, shards, compiled, outcomes
        planned = kind.plan(shards, call)
        variant = kind.variant(planned, call)
        timed = shards.measured is not None
        counted = current.progress is not False and shards.rows >= _progress.COUNTED
        shape, rows_free = _shape(kind, planned, call, shards, timed)

        def build() -> Program:
            counters = _progress.Counters(kind.phase) if counted else None
            builder = Builder.of(call, timed=timed, counters=counters, rows_free=rows_free)
            with builder.graph.as_default(), recording() as uses:
                program = traced(lambda: kind.build(builder, planned, call))
            return attrs.evolve(program, models=tuple(uses)) if uses else program

        if variant is None:  # a program for this run alone
            program, compiled = build(), True
            try:
                return _execute(kind, program, shards, planned, call, current, weights), program, planned, True, ()
            finally:
                call.cluster.forget(program.graph)
        feeds_only = call.settings.transfer == "feed"  # no result written into a file (Builder.fetched)
        key = (
            kind.identity,
            shape,
            *_signature(call, shards),
            timed,
            counted,
            variant,
            feeds_only,
        )
        kept, compiled = programs(call.cluster).get(key, build)
        if again is not None and len(tried) == 1 and not timed and not kept.program.fed:  # (a fed plan is this run's)
            if len(kind.ready) >= READY:
                kind.ready.clear()
            kind.ready[again] = Ready(shards, planned, _signature(call, shards)[0], kept)
        return _execute(kind, kept.program, shards, planned, call, current, weights), kept.program, planned, compiled, ()

    (value, program, planned, compiled, outcomes), recovery = with_retries(settings, call.srcs, call.cluster, attempt)
    result = kind.finish(value, program, planned, call)
    if not (settings.return_stats or collecting()):
        return result
    read = None  # a streamed run's rows, as read: its plan knows only the files' sizes
    counters = program.counters if program is not None else None
    if counters is not None and counters.unit == "rows" and streamed(call.srcs) is not None:
        read = counters.read(call.cluster, settings.seconds())
    stats = _stats(call, tried, outcomes, compiled, recovery, time.perf_counter() - started, read)
    stats = attrs.evolve(stats, weight_bytes=sum(weights)) if weights else stats
    record(stats)
    return (result, stats) if settings.return_stats else result


def _shape(kind: Kind[P], planned: P, call: Call, shards: Plan, timed: bool) -> tuple[Hashable, bool]:
    """What the run's program depends on of its plan, and whether it is built rows-free: the kind's shape of it where
    every input is resident data read through fed handles or host arrays fed shard by shard (``rows_free``: no row
    count in the graph, a host array's placeholders of unknown rows; its progress counters count the rows read) and
    the run does not time its shards (``sizes="auto"``: clocks per shard of the plan); else the whole plan."""
    if timed or not all(rows_free(s, shards) for s in call.srcs):
        return planned, False
    shaped = kind.shape_of(planned)
    return (planned, False) if shaped is None else (("shape", shaped), True)


def _signature(call: Call, shards: Plan) -> tuple[tuple[Hashable, ...], tuple[Any, ...]]:
    """What a program depends on of the run's inputs: each source's signature, and the broadcast values' types."""
    return tuple(s.signature(shards) for s in call.srcs), tuple((v.dtype.str, v.shape) for v in call.values)


def _execute(
    kind: Kind[P], program: Program, shards: Plan, plan: P, call: Call, settings: RunOptions, weights: list[int] | None = None
) -> Any:
    """Run a compiled program once on this run's data and the kind's ``plan`` of it: what its kind fetches.  The variables its map functions read
    are placed on their devices first where they are not there yet (their bytes appended to ``weights``); a run that
    finds a copy gone (its worker restarted) places them all again and runs once more."""
    for again in (False, True):
        if program.models:
            sent = place(call.cluster, program.models, settings.seconds())
            if weights is not None:
                weights.append(sent)
        try:
            return _execute_once(kind, program, shards, plan, call, settings)
        except (JobError, ClusterError):  # a missing copy may come back as another task's cancellation
            if again or not program.models or not lost(call.cluster, program.models, min(10.0, settings.seconds())):
                raise
    raise AssertionError("unreachable")


def _execute_once(kind: Kind[P], program: Program, shards: Plan, plan: P, call: Call, settings: RunOptions) -> Any:
    """Run a compiled program once on this run's data and the kind's ``plan`` of it: what its kind fetches."""
    srcs, cluster = call.srcs, call.cluster
    # Feed THIS run's data: the compiled program is shared by every run of the same signature.
    # Staged shards travel as shared-memory files, closed or unlinked when the run ends, however it ends.
    with Staging() if program.staged else contextlib.nullcontext() as staging:
        # Each placeholder takes this run's shard of its index: a program kept by the plan's shape (``_shape``) was
        # built for shards of other rows, at the same places.
        now = {s.index: s for s in shards.shards}
        feed: dict[Any, Any]
        if staging is None:
            feed = {f.placeholder: srcs[f.source].feed(now.get(f.shard.index, f.shard)) for f in program.feeds}
        else:
            feed = staging.feed_dict(
                (f.placeholder, srcs[f.source].feed(now.get(f.shard.index, f.shard)), f.staged) for f in program.feeds
            )
        feed.update(zip(program.broadcast, call.values, strict=True))
        if program.fed:  # what the plan gives each run (a write's attempt folder): the kinds with such programs implement it
            feed.update({placeholder: cast(Fed[P], kind).fed(plan, name) for name, placeholder in program.fed})
        name = None  # where a resident run keeps its result: a new name each run, or the one of a program built for it
        if call.resident:
            name = program.named or f"tfmapreduce_{secrets.token_hex(8)}"
            feed.update(
                {
                    s.placeholder: handle(s.device, name + s.suffix, s.index, s.dtype)
                    for s in program.slots
                    if s.placeholder is not None
                }
            )
        paths = [staging.returned() for _ in program.outlets] if staging is not None else []  # where results are written
        feed.update(zip(program.outlets, paths, strict=True))
        bare = not (program.clocks or program.guards)  # the common case fetches the kind's values alone
        trace = tf.compat.v1.RunMetadata() if settings.trace is not None else None
        try:
            with _progress.shown(program.counters, cluster, settings.progress, repr(kind), shards.rows):
                fetched = cluster.run(
                    program.graph,
                    program.fetch if bare else (program.fetch, program.clocks, program.guards),
                    feed,
                    tasks=program.tasks,
                    timeout=settings.seconds(),
                    hang_check=can_retry(settings, cluster),
                    fold_constants=not program.buffers,
                    trace=trace,
                )
        except BaseException as e:
            if name is not None:  # what the run stored before it failed is freed (the retry stores under a new name)
                _discard(program, name, cluster, getattr(e, "task", None), settings.timeout)
            if isinstance(kind, CleansUp):  # a write waits for its parts still being written
                kind.clean_up(plan, call, e)
            if isinstance(e, JobError):
                raise failure(kind, e, call, shards, plan) from None
            raise
        if trace is not None:
            _trace.write(cast(str, settings.trace), trace.step_stats)
        if program.returns:  # results written into files: mapped before the files close
            value = program.with_returns(fetched if bare else fetched[0], paths)
            fetched = value if bare else (value, *fetched[1:])
    if not bare:
        fetched, clocks, _ = fetched
        if program.clocked:
            _autosize.record(kind.identity, cluster, shards, program.clocked, clocks)
    return fetched if name is None else Stored(fetched, name)


def _discard(program: Program, name: str, cluster: Cluster, failed: Task | None, timeout: float | None) -> None:
    """Free what a failed run of ``program`` may have stored under ``name``, on the tasks still live (best effort: a lost
    task's memory went with it).  ``failed``, the task the run's error named, is not waited for again: when it is the
    cluster's master, the discard goes through a task it frees instead.  It takes what is left of the run's deadline,
    :data:`DISCARD_TIME` at least."""
    live = [s for s in program.slots if Device.parse(s.device).task not in (*cluster.lost, failed)]
    if not live or cluster.closed:
        return
    graph = tf.Graph()
    with graph.as_default():
        ops = []
        for slot in live:
            with tf.device(slot.device):
                ops.append(destroy_shard(name + slot.suffix, slot.index, slot.dtype))
    try:
        tasks = sorted({Device.parse(s.device).task for s in live})
        master = tasks[0] if failed is not None and failed == cluster.master else None
        cluster.run(graph, ops, {}, tasks=tasks, timeout=max(DISCARD_TIME, time_left(timeout)), master=master)
    except TfMapReduceError:
        pass  # a task lost since: its memory is gone with it
    finally:
        cluster.forget(graph)


def failure(kind: Kind[P], error: JobError, call: Call, shards: Plan, plan: P) -> Exception:
    """The error a failed run of the kind's ``plan`` raises: the input's (a bad file, lost resident shards), the kind's,
    or the job's (named)."""
    for src in call.srcs:
        bad = src.input_error(error, shards, call.cluster)
        if bad is not None:
            return bad
    mine = kind.failure(error, plan)
    if mine is not None:
        return mine
    error.args = (f"{kind!r}: {error}",)
    return error


def _stats(
    call: Call,
    tried: list[Plan],
    outcomes: tuple[_speculate.Outcome, ...],
    compiled: bool,
    recovery: Any,
    wall: float,
    read: dict[Shard, int] | None,
) -> RunStats:
    shards = tried[-1]
    backups = {o.index: o for o in outcomes}

    def sent(s: Shard) -> int:
        copies = 2 if s.index in backups and backups[s.index].backup else 1
        return sum(src.bytes_sent(s) for src in call.srcs) * copies if s.rows else 0

    return RunStats(
        shards=tuple(
            ShardStats(
                s.index,
                s.device,
                s.rows if read is None else read.get(s, 0),
                sent(s),
                backups[s.index].backup if s.index in backups else None,
                s.index in backups and backups[s.index].backup_won,
            )
            for s in shards.shards
        ),
        wall_time=wall,
        compiled=compiled,
        attempts=recovery.attempts,
        lost=recovery.lost,
        moved=moved_shards(tried[0], shards),
    )
