"""MapReduce jobs: one graph per (plan, input signature), run as one distributed execution."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import attrs
import numpy as np
import tensorflow as tf

from . import _backend
from ._cluster import Cluster
from ._combine import Combiner
from ._device import Device
from ._errors import ClusterError, InputError, JobError, MapFunctionError
from ._inputs import as_array, sources
from ._partition import SizesLike
from ._plan import Plan, Shard, make_plan

R = TypeVar("R")

CACHE_SIZE = 16
"""Compiled graphs kept per job (least recently used go first)."""


@attrs.frozen
class ShardStats:
    """What one shard cost in a run."""

    index: int
    """The shard's position in the plan."""
    device: str
    """The device that mapped it."""
    rows: int
    """Its rows."""
    bytes_sent: int
    """Input bytes the client sent for it in this run (0 for resident data)."""


@attrs.frozen
class RunStats:
    """What a run did: per-shard devices and bytes, wall time, and whether it compiled."""

    shards: tuple[ShardStats, ...]
    """One entry per shard, in order."""
    wall_time: float
    """Seconds from the call to the result, compilation included."""
    compiled: bool
    """True when this run built (traced) a new graph; False when it reused one."""

    @property
    def bytes_sent(self) -> int:
        """Input bytes sent to the cluster in this run, all shards together."""
        return sum(s.bytes_sent for s in self.shards)


@attrs.frozen(eq=False)
class _Compiled:
    graph: tf.Graph
    fetch: Any
    feeds: tuple[tuple[Any, int, Shard], ...]  # (placeholder, position of its source in the job's inputs, shard)
    broadcast: tuple[Any, ...]
    tasks: list[str]


