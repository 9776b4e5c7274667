"""MapReduce: a map function and a combiner, run over the shards of an input as one distributed execution."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, Literal, TypeVar, overload

import attrs
import tensorflow as tf
from typing_extensions import Unpack

from .._base.checks import flag
from .._engine import driver as _engine
from .._engine.kind import Kind
from .._engine.stats import RunStats
from .._ops.combine import SUM, Combiner
from .._ops.mapfn import callable_name
from .._ops.per_group import check_max_bytes
from .._options import Options, RunOptions
from .fuse import counts_words, fused
from .grace import planned_folder
from .grouped import Grouped
from .keyed import Keyed, check_keyed_combiner
from .shuffle.forecast import keyed_forecast
from .shuffle.map_side import emit
from .shuffle.partials import TRACED, traced, traced_output
from .shuffle.plan import KeyedPlan
from .spill import OverBudget
from .spilled_group import group_spilled
from .whole import WholeInput

R = TypeVar("R")


class MapReduce(Generic[R]):
    """A map function and a combiner, run over the shards of an input on a cluster.

    ``map_fn(*shards, *broadcast)`` receives each shard of the input (one tensor per
    co-partitioned input, sliced on axis 0), then the broadcast values whole, and
    returns a tensor or a nested structure of tensors.  ``reduce_fn`` is a
    [`Combiner`][tfmapreduce.Combiner] (see ``tfmapreduce.combiners``) or a plain pairwise
    function such as ``tf.add``.  Jobs with the same map function and combiner
    share their compiled graphs.

    With ``by_key=True`` the job is keyed: ``map_fn`` returns ``(keys, values)``
    (1-D int32/int64/string keys, values with one row per key), the values are
    combined per key, shuffled by a stable hash of the key to the reducer
    devices and merged there; a run returns a ``KeyedResult`` (see the keyed
    jobs guide).  With a group reducer, ``tmr.per_group(fn)``, every value of
    each key travels to its reducer, which calls ``fn(keys, ragged values)``.
    A keyed job checks that each reducer's share of per-key partials fits its budget
    before it travels (``max_bytes=N`` bytes, else a quarter of the reducer host's
    available memory); over it, the run spills to the workers' disks (one
    sub-partition per reducer at a time, the same result; a resident run keeps each
    reducer's rounds concatenated there, a range-partitioned run spills by ranges).
    A group reducer over its budget (``tmr.per_group(fn, max_bytes=)``) spills the
    same way, fetched or resident, by hash or by range.

    Examples:
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
        max_bytes: int | None = None,
    ):
        if not callable(map_fn):
            raise TypeError(
                f"map_fn must be a callable taking the shard tensor(s), e.g. tf.reduce_sum; got {type(map_fn).__name__} {map_fn!r}"
            )
        self.map_fn = map_fn
        self.combiner = reduce_fn if isinstance(reduce_fn, Combiner) else Combiner.lift(reduce_fn)
        self.by_key = bool(by_key)
        groups = self.combiner.per_group is not None
        if groups and not self.by_key:
            raise TypeError(
                f"reduce_fn {self.combiner.name} is a group reducer (tmr.per_group): it reduces every value of each key, so the job "
                "must be keyed: MapReduce(map_fn, reducer, by_key=True), with map_fn returning (keys, values)"
            )
        if self.by_key and not groups:
            check_keyed_combiner(self.combiner, reduce_fn)
        if max_bytes is not None and (groups or not self.by_key):
            raise TypeError(
                f"max_bytes={max_bytes!r} bounds what one reducer of a keyed combine receives (by_key=True with a combiner); "
                + (
                    "a group reducer takes its budget as tmr.per_group(fn, max_bytes=)"
                    if groups
                    else "a whole-input job has no reducers: drop max_bytes=, or pass by_key=True"
                )
            )
        self.name = name or f"{callable_name(map_fn)}/{self.combiner.name}"
        self._kind: WholeInput | Keyed | Grouped = (
            Grouped(self.map_fn, self.combiner, self.name)
            if groups
            else Keyed(self.map_fn, self.combiner, self.name, check_max_bytes(max_bytes))
            if self.by_key
            else WholeInput(self.map_fn, self.combiner, self.name)
        )
        """The job as the run driver sees it (see ``_engine.kind.Kind``)."""
        self._ones: tf.DType | Literal[False] | None = False
        """The dtype of the ones this job sums over words, a word count (see ``_kinds.fuse``); None where it is not one;
        False: not asked yet."""
        self._counted: dict[Callable[..., Any], Keyed] = {}
        """The job run as the native word count, by its map function (see ``fuse.fused``)."""

    @property
    def identity(self) -> Hashable:
        """What the compiled graphs depend on: jobs with equal identities share them."""
        return self._kind.identity

    def __repr__(self) -> str:
        return f"MapReduce({self.name})"

    def plan(self, x: Any, /, **options: Unpack[Options]) -> Any:
        """The plan a run would follow: the shards, their rows and devices.  Nothing runs.

        A keyed job's plan is a ``KeyedPlan``, which also shows the reducers, and ends with what its budget expects
        (``plan.spill``): in memory, or spilled through the workers' disks in how many sub-partitions per reducer, and
        what each task writes.  A group job's is estimated from the input's rows; a keyed combine's from its per-key
        partials, each task's distinct keys where they are on the client (counted), else at most its rows
        (``shuffle.partials``).

        Args:
            x: an array (numpy, tf.Tensor, nested list), a tuple of arrays with
                equal rows (co-partitioned on axis 0), or resident ``Sharded`` data.
            **options: ``cluster``, ``sizes``, ``devices``, ``fallback`` (and for keyed jobs
                ``reducers``, ``batch_rows``, ``partitioner``): see [`RunOptions`][tfmapreduce.RunOptions].

        Raises:
            PartitionError: ``sizes`` do not partition the rows.
            PlacementError: ``devices`` name a device the cluster does not have.
            InputError: ``x`` is unusable (ragged, 0-d, inputs of unequal rows).
            ClusterError: no cluster, or a closed or unreachable one.
            TypeError: ``x`` is not numeric, or an option has the wrong type.
            MapFunctionError: a keyed job's map makes keys no run takes (float keys, keys of several columns), as
                traced on placeholders shaped as ``x``.
        """
        return self.planned(x, RunOptions.of(**options))

    def planned(self, x: Any, settings: RunOptions, *, partials: bool = True) -> Any:
        """[`plan`][tfmapreduce.MapReduce.plan] with options already validated (what recipes call).  ``partials``: a
        keyed combine's estimate counts its per-key partials (``shuffle.partials``); False: its input rows, each sent
        whole (what a group recipe sends: ``tmr.plan_by_key`` without ``recipe=``, whose keys it checked: its map is not
        traced, which a job's own plan does to refuse keys no run takes)."""
        kind: Kind[Any] = self._kind
        planned, call = _engine.planned(kind, x, settings)
        budget = self._kind.form.max_bytes if isinstance(self._kind, Grouped) else getattr(self._kind, "max_bytes", None)
        if not isinstance(planned, KeyedPlan):
            return planned
        combines = isinstance(self._kind, Keyed) and partials  # (else planned as a group recipe: rows sent whole)
        form = self.combiner.per_key
        found = traced_output(self.map_fn, call.srcs) if call.srcs and partials else None
        if found is not None:  # keys no run takes (float, of several columns): the plan is refused, as the run is
            with found[0][0].graph.as_default():
                emit(self.map_fn, found[1], TRACED)
        traced_partials = traced(found, form) if combines and form is not None and found is not None else None
        forecast = keyed_forecast(
            planned.plan,
            len(planned.reducers),
            call.srcs,
            budget,
            planned_folder(),
            partitioner=planned.partitioner,
            partials=traced_partials,
            cluster=call.cluster,
        )
        return attrs.evolve(planned, spill=forecast)

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
            x: as for [`plan`][tfmapreduce.MapReduce.plan].
            broadcast: values every shard receives whole, after its shard(s) —
                model parameters, centroids.  New values do not recompile.
            return_stats: also return a [`RunStats`][tfmapreduce.RunStats].
            resident: keyed jobs only: keep the result on the reducers as a ``KeyedSharded``.
            **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout``, and for keyed
                jobs ``reducers``, ``batch_rows``, ``partitioner``: see [`RunOptions`][tfmapreduce.RunOptions].

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
        """[`run`][tfmapreduce.MapReduce.run] with options already validated (what recipes call)."""
        if flag(resident, "resident", "keep the per-key results on the reducers") and not self.by_key:
            raise TypeError("resident= applies to keyed jobs only; create the job with MapReduce(map_fn, reduce_fn, by_key=True)")
        kind: Kind[Any] = self._kind
        counter, x = fused(lambda: self._word_ones(broadcast), x, settings)  # the one place fusion is decided
        if counter is not None:
            budget = self._kind.max_bytes if isinstance(self._kind, Keyed) else None
            kind = self._counted.setdefault(counter, Keyed(counter, SUM, self.name, budget))
        try:
            return _engine.run(kind, x, settings, broadcast, resident=resident)
        except OverBudget as refused:  # a reducer's share over its budget: through the workers' disks instead
            if not isinstance(kind, (Grouped, Keyed)):
                raise
            return group_spilled(kind, x, settings, broadcast, refused, resident=resident)

    def _word_ones(self, broadcast: Sequence[Any]) -> tf.DType | None:
        """The dtype of the ones this job sums over the words of its lines, where it is a word count (``fuse``)."""
        if not (self.by_key and self.combiner is SUM and not broadcast):
            return None
        if self._ones is False:
            self._ones = counts_words(self.map_fn)
        return self._ones
