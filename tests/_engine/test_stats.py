"""Statistics recipes equal numpy on the whole input, for any partition and placement."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import assert_eq, reference, scale
from strategies import arrays, examples, placements, sizes_specs

import tfmapreduce as tmr


def _var_atol(x: np.ndarray) -> float:
    return scale(x, 2)


# recipe name -> (call, numpy reference on the widened input, absolute tolerance, raises on 0 rows)
RECIPES: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[[np.ndarray], float], bool]] = {
    "mean": (tmr.mean, np.mean, scale, True),
    "sum": (tmr.sum, np.sum, scale, False),
    "min": (tmr.min, np.min, scale, True),
    "max": (tmr.max, np.max, scale, True),
    "variance": (tmr.variance, np.var, _var_atol, True),
    "std": (tmr.std, np.std, lambda x: math.sqrt(_var_atol(x)), True),
}


@settings(max_examples=examples(12))
@given(data=st.data())
@pytest.mark.parametrize("axis", [None, 0])
@pytest.mark.parametrize("name", sorted(RECIPES))
def test_every_recipe_equals_numpy(cluster: tmr.LocalCluster, name: str, axis: int | None, data: st.DataObject) -> None:
    recipe, numpy_fn, atol, needs_rows = RECIPES[name]
    x = data.draw(arrays(), label="x")
    sizes = data.draw(sizes_specs(len(x)), label="sizes")
    devices = data.draw(placements(cluster.devices), label="devices")
    if needs_rows and len(x) == 0:
        with pytest.raises(tmr.InputError, match="0 rows"):
            recipe(x, axis=axis, cluster=cluster, sizes=sizes, devices=devices)
        return
    result, stats = recipe(x, axis=axis, cluster=cluster, sizes=sizes, devices=devices, return_stats=True)
    assert_eq(result, numpy_fn(reference(x), axis=axis), atol=atol(x))
    assert [s.rows for s in stats.shards] == list(
        tmr.MapReduce(abs, abs).plan(x, cluster=cluster, sizes=sizes, devices=devices).sizes
    )
    assert stats.bytes_sent == x.nbytes


@settings(max_examples=examples(12))
@given(data=st.data())
def test_count_equals_len(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    x = data.draw(arrays(), label="x")
    sizes = data.draw(sizes_specs(len(x)), label="sizes")
    devices = data.draw(placements(cluster.devices), label="devices")
    assert_eq(tmr.count(x, cluster=cluster, sizes=sizes, devices=devices), len(x))


weight_arrays = st.integers(0, 40).flatmap(
    lambda rows: st.lists(st.one_of(st.just(0.0), st.floats(0.0, 10.0)), min_size=rows, max_size=rows).map(np.array)
)


@settings(max_examples=examples(12))
@given(data=st.data())
def test_weighted_mean_equals_numpy_average(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    x = data.draw(arrays(min_rows=1), label="x")
    w = data.draw(
        st.lists(st.one_of(st.just(0.0), st.floats(0.0, 10.0)), min_size=len(x), max_size=len(x)).map(np.array), label="w"
    )
    sizes = data.draw(sizes_specs(len(x)), label="sizes")
    devices = data.draw(placements(cluster.devices), label="devices")
    if w.sum() == 0:
        with pytest.raises(tmr.InputError, match="sum to 0"):
            tmr.weighted_mean(x, w, cluster=cluster, sizes=sizes, devices=devices)
        return
    result = tmr.weighted_mean(x, w, cluster=cluster, sizes=sizes, devices=devices)
    assert_eq(result, np.average(reference(x), axis=0, weights=w), atol=scale(x) * w.max() / w.sum())


# -- numerics ------------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [None, 0])
def test_variance_far_from_zero_keeps_its_digits(cluster: tmr.LocalCluster, axis: int | None) -> None:
    rng = np.random.default_rng(6)
    x = (1e6 + rng.standard_normal((50_000, 2))).astype(np.float32)
    sizes = [1, 0, 20_000, 29_999]
    assert_eq(tmr.variance(x, axis=axis, cluster=cluster, sizes=sizes), reference(x).var(axis=axis), rtol=1e-4)
    assert_eq(tmr.std(x, axis=axis, cluster=cluster, sizes=sizes), reference(x).std(axis=axis), rtol=1e-4)
    assert_eq(tmr.mean(x, axis=axis, cluster=cluster, sizes=sizes), reference(x).mean(axis=axis))


def test_a_naive_variance_would_fail_that_bound() -> None:
    x = (1e6 + np.random.default_rng(6).standard_normal(50_000)).astype(np.float32)
    naive = np.mean(x * x, dtype=np.float32) - np.mean(x, dtype=np.float32) ** 2
    assert abs(naive - reference(x).var()) > 1e-4 * reference(x).var()


@pytest.mark.parametrize(("dtype", "big"), [(np.float32, 3e38), (np.float64, 1e308)])
@pytest.mark.parametrize("axis", [None, 0])
def test_variance_of_finite_values_that_overflows_is_inf_not_nan(
    cluster: tmr.LocalCluster, tmp_path: Path, dtype: type, big: float, axis: int | None
) -> None:
    # Issue 38: a shard's shifted sums and Chan's merge of shard means computed inf - inf (nan).  Column 0 overflows
    # (the float64 variance of float32 values ±3e38 is about 7e76, of float64 values ±1e308 inf), column 1 does not.
    signs = np.array([1, -1, 1, -1, 1, -1, -1, 1, 1, -1, -1, -1])
    x = np.stack([signs * big, np.arange(12)], axis=1).astype(dtype)
    np.save(tmp_path / "x.npy", x)
    with np.errstate(over="ignore"):  # numpy's own mean of x can overflow (inf - inf): scaled by 16, exactly, it cannot
        var, std = 256 * reference(x / 16).var(axis=axis), 16 * reference(x / 16).std(axis=axis)
    assert np.isinf(var).any() == (dtype == np.float64)
    assert not np.isnan(var).any()
    runs = [(x, {"sizes": [12]}), (x, {"sizes": [2, 3, 7]}), (x, {"sizes": [1] * 12})]
    runs += [(tmr.read_npy(str(tmp_path / "x.npy")), {}), (tmr.read_npy(str(tmp_path / "x.npy")), {"batch_rows": 5})]
    for data, layout in runs:
        assert_eq(tmr.variance(data, axis=axis, cluster=cluster, **layout), var, rtol=1e-12)
        assert_eq(tmr.std(data, axis=axis, cluster=cluster, **layout), std, rtol=1e-12)


def test_float32_sums_that_cancel_keep_float64_accuracy(cluster: tmr.LocalCluster) -> None:
    x = np.tile(np.array([1e3, 1e-3, -1e3], np.float32), 400)  # each shard holds hundreds of rows
    expected = reference(x).sum()  # 400 · float32(1e-3) ≈ 0.4
    assert_eq(tmr.sum(x, cluster=cluster, sizes=[600, 0, 600]), expected, atol=1e-9)
    assert_eq(tmr.mean(x, cluster=cluster, sizes=[600, 0, 600]), reference(x).mean(), atol=1e-12)


@pytest.mark.parametrize("negative", [False, True])
def test_float32_sums_and_means_equal_the_exact_float64_sum_on_every_path(
    cluster: tmr.LocalCluster, tmp_path: Path, negative: bool
) -> None:
    # Issue 38: 1e6 float32 values near 1e6 summed in float32 blocks were 60 off the exact 999999999786.31.
    x = np.random.default_rng(38).normal(1e6, 1.0, 10**6).astype(np.float32)
    x[12_345] = -x[12_345] if negative else x[12_345]
    exact = math.fsum(x.astype(np.float64))
    np.save(tmp_path / "a.npy", x[:300_000])
    np.save(tmp_path / "b.npy", x[300_000:])
    with tmr.scatter(x, cluster=cluster, sizes=[400_000, 0, 600_000]) as resident:
        for data, options in (
            (x, {"cluster": cluster, "sizes": [250_000, 0, 750_000]}),
            (resident, {}),
            (tmr.read_npy(str(tmp_path / "*.npy")), {"cluster": cluster}),
        ):
            assert float(tmr.sum(data, **options)) == pytest.approx(exact, rel=1e-12, abs=0)
            assert float(tmr.mean(data, **options)) == pytest.approx(exact / len(x), rel=1e-12, abs=0)


@pytest.mark.parametrize("loc", [0.0, 0.5, -3.0, 1e4])
def test_large_float32_inputs_take_the_fast_path_only_when_exact(cluster: tmr.LocalCluster, loc: float) -> None:
    # 40 000 rows: far above the blocked path's threshold, unlike the property tests' small arrays.
    # Shipped and resident data learn each shard's sign differently; both must stay exact.
    x = (loc + np.random.default_rng(7).random((20_000, 2))).astype(np.float32)
    x[-1, -1] = -x[-1, -1] if loc == 0.5 else x[-1, -1]  # one negative element forces the exact path on its shard
    with tmr.scatter(x, cluster=cluster, sizes=[5_000, 0, 15_000]) as resident:
        for data, options in ((x, {"cluster": cluster, "sizes": [5_000, 0, 15_000]}), (resident, {})):
            for axis in (None, 0):
                assert_eq(tmr.sum(data, axis=axis, **options), reference(x).sum(axis=axis), rtol=1e-6)
                assert_eq(tmr.mean(data, axis=axis, **options), reference(x).mean(axis=axis), rtol=1e-6)
                assert_eq(tmr.variance(data, axis=axis, **options), reference(x).var(axis=axis), rtol=1e-6)


def test_int32_sums_do_not_overflow(cluster: tmr.LocalCluster) -> None:
    x = np.full((10, 2), 2**31 - 1, np.int32)
    total = tmr.sum(x, cluster=cluster, sizes=[3, 0, 7])
    assert total.dtype == np.int64
    assert int(total) == 20 * (2**31 - 1)
    columns = tmr.sum(x, axis=0, cluster=cluster, sizes=[3, 0, 7])
    assert columns.dtype == np.int64
    assert columns.tolist() == [10 * (2**31 - 1)] * 2
    assert tmr.mean(x, cluster=cluster) == 2**31 - 1
    assert tmr.sum(-x, cluster=cluster) == -20 * (2**31 - 1)


def test_integer_min_and_max_keep_their_dtype(cluster: tmr.LocalCluster) -> None:
    x = np.array([2**40, -(2**40), 7], np.int64)
    assert tmr.min(x, cluster=cluster, sizes=[0, 1, 2]) == -(2**40)
    assert tmr.max(x, cluster=cluster, sizes=[2, 1, 0]).dtype == np.int64


@pytest.mark.parametrize("recipe", [tmr.mean, tmr.variance, tmr.std, tmr.min, tmr.max], ids=lambda f: f.__name__)
def test_recipes_of_0_rows_raise(cluster: tmr.LocalCluster, recipe: Callable[..., Any]) -> None:
    with pytest.raises(tmr.InputError, match=r"0 rows .*pass at least one row"):
        recipe(np.zeros((0, 3), np.float32), cluster=cluster)


def test_weighted_mean_of_0_rows_raises(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.InputError, match="0 rows"):
        tmr.weighted_mean(np.zeros(0), np.zeros(0), cluster=cluster)


def test_sum_and_count_of_0_rows_are_0(cluster: tmr.LocalCluster) -> None:
    assert tmr.sum(np.zeros(0, np.float32), cluster=cluster) == 0
    assert tmr.sum(np.zeros(0, np.int32), cluster=cluster).dtype == np.int64
    assert_eq(tmr.sum(np.zeros((0, 3), np.int32), axis=0, cluster=cluster), np.zeros(3, np.int64))
    assert tmr.count(np.zeros((0, 3)), cluster=cluster) == 0
    assert tmr.count(np.zeros((0, 3)), cluster=cluster, sizes=[0, 0]) == 0


def test_empty_shards_never_poison_a_result(cluster: tmr.LocalCluster) -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    sizes = [0, 0, 1, 0, 3, 0]
    assert tmr.mean(x, cluster=cluster, sizes=sizes) == 2.5
    assert tmr.variance(x, cluster=cluster, sizes=sizes) == 1.25
    assert tmr.min(x, cluster=cluster, sizes=sizes) == 1.0
    assert tmr.max(x, cluster=cluster, sizes=[0, 4, 0]) == 4.0


@pytest.mark.parametrize("ddof", [0, 1, 2])
@pytest.mark.parametrize("axis", [None, 0])
def test_ddof_matches_numpy(cluster: tmr.LocalCluster, ddof: int, axis: int | None) -> None:
    x = np.random.default_rng(7).normal(size=(9, 2))
    assert_eq(tmr.variance(x, axis=axis, ddof=ddof, cluster=cluster, sizes=[4, 0, 5]), x.var(axis=axis, ddof=ddof))
    assert_eq(tmr.std(x, axis=axis, ddof=ddof, cluster=cluster, sizes=[4, 0, 5]), x.std(axis=axis, ddof=ddof))


def test_result_dtypes(cluster: tmr.LocalCluster) -> None:
    f32, i32 = np.arange(6, dtype=np.float32), np.arange(6, dtype=np.int32)
    assert tmr.mean(f32, cluster=cluster).dtype == np.float64  # float64 partials are not rounded back to float32
    assert tmr.mean(i32, cluster=cluster).dtype == np.float64
    assert tmr.variance(i32, cluster=cluster).dtype == np.float64
    assert tmr.sum(i32, cluster=cluster).dtype == np.int64
    assert tmr.min(f32, cluster=cluster).dtype == np.float32  # min and max pick an element: its dtype stays
    assert tmr.max(i32, cluster=cluster).dtype == np.int32
    assert tmr.count(f32, cluster=cluster).dtype == np.int64
    assert np.ndim(tmr.mean(f32, cluster=cluster)) == 0
    assert tmr.mean(f32.reshape(3, 2), axis=0, cluster=cluster).shape == (2,)


def test_weighted_mean_of_2d_rows(cluster: tmr.LocalCluster) -> None:
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    w = np.array([0, 1, 2, 0, 0, 3], np.float64)
    assert_eq(tmr.weighted_mean(x, w, cluster=cluster, sizes=[2, 0, 4]), np.average(reference(x), axis=0, weights=w))


# --------------------------------------------------------------------------- numpy conventions: axis=-1, keepdims, var


@pytest.mark.parametrize("name", ["mean", "sum", "min", "max", "variance", "std"])
def test_negative_axis_and_keepdims_follow_numpy(cluster: tmr.LocalCluster, name: str) -> None:
    numpy_fn = {"mean": np.mean, "sum": np.sum, "min": np.min, "max": np.max, "variance": np.var, "std": np.std}[name]
    recipe = getattr(tmr, name)
    vector = np.array([3.0, 1.0, 4.0, 1.0, 5.0])
    matrix = np.arange(12.0).reshape(4, 3) ** 1.5
    for x, axis in ((vector, -1), (matrix, -2), (vector, None), (matrix, 0), (matrix, None)):
        for keepdims in (False, True):
            got = recipe(x, axis=axis, keepdims=keepdims, cluster=cluster, sizes=[1, len(x) - 1])
            expected = numpy_fn(x, axis=axis, keepdims=keepdims)
            assert np.shape(got) == np.shape(expected), (x.shape, axis, keepdims)
            np.testing.assert_allclose(got, expected, rtol=1e-12)
    with pytest.raises(ValueError, match=r"axis=-1 is axis 1 of 2-d data \(one result per row\).*pass axis=0 \(or -2"):
        recipe(matrix, axis=-1, cluster=cluster)
    with pytest.raises(ValueError, match="axis 1 is out of bounds for 1-d data; pass axis=0 \\(or -1\\) or None"):
        recipe(vector, axis=1, cluster=cluster)
    with pytest.raises(TypeError, match="keepdims must be True or False, got str 'yes'"):
        recipe(vector, keepdims="yes", cluster=cluster)


def test_var_is_numpys_name_for_variance(cluster: tmr.LocalCluster) -> None:
    assert tmr.var is tmr.variance
    assert tmr.recipes.var is tmr.variance
    assert float(tmr.var(np.array([1.0, 2.0, 3.0, 4.0]), ddof=1, cluster=cluster)) == np.var([1.0, 2.0, 3.0, 4.0], ddof=1)
