"""Keyed jobs with partitioner="range": reducers hold contiguous, sorted key ranges, and results equal the hash ones."""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import draw_keys, examples, size_lists

import tfmapreduce as tmr
from tfmapreduce._ops.splitters import choose, ranges_of, sample


def reference(keys: np.ndarray, values: np.ndarray, fn: Callable[[np.ndarray], Any]) -> dict[Any, Any]:
    """``fn`` of each key's values, computed by numpy on the whole input."""
    groups: dict[Any, list[Any]] = collections.defaultdict(list)
    for k, v in zip(keys.tolist(), values.tolist(), strict=True):
        groups[k].append(v)
    return {k: fn(np.array(v)) for k, v in groups.items()}


def shards_of(array: tmr.Sharded) -> list[np.ndarray]:
    """A resident array's shards, in the order of its plan (shard r on reducer r)."""
    whole = array.gather()
    return np.split(whole, np.cumsum(array.plan.sizes)[:-1])


def assert_ordered(result: tmr.KeyedSharded) -> None:
    """Each reducer's keys sorted and distinct, all below the next reducer's: the shards concatenate in key order."""
    shards = [np.array(s.tolist(), dtype=object) if s.dtype == object else s for s in shards_of(result.keys)]
    assert len(shards) == len(result.plan.shards)
    for keys in shards:
        assert all(a < b for a, b in zip(keys.tolist(), keys.tolist()[1:], strict=False))
    full = [s.tolist() for s in shards if len(s)]
    for below, above in itertools.pairwise(full):
        assert below[-1] < above[0]


@st.composite
def keyed(draw: st.DrawFn, kinds: tuple[str, ...] = ("int32", "int64", "str")) -> tuple[np.ndarray, np.ndarray]:
    kind = draw(st.sampled_from(kinds))
    rows = draw(st.integers(0, 40))
    keys = draw_keys(draw, kind, rows, strings=8, ints=10, small=8)
    values = np.array(draw(st.lists(st.integers(-1000, 1000), min_size=rows, max_size=rows)), np.int64)
    return keys, values


