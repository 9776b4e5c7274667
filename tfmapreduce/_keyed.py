"""Keyed jobs: map to (key, value) pairs, combine per key, shuffle by key hash to reducer devices.

The graph of one keyed run (one distributed execution)::

    shard (on its device)      map_fn per batch of ``batch_rows`` rows → (keys, values)
                               → per-key partial of the batch, folded into the shard's partial
                                 (``tf.data`` batches folded with ``Dataset.reduce``)
    task  (its first device)   merge the partials of its shards by key
                               → bucket = stable hash(key) mod R; ``tf.dynamic_partition`` into R buckets
    reducer r (its device)     bucket r of every task, merged by key, finalized
                               → fetched to the client (sorted there), or kept in resource variables

A per-key partial is a pair (distinct keys, partial per key).  Integer keys whose range
within a batch is small (at most ``2·rows + 65536`` values) are combined without hashing or
sorting: the key minus the batch's minimum is the segment id.  Other integer keys go through
``tf.unique``; strings are grouped by their fingerprints (see ``_group.py``).

The bucket of a key is stable across processes, machines and runs:

- strings: ``tf.strings.to_hash_bucket_fast(key, R)`` (FarmHash Fingerprint64 of the bytes, mod R);
- integers: multiplicative (Fibonacci) hashing of the key as a 64-bit two's complement number,
  ``((k · 0x9E3779B97F4A7C15) mod 2**64 >> 32) mod R`` (see :func:`int_bucket`).
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from ._cache import PROGRAMS
from ._cluster import Cluster
from ._combine import Combiner, SegmentForm, segment_count
from ._device import Device
from ._errors import JobError, MapFunctionError, PlacementError, ShardLostError
from ._group import GOLDEN, group
from ._keyed_result import KeyedResult, sorted_result
from ._mapreduce import callable_name, check_same_outputs, plan_of, resolve_cluster
from ._options import RunOptions
from ._place import default_devices
from ._plan import Plan, Shard, make_plan
from ._resident import Sharded
from ._retry import can_retry, moved_shards, with_retries
from ._runstats import RunStats, ShardStats
from ._source import DATA_OPTIONS, Batches, Input, Shipped, Source, Streamed, as_array, co_partitioned, sources
from ._stream import streamed
from ._task import Task

KEY_DTYPES = (tf.int32, tf.int64, tf.string)
"""The dtypes a key may have: int32, int64, or string (bytes; unicode is encoded as UTF-8)."""

STREAM_BATCH_ROWS = 1 << 16
"""Default ``batch_rows`` of a keyed job over files or strings: each batch's partial is merged into the running state,
and smaller batches keep that merge and the batch's strings cache-sized (word count over 97 MB of text: 2.7 s at
2**14–2**16 lines, 5.3 s at 2**20 over files; 2.1 s at 2**16 and 3.0 s at 2**20 with the lines shipped)."""

BATCH_ROWS = 1 << 20
"""Rows of a shard mapped at once when ``batch_rows=None``: a larger shard is folded batch by batch."""

DENSE_SLACK = 1 << 16
"""Integer keys spanning at most ``2·rows + DENSE_SLACK`` values are combined densely (no hashing)."""

_MISMATCH = "tfmapreduce: keys and values of different lengths"


def int_bucket(key: int, reducers: int) -> int:
    """The reducer (bucket) of an integer key, as the graph computes it: pure Python, for checks and docs.

    Example:
        >>> int_bucket(-1, 4), int_bucket(12345, 4)
        (2, 3)
    """
    h = ((key % 2**64) * GOLDEN) % 2**64
    return (h >> 32) % reducers


def buckets(keys: tf.Tensor, reducers: int) -> tf.Tensor:
    """Each key's reducer, in ``range(reducers)`` (int32): a stable hash of the key, mod ``reducers``."""
    if reducers == 1:
        return tf.zeros(tf.shape(keys), tf.int32)
    if keys.dtype == tf.string:
        return tf.cast(tf.strings.to_hash_bucket_fast(keys, reducers), tf.int32)
    mixed = tf.bitcast(tf.cast(keys, tf.int64), tf.uint64) * tf.constant(GOLDEN, tf.uint64)
    high = tf.cast(tf.bitwise.right_shift(mixed, tf.constant(32, tf.uint64)), tf.int64)
    return tf.cast(tf.math.floormod(high, reducers), tf.int32)


