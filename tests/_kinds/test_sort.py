"""tmr.sort: sampled range partitioning in one run, against np.sort on real workers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tfmapreduce as tmr
from tests.strategies import examples, size_lists
from tfmapreduce._engine import call as _call
from tfmapreduce._engine import driver as _engine
from tfmapreduce._native.loader import kernels
from tfmapreduce._ops import splitters as _splitters

DTYPES = tuple(np.dtype(d) for d in ("int32", "int64", "float32", "float64"))


def elements(dtype: np.dtype) -> st.SearchStrategy[Any]:
    """Few distinct values (many duplicates), the extremes, and for floats NaN, ±inf and -0.0."""
    if dtype.kind == "i":
        info = np.iinfo(dtype)
        return st.one_of(st.integers(-3, 3), st.sampled_from([int(info.min), int(info.max)]), st.integers(info.min, info.max))
    width = dtype.itemsize * 8
    special = st.sampled_from([np.nan, np.inf, -np.inf, -0.0, 0.0])
    return st.one_of(st.floats(-3, 3, width=width).map(round), special, st.floats(width=width))


@st.composite
def inputs(draw: st.DrawFn) -> tuple[np.ndarray, list[int]]:
    dtype = draw(st.sampled_from(DTYPES))
    x = draw(hnp.arrays(dtype, draw(st.integers(0, 60)), elements=elements(dtype)))
    return x, draw(size_lists(len(x), max_shards=5))


def check_sorted(result: tmr.Sharded, x: np.ndarray, *, descending: bool = False) -> None:
    """The gathered result equals np.sort (reversed for descending), its ranges ordered shard after shard."""
    expected = np.sort(x)[::-1] if descending else np.sort(x)
    gathered = result.gather()
    assert gathered.dtype == x.dtype
    np.testing.assert_array_equal(gathered, expected)  # NaN equal to NaN, -0.0 to 0.0
    assert sum(result.plan.sizes) == len(x)


@settings(max_examples=examples(16))
@given(inputs(), st.integers(1, 4), st.booleans())
def test_sort_equals_numpy_for_any_partition_and_reducers(
    cluster: tmr.LocalCluster, case: tuple[np.ndarray, list[int]], reducers: int, descending: bool
) -> None:
    x, sizes = case
    with tmr.sort(x, cluster=cluster, sizes=sizes, reducers=reducers, descending=descending) as result:
        check_sorted(result, x, descending=descending)
        assert len(result.plan.shards) == reducers


@settings(max_examples=examples(10))
@given(inputs(), st.integers(2, 4))
def test_sampled_splitters_with_duplicates_still_sort(
    cluster: tmr.LocalCluster, case: tuple[np.ndarray, list[int]], reducers: int
) -> None:
    x, sizes = case
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_splitters, "SAMPLES", 2)  # a sample of a few rows: splitters tie with many rows
        with tmr.sort(x, cluster=cluster, sizes=sizes, reducers=reducers) as result:
            check_sorted(result, x)


def fair(result: tmr.Sharded) -> None:
    """No range holds more than twice its fair share of the rows."""
    sizes = result.plan.sizes
    assert max(sizes) <= 2 * sum(sizes) / len(sizes), sizes


@pytest.mark.parametrize(
    "x",
    [
        np.full(4000, 7, np.int64),  # one key everywhere
        np.arange(4000, dtype=np.int32),  # sorted
        np.arange(4000.0)[::-1].copy(),  # reverse-sorted
        np.where(np.arange(4000) % 100 == 0, np.arange(4000), 5).astype(np.float32),  # 99% one key
    ],
    ids=["all-equal", "sorted", "reverse-sorted", "99%-one-key"],
)
def test_skewed_inputs_are_sorted_in_fair_ranges(cluster: tmr.LocalCluster, x: np.ndarray) -> None:
    with tmr.sort(x, cluster=cluster, sizes=[1000, 0, 3000], reducers=4) as result:
        check_sorted(result, x)
        fair(result)


def test_a_larger_sample_keeps_ranges_fair(cluster: tmr.LocalCluster) -> None:
    x = np.random.default_rng(1).normal(size=50_000)
    with tmr.sort(x, cluster=cluster) as result:  # a range per device: 4
        check_sorted(result, x)
        fair(result)
        assert sorted(s.device for s in result.plan.shards) == sorted(cluster.devices)


def test_a_resident_input_is_sorted_and_the_result_read_in_place(cluster: tmr.LocalCluster) -> None:
    x = np.random.default_rng(2).integers(-100, 100, 500)
    with tmr.scatter(x, cluster=cluster, sizes=3) as data, tmr.sort(data) as result:
        check_sorted(result, x)
        assert int(tmr.sum(result)) == x.sum()  # a later job reads the ranges where they are
        with tmr.sort(result, descending=True) as again:  # a sort of a sort
            check_sorted(again, x, descending=True)


def test_small_integer_and_half_floats_keep_their_dtype(cluster: tmr.LocalCluster) -> None:
    for x in (np.array([3, 0, 255, 7, 7], np.uint8), np.array([1.5, -np.inf, np.nan, -2.0], np.float16)):
        with tmr.sort(x, cluster=cluster, reducers=2) as result:
            check_sorted(result, x)


def test_empty_input_and_empty_shards(cluster: tmr.LocalCluster) -> None:
    with tmr.sort(np.zeros(0), cluster=cluster, reducers=3) as result:
        assert result.gather().shape == (0,)
        assert result.plan.sizes == (0, 0, 0)
    with tmr.sort(np.array([2, 1]), cluster=cluster, sizes=[0, 2, 0], reducers=4) as result:
        check_sorted(result, np.array([2, 1]))


@pytest.mark.parametrize("descending", [False, True])
def test_a_sort_of_other_row_counts_compiles_nothing(cluster: tmr.LocalCluster, descending: bool) -> None:
    """Host arrays fed shard by shard of new row counts (and values) at the same places run the program of the first:
    each shard's sample size and first row are run inputs; an empty shard stays empty; sampled or whole."""
    rng = np.random.default_rng(7)
    runs = []
    for n in (2500, 3001, 40):  # 2 ranges: above 1,024 rows the shards sample, below they send every row
        x = rng.integers(-50, 50, n).astype(np.float64)
        x[::97] = np.nan
        sizes = [n // 3, 0, n - n // 3]
        result, stats = tmr.sort(x, cluster=cluster, sizes=sizes, reducers=2, descending=descending, return_stats=True)  # type: ignore[call-overload]
        with result:
            check_sorted(result, x, descending=descending)
        runs.append(stats.compiled)
    assert runs[1:] == [False, False]


def test_a_sort_by_key_of_other_row_counts_compiles_nothing(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(8)
    runs = []
    for n in (1800, 2700):
        keys, values = rng.integers(0, 20, n), rng.random(n)
        out, stats = tmr.sort_by_key(keys, values, cluster=cluster, sizes=[0, n - 5, 5], reducers=3, return_stats=True)  # type: ignore[call-arg]
        order = stable_order(keys, descending=False)
        np.testing.assert_array_equal(out[0].gather(), keys[order])
        np.testing.assert_array_equal(out[1].gather(), values[order])
        out[0].delete(), out[1].delete()
        runs.append(stats.compiled)
    assert runs[1] is False


def test_errors_name_the_argument_and_the_fix(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.InputError, match=r"x must be 1-D .* got shape \(3, 2\); sort one column"):
        tmr.sort(np.zeros((3, 2)), cluster=cluster)
    with pytest.raises(ValueError, match=r"max_bytes must be None .* or an int ≥ 1"):
        tmr.sort(np.arange(3), cluster=cluster, max_bytes=0)
    with pytest.raises(TypeError, match=r"x must be one array, got a tuple of 2; .* tmr.sort_by_key\(keys, values\)"):
        tmr.sort((np.arange(3), np.arange(3)), cluster=cluster)
    with pytest.raises(tmr.InputError, match=r"keys must be 1-D"):
        tmr.sort_by_key(np.zeros((3, 1)), np.arange(3), cluster=cluster)
    with pytest.raises(tmr.InputError, match=r"co-partitioned inputs must have the same rows"):
        tmr.sort_by_key(np.arange(3), np.arange(4), cluster=cluster)
    with pytest.raises(TypeError, match=r"x must hold integers .* or strings \(str or bytes\), got dtype bool; convert it"):
        tmr.sort(np.array([True, False]), cluster=cluster)
    with pytest.raises(TypeError, match=r"descending must be True or False, got str 'yes'"):
        tmr.sort(np.arange(3), cluster=cluster, descending="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"speculate=True does not apply to sort.*drop speculate="):
        tmr.sort(np.arange(3), cluster=cluster, speculate=True)
    with pytest.raises(tmr.PlacementError, match=r"reducers=0: expected a number of reducer devices from 1 to 4"):
        tmr.sort(np.arange(3), cluster=cluster, reducers=0)


def stable_order(keys: np.ndarray, *, descending: bool) -> np.ndarray:
    """numpy's stable order of the keys (equal keys, NaNs together, in input order), from the largest down if asked."""
    _, rank = np.unique(keys, return_inverse=True)
    return np.lexsort((np.arange(len(keys)), -rank if descending else rank))


@settings(max_examples=examples(12))
@given(inputs(), st.integers(1, 4), st.booleans())
def test_sort_by_key_is_stable_and_carries_the_values(
    cluster: tmr.LocalCluster, case: tuple[np.ndarray, list[int]], reducers: int, descending: bool
) -> None:
    keys, sizes = case
    values = np.arange(len(keys) * 2, dtype=np.int64).reshape(-1, 2)  # the row numbers: any instability shows
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_splitters, "SAMPLES", 3)  # sampled splitters: equal keys split over ranges
        k, v = tmr.sort_by_key(keys, values, cluster=cluster, sizes=sizes, reducers=reducers, descending=descending)
    with k, v:
        order = stable_order(keys, descending=descending)
        np.testing.assert_array_equal(k.gather(), keys[order])
        np.testing.assert_array_equal(v.gather(), values[order])
        assert k.plan == v.plan


def test_sort_by_key_carries_strings_and_several_values(cluster: tmr.LocalCluster) -> None:
    keys = np.array([2, 1, 2, 0, 1])
    words = np.array(["b", "a", "bb", "", "aa"])
    (k, (w, n)), stats = tmr.sort_by_key(keys, (words, keys * 10), cluster=cluster, return_stats=True)  # type: ignore[call-arg]
    with k, w, n:
        assert k.gather().tolist() == [0, 1, 1, 2, 2]
        assert w.gather().tolist() == ["", "a", "aa", "b", "bb"]  # str in, str out
        assert n.gather().tolist() == [0, 10, 10, 20, 20]
    assert stats.attempts == 1


@st.composite
def strings(draw: st.DrawFn) -> tuple[list[bytes], list[int]]:
    """Byte strings with NUL and high bytes, prefixes of each other, the empty string, and UTF-8 text."""
    some = st.one_of(st.binary(max_size=9), st.sampled_from([b"", b"\0", b"a", b"a\0", b"ab", b"\xff"]))
    text = st.text(max_size=5).map(str.encode)
    x = draw(st.lists(st.one_of(some, text), max_size=40))
    return x, draw(size_lists(len(x), max_shards=4))


@settings(max_examples=examples(12))
@given(strings(), st.integers(1, 4), st.booleans(), st.booleans())
def test_strings_sort_in_byte_order_native_or_stock(
    cluster: tmr.LocalCluster, case: tuple[list[bytes], list[int]], reducers: int, descending: bool, native: bool
) -> None:
    x, sizes = case
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_splitters, "SAMPLES", 2)  # few splitters: many rows tie with them
        if not native:
            patch.setattr(_call, "available", lambda cluster, timeout, *ops: False)
        array = np.array(x, dtype=object)
        k, v = tmr.sort_by_key(array, np.arange(len(x)), cluster=cluster, sizes=sizes, reducers=reducers, descending=descending)
    with k, v:
        order = stable_order(array, descending=descending)
        assert k.gather().tolist() == [x[i] for i in order]
        np.testing.assert_array_equal(v.gather(), order)


def test_fixed_width_binary_and_unicode_keys_sort_like_numpy(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(8)
    binary = rng.integers(0, 4, (3000, 10), dtype=np.uint8).view("S10").ravel()  # TeraSort's keys, NUL bytes inside
    with tmr.sort(binary, cluster=cluster) as result:
        np.testing.assert_array_equal(np.array(result.gather().tolist(), dtype="S10"), np.sort(binary))
    text = np.array(["zé", "a", "é", "", "b", "ab", "😀", "Z"] * 40)
    with tmr.sort(text, cluster=cluster, descending=True, reducers=3) as result:
        assert result.gather().tolist() == np.sort(text)[::-1].tolist()  # UTF-8 order is code point order; str back
        fair(result)


def test_a_range_over_its_budget_is_refused_before_a_row_travels(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(
        tmr.ReducerMemoryError,
        match=r"range \d of the sort .* would receive [\d,]+ rows, [\d,]+ bytes .*max_bytes=4000.*reducers=N",
    ):
        tmr.sort(np.arange(4000), cluster=cluster, reducers=2, max_bytes=4000)
    with tmr.sort(np.arange(4000), cluster=cluster, reducers=2, max_bytes=100_000) as result:  # 3 × 8 × ~2000 bytes fit
        check_sorted(result, np.arange(4000))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_the_native_radix_sorts_are_a_stable_argsort_and_a_sort(dtype: type) -> None:
    ops = kernels()
    if ops is None:
        pytest.skip("no native kernels on this machine (no compiler, or TFMAPREDUCE_NATIVE=0)")
    info = np.iinfo(dtype)
    rng = np.random.default_rng(4)
    for keys in (rng.integers(info.min, info.max, 5000, dtype=dtype, endpoint=True), rng.integers(-3, 3, 5000).astype(dtype)):
        keys[:3] = [info.min, info.max, 0]
        np.testing.assert_array_equal(ops.tmr_stable_argsort(tf.constant(keys)).numpy(), np.argsort(keys, kind="stable"))
    assert ops.tmr_stable_argsort(tf.zeros([0], tf.int64)).shape == (0,)
    for keys in (rng.integers(info.min, info.max, 5000, dtype=dtype, endpoint=True), np.array([info.max, 0, info.min], dtype)):
        np.testing.assert_array_equal(ops.tmr_sort_values(tf.constant(keys)).numpy(), np.sort(keys))
        np.testing.assert_array_equal(ops.tmr_sort_values(tf.constant(keys), descending=True).numpy(), np.sort(keys)[::-1])
    assert ops.tmr_sort_values(tf.zeros([0], dtype)).shape == (0,)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_native_value_sort_orders_floats_as_numpy(dtype: type) -> None:
    ops = kernels()
    if ops is None:
        pytest.skip("no native kernels on this machine (no compiler, or TFMAPREDUCE_NATIVE=0)")
    x = np.random.default_rng(5).normal(size=5000).astype(dtype)
    x[:8] = [np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, np.finfo(dtype).tiny / 4, -np.finfo(dtype).max]
    got = ops.tmr_sort_values(tf.constant(x)).numpy()
    np.testing.assert_array_equal(got, np.sort(x))  # NaN last, -0.0 equal to 0.0
    assert not np.signbit(got[got == 0]).any()
    assert np.isnan(got[-2:]).all()
    np.testing.assert_array_equal(ops.tmr_sort_values(tf.constant(x), descending=True).numpy(), np.sort(x)[::-1])


def test_the_stock_sort_where_a_task_lacks_the_native_kernels(cluster: tmr.LocalCluster) -> None:
    x = np.random.default_rng(6).integers(-5, 5, 3000)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_call, "available", lambda cluster, timeout, *ops: False)
        k, v = tmr.sort_by_key(x, np.arange(len(x)), cluster=cluster, descending=True)
    with k, v:
        order = stable_order(x, descending=True)
        np.testing.assert_array_equal(k.gather(), x[order])
        np.testing.assert_array_equal(v.gather(), order)


def test_the_plan_explains_the_ranges(cluster: tmr.LocalCluster) -> None:
    from tfmapreduce._kinds.sort import Sort
    from tfmapreduce._ops.splitters import SAMPLES
    from tfmapreduce._options import RunOptions

    plan = _engine.plan(Sort(False), np.arange(10_000), RunOptions.of(cluster=cluster, sizes=2, reducers=2))
    assert plan.samples == 2 * SAMPLES
    assert "2 range(s) from 512 sampled rows" in plan.explain()


def test_files_are_read_into_resident_data_sorted_and_freed(
    cluster: tmr.LocalCluster, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[tmr.Sharded] = []
    persist = tmr.Files.persist

    def spied(self: tmr.Files, **options: Any) -> tmr.Sharded:
        made.append(persist(self, **options))
        return made[-1]

    monkeypatch.setattr(tmr.Files, "persist", spied)
    rng = np.random.default_rng(9)
    parts = [rng.normal(size=n) for n in (300, 0, 500)]
    paths = []
    for i, part in enumerate(parts):
        paths.append(str(tmp_path / f"x{i}.npy"))
        np.save(paths[-1], part)
    (tmp_path / "t.csv").write_text("k,v\n" + "".join(f"{k},{k * 10}\n" for k in (3, 1, 2, 1)))
    x = np.concatenate(parts)
    with tmr.sort(tmr.read_npy(paths), cluster=cluster, sizes=3, descending=True) as result:
        check_sorted(result, x, descending=True)
    k, v = tmr.sort_by_key(tmr.read_npy(paths), np.arange(len(x)), cluster=cluster)
    with k, v:
        np.testing.assert_array_equal(v.gather(), np.argsort(x, kind="stable"))
    assert tmr.median(tmr.read_npy(paths), cluster=cluster) == np.median(x)
    assert tmr.quantile(tmr.read_csv(str(tmp_path / "t.csv")), 0.5, axis=0, cluster=cluster).tolist() == [1.5, 15.0]
    assert len(made) == 4
    assert all("deleted" in repr(copy) for copy in made)  # the resident copies of the files are freed
