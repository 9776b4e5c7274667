"""The group kind of job: map to (key, value) rows, shuffle every row by key hash, group per key on the reducers.

The graph of one group run (one distributed execution)::

    shard (on its device)      map_fn per batch of ``batch_rows`` rows → (keys, values), checked as for keyed jobs
                               (a recipe's ``precombine`` shrinks each batch: per-task top-k, distinct pairs)
    task  (its first device)   its shards' rows concatenated → bucket = stable hash(key) mod R; ``tf.dynamic_partition``
                               (``partitioner="range"``: the key's range among splitters sampled from the rows in the run)
                               → each bucket's rows and bytes counted
    reducer r (its task's CPU) bucket r's rows and bytes summed over the tasks and checked against the reducer's
                               budget; only then does any bucket travel (each send waits on its reducer's check)
    reducer r (its device)     bucket r of every task concatenated, grouped by key (``_grouping``: a stable sort),
                               → ``fn(keys, ragged values)`` (or a recipe's ``select`` straight from the rows, where the
                               native kernels run) (a range partition: sorted by key) → fetched (sorted by key on the
                               client, unless ranged) or kept resident
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from .._base.device import Device
from .._base.errors import JobError, MapFunctionError
from .._engine.call import Call
from .._engine.program import Builder, Program
from .._io.strings import Encoding, decode_keys
from .._ops.budget import check_budget, over_budget
from .._ops.combine import GroupForm
from .._ops.grouping import SORTABLE, grouped, nbytes
from .._ops.mapfn import callable_name, describe, first_line
from .._ops.splitters import key_order
from .shuffle.map_side import ByKey, MapSide, Part, map_shards, mismatch, split_all
from .shuffle.plan import KeyedPlan
from .shuffle.result import rows, sorted_result
from .shuffle.sharded import KeyedBuilt, keep, keep_fetch
from .spill import OverBudget

_TOO_BIG = "tfmapreduce: group partition too large"
_ROWS = "tfmapreduce: group fn rows"
_FOUND = r" \(reducer (\d+) on ([^)]*)\)\] \[(-?\d+)\] \[(-?\d+)\]"


def _concat(parts: Sequence[Part]) -> Part:
    if len(parts) == 1:
        return parts[0]
    keys = tf.concat([k for k, _ in parts], 0)
    return keys, tf.nest.map_structure(lambda *leaves: tf.concat(leaves, 0), *[v for _, v in parts])


def map_side(form: GroupForm, native: Any) -> MapSide:
    """Rows as they are (collected), or a recipe's precombine applied to each batch, then once to a shard's batches and to
    a task's shards (every part is precombined already: one part stays as it is)."""
    pre = form.precombine
    if pre is None:
        rows: Callable[[tf.Tensor, Any], Part] = lambda keys, values: (keys, values)  # noqa: E731
        return MapSide(combine=rows, merge=_concat, refold=rows, collect=True)
    combine: Callable[[tf.Tensor, Any], Part] = lambda keys, values: pre(keys, values, native)  # noqa: E731
    return MapSide(
        combine=combine,
        merge=lambda parts: parts[0] if len(parts) == 1 else combine(*_concat(parts)),
        refold=combine,
        collect=True,
    )


@attrs.frozen
class GroupBuilt:
    """What a group program's finish needs: the keyed build (dtypes, which result leaves are ragged) and the structure."""

    built: KeyedBuilt
    structure: Any
    """The structure of ``fn``'s result (None leaves)."""


