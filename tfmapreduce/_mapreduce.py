"""MapReduce: a map function and a combiner, compiled into one graph per (plan, input signature) and run as one distributed execution."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, Literal, TypeVar, overload

import attrs
import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from . import _autosize, _speculate
from ._cache import PROGRAMS
from ._cluster import DEVICES_TIMEOUT, Cluster
from ._combine import Combiner
from ._device import Device
from ._errors import ClusterError, InputError, JobError, MapFunctionError
from ._options import Options, RunOptions
from ._partition import AUTO
from ._plan import Plan, Shard, make_plan
from ._retry import can_retry, moved_shards, with_retries
from ._runstats import RunStats, ShardStats
from ._shm import Staging, guard, route
from ._source import Shipped, Source, Streamed, as_array, sources
from ._stream import compile_fold, streamed
from ._task import Task

R = TypeVar("R")


@attrs.frozen(eq=False)
class _Compiled:
    graph: tf.Graph
    fetch: Any
    feeds: tuple[tuple[Any, int, Shard, bool], ...]  # (placeholder, position of its source in the job's inputs, shard, staged)
    broadcast: tuple[Any, ...]
    tasks: tuple[Task, ...]
    clocked: tuple[Shard, ...] = ()  # sizes="auto": the shards whose clocks (start, end) follow the result in the fetch
    guarded: bool = False  # mapped shared memory: the fetch is (fetch, guards), see _shm.guard

    @property
    def staged(self) -> bool:
        """Whether a shard travels through shared memory: its runs need a Staging."""
        return any(staged for *_, staged in self.feeds)


READY = 16
"""Plain runs a job remembers ready to go again (see :func:`_ready_key`)."""


@attrs.frozen(eq=False)
class _Ready:
    """A run's routed plan and compiled program, kept for the next run of the same kind (see :func:`_ready_key`)."""

    plan: Plan
    signature: tuple[Hashable, ...]  # what the program was compiled for; a source's may depend on its values
    program: _Compiled
    generation: int  # PROGRAMS.generation then: the program is still kept (and its sessions open) while it holds

    def fits(self, srcs: tuple[Source, ...]) -> bool:
        return self.generation == PROGRAMS.generation and self.signature == tuple(s.signature(self.plan) for s in srcs)


def _ready_key(
    srcs: tuple[Source, ...], values: tuple[np.ndarray[Any, Any], ...], settings: RunOptions, cluster: Cluster
) -> Hashable:
    """What a plain run's plan and program depend on, beyond its sources' signatures; None where a run is not plain.

    A job runs again and again on data of one shape (a tiny job's whole cost is
    its overhead): planning, routing and finding its program each time would
    repeat the same work.  Plain runs ship host arrays with hashable options, and
    neither size shards by measured speeds nor back them up.
    """
    if settings.speculate or isinstance(settings.sizes, str) or not all(isinstance(s, Shipped) for s in srcs):
        return None
    key = (settings, cluster.lost, *((s.dtype.str, s.shape) for s in srcs), *((v.dtype.str, v.shape) for v in values))
    try:
        hash(key)
    except TypeError:  # unhashable options (a list of sizes): planned each time
        return None
    return key