def by_key(keys: tf.Tensor, rows: Any, combine: Callable[[Any, tf.Tensor, tf.Tensor], Any]) -> tuple[tf.Tensor, Any]:
    """Combine ``rows`` (a structure, one row per key occurrence) by key: (distinct keys, ``combine(rows, ids, n)``).

    ``combine`` is a :class:`SegmentForm`'s ``partial`` or ``merge``.  Integer keys of a small
    range use their offset from the minimum as the segment (no hash table); the others are grouped by :func:`group`.
    """

    def hashed() -> tuple[tf.Tensor, Any]:
        distinct, ids = group(keys)
        return distinct, combine(rows, ids, tf.size(distinct))

    if keys.dtype == tf.string:
        return hashed()
    m = tf.size(keys)
    lo, hi = tf.reduce_min(keys), tf.reduce_max(keys)
    span = tf.cast(hi, tf.float64) - tf.cast(lo, tf.float64)
    dense_ok = tf.logical_and(m > 0, span <= tf.cast(2 * m + DENSE_SLACK, tf.float64))

    def dense() -> tuple[tf.Tensor, Any]:
        n = tf.cast(hi - lo, tf.int32) + 1
        ids = tf.cast(keys - lo, tf.int32)
        combined = combine(rows, ids, n)
        present = segment_count(ids, n) > 0
        distinct = tf.boolean_mask(tf.range(n, dtype=keys.dtype) + lo, present)
        return distinct, tf.nest.map_structure(lambda t: tf.boolean_mask(t, present), combined)

    result: tuple[Any, Any] = tf.cond(dense_ok, dense, hashed)
    return result


def _concat(parts: Sequence[tuple[tf.Tensor, Any]]) -> tuple[tf.Tensor, Any]:
    if len(parts) == 1:
        return parts[0]
    keys = tf.concat([k for k, _ in parts], 0)
    return keys, tf.nest.map_structure(lambda *leaves: tf.concat(leaves, 0), *[p for _, p in parts])


def merge(parts: Sequence[tuple[tf.Tensor, Any]], form: SegmentForm) -> tuple[tf.Tensor, Any]:
    """Per-key partials (keys, partial) merged into one, by key."""
    if len(parts) == 1:
        return parts[0]
    keys, rows = _concat(parts)
    return by_key(keys, rows, form.merge)


