"""``tfmapreduce demo``: the lesson, end to end, on a local cluster the library starts itself."""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf

from .._cluster.local import LocalCluster
from .._engine.stats import stats as tmr_stats
from .._io.resident import scatter
from .._kinds.mapreduce import MapReduce
from .._ops.combine import WEIGHTED_MEAN
from ..recipes._statistics import mean, variance


def _step(title: str) -> float:
    print(f"\n== {title}")
    return time.perf_counter()


def _done(started: float) -> None:
    print(f"   ({(time.perf_counter() - started) * 1000:.1f} ms)")


def main(workers: int = 2) -> int:
    """Run the demo; returns the process exit code."""
    started = _step(f"Starting a local cluster of {workers} workers")
    with LocalCluster(workers=workers) as cluster:
        for job, addresses in cluster.spec.items():
            print(f"   job {job!r}: {', '.join(addresses)}")
        print("   devices: " + ", ".join(cluster.devices))
        _done(started)

        started = _step("The lesson: x = 2; y1 = x + 300 on task 0; y2 = x - 66 on task 1; y = y1 + y2")
        graph = tf.Graph()
        with graph.as_default():
            x = tf.constant(2)
            with tf.device("/job:local/task:0"):
                y1 = x + 300
            with tf.device("/job:local/task:1" if workers > 1 else "/job:local/task:0"):
                y2 = x - 66
            y = y1 + y2
        value = cluster.run(graph, y, {}, tasks=list(cluster.tasks), timeout=30)
        print(f"   y1 ran on {y1.device}, y2 on {y2.device}")
        print(f"   tfmapreduce: {value}    python: {2 + 300 + 2 - 66}")
        cluster.forget(graph)
        _done(started)

        data = np.random.default_rng(0).random(100, dtype=np.float32)
        sizes = [30, 70]
        mapreduce: MapReduce[float] = MapReduce(tf.reduce_mean, WEIGHTED_MEAN)
        started = _step("Plan of a distributed mean over two uneven slices (30 / 70 rows)")
        print("   " + mapreduce.plan(data, cluster=cluster, sizes=sizes).explain().replace("\n", "\n   "))
        _done(started)

        started = _step("Distributed mean, slice means weighted by slice size (first run compiles)")
        result, stats = mapreduce.run(data, cluster=cluster, sizes=sizes, return_stats=True)
        for s in stats.shards:
            print(f"   shard {s.index}: {s.rows} rows, {s.bytes_sent} bytes sent, mapped on {s.device}")
        print(f"   tfmapreduce: {result:.7f}    numpy: {data.astype(np.float64).mean():.7f}")
        naive = (data[:30].mean() + data[30:].mean()) / 2
        print(f"   (the lesson's unweighted (mean1 + mean2) / 2 would give {naive:.7f}: wrong for uneven slices)")
        _done(started)

        started = _step("The same mapreduce again: compiled once, so no tracing")
        result, stats = mapreduce.run(data, cluster=cluster, sizes=sizes, return_stats=True)
        print(f"   tfmapreduce: {result:.7f}    compiled this run: {stats.compiled}")
        _done(started)

        big = np.random.default_rng(1).normal(1e6, 1.0, 10**6).astype(np.float32)
        started = _step("Mean and variance of 1e6 numbers near 1e6, shipped to the workers")
        print(f"   mean     tfmapreduce: {mean(big, cluster=cluster):.6f}    numpy: {big.astype(np.float64).mean():.6f}")
        print(f"   variance tfmapreduce: {variance(big, cluster=cluster):.6f}    numpy: {big.astype(np.float64).var():.6f}")
        _done(started)

        started = _step("The same data made resident: scattered once, then reduced where it lives")
        with scatter(big, cluster=cluster) as resident:
            with tmr_stats() as collected:
                m = mean(resident)
            print(f"   mean tfmapreduce: {m:.6f}    bytes sent this run: {collected.last.bytes_sent}")
        _done(started)
    print("\nThe workers have stopped.")
    return 0
