"""The map side of keyed kinds: map_fn per batch → checked (keys, values) → a partial per batch, folded per shard.

Keyed (combiner) and group jobs share it; they differ only in their :class:`MapSide`: what a batch's
(keys, values) become (a per-key partial, the rows as they are, or a group recipe's pre-combined rows),
and how partials fold.  Shards are mapped at once when small, else batch by batch (``batch_rows``)
inside one ``tf.data`` fold; streamed file sources always fold their batches.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import tensorflow as tf

from ..._base.device import Device
from ..._base.errors import JobError, MapFunctionError
from ..._base.plan import Plan, Shard
from ..._base.task import Task
from ..._engine.call import Call
from ..._engine.program import Builder
from ..._io.keyed_input import keyed_sources
from ..._io.source import DATA_OPTIONS, Batches, Sources, Streamed, streamed
from ..._io.variables import named_per_run
from ..._native.loader import has
from ..._ops.mapfn import call_map, callable_name, check_same_outputs, describe, restamp, where
from ..._ops.per_key import buckets
from ..._ops.splitters import choose, key_order, ranges_of, sample
from ..map_job import MapJob
from .plan import KeyedPlan, keyed_plan

SHUFFLE_KEY_DTYPES = (tf.int32, tf.int64, tf.string)
"""The dtypes a key may have: int32, int64, or string (bytes; unicode is encoded as UTF-8)."""

MISMATCH = "tfmapreduce: keys and values of different lengths"
"""The message of the in-graph check that keys and values have as many rows (see :func:`emit`)."""

NO_SPECULATION = (
    "speculate=True applies to whole-input jobs only: a keyed job's shards shuffle to the reducers in one "
    "distributed run, so no shard can be backed up alone; drop speculate= or use a job without by_key=True"
)
"""Why a keyed kind (combiner or group) refuses ``speculate=True``."""


@attrs.define(eq=False, repr=False)
class ByKey(MapJob[KeyedPlan]):
    """The hooks the keyed kinds share (see ``_engine.kind.Kind``): keyed inputs, planned with reducers, kept unless resident."""

    phase: ClassVar[str] = "reduce"
    refused: ClassVar[Mapping[str, str]] = {"speculate": NO_SPECULATION}

    def sources(self, x: Any) -> tuple[Sources, Any]:
        return keyed_sources(x)

    def plan(self, shards: Plan, call: Call) -> KeyedPlan:
        return keyed_plan(shards, call.srcs, call.cluster, call.settings)

    def shape_of(self, plan: KeyedPlan) -> Hashable:
        """Each shard's place and batches (none, one, or how many ``batch_rows`` it folds): all that its graph reads of
        the shards' rows (``fold_shard``), so keyed runs over fresh filter outputs of one placement share a program."""
        shards = tuple((s.index, s.device, batches(s.rows, plan.batch_rows)) for s in plan.plan.shards)
        return (shards, plan.reducers, plan.batch_rows, plan.partitioner)

    def variant(self, plan: KeyedPlan, call: Call) -> Hashable | None:
        if call.resident and not named_per_run(plan.reducers):
            return None  # stored on GPUs: named in the graph, a program for each run (Builder.store)
        return (call.resident,)


Part = tuple[tf.Tensor, Any]
"""A batch's, shard's or task's partial: (keys, a structure with one row per key)."""


@attrs.frozen(eq=False)
class MapSide:
    """What a keyed kind makes of each batch's (keys, values), and how those partials fold into one."""

    combine: Callable[[tf.Tensor, Any], Part]
    """One batch's checked (keys, values) → its partial."""
    merge: Callable[[Sequence[Part]], Part]
    """Partials → one partial; associative."""
    refold: Callable[[tf.Tensor, Any], Part] | None = None
    """Partials concatenated → one partial (``merge`` of them all at once), where a shard's batch partials may be
    collected in TensorArrays and refolded once (one pass instead of a merge per batch); None: merged pairwise."""
    collect: bool = False
    """True where partials are rows that must all be kept anyway (a group job's): streamed batches are collected too;
    False: only an in-memory shard's, whose partials are bounded by its rows, and a stream's merge as they come."""


