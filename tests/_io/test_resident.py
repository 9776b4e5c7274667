"""Resident data: scatter, generate and Sharded (gather, rebuild, delete).

A repeated run over resident data ships no input and does not retrace; every
recipe and ``MapReduce.run`` take a Sharded; deleting one frees the worker's
memory; a Sharded on a closed or lost cluster raises ClusterError.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr
from tfmapreduce import recipes

MB = 1 << 20


def uneven(rows: int) -> list[int]:
    return [rows // 4, 0, rows // 2, rows - rows // 4 - rows // 2]


@pytest.fixture(scope="module")
def lean() -> Iterator[tmr.LocalCluster]:
    """A dedicated one-worker cluster whose memory the tests read.

    Its worker runs with oneDNN off: with TensorFlow's default oneDNN build, freed
    tensors go back to oneDNN's allocator pool (reused by the next tensors) instead
    of to the operating system, so the worker's RSS would not show the release.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
        local = tmr.LocalCluster(workers=1)
    with local:
        yield local


def rss(pid: int) -> int:
    """The resident memory of a process, in bytes (Linux)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def settled_rss(pid: int) -> int:
    time.sleep(0.2)
    return rss(pid)


def index_rows(start: int, stop: int) -> tf.Tensor:
    """Rows that depend only on their index (so any partition builds the same array): (rows, 2) float64."""
    i = tf.cast(tf.range(start, stop), tf.float64)
    return tf.stack([tf.sin(0.37 * i), tf.math.floormod(i * 7.0, 11.0)], axis=1)


def overwrite_with_zeros(data: tmr.Sharded, index: int) -> None:
    """Clobber one shard's variable on its worker (white box: how a restarted worker would lose it)."""
    shard = data.plan.shards[index]
    graph = tf.Graph()
    with graph.as_default(), tf.device(shard.device):
        op = tf.raw_ops.AssignVariableOp(resource=data._handle(shard), value=tf.zeros((shard.rows, *data.shape[1:]), data.dtype))
    data.cluster.run(graph, op, {}, tasks=list(data.plan.tasks), timeout=30)
    data.cluster.forget(graph)


# --------------------------------------------------------------------------- every recipe takes a Sharded


def test_every_recipe_and_mapreduce_accept_sharded(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(100, 3))
    w = rng.random(100)
    labels = (x[:, 0] + 0.3 * rng.normal(size=100) > 0).astype(np.float64)
    with (
        tmr.scatter(x, cluster=cluster, sizes=uneven(100)) as rx,
        tmr.scatter(w, cluster=cluster, sizes=uneven(100)) as rw,
        tmr.scatter(labels, cluster=cluster, sizes=uneven(100)) as ry,
    ):
        np.testing.assert_allclose(tmr.mean(rx), x.mean())
        np.testing.assert_allclose(tmr.mean(rx, axis=0), x.mean(axis=0))
        np.testing.assert_allclose(tmr.sum(rx, axis=0), x.sum(axis=0))
        assert tmr.min(rx) == x.min()
        np.testing.assert_array_equal(tmr.max(rx, axis=0), x.max(axis=0))
        assert tmr.count(rx) == 100
        np.testing.assert_allclose(tmr.variance(rx, axis=0, ddof=1), x.var(axis=0, ddof=1))
        np.testing.assert_allclose(tmr.std(rx), x.std())
        np.testing.assert_allclose(tmr.weighted_mean(rx, rw), np.average(x, axis=0, weights=w))
        n, m, m2 = recipes.moments(rx)
        np.testing.assert_allclose([n, m, m2], [x.size, x.mean(), ((x - x.mean()) ** 2).sum()])
        counts, edges = recipes.histogram(rx, 6)
        np.testing.assert_array_equal(counts, np.histogram(x, 6)[0])
        np.testing.assert_array_equal(edges, np.histogram(x, 6)[1])
        model = recipes.linear_regression(rx, rw)
        np.testing.assert_allclose(
            [*model.coef, model.intercept], np.linalg.lstsq(np.c_[x, np.ones(100)], w, rcond=None)[0], rtol=1e-9
        )
        assert recipes.kmeans(rx, 3, iters=2).centroids.shape == (3, 3)
        assert recipes.logistic_regression(rx, ry, steps=3).history[-1].loss < np.log(2)
        coef, _ = recipes.model_average(recipes.least_squares_fit, (rx, rw))
        assert coef.shape == (3,)
        job = tmr.MapReduce(lambda a, b: tf.reduce_sum(a * b[:, None], axis=0), tmr.combiners.sum)
        np.testing.assert_allclose(job.run((rx, rw)), (x * w[:, None]).sum(axis=0))
        np.testing.assert_allclose(job.run((rx, w)), (x * w[:, None]).sum(axis=0))  # resident beside shipped
        assert job.plan((x, rw)) == rx.plan