@attrs.frozen
class KeyedPlan:
    """The plan of a keyed run: the shards (as for any job), the reducer devices, and the batch size.

    Keys go to reducer ``buckets(key) mod len(reducers)``; see the module's notes for the hash.

    Example:
        >>> keyed = tmr.MapReduce(lambda k: (k, k), tmr.combiners.count, by_key=True)
        >>> plan = keyed.plan(np.array([3, 1, 3, 2]), cluster=cluster, sizes=2, reducers=2)
        >>> plan.plan.sizes, len(plan.reducers)
        ((2, 2), 2)
    """

    plan: Plan
    """The shards: which rows are mapped on which device."""
    reducers: tuple[str, ...]
    """The reducer devices: bucket ``r`` of the key hash is merged on ``reducers[r]``."""
    batch_rows: int
    """Rows of a shard mapped at once; larger shards are folded batch by batch."""

    @property
    def tasks(self) -> tuple[Task, ...]:
        """The tasks the run uses: the shards' and the reducers', in order."""
        reducer_tasks = (Device.parse(d).task for d in self.reducers)
        return tuple(dict.fromkeys([*self.plan.tasks, *reducer_tasks]))

    def explain(self) -> str:
        """The shard table, then the reducers."""
        lines = [
            self.plan.explain(),
            f"batches of at most {self.batch_rows} rows per shard",
            f"{len(self.reducers)} reducer(s), keys by stable hash:",
        ]
        lines += [f"  bucket {r} → {d}" for r, d in enumerate(self.reducers)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


def resolve_reducers(reducers: int | Sequence[str] | None, plan: Plan, cluster: Cluster) -> tuple[str, ...]:
    """The reducer devices: None (one per task of the plan, its first CPU), a count, or device strings.

    Raises:
        PlacementError: 0, negative or more reducers than the cluster's devices, or an unknown device.
        TypeError: neither None, an int nor a list of strings.
    """
    available = [Device.parse(d) for d in cluster.devices]
    listing = "\n  ".join(str(d) for d in available)
    if reducers is None:
        chosen = []
        for task in plan.tasks:
            cpus = [d for d in available if d.task == task and d.type == "CPU"]
            chosen.append(str(cpus[0]) if cpus else str(Device.parse(f"{task}/cpu:0")))
        return tuple(chosen)
    if isinstance(reducers, (int, np.integer)) and not isinstance(reducers, bool):
        n = int(reducers)
        if not 1 <= n <= len(available):
            raise PlacementError(
                f"reducers={n}: expected a number of reducer devices from 1 to {len(available)} (the cluster's devices), "
                f"got {n}; pass reducers=None for one per task, or a list of device strings"
            )
        cpus = list(default_devices([d for d in available if d.type == "CPU"]))
        others = [d for d in default_devices(available) if d not in cpus]
        rest = [d for d in available if d not in cpus and d not in others]
        return tuple(str(d) for d in [*cpus, *others, *rest][:n])
    if isinstance(reducers, str) or not isinstance(reducers, Sequence):
        raise TypeError(
            f"reducers must be None, a number of reducer devices, or a list of device strings such as ['/job:local/task:0'], "
            f"got {type(reducers).__name__} {reducers!r}"
        )
    if not reducers:
        raise PlacementError(
            "reducers=[] names no reducer device; pass at least one device string, a count, or None (one per task)"
        )
    if len(reducers) > len(available):
        raise PlacementError(
            f"reducers lists {len(reducers)} devices, more than the cluster's {len(available)}; pass at most {len(available)}"
        )
    known = set(available)
    chosen = []
    for i, name in enumerate(reducers):
        device = Device.parse(name, argument=f"reducers[{i}]")
        if device not in known:
            raise PlacementError(f"reducers[{i}]={name!r}: the cluster has no such device; its devices are:\n  {listing}")
        chosen.append(str(device))
    if len(set(chosen)) != len(chosen):
        raise PlacementError(f"reducers={list(reducers)!r} names a device twice; each reducer device must appear once")
    return tuple(chosen)


def keyed_sources(x: Any) -> tuple[tuple[Source, ...], bool]:
    """The job's sources, where arrays of strings are allowed too (as bytes); and whether any was unicode.

    Numeric and resident inputs canonicalize as for every job (:func:`sources`).
    """
    items = x if isinstance(x, tuple) else (x,)
    unicode = False
    converted = []
    for item in items:
        strings = _as_strings(item)
        if strings is None:
            converted.append(item)
        else:
            converted.append(_STRING_MARK)
            unicode = unicode or strings[1]
    numeric = [c for c in converted if c is not _STRING_MARK]
    numeric_srcs = iter(sources(tuple(numeric)) if numeric else ())
    result: list[Source] = []
    for item, c in zip(items, converted, strict=True):
        if c is _STRING_MARK:
            strings = _as_strings(item)
            assert strings is not None
            result.append(Shipped(strings[0]))
        else:
            result.append(next(numeric_srcs))
    return co_partitioned(result), unicode


_STRING_MARK = object()


def _as_strings(item: Any) -> tuple[np.ndarray, bool] | None:
    """An array of strings as an object array of bytes (and whether it was unicode); None for anything else."""
    if isinstance(item, Input) or (isinstance(item, (tf.Tensor, tf.Variable)) and item.dtype != tf.string):
        return None
    if isinstance(item, (tf.Tensor, tf.Variable)):
        item = item.numpy()
    try:
        array = np.asarray(item)
    except ValueError:
        return None
    if array.dtype.kind == "U":
        return np.array([s.encode("utf-8") for s in array.ravel().tolist()], dtype=object).reshape(array.shape), True
    if array.dtype.kind == "S":
        return np.array(array.ravel().tolist(), dtype=object).reshape(array.shape), False
    if array.dtype == object and all(isinstance(s, (str, bytes)) for s in array.ravel().tolist()):
        flat = array.ravel().tolist()
        unicode = any(isinstance(s, str) for s in flat)
        encoded = [s.encode("utf-8") if isinstance(s, str) else s for s in flat]
        return np.array(encoded, dtype=object).reshape(array.shape), unicode
    return None


@attrs.frozen(eq=False)
class _Program:
    graph: tf.Graph
    fetch: Any
    feeds: tuple[tuple[Any, int, Shard], ...]
    broadcast: tuple[Any, ...]
    tasks: tuple[Task, ...]
    key_dtype: tf.DType
    value_specs: Any  # structure of tf.TensorSpec (one row) of the finalized values


def _describe(output: Any) -> str:
    try:
        return repr(
            tf.nest.map_structure(lambda t: f"{tf.convert_to_tensor(t).dtype.name}{tf.convert_to_tensor(t).shape}", output)
        )
    except (TypeError, ValueError):
        return repr(output)


def emit(job: Any, output: Any, where: str) -> tuple[tf.Tensor, Any]:
    """Check a keyed map output: ``(keys, values)`` with 1-D int/string keys and values of as many rows."""
    name = callable_name(job.map_fn)
    if not (isinstance(output, (tuple, list)) and len(output) == 2):
        raise MapFunctionError(
            f"map_fn {name} of a by_key=True job must return a pair (keys, values): keys a 1-D tensor of m keys, values a tensor "
            f"(or structure of tensors) with m rows; on {where} it returned {_describe(output)}. "
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


def compile_keyed(
    job: Any, kplan: KeyedPlan, srcs: tuple[Any, ...], broadcast: tuple[np.ndarray, ...], cluster: Cluster, resident: str | None
) -> _Program:
    """Build the keyed graph: map and combine per shard (in batches), per task, hash-partition, merge per reducer."""
    form: SegmentForm = job.combiner.per_key
    plan, reducers = kplan.plan, kplan.reducers
    graph = tf.Graph()
    feeds: list[tuple[Any, int, Shard]] = []
    per_task: dict[Task, list[tuple[tf.Tensor, Any]]] = {}
    task_device: dict[Task, str] = {}
    first: tuple[Shard, tuple[tf.Tensor, Any]] | None = None
    mapped = [s for s in plan.shards if s.rows > 0] or [plan.shards[0]]
    stream = streamed(srcs)
    with graph.as_default():
        bcast = tuple(
            tf.compat.v1.placeholder(tf.as_dtype(v.dtype), v.shape, name=f"broadcast{i}") for i, v in enumerate(broadcast)
        )
        for shard in mapped:
            where = f"shard {shard.index} (rows {shard.start}:{shard.stop} on {shard.device})"
            with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
                if stream is not None:  # files: read and folded batch by batch on this task
                    part = _fold_pieces(job, form, stream, stream.batches(shard, kplan.batch_rows), bcast, where)
                else:
                    tensors = []
                    for i, src in enumerate(srcs):
                        data = src.tensor(shard)
                        tensors.append(data.value)
                        if data.placeholder is not None:
                            feeds.append((data.placeholder, i, shard))
                    part = _fold_shard(job, form, tensors, bcast, shard.rows, kplan.batch_rows, where)
                if first is None:
                    first = (shard, part)
                else:
                    check_same_outputs(job.map_fn, first, shard, part)
                per_task.setdefault(shard.task, []).append(part)
                task_device.setdefault(shard.task, shard.device)
        assert first is not None
        key_dtype = first[1][0].dtype
        buckets_per_task = []
        try:
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
        except MapFunctionError:
            raise
        except Exception as e:
            raise MapFunctionError(
                f"{job!r}: the combiner {job.combiner.name} cannot merge the per-key partials "
                f"({type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}); shard {first[0].index} gave "
                f"{_describe(first[1])}: check the combiner's per_key SegmentForm against map_fn's values"
            ) from e
        value_specs = tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape[1:], t.dtype), outputs[0][1])
        if resident is None:
            fetch: Any = outputs
        else:
            fetch = []
            for r, (device, (keys, values)) in enumerate(zip(reducers, outputs, strict=True)):
                with tf.device(device), tf.name_scope(f"keep{r}"):
                    ops = [_assign(f"{resident}_keys", r, keys)]
                    ops += [_assign(f"{resident}_v{j}", r, leaf) for j, leaf in enumerate(tf.nest.flatten(values))]
                    with tf.control_dependencies(ops):
                        fetch.append(tf.size(keys))
    graph.finalize()
    return _Program(graph, fetch, tuple(feeds), bcast, kplan.tasks, key_dtype, value_specs)


