"""A resident keyed combine over its reducers' budget, spilled: its rounds' results kept on their reducers.

``resident=True`` promises the result stays on the reducers.  Spilled (``spilled_group``), reducer r merges one
sub-partition of its keys per round; each round's per-key results are written to the job's spill folder on
reducer r's own disk (:func:`written`), then one last run (:func:`kept`) reads them back on each reducer, concatenates
them in round order and stores the concatenation as shard r of the result's variables: the ``KeyedSharded`` of the
in-memory run, partitioned as it is (by hash: the same keys on each reducer, so it joins co-partitioned with the
in-memory run's; by range: reducer r's rounds are its consecutive ranges, sorted).  A reducer holds one round's
merge at a time, then its whole result twice while it concatenates (the rounds read back, and their concatenation).

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

import tensorflow as tf

from .._base.device import Device
from .._base.errors import TfMapReduceError
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


def written(graced: Graced[KeyedPlan], b: int, keys: tf.Tensor, values: Any) -> tf.Tensor:
    """In the current graph: sub-partition ``b``'s per-key results (``keys``, ``values``, made on its reducer) written
    to the spill folder on the reducer's own task; what to fetch: their rows, once written."""
    device = graced.plan.keyed.reducers[b // graced.plan.parts]
    with tf.device(_cpu(device)), tf.name_scope(f"kept{b}"):
        ops = [
            tf.io.write_file(_path(graced, b, c), tf.io.serialize_tensor(leaf))
            for c, leaf in enumerate([keys, *tf.nest.flatten(values)])
        ]
        with tf.control_dependencies(ops):
            return tf.size(keys, tf.int64)


def kept(
    graced: Graced[KeyedPlan], rows: dict[int, int], specs: Any, call: Call, decode: Encoding, timeout: float
) -> KeyedSharded:
    """Each reducer's rounds (``rows``: the rows :func:`written` wrote, by sub-partition) read back from its disk,
    concatenated in round order and kept as its shard of a new resident result (``specs``: the values' row specs);
    the ``KeyedSharded``.  What a failed run stored is freed."""
    plan = graced.plan
    columns = [tf.TensorSpec((), graced.key_dtype), *tf.nest.flatten(specs)]
    suffixes = ["_keys", *(f"_v{j}" for j in range(len(columns) - 1))]
    name = f"tfmapreduce_{secrets.token_hex(8)}"
    graph = tf.Graph()
    with graph.as_default():
        fetch = []
        for r, device in enumerate(plan.keyed.reducers):
            rounds = [b for b in range(r * plan.parts, (r + 1) * plan.parts) if rows.get(b)]
            ops = []
            for c, (spec, suffix) in enumerate(zip(columns, suffixes, strict=True)):
                pieces = []
                for b in rounds:
                    with tf.device(_cpu(device)), tf.name_scope(f"read{b}"):
                        data = tf.io.parse_tensor(tf.io.read_file(_path(graced, b, c)), spec.dtype)
                        pieces.append(tf.ensure_shape(data, (rows[b], *spec.shape)))
                with tf.device(device), tf.name_scope(f"keep{r}"):
                    column = tf.concat(pieces, 0) if pieces else tf.zeros((0, *spec.shape), spec.dtype)
                    ops.append(assign_shard(name + suffix, r, column))
            with tf.device(device), tf.control_dependencies(ops):
                fetch.append(tf.constant([sum(rows.get(b, 0) for b in rounds)], tf.int64))
    try:
        value = call.cluster.run(graph, fetch, {}, tasks=list(plan.tasks), timeout=timeout)
    except BaseException:
        _discard(plan.keyed, name, columns, suffixes, call, timeout)
        raise
    finally:
        call.cluster.forget(graph)
    return keep(call.cluster, plan.keyed, Stored(value, name), KeyedBuilt(graced.key_dtype, specs, True), decode)


def _discard(keyed: KeyedPlan, name: str, columns: list[tf.TensorSpec], suffixes: list[str], call: Call, timeout: float) -> None:
    """Free what a failed :func:`kept` may have stored, on the reducers still live (best effort)."""
    graph = tf.Graph()
    with graph.as_default():
        ops = []
        for r, device in enumerate(keyed.reducers):
            if Device.parse(device).task in call.cluster.lost:
                continue
            with tf.device(device):
                ops += [destroy_shard(name + suffix, r, spec.dtype) for spec, suffix in zip(columns, suffixes, strict=True)]
    try:
        if ops:
            call.cluster.run(graph, ops, {}, tasks=list(keyed.tasks), timeout=timeout)
    except TfMapReduceError:
        pass  # a task lost since: its memory went with it
    finally:
        call.cluster.forget(graph)