@attrs.frozen(eq=False)
class MappedShards:
    """Every shard of a keyed run mapped on its device: the partials of each task, and the first shard's (for messages)."""

    per_task: dict[Task, list[Part]]
    device: dict[Task, str]
    """Each task's first shard device: where its partials are merged and split into buckets."""
    first: tuple[Shard, Part]


def map_shards(map_fn: Any, side: MapSide, builder: Builder, plan: KeyedPlan, call: Call) -> MappedShards:
    """Map and fold every non-empty shard on its device (a 0-row input maps its one empty shard); same outputs checked."""
    per_task: dict[Task, list[Part]] = {}
    device: dict[Task, str] = {}
    first: tuple[Shard, Part] | None = None
    stream = streamed(call.srcs)
    bcast = builder.broadcast
    for shard in [s for s in plan.plan.shards if s.rows > 0] or [plan.plan.shards[0]]:
        at = where(shard)
        with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
            if stream is not None:  # files: read and folded batch by batch on this task
                part = fold_pieces(map_fn, side, stream, builder.batches(stream, shard, plan.batch_rows), bcast, at)
            else:
                tensors = builder.inputs(shard)
                part = fold_shard(map_fn, side, tensors, bcast, shard.rows, plan.batch_rows, at)
                builder.mapped(shard, part)
        if first is None:
            first = (shard, part)
        else:
            check_same_outputs(map_fn, first, shard, part)
        per_task.setdefault(shard.task, []).append(part)
        device.setdefault(shard.task, shard.device)
    assert first is not None
    return MappedShards(per_task, device, first)


def mismatch(map_fn: Any, error: JobError, shards: Sequence[Shard], *, argument: str = "map_fn") -> MapFunctionError | None:
    """The failed in-graph check of :func:`emit` as a MapFunctionError naming ``map_fn`` (as ``argument``) and the shard
    of ``shards`` (the failed run's); None for another error."""
    if MISMATCH in str(error) or MISMATCH in error.details:
        return MapFunctionError(
            f"{argument} {callable_name(map_fn)} returned keys and values of different lengths "
            f"({restamp(str(error).split(MISMATCH)[-1].strip(' ():'), shards)}); they must have one value row per key"
        )
    return None


def emit(
    map_fn: Any,
    output: Any,
    where: str,
    *,
    argument: str = "map_fn",
    otherwise: str = "use by_key=False for a whole-input reduction",
) -> Part:
    """Check a keyed map output: ``(keys, values)`` with 1-D int/string keys and values of as many rows.  Messages name
    ``map_fn`` as ``argument`` and end a wrong structure's with ``otherwise`` (what to do instead)."""
    name = callable_name(map_fn)
    map_fn_name = f"{argument} {name}"
    if not (isinstance(output, (tuple, list)) and len(output) == 2):
        raise MapFunctionError(
            f"{map_fn_name} of a by_key=True job must return a pair (keys, values): keys a 1-D tensor of m keys, values a tensor "
            f"(or structure of tensors) with m rows; on {where} it returned {describe(output)}. "
            f"Return e.g. (words, tf.ones_like(words, tf.int64)), or {otherwise}"
        )
    try:
        keys = tf.convert_to_tensor(output[0])
        values = tf.nest.map_structure(tf.convert_to_tensor, output[1])
    except (TypeError, ValueError) as e:
        raise MapFunctionError(
            f"{map_fn_name} must return (keys, values) of tensors; on {where} it returned {output!r} ({e})"
        ) from None
    if keys.dtype not in SHUFFLE_KEY_DTYPES:
        raise MapFunctionError(
            f"{map_fn_name} returned keys of dtype {keys.dtype.name} on {where}; keys must be int32, int64 or string "
            "(bytes or unicode): float, bool and complex keys have no exact equality to group by. "
            "Cast them, e.g. tf.cast(keys, tf.int64) or tf.strings.as_string(keys)"
        )
    if keys.shape.rank != 1:
        raise MapFunctionError(
            f"{map_fn_name} returned keys of shape {keys.shape} on {where}; keys must be a 1-D tensor (one key per value row). "
            "Flatten them, e.g. tf.reshape(keys, [-1]), with the values reshaped to match"
        )
    checks = []
    for leaf in tf.nest.flatten(values):
        if leaf.shape.rank == 0:
            raise MapFunctionError(
                f"{map_fn_name} returned a scalar value on {where}; every value must have one row per key (leading dimension m = len(keys)), "
                "e.g. tf.ones_like(keys, tf.int64) for counts"
            )
        m, rows = keys.shape[0], leaf.shape[0]
        if m is not None and rows is not None and m != rows:
            raise MapFunctionError(
                f"{map_fn_name} returned {m} keys but values with {rows} rows (shape {leaf.shape}) on {where}; "
                "keys and values must have the same length: one value row per key"
            )
        if m is None or rows is None:
            checks.append(tf.debugging.assert_equal(tf.size(keys), tf.shape(leaf)[0], message=f"{MISMATCH} ({where})"))
    if checks:
        with tf.control_dependencies(checks):
            keys = tf.identity(keys)
    return keys, values