def _assign(container: str, r: int, value: tf.Tensor) -> tf.Operation:
    handle = tf.raw_ops.VarHandleOp(dtype=value.dtype, shape=tf.TensorShape(None), container=container, shared_name=f"shard{r}")
    return tf.raw_ops.AssignVariableOp(resource=handle, value=value)


def _stepper(job: Any, form: SegmentForm, bcast: tuple[Any, ...], where: str) -> Callable[..., tuple[tf.Tensor, Any]]:
    """One batch's per-key partial: map it, check the (keys, values), combine by key."""

    def step(*batch: tf.Tensor) -> tuple[tf.Tensor, Any]:
        try:
            output = job.map_fn(*batch, *bcast)
        except Exception as e:
            raise MapFunctionError(f"map_fn {callable_name(job.map_fn)} raised {type(e).__name__} on {where}: {e}") from e
        keys, values = emit(job, output, where)
        return by_key(keys, values, form.partial)

    return step


def _fold(partials: tf.data.Dataset, form: SegmentForm) -> tuple[tf.Tensor, Any]:
    """Fold a dataset of per-key partials into one, merging by key as it goes."""
    partials = partials.with_options(DATA_OPTIONS)
    initial = tf.nest.map_structure(lambda s: tf.zeros([0, *(d or 0 for d in s.shape[1:])], s.dtype), partials.element_spec)
    folded: tuple[Any, Any] = partials.reduce(initial, lambda state, part: merge([state, part], form))
    return folded