def test_a_repeated_run_ships_nothing_and_does_not_retrace(cluster: tmr.LocalCluster) -> None:
    x = np.random.default_rng(1).random((4000, 4)).astype(np.float32)
    job = tmr.MapReduce(lambda t: tf.reduce_sum(tf.cast(t, tf.float64), axis=0), tmr.combiners.sum)
    _, shipped = job.run(x, cluster=cluster, sizes=tmr.weights(1, 3), return_stats=True)
    assert shipped.bytes_sent == x.nbytes
    with tmr.scatter(x, cluster=cluster, sizes=tmr.weights(1, 3)) as data:
        first, stats1 = job.run(data, return_stats=True)
        again, stats2 = job.run(data, return_stats=True)
        np.testing.assert_allclose(again, x.astype(np.float64).sum(axis=0), rtol=1e-12)
        np.testing.assert_array_equal(first, again)
        assert stats1.compiled is True
        assert stats2.compiled is False
        assert stats1.bytes_sent == stats2.bytes_sent == 0
        assert [s.rows for s in stats2.shards] == [1000, 3000]
        tmr.mean(data)
        mean, stats = tmr.mean(data, return_stats=True)
        assert (stats.bytes_sent, stats.compiled) == (0, False)
        assert mean == pytest.approx(x.astype(np.float64).mean(), rel=1e-6)
        # every iteration of an iterative recipe is such a run
        result = recipes.kmeans(data, 4, iters=4, tol=0.0)
        assert all(s.stats.bytes_sent == 0 for s in result.history)
        assert not any(s.stats.compiled for s in result.history[1:])
        # and host data given to an iterative recipe is scattered once: later rounds ship nothing
        shipped_km = recipes.kmeans(x, 4, iters=4, tol=0.0, cluster=cluster, sizes=tmr.weights(1, 3))
        assert [s.stats.bytes_sent for s in shipped_km.history] == [0, 0, 0, 0]
        np.testing.assert_allclose(shipped_km.centroids, result.centroids, rtol=1e-12)


def test_broadcast_changes_do_not_retrace(cluster: tmr.LocalCluster) -> None:
    x = np.arange(12.0).reshape(6, 2)
    job = tmr.MapReduce(lambda t, scale, shift: tf.reduce_sum(t * scale + shift, axis=0), tmr.combiners.sum)
    with tmr.scatter(x, cluster=cluster, sizes=[2, 0, 4]) as data:
        compiled = []
        for scale, shift in [([1.0, 2.0], 0.0), ([3.0, -1.0], 5.0), ([0.5, 0.5], -2.0)]:
            value, stats = job.run(data, broadcast=(np.array(scale), np.float64(shift)), return_stats=True)
            np.testing.assert_allclose(value, (x * scale + shift).sum(axis=0))
            compiled.append(stats.compiled)
        assert compiled == [True, False, False]


# --------------------------------------------------------------------------- which cluster


def test_cluster_may_be_omitted_and_another_cluster_is_refused(cluster: tmr.LocalCluster) -> None:
    x = np.arange(20.0).reshape(10, 2)
    other = tmr.Cluster.from_spec(cluster.spec)  # the same workers, but another Cluster object
    try:
        with tmr.scatter(x, cluster=cluster) as data:
            assert tmr.sum(data) == x.sum()
            assert tmr.sum(data, cluster=cluster) == x.sum()
            job = tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum)
            for call in (
                lambda: job.run(data, cluster=other),
                lambda: tmr.mean(data, cluster=other),
                lambda: recipes.kmeans(data, 2, cluster=other),
                lambda: recipes.logistic_regression(data, np.ones(10), cluster=other),
                lambda: recipes.histogram(data, 3, cluster=other),
            ):
                with pytest.raises(tmr.ClusterError, match="another cluster"):
                    call()
            with pytest.raises(TypeError, match="do not apply to resident"):
                tmr.mean(data, sizes=[5, 5])
            with (
                tmr.scatter(x[:, 0], cluster=cluster, sizes=[3, 7]) as column,
                pytest.raises(tmr.InputError, match="share one plan"),
            ):
                job.run((data, column))
    finally:
        other.close()


# --------------------------------------------------------------------------- gather, rebuild


