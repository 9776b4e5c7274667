"""The keyed kind of job: map to (key, value) pairs, combine per key, shuffle by key hash to reducer devices.

The graph of one keyed run (one distributed execution)::

    shard (on its device)      map_fn per batch of ``batch_rows`` rows → (keys, values)
                               → per-key partial of the batch, folded into the shard's partial
                                 (``tf.data`` batches folded with ``Dataset.reduce``)
    task  (its first device)   merge the partials of its shards by key
                               → bucket = stable hash(key) mod R; ``tf.dynamic_partition`` into R buckets
                                 (``partitioner="range"``: the key's range among splitters sampled in the run)
    reducer r's host (its CPU) the bytes of bucket r of every task summed and checked against the budget (``max_bytes``,
                               else a quarter of the host's available memory) before any bucket travels
    reducer r (its device)     bucket r of every task, merged by key, finalized (a range partition: sorted by key)
                               → fetched to the client (sorted there, unless ranged), or kept in resource variables

The map side (shared with group jobs) is in ``_keyed_map``; per-key combining and the hash are in ``_per_key``.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import attrs
import tensorflow as tf

from .._base.device import Device
from .._base.errors import JobError, MapFunctionError
from .._engine.call import Call
from .._engine.program import Builder, Program
from .._ops.budget import check_budget, over_budget
from .._ops.combine import MAX, MIN, SUM, WEIGHTED_MEAN, Combiner, SegmentForm
from .._ops.grouping import nbytes
from .._ops.mapfn import describe, first_line
from .._ops.moments import MOMENTS
from .._ops.per_key import by_key, merge
from .shuffle.map_side import ByKey, MappedShards, MapSide, Part, in_key_order, map_shards, mismatch, split_all
from .shuffle.plan import KeyedPlan
from .shuffle.result import concatenated, sorted_result
from .shuffle.sharded import KeyedBuilt, keep, keep_fetch
from .spill import OverBudget


@attrs.define(eq=False, repr=False)
class Keyed(ByKey):
    """A keyed job as the run driver sees it (see ``_engine.kind.Kind``): per-key results on the reducers, each
    reducer's share checked against its budget before it travels: ``max_bytes``, or None for a quarter of the
    reducer host's available memory (as group reducers, joins and sorts)."""

    max_bytes: int | None = None

    @property
    def identity(self) -> Hashable:
        return (self.map_fn, self.combiner, True, self.max_bytes)

    def side(self, native: Any | None) -> MapSide:
        """What a batch's (keys, values) become (its per-key partial), and how partials fold."""
        form = self.combiner.per_key
        assert form is not None  # checked when the job was made (check_keyed_combiner)
        return MapSide(
            combine=lambda keys, values: self._combined(keys, values, form, native),
            merge=lambda parts: merge(parts, form, native),
            refold=lambda keys, partials: by_key(keys, partials, form.merge, native),
        )

    def build(self, builder: Builder, plan: KeyedPlan, call: Call) -> Program:
        """Map and combine per shard (in batches), per task, hash-partition, merge per reducer."""
        form = self.combiner.per_key
        assert form is not None  # checked when the job was made (check_keyed_combiner)
        # The native kernels where every task has them: the sums, counts and means by key (on CPUs), the range
        # partition's sorts (where every device is a CPU).
        native = call.native
        mapped = map_shards(self.map_fn, self.side(native), builder, plan, call)
        first = mapped.first
        cpus = all(Device.parse(d).type == "CPU" for d in [*mapped.device.values(), *plan.reducers])
        try:
            sorts = native if plan.partitioner == "range" and cpus else None
            outputs = _shuffle(mapped, plan, form, native, sorts, self.max_bytes)
        except MapFunctionError:
            raise
        except Exception as e:
            raise MapFunctionError(
                f"{self!r}: the combiner {self.combiner.name} cannot merge the per-key partials "
                f"({type(e).__name__}: {first_line(e)}); shard {first[0].index} gave "
                f"{describe(first[1])}: check the combiner's per_key SegmentForm against map_fn's values"
            ) from e
        value_specs = tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape[1:], t.dtype), outputs[0][1])
        built = KeyedBuilt(first[1][0].dtype, value_specs, call.resident)
        if not built.resident:
            fetched = builder.fetched_parts(outputs, plan.reducers)
            return builder.program(fetched, plan.tasks, built)
        return builder.program(keep_fetch(builder, plan.reducers, outputs), plan.tasks, built)

    def _combined(self, keys: tf.Tensor, values: Any, form: SegmentForm, native: Any | None) -> Part:
        """A batch's per-key partial; TypeError naming the values where a combiner of numbers is given strings (its ops
        would fail: as they are built, or in the run)."""
        if form.partial in _NUMBERS and any(v.dtype == tf.string for v in tf.nest.flatten(values)):
            raise TypeError(
                f"{self!r}: the values hold strings, which the combiner {self.combiner.name} cannot combine (it takes "
                "numbers); pass numeric values, e.g. values.astype(np.float64), or count each key's rows with "
                "tmr.count_by_key(keys)"
            )
        return by_key(keys, values, form.partial, native)

    def finish(self, value: Any, program: Program | None, plan: KeyedPlan, call: Call) -> Any:
        """A :class:`KeyedResult`, or a ``KeyedSharded`` for a resident run."""
        assert program is not None
        built: KeyedBuilt = program.info
        decode = call.note if built.key_dtype == tf.string else None
        if call.resident:
            return keep(call.cluster, plan, value, built, decode)
        keys, per_key = concatenated(value)
        return sorted_result(keys, per_key, decode=decode, ordered=plan.partitioner == "range")

    def failure(self, error: JobError, plan: KeyedPlan) -> Exception | None:
        big = over_budget(error, _TOO_BIG, self.max_bytes)
        if big is not None:
            return OverBudget(
                big,
                f"{self!r}: reducer {big.part} ({big.device}) would receive {big.rows:,} keys' partials ({big.size:,} bytes "
                f"of keys and partials), more than its budget of {big.budget:,} bytes ({big.limit}); nothing was sent. "
                "Spread the keys over more reducers (reducers=N), or raise max_bytes= where the host has the memory (where "
                "every task has the native kernels' spill family, the run spills to the workers' disks instead)",
            )
        return mismatch(self.map_fn, error, plan.plan.shards)