def _stepper(map_fn: Any, side: MapSide, bcast: tuple[Any, ...], where: str) -> Callable[..., Part]:
    """One batch's partial: map it, check the (keys, values), combine."""

    def step(*batch: tf.Tensor) -> Part:
        keys, values = emit(map_fn, call_map(map_fn, batch, bcast, where), where)
        return side.combine(keys, values)

    return step


def _fold(partials: tf.data.Dataset, side: MapSide, collect: bool) -> Part:
    """Fold a dataset of partials into one: collected and refolded once (``collect`` and ``side.refold``), or merged as
    it goes."""
    partials = partials.with_options(DATA_OPTIONS)
    specs = tf.nest.flatten(partials.element_spec)
    if collect and side.refold is not None:
        arrays = tuple(
            tf.TensorArray(s.dtype, size=0, dynamic_size=True, infer_shape=False, element_shape=[None, *s.shape[1:]])
            for s in specs
        )

        def add(state: tuple[Any, tf.Tensor], part: Part) -> tuple[Any, tf.Tensor]:
            collected, i = state
            return tuple(a.write(i, leaf) for a, leaf in zip(collected, tf.nest.flatten(part), strict=True)), i + 1

        collected, _ = partials.reduce((arrays, tf.constant(0)), add)
        keys, rows = tf.nest.pack_sequence_as(partials.element_spec, [a.concat() for a in collected])
        return side.refold(keys, rows)
    initial = tf.nest.map_structure(lambda s: tf.zeros([0, *(d or 0 for d in s.shape[1:])], s.dtype), partials.element_spec)
    folded: Part = partials.reduce(initial, lambda state, part: side.merge([state, part]))
    return folded


def fold_pieces(map_fn: Any, side: MapSide, src: Streamed, pieces: Sequence[Batches], bcast: tuple[Any, ...], where: str) -> Part:
    """A streamed shard's partial: each piece's batches mapped and folded on the shard's task."""
    step = _stepper(map_fn, side, bcast, where)
    if not pieces:  # nothing to read here: the partial of no rows
        return step(*src.empty_batch())
    parts = []
    for j, piece in enumerate(pieces):
        with tf.name_scope(f"piece{j}"):  # named as a whole-input job names them: a failed piece's error names its file
            parts.append(_fold(piece.dataset.map(lambda *b, piece=piece: piece.counted(b, step(*b))), side, side.collect))
    return parts[0] if len(parts) == 1 else side.merge(parts)


def batches(rows: int, batch_rows: int) -> int:
    """The batches :func:`fold_shard` folds ``rows`` rows in: 0 for none, 1 for rows mapped at once.

    Example:
        >>> [batches(n, 4) for n in (0, 3, 4, 5, 9)]
        [0, 1, 1, 2, 3]
    """
    return 0 if rows == 0 else 1 if rows <= batch_rows else math.ceil(rows / batch_rows)


