"""What a plan asks of resident data's workers, each in one small run: its strings' lengths, each task's distinct keys.

A keyed plan over resident ``Sharded`` data cannot read its rows on the client.  Two small runs answer what it needs,
and only numbers travel back:

- :func:`sample_lengths`: the UTF-8 lengths of about ``count`` strings drawn at random on the workers (a string
  column's bytes per row, ``forecast.row_bytes``);
- :func:`distinct_per_task`: each task's distinct keys counted exactly where they live (``tf.unique`` of the task's
  shards' keys, on its first shard's device) and, for strings, their UTF-8 bytes: what a keyed combine's task sends
  at most (``partials``).  Its cost is one run that reads the task's keys once (``python -m benchmarks plan_cost``:
  2e6 resident keys of 5e5 distinct, 0.24 s a plan for integers, 0.56 s for strings against 0.04 s with their
  lengths sampled only, on a shared 2-core host).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from ..._base.deadline import effective_timeout
from ..._base.plan import Plan, Shard
from ..._base.task import Task
from ..._cluster.cluster import Cluster
from ..._engine.stats import RunStats, ShardStats, record
from ..._io.resident_source import ResidentData
from .distinct import STRING_BYTES, DistinctKeys


def run_small(cluster: Cluster, plan: Plan, graph: tf.Graph, fetches: Any) -> Any:
    """Run ``graph`` on ``plan``'s tasks, then forget it; the run is recorded in any open ``tmr.stats()`` block (a
    fresh graph: compiled, its shards' rows read where they live, no byte sent)."""
    start = time.perf_counter()
    try:
        return cluster.run(graph, fetches, {}, tasks=plan.tasks, timeout=effective_timeout(None))
    finally:
        cluster.forget(graph)
        shards = tuple(ShardStats(s.index, s.device, s.rows, 0) for s in plan.shards)
        record(RunStats(shards, time.perf_counter() - start, True))


def sample_lengths(data: ResidentData, count: int) -> np.ndarray[Any, Any]:
    """The UTF-8 byte lengths (int64) of about ``count`` rows' strings of ``data``, taken on its workers in one small
    run: each shard's share of ``count`` (in proportion to its rows, rounded up) drawn at random there (a fixed seed
    per shard: the same sample each time), so only the lengths travel.  Empty where it holds no strings or no rows.

    Example (4 shards of 75 rows: 8 drawn from each; ``"éé"`` is 4 bytes):
        >>> with tmr.scatter(np.array(["a", "bcd", "éé"] * 100, object), cluster=cluster) as words:
        ...     lengths = sample_lengths(words, 30)
        >>> lengths.size, sorted(set(lengths.tolist()))
        (32, [1, 3, 4])
    """
    if data.dtype != object or not data.plan.rows:
        return np.zeros(0, np.int64)
    graph = tf.Graph()
    with graph.as_default():
        parts = []
        for shard in data.plan.shards:
            take = min(shard.rows, -(-count * shard.rows // data.plan.rows))
            if take:
                with tf.device(shard.device):
                    picked = tf.random.stateless_uniform([take], (shard.index, 42), 0, shard.rows, tf.int64)
                    rows = tf.gather(data.read(shard), picked)
                    parts.append(tf.reshape(tf.strings.length(rows, unit="BYTE"), [-1]))
    return np.concatenate(run_small(data.cluster, data.plan, graph, parts)).astype(np.int64)


def distinct_per_task(plan: Plan, data: ResidentData) -> dict[Task, DistinctKeys] | None:
    """Each task's :class:`DistinctKeys` of ``data``'s keys over its shards of ``plan``, counted on the workers in one
    run (``tf.unique``, as a run's combiner groups them: each NaN a key of its own), in the plan's task order; None
    where ``data`` is not 1-D or ``plan`` is not where it lives (a job placed elsewhere: its rows bound its keys).

    Example (2 tasks, each of 2 shards; 3 keys in each task's 50 rows):
        >>> with tmr.scatter(np.arange(100) % 3, cluster=cluster) as keys:
        ...     counted = distinct_per_task(keys.plan, keys)
        >>> [d.keys for d in counted.values()], [d.bytes for d in counted.values()]
        ([3, 3], [24, 24])
    """
    if len(data.shape) != 1 or _layout(plan) != _layout(data.plan):
        return None

    def unique(shards: list[Shard]) -> tf.Tensor:
        parts = []
        for s in shards:
            with tf.device(s.device):  # a variable is read on the device that holds it
                parts.append(data.read(s))
        return tf.unique(tf.concat(parts, 0) if len(parts) > 1 else parts[0]).y

    width = STRING_BYTES if data.dtype == object else data.dtype.itemsize
    return count_distinct(data.cluster, plan, unique, strings=data.dtype == object, width=width)


def count_distinct(
    cluster: Cluster, plan: Plan, unique: Callable[[list[Shard]], tf.Tensor | None], *, strings: bool, width: int
) -> dict[Task, DistinctKeys]:
    """Each task's :class:`DistinctKeys`, in the plan's task order, in one small run: ``unique(its shards)`` makes its
    distinct keys on its first shard's device (None: it has none), and only their count and, for ``strings``, their
    UTF-8 bytes travel back; a key's bytes are ``width`` plus those."""
    tasks: dict[Task, list[Shard]] = {}
    for shard in plan.shards:
        tasks.setdefault(shard.task, []).append(shard)
    graph = tf.Graph()
    with graph.as_default():
        fetches = []
        for index, shards in enumerate(tasks.values()):
            with tf.device(shards[0].device), tf.name_scope(f"task{index}"):
                keys = unique(shards)
                if keys is None:
                    fetches.append((tf.constant(0, tf.int64), tf.constant(0, tf.int64)))
                    continue
                own = (
                    tf.reduce_sum(tf.cast(tf.strings.length(keys, unit="BYTE"), tf.int64))
                    if strings
                    else tf.constant(0, tf.int64)
                )
                fetches.append((tf.size(keys, out_type=tf.int64), own))
    counted = run_small(cluster, plan, graph, fetches) if fetches else []
    return {task: DistinctKeys(int(n), int(n) * width + int(own)) for task, (n, own) in zip(tasks, counted, strict=True)}


def _layout(plan: Plan) -> list[tuple[int, int, str]]:
    return [(s.start, s.rows, s.device) for s in plan.shards]