def merge_tree(parts: Sequence[Any], merge: Callable[[Any, Any], Any]) -> Any:
    """Merge ``parts`` pairwise in a balanced tree (depth log n)."""
    while len(parts) > 1:
        parts = [_merge(merge, parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def _merge(merge: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """``merge(a, b)``, refusing a silent broadcast: partials of different shapes merged into one of those shapes.

    A concatenating merge ([9] and [1] into [10]) is fine; an element-wise one
    (tf.add of [9] and [1] into [9]) would quietly stretch one shard's partial.
    """
    merged = merge(a, b)
    try:
        leaves = zip(tf.nest.flatten(a), tf.nest.flatten(b), tf.nest.flatten(merged), strict=True)
    except (TypeError, ValueError):
        return merged
    for x, y, z in leaves:
        shapes = [getattr(t, "shape", None) for t in (x, y, z)]
        if any(s is None or not s.is_fully_defined() for s in shapes):
            continue
        if shapes[0] != shapes[1] and shapes[2] in (shapes[0], shapes[1]):
            raise ValueError(f"partials of shapes {shapes[0]} and {shapes[1]} would broadcast into {shapes[2]}")
    return merged


def callable_name(fn: object) -> str:
    """A readable name of a user's function, for messages."""
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


class MapReduce(Generic[R]):
    """A map function and a combiner, run over the shards of an input on a cluster.

    ``map_fn(*shards, *broadcast)`` receives each shard of the input (one tensor per
    co-partitioned input, sliced on axis 0), then the broadcast values whole, and
    returns a tensor or a nested structure of tensors.  ``reduce_fn`` is a
    :class:`Combiner` (see ``tfmapreduce.combiners``) or a plain pairwise
    function such as ``tf.add``.  Jobs with the same map function and combiner
    share their compiled graphs.

    With ``by_key=True`` the job is keyed: ``map_fn`` returns ``(keys, values)``
    (1-D int32/int64/string keys, values with one row per key), the values are
    combined per key, shuffled by a stable hash of the key to the reducer
    devices and merged there; a run returns a ``KeyedResult`` (see the keyed
    jobs guide).

    Example:
        The lesson's distributed mean over uneven slices:

        >>> x = np.arange(100, dtype=np.float32)
        >>> job = tmr.MapReduce(tf.reduce_mean, tmr.combiners.weighted_mean)
        >>> job.plan(x, cluster=cluster, sizes=[30, 70]).sizes
        (30, 70)
        >>> float(job.run(x, cluster=cluster, sizes=[30, 70]))
        49.5
    """

    def __init__(
        self,
        map_fn: Callable[..., Any],
        reduce_fn: Combiner | Callable[[Any, Any], Any],
        *,
        name: str | None = None,
        by_key: bool = False,
    ):
        if not callable(map_fn):
            raise TypeError(
                f"map_fn must be a callable taking the shard tensor(s), e.g. tf.reduce_sum; got {type(map_fn).__name__} {map_fn!r}"
            )
        self.map_fn = map_fn
        self.combiner = reduce_fn if isinstance(reduce_fn, Combiner) else Combiner.lift(reduce_fn)
        self.by_key = bool(by_key)
        if self.by_key:
            from ._keyed import check_keyed_combiner

            check_keyed_combiner(self.combiner, reduce_fn)
        self.name = name or f"{callable_name(map_fn)}/{self.combiner.name}"
        self._ready: dict[Hashable, _Ready] = {}  # see _ready_key

    @property
    def identity(self) -> Hashable:
        """What the compiled graphs depend on: jobs with equal identities share them."""
        return (self.map_fn, self.combiner, self.by_key)

    def __repr__(self) -> str:
        return f"MapReduce({self.name})"

    def plan(self, x: Any, /, **options: Unpack[Options]) -> Any:
        """The plan a run would follow: the shards, their rows and devices.  Nothing runs.

        A keyed job's plan is a ``KeyedPlan``, which also shows the reducers.

        Args:
            x: an array (numpy, tf.Tensor, nested list), a tuple of arrays with
                equal rows (co-partitioned on axis 0), or resident ``Sharded`` data.
            **options: ``cluster``, ``sizes``, ``devices``, ``fallback`` (and for keyed jobs
                ``reducers``, ``batch_rows``): see :class:`RunOptions`.

        Raises:
            PartitionError: ``sizes`` do not partition the rows.
            PlacementError: ``devices`` name a device the cluster does not have.
            InputError: ``x`` is unusable (ragged, 0-d, inputs of unequal rows).
            ClusterError: no cluster, or a closed or unreachable one.
            TypeError: ``x`` is not numeric, or an option has the wrong type.
        """
        settings = RunOptions.of(**options)
        if self.by_key:
            from ._keyed import keyed_plan

            _not_keyed(settings)
            return keyed_plan(x, settings)
        _only_keyed(settings)
        srcs = sources(x)
        cluster = resolve_cluster(settings.cluster, srcs)
        plan = route(plan_of(srcs, cluster, settings, job=self.identity), srcs, cluster, settings.transfer)
        return _speculate.note(plan, srcs) if settings.speculate else plan

    @overload
    def run(
        self,
        x: Any,
        /,
        *,
        broadcast: Sequence[Any] = (),
        return_stats: Literal[False] = False,
        resident: bool = False,
        **options: Unpack[Options],
    ) -> Any: ...
    @overload
    def run(
        self,
        x: Any,
        /,
        *,
        broadcast: Sequence[Any] = (),
        return_stats: Literal[True],
        resident: bool = False,
        **options: Unpack[Options],
    ) -> tuple[Any, RunStats]: ...
    def run(
        self,
        x: Any,
        /,
        *,
        broadcast: Sequence[Any] = (),
        return_stats: bool = False,
        resident: bool = False,
        **options: Unpack[Options],
    ) -> Any:
        """Run the job: map every shard on its device, combine, and return numpy values.

        Args:
            x: as for :meth:`plan`.
            broadcast: values every shard receives whole, after its shard(s) —
                model parameters, centroids.  New values do not recompile.
            return_stats: also return a :class:`RunStats`.
            resident: keyed jobs only: keep the result on the reducers as a ``KeyedSharded``.
            **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout``, and for keyed
                jobs ``reducers``, ``batch_rows``: see :class:`RunOptions`.

        Returns:
            The combiner's result as numpy values (and the stats, if asked); for a keyed job a
            ``KeyedResult`` (or a ``KeyedSharded`` when ``resident=True``).

        Raises:
            WorkerTimeoutError: a task did not answer before the deadline (named).
            WorkerUnavailableError: a task is gone (named).
            MapFunctionError: ``map_fn`` raised or returned something unusable.
            JobError: an op failed while running.
        """
        return self.execute(x, RunOptions.of(return_stats=return_stats, **options), broadcast=broadcast, resident=resident)

    def execute(self, x: Any, settings: RunOptions, *, broadcast: Sequence[Any] = (), resident: bool = False) -> Any:
        """:meth:`run` with options already validated (what recipes call)."""
        if self.by_key:
            from . import _keyed

            _not_keyed(settings)
            return _keyed.run(self, x, settings, broadcast=broadcast, resident=resident)
        _only_keyed(settings, resident=resident)
        started = time.perf_counter()
        srcs = sources(x)
        cluster = resolve_cluster(settings.cluster, srcs)
        values = tuple(as_array(b, argument=f"broadcast[{i}]") for i, b in enumerate(broadcast))
        plans: list[Plan] = []
        again = _ready_key(srcs, values, settings, cluster)

        def attempt(current: RunOptions) -> tuple[Any, bool, tuple[_speculate.Outcome, ...]]:
            ready = self._ready.get(again) if again is not None and not plans else None
            if ready is not None and ready.fits(srcs):  # the same run again: planned, routed and compiled before
                plans.append(ready.plan)
                return self._run_program(ready.program, ready.plan, srcs, values, cluster, current), False, ()
            plan = route(
                plan_of(srcs, cluster, current, job=self.identity), srcs, cluster, current.transfer, timeout=current.seconds()
            )
            if current.speculate:
                plan = _speculate.note(plan, srcs)
            plans.append(plan)
            return self._run_once(plan, srcs, values, cluster, current, remember=again if len(plans) == 1 else None)

        (result, compiled, outcomes), recovery = with_retries(settings, srcs, cluster, attempt)
        if not settings.return_stats:
            return result
        plan = plans[-1]
        backups = {o.index: o for o in outcomes}
        stats = RunStats(
            shards=tuple(
                ShardStats(
                    s.index,
                    s.device,
                    s.rows,
                    sum(src.bytes_sent(s) for src in srcs) * (2 if s.index in backups and backups[s.index].backup else 1)
                    if s.rows
                    else 0,
                    backups[s.index].backup if s.index in backups else None,
                    s.index in backups and backups[s.index].backup_won,
                )
                for s in plan.shards
            ),
            wall_time=time.perf_counter() - started,
            compiled=compiled,
            attempts=recovery.attempts,
            lost=recovery.lost,
            moved=moved_shards(plans[0], plan),
        )
        return result, stats

    def _run_once(
        self,
        plan: Plan,
        srcs: tuple[Source, ...],
        values: tuple[np.ndarray[Any, Any], ...],
        cluster: Cluster,
        settings: RunOptions,
        *,
        remember: Hashable | None = None,
    ) -> tuple[Any, bool, tuple[_speculate.Outcome, ...]]:
        """One distributed run of ``plan`` (compiled once per signature): the result, whether it compiled, and what
        speculation did (``speculate=True`` runs that back up their shards; else empty).

        ``remember`` (see :func:`_ready_key`) keeps the plan and program of a plain run for the next one like it.
        """
        signature = tuple(s.signature(plan) for s in srcs)
        key: tuple[Any, ...] = (self.identity, id(cluster), plan, signature, tuple((v.dtype.str, v.shape) for v in values))
        timed = plan.measured is not None  # sizes="auto": time each shard, to size the next run's shards
        if timed:
            key = (*key, "timed")
        if settings.speculate and _speculate.why_not(plan, srcs) is None:
            key = (*key, "speculate")
            speculative, compiled = PROGRAMS.get(
                key, cluster, lambda: _speculate.compile_copies(self, plan, srcs, values, cluster)
            )
            assert isinstance(speculative, _speculate.Program)
            try:
                result, outcomes = _speculate.run(self, speculative, plan, srcs, values, cluster, settings)
            except JobError as e:
                e.args = (f"{self!r}: {e}",)
                raise
            return result, compiled, outcomes
        build = lambda: self._compile(plan, srcs, values, cluster, timed=timed)  # noqa: E731
        stream = streamed(srcs)  # file sources: read and folded batch by batch on their tasks
        if stream is not None:
            key = (*key, "streamed", settings.batch_rows)
            build = lambda: self._compile_streamed(plan, stream, values, cluster, settings.batch_rows)  # noqa: E731
        generation = PROGRAMS.generation
        program, compiled = PROGRAMS.get(key, cluster, build)
        assert isinstance(program, _Compiled)
        if remember is not None and not timed and stream is None:
            if len(self._ready) >= READY:
                self._ready.clear()
            self._ready[remember] = _Ready(plan, signature, program, generation)
        return self._run_program(program, plan, srcs, values, cluster, settings), compiled, ()

    def _run_program(
        self,
        program: _Compiled,
        plan: Plan,
        srcs: tuple[Source, ...],
        values: tuple[np.ndarray[Any, Any], ...],
        cluster: Cluster,
        settings: RunOptions,
    ) -> Any:
        """Run a compiled program once on this run's data: its result."""
        # Feed THIS run's data: the compiled program is shared by every run of the same signature.
        # Staged shards travel as shared-memory files, closed or unlinked when the run ends, however it ends.
        with Staging() if program.staged else contextlib.nullcontext() as staging:
            if staging is None:
                feed = {ph: srcs[i].feed(shard) for ph, i, shard, _ in program.feeds}
            else:
                feed = staging.feed_dict((ph, srcs[i].feed(shard), staged) for ph, i, shard, staged in program.feeds)
            feed.update(zip(program.broadcast, values, strict=True))
            try:
                result = cluster.run(
                    program.graph,
                    program.fetch,
                    feed,
                    tasks=program.tasks,
                    timeout=settings.seconds(),
                    hang_check=can_retry(settings, cluster),
                )
            except JobError as e:
                for src in srcs:
                    bad = src.input_error(e, plan, cluster)
                    if bad is not None:  # the input's fault (a bad file, lost resident shards): named
                        raise bad from None
                e.args = (f"{self!r}: {e}",)
                raise
        if program.guarded:
            result = result[0]
        if program.clocked:
            result, clocks = result
            _autosize.record(self.identity, cluster, plan, program.clocked, clocks)
        return result

    def _compile(
        self,
        plan: Plan,
        srcs: tuple[Source, ...],
        broadcast: tuple[np.ndarray[Any, Any], ...],
        cluster: Cluster,
        *,
        timed: bool = False,
    ) -> _Compiled:
        """Build the job's graph: each shard's map on its device, per-task merges, the final merge.

        ``timed`` (``sizes="auto"``): each shard's device also reads ``tf.timestamp()`` before the shard's map
        and once its partial is made (the device's own clock: its work, not its wait for the run to reach it);
        the fetch is then ``(result, clocks)``.
        """
        graph = tf.Graph()
        feeds: list[tuple[Any, int, Shard, bool]] = []
        partials: dict[Task, list[Any]] = {}
        devices: dict[Task, str] = {}
        first_output: tuple[Shard, Any] | None = None
        clocks: list[Any] = []
        guards: list[tf.Tensor] = []
        master = f"{cluster.master}/device:CPU:0"
        # Empty shards contribute nothing; a 0-row input still maps its one empty shard.
        mapped = [s for s in plan.shards if s.rows > 0] or [plan.shards[0]]
        with graph.as_default():
            bcast = tuple(
                tf.compat.v1.placeholder(tf.as_dtype(v.dtype), v.shape, name=f"broadcast{i}") for i, v in enumerate(broadcast)
            )
            for shard in mapped:
                with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
                    tensors, in_memory = [], []
                    start = tf.timestamp(name="clock_start") if timed else None
                    for i, src in enumerate(srcs):
                        data = src.tensor(shard)
                        if start is None:
                            value = data.value
                        else:  # nothing of the shard's map runs before its clock starts
                            with tf.control_dependencies([start]):
                                value = tf.identity(data.value)
                        tensors.append(value)
                        if data.placeholder is not None:
                            feeds.append((data.placeholder, i, shard, data.staged))
                        if data.mapped is not None:
                            in_memory.append(data.mapped)
                    output = self.map_shard(shard, tensors, bcast)
                    if first_output is None:
                        first_output = (shard, output)
                    else:
                        check_same_outputs(self.map_fn, first_output, shard, output)
                    rows = tf.constant(shard.rows, tf.int64, name="rows")
                    partial = self.combiner.partial(output, rows)
                    guards += [guard(m, partial) for m in in_memory]
                    partials.setdefault(shard.task, []).append(partial)
                    if start is not None:  # the device's clock once this partial is made
                        with tf.control_dependencies(tf.nest.flatten(partial)):
                            clocks.append(tf.stack([start, tf.timestamp(name="clock_end")]))
                    devices.setdefault(shard.task, shard.device)
            fetch = self.combine_partials(partials, devices, master, first_output)
        graph.finalize()
        fetch = (fetch, tuple(clocks)) if timed else fetch
        fetch = (fetch, tuple(guards)) if guards else fetch
        clocked = tuple(mapped) if timed else ()
        return _Compiled(
            graph,
            fetch,
            tuple(feeds),
            bcast,
            tuple(partials),
            clocked=clocked,
            guarded=bool(guards),
        )

    def combine_partials(
        self, partials: dict[Task, list[Any]], devices: dict[Task, str], master: str, first_output: tuple[Shard, Any] | None
    ) -> Any:
        """In the graph being built: merge the partials on each task (on ``devices[task]``), then across tasks and
        finalize on ``master``; the result tensor(s).

        Raises:
            MapFunctionError: the combiner cannot merge the partials (``first_output``: a shard and its map output, named).
        """
        try:
            per_task = []
            for task, parts in partials.items():
                with tf.device(devices[task]), tf.name_scope("combine_task"):
                    per_task.append(merge_tree(parts, self.combiner.merge))
            with tf.device(master), tf.name_scope("combine"):
                return self.combiner.finalize(merge_tree(per_task, self.combiner.merge))
        except Exception as e:
            gave = f"shard {first_output[0].index} gave {_describe(first_output[1])}" if first_output else "no shard mapped"
            raise MapFunctionError(
                f"{self!r}: the combiner {self.combiner.name} cannot merge the shards' map outputs "
                f"({type(e).__name__}: {_first_line_of(e)}); {gave}: "
                "map_fn must return values the combiner can merge, e.g. the same shape on every shard for tf.add"
            ) from e

    def _compile_streamed(
        self, plan: Plan, src: Streamed, broadcast: tuple[np.ndarray[Any, Any], ...], cluster: Cluster, batch_rows: int | None
    ) -> _Compiled:
        """The graph of a job over a streamed (file) source: each shard folded batch by batch (see ``_stream``)."""
        graph, fetch, bcast, tasks = compile_fold(self, plan, src, broadcast, cluster, batch_rows)
        return _Compiled(graph, fetch, (), bcast, tasks)

    def map_shard(self, shard: Shard, tensors: list[Any], broadcast: tuple[Any, ...]) -> Any:
        """``map_fn`` on one shard's tensors (inside its device scope), its output checked and converted to tensors."""
        where = f"shard {shard.index} (rows {shard.start}:{shard.stop} on {shard.device})"
        try:
            output = self.map_fn(*tensors, *broadcast)
        except Exception as e:
            raise MapFunctionError(f"map_fn {callable_name(self.map_fn)} raised {type(e).__name__} on {where}: {e}") from e
        try:
            return tf.nest.map_structure(tf.convert_to_tensor, output)
        except (TypeError, ValueError) as e:
            raise MapFunctionError(
                f"map_fn {callable_name(self.map_fn)} must return a tensor or a nested structure of tensors; on {where} it returned {output!r} ({e})"
            ) from None


def _only_keyed(settings: RunOptions, *, resident: bool = False) -> None:
    """TypeError for keyed-only settings given to a whole-input job."""
    given = [name for name, value in (("reducers", settings.reducers), ("resident", resident or None)) if value is not None]
    if given:
        raise TypeError(
            f"{', '.join(f'{n}=' for n in given)} apply to keyed jobs only; create the job with MapReduce(map_fn, reduce_fn, by_key=True)"
        )


def _not_keyed(settings: RunOptions) -> None:
    """TypeError for ``speculate=True`` given to a keyed job."""
    if settings.speculate:
        raise TypeError(
            "speculate=True applies to whole-input jobs only: a keyed job's shards shuffle to the reducers in one "
            "distributed run, so no shard can be backed up alone; drop speculate= or use a job without by_key=True"
        )


def check_same_outputs(map_fn: object, first: tuple[Shard, Any], shard: Shard, output: Any) -> None:
    """MapFunctionError unless ``output`` (of ``shard``) has the structure and dtypes of the first shard's."""
    shard0, output0 = first
    try:
        tf.nest.assert_same_structure(output0, output)
        same = all(a.dtype == b.dtype for a, b in zip(tf.nest.flatten(output0), tf.nest.flatten(output), strict=True))
    except (TypeError, ValueError):
        same = False
    if not same:
        raise MapFunctionError(
            f"map_fn {callable_name(map_fn)} returned different structures for shard {shard0.index} and shard {shard.index}: "
            f"{_describe(output0)} vs {_describe(output)}; it must return the same structure and dtypes for every shard"
        )


def _first_line_of(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _describe(output: Any) -> str:
    return repr(tf.nest.map_structure(lambda t: f"{t.dtype.name}{t.shape}", output))


def plan_of(srcs: tuple[Source, ...], cluster: Cluster, settings: RunOptions, *, job: Hashable | None = None) -> Plan:
    """The plan of a run over ``srcs``: where resident inputs live, or a new partition and placement.

    ``job`` (a whole-input job's identity) lets ``sizes="auto"`` size the shards by the speeds measured for it.

    Raises:
        InputError: co-partitioned resident inputs live on different plans.
        TypeError: ``sizes``/``devices`` given for resident inputs; ``sizes="auto"`` without ``job`` or over files.
    """
    plans = [s.home_plan for s in srcs if s.home_plan is not None]
    if any(p != plans[0] for p in plans):
        raise InputError(
            "co-partitioned resident inputs must share one plan (the same rows on the same devices); scatter them with the same sizes= and devices="
        )
    if plans:  # resident data: its plan is where it lives
        if settings.sizes is not None or settings.devices is not None:
            raise TypeError("sizes= and devices= do not apply to resident Sharded data: it stays where scatter() put it")
        return plans[0]
    available = [Device.parse(d) for d in cluster.list_devices(min(DEVICES_TIMEOUT, settings.seconds()))]
    devices = settings.devices
    if devices is not None and cluster.lost:  # shards asked of a lost task go to the survivors, round-robin
        devices = [d for d in devices if Device.parse(d).task not in cluster.lost] or None
    if isinstance(settings.sizes, str) and settings.sizes == AUTO and job is not None and streamed(srcs) is None:
        return _autosize.auto_plan(job, cluster, srcs[0].rows, devices, available, fallback=settings.fallback)
    return make_plan(srcs[0].rows, settings.sizes, devices, available, fallback=settings.fallback)


def resolve_cluster(cluster: Cluster | None, srcs: tuple[Source, ...]) -> Cluster:
    """The cluster a run goes to: ``cluster=``, or the one resident inputs live on (which must agree).

    Raises:
        TypeError: no cluster at all.
        ClusterError: inputs on different clusters, or a closed cluster.
    """
    homes = {id(c): c for c in (s.home for s in srcs) if c is not None}
    if cluster is None:
        if not homes:
            raise TypeError(
                "cluster= is required: pass a Cluster, e.g. cluster=tmr.LocalCluster(2) or tmr.Cluster.from_spec({...})"
            )
        if len(homes) > 1:
            raise ClusterError("the resident inputs live on different clusters; scatter them onto one cluster")
        cluster = next(iter(homes.values()))
    if any(home is not cluster for home in homes.values()):
        raise ClusterError(f"the resident input lives on another cluster than cluster={cluster!r}; omit cluster= or pass its own")
    cluster.check_open()
    return cluster