def _fold_pieces(
    job: Any, form: SegmentForm, src: Streamed, pieces: Sequence[Batches], bcast: tuple[Any, ...], where: str
) -> tuple[tf.Tensor, Any]:
    """A streamed shard's per-key partial: each piece's batches mapped and folded on the shard's task."""
    step = _stepper(job, form, bcast, where)
    if not pieces:  # nothing to read here: the partial of no rows
        return step(tf.zeros((0, *src.shape[1:]), tf.as_dtype(src.dtype)))
    parts = [_fold(piece.dataset.map(step), form) for piece in pieces]
    return parts[0] if len(parts) == 1 else merge(parts, form)


def _fold_shard(
    job: Any, form: SegmentForm, tensors: list[tf.Tensor], bcast: tuple[Any, ...], rows: int, batch_rows: int, where: str
) -> tuple[tf.Tensor, Any]:
    """One shard's per-key partial: its rows mapped and combined at once, or batch by batch folded with ``Dataset.reduce``."""
    step = _stepper(job, form, bcast, where)
    if rows <= batch_rows:
        return step(*tensors)
    batches = math.ceil(rows / batch_rows)

    def sliced(i: tf.Tensor) -> tuple[tf.Tensor, Any]:
        start = i * batch_rows
        return step(*(t[start : start + batch_rows] for t in tensors))

    return _fold(tf.data.Dataset.range(batches).map(sliced), form)


def make_keyed_plan(srcs: tuple[Source, ...], cluster: Cluster, settings: RunOptions) -> KeyedPlan:
    """The :class:`KeyedPlan` of a run (nothing runs)."""
    plan = plan_of(srcs, cluster, settings)
    strings = any(np.dtype(s.dtype).kind in "OSU" for s in srcs)
    default = STREAM_BATCH_ROWS if strings or streamed(srcs) is not None else BATCH_ROWS
    return KeyedPlan(plan, resolve_reducers(settings.reducers, plan, cluster), settings.batch_rows or default)


