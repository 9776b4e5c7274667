"""The map-only kind whose outputs move to their key's reducer: ``tmr.map(..., by_key=True)``, a keyed resident result."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, ClassVar

import attrs
import tensorflow as tf

from .._base.errors import JobError, ReducerMemoryError
from .._base.plan import Plan
from .._engine.call import Call
from .._engine.kind import KindBase
from .._engine.program import Builder, Program
from .._io.keyed_input import keyed_sources
from .._io.source import Sources, streamed
from .._io.variables import named_per_run
from .._ops.budget import check_budget, over_budget
from .._ops.grouping import nbytes
from .._ops.mapfn import callable_name
from .maponly import _TOO_BIG, NO_SPECULATION, MapOnly
from .shuffle.map_side import in_key_order, split_all
from .shuffle.plan import KeyedPlan, keyed_plan
from .shuffle.sharded import KeyedBuilt, KeyedSharded, keep, keep_fetch


@attrs.define(eq=False, repr=False)
class MapByKey(KindBase[KeyedPlan]):
    """``map(fn, x, by_key=True)`` as the run driver sees it (see ``_engine.kind.Kind``): each shard mapped as by
    :class:`MapOnly` (fn's ``(keys, values)`` checked as a keyed job's), every row then moved to the reducer of its
    key and kept there as a ``KeyedSharded``.  All rows are kept: keys repeat."""

    fn: Callable[..., Any]
    max_bytes: int | None = None
    """The bytes of keys and values one reducer may receive; None: a quarter of its host's available memory."""
    phase: ClassVar[str] = "shuffle"
    refused: ClassVar[Mapping[str, str]] = {"speculate": NO_SPECULATION}

    def __repr__(self) -> str:
        return f"map({callable_name(self.fn)}, by_key=True)"

    @property
    def mapper(self) -> MapOnly:
        """What maps each shard: fn's rows, checked as ``(keys, values)``."""
        return MapOnly(self.fn, "fn", by_key=True)

    @property
    def identity(self) -> Hashable:
        return ("map-by-key", self.fn, self.max_bytes)

    def sources(self, x: Any) -> tuple[Sources, Any]:
        return keyed_sources(x)  # arrays of strings too; string keys decode as the input's strings do

    def plan(self, shards: Plan, call: Call) -> KeyedPlan:
        return keyed_plan(shards, call.srcs, call.cluster, call.settings)

    def variant(self, plan: KeyedPlan, call: Call) -> Hashable | None:
        if not named_per_run([*(s.device for s in plan.plan.shards), *plan.reducers]):
            return None  # stored on GPUs: named in the graph, a program for each run (Builder.store)
        return ("streamed", call.settings.batch_rows) if streamed(call.srcs) is not None else ()

    def build(self, builder: Builder, plan: KeyedPlan, call: Call) -> Program:
        """Map each shard, split its rows by key (hash or range) into one part per reducer, check each reducer's budget,
        and keep on reducer r its parts of every shard, in shard order (a range partition's: sorted by key, stably)."""
        outputs, first = self.mapper.map_shards(builder, plan.plan, call)
        shards = [s for s in plan.plan.shards if s.index in outputs]
        parts = (
            split_all([(s.device, outputs[s.index]) for s in shards], plan.reducers, plan.partitioner, scope="split")
            if shards
            else []
        )
        counts = []
        for shard, shard_parts in zip(shards, parts, strict=True):
            with tf.device(shard.device), tf.name_scope("split"):
                counts.append([(tf.size(k, tf.int64), nbytes(k, v)) for k, v in shard_parts])
        kept = []
        for r, device in enumerate(plan.reducers):
            received = []
            if parts:  # nothing travels before its reducer's budget holds (each part is sliced from the check's 0)
                start = check_budget(r, device, [c[r][0] for c in counts], [c[r][1] for c in counts], self.max_bytes, _TOO_BIG)
                for shard, shard_parts in zip(shards, parts, strict=True):
                    with tf.device(shard.device), tf.name_scope(f"send{r}"):
                        received.append(tf.nest.map_structure(lambda t, at=start: t[at:], shard_parts[r]))
            with tf.device(device), tf.name_scope(f"reducer{r}"):
                received = received or [tf.nest.map_structure(lambda t: tf.zeros([0, *t.shape[1:]], t.dtype), first[1])]
                keys, values = (
                    received[0] if len(received) == 1 else tf.nest.map_structure(lambda *ts: tf.concat(ts, 0), *received)
                )
                if plan.partitioner == "range":
                    keys, values = in_key_order(keys, values)
                kept.append((keys, values))
        first_keys, first_values = first[1]
        specs = tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape[1:], t.dtype), first_values)
        built = KeyedBuilt(first_keys.dtype, specs, resident=True)
        return builder.program(keep_fetch(builder, plan.reducers, kept), plan.tasks, built)

    def finish(self, value: Any, program: Program | None, plan: KeyedPlan, call: Call) -> KeyedSharded:
        """The rows as a ``KeyedSharded``: shard r on reducer r."""
        assert program is not None  # never speculative
        built: KeyedBuilt = program.info
        return keep(call.cluster, plan, value, built, call.note if built.key_dtype == tf.string else None)

    def failure(self, error: JobError, plan: KeyedPlan) -> Exception | None:
        big = over_budget(error, _TOO_BIG, self.max_bytes)
        if big is not None:
            return ReducerMemoryError(
                f"{self!r}: reducer {big.part} ({big.device}) would receive {big.rows:,} rows ({big.size:,} bytes of keys and "
                f"values), more than its budget of {big.budget:,} bytes ({big.limit}); nothing was sent. Spread the keys over "
                "more reducers (reducers=N, up to the cluster's devices), or, if its host has the memory, raise max_bytes=; "
                "the rows of one key always go to one reducer"
            )
        return self.mapper.failure(error, plan.plan)
