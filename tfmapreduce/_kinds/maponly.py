"""Map-only jobs: :func:`map` and :func:`filter` keep each shard's output rows on its device, as resident ``Sharded`` data.

The graph of one map-only run (one distributed execution)::

    shard i (on its device)   fn(its rows) → any number of output rows (a filter or an explode changes the count);
                              files: fn per batch of ``batch_rows`` rows, the batches' outputs gathered in order
                              → stored in resource variables on that device: no output row crosses the network
    client                    fetches each shard's output row count: the plan of the result

Output shard ``i`` lives where input shard ``i`` was mapped, so the result is read in place by any later job.

``map(fn, x, by_key=True)`` (:class:`MapByKey`) maps the same way, then moves each row to the reducer of its key, as a
keyed job's shuffle does (one distributed run)::

    shard i (on its device)   fn(its rows) → (keys, values), checked as a keyed job's map output; split into R parts
                              by the stable key hash (``_keyed_map.split_all``; ``partitioner="range"``: key ranges)
                              → each part's rows and bytes counted
    reducer r (its task's CPU) part r's rows and bytes summed over the shards and checked against the reducer's budget
                              (``_budget``); only then does any part travel
    reducer r (its device)    part r of every shard, concatenated in shard order (a range partition: sorted by key,
                              stably) → kept in resource variables as a ``KeyedSharded`` (``_keyed_sharded.keep_fetch``)
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf

from .._base.device import Device
from .._base.errors import JobError, MapFunctionError, ShardLostError
from .._base.plan import Plan, Shard, make_plan
from .._engine.call import Call
from .._engine.kind import KindBase
from .._engine.program import Builder, Program
from .._io.keyed_input import keyed_sources
from .._io.resident import Sharded, ShardedTuple
from .._io.source import Batches, Sources, streamed
from .._io.variables import named_per_run
from .._ops.mapfn import call_map, callable_name, describe, restamp, where
from .shuffle.map_side import emit, mismatch

NO_SPECULATION = (
    "speculate=True does not apply to map and filter: each output stays on the device that mapped it, "
    "so a backup copy would keep a second one; drop speculate="
)

_BY_KEY = "(or pass by_key=True to tmr.map, with fn returning (keys, values), to move each row to the reducer of its key)"
_NO_REDUCERS = (
    f"reducers= applies to keyed jobs only; map and filter keep each shard's rows where it ran: drop reducers= {_BY_KEY}"
)
_NO_PARTITIONER = (
    "partitioner={value!r} applies to keyed jobs only; map and filter keep each shard's rows where it ran, in row order: "
    "drop partitioner=, or sort the result with tmr.sort or tmr.sort_by_key"
)
_ROWS = "tfmapreduce-map: output tensors of different row counts"
_MASK = "tfmapreduce-map: a mask of another length than its rows"
_END = " ~~"
_TOO_BIG = "tfmapreduce-map: reducer partition too large"


@attrs.frozen
class MapBuilt:
    """What a map-only run's finish needs of its build: the outputs' row specs (output leaf ``j`` is stored in the
    container ``{the run's name}_o{j}``, shard ``i`` in it as ``shard{i}``)."""

    specs: Any
    """The structure of ``tf.TensorSpec`` (one row each) of the outputs."""


def _not_rebuildable(shard: Shard) -> tf.Tensor:
    raise ShardLostError(
        f"shard {shard.index} of a map or filter output is lost with its worker and cannot be rebuilt; run tmr.map "
        "(or tmr.filter) again",
        shards=(shard.index,),
    )


@attrs.define(eq=False, repr=False)
class MapOnly(KindBase[Plan]):
    """A map-only job as the run driver sees it (see ``_engine.kind.Kind``): each shard's output rows kept where it ran."""

    fn: Callable[..., Any]
    argument: str
    """``"fn"`` (map: fn's rows) or ``"pred"`` (filter: the rows where pred is true); names the function in messages."""
    by_key: bool = False
    """Whether fn returns ``(keys, values)`` rows, checked as a keyed job's (:class:`MapByKey` maps with it)."""
    phase: ClassVar[str] = "keep"
    refused: ClassVar[Mapping[str, str]] = {"speculate": NO_SPECULATION, "reducers": _NO_REDUCERS, "partitioner": _NO_PARTITIONER}

    def __repr__(self) -> str:
        return f"{'filter' if self.argument == 'pred' else 'map'}({callable_name(self.fn)})"

    @property
    def identity(self) -> Hashable:
        return ("map-only", self.fn, self.argument)

    def sources(self, x: Any) -> tuple[Sources, Any]:
        return keyed_sources(x)  # arrays of strings too

    def plan(self, shards: Plan, call: Call) -> Plan:
        return shards

    def shape_of(self, plan: Plan) -> Hashable:
        """Each shard's place and whether it has rows: all its graph reads of the shards' rows, so a map or filter of
        fresh resident data of one placement reuses its program."""
        return tuple((s.index, s.device, s.rows > 0) for s in plan.shards)

    def variant(self, plan: Plan, call: Call) -> Hashable | None:
        if not named_per_run([s.device for s in plan.shards]):
            return None  # stored on GPUs: named in the graph, a program for each run (Builder.store)
        return ("streamed", call.settings.batch_rows) if streamed(call.srcs) is not None else ()

    def rows_of(self, tensors: Sequence[tf.Tensor], bcast: tuple[Any, ...], at: str) -> Any:
        """The output rows of one shard or batch: fn's (``by_key``: its checked ``(keys, values)``), or the rows of
        ``tensors`` where pred is true."""
        output = call_map(self.fn, tensors, bcast, at, argument=self.argument)
        if self.by_key:
            keys, values = emit(self.fn, output, at, argument="fn", otherwise="drop by_key=True to keep fn's rows where they ran")
            return keys, self._dense(values, at)
        if self.argument == "pred":
            mask = self._mask(output, tf.nest.flatten(tensors[0])[0], at)
            kept = [tf.nest.map_structure(lambda t: tf.boolean_mask(t, mask), rows) for rows in tensors]  # (a dict: each)
            return kept[0] if len(kept) == 1 else tuple(kept)
        return self._dense(output, at)

    def _mask(self, output: Any, rows: tf.Tensor, at: str) -> tf.Tensor:
        name = callable_name(self.fn)
        try:
            mask = tf.convert_to_tensor(output)
        except (TypeError, ValueError):
            mask = None
        if mask is None or mask.dtype != tf.bool or mask.shape.rank != 1:
            hint = (
                "; == and != on tensors give one Python bool in a graph: use tf.equal(a, b)" if isinstance(output, bool) else ""
            )
            raise MapFunctionError(
                f"pred {name} must return a 1-D boolean tensor with one element per row (True keeps the row); on {at} it "
                f"returned {describe(output)}; compare to get one, e.g. lambda x: x > 0 (or tf.reduce_all(x > 0, axis=1) for rows of vectors){hint}"
            )
        n, m = rows.shape[0], mask.shape[0]
        if n is not None and m is not None:
            if n != m:
                raise MapFunctionError(f"pred {name} returned {m} booleans for {n} rows on {at}; it must return one per row")
            return mask
        check = tf.debugging.assert_equal(tf.size(mask), tf.shape(rows)[0], message=f"{_MASK}: pred {name} on {at}{_END}")
        with tf.control_dependencies([check]):
            return tf.identity(mask)

    def _dense(self, output: Any, at: str) -> Any:
        """fn's output as dense tensors with their rows on axis 0 and a static row shape, of one row count."""
        name = callable_name(self.fn)
        for leaf in tf.nest.flatten(output):
            if isinstance(leaf, tf.RaggedTensor | tf.SparseTensor):
                raise MapFunctionError(
                    f"fn {name} returned a {type(leaf).__name__} on {at}; outputs must be dense tensors with the rows on axis 0: "
                    "return its .flat_values (an explode into rows) or .to_tensor() (padded rows)"
                )
        try:
            output = tf.nest.map_structure(tf.convert_to_tensor, output)
        except (TypeError, ValueError) as e:
            raise MapFunctionError(
                f"fn {name} must return a tensor or a structure of tensors with the rows on axis 0; on {at} it returned "
                f"{output!r} ({e})"
            ) from None
        leaves = tf.nest.flatten(output)
        if not leaves:
            raise MapFunctionError(f"fn {name} returned no tensor on {at} ({output!r}); return the output rows as a tensor")
        for leaf in leaves:
            if leaf.shape.rank is None or leaf.shape.rank == 0 or not leaf.shape[1:].is_fully_defined():
                raise MapFunctionError(
                    f"fn {name} returned a tensor of shape {leaf.shape} on {at}; each output must have its rows on axis 0 "
                    "and a known row shape (every axis after the first): reshape it, e.g. tf.reshape(t, [-1, 3]) or "
                    "tf.reshape(t, [-1]) for one value per row"
                )
        counts = [leaf.shape[0] for leaf in leaves]
        if None not in counts and len(set(counts)) > 1:
            raise MapFunctionError(
                f"fn {name} returned tensors of different row counts on {at}: {describe(output)}; each output row is one "
                "row of every tensor, so they must have the same length"
            )
        if len(leaves) > 1 and None in counts:
            checks = [
                tf.debugging.assert_equal(tf.shape(leaf)[0], tf.shape(leaves[0])[0], message=f"{_ROWS}: fn {name} on {at}{_END}")
                for leaf in leaves[1:]
            ]
            with tf.control_dependencies(checks):
                output = tf.nest.map_structure(tf.identity, output)
        return output

    def _check_same(self, first: tuple[str, Any], at: str, output: Any) -> None:
        """MapFunctionError unless ``output`` has the structure, dtypes and row shapes of ``first``'s."""

        def spec(t: Any) -> tuple[tf.DType, tuple[int | None, ...]]:
            return (t.dtype, tuple(t.shape[1:]))

        try:
            tf.nest.assert_same_structure(first[1], output)
            same = all(spec(a) == spec(b) for a, b in zip(tf.nest.flatten(first[1]), tf.nest.flatten(output), strict=True))
        except (TypeError, ValueError):
            same = False
        if not same:
            raise MapFunctionError(
                f"{self.argument} {callable_name(self.fn)} returned {describe(first[1])} on {first[0]} but "
                f"{describe(output)} on {at}; the output rows of every shard and batch must share one structure, dtype and "
                "row shape (the rows on axis 0 may differ): cast or reshape them to one"
            )

    def _streamed(self, pieces: Sequence[Batches], shard: Shard, bcast: tuple[Any, ...]) -> list[tuple[str, Any]]:
        """A streamed shard's outputs, one per piece: each batch mapped on the shard's task, the outputs gathered in order."""
        at = where(shard)
        outputs = []
        for j, piece in enumerate(pieces):
            with tf.name_scope(f"piece{j}"):
                batches = piece.dataset.filter(lambda *b: tf.shape(tf.nest.flatten(b)[0])[0] > 0)
                mapped = batches.map(  # a batch: the function's arguments (a tuple element's tensors, or a dict)
                    lambda *b, piece=piece: piece.counted(
                        b, (tf.shape(tf.nest.flatten(b)[0], out_type=tf.int64)[0], self.rows_of(list(b), bcast, at))
                    ),
                    num_parallel_calls=2,
                )
                specs = mapped.element_spec[1]
                arrays = tf.nest.map_structure(
                    lambda s: tf.TensorArray(s.dtype, size=0, dynamic_size=True, infer_shape=False, element_shape=s.shape),
                    specs,
                )

                def step(state: Any, element: Any) -> Any:
                    (i, read, acc), (rows, out) = state, element
                    return i + 1, read + rows, tf.nest.map_structure(lambda a, t: a.write(i, t), acc, out)

                _, read, acc = mapped.reduce((tf.constant(0), tf.constant(0, tf.int64), arrays), step)
                output = tf.nest.map_structure(lambda a: a.concat(), acc)
                if piece.rows is not None:  # the rows the file's size promised when the run started
                    check = tf.debugging.assert_equal(read, tf.constant(piece.rows, tf.int64), message=piece.mismatch)
                    with tf.control_dependencies([check]):
                        output = tf.nest.map_structure(tf.identity, output)
                outputs.append((f"{at}, piece {j}", output))
        return outputs

    def build(self, builder: Builder, plan: Plan, call: Call) -> Program:
        """Map each shard (files: batch by batch) and store its output rows in variables on its device."""
        outputs, first = self.map_shards(builder, plan, call)
        specs = tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape[1:], t.dtype), first[1])
        built = MapBuilt(specs)
        counts: dict[int, tf.Tensor] = {}
        for shard in plan.shards:
            if shard.index not in outputs:
                continue
            with tf.device(shard.device), tf.name_scope(f"keep{shard.index}"):
                leaves = tf.nest.flatten(outputs[shard.index])
                stored = [builder.store(shard.device, f"_o{j}", shard.index, leaf) for j, leaf in enumerate(leaves)]
                with tf.control_dependencies(stored):
                    counts[shard.index] = tf.shape(leaves[0], out_type=tf.int64)[0]
        if not counts:
            with tf.device(plan.shards[0].device):
                counts[plan.shards[0].index] = tf.constant(0, tf.int64)
        return builder.program(counts, plan.tasks, built)

    def map_shards(self, builder: Builder, plan: Plan, call: Call) -> tuple[dict[int, Any], tuple[str, Any]]:
        """Each shard's output rows on its device (files: batch by batch, gathered in order), by shard index (shards
        without output rows left out), checked to share one structure; and where the first output was made and it (with
        no rows at all: fn's output of an empty batch, made on the first shard's device)."""
        stream = streamed(call.srcs)
        bcast = builder.broadcast
        outputs: dict[int, Any] = {}
        first: tuple[str, Any] | None = None
        for shard in plan.shards:
            with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
                if stream is not None:
                    pieces = self._streamed(builder.batches(stream, shard, call.settings.batch_rows), shard, bcast)
                elif shard.rows > 0:  # a shard without rows has no output rows
                    output = self.rows_of(builder.inputs(shard), bcast, where(shard))
                    builder.mapped(shard, output)
                    pieces = [(where(shard), output)]
                else:
                    pieces = []
                for at, output in pieces:
                    if first is None:
                        first = (at, output)
                    else:
                        self._check_same(first, at, output)
                if pieces:
                    parts = [p for _, p in pieces]
                    outputs[shard.index] = (
                        parts[0] if len(parts) == 1 else tf.nest.map_structure(lambda *ts: tf.concat(ts, 0), *parts)
                    )
        if first is None:  # no rows at all: the structure of fn's output for an empty batch, no row stored
            shard = plan.shards[0]
            with tf.device(shard.device), tf.name_scope("empty"):
                srcs = call.srcs
                empty = [tf.zeros((0, *s.shape[1:]), tf.as_dtype(s.dtype)) for s in srcs]
                first = (where(shard), self.rows_of(empty, bcast, where(shard)))
        return outputs, first

    def finish(self, value: Any, program: Program | None, plan: Plan, call: Call) -> Any:
        """The outputs as ``Sharded`` arrays (one, or fn's structure of them) on one plan: shard i where input shard i ran."""
        assert program is not None  # never speculative
        built: MapBuilt = program.info
        counts = [int(value.value.get(s.index, 0)) for s in plan.shards]
        available = [Device.parse(d) for d in call.cluster.devices]
        kept = make_plan(builtins.sum(counts), counts, [s.device for s in plan.shards], available)
        leaves = [
            Sharded(
                call.cluster,
                kept,
                np.dtype(spec.dtype.as_numpy_dtype),
                (kept.rows, *spec.shape),
                f"{value.name}_o{j}",
                (_not_rebuildable,) * len(counts),
                encoding=call.note if spec.dtype == tf.string else None,  # str where the input's strings were
            )
            for j, spec in enumerate(tf.nest.flatten(built.specs))
        ]
        if not tf.nest.is_nested(built.specs):
            return leaves[0]
        packed = tf.nest.pack_sequence_as(built.specs, leaves)
        return ShardedTuple(packed) if type(packed) is tuple else packed  # a tuple frees its arrays in a with block

    def failure(self, error: JobError, plan: Plan) -> Exception | None:
        if self.by_key:
            found = mismatch(self.fn, error, plan.shards, argument="fn")
            if found is not None:
                return found
        text = f"{error} {error.details}"
        for mark, what in (
            (_ROWS, "returned tensors of different row counts: each output row is one row of every tensor"),
            (_MASK, "returned a mask of another length than its rows: it must return one boolean per row"),
        ):
            if mark in text:
                said = restamp(text.split(mark + ": ", 1)[1].split(_END)[0], plan.shards)
                return MapFunctionError(f"{said} {what}")
        return None
