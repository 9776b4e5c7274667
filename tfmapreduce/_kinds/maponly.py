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
from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._base.device import Device
from .._base.errors import JobError, MapFunctionError, ReducerMemoryError, ShardLostError
from .._base.plan import Plan, Shard, make_plan
from .._engine import driver as _engine
from .._engine.program import Builder, Call, Program, Ready
from .._io.keyed_input import keyed_sources
from .._io.resident import Sharded, named_per_run
from .._io.source import Batches, Sources, streamed
from .._ops.budget import check_budget, over_budget
from .._ops.grouping import nbytes
from .._ops.mapfn import call_map, callable_name, describe, where
from .._ops.per_group import check_max_bytes
from .._options import Options, RunOptions
from .shuffle.map_side import emit, in_key_order, mismatch, split_all
from .shuffle.plan import KeyedPlan, keyed_plan
from .shuffle.sharded import Built as KeyedBuilt
from .shuffle.sharded import KeyedSharded, keep, keep_fetch

NO_SPECULATION = (
    "speculate=True does not apply to map and filter: each output stays on the device that mapped it, "
    "so a backup copy would keep a second one; drop speculate="
)

_ROWS = "tfmapreduce-map: output tensors of different row counts"
_MASK = "tfmapreduce-map: a mask of another length than its rows"
_END = " ~~"
_TOO_BIG = "tfmapreduce-map: reducer partition too large"


@attrs.frozen
class Built:
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
class MapOnly:
    """A map-only job as the run driver sees it (see ``_engine.Kind``): each shard's output rows kept where it ran."""

    fn: Callable[..., Any]
    argument: str
    """``"fn"`` (map: fn's rows) or ``"pred"`` (filter: the rows where pred is true); names the function in messages."""
    by_key: bool = False
    """Whether fn returns ``(keys, values)`` rows, checked as a keyed job's (:class:`MapByKey` maps with it)."""
    ready: dict[Hashable, Ready] = attrs.field(factory=dict)
    speculation: str | None = NO_SPECULATION
    phase: ClassVar[str] = "keep"

    def __repr__(self) -> str:
        return f"{'filter' if self.argument == 'pred' else 'map'}({callable_name(self.fn)})"

    @property
    def identity(self) -> Hashable:
        return ("map-only", self.fn, self.argument)

    def sources(self, x: Any) -> tuple[Sources, Any]:
        return keyed_sources(x)  # arrays of strings too

    def plan(self, shards: Plan, call: Call) -> Plan:
        return shards

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
        built = Built(specs)
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
        built: Built = program.info
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
            )
            for j, spec in enumerate(tf.nest.flatten(built.specs))
        ]
        return tf.nest.pack_sequence_as(built.specs, leaves) if tf.nest.is_nested(built.specs) else leaves[0]

    def failure(self, error: JobError) -> Exception | None:
        if self.by_key:
            found = mismatch(self.fn, error, argument="fn")
            if found is not None:
                return found
        text = f"{error} {error.details}"
        for mark, what in (
            (_ROWS, "returned tensors of different row counts: each output row is one row of every tensor"),
            (_MASK, "returned a mask of another length than its rows: it must return one boolean per row"),
        ):
            if mark in text:
                said = text.split(mark + ": ", 1)[1].split(_END)[0]
                return MapFunctionError(f"{said} {what}")
        return None


@attrs.define(eq=False, repr=False)
class MapByKey:
    """``map(fn, x, by_key=True)`` as the run driver sees it (see ``_engine.Kind``): each shard mapped as by
    :class:`MapOnly` (fn's ``(keys, values)`` checked as a keyed job's), every row then moved to the reducer of its
    key and kept there as a ``KeyedSharded``.  All rows are kept: keys repeat."""

    fn: Callable[..., Any]
    max_bytes: int | None = None
    """The bytes of keys and values one reducer may receive; None: a quarter of its host's available memory."""
    ready: dict[Hashable, Ready] = attrs.field(factory=dict)
    speculation: str | None = NO_SPECULATION
    phase: ClassVar[str] = "shuffle"

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

    def failure(self, error: JobError) -> Exception | None:
        big = over_budget(error, _TOO_BIG, self.max_bytes)
        if big is not None:
            return ReducerMemoryError(
                f"{self!r}: reducer {big.part} ({big.device}) would receive {big.rows:,} rows ({big.size:,} bytes of keys and "
                f"values), more than its budget of {big.budget:,} bytes ({big.limit}); nothing was sent. Spread the keys over "
                "more reducers (reducers=N, up to the cluster's devices), or, if its host has the memory, raise max_bytes=; "
                "the rows of one key always go to one reducer"
            )
        return self.mapper.failure(error)


