"""A resident keyed combine or group reducer over its reducers' budget, spilled: its rounds' results kept on their
reducers.

``resident=True`` promises the result stays on the reducers.  Spilled (``spilled_group``), reducer r merges (or
groups and reduces) one sub-partition of its keys per round; each round's per-key results are written to the job's
spill folder on reducer r's own disk (:func:`written`; a group reducer's ragged leaf as its flat values and row
lengths), then one last run (:func:`kept`) reads them back on each reducer, concatenates them in round order and
stores the concatenation as shard r of the result's variables: the ``KeyedSharded`` of the in-memory run,
partitioned as it is (by hash: the same keys on each reducer, so it joins co-partitioned with the in-memory run's;
by range: reducer r's rounds are its consecutive ranges, sorted).  A reducer holds one round's reduction at a time,
then its whole result twice while it concatenates (the rounds read back, and their concatenation).

Example:
    >>> keys = np.arange(8_000) % 3_000
    >>> job = tmr.MapReduce(lambda k: (k, tf.ones_like(k)), tmr.combiners.sum, by_key=True, max_bytes=20_000)
    >>> with job.run(keys, resident=True, reducers=2, cluster=cluster) as counts:
    ...     len(counts), int(tmr.sum(counts.values))
    (3000, 8000)
"""

from __future__ import annotations

import secrets
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from .._base.device import Device
from .._base.errors import TfMapReduceError
from .._base.task import Task
from .._engine.call import Call
from .._engine.program import Stored
from .._io.strings import Encoding
from .._io.variables import assign_shard, destroy_shard
from .grace import Graced
from .shuffle.plan import KeyedPlan
from .shuffle.sharded import KeyedBuilt, KeyedSharded, keep


def _path(graced: Graced[KeyedPlan], b: int, c: int) -> str:
    return f"{graced.folder}/kept-b{b:05d}-c{c}"


def _cpu(device: str) -> str:
    return f"{Device.parse(device).task}/device:CPU:0"


@attrs.frozen
class StoredColumn:
    """One stored column of a resident result: its container suffix, dtype and row shape, and which of a reducer's
    counts (0: its keys; k: its k-th ragged leaf's values) is its rows."""

    suffix: str
    dtype: tf.DType
    row: tuple[int, ...]
    count: int


def columns(built: KeyedBuilt) -> list[StoredColumn]:
    """The columns ``keep_fetch`` stores for a result of ``built``: the keys, then each value leaf (a ragged leaf's flat
    values and row lengths), as :func:`written` writes them and ``shuffle.sharded.keep`` reads them."""
    found = [StoredColumn("_keys", built.key_dtype, (), 0)]
    ragged = 0
    for j, spec in enumerate(tf.nest.flatten(built.value_specs)):
        if built.ragged and built.ragged[j]:
            ragged += 1
            found += [StoredColumn(f"_v{j}", spec.dtype, tuple(spec.shape), ragged), StoredColumn(f"_l{j}", tf.int64, (), 0)]
        else:
            found.append(StoredColumn(f"_v{j}", spec.dtype, tuple(spec.shape), 0))
    return found