def fold_shard(
    map_fn: Any, side: MapSide, tensors: list[tf.Tensor], bcast: tuple[Any, ...], rows: int, batch_rows: int, where: str
) -> Part:
    """One shard's partial: its rows mapped and combined at once, or batch by batch folded with ``Dataset.reduce``."""
    step = _stepper(map_fn, side, bcast, where)
    if rows <= batch_rows:
        return step(*tensors)

    def sliced(i: tf.Tensor) -> Part:
        start = i * batch_rows
        return step(*(t[start : start + batch_rows] for t in tensors))

    return _fold(tf.data.Dataset.range(batches(rows, batch_rows)).map(sliced), side, collect=True)


PARTITIONED = (tf.int32, tf.int64, tf.float32, tf.float64)
"""The value dtypes the native ``TmrPartition`` splits (one 1-D column beside integer keys)."""


def split(keys: tf.Tensor, rows: Any, reducers: int, native: Any | None = None, bucket: tf.Tensor | None = None) -> list[Part]:
    """(keys, rows) split into one part per reducer by the stable hash of each key, order kept: ``tf.dynamic_partition``,
    or for integer keys and one numeric column, the native ``TmrPartition`` (where ``native`` is given) in one pass.
    ``bucket``: each key's reducer, given (a range partition's); no hash then."""
    if reducers == 1:
        return [(keys, rows)]
    leaves = tf.nest.flatten(rows)
    one = len(leaves) == 1 and leaves[0].dtype in PARTITIONED and leaves[0].shape.rank == 1
    if bucket is None and has(native, "tmr_partition") and one and keys.dtype in (tf.int32, tf.int64):
        key_parts, value_parts = native.tmr_partition(keys, leaves[0], reducers=reducers)
        return [(k, tf.nest.pack_sequence_as(rows, [v])) for k, v in zip(key_parts, value_parts, strict=True)]
    if bucket is None:
        bucket = buckets(keys, reducers)
    split_keys = tf.dynamic_partition(keys, bucket, reducers)
    parts = [tf.dynamic_partition(leaf, bucket, reducers) for leaf in leaves]
    return [(split_keys[r], tf.nest.pack_sequence_as(rows, [p[r] for p in parts])) for r in range(reducers)]


def split_all(
    merged: Sequence[tuple[str, Part]], reducers: Sequence[str], partitioner: str, native: Any | None = None, *, scope: str
) -> list[list[Part]]:
    """Each task's merged partial (``(its device, partial)``, in task order) split into one part per reducer, under the
    name scope ``scope``: by the stable hash of each key (:func:`split`), or with ``partitioner="range"`` by key range.

    A range partition (see ``_splitters``): each task samples its partial's keys, the CPU of the first reducer's task
    chooses R − 1 splitters from every sample, and each task sends a key to ``searchsorted(splitters, key, "right")``.
    One set of splitters for every task: a key's rows all go to one reducer, and reducer r's keys are below r + 1's.
    """
    ranges = len(reducers)
    splitters = None
    if partitioner == "range" and ranges > 1:
        samples = []
        for i, (device, (keys, _)) in enumerate(merged):
            with tf.device(device), tf.name_scope(f"sample{i}"):
                samples.append(sample(keys, i, ranges))
        with tf.device(f"{Device.parse(reducers[0]).task}/device:CPU:0"), tf.name_scope("splitters"):
            splitters = choose(samples, ranges, native)
    parts = []
    for device, (keys, rows) in merged:
        with tf.device(device), tf.name_scope(scope):
            bucket = None if splitters is None else ranges_of(keys, splitters, native)
            parts.append(split(keys, rows, ranges, native, bucket))
    return parts


def in_key_order(keys: tf.Tensor, values: Any, native: Any | None = None) -> Part:
    """A reducer's (keys, values) sorted by key (strings in byte order): what a reducer of a range partition keeps."""
    order = key_order(keys, native)
    return tf.gather(keys, order), tf.nest.map_structure(lambda t: tf.gather(t, order), values)