def _run(kind: MapOnly | MapByKey, x: Any, broadcast: Sequence[Any], options: dict[str, Any]) -> Any:
    argument = kind.argument if isinstance(kind, MapOnly) else "fn"
    if not callable(kind.fn):
        raise TypeError(
            f"{argument} must be a callable taking a batch of rows (one tensor per input), e.g. "
            f"{'lambda x: x * 2' if argument == 'fn' else 'lambda x: x > 0'}; got {type(kind.fn).__name__} {kind.fn!r}"
        )
    settings = RunOptions.of(**options)
    if isinstance(kind, MapOnly):
        by_key = " (or pass by_key=True, with fn returning (keys, values), to move each row to the reducer of its key)"
        if settings.reducers is not None:
            raise TypeError(
                f"reducers= applies to keyed jobs only; {kind!r} keeps each shard's rows where it ran: drop reducers="
                f"{by_key if argument == 'fn' else ''}"
            )
        if settings.partitioner != "hash":
            raise TypeError(
                f"partitioner={settings.partitioner!r} applies to keyed jobs only; {kind!r} keeps each shard's rows where it "
                f"ran, in row order: drop partitioner=, or sort the result with tmr.sort{by_key if argument == 'fn' else ''}"
            )
    return _engine.run(kind, x, settings, broadcast, resident=True)