@attrs.define(eq=False, repr=False)
class Grouped(ByKey):
    """A group job as the run driver sees it (see ``_engine.kind.Kind``): ``fn`` over every value of each key, on the reducers."""

    @property
    def form(self) -> GroupForm:
        form = self.combiner.per_group
        assert form is not None  # a Grouped job is made only for a per_group reducer
        return form

    @property
    def identity(self) -> Hashable:
        return (self.map_fn, self.combiner, "groups")

    def build(self, builder: Builder, plan: KeyedPlan, call: Call) -> Program:
        """Map per shard (in batches), bucket per task, check each reducer's budget, group and call ``fn`` per reducer."""
        form = self.form
        reducers = plan.reducers
        native = group_native(plan, call)
        side = map_side(form, native)
        mapped = map_shards(self.map_fn, side, builder, plan, call)
        first = mapped.first
        if form.sort_values:
            self._check_sortable(first)
        merged = []
        for task, parts in mapped.per_task.items():
            with tf.device(mapped.device[task]), tf.name_scope("bucket_task"):
                merged.append((mapped.device[task], side.merge(parts)))
        buckets = split_all(merged, reducers, plan.partitioner, native, scope="bucket_task")
        counts: list[list[tuple[tf.Tensor, tf.Tensor]]] = []
        for (device, _), task_buckets in zip(merged, buckets, strict=True):
            with tf.device(device), tf.name_scope("bucket_task"):
                counts.append([(tf.size(k, tf.int64), nbytes(k, v)) for k, v in task_buckets])
        outputs: list[Part] = []
        shape: Any = None
        ragged: tuple[bool, ...] = ()
        for r, device in enumerate(reducers):
            start = check_budget(r, device, [c[r][0] for c in counts], [c[r][1] for c in counts], form.max_bytes, _TOO_BIG)
            sent = []
            for task, task_buckets in zip(mapped.per_task, buckets, strict=True):
                with tf.device(mapped.device[task]), tf.name_scope(f"send{r}"):  # the rows leave once the budget holds
                    keys, values = task_buckets[r]
                    sent.append((keys[start:], tf.nest.map_structure(lambda t, at=start: t[at:], values)))
            with tf.device(device), tf.name_scope(f"reducer{r}"):
                keys, output = self._reduce(r, device, *_concat(sent), native)
                order = key_order(keys, native) if plan.partitioner == "range" else None
                result, shape, ragged = self._leaves(r, device, keys, output, order)
                outputs.append((tf.identity(keys if order is None else tf.gather(keys, order)), result))
        leaves = [leaf[0] if is_ragged else leaf for leaf, is_ragged in zip(outputs[0][1], ragged, strict=True)]
        value_specs = tf.nest.pack_sequence_as(shape, [tf.TensorSpec(t.shape[1:], t.dtype) for t in leaves])
        built = KeyedBuilt(first[1][0].dtype, value_specs, call.resident, ragged)
        info = GroupBuilt(built, shape)
        if not built.resident:
            return builder.program(outputs, plan.tasks, info)
        kept = [
            (
                keys,
                [
                    tf.RaggedTensor.from_row_splits(*leaf, validate=False) if is_ragged else leaf
                    for leaf, is_ragged in zip(result, ragged, strict=True)
                ],
            )
            for keys, result in outputs
        ]
        return builder.program(keep_fetch(builder, reducers, kept), plan.tasks, info)

    def _check_sortable(self, first: tuple[Any, Part]) -> None:
        for leaf in tf.nest.flatten(first[1][1]):
            if leaf.dtype not in SORTABLE or (leaf.shape.rank > 1 and not leaf.shape[1:].is_fully_defined()):
                raise MapFunctionError(
                    f"sort_values=True sorts each key's values, but map_fn {callable_name(self.map_fn)} emits values "
                    f"{describe(first[1][1])}: {leaf.dtype.name}{leaf.shape} cannot be sorted in the graph (sortable: integer, "
                    "float and string dtypes of a known row shape). Map them to sortable codes, or pass sort_values=False "
                    "and order them inside fn"
                )

    def _reduce(self, r: int, device: str, keys: tf.Tensor, values: Any, native: Any) -> tuple[tf.Tensor, Any]:
        """Reducer ``r``'s distinct keys and ``fn``'s result: the form's ``select`` straight from the rows where it applies,
        else ``fn`` over the rows grouped by key."""
        form = self.form
        if native is not None and form.select is not None:
            selected = form.select(keys, values, native)
            if selected is not None:
                return selected
        keys, values = grouped(keys, values, sort_values=form.sort_values, native=native)
        try:
            return keys, form.fn(keys, values)
        except Exception as e:
            raise MapFunctionError(
                f"the per_group fn {callable_name(form.fn)} raised {type(e).__name__} while traced on reducer {r} ({device}): "
                f"{first_line(e)}. fn is traced once in a graph: build it from TensorFlow ops on its tensors (no .numpy(), no "
                "Python if/for on tensor values); values is a tf.RaggedTensor with one row per key"
            ) from e

    def _leaves(
        self, r: int, device: str, keys: tf.Tensor, output: Any, order: tf.Tensor | None = None
    ) -> tuple[list[Any], Any, tuple[bool, ...]]:
        """The leaves of ``fn``'s result on reducer ``r`` (ragged ones as (flat values, row splits)), each checked for
        one row per key, and its rows taken in ``order`` where given (a range partition's keys sorted); the result's
        structure (None leaves); which leaves are ragged."""
        name = callable_name(self.form.fn)
        leaves, ragged, checks = [], [], []
        n = tf.size(keys)
        for leaf in tf.nest.flatten(output):
            if not isinstance(leaf, tf.RaggedTensor):
                try:
                    leaf = tf.convert_to_tensor(leaf)
                except (TypeError, ValueError) as e:
                    raise MapFunctionError(
                        f"the per_group fn {name} must return a tensor, a tf.RaggedTensor or a structure of them with one row per key; "
                        f"on reducer {r} it returned {output!r} ({e})"
                    ) from None
                if leaf.shape.rank == 0:
                    raise MapFunctionError(
                        f"the per_group fn {name} returned a scalar ({leaf.dtype.name}) on reducer {r}; it must return one row per key "
                        "(leading dimension = len(keys)), e.g. tf.reduce_max(values, axis=1)"
                    )
            elif leaf.ragged_rank != 1:
                raise MapFunctionError(
                    f"the per_group fn {name} returned a RaggedTensor of ragged_rank {leaf.ragged_rank} on reducer {r}; "
                    "return one ragged dimension (a row of varying length per key), e.g. values.merge_dims(1, 2)"
                )
            rows = leaf.nrows(out_type=tf.int32) if isinstance(leaf, tf.RaggedTensor) else tf.shape(leaf)[0]
            checks.append(tf.debugging.Assert(tf.equal(rows, n), [f"{_ROWS} (reducer {r} on {device})", rows, n]))
            ragged.append(isinstance(leaf, tf.RaggedTensor))
            leaves.append(leaf)
        with tf.control_dependencies(checks):
            if order is not None:
                leaves = [tf.gather(x, order) for x in leaves]
            fetched = [
                (tf.identity(x.flat_values), tf.identity(x.row_splits)) if isinstance(x, tf.RaggedTensor) else tf.identity(x)
                for x in leaves
            ]
        return fetched, tf.nest.map_structure(lambda _: None, output), tuple(ragged)

    def finish(self, value: Any, program: Program | None, plan: KeyedPlan, call: Call) -> Any:
        """A :class:`KeyedResult` (one numpy array per key for a ragged result), or a ``KeyedSharded`` for a resident run."""
        assert program is not None
        info: GroupBuilt = program.info
        if call.resident:
            decode = call.note if info.built.key_dtype == tf.string else None
            return keep(call.cluster, plan, value, info.built, decode)
        return group_result(value, info, call.note, ordered=plan.partitioner == "range")

    def failure(self, error: JobError, plan: KeyedPlan) -> Exception | None:
        found = mismatch(self.map_fn, error, plan.plan.shards)
        if found is not None:
            return found
        text = f"{error}\n{error.details}"
        big = over_budget(error, _TOO_BIG, self.form.max_bytes)
        if big is not None:
            return OverBudget(
                big,
                f"reducer {big.part} ({big.device}) would receive {big.rows:,} values ({big.size:,} bytes of keys and "
                f"values), more than its budget of {big.budget:,} bytes ({big.limit}); nothing was sent. Spread the keys over more reducers "
                "(reducers=N, up to the cluster's devices), use a combiner recipe (sum/mean/min/max/variance_by_key) whose "
                "partials are one row per key, or, if its host has the memory, raise per_group(..., max_bytes=); one hot key "
                "stays on one reducer however many there are (where every task has the native kernels' spill family, the "
                "run spills to the workers' disks instead)",
            )
        wrong = re.search(re.escape(_ROWS) + _FOUND, text)
        if wrong is not None:
            part, on, got, want = wrong.groups()
            return MapFunctionError(
                f"the per_group fn {callable_name(self.form.fn)} returned {got} rows on reducer {part} ({on}), which has {want} keys; "
                "fn must return one row per key (e.g. reduce the ragged values over axis=1, or return a RaggedTensor of one row per key)"
            )
        return None