@settings(max_examples=examples(10))
@given(data=st.data())
def test_range_equals_hash_and_numpy(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    keys, values = data.draw(keyed())
    layout = {"sizes": data.draw(size_lists(len(keys))), "reducers": data.draw(st.integers(1, 4))}
    ranged = tmr.sum_by_key(keys, values, cluster=cluster, partitioner="range", **layout)
    hashed = tmr.sum_by_key(keys, values, cluster=cluster, **layout)
    assert ranged.to_dict() == hashed.to_dict() == reference(keys, values, lambda v: int(v.sum()))
    assert ranged.keys.tolist() == hashed.keys.tolist()  # ascending, as the hash result is sorted


@settings(max_examples=examples(6))
@given(data=st.data())
def test_a_resident_result_is_ordered_by_reducer(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    keys, _ = data.draw(keyed())
    reducers = data.draw(st.integers(2, 4))
    sizes = data.draw(size_lists(len(keys)))
    with tmr.count_by_key(keys, cluster=cluster, sizes=sizes, reducers=reducers, partitioner="range", resident=True) as r:
        assert r.partitioner == "range"
        assert len(r.plan.shards) == reducers
        assert_ordered(r)
        assert r.gather().to_dict() == collections.Counter(keys.tolist())


def test_skewed_keys_stay_on_one_reducer_and_spread_the_rest(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(1)
    keys = np.where(rng.random(20_000) < 0.99, 7, rng.integers(-5_000, 5_000, 20_000)).astype(np.int64)
    values = rng.normal(size=keys.size)
    with tmr.mean_by_key(keys, values, cluster=cluster, reducers=4, partitioner="range", resident=True) as r:
        assert_ordered(r)
        table = r.gather()
    expected = reference(keys, values, np.mean)
    assert table.keys.tolist() == sorted(expected)
    np.testing.assert_allclose(table.values, [expected[k] for k in table.keys.tolist()], rtol=1e-12)
    spread = tmr.mean_by_key(np.arange(10_000), np.ones(10_000), cluster=cluster, reducers=4, partitioner="range", resident=True)
    with spread:  # distinct keys: each range within twice its fair share
        assert max(spread.plan.sizes) <= 2 * 10_000 / 4
        assert sum(spread.plan.sizes) == 10_000


@pytest.mark.parametrize("kind", ["int64", "str"])
def test_a_group_reducer_takes_ranges(cluster: tmr.LocalCluster, kind: str) -> None:
    rng = np.random.default_rng(2)
    pool = np.array([f"k{i:03d}" for i in range(60)] + ["", "é", "z"], dtype=object)
    keys = pool[rng.integers(0, pool.size, 3_000)] if kind == "str" else rng.integers(-100, 100, 3_000)
    keys[:1_500] = keys[0]  # half the rows on one key
    values = rng.normal(size=keys.size)
    hashed = tmr.median_by_key(keys, values, cluster=cluster, reducers=3)
    ranged = tmr.median_by_key(keys, values, cluster=cluster, reducers=3, partitioner="range")
    assert ranged.keys.tolist() == hashed.keys.tolist() == sorted(set(keys.tolist()))
    np.testing.assert_array_equal(ranged.values, hashed.values)
    expected = reference(keys, values, np.median)  # bit for bit: the mean of the middle two, as np.median
    np.testing.assert_array_equal(ranged.values, [expected[k] for k in ranged.keys.tolist()])
    with tmr.collect_by_key(keys, values, cluster=cluster, reducers=3, partitioner="range", resident=True) as r:
        assert_ordered(r)  # ragged rows travel with their keys
        collected = r.gather()
    assert {k: sorted(v.tolist()) for k, v in collected} == {k: sorted(v) for k, v in reference(keys, values, list).items()}


def test_empty_shards_one_key_and_no_rows(cluster: tmr.LocalCluster) -> None:
    one = tmr.sum_by_key(np.full(9, 5), np.arange(9), cluster=cluster, sizes=[0, 9, 0, 0], reducers=4, partitioner="range")
    assert one.to_dict() == {5: 36}
    none = tmr.count_by_key(np.array([], np.int64), cluster=cluster, reducers=3, partitioner="range")
    assert len(none) == 0
    with tmr.count_by_key(np.array([3, 3]), cluster=cluster, reducers=3, partitioner="range", resident=True) as r:
        assert sum(r.plan.sizes) == 1
        assert r.gather().to_dict() == {3: 2}


def test_a_custom_job_and_its_plan_say_range(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(lambda k, v: (k % 100, v), tmr.combiners.max, by_key=True)
    x = (np.arange(1_000), np.arange(1_000.0))
    plan = job.plan(x, cluster=cluster, reducers=2, partitioner="range")
    assert plan.partitioner == "range"
    assert "keys by sampled range" in plan.explain()
    assert "range 1 →" in plan.explain()
    assert "keys by stable hash" in job.plan(x, cluster=cluster, reducers=2).explain()
    result = job.run(x, cluster=cluster, reducers=3, partitioner="range")
    assert result.keys.tolist() == list(range(100))
    assert result.values.tolist() == [float(v) for v in range(900, 1000)]


def test_a_join_of_ranged_results_is_not_taken_as_co_partitioned(cluster: tmr.LocalCluster) -> None:
    a, b = np.arange(0, 200, 2), np.arange(0, 300, 3)
    with (
        tmr.count_by_key(a, cluster=cluster, reducers=2, partitioner="range", resident=True) as left,
        tmr.count_by_key(b, cluster=cluster, reducers=2, partitioner="range", resident=True) as right,
    ):
        assert tmr.plan_join(left, right, cluster=cluster).strategy != "co-partitioned"
        joined = tmr.join(left, right, cluster=cluster)
    assert sorted(joined.keys.tolist()) == sorted(set(a.tolist()) & set(b.tolist()))


def test_splitters_in_the_graph() -> None:
    keys = tf.constant(np.arange(1_000, dtype=np.int64)[::-1])
    splitters = choose([sample(keys, 0, 4)], 4)
    assert splitters.numpy().tolist() == [250, 500, 750]
    ranges = ranges_of(keys, splitters).numpy()
    assert np.bincount(ranges).tolist() == [250, 250, 250, 250]
    assert choose([sample(tf.constant([], tf.int64), 0, 3)], 3).numpy().tolist() == []  # no sample, no splitter
    words = tf.constant([b"b", b"a", b"", b"c", b"ab"])
    assert ranges_of(words, tf.constant([b"ab", b"b"])).numpy().tolist() == [2, 0, 0, 2, 1]


def test_bad_partitioners_are_refused(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(ValueError, match=r"partitioner must be 'hash' .* or 'range' .*, got 'sorted'"):
        tmr.RunOptions.of(partitioner="sorted")
    with pytest.raises(ValueError, match="partitioner must be"):
        tmr.count_by_key(np.arange(3), cluster=cluster, partitioner="Range")
    with pytest.raises(TypeError, match="partitioner='range' applies to keyed jobs only"):
        tmr.MapReduce(tf.reduce_sum, tf.add).run(np.arange(4), cluster=cluster, partitioner="range")
    with pytest.raises(TypeError, match="partitioner='range' applies to keyed jobs only"):
        tmr.sum(np.arange(4), cluster=cluster, partitioner="range")
    with pytest.raises(TypeError, match="partitioner='range' applies to keyed jobs only"):
        tmr.map(lambda v: v, np.arange(4), cluster=cluster, partitioner="range")
    with pytest.raises(TypeError, match="join takes partitioner='hash' only"):
        tmr.join((np.arange(3), np.arange(3)), (np.arange(3), np.arange(3)), cluster=cluster, partitioner="range")
    assert tmr.RunOptions.of().partitioner == "hash"