def map(
    fn: Callable[..., Any],
    x: Any,
    /,
    *,
    broadcast: Sequence[Any] = (),
    by_key: bool = False,
    max_bytes: int | None = None,
    **options: Unpack[Options],
) -> Any:
    """Map each shard's rows to any number of output rows, kept on the shard's device as resident ``Sharded`` data;
    with ``by_key=True``, moved to the reducer of their key as a ``KeyedSharded``.

    ``fn(*rows, *broadcast)`` receives a shard's rows (one tensor per co-partitioned input; for files a batch
    of ``batch_rows`` rows at a time, so a task holds a batch and its output, never its input split) and
    returns the output rows: a tensor, or a structure of tensors of one row count, with the rows on axis 0
    and a static row shape.  It may return more rows (an explode) or fewer.  Output shard ``i`` stays on
    the device of input shard ``i``: the result is the input of any later job or write without shipping,
    and ``.gather()`` returns it in row order.  It cannot be rebuilt if its worker is lost: map again.

    With ``by_key=True``, ``fn`` returns a pair ``(keys, values)``: keys a 1-D int32, int64 or string tensor,
    values a tensor or a tuple of tensors with one row per key.  In the same run every row goes to reducer
    ``hash(key) mod R`` (the stable hash of keyed jobs and hash joins, over ``reducers=``, default one per
    task; ``partitioner="range"``: sampled key ranges).  Every row is kept (keys repeat: a repartition, not a
    reduction).  Before any row travels, each reducer's rows and bytes are checked against its budget
    (``max_bytes=``, else a quarter of its host's available memory).  Shard ``r`` of the resulting
    [`KeyedSharded`][tfmapreduce.KeyedSharded] holds reducer ``r``'s rows by input shard, then in fn's row
    order (a range partition's: sorted by key, rows of one key in that order).  It reads in place as a keyed
    job's input (``tmr.sum_by_key(r.keys, r.values)``), and ``tmr.join`` with another hash-partitioned
    ``KeyedSharded`` on the same reducers joins shard ``r`` with shard ``r`` (co-partitioned: nothing moves).
    ``.gather()`` gives a [`KeyedResult`][tfmapreduce.KeyedResult] of every row, sorted by key, stably: one
    entry per row, rows of one key in input order (its ``keys`` and ``values`` arrays, or ``to_pandas()``;
    ``to_dict()`` keeps the last row of each key).

    Args:
        fn: the traceable function of a batch of rows (TensorFlow ops; it is traced once per shard or file).
        x: an array (numbers or strings), a tuple of co-partitioned arrays, resident ``Sharded`` data or files.
        broadcast: values every call of ``fn`` receives whole, after the rows.
        by_key: ``fn`` returns ``(keys, values)``; the rows are partitioned by key over the reducers.
        max_bytes: with ``by_key=True``, the bytes of keys and values one reducer may receive (None: a quarter of its
            host's available memory).
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout``, ``retries``, ``transfer``,
            ``batch_rows`` (files), and with ``by_key=True`` ``reducers`` and ``partitioner``: see
            [`RunOptions`][tfmapreduce.RunOptions].

    Returns:
        A ``Sharded`` (or ``fn``'s structure of them, co-partitioned on one plan); with ``by_key=True`` a
        ``KeyedSharded``.  Free it with ``delete()`` or ``with``.

    Raises:
        MapFunctionError: ``fn`` raised while traced, or its outputs are not dense tensors of one row count, or
            differ in structure, dtype or row shape between shards or batches; with ``by_key=True``, it returned
            no ``(keys, values)`` pair, keys of another dtype than int32, int64 or string, or keys and values of
            different row counts (found in the run: the message names the shard).
        ReducerMemoryError: with ``by_key=True``, a reducer would receive more than its budget (nothing was sent).
        TypeError: ``fn`` is not callable, ``by_key`` is not a bool, or ``speculate=True`` was given, or
            ``reducers=``/``partitioner=``/``max_bytes=`` without ``by_key=True``.

    Examples:
        >>> x = np.arange(6)
        >>> with tmr.map(lambda v: tf.repeat(v, 2), x, cluster=cluster) as twice:
        ...     twice.gather().tolist(), int(tmr.sum(twice))
        ([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5], 30)
        >>> def words(lines):
        ...     w = tf.strings.split(lines).flat_values
        ...     return w, tf.strings.length(w)
        >>> with tmr.map(words, np.array(["to be", "or not to be"]), by_key=True, cluster=cluster) as r:
        ...     rows = r.gather()  # every row, sorted by key
        ...     longest = tmr.max_by_key(r.keys, r.values)  # a keyed job over it, in place
        >>> rows.keys.tolist(), rows.values.tolist(), longest.values.tolist()
        (['be', 'be', 'not', 'or', 'to', 'to'], [2, 2, 3, 2, 2, 2], [2, 3, 2, 2])
    """
    if not isinstance(by_key, bool):
        raise TypeError(
            f"by_key must be True (fn returns (keys, values), partitioned by key) or False (fn's rows kept where they ran), "
            f"got {type(by_key).__name__} {by_key!r}"
        )
    if not by_key:
        if max_bytes is not None:
            raise TypeError(
                f"max_bytes={max_bytes!r} limits what one reducer receives with by_key=True; without it each shard's rows stay "
                "where they ran: drop max_bytes=, or pass by_key=True"
            )
        return _run(MapOnly(fn, "fn"), x, broadcast, dict(options))
    return _run(MapByKey(fn, check_max_bytes(max_bytes)), x, broadcast, dict(options))


def filter(pred: Callable[..., Any], x: Any, /, *, broadcast: Sequence[Any] = (), **options: Unpack[Options]) -> Any:
    """The rows of ``x`` where ``pred`` is true, kept on their shards' devices as resident ``Sharded`` data.

    ``pred(*rows, *broadcast)`` returns one boolean per row.  A tuple of co-partitioned inputs is filtered
    together (a tuple of ``Sharded`` comes back).  Otherwise as [`map`][tfmapreduce.map]: the result stays where it
    was computed and ``.gather()`` returns the kept rows in order.

    Examples:
        >>> x = np.arange(10.0)
        >>> with tmr.filter(lambda v: tf.equal(v % 3, 0), x, cluster=cluster) as kept:
        ...     kept.gather().tolist()
        [0.0, 3.0, 6.0, 9.0]
    """
    return _run(MapOnly(pred, "pred"), x, broadcast, dict(options))
