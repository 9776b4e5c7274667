"""The keyed kind of job: map to (key, value) pairs, combine per key, shuffle by key hash to reducer devices.

The graph of one keyed run (one distributed execution)::

    shard (on its device)      map_fn per batch of ``batch_rows`` rows → (keys, values)
                               → per-key partial of the batch, folded into the shard's partial
                                 (``tf.data`` batches folded with ``Dataset.reduce``)
    task  (its first device)   merge the partials of its shards by key
                               → bucket = stable hash(key) mod R; ``tf.dynamic_partition`` into R buckets
    reducer r (its device)     bucket r of every task, merged by key, finalized
                               → fetched to the client (sorted there), or kept in resource variables

Per-key combining and the hash are in ``_per_key``.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from ._combine import Combiner, SegmentForm
from ._errors import JobError, MapFunctionError
from ._keyed_input import keyed_sources
from ._keyed_plan import KeyedPlan, keyed_plan
from ._keyed_result import sorted_result
from ._keyed_sharded import Built, keep
from ._mapfn import call_map, callable_name, check_same_outputs, describe, first_line, where
from ._per_key import buckets, by_key, merge
from ._plan import Plan, Shard
from ._program import Builder, Call, MapJob, Program
from ._source import DATA_OPTIONS, Batches, Sources, Streamed, streamed
from ._task import Task

KEY_DTYPES = (tf.int32, tf.int64, tf.string)
"""The dtypes a key may have: int32, int64, or string (bytes; unicode is encoded as UTF-8)."""

_MISMATCH = "tfmapreduce: keys and values of different lengths"

NO_SPECULATION = (
    "speculate=True applies to whole-input jobs only: a keyed job's shards shuffle to the reducers in one "
    "distributed run, so no shard can be backed up alone; drop speculate= or use a job without by_key=True"
)


@attrs.define(eq=False, repr=False)
class Keyed(MapJob):
    """A keyed job as the run driver sees it (see ``_engine.Kind``): per-key results on the reducers."""

    speculation: str | None = NO_SPECULATION

    @property
    def identity(self) -> Hashable:
        return (self.map_fn, self.combiner, True)

    def sources(self, x: Any) -> tuple[Sources, Any]:
        return keyed_sources(x)

    def plan(self, shards: Plan, call: Call) -> KeyedPlan:
        return keyed_plan(shards, call.srcs, call.cluster, call.settings)

    def variant(self, plan: KeyedPlan, call: Call) -> Hashable | None:
        return None if call.resident else ()  # a resident result's variables are named in its graph: not kept

    def build(self, builder: Builder, plan: KeyedPlan, call: Call) -> Program:
        """Map and combine per shard (in batches), per task, hash-partition, merge per reducer."""
        form = self.combiner.per_key
        assert form is not None  # checked when the job was made (check_keyed_combiner)
        reducers = plan.reducers
        per_task: dict[Task, list[tuple[tf.Tensor, Any]]] = {}
        task_device: dict[Task, str] = {}
        first: tuple[Shard, tuple[tf.Tensor, Any]] | None = None
        stream = streamed(call.srcs)
        bcast = builder.broadcast
        for shard in [s for s in plan.plan.shards if s.rows > 0] or [plan.plan.shards[0]]:
            at = where(shard)
            with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
                if stream is not None:  # files: read and folded batch by batch on this task
                    part = _fold_pieces(self.map_fn, form, stream, stream.batches(shard, plan.batch_rows), bcast, at)
                else:
                    tensors = builder.inputs(shard)
                    part = _fold_shard(self.map_fn, form, tensors, bcast, shard.rows, plan.batch_rows, at)
                    builder.mapped(shard, part)
            if first is None:
                first = (shard, part)
            else:
                check_same_outputs(self.map_fn, first, shard, part)
            per_task.setdefault(shard.task, []).append(part)
            task_device.setdefault(shard.task, shard.device)
        assert first is not None
        try:
            outputs = _shuffle(per_task, task_device, reducers, form)
        except MapFunctionError:
            raise
        except Exception as e:
            raise MapFunctionError(
                f"{self!r}: the combiner {self.combiner.name} cannot merge the per-key partials "
                f"({type(e).__name__}: {first_line(e)}); shard {first[0].index} gave "
                f"{describe(first[1])}: check the combiner's per_key SegmentForm against map_fn's values"
            ) from e
        value_specs = tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape[1:], t.dtype), outputs[0][1])
        built = Built(first[1][0].dtype, value_specs, f"tfmapreduce_{secrets.token_hex(8)}" if call.resident else None)
        if built.name is None:
            return builder.program(outputs, plan.tasks, built)
        fetch = []
        for r, (device, (keys, values)) in enumerate(zip(reducers, outputs, strict=True)):
            with tf.device(device), tf.name_scope(f"keep{r}"):
                ops = [_assign(f"{built.name}_keys", r, keys)]
                ops += [_assign(f"{built.name}_v{j}", r, leaf) for j, leaf in enumerate(tf.nest.flatten(values))]
                with tf.control_dependencies(ops):
                    fetch.append(tf.size(keys))
        return builder.program(fetch, plan.tasks, built)

    def finish(self, value: Any, program: Program | None, plan: KeyedPlan, call: Call) -> Any:
        """A :class:`KeyedResult`, or a ``KeyedSharded`` for a resident run."""
        assert program is not None
        built: Built = program.info
        decode = bool(call.note) and built.key_dtype == tf.string
        if call.resident:
            return keep(call.cluster, plan, [int(n) for n in value], built, decode)
        keys = np.concatenate([np.asarray(k) for k, _ in value])
        per_key = tf.nest.map_structure(lambda *leaves: np.concatenate([np.asarray(v) for v in leaves]), *[v for _, v in value])
        return sorted_result(keys, per_key, decode=decode)

    def failure(self, error: JobError) -> Exception | None:
        if _MISMATCH in str(error) or _MISMATCH in error.details:
            return MapFunctionError(
                f"map_fn {callable_name(self.map_fn)} returned keys and values of different lengths "
                f"({str(error).split(_MISMATCH)[-1].strip(' ():')}); they must have one value row per key"
            )
        return None


def _shuffle(
    per_task: dict[Task, list[tuple[tf.Tensor, Any]]], task_device: dict[Task, str], reducers: Sequence[str], form: SegmentForm
) -> list[tuple[tf.Tensor, Any]]:
    """Each task's partials merged by key and split into one bucket per reducer; each reducer's buckets merged, finalized."""
    buckets_per_task = []
    for task, parts in per_task.items():
        with tf.device(task_device[task]), tf.name_scope("combine_task"):
            keys, partial = merge(parts, form)
            if len(reducers) == 1:
                buckets_per_task.append([(keys, partial)])
                continue
            bucket = buckets(keys, len(reducers))
            split_keys = tf.dynamic_partition(keys, bucket, len(reducers))
            split = [tf.dynamic_partition(leaf, bucket, len(reducers)) for leaf in tf.nest.flatten(partial)]
            buckets_per_task.append(
                [(split_keys[r], tf.nest.pack_sequence_as(partial, [s[r] for s in split])) for r in range(len(reducers))]
            )
    outputs = []
    for r, device in enumerate(reducers):
        with tf.device(device), tf.name_scope(f"reducer{r}"):
            keys, partial = merge([b[r] for b in buckets_per_task], form)
            values = tf.nest.map_structure(tf.identity, form.finalize(partial))
            outputs.append((tf.identity(keys), values))
    return outputs


def emit(map_fn: Any, output: Any, where: str) -> tuple[tf.Tensor, Any]:
    """Check a keyed map output: ``(keys, values)`` with 1-D int/string keys and values of as many rows."""
    name = callable_name(map_fn)
    if not (isinstance(output, (tuple, list)) and len(output) == 2):
        raise MapFunctionError(
            f"map_fn {name} of a by_key=True job must return a pair (keys, values): keys a 1-D tensor of m keys, values a tensor "
            f"(or structure of tensors) with m rows; on {where} it returned {describe(output)}. "
            "Return e.g. (words, tf.ones_like(words, tf.int64)), or use by_key=False for a whole-input reduction"
        )
    try:
        keys = tf.convert_to_tensor(output[0])
        values = tf.nest.map_structure(tf.convert_to_tensor, output[1])
    except (TypeError, ValueError) as e:
        raise MapFunctionError(
            f"map_fn {name} must return (keys, values) of tensors; on {where} it returned {output!r} ({e})"
        ) from None
    if keys.dtype not in KEY_DTYPES:
        raise MapFunctionError(
            f"map_fn {name} returned keys of dtype {keys.dtype.name} on {where}; keys must be int32, int64 or string "
            "(bytes or unicode): float, bool and complex keys have no exact equality to group by. "
            "Cast them, e.g. tf.cast(keys, tf.int64) or tf.strings.as_string(keys)"
        )
    if keys.shape.rank != 1:
        raise MapFunctionError(
            f"map_fn {name} returned keys of shape {keys.shape} on {where}; keys must be a 1-D tensor (one key per value row). "
            "Flatten them, e.g. tf.reshape(keys, [-1]), with the values reshaped to match"
        )
    checks = []
    for leaf in tf.nest.flatten(values):
        if leaf.shape.rank == 0:
            raise MapFunctionError(
                f"map_fn {name} returned a scalar value on {where}; every value must have one row per key (leading dimension m = len(keys)), "
                "e.g. tf.ones_like(keys, tf.int64) for counts"
            )
        m, rows = keys.shape[0], leaf.shape[0]
        if m is not None and rows is not None and m != rows:
            raise MapFunctionError(
                f"map_fn {name} returned {m} keys but values with {rows} rows (shape {leaf.shape}) on {where}; "
                "keys and values must have the same length: one value row per key"
            )
        if m is None or rows is None:
            checks.append(tf.debugging.assert_equal(tf.size(keys), tf.shape(leaf)[0], message=f"{_MISMATCH} ({where})"))
    if checks:
        with tf.control_dependencies(checks):
            keys = tf.identity(keys)
    return keys, values


def _assign(container: str, r: int, value: tf.Tensor) -> tf.Operation:
    handle = tf.raw_ops.VarHandleOp(dtype=value.dtype, shape=tf.TensorShape(None), container=container, shared_name=f"shard{r}")
    return tf.raw_ops.AssignVariableOp(resource=handle, value=value)


def _stepper(map_fn: Any, form: SegmentForm, bcast: tuple[Any, ...], where: str) -> Callable[..., tuple[tf.Tensor, Any]]:
    """One batch's per-key partial: map it, check the (keys, values), combine by key."""

    def step(*batch: tf.Tensor) -> tuple[tf.Tensor, Any]:
        keys, values = emit(map_fn, call_map(map_fn, batch, bcast, where), where)
        return by_key(keys, values, form.partial)

    return step