def run(job: Any, x: Any, settings: RunOptions, *, broadcast: Sequence[Any], resident: bool) -> Any:
    """Run a keyed job (``MapReduce(..., by_key=True).run``): a :class:`KeyedResult`, or a :class:`KeyedSharded` if ``resident``."""
    started = time.perf_counter()
    srcs, unicode = keyed_sources(x)
    cluster = resolve_cluster(settings.cluster, srcs)
    values = tuple(as_array(b, argument=f"broadcast[{i}]") for i, b in enumerate(broadcast))
    plans: list[KeyedPlan] = []

    def attempt(current: RunOptions) -> tuple[_Program, Any, str | None, bool]:
        kplan = make_keyed_plan(srcs, cluster, current)
        plans.append(kplan)
        key = (
            job.identity,
            id(cluster),
            kplan,
            tuple(s.signature(kplan.plan) for s in srcs),
            tuple((v.dtype.str, v.shape) for v in values),
        )
        name = f"tfmapreduce_{secrets.token_hex(8)}" if resident else None
        if resident:  # its variables are named in the graph: a graph of its own, not cached
            program, compiled = compile_keyed(job, kplan, srcs, values, cluster, name), True
        else:
            cached, compiled = PROGRAMS.get(key, cluster, lambda: compile_keyed(job, kplan, srcs, values, cluster, None))
            assert isinstance(cached, _Program)
            program = cached
        feed = {ph: srcs[i].feed(shard) for ph, i, shard in program.feeds}
        feed.update(zip(program.broadcast, values, strict=True))
        try:
            return (
                program,
                cluster.run(
                    program.graph,
                    program.fetch,
                    feed,
                    tasks=program.tasks,
                    timeout=current.seconds(),
                    hang_check=can_retry(current, cluster),
                ),
                name,
                compiled,
            )
        except JobError as e:
            raise _keyed_failure(job, e, srcs, kplan, cluster) from None
        finally:
            if resident:
                cluster.forget(program.graph)

    (program, out, name, compiled), recovery = with_retries(settings, srcs, cluster, attempt)
    kplan = plans[-1]
    decode = unicode and program.key_dtype == tf.string
    if resident:
        result: Any = _keep(cluster, kplan, name, [int(n) for n in out], program, decode)
    else:
        keys = np.concatenate([np.asarray(k) for k, _ in out])
        per_key = tf.nest.map_structure(lambda *leaves: np.concatenate([np.asarray(v) for v in leaves]), *[v for _, v in out])
        result = sorted_result(keys, per_key, decode=decode)
    if not settings.return_stats:
        return result
    stats = RunStats(
        shards=tuple(
            ShardStats(s.index, s.device, s.rows, sum(src.bytes_sent(s) for src in srcs) if s.rows else 0)
            for s in kplan.plan.shards
        ),
        wall_time=time.perf_counter() - started,
        compiled=compiled,
        attempts=recovery.attempts,
        lost=recovery.lost,
        moved=moved_shards(plans[0].plan, kplan.plan),
    )
    return result, stats


def _keyed_failure(job: Any, error: JobError, srcs: tuple[Source, ...], kplan: KeyedPlan, cluster: Cluster) -> Exception:
    """The error a failed keyed run raises: the input's, the map function's, or the job's (named)."""
    for src in srcs:
        failure = src.input_error(error, kplan.plan, cluster)
        if failure is not None:
            return failure
    if _MISMATCH in str(error) or _MISMATCH in error.details:
        return MapFunctionError(
            f"map_fn {callable_name(job.map_fn)} returned keys and values of different lengths ({str(error).split(_MISMATCH)[-1].strip(' ():')}); "
            "they must have one value row per key"
        )
    error.args = (f"{job!r}: {error}",)
    return error


def _not_rebuildable(shard: Shard) -> tf.Tensor:
    raise ShardLostError(
        f"shard {shard.index} of a keyed resident result is lost with its reducer and cannot be rebuilt; run the keyed job again",
        shards=(shard.index,),
    )


def _keep(
    cluster: Cluster, kplan: KeyedPlan, name: str | None, counts: list[int], program: _Program, decode: bool
) -> KeyedSharded:
    """The :class:`KeyedSharded` for the variables a resident run filled: one plan, shard r on reducer r."""
    assert name is not None
    available = [Device.parse(d) for d in cluster.devices]
    plan = make_plan(sum(counts), counts, list(kplan.reducers), available)
    builders = (_not_rebuildable,) * len(counts)
    key_dtype = np.dtype(object) if program.key_dtype == tf.string else np.dtype(program.key_dtype.as_numpy_dtype)
    keys = Sharded(cluster, plan, key_dtype, (plan.rows,), f"{name}_keys", builders)
    leaves = tuple(
        Sharded(cluster, plan, np.dtype(spec.dtype.as_numpy_dtype), (plan.rows, *spec.shape), f"{name}_v{j}", builders)
        for j, spec in enumerate(tf.nest.flatten(program.value_specs))
    )
    return KeyedSharded(keys, leaves, program.value_specs, decode, name)


