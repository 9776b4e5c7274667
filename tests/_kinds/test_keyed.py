"""Keyed jobs: map to (key, value), combine per key, shuffle by key hash to reducers — on real workers.

Every result equals a single-process reference (collections.Counter, numpy per key) exactly
for counts and integer sums, within 1e-6 for float aggregates, for any partition (empty
shards included), any number of reducers and any batch size.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import RTOL
from strategies import draw_keys, examples, size_lists

import tfmapreduce as tmr
from tfmapreduce._ops.per_key import int_bucket

WORDS = ["a", "b", "", "ünï", "日本", "the", "x y"]
"""Word material: unicode, and pieces that join into longer words."""

BATCHES = st.sampled_from([None, 1, 2, 5])
"""batch_rows=: None (one batch per shard here) or small enough that every shard folds several batches."""


def reducer_counts() -> st.SearchStrategy[int]:
    return st.integers(1, 4)  # the session cluster has 4 devices


def reference(keys: np.ndarray, values: np.ndarray | None, reduce: Callable[[np.ndarray], Any]) -> dict[Any, Any]:
    """{key: reduce(values of key)} in one process (pure Python grouping, numpy per group)."""
    groups: dict[Any, list[int]] = collections.defaultdict(list)
    for i, key in enumerate(keys.tolist()):
        groups[key].append(i)
    return {k: reduce(values[rows] if values is not None else np.array(rows)) for k, rows in groups.items()}


def assert_keyed(result: tmr.KeyedResult, expected: dict[Any, Any], *, exact: bool) -> None:
    """Same keys, sorted ascending; values exactly equal (integers) or within RTOL (floats)."""
    assert isinstance(result, tmr.KeyedResult)
    keys = result.keys.tolist()
    assert keys == sorted(expected), f"keys {keys[:10]} vs expected {sorted(expected)[:10]}"
    assert len(result) == len(expected)
    for i, key in enumerate(keys):
        got, want = result.value_at(i), expected[key]
        if exact:
            assert np.asarray(got).dtype.kind in "iu", f"{key!r}: expected an exact integer, got {got!r}"
            np.testing.assert_array_equal(got, want, err_msg=repr(key))
        else:
            np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=RTOL, atol=1e-9, err_msg=repr(key))


# --------------------------------------------------------------------------- word count


@st.composite
def corpora(draw: st.DrawFn) -> list[str]:
    words = st.lists(st.sampled_from(WORDS), max_size=6)
    spaces = st.sampled_from([" ", "  ", "\t", " \n "])
    lines = draw(st.lists(st.tuples(words, spaces).map(lambda p: p[1].join(p[0])), max_size=30))
    return lines


@settings(max_examples=examples(15))
@given(data=st.data())
def test_word_count_equals_counter(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    lines = data.draw(corpora())
    sizes = data.draw(size_lists(len(lines)))
    reducers = data.draw(reducer_counts())
    batch_rows = data.draw(BATCHES)
    result = tmr.recipes.word_count(
        np.array(lines, dtype=object), cluster=cluster, sizes=sizes, reducers=reducers, batch_rows=batch_rows
    )
    expected = collections.Counter(w.decode() for line in lines for w in line.encode().split())
    assert result.to_dict() == expected
    assert result.keys.tolist() == sorted(expected)
    assert all(type(k) is str for k in result.keys.tolist())
    np.testing.assert_array_equal(result.values, [expected[k] for k in sorted(expected)])


def test_word_count_of_bytes_gives_bytes_and_sorts_in_byte_order(cluster: tmr.LocalCluster) -> None:
    lines = [b"b \xc3\xa9 a", b"A b", b"\xff z"]
    result = tmr.recipes.word_count(np.array(lines, dtype=object), cluster=cluster, sizes=[1, 0, 2], reducers=2)
    assert result.to_dict() == collections.Counter(w for line in lines for w in line.split())
    assert result.keys.tolist() == [b"A", b"a", b"b", b"z", b"\xc3\xa9", b"\xff"]
    assert result[b"b"] == 2
    assert result["é"] == 1  # either spelling of a key finds it (str as UTF-8)


def test_word_count_of_a_list_of_str_and_of_nothing(cluster: tmr.LocalCluster) -> None:
    assert tmr.recipes.word_count(["the cat", "the hat"], cluster=cluster).to_dict() == {"cat": 1, "hat": 1, "the": 2}
    empty = tmr.recipes.word_count(["", "  "], cluster=cluster, reducers=3)
    assert len(empty) == 0
    assert empty.to_dict() == {}


# --------------------------------------------------------------------------- by-key recipes vs numpy


KEY_KINDS = ("int32", "int64", "str")


@st.composite
def keyed_data(draw: st.DrawFn, *, value_kind: str = "float") -> tuple[np.ndarray, np.ndarray]:
    kind = draw(st.sampled_from(KEY_KINDS))
    rows = draw(st.integers(0, 40))
    keys = draw_keys(draw, kind, rows, strings=6, ints=8, small=8)
    if value_kind == "float":
        values = np.array(draw(st.lists(st.floats(-1e3, 1e3, allow_subnormal=False), min_size=rows, max_size=rows)), np.float64)
    else:
        values = np.array(draw(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=rows, max_size=rows)), np.int32)
    return keys, values


def _layout(data: st.DataObject, rows: int) -> dict[str, Any]:
    return {"sizes": data.draw(size_lists(rows)), "reducers": data.draw(reducer_counts()), "batch_rows": data.draw(BATCHES)}


@settings(max_examples=examples(12))
@given(data=st.data())
def test_count_by_key_equals_counter(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    keys, _ = data.draw(keyed_data())
    result = tmr.count_by_key(keys, cluster=cluster, **_layout(data, len(keys)))
    assert result.to_dict() == collections.Counter(keys.tolist())
    assert_keyed(result, dict(collections.Counter(keys.tolist())), exact=True)


@settings(max_examples=examples(12))
@given(data=st.data())
def test_sum_by_key_of_int32_is_exact_in_int64(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    keys, values = data.draw(keyed_data(value_kind="int"))
    result = tmr.sum_by_key(keys, values, cluster=cluster, **_layout(data, len(keys)))
    assert_keyed(result, reference(keys, values.astype(np.int64), np.sum), exact=True)


RECIPES: dict[str, tuple[Callable[..., Any], Callable[[np.ndarray], Any]]] = {
    "sum_by_key": (tmr.sum_by_key, np.sum),
    "mean_by_key": (tmr.mean_by_key, np.mean),
    "min_by_key": (tmr.min_by_key, np.min),
    "max_by_key": (tmr.max_by_key, np.max),
    "variance_by_key": (tmr.variance_by_key, np.var),
}


@pytest.mark.parametrize("name", sorted(RECIPES))
@settings(max_examples=examples(8))
@given(data=st.data())
def test_float_recipes_equal_numpy_per_key(cluster: tmr.LocalCluster, name: str, data: st.DataObject) -> None:
    recipe, numpy_reduce = RECIPES[name]
    keys, values = data.draw(keyed_data())
    result = recipe(keys, values, cluster=cluster, **_layout(data, len(keys)))
    expected = reference(keys, values, numpy_reduce)
    if name in ("min_by_key", "max_by_key"):
        assert result.values.dtype == np.float64
    assert_keyed(result, expected, exact=False)


NAN_LAYOUTS = (
    {"sizes": [7]},
    {"sizes": [1, 6], "reducers": 2},
    {"sizes": [3, 0, 4], "reducers": 3},
    {"sizes": [1, 1, 1, 1, 1, 1, 1], "reducers": 4},
    {"sizes": [7], "batch_rows": 1},
    {"sizes": [2, 5], "batch_rows": 2, "reducers": 2},
)
"""Partitions, reducers and batch_rows= (1 and 2: every shard folds batch by batch) for the NaN cases."""


@pytest.mark.parametrize("name", ["min_by_key", "max_by_key"])
@pytest.mark.parametrize("key_kind", ["int64", "str"])
def test_min_and_max_by_key_propagate_nan_like_numpy(cluster: tmr.LocalCluster, name: str, key_kind: str) -> None:
    """A NaN anywhere in a key's values makes that key's min/max NaN (np.min/np.max), whatever the split."""
    recipe, numpy_reduce = RECIPES[name]
    keys = np.array([0, 1, 0, 2, 0, 1, 0], np.int64)  # key 0 has rows 0, 2, 4, 6; key 2 has only a NaN
    if key_kind == "str":
        keys = np.array(["k0", "k1", "k2"], dtype=object)[keys]
    for position in (0, 2, 4, 6):  # the NaN at every place among key 0's rows, so each partition sees it first, middle, last
        values = np.array([1.0, 5.0, 2.0, np.nan, 3.0, -1.0, 4.0])
        values[position] = np.nan
        expected = reference(keys, values, numpy_reduce)
        for layout in NAN_LAYOUTS:
            got = recipe(keys, values, cluster=cluster, **layout).to_dict()
            assert got.keys() == expected.keys()
            for key, want in expected.items():
                np.testing.assert_array_equal(got[key], want, err_msg=f"{name} key {key!r}, NaN at row {position}, {layout}")


def test_min_and_max_by_key_propagate_nan_per_column_and_keep_infinities(cluster: tmr.LocalCluster) -> None:
    keys = np.array([3, 3, 3, 3, 9, 9], np.int32)
    values = np.array([[1.0, -np.inf], [np.nan, 2.0], [2.0, np.inf], [3.0, 0.5], [np.inf, np.nan], [-np.inf, 1.0]], np.float32)
    layouts = ({"sizes": [6]}, {"sizes": [2, 4], "reducers": 2}, {"sizes": [1, 2, 3], "reducers": 3}, {"batch_rows": 1})
    for layout in layouts:
        for recipe, numpy_reduce in ((tmr.min_by_key, np.min), (tmr.max_by_key, np.max)):
            got = recipe(keys, values, cluster=cluster, **layout)
            assert got.values.dtype == np.float32
            for key in (3, 9):
                np.testing.assert_array_equal(got[key], numpy_reduce(values[keys == key], axis=0), err_msg=f"{key} {layout}")
    ints = np.array([5, -2, 7, 0, 1, 1], np.int64)  # integers have no NaN: the plain segment min/max
    assert tmr.min_by_key(keys, ints, cluster=cluster, sizes=[3, 3], batch_rows=2).to_dict() == {3: -2, 9: 1}


def test_min_and_max_by_key_of_infinities_alone_are_infinite(cluster: tmr.LocalCluster) -> None:
    # Issue 38: TensorFlow's segment min starts from the largest finite value: a key of +inf alone gave 3.4e38 (float32).
    keys = np.array([0, 1, 2, 0, 1, 2, 3, 3], np.int64)
    data = [np.inf, -np.inf, np.inf, np.inf, -np.inf, -np.inf, np.inf, 1.0]
    columns = tuple(np.array(data, dtype) for dtype in (np.float16, np.float32, np.float64))  # each dtype a column, one run
    pairs = tmr.MapReduce(lambda k, *v: (k, v), tmr.combiners.min, by_key=True)
    for layout in ({"sizes": [8]}, {"sizes": [3, 5], "reducers": 2}, {"batch_rows": 1}):
        for name, recipe, numpy_reduce in (
            ("min_by_key", tmr.min_by_key, np.min),
            ("max_by_key", tmr.max_by_key, np.max),
            ("combiners.min", lambda k, v, **o: pairs.run((k, *v), **o), np.min),
        ):
            result = recipe(keys, columns, cluster=cluster, **layout)
            assert result.keys.tolist() == [0, 1, 2, 3], f"{name} {layout}"
            for values, got in zip(columns, result.values, strict=True):
                assert got.dtype == values.dtype, f"{name} {layout}"
                assert got.tolist() == [numpy_reduce(values[keys == k]) for k in range(4)], f"{name} {values.dtype} {layout}"


def test_variance_by_key_with_ddof_and_2d_values(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 5, 200)
    keys[0] = 99  # a key with one row: its sample variance is NaN, as numpy's
    values = rng.normal(1e6, 1.0, size=(200, 3))
    result = tmr.variance_by_key(keys, values, ddof=1, cluster=cluster, sizes=[50, 0, 150], reducers=3, batch_rows=7)
    for i, key in enumerate(result.keys.tolist()):
        got = result.value_at(i)
        if key == 99:
            assert np.isnan(got).all()
        else:
            np.testing.assert_allclose(got, np.var(values[keys == key], axis=0, ddof=1), rtol=RTOL)
    means = tmr.mean_by_key(keys, values, cluster=cluster, reducers=2)
    assert means.values.shape == (6, 3)
    np.testing.assert_allclose(means[3], values[keys == 3].mean(axis=0), rtol=RTOL)


def test_variance_by_key_of_finite_values_that_overflows_is_inf_not_nan(cluster: tmr.LocalCluster) -> None:
    # Issue 38: per-key sums of finite values overflowed to ±inf, and the moments' merge then computed inf - inf.
    keys = np.array([0, 1, 0, 1, 1, 1, 2, 2, 2], np.int64)
    values = np.array([1e308, 1.5e308, -1e308, 1.5e308, -1.5e308, -1.5e308, 1.0, 2.0, 4.0])
    with np.errstate(over="ignore", invalid="ignore"):
        expected = {k: np.var(values[keys == k]) for k in range(3)}  # inf, inf, 14/9
    assert np.isinf([expected[0], expected[1]]).all()
    for layout in ({"sizes": [9]}, {"sizes": [2, 3, 4], "reducers": 2}, {"batch_rows": 1}, {"sizes": [1] * 9, "reducers": 3}):
        var = tmr.variance_by_key(keys, values, cluster=cluster, **layout).to_dict()
        std = tmr.std_by_key(keys, values, cluster=cluster, **layout).to_dict()
        assert var.keys() == std.keys() == expected.keys()
        for k, want in expected.items():
            np.testing.assert_allclose(var[k], want, rtol=RTOL, err_msg=f"{k} {layout}")
            np.testing.assert_allclose(std[k], np.sqrt(want), rtol=RTOL, err_msg=f"{k} {layout}")


def test_by_key_recipes_take_a_tuple_of_value_columns_in_one_run_as_pandas(cluster: tmr.LocalCluster) -> None:
    # Issue 38: sum_by_key(keys, (a, b)) was refused with "x[1] must hold numbers… got dtype object".
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(38)
    keys = rng.choice(np.array(["x", "y", "zz", ""]), 200)
    a, b = rng.normal(3.0, 2.0, 200), rng.integers(-50, 50, 200)
    frame = pd.DataFrame({"k": keys, "a": a, "b": b}).groupby("k")[["a", "b"]]
    recipes = {
        "sum": tmr.sum_by_key,
        "mean": tmr.mean_by_key,
        "min": tmr.min_by_key,
        "max": tmr.max_by_key,
        "var": tmr.variance_by_key,
        "std": tmr.std_by_key,
    }
    # One layout for every path the default one takes too: a shard in one batch, a shard that folds batch by batch
    # (its last one short), an empty shard, several reducers; the default layout runs below (a tuple of one, resident).
    layout = {"sizes": [49, 0, 151], "reducers": 3, "batch_rows": 50}
    for name, recipe in recipes.items():
        expected = frame.agg(name, ddof=0) if name in ("var", "std") else frame.agg(name)
        with tmr.stats() as runs:
            result = recipe(keys, (a, b), cluster=cluster, **layout)
        assert len(runs.runs) == 1, name
        assert result.keys.tolist() == expected.index.tolist()
        assert isinstance(result.values, tuple), name
        for column, got in zip(("a", "b"), result.values, strict=True):
            np.testing.assert_allclose(got, expected[column].to_numpy(), rtol=RTOL, err_msg=f"{name} {column} {layout}")
            assert (got.dtype.kind == "i") == (name in ("sum", "min", "max") and column == "b"), (name, column)
    single = tmr.sum_by_key(keys, (a,), cluster=cluster)  # a tuple of one column: a tuple of one result
    np.testing.assert_allclose(single.values[0], frame.sum()["a"].to_numpy(), rtol=RTOL)
    with tmr.sum_by_key(keys, (a, b), cluster=cluster, resident=True) as kept:
        gathered = kept.gather()
    np.testing.assert_array_equal(gathered.values[1], frame.sum()["b"].to_numpy())
    for refused in (tmr.median_by_key, tmr.top_k_by_key):
        with pytest.raises(
            tmr.InputError, match=r"values of (median|top_k)_by_key must be one array .* got a tuple of 2 arrays.*once per column"
        ):
            refused(keys, (a, b), cluster=cluster, **({"k": 1} if refused is tmr.top_k_by_key else {}))


def test_std_and_var_by_key_equal_numpy_and_return_stats_still_works(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 7, 300)
    values = rng.normal(5.0, 2.0, 300)
    std, stats = tmr.std_by_key(keys, values, ddof=1, cluster=cluster, sizes=[100, 200], return_stats=True)
    assert [s.rows for s in stats.shards] == [100, 200]
    for i, key in enumerate(std.keys.tolist()):
        np.testing.assert_allclose(std.value_at(i), np.std(values[keys == key], ddof=1), rtol=RTOL)
    assert tmr.var_by_key is tmr.variance_by_key
    var = tmr.var_by_key(keys, values, cluster=cluster)
    np.testing.assert_allclose(var.values, [np.var(values[keys == k]) for k in var.keys.tolist()], rtol=RTOL)


def test_edge_partitions_one_key_and_a_key_on_one_shard(cluster: tmr.LocalCluster) -> None:
    same = np.full(50, -7, np.int64)
    assert tmr.count_by_key(same, cluster=cluster, sizes=[0, 20, 0, 30], reducers=4).to_dict() == {-7: 50}
    keys = np.array(["", "x", "x", "x", "only"], dtype=object)
    values = np.array([1, 2, 3, 4, 5], np.int64)
    result = tmr.sum_by_key(keys, values, cluster=cluster, sizes=[1, 0, 3, 1], reducers=3)
    assert result.to_dict() == {"": 1, "x": 9, "only": 5}
    assert result[""] == 1
    assert list(result) == [("", 1), ("only", 5), ("x", 9)]
    assert tmr.sum_by_key(np.zeros(0, np.int64), np.zeros(0), cluster=cluster).to_dict() == {}


def test_a_million_distinct_keys(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(0)
    keys = rng.permutation(np.arange(-(10**6) // 2, 10**6 // 2, dtype=np.int64)) * 7919  # spread out: the hashed path
    values = rng.integers(0, 100, 10**6)
    result = tmr.sum_by_key(
        np.concatenate([keys, keys[:1000]]),
        np.concatenate([values, values[:1000]]),
        cluster=cluster,
        reducers=3,
        batch_rows=300_000,
    )
    assert len(result) == 10**6
    order = np.argsort(keys)
    np.testing.assert_array_equal(result.keys, keys[order])
    expected = values[order].copy()
    expected[np.searchsorted(keys[order], keys[:1000])] += values[:1000]
    np.testing.assert_array_equal(result.values, expected)


# --------------------------------------------------------------------------- MapReduce(by_key=True)


def test_pairwise_functions_with_a_segment_form_and_nested_values(cluster: tmr.LocalCluster) -> None:
    keys = np.array([3, 1, 3, 2, 1, 3], np.int32)
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    for fn, numpy_fn in ((tf.add, np.sum), (tf.maximum, np.max), (tf.minimum, np.min), (tf.multiply, np.prod)):
        job = tmr.MapReduce(lambda k, v: (k, (v, 2 * v)), fn, by_key=True)
        result = job.run((keys, x), cluster=cluster, sizes=[2, 0, 4], reducers=2)
        assert result.keys.tolist() == [1, 2, 3]
        assert result.keys.dtype == np.int32
        for i, key in enumerate([1, 2, 3]):
            a, b = result.value_at(i)
            assert a == numpy_fn(x[keys == key])
            assert b == numpy_fn(2 * x[keys == key])


def test_a_custom_combiner_with_a_segment_form(cluster: tmr.LocalCluster) -> None:
    def seg_sum(v: tf.Tensor, ids: tf.Tensor, n: tf.Tensor) -> tf.Tensor:
        return tf.math.unsorted_segment_sum(v, ids, n)

    squares = tmr.Combiner(
        partial=lambda v, rows: tf.reduce_sum(tf.square(v)),
        merge=tf.add,
        name="sum_of_squares",
        per_key=tmr.combiners.SegmentForm(
            partial=lambda v, ids, n: seg_sum(tf.square(tf.cast(v, tf.float64)), ids, n), merge=seg_sum
        ),
    )
    keys = np.array(["a", "b", "a"], dtype=object)
    x = np.array([1.0, 2.0, 3.0])
    result = tmr.MapReduce(lambda k, v: (k, v), squares, by_key=True).run((keys, x), cluster=cluster, reducers=2, batch_rows=1)
    assert result.to_dict() == {"a": 10.0, "b": 4.0}


def test_broadcast_reaches_a_keyed_map_and_repeats_do_not_recompile(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(lambda k, v, scale: (k, v * scale), tmr.combiners.sum, by_key=True)
    keys, x = np.array([1, 2, 1]), np.array([1.0, 2.0, 3.0])
    first, stats = job.run((keys, x), cluster=cluster, broadcast=[np.float64(2.0)], return_stats=True)
    again, stats2 = job.run((keys, x), cluster=cluster, broadcast=[np.float64(10.0)], return_stats=True)
    assert first.to_dict() == {1: 8.0, 2: 4.0}
    assert again.to_dict() == {1: 40.0, 2: 20.0}
    assert stats.compiled
    assert not stats2.compiled
    assert stats.bytes_sent == keys.nbytes + x.nbytes


def test_the_plan_shows_the_reducers(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(lambda k: (k, k), tmr.combiners.count, by_key=True)
    plan = job.plan(np.arange(10), cluster=cluster, sizes=[4, 6])
    assert isinstance(plan, tmr.KeyedPlan)
    assert plan.reducers == ("/job:local/replica:0/task:0/device:CPU:0", "/job:local/replica:0/task:1/device:CPU:0")
    three = job.plan(
        np.arange(10), cluster=cluster, reducers=["/job:local/task:1/cpu:1", "/job:local/task:0", "/job:local/task:1"]
    )
    assert three.reducers[0] == "/job:local/replica:0/task:1/device:CPU:1"
    assert "bucket 2 → /job:local/replica:0/task:1/device:CPU:0" in str(three)
    assert job.run(np.array([5, 5, 6]), cluster=cluster, reducers=list(three.reducers)).to_dict() == {5: 2, 6: 1}


# --------------------------------------------------------------------------- resident results


def test_a_resident_result_is_partitioned_by_the_stable_hash_and_read_by_a_second_job(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(1)
    keys = rng.integers(-50, 50, 500)
    values = rng.random(500)
    shipped = tmr.sum_by_key(keys, values, cluster=cluster, reducers=3)
    with tmr.sum_by_key(keys, values, cluster=cluster, reducers=3, resident=True) as kept:
        assert isinstance(kept, tmr.KeyedSharded)
        assert len(kept) == len(shipped)
        gathered = kept.gather()
        np.testing.assert_array_equal(gathered.keys, shipped.keys)
        np.testing.assert_allclose(gathered.values, shipped.values, rtol=RTOL)
        # The layout: reducer r holds exactly the keys whose documented hash is r.
        stored = kept.keys.gather()
        for shard in kept.plan.shards:
            assert {int_bucket(int(k), 3) for k in stored[shard.start : shard.stop]} <= {shard.index}
        # Second jobs read it in place: a whole-input sum over the per-key sums, and a keyed job over (keys, values).
        np.testing.assert_allclose(tmr.sum(kept.values), values.sum(), rtol=RTOL)
        parity = tmr.MapReduce(lambda k, v: (tf.math.floormod(k, 2), v), tmr.combiners.sum, by_key=True).run(
            (kept.keys, kept.values)
        )
        expected = reference(keys % 2, values, np.sum)
        assert_keyed(parity, expected, exact=False)
    with pytest.raises(tmr.ClusterError):
        kept.gather()


def test_a_resident_word_count_keeps_string_keys_by_farmhash(cluster: tmr.LocalCluster) -> None:
    lines = np.array(["to be or not to be", "", "that is the question"])
    with tmr.recipes.word_count(lines, cluster=cluster, reducers=4, resident=True) as kept:
        assert kept.gather().to_dict() == collections.Counter(" ".join(lines).split())
        stored = kept.keys.gather()
        for shard in kept.plan.shards:
            words = stored[shard.start : shard.stop]
            if len(words):  # FarmHash Fingerprint64, computed here in the client process
                assert set(tf.strings.to_hash_bucket_fast(list(words), 4).numpy().tolist()) == {shard.index}
        assert tmr.count_by_key(kept.keys).to_dict() == dict.fromkeys(" ".join(lines).split(), 1)  # str in, str out


# --------------------------------------------------------------------------- bad input


def test_float_bool_and_complex_keys_name_the_key_dtypes(cluster: tmr.LocalCluster) -> None:
    for bad in (np.array([1.5, 2.0]), np.array([True, False]), np.array([1j, 2j])):
        with pytest.raises(tmr.InputError, match=r"keys have dtype .*int32, int64 or strings"):
            tmr.count_by_key(bad, cluster=cluster)
    job = tmr.MapReduce(lambda x: (x, x), tmr.combiners.count, by_key=True)
    with pytest.raises(tmr.MapFunctionError, match=r"keys of dtype float64.*int32, int64 or string"):
        job.run(np.array([1.0, 2.0]), cluster=cluster)


def test_keys_not_1d_and_length_mismatches(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.InputError, match=r"keys must be 1-D.*\(2, 2\)"):
        tmr.count_by_key(np.zeros((2, 2), np.int64), cluster=cluster)
    with pytest.raises(tmr.InputError, match="same rows"):
        tmr.sum_by_key(np.arange(3), np.arange(4), cluster=cluster)
    two_d = tmr.MapReduce(lambda x: (tf.reshape(x, [-1, 2]), x), tmr.combiners.sum, by_key=True)
    with pytest.raises(tmr.MapFunctionError, match=r"keys must be a 1-D tensor"):
        two_d.run(np.arange(8), cluster=cluster, sizes=[4, 4])
    static = tmr.MapReduce(lambda x: (tf.range(4), tf.ones(3)), tmr.combiners.sum, by_key=True)  # lengths in the graph
    with pytest.raises(tmr.MapFunctionError, match=r"returned 4 keys but values with 3 rows"):
        static.run(np.arange(8), cluster=cluster, sizes=[4, 4])
    dynamic = tmr.MapReduce(lambda x: (tf.unique(x)[0], x), tmr.combiners.sum, by_key=True)  # lengths known only when it runs
    with pytest.raises(tmr.MapFunctionError, match=r"keys and values of different lengths"):
        dynamic.run(np.array([1, 1, 2, 3]), cluster=cluster, sizes=[4])


def test_a_single_tensor_from_a_keyed_map_and_a_reduce_without_segment_form(cluster: tmr.LocalCluster) -> None:
    single = tmr.MapReduce(tf.identity, tmr.combiners.sum, by_key=True)
    with pytest.raises(tmr.MapFunctionError, match=r"must return a pair \(keys, values\)"):
        single.run(np.arange(4), cluster=cluster)
    with pytest.raises(tmr.MapFunctionError, match=r"no per-key \(segment\) form.*tmr.combiners.sum"):
        tmr.MapReduce(lambda x: (x, x), lambda a, b: a + b, by_key=True)
    with pytest.raises(tmr.MapFunctionError, match=r"weighted_mean|no per-key"):
        tmr.MapReduce(lambda x: (x, x), tmr.Combiner(partial=lambda v, n: v, merge=tf.add), by_key=True)


@pytest.mark.parametrize("reducers", [0, -1, 5, [], ["/job:local/task:7"], ["/job:local/task:0", "/job:local/task:0"]])
def test_bad_reducers(cluster: tmr.LocalCluster, reducers: Any) -> None:
    with pytest.raises(tmr.PlacementError, match="reducer"):
        tmr.count_by_key(np.arange(4), cluster=cluster, reducers=reducers)


def test_keyed_settings_on_a_whole_input_job_and_bad_batch_rows(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(TypeError, match=r"reducers=.*by_key=True"):
        tmr.MapReduce(tf.reduce_sum, tf.add).run(np.arange(4), cluster=cluster, reducers=2)
    with pytest.raises(ValueError, match="batch_rows must be an int"):
        tmr.count_by_key(np.arange(4), cluster=cluster, batch_rows=0)
    with pytest.raises(tmr.InputError, match="lines must be a 1-D array of strings"):
        tmr.recipes.word_count(np.arange(3), cluster=cluster)


def test_a_keyed_result_as_a_pandas_dataframe(cluster: tmr.LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import pandas as pd

    keys, values = np.array(["b", "a", "b", "c"]), np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    frame = tmr.sum_by_key(keys, values[:, 0], cluster=cluster).to_pandas()
    expected = pd.DataFrame({"k": keys, "value": values[:, 0]}).groupby("k").sum()
    np.testing.assert_array_equal(frame.index.to_numpy(), ["a", "b", "c"])
    assert frame.index.name == "key"
    np.testing.assert_array_equal(frame["value"].to_numpy(), expected["value"].to_numpy())
    wide = tmr.mean_by_key(keys, values, cluster=cluster).to_pandas()
    assert list(wide.columns) == ["value_0", "value_1"]
    np.testing.assert_allclose(wide.loc["b"].to_numpy(), [3.0, 4.0])
    groups = tmr.collect_by_key(keys, values[:, 1], sort_values=True, cluster=cluster).to_pandas()
    assert groups.loc["b", "value"].tolist() == [2.0, 6.0]
    monkeypatch.setitem(sys.modules, "pandas", None)  # pandas absent
    with pytest.raises(ImportError, match="pip install pandas"):
        tmr.count_by_key(keys, cluster=cluster).to_pandas()


def test_a_resident_run_compiles_once_and_never_overwrites_an_earlier_result(cluster: tmr.LocalCluster) -> None:
    """Each run stores its result under a name of its own, fed to one program (its variables are not named in the graph)."""
    job = tmr.MapReduce(lambda k, v: (k, v), tmr.combiners.sum, by_key=True)
    keys = np.array([1, 2, 1, 3])
    first, stats = job.run((keys, np.array([1.0, 2.0, 3.0, 4.0])), cluster=cluster, resident=True, return_stats=True)
    second, stats2 = job.run((keys, np.array([10.0, 20.0, 30.0, 40.0])), cluster=cluster, resident=True, return_stats=True)
    with first, second:
        assert stats.compiled
        assert not stats2.compiled
        assert first.gather().to_dict() == {1: 4.0, 2: 2.0, 3: 4.0}
        assert second.gather().to_dict() == {1: 40.0, 2: 20.0, 3: 40.0}
        assert first.keys.name != second.keys.name