@pytest.mark.parametrize(
    ("x", "sizes"),
    [
        (np.random.default_rng(2).random((37, 3)).astype(np.float32), [10, 0, 27]),
        (np.arange(-50, 50, dtype=np.int64), tmr.weights(1, 3)),
        (np.zeros((0, 2), np.float64), None),
    ],
    ids=["float32-2d-empty-shard", "int64-weights", "no-rows"],
)
def test_gather_round_trips(cluster: tmr.LocalCluster, x: np.ndarray, sizes: object) -> None:
    with tmr.scatter(x, cluster=cluster, sizes=sizes) as data:
        back = data.gather()
        assert back.dtype == x.dtype
        np.testing.assert_array_equal(back, x)
        assert (data.shape, data.dtype) == (x.shape, x.dtype)
        assert "shard" in data.explain()


def test_rebuild_restores_overwritten_shards(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    x = np.arange(30.0).reshape(15, 2)
    tmr.save_shards(x, tmp_path, sizes=[5, 10])
    made = [
        tmr.scatter(x, cluster=cluster, sizes=[4, 0, 11]),
        tmr.generate(index_rows, rows=15, cluster=cluster, sizes=[4, 0, 11]),
        tmr.load_shards(tmp_path, cluster=cluster),
    ]
    try:
        for data in made:
            original = data.gather()
            last = len(data.plan.shards) - 1
            overwrite_with_zeros(data, last)
            damaged = data.gather()
            assert not damaged[data.plan.shards[last].start :].any()
            data.rebuild([last])
            np.testing.assert_array_equal(data.gather(), original)
            overwrite_with_zeros(data, 0)
            data.rebuild()
            np.testing.assert_array_equal(data.gather(), original)
    finally:
        for data in made:
            data.delete()


# --------------------------------------------------------------------------- memory


def test_delete_and_with_free_the_workers_memory(lean: tmr.LocalCluster) -> None:
    x = np.ones(50_000_000, np.float32)  # 200 MB
    size = x.nbytes
    pid = lean.pids[0]
    data = tmr.scatter(x, cluster=lean)
    loaded = settled_rss(pid)
    assert tmr.sum(data) == x.size
    data.delete()
    freed = loaded - settled_rss(pid)
    assert freed > 0.75 * size, f"delete() freed {freed / MB:.0f} MB of a {size / MB:.0f} MB array"
    assert "deleted" in repr(data)
    data.delete()  # twice is fine
    for use in (lambda: tmr.mean(data), data.gather, data.rebuild, lambda: recipes.kmeans(data, 1)):
        with pytest.raises(tmr.ClusterError, match="was deleted"):
            use()
    with tmr.scatter(x, cluster=lean) as data:
        loaded = settled_rss(pid)
    freed = loaded - settled_rss(pid)
    assert freed > 0.75 * size, f"leaving the with block freed {freed / MB:.0f} MB of a {size / MB:.0f} MB array"


# --------------------------------------------------------------------------- a cluster that is gone


def test_sharded_on_a_lost_or_closed_cluster_raises_cluster_error() -> None:
    x = np.arange(10.0)
    job = tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum)
    with tmr.LocalCluster(workers=1) as doomed:
        data = tmr.scatter(x, cluster=doomed)
        assert tmr.sum(data) == 45.0
        os.kill(doomed.pids[0], signal.SIGKILL)
        with pytest.raises(tmr.WorkerUnavailableError):
            tmr.sum(data, timeout=3)  # the master itself is gone: found at the deadline
    for use in (
        lambda: tmr.mean(data),
        lambda: job.run(data),
        data.gather,
        data.rebuild,
        lambda: recipes.kmeans(data, 1),
        lambda: recipes.histogram(data, 2),
    ):
        with pytest.raises(tmr.ClusterError, match="closed"):
            use()
    data.delete()  # nothing left to free: no error


# --------------------------------------------------------------------------- worker-side sources


def test_generate_equals_the_function_in_one_process(cluster: tmr.LocalCluster) -> None:
    rows = 1001
    expected = index_rows(0, rows).numpy()
    with tmr.generate(index_rows, rows=rows, cluster=cluster, sizes=uneven(rows)) as data:
        assert [s.rows for s in data.plan.shards] == uneven(rows)
        np.testing.assert_array_equal(data.gather(), expected)
        mean, stats = tmr.mean(data, axis=0, return_stats=True)
        np.testing.assert_allclose(mean, expected.mean(axis=0), rtol=1e-12)
        assert stats.bytes_sent == 0
    ints = lambda a, b: tf.math.floormod(tf.range(a, b, dtype=tf.int64) * 7919, 1000)  # noqa: E731
    with tmr.generate(ints, rows=500, cluster=cluster, sizes=tmr.weights(1, 3)) as data:
        np.testing.assert_array_equal(data.gather(), ints(0, 500).numpy())
        assert tmr.sum(data) == int(ints(0, 500).numpy().sum())
    with pytest.raises(tmr.MapFunctionError, match="must return"):
        tmr.generate(lambda a, b: tf.zeros([3]), rows=10, cluster=cluster)