def _tree(parts: Sequence[Any], merge: Callable[[Any, Any], Any]) -> Any:
    """Merge ``parts`` pairwise in a balanced tree (depth log n)."""
    while len(parts) > 1:
        parts = [merge(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def _name(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


class MapReduce(Generic[R]):
    """A map function and a combiner, run over the shards of an input on a cluster.

    ``map_fn(*shards, *broadcast)`` receives each shard of the input (one tensor per
    co-partitioned input, sliced on axis 0), then the broadcast values whole, and
    returns a tensor or a nested structure of tensors.  ``reduce_fn`` is a
    :class:`Combiner` (see ``tfmapreduce.combiners``) or a plain pairwise
    function such as ``tf.add``.

    Example — the lesson's distributed mean over uneven slices:
        >>> import tensorflow as tf, tfmapreduce as tmr
        >>> job = tmr.MapReduce(tf.reduce_mean, tmr.combiners.weighted_mean)
        >>> with tmr.LocalCluster(2) as c:  # doctest: +SKIP
        ...     print(job.plan(x, cluster=c, sizes=[30, 70]))
        ...     mean = job.run(x, cluster=c, sizes=[30, 70])
    """

    def __init__(self, map_fn: Callable[..., Any], reduce_fn: Combiner | Callable[[Any, Any], Any], *, name: str | None = None,
                 by_key: bool = False):
        if not callable(map_fn):
            raise TypeError(f"map_fn must be a callable taking the shard tensor(s), e.g. tf.reduce_sum; got {type(map_fn).__name__} {map_fn!r}")
        self.map_fn = map_fn
        self.combiner = reduce_fn if isinstance(reduce_fn, Combiner) else Combiner.lift(reduce_fn)
        self.by_key = bool(by_key)  # keyed: map_fn returns (keys, values), combined per key (see _keyed.py)
        if self.by_key:
            from ._keyed import check_keyed_combiner

            check_keyed_combiner(self.combiner, reduce_fn)
        self.name = name or f"{_name(map_fn)}/{self.combiner.name}"
        self._compiled: collections.OrderedDict[Any, tuple[Cluster, _Compiled]] = collections.OrderedDict()

    def __repr__(self) -> str:
        return f"MapReduce({self.name})"

    def plan(self, x: Any, /, *, cluster: Cluster | None = None, sizes: SizesLike = None, devices: Sequence[str] | None = None, fallback: str | None = None,
             reducers: int | Sequence[str] | None = None, batch_rows: int | None = None) -> Any:
        """The plan a run would follow: the shards, their rows and devices.  Nothing runs.

        Args:
            x: an array (numpy, tf.Tensor, nested list), a tuple of arrays with
                equal rows (co-partitioned on axis 0), or resident ``Sharded`` data.
            cluster: where to run; optional for ``Sharded`` data, which knows its cluster.
            sizes: None (even over the devices), a shard count, row counts such
                as ``[30, 70]``, or ``tmr.weights(1, 3)``.
            devices: device strings (``"/job:local/task:1"``, ``"/job:local/task:0/gpu:0"``
                or full names); shard i goes to ``devices[i % len(devices)]``.
            fallback: ``"cpu"`` runs a shard whose GPU is absent on its task's CPU
                (shown in the plan); None makes that an error.

            reducers, batch_rows: keyed jobs only (``by_key=True``), as for :meth:`run`; a keyed
                job's plan is a ``KeyedPlan`` that also shows the reducers.

        Raises:
            PartitionError, PlacementError, InputError, ClusterError, TypeError.
        """
        if self.by_key:
            from ._keyed import keyed_plan

            return keyed_plan(self, x, cluster=cluster, sizes=sizes, devices=devices, fallback=fallback, reducers=reducers, batch_rows=batch_rows)
        _only_keyed(reducers=reducers, batch_rows=batch_rows)
        srcs = sources(x)
        return self._plan(srcs, _resolve_cluster(cluster, srcs), sizes, devices, fallback)

    @staticmethod
    def _plan(srcs: tuple[Any, ...], cluster: Cluster, sizes: SizesLike, devices: Any, fallback: str | None) -> Plan:
        plans = [p for p in (getattr(s, "plan", None) for s in srcs) if p is not None]
        if any(p != plans[0] for p in plans):
            raise InputError("co-partitioned resident inputs must share one plan (the same rows on the same devices); "
                             "scatter them with the same sizes= and devices=")
        fixed = plans[0] if plans else None
        if fixed is not None:  # resident data: its plan is where it lives
            if sizes is not None or devices is not None:
                raise TypeError("sizes= and devices= do not apply to resident Sharded data: it stays where scatter() put it")
            return fixed
        available = [Device.parse(d) for d in cluster.devices]
        return make_plan(srcs[0].rows, sizes, devices, available, fallback=fallback)

    def run(
        self,
        x: Any,
        /,
        *,
        cluster: Cluster | None = None,
        sizes: SizesLike = None,
        devices: Sequence[str] | None = None,
        fallback: str | None = None,
        broadcast: Sequence[Any] = (),
        timeout: float | None = None,
        return_stats: bool = False,
        reducers: int | Sequence[str] | None = None,
        batch_rows: int | None = None,
        resident: bool = False,
    ) -> Any:
        """Run the job: map every shard on its device, combine, and return numpy values.

        Takes the arguments of :meth:`plan`, and:

        Args:
            broadcast: values every shard receives whole, after its shard(s) —
                model parameters, centroids.  New values do not recompile.
            timeout: the run's deadline in seconds (default :func:`get_timeout`, 60).
            return_stats: also return a :class:`RunStats`.
            reducers: keyed jobs only: the number of reducer devices (default one per task of
                the plan) or a list of device strings; keys go to them by a stable hash.
            batch_rows: keyed jobs only: rows of a shard mapped at once (default 2**20); a
                larger shard is folded batch by batch, so memory is its distinct keys plus a batch.
            resident: keyed jobs only: keep the result on the reducers as a ``KeyedSharded``.

        Returns:
            The combiner's result as numpy values (and the stats, if asked); for a keyed job a
            ``KeyedResult`` (or a ``KeyedSharded`` when ``resident=True``).

        Raises:
            WorkerTimeoutError: a task did not answer before the deadline (named).
            WorkerUnavailableError: a task is gone (named).
            MapFunctionError: ``map_fn`` raised or returned something unusable.
            JobError: an op failed while running.
        """
        if self.by_key:
            from . import _keyed

            return _keyed.run(self, x, cluster=cluster, sizes=sizes, devices=devices, fallback=fallback, broadcast=broadcast, timeout=timeout,
                              return_stats=return_stats, reducers=reducers, batch_rows=batch_rows, resident=resident)
        _only_keyed(reducers=reducers, batch_rows=batch_rows, resident=resident or None)
        started = time.perf_counter()
        deadline = _backend.check_timeout(timeout)
        srcs = sources(x)
        cluster = _resolve_cluster(cluster, srcs)
        values = tuple(as_array(b, argument=f"broadcast[{i}]") for i, b in enumerate(broadcast))
        plan = self._plan(srcs, cluster, sizes, devices, fallback)
        key = (id(cluster), plan, tuple(s.signature(plan) for s in srcs), tuple((v.dtype.str, v.shape) for v in values))
        entry = self._compiled.get(key)
        compiled = entry is None or entry[0] is not cluster
        if compiled:
            self._store(key, cluster, self._compile(plan, srcs, values, cluster))
        else:
            self._compiled.move_to_end(key)
        program = self._compiled[key][1]
        # Feed THIS run's data: the compiled program is shared by every run of the same signature.
        feed = {ph: srcs[i].feed(shard) for ph, i, shard in program.feeds}
        feed.update(zip(program.broadcast, values, strict=True))
        try:
            result = cluster.run(program.graph, program.fetch, feed, tasks=program.tasks, timeout=deadline)
        except JobError as e:
            e.args = (f"{self!r}: {e}",)
            raise
        if not return_stats:
            return result
        sent = collections.Counter()
        for _, i, shard in program.feeds:
            sent[shard.index] += int(np.asarray(srcs[i].feed(shard)).nbytes) if hasattr(srcs[i], "array") else 0
        stats = RunStats(
            shards=tuple(ShardStats(s.index, s.device, s.rows, sent[s.index]) for s in plan.shards),
            wall_time=time.perf_counter() - started,
            compiled=compiled,
        )
        return result, stats

    def _store(self, key: Any, cluster: Cluster, program: _Compiled) -> None:
        self._compiled[key] = (cluster, program)
        while len(self._compiled) > CACHE_SIZE:
            _, (old_cluster, old) = self._compiled.popitem(last=False)
            old_cluster.forget(old.graph)

    def _compile(self, plan: Plan, srcs: tuple[Any, ...], broadcast: tuple[np.ndarray, ...], cluster: Cluster) -> _Compiled:
        """Build the job's graph: each shard's map on its device, per-task merges, the final merge."""
        graph = tf.Graph()
        feeds: list[tuple[Any, int, Shard]] = []
        partials: dict[str, list[Any]] = {}
        devices: dict[str, str] = {}
        first_output: tuple[Shard, Any] | None = None
        # Empty shards contribute nothing; a 0-row input still maps its one empty shard.
        mapped = [s for s in plan.shards if s.rows > 0] or [plan.shards[0]]
        with graph.as_default():
            bcast = tuple(tf.compat.v1.placeholder(tf.as_dtype(v.dtype), v.shape, name=f"broadcast{i}") for i, v in enumerate(broadcast))
            for shard in mapped:
                with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
                    tensors = []
                    for i, src in enumerate(srcs):
                        tensor, placeholder = src.tensor(shard)
                        tensors.append(tensor)
                        if placeholder is not None:
                            feeds.append((placeholder, i, shard))
                    output = self._map(shard, tensors, bcast)
                    if first_output is None:
                        first_output = (shard, output)
                    else:
                        self._check_same(first_output, shard, output)
                    rows = tf.constant(shard.rows, tf.int64, name="rows")
                    partials.setdefault(shard.task, []).append(self.combiner.partial(output, rows))
                    devices.setdefault(shard.task, shard.device)
            try:
                per_task = []
                for task, parts in partials.items():
                    with tf.device(devices[task]), tf.name_scope("combine_task"):
                        per_task.append(_tree(parts, self.combiner.merge))
                with tf.device(f"{cluster.tasks[0]}/device:CPU:0"), tf.name_scope("combine"):
                    fetch = self.combiner.finalize(_tree(per_task, self.combiner.merge))
            except Exception as e:
                raise MapFunctionError(
                    f"{self!r}: the combiner {self.combiner.name} cannot merge the shards' map outputs "
                    f"({type(e).__name__}: {_first_line_of(e)}); shard {mapped[0].index} gave {_describe(first_output[1]) if first_output else None}: "
                    "map_fn must return values the combiner can merge, e.g. the same shape on every shard for tf.add"
                ) from e
        graph.finalize()
        return _Compiled(graph, fetch, tuple(feeds), bcast, list(partials))

    def _map(self, shard: Shard, tensors: list[Any], broadcast: tuple[Any, ...]) -> Any:
        where = f"shard {shard.index} (rows {shard.start}:{shard.stop} on {shard.device})"
        try:
            output = self.map_fn(*tensors, *broadcast)
        except Exception as e:
            raise MapFunctionError(f"map_fn {_name(self.map_fn)} raised {type(e).__name__} on {where}: {e}") from e
        try:
            return tf.nest.map_structure(tf.convert_to_tensor, output)
        except (TypeError, ValueError) as e:
            raise MapFunctionError(
                f"map_fn {_name(self.map_fn)} must return a tensor or a nested structure of tensors; on {where} it returned {output!r} ({e})"
            ) from None

    def _check_same(self, first: tuple[Shard, Any], shard: Shard, output: Any) -> None:
        shard0, output0 = first
        try:
            tf.nest.assert_same_structure(output0, output)
            same = all(a.dtype == b.dtype for a, b in zip(tf.nest.flatten(output0), tf.nest.flatten(output), strict=True))
        except (TypeError, ValueError):
            same = False
        if not same:
            raise MapFunctionError(
                f"map_fn {_name(self.map_fn)} returned different structures for shard {shard0.index} and shard {shard.index}: "
                f"{_describe(output0)} vs {_describe(output)}; it must return the same structure and dtypes for every shard"
            )


def _only_keyed(**settings: Any) -> None:
    """TypeError for keyed-only settings given to a whole-input job."""
    given = [name for name, value in settings.items() if value is not None]
    if given:
        raise TypeError(f"{', '.join(f'{n}=' for n in given)} apply to keyed jobs only; create the job with MapReduce(map_fn, reduce_fn, by_key=True)")


def _first_line_of(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _describe(output: Any) -> str:
    return repr(tf.nest.map_structure(lambda t: f"{t.dtype.name}{t.shape}", output))


def _resolve_cluster(cluster: Cluster | None, srcs: tuple[Any, ...]) -> Cluster:
    homes = {id(c): c for c in (getattr(s, "cluster", None) for s in srcs) if c is not None}
    if cluster is None:
        if not homes:
            raise TypeError("cluster= is required: pass a Cluster, e.g. cluster=tmr.LocalCluster(2) or tmr.Cluster.from_spec({...})")
        if len(homes) > 1:
            raise ClusterError("the resident inputs live on different clusters; scatter them onto one cluster")
        cluster = next(iter(homes.values()))
    elif not isinstance(cluster, Cluster):
        raise TypeError(f"cluster must be a tfmapreduce Cluster (e.g. tmr.LocalCluster(2)), got {type(cluster).__name__} {cluster!r}")
    if any(home is not cluster for home in homes.values()):
        raise ClusterError(f"the resident input lives on another cluster than cluster={cluster!r}; omit cluster= or pass its own")
    cluster.check_open()
    return cluster