def group_native(plan: KeyedPlan, call: Call) -> Any:
    """The run's native kernels where every shard and reducer device is a CPU (they have CPU kernels only), else None."""
    devices = [*(s.device for s in plan.plan.shards), *plan.reducers]
    return call.native if all(Device.parse(d).type == "CPU" for d in devices) else None


def group_result(value: Sequence[tuple[Any, list[Any]]], info: GroupBuilt, unicode: Encoding, *, ordered: bool) -> Any:
    """The :class:`KeyedResult` of the reducers' fetched ``(keys, leaves)`` (ragged leaves as (flat values, row
    splits)), string keys and values decoded as the input was (``unicode``), sorted by key unless ``ordered``."""
    decode = unicode if info.built.key_dtype == tf.string else None
    leaves = []
    for j, is_ragged in enumerate(info.built.ragged):
        parts = [v[j] for _, v in value]
        if is_ragged:
            flat = _text(np.concatenate([f for f, _ in parts]), unicode)
            leaves.append(rows(flat, np.concatenate([np.diff(s) for _, s in parts])))
        else:
            leaves.append(_text(np.concatenate(parts), unicode))
    keys = np.concatenate([np.asarray(k) for k, _ in value])
    return sorted_result(keys, tf.nest.pack_sequence_as(info.structure, leaves), decode=decode, ordered=ordered)


def _text(leaf: np.ndarray, unicode: Encoding) -> np.ndarray:
    """A fetched leaf; strings (bytes from TensorFlow) as ``str`` where the input was unicode (see ``decode_keys``)."""
    if leaf.dtype != object:
        return leaf
    return decode_keys(leaf.ravel().tolist(), unicode).reshape(leaf.shape)
