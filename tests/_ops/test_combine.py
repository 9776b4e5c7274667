"""Combiners: built-ins, lifted pairwise functions, user-defined ones, and nested map outputs."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import assert_eq, reference, scale
from strategies import arrays, examples, size_lists

import tfmapreduce as tmr
from tfmapreduce._ops.moments import _chan

X = np.arange(100, dtype=np.float32) ** 1.5  # slice means differ, so a wrong weight shows
UNEVEN = [0, 30, 0, 55, 15, 0]


def add(a, b):  # the lesson's reduce function, untouched
    return a + b


# The Combiner docstring's example: the lesson's size-weighted mean of shard means, written by hand.
hand_weighted_mean = tmr.Combiner(
    partial=lambda mean, rows: (tf.cast(mean, tf.float64) * tf.cast(rows, tf.float64), rows),
    merge=lambda a, b: (a[0] + b[0], a[1] + b[1]),
    finalize=lambda p: p[0] / tf.cast(p[1], tf.float64),
    name="weighted_mean",
)


def _run(map_fn, reduce_fn, x=X, sizes=UNEVEN, **options):
    return tmr.MapReduce(map_fn, reduce_fn).run(x, sizes=sizes, **options)


# -- built-ins ----------------------------------------------------------------------------------


def test_sum(cluster: tmr.LocalCluster) -> None:
    assert_eq(_run(tf.reduce_sum, tmr.combiners.sum, cluster=cluster), reference(X).sum(), atol=scale(X))


def test_sum_widens_integers_and_floats(cluster: tmr.LocalCluster) -> None:
    x = np.full(10, 2**30, np.int32)
    total = _run(lambda t: tf.reduce_sum(t, keepdims=True), tmr.combiners.sum, x=x, sizes=[1] * 10, cluster=cluster)
    assert total.dtype == np.int64
    assert total.tolist() == [10 * 2**30]
    assert _run(tf.reduce_sum, tmr.combiners.sum, cluster=cluster).dtype == np.float64


def test_count(cluster: tmr.LocalCluster) -> None:
    assert _run(tf.reduce_sum, tmr.combiners.count, cluster=cluster) == 100
    assert _run(tf.reduce_sum, tmr.combiners.count, x=np.zeros((7, 3)), sizes=[0, 7, 0], cluster=cluster) == 7


def test_weighted_mean_is_the_lessons_formula(cluster: tmr.LocalCluster) -> None:
    result = _run(tf.reduce_mean, tmr.combiners.weighted_mean, cluster=cluster)
    bounds = np.cumsum([0, *UNEVEN])
    slices = [(X[a:b], b - a) for a, b in itertools.pairwise(bounds) if b > a]
    formula = sum(size * s.astype(np.float64).mean() for s, size in slices) / sum(size for _, size in slices)
    assert_eq(result, formula)
    assert_eq(result, reference(X).mean())


def test_min_and_max(cluster: tmr.LocalCluster) -> None:
    x = np.random.default_rng(0).integers(-1000, 1000, (50, 3)).astype(np.int64)
    assert_eq(
        _run(lambda t: tf.reduce_min(t, axis=0), tmr.combiners.min, x=x, sizes=[0, 1, 0, 49], cluster=cluster), x.min(axis=0)
    )
    assert_eq(_run(lambda t: tf.reduce_max(t, axis=0), tmr.combiners.max, x=x, sizes=[25, 0, 25], cluster=cluster), x.max(axis=0))


def test_moments(cluster: tmr.LocalCluster) -> None:
    def moments(t):
        t = tf.cast(t, tf.float64)
        m = tf.reduce_mean(t)
        return tf.cast(tf.size(t), tf.float64), m, tf.reduce_sum(tf.square(t - m))

    n, mean, m2 = _run(moments, tmr.combiners.moments, cluster=cluster)
    x = reference(X)
    assert_eq((n, mean, m2 / n), (100.0, x.mean(), x.var()))


@settings(max_examples=examples(100))
@given(data=st.data())
def test_chans_merge_equals_two_passes_on_any_split(data: st.DataObject) -> None:
    x = reference(data.draw(arrays(dtype=np.float64, shape=(data.draw(st.integers(2, 40)),))))
    cut = data.draw(st.integers(1, len(x) - 1))

    def part(v: np.ndarray) -> tuple[tf.Tensor, ...]:
        return tuple(tf.constant(t, tf.float64) for t in (len(v), v.mean(), ((v - v.mean()) ** 2).sum()))

    n, mean, m2 = (t.numpy() for t in _chan(part(x[:cut]), part(x[cut:])))
    assert_eq((n, mean, m2), (float(len(x)), x.mean(), ((x - x.mean()) ** 2).sum()), atol=scale(x, 2))


# -- pairwise reduce functions ------------------------------------------------------------------


@pytest.mark.parametrize("reduce_fn", [tf.add, add, tf.maximum], ids=["tf.add", "lesson-add", "tf.maximum"])
def test_a_pairwise_reduce_fn_is_lifted(cluster: tmr.LocalCluster, reduce_fn) -> None:
    x = np.arange(24, dtype=np.int64).reshape(12, 2)
    result = _run(lambda t: tf.reduce_sum(t, axis=0), reduce_fn, x=x, sizes=[3, 0, 4, 5], cluster=cluster)
    shard_sums = [x[0:3].sum(0), x[3:7].sum(0), x[7:12].sum(0)]
    expected = x.sum(0) if reduce_fn is not tf.maximum else np.max(shard_sums, axis=0)
    assert_eq(result, expected)


def test_lift_names_the_combiner() -> None:
    assert tmr.Combiner.lift(add).name == "add"
    assert tmr.MapReduce(tf.reduce_sum, add).name == "reduce_sum/add"


def test_lift_refuses_a_non_callable() -> None:
    with pytest.raises(TypeError, match=r"reduce_fn must be a Combiner or a callable .* got int 3"):
        tmr.MapReduce(tf.reduce_sum, 3)


# -- a user-defined combiner --------------------------------------------------------------------


def test_the_docstring_combiner(cluster: tmr.LocalCluster) -> None:
    assert_eq(_run(tf.reduce_mean, hand_weighted_mean, cluster=cluster), reference(X).mean())


def test_a_user_combiner_for_a_range(cluster: tmr.LocalCluster) -> None:
    spread = tmr.Combiner(
        partial=lambda v, rows: (tf.reduce_min(v), tf.reduce_max(v)),
        merge=lambda a, b: (tf.minimum(a[0], b[0]), tf.maximum(a[1], b[1])),
        finalize=lambda p: p[1] - p[0],
        name="spread",
    )
    assert_eq(_run(lambda t: t, spread, cluster=cluster), reference(X).max() - reference(X).min())


@settings(max_examples=examples(15))
@given(data=st.data())
def test_the_docstring_combiner_on_any_partition(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    x = data.draw(arrays(dtype=np.float32, min_rows=1))
    sizes = data.draw(size_lists(len(x)))
    result = tmr.MapReduce(lambda t: tf.reduce_mean(tf.cast(t, tf.float64), axis=0), hand_weighted_mean).run(
        x, cluster=cluster, sizes=sizes
    )
    assert_eq(result, reference(x).mean(axis=0), atol=scale(x))


# -- nested map outputs -------------------------------------------------------------------------


def _sum_and_rows(t):
    return tf.reduce_sum(t, axis=0), tf.shape(t, out_type=tf.int64)[0]


def test_tuple_outputs_with_built_ins(cluster: tmr.LocalCluster) -> None:
    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    assert_eq(_run(_sum_and_rows, tmr.combiners.sum, x=x, sizes=[0, 4, 6], cluster=cluster), (x.sum(0), 10))
    pair = _run(lambda t: (tf.reduce_min(t), tf.reduce_max(t, axis=0)), tmr.combiners.min, x=x, sizes=[5, 0, 5], cluster=cluster)
    assert_eq(pair, (0.0, x[:5].max(0)))  # element-wise min of the shards' (min, column max)


def test_dict_outputs_with_built_ins(cluster: tmr.LocalCluster) -> None:
    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    out = _run(
        lambda t: {"sum": tf.reduce_sum(t, axis=0), "rows": tf.size(t) // 3},
        tmr.combiners.sum,
        x=x,
        sizes=[4, 0, 6],
        cluster=cluster,
    )
    assert_eq(out, {"sum": reference(x).sum(0), "rows": 10})
    means = _run(
        lambda t: {"a": tf.reduce_mean(t), "cols": tf.reduce_mean(t, axis=0)},
        tmr.combiners.weighted_mean,
        x=x,
        sizes=[1, 0, 9],
        cluster=cluster,
    )
    assert_eq(means, {"a": reference(x).mean(), "cols": reference(x).mean(0)})


@pytest.mark.parametrize("reduce_fn", [tf.add, add], ids=["tf.add", "lesson-add"])
def test_a_lifted_reduce_fn_merges_a_tuple_leaf_by_leaf(cluster: tmr.LocalCluster, reduce_fn) -> None:
    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    assert_eq(_run(_sum_and_rows, reduce_fn, x=x, sizes=[0, 4, 6], cluster=cluster), (x.sum(0), 10))


@pytest.mark.parametrize("reduce_fn", [tf.add, add], ids=["tf.add", "lesson-add"])
def test_a_lifted_reduce_fn_merges_a_dict_leaf_by_leaf(cluster: tmr.LocalCluster, reduce_fn) -> None:
    x = np.arange(10, dtype=np.int32)
    out = _run(lambda t: {"sum": tf.reduce_sum(t), "rows": tf.size(t)}, reduce_fn, x=x, sizes=[2, 0, 8], cluster=cluster)
    assert_eq(out, {"sum": 45, "rows": 10})


def test_a_structure_aware_reduce_fn_gets_the_whole_structure(cluster: tmr.LocalCluster) -> None:
    seen = []

    def merge(a, b):
        seen.append((a, b))
        return a[0] + b[0], tf.maximum(a[1], b[1])

    out = _run(lambda t: (tf.reduce_sum(t), tf.reduce_max(t)), merge, cluster=cluster)
    assert_eq(out, (reference(X).sum(), X.max()), atol=scale(X))
    assert seen
    assert all(isinstance(a, tuple) for a, _ in seen)


def test_tf_add_does_not_pack_a_tuple_of_like_scalars_into_one_tensor(cluster: tmr.LocalCluster) -> None:
    out = _run(
        lambda t: (tf.reduce_sum(t), tf.reduce_max(t)), tf.add, x=np.arange(10, dtype=np.float32), sizes=[4, 6], cluster=cluster
    )
    assert_eq(out, (45.0, 3.0 + 9.0))  # the shards' maxima add up too: tf.add merges each element


def test_a_combiner_shows_its_name_not_its_functions() -> None:
    assert repr(tmr.combiners.weighted_mean) == "Combiner(name='weighted_mean')"
    assert repr(tmr.Combiner.lift(tf.add)) == "Combiner(name='add')"
    assert repr(tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum)) == "MapReduce(reduce_sum/sum)"


@pytest.mark.parametrize("combiner", [tmr.combiners.min, tmr.combiners.max, tf.minimum, tf.maximum])
def test_keyed_min_and_max_combiners_propagate_nan(cluster: tmr.LocalCluster, combiner: Any) -> None:
    """The per-key forms of min/max (built-in and lifted tf.minimum/tf.maximum): a NaN wins, as in np.min."""
    keys = np.array([1, 1, 1, 1, 2, 2])
    values = np.array([1.0, np.nan, 2.0, 3.0, 4.0, 5.0])
    job = tmr.MapReduce(lambda k, v: (k, v), combiner, by_key=True)
    for sizes in ([6], [1, 5], [2, 4], [3, 3]):
        for batch_rows in (None, 1):
            got = job.run((keys, values), cluster=cluster, sizes=sizes, batch_rows=batch_rows).to_dict()
            assert np.isnan(got[1]), f"{combiner}: key 1 gave {got[1]} with sizes={sizes}, batch_rows={batch_rows}"
            assert got[2] == (4.0 if combiner in (tmr.combiners.min, tf.minimum) else 5.0)


@pytest.mark.parametrize(("reduce", "numpy_reduce"), [(tmr.min, np.min), (tmr.max, np.max)])
def test_whole_input_min_and_max_propagate_nan_over_arrays_and_files(
    cluster: tmr.LocalCluster, tmp_path: Any, reduce: Any, numpy_reduce: Any
) -> None:
    for position in (0, 3, 9):
        x = np.arange(10.0)
        x[position] = np.nan
        np.save(tmp_path / f"nan{position}.npy", x)
        for sizes in ([10], [1, 9], [5, 5], [3, 0, 7]):
            assert np.isnan(reduce(x, cluster=cluster, sizes=sizes)), f"NaN at {position}, sizes={sizes}"
        files = tmr.read_npy(str(tmp_path / f"nan{position}.npy"))
        for batch_rows in (None, 1, 4):
            assert np.isnan(reduce(files, cluster=cluster, batch_rows=batch_rows)), f"file, NaN at {position}"
    assert np.isnan(numpy_reduce(x))
