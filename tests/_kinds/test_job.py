"""MapReduce jobs: one compiled graph per (plan, signature), run as one distributed execution."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import assert_eq, reference, scale
from strategies import arrays, examples, placements, sizes_specs

import tfmapreduce as tmr
from tfmapreduce._base.device import Device
from tfmapreduce._engine import cache as _cache

T0C0 = "/job:local/replica:0/task:0/device:CPU:0"
T1C0 = "/job:local/replica:0/task:1/device:CPU:0"
T1C1 = "/job:local/replica:0/task:1/device:CPU:1"


class Counted:
    """A map function that counts how often it is traced (called while a graph is built)."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args):
        self.calls += 1
        return self.fn(*args)


def _graphs(job: tmr.MapReduce, cluster: tmr.Cluster) -> list[tf.Graph]:
    return [program.graph for program in _cache.programs(cluster).of(job.identity)]


# -- correctness on any partition and placement -------------------------------------------------


def _sum_of_squares(t):
    t = tf.cast(t, tf.float64)
    return tf.reduce_sum(t * t, axis=0)


SUM_OF_SQUARES = tmr.MapReduce(_sum_of_squares, tf.add)


@settings(max_examples=examples(25))
@given(data=st.data())
def test_a_custom_job_equals_numpy_on_any_partition_and_placement(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    x = data.draw(arrays(), label="x")
    sizes = data.draw(sizes_specs(len(x)), label="sizes")
    devices = data.draw(placements(cluster.devices), label="devices")
    plan = SUM_OF_SQUARES.plan(x, cluster=cluster, sizes=sizes, devices=devices)
    result = SUM_OF_SQUARES.run(x, cluster=cluster, sizes=sizes, devices=devices)
    expected = (reference(x).astype(np.float64) ** 2).sum(axis=0)
    assert_eq(result, expected, atol=scale(x, 2), plan=plan, rows=len(x), devices=cluster.devices)


# -- compile once, run many ---------------------------------------------------------------------


def test_a_repeated_run_with_new_data_does_not_retrace(cluster: tmr.LocalCluster) -> None:
    map_fn = Counted(tf.reduce_sum)
    job = tmr.MapReduce(map_fn, tmr.combiners.sum)
    rng = np.random.default_rng(1)
    first = rng.normal(size=(40, 3))
    result, stats = job.run(first, cluster=cluster, sizes=[10, 0, 30], return_stats=True)
    assert stats.compiled
    traced = map_fn.calls
    assert traced == 2  # the two non-empty shards; the empty one is not mapped
    for _ in range(3):
        data = rng.normal(size=(40, 3))
        result, stats = job.run(data, cluster=cluster, sizes=[10, 0, 30], return_stats=True)
        assert not stats.compiled
        assert_eq(result, data.sum(), atol=scale(data))
    assert map_fn.calls == traced
    assert _cache.programs(cluster).count(job.identity) == 1


def test_a_run_like_the_last_reuses_its_plan_and_program_with_this_runs_data(cluster: tmr.LocalCluster) -> None:
    map_fn = Counted(tf.reduce_sum)
    job = tmr.MapReduce(map_fn, tmr.combiners.sum)
    rng = np.random.default_rng(2)
    for sizes in (None, (10, 30)):  # hashable options: the run is kept ready to go again
        traced = None
        for _ in range(3):
            data = rng.normal(size=(40, 3))
            result, stats = job.run(data, cluster=cluster, sizes=sizes, return_stats=True)
            assert_eq(result, data.sum(), atol=scale(data))
            traced = traced or map_fn.calls
        assert not stats.compiled
        assert map_fn.calls == traced
    # float32 data of either sign takes one program: no sum depends on the signs
    x = np.abs(rng.normal(size=4096)).astype(np.float32)
    for data in (x, -x, x, -x):
        assert np.isclose(job.run(data, cluster=cluster), data.sum(dtype=np.float64), rtol=1e-6)
    assert _cache.programs(cluster).count(job.identity) == 3
    # a lost task changes the plan
    cluster.mark_lost("/job:local/task:1")
    try:
        _, stats = job.run(data, cluster=cluster, return_stats=True)
    finally:
        cluster.mark_live()
    assert {s.device.split("/device:")[0] for s in stats.shards} == {"/job:local/replica:0/task:0"}
    _, stats = job.run(data, cluster=cluster, return_stats=True)
    assert len({s.device.split("/device:")[0] for s in stats.shards}) == 2


def test_a_new_signature_or_plan_compiles_again(cluster: tmr.LocalCluster) -> None:
    map_fn = Counted(tf.reduce_sum)
    job = tmr.MapReduce(map_fn, tmr.combiners.sum)
    job.run(np.zeros(10, np.float32), cluster=cluster, sizes=[5, 5])
    calls = map_fn.calls
    _, stats = job.run(np.zeros(10, np.float64), cluster=cluster, sizes=[5, 5], return_stats=True)  # new dtype
    assert stats.compiled
    assert map_fn.calls > calls
    calls = map_fn.calls
    _, stats = job.run(np.zeros((10, 2), np.float64), cluster=cluster, sizes=[5, 5], return_stats=True)  # new shape
    assert stats.compiled
    assert map_fn.calls > calls
    calls = map_fn.calls
    _, stats = job.run(np.zeros((10, 2), np.float64), cluster=cluster, sizes=[4, 6], return_stats=True)  # new plan
    assert stats.compiled
    assert map_fn.calls > calls
    assert _cache.programs(cluster).count(job.identity) == 4


def test_the_same_job_written_again_shares_its_program_and_a_changed_one_does_not(cluster: tmr.LocalCluster, tmp_path) -> None:
    """A new lambda each call builds an equal graph: the kept program runs it (no new session on the workers); a
    changed constant, a changed global or another op is another graph, with its own right result."""
    x = np.arange(12, dtype=np.float32)
    paths = [str(tmp_path / "x.npy")]
    np.save(paths[0], x)

    def scaled(factor: float):
        return tmr.MapReduce(lambda t: tf.reduce_sum(t * factor), tmr.combiners.sum)

    global _FACTOR
    for factor, compiled in [(2.0, True), (2.0, False), (3.0, True)]:
        result, stats = scaled(factor).run(tmr.read_npy(paths), cluster=cluster, sizes=[5, 7], return_stats=True)
        assert result == pytest.approx(factor * x.sum())
        assert stats.compiled == compiled
    for factor, compiled in [(4.0, True), (4.0, False), (5.0, True)]:
        _FACTOR = factor
        job = tmr.MapReduce(lambda t: tf.reduce_sum(t * _FACTOR), tmr.combiners.sum)  # noqa: B023 (the global, read when traced)
        result, stats = job.run(tmr.read_npy(paths), cluster=cluster, sizes=[5, 7], return_stats=True)
        assert result == pytest.approx(factor * x.sum())
        assert stats.compiled == compiled
    result, stats = tmr.MapReduce(tf.reduce_max, tmr.combiners.max).run(
        tmr.read_npy(paths), cluster=cluster, sizes=[5, 7], return_stats=True
    )
    assert result == x.max()
    assert stats.compiled


_FACTOR = 0.0


def test_the_cache_keeps_the_most_recent_graphs(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum)
    rows = _cache.SIZE + 2
    for first in range(rows + 1):
        job.run(np.ones(rows), cluster=cluster, sizes=[first, rows - first])
    assert _cache.programs(cluster).count(job.identity) == _cache.SIZE
    _, stats = job.run(np.ones(rows), cluster=cluster, sizes=[rows, 0], return_stats=True)  # the newest: still cached
    assert not stats.compiled
    _, stats = job.run(np.ones(rows), cluster=cluster, sizes=[0, rows], return_stats=True)  # the oldest: evicted
    assert stats.compiled


def test_input_data_never_enters_the_graph_as_a_constant(cluster: tmr.LocalCluster) -> None:
    x = np.random.default_rng(2).normal(size=(20_000, 5)).astype(np.float32)
    w = np.random.default_rng(3).uniform(size=20_000).astype(np.float32)
    job = tmr.MapReduce(lambda a, b, c: tf.reduce_sum(tf.cast(a * b[:, None] + c, tf.float64), axis=0), tmr.combiners.sum)
    result = job.run((x, w), cluster=cluster, sizes=[5_000, 0, 15_000], broadcast=[np.arange(5.0, dtype=np.float32)])
    assert_eq(result, (x * w[:, None] + np.arange(5.0, dtype=np.float32)).astype(np.float64).sum(axis=0))
    [graph] = _graphs(job, cluster)
    constants = [op for op in graph.get_operations() if op.type == "Const"]
    assert constants, "expected at least the shards' row counts as constants"
    largest = max(tf.make_ndarray(op.get_attr("value")).size for op in constants)
    assert largest <= 16, f"a constant of {largest} elements in the graph"
    assert graph.as_graph_def().ByteSize() < x.nbytes / 20  # the data (400 kB) is not in it: ops and checks only


def test_each_task_combines_its_own_shards_before_the_final_merge(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(lambda t: tf.reduce_sum(t, axis=0), tf.add)
    job.run(np.ones((40, 2)), cluster=cluster, sizes=[10, 10, 10, 10])  # round robin: tasks 0, 1, 0, 1
    [graph] = _graphs(job, cluster)
    merges = [op for op in graph.get_operations() if op.type == "AddV2"]
    per_task = {str(Device.parse(op.device)) for op in merges if op.name.startswith("combine_task")}
    final = {str(Device.parse(op.device)) for op in merges if op.name.startswith("combine/")}
    assert per_task == {T0C0, T1C0}
    assert final == {T0C0}  # two per-task partials cross the network, not four shard outputs
    maps = {op.device for op in graph.get_operations() if op.name.startswith("shard") and op.type == "Sum"}
    assert maps == set(cluster.devices)


# -- stats ---------------------------------------------------------------------------------------


def test_stats_give_each_shards_device_rows_and_bytes(cluster: tmr.LocalCluster) -> None:
    x = np.arange(60, dtype=np.float64).reshape(20, 3)
    devices = ["/job:local/task:1/cpu:1", "/job:local/task:0"]
    result, stats = tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum).run(
        x, cluster=cluster, sizes=[5, 0, 15], devices=devices, return_stats=True
    )
    assert_eq(result, x.sum())
    assert isinstance(stats, tmr.RunStats)
    assert [(s.index, s.device, s.rows) for s in stats.shards] == [(0, T1C1, 5), (1, T0C0, 0), (2, T1C1, 15)]
    assert [s.bytes_sent for s in stats.shards] == [x[:5].nbytes, 0, x[5:].nbytes]
    assert stats.bytes_sent == x.nbytes
    assert stats.compiled
    assert 0 < stats.wall_time < 60


def test_stats_count_the_bytes_of_every_co_partitioned_input(cluster: tmr.LocalCluster) -> None:
    x = np.ones((10, 4), np.float32)
    w = np.ones(10, np.int64)
    _, stats = tmr.MapReduce(lambda a, b: tf.reduce_sum(a), tf.add).run((x, w), cluster=cluster, sizes=[3, 7], return_stats=True)
    assert [s.bytes_sent for s in stats.shards] == [x[:3].nbytes + w[:3].nbytes, x[3:].nbytes + w[3:].nbytes]


def test_recipes_return_stats_too(cluster: tmr.LocalCluster) -> None:
    x = np.arange(10.0)
    value, stats = tmr.mean(x, cluster=cluster, sizes=[4, 6], return_stats=True)
    assert value == 4.5
    assert [s.rows for s in stats.shards] == [4, 6]
    assert stats.bytes_sent == x.nbytes


# -- inputs --------------------------------------------------------------------------------------


def test_co_partitioned_inputs_arrive_as_matching_shards(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(30, 3)), rng.normal(size=(30, 3))
    seen = []

    def dot(x, y):
        seen.append((x.shape[0], y.shape[0]))
        return tf.reduce_sum(x * y)

    assert_eq(tmr.MapReduce(dot, tf.add).run((a, b), cluster=cluster, sizes=[7, 0, 23]), (a * b).sum(), atol=scale(a, 2))
    assert seen == [(7, 7), (23, 23)]


def test_a_co_partitioned_tuple_of_different_dtypes(cluster: tmr.LocalCluster) -> None:
    x = np.arange(12, dtype=np.int32)
    keep = np.array([True, False] * 6)
    job = tmr.MapReduce(lambda v, k: tf.reduce_sum(tf.boolean_mask(v, k)), tmr.combiners.sum)
    assert_eq(job.run((x, keep), cluster=cluster, sizes=[5, 7]), x[keep].sum())


def test_tensors_and_nested_lists_are_inputs_too(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(lambda t: tf.reduce_sum(t, axis=0), tf.add)
    assert_eq(job.run(tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), cluster=cluster, sizes=[1, 2]), np.array([9.0, 12.0]))
    assert_eq(job.run([[1, 2], [3, 4], [5, 6]], cluster=cluster, sizes=[2, 1]), np.array([9, 12]))


def test_a_0_row_input_maps_one_empty_shard(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(lambda t: tf.reduce_sum(t, axis=0), tf.add)
    assert_eq(job.run(np.zeros((0, 3), np.int64), cluster=cluster), np.zeros(3, np.int64))


# -- broadcast values ----------------------------------------------------------------------------


def test_broadcast_values_reach_every_shard_and_new_values_do_not_retrace(cluster: tmr.LocalCluster) -> None:
    def distances(points, centre):
        return tf.reduce_sum(tf.square(points - centre))

    map_fn = Counted(distances)
    job = tmr.MapReduce(map_fn, tf.add)
    x = np.random.default_rng(5).normal(size=(50, 2))
    for i, centre in enumerate([np.zeros(2), np.array([1.0, -2.0]), np.array([3.0, 0.5])]):
        result, stats = job.run(x, cluster=cluster, sizes=[20, 0, 30], broadcast=[centre], return_stats=True)
        assert_eq(result, ((x - centre) ** 2).sum(), atol=scale(x, 2))
        assert stats.compiled == (i == 0)
        assert stats.bytes_sent == x.nbytes  # broadcast values are not counted as shard input
    assert map_fn.calls == 2


def test_a_broadcast_of_a_new_shape_compiles_again(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(lambda t, c: tf.reduce_sum(t) + tf.reduce_sum(c), tf.add)
    _, stats = job.run(np.ones(4), cluster=cluster, sizes=[4], broadcast=[np.ones(2)], return_stats=True)
    assert stats.compiled
    result, stats = job.run(np.ones(4), cluster=cluster, sizes=[4], broadcast=[np.ones(3)], return_stats=True)
    assert stats.compiled
    assert result == 7.0


# -- options --------------------------------------------------------------------------------------


def test_a_timeout_that_is_long_enough_changes_nothing(cluster: tmr.LocalCluster) -> None:
    assert tmr.MapReduce(tf.reduce_sum, tf.add).run(np.arange(5), cluster=cluster, timeout=30) == 10
    assert tmr.sum(np.arange(5), cluster=cluster, timeout=0.5e2) == 10


def test_the_global_timeout_is_a_setting() -> None:
    try:
        tmr.set_timeout(12.5)
        assert tmr.get_timeout() == 12.5
    finally:
        tmr.set_timeout(None)
    with pytest.raises(ValueError, match="positive"):
        tmr.set_timeout(-1)


def test_repr_and_name() -> None:
    job = tmr.MapReduce(tf.reduce_mean, tmr.combiners.weighted_mean)
    assert repr(job) == "MapReduce(reduce_mean/weighted_mean)"
    assert repr(tmr.MapReduce(tf.reduce_mean, tf.add, name="lesson")) == "MapReduce(lesson)"


def test_a_job_runs_on_two_clusters_without_mixing_their_graphs(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(tf.reduce_sum, tf.add)
    with tmr.Cluster.from_spec(cluster.spec) as other:  # a second handle on the same workers
        assert job.run(np.arange(4), cluster=cluster, sizes=[2, 2]) == 6
        result, stats = job.run(np.arange(4), cluster=other, sizes=[2, 2], return_stats=True)
        assert result == 6
        assert stats.compiled  # a graph compiled for one cluster object is not reused for another