def written(graced: Graced[KeyedPlan], b: int, keys: tf.Tensor, values: Any, reducer: int | None = None) -> tf.Tensor:
    """In the current graph: sub-partition ``b``'s per-key results (``keys``, ``values``, made on its reducer; a
    ``tf.RaggedTensor`` leaf as its flat values and row lengths) written to the spill folder on the reducer's own
    task (``reducer``: another round's, past the sub-partitions); what to fetch once written: the keys' count, then
    each ragged leaf's value count (as ``keep_fetch``)."""
    device = graced.plan.keyed.reducers[b // graced.plan.parts if reducer is None else reducer]
    with tf.device(device), tf.name_scope(f"kept{b}"):
        data, counts = [keys], [tf.size(keys, tf.int64)]
        for leaf in tf.nest.flatten(values):
            if isinstance(leaf, tf.RaggedTensor):
                data += [leaf.flat_values, leaf.row_lengths()]
                counts.append(tf.shape(leaf.flat_values, out_type=tf.int64)[0])
            else:
                data.append(leaf)
    with tf.device(_cpu(device)), tf.name_scope(f"kept{b}"):
        ops = [tf.io.write_file(_path(graced, b, c), tf.io.serialize_tensor(x)) for c, x in enumerate(data)]
        with tf.control_dependencies(ops):
            return tf.stack(counts)


def kept(
    graced: Graced[KeyedPlan],
    counts: dict[int, np.ndarray],
    built: KeyedBuilt,
    call: Call,
    decode: Encoding,
    timeout: float,
    extra: dict[int, int] | None = None,
) -> KeyedSharded:
    """Each reducer's rounds (``counts``: what :func:`written` fetched, by sub-partition) read back from its disk,
    concatenated in round order and kept as its shard of a new resident result of ``built``; the ``KeyedSharded``.
    ``extra``: rounds past the sub-partitions (a hot key's row), each with its reducer, read after that reducer's.
    What a failed run stored is freed."""
    plan = graced.plan
    stored = columns(built)
    name = f"tfmapreduce_{secrets.token_hex(8)}"
    graph = tf.Graph()
    with graph.as_default():
        fetch = []
        for r, device in enumerate(plan.keyed.reducers):
            rounds = [b for b in range(r * plan.parts, (r + 1) * plan.parts) if b in counts and counts[b][0]]
            rounds += [b for b, reducer in (extra or {}).items() if reducer == r]
            ops = []
            for c, column in enumerate(stored):
                pieces = []
                for b in rounds:
                    with tf.device(_cpu(device)), tf.name_scope(f"read{b}"):
                        data = tf.io.parse_tensor(tf.io.read_file(_path(graced, b, c)), column.dtype)
                        pieces.append(tf.ensure_shape(data, (int(counts[b][column.count]), *column.row)))
                with tf.device(device), tf.name_scope(f"keep{r}"):
                    value = tf.concat(pieces, 0) if pieces else tf.zeros((0, *column.row), column.dtype)
                    ops.append(assign_shard(name + column.suffix, r, value))
            total = np.sum([counts[b] for b in rounds], axis=0) if rounds else np.zeros(1 + sum(built.ragged), np.int64)
            with tf.device(device), tf.control_dependencies(ops):
                fetch.append(tf.constant(total, tf.int64))
    try:
        value = call.cluster.run(graph, fetch, {}, tasks=list(plan.tasks), timeout=timeout)
    except BaseException:
        _discard(plan.keyed, name, stored, call, timeout)
        raise
    finally:
        call.cluster.forget(graph)
    return keep(call.cluster, plan.keyed, Stored(value, name), attrs.evolve(built, resident=True), decode)


def _discard(keyed: KeyedPlan, name: str, stored: list[StoredColumn], call: Call, timeout: float) -> None:
    """Free what a failed :func:`kept` may have stored, one run per reducer task (best effort): a task the failure
    lost, marked lost or not, fails only its own run, and the survivors' halves are freed."""
    by_task: dict[Task, list[tuple[int, str]]] = {}
    for r, device in enumerate(keyed.reducers):
        by_task.setdefault(Device.parse(device).task, []).append((r, device))
    for task, reducers in by_task.items():
        if task in call.cluster.lost:
            continue
        graph = tf.Graph()
        with graph.as_default():
            ops = []
            for r, device in reducers:
                with tf.device(device):
                    ops += [destroy_shard(name + column.suffix, r, column.dtype) for column in stored]
        try:
            call.cluster.run(graph, ops, {}, tasks=[task], timeout=timeout)
        except TfMapReduceError:
            pass  # a task lost since: its memory went with it
        finally:
            call.cluster.forget(graph)