_NUMBERS = frozenset(c.per_key.partial for c in (SUM, WEIGHTED_MEAN, MIN, MAX, MOMENTS) if c.per_key is not None)
"""The per-key partials of the built-in combiners of numbers (kept by the recipes made of them, e.g. variance)."""


def _shuffle(
    mapped: MappedShards, plan: KeyedPlan, form: SegmentForm, native: Any | None, sorts: Any | None, max_bytes: int | None
) -> list[Part]:
    """Each task's partials merged by key and split into one bucket per reducer (by hash or range); each reducer's buckets
    merged, finalized (and sorted by key in a range partition).  ``native``: the kernels for the merges; ``sorts``:
    for the range partition; ``max_bytes``: each reducer's budget, checked before its buckets travel (None: a quarter of
    its host's available memory)."""
    merged = []
    for task, parts in mapped.per_task.items():
        with tf.device(mapped.device[task]), tf.name_scope("combine_task"):
            merged.append((mapped.device[task], merge(parts, form, native)))
    buckets_per_task = split_all(merged, plan.reducers, plan.partitioner, sorts, scope="combine_task")
    buckets_per_task = _gated(merged, buckets_per_task, plan.reducers, max_bytes)
    outputs = []
    for r, device in enumerate(plan.reducers):
        with tf.device(device), tf.name_scope(f"reducer{r}"):
            keys, partial = merge([b[r] for b in buckets_per_task], form, native)
            values = form.finalize(partial)
            if plan.partitioner == "range":
                keys, values = in_key_order(keys, values, sorts)
            outputs.append((tf.identity(keys), tf.nest.map_structure(tf.identity, values)))
    return outputs


def _gated(
    merged: list[tuple[str, Part]], buckets: list[list[Part]], reducers: tuple[str, ...], max_bytes: int | None
) -> list[list[Part]]:
    """Each task's buckets, each sliced from its reducer's budget check (``check_budget``): none travels before it holds."""
    counts = []
    for (device, _), task_buckets in zip(merged, buckets, strict=True):
        with tf.device(device), tf.name_scope("combine_task"):
            counts.append([(tf.size(k, tf.int64), nbytes(k, v)) for k, v in task_buckets])
    gated: list[list[Part]] = [[] for _ in merged]
    for r, device in enumerate(reducers):
        start = check_budget(r, device, [c[r][0] for c in counts], [c[r][1] for c in counts], max_bytes, _TOO_BIG)
        for t, ((task_device, _), task_buckets) in enumerate(zip(merged, buckets, strict=True)):
            with tf.device(task_device), tf.name_scope(f"send{r}"):
                keys, values = task_buckets[r]
                gated[t].append((keys[start:], tf.nest.map_structure(lambda x, at=start: x[at:], values)))
    return gated


_TOO_BIG = "tfmapreduce: keyed partition too large"


def check_keyed_combiner(combiner: Combiner, reduce_fn: Any) -> None:
    """A keyed job needs a combiner with a per-key form: MapFunctionError naming the alternatives otherwise."""
    if combiner.per_key is None:
        raise MapFunctionError(
            f"reduce_fn {combiner.name} has no per-key (segment) form, so it cannot combine the values of each key in a by_key=True job; "
            "use a combiner (tmr.combiners.sum, count, mean, min, max, moments), a pairwise function with a segment form "
            "(tf.add, tf.maximum, tf.minimum, tf.multiply), or a tmr.Combiner with per_key=tmr.combiners.SegmentForm(...)"
        )