@attrs.define(eq=False)
class KeyedSharded:
    """A keyed result kept on the reducer devices: keys and values partitioned by key hash, one shard per reducer.

    ``keys`` and ``values`` are co-partitioned :class:`Sharded` arrays (one plan), so later jobs read
    them in place: ``MapReduce(...).run((r.keys, r.values))`` ships nothing.  Within a shard the keys
    are distinct but not sorted; :meth:`gather` fetches and sorts them into a :class:`KeyedResult`.

    Example:
        >>> keys, values = np.array([1, 2, 1, 3]), np.array([10, 20, 30, 40])
        >>> with tmr.sum_by_key(keys, values, cluster=cluster, resident=True) as r:
        ...     total = tmr.sum(r.values)             # a second job over the per-key sums
        ...     table = r.gather()                    # a KeyedResult
        >>> int(total), table.to_dict()
        (100, {1: 40, 2: 20, 3: 40})
    """

    keys: Sharded
    """The distinct keys, shard ``r`` on reducer ``r``."""
    leaves: tuple[Sharded, ...]
    """The per-key values as Sharded arrays, one per leaf of the combiner's structure, aligned with ``keys``."""
    structure: Any
    """The combiner's structure of the values (``tf.TensorSpec`` leaves, one row each)."""
    decode: bool
    """Whether string keys are returned as ``str`` (the input was unicode)."""
    name: str
    """The prefix of the resource containers that hold it on the workers."""

    @property
    def values(self) -> Any:
        """The per-key values: one Sharded, or the combiner's structure of them (e.g. a tuple for moments)."""
        if tf.nest.is_nested(self.structure):
            return tf.nest.pack_sequence_as(self.structure, list(self.leaves))
        return self.leaves[0]

    @property
    def plan(self) -> Plan:
        """Which reducer device holds how many keys."""
        return self.keys.plan

    def __len__(self) -> int:
        return self.keys.plan.rows

    def __repr__(self) -> str:
        return f"KeyedSharded({len(self)} keys on {len(self.plan.shards)} reducers, {self.name})"

    def gather(self, *, timeout: float | None = None) -> KeyedResult:
        """The whole result, fetched from the reducers and sorted by key."""
        keys = self.keys.gather(timeout=timeout)
        gathered = [leaf.gather(timeout=timeout) for leaf in self.leaves]
        values = tf.nest.pack_sequence_as(self.structure, gathered) if tf.nest.is_nested(self.structure) else gathered[0]
        return sorted_result(keys, values, decode=self.decode)

    def delete(self, *, timeout: float | None = None) -> None:
        """Free the result's memory on the reducers (also of reducers that received no key).  Safe to call twice."""
        for array in (self.keys, *self.leaves):
            array.delete(timeout=timeout)

    def __enter__(self) -> KeyedSharded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()


def check_keyed_combiner(combiner: Combiner, reduce_fn: Any) -> None:
    """A keyed job needs a combiner with a per-key form: MapFunctionError naming the alternatives otherwise."""
    if combiner.per_key is None:
        raise MapFunctionError(
            f"reduce_fn {combiner.name} has no per-key (segment) form, so it cannot combine the values of each key in a by_key=True job; "
            "use a combiner (tmr.combiners.sum, count, mean, min, max, moments), a pairwise function with a segment form "
            "(tf.add, tf.maximum, tf.minimum, tf.multiply), or a tmr.Combiner with per_key=tmr.combiners.SegmentForm(...)"
        )


def keyed_plan(x: Any, settings: RunOptions) -> KeyedPlan:
    """``MapReduce(..., by_key=True).plan``: the shards, the reducers and the batch size; nothing runs."""
    srcs, _ = keyed_sources(x)
    return make_keyed_plan(srcs, resolve_cluster(settings.cluster, srcs), settings)
