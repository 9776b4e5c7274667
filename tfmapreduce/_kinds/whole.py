"""The whole-input kind of job: each shard's map and partial on its device, merged on each task, then across tasks."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

import attrs
import tensorflow as tf

from .._base.errors import JobError, MapFunctionError
from .._base.plan import Plan, Shard
from .._base.task import Task
from .._engine.call import Call
from .._engine.program import Builder, Program
from .._io.source import Sources, sources, streamed
from .._ops.mapfn import check_same_outputs, describe, first_line, map_shard
from .._ops.merge import merge_tree
from .map_job import MapJob
from .stream import compile_fold

_NO_PARTITIONER = (
    "partitioner={value!r} applies to keyed jobs only: a whole-input job has no keys to partition and returns one "
    "value; drop partitioner=, or make the job keyed with MapReduce(map_fn, reduce_fn, by_key=True)"
)
_NO_REDUCERS = "reducers= apply to keyed jobs only; create the job with MapReduce(map_fn, reduce_fn, by_key=True)"


@attrs.define(eq=False, repr=False)
class WholeInput(MapJob[Plan]):
    """A whole-input job as the run driver sees it (see ``_engine.kind.Kind``): one combined result per run."""

    phase: ClassVar[str] = "combine"
    refused: ClassVar[Mapping[str, str]] = {"partitioner": _NO_PARTITIONER, "reducers": _NO_REDUCERS}

    @property
    def identity(self) -> Hashable:
        return (self.map_fn, self.combiner, False)

    def sources(self, x: Any) -> tuple[Sources, Any]:
        return sources(x), None

    def plan(self, shards: Plan, call: Call) -> Plan:
        return shards

    def variant(self, plan: Plan, call: Call) -> Hashable:
        return ("streamed", call.settings.batch_rows) if streamed(call.srcs) is not None else ()

    def build(self, builder: Builder, plan: Plan, call: Call) -> Program:
        stream = streamed(call.srcs)
        if stream is not None:  # files: read and folded batch by batch on their tasks
            fetch, tasks = compile_fold(
                self.map_fn,
                self.combiner,
                plan,
                stream,
                builder.broadcast,
                call.cluster,
                call.settings.batch_rows,
                builder.batches,
            )
            return builder.program(fetch, tasks)
        partials: dict[Task, list[Any]] = {}
        devices: dict[Task, str] = {}
        first: tuple[Shard, Any] | None = None
        # Empty shards contribute nothing; a 0-row input still maps its one empty shard.
        for shard in [s for s in plan.shards if s.rows > 0] or [plan.shards[0]]:
            with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
                output = map_shard(self.map_fn, shard, builder.inputs(shard), builder.broadcast)
                if first is None:
                    first = (shard, output)
                else:
                    check_same_outputs(self.map_fn, first, shard, output)
                partial = self.combiner.partial(output, tf.constant(shard.rows, tf.int64, name="rows"))
                builder.mapped(shard, partial)
                partials.setdefault(shard.task, []).append(partial)
                devices.setdefault(shard.task, shard.device)
        master = f"{call.cluster.master}/device:CPU:0"
        fetch = builder.fetched(self.combine_partials(partials, devices, master, first), master)
        return builder.program(fetch, tuple(partials))

    def combine_partials(
        self, partials: dict[Task, list[Any]], devices: dict[Task, str], master: str, first: tuple[Shard, Any] | None
    ) -> Any:
        """In the graph being built: merge the partials on each task (on ``devices[task]``), then across tasks and
        finalize on ``master``; the result tensor(s).

        Raises:
            MapFunctionError: the combiner cannot merge the partials (``first``: a shard and its map output, named).
        """
        try:
            per_task = []
            for task, parts in partials.items():
                with tf.device(devices[task]), tf.name_scope("combine_task"):
                    per_task.append(merge_tree(parts, self.combiner.merge))
            with tf.device(master), tf.name_scope("combine"):
                return self.combiner.finalize(merge_tree(per_task, self.combiner.merge))
        except Exception as e:
            gave = f"shard {first[0].index} gave {describe(first[1])}" if first else "no shard mapped"
            raise MapFunctionError(
                f"{self!r}: the combiner {self.combiner.name} cannot merge the shards' map outputs "
                f"({type(e).__name__}: {first_line(e)}); {gave}: "
                "map_fn must return values the combiner can merge, e.g. the same shape on every shard for tf.add"
            ) from e

    def finish(self, value: Any, program: Program | None, plan: Plan, call: Call) -> Any:
        return value

    def failure(self, error: JobError, plan: Plan) -> Exception | None:
        return None