def _fold(partials: tf.data.Dataset, form: SegmentForm) -> tuple[tf.Tensor, Any]:
    """Fold a dataset of per-key partials into one, merging by key as it goes."""
    partials = partials.with_options(DATA_OPTIONS)
    initial = tf.nest.map_structure(lambda s: tf.zeros([0, *(d or 0 for d in s.shape[1:])], s.dtype), partials.element_spec)
    folded: tuple[Any, Any] = partials.reduce(initial, lambda state, part: merge([state, part], form))
    return folded


def _fold_pieces(
    map_fn: Any, form: SegmentForm, src: Streamed, pieces: Sequence[Batches], bcast: tuple[Any, ...], where: str
) -> tuple[tf.Tensor, Any]:
    """A streamed shard's per-key partial: each piece's batches mapped and folded on the shard's task."""
    step = _stepper(map_fn, form, bcast, where)
    if not pieces:  # nothing to read here: the partial of no rows
        return step(tf.zeros((0, *src.shape[1:]), tf.as_dtype(src.dtype)))
    parts = [_fold(piece.dataset.map(step), form) for piece in pieces]
    return parts[0] if len(parts) == 1 else merge(parts, form)


def _fold_shard(
    map_fn: Any, form: SegmentForm, tensors: list[tf.Tensor], bcast: tuple[Any, ...], rows: int, batch_rows: int, where: str
) -> tuple[tf.Tensor, Any]:
    """One shard's per-key partial: its rows mapped and combined at once, or batch by batch folded with ``Dataset.reduce``."""
    step = _stepper(map_fn, form, bcast, where)
    if rows <= batch_rows:
        return step(*tensors)
    batches = math.ceil(rows / batch_rows)

    def sliced(i: tf.Tensor) -> tuple[tf.Tensor, Any]:
        start = i * batch_rows
        return step(*(t[start : start + batch_rows] for t in tensors))

    return _fold(tf.data.Dataset.range(batches).map(sliced), form)


def check_keyed_combiner(combiner: Combiner, reduce_fn: Any) -> None:
    """A keyed job needs a combiner with a per-key form: MapFunctionError naming the alternatives otherwise."""
    if combiner.per_key is None:
        raise MapFunctionError(
            f"reduce_fn {combiner.name} has no per-key (segment) form, so it cannot combine the values of each key in a by_key=True job; "
            "use a combiner (tmr.combiners.sum, count, mean, min, max, moments), a pairwise function with a segment form "
            "(tf.add, tf.maximum, tf.minimum, tf.multiply), or a tmr.Combiner with per_key=tmr.combiners.SegmentForm(...)"
        )
