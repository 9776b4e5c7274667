"""Group jobs: every value of a key on its reducer (``tmr.per_group`` and the group recipes) — on real workers.

Every result equals a single-process reference (numpy per key, pure-Python grouping) exactly for
integers and counts, within rtol 1e-12 for float64 quantiles, for any partition (empty shards
included), any number of reducers from 1 to the cluster's 4 devices, and int32, int64 and string keys
(unicode and the empty string included).  Each example compiles a graph, so the counts stay small.
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
from strategies import draw_keys, examples, size_lists

import tfmapreduce as tmr
from tfmapreduce._kinds.shuffle.map_side import split
from tfmapreduce._native.loader import kernels
from tfmapreduce._ops.grouping import grouped, string_ranks
from tfmapreduce.recipes import _by_group as _by_group

QRTOL = 1e-12

BATCHES = st.sampled_from([None, 3])
"""batch_rows=: None (a shard mapped at once) or small enough that shards are mapped batch by batch."""


def _pair(k: tf.Tensor, v: Any) -> tuple[tf.Tensor, Any]:
    return k, v


@st.composite
def keyed(draw: st.DrawFn, *, values: str = "int", max_rows: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """(keys, values): int32, int64 or string keys (unicode and "" included) from a small pool, so keys repeat."""
    kind = draw(st.sampled_from(["int32", "int64", "str"]))
    rows = draw(st.integers(0, max_rows))
    keys = draw_keys(draw, kind, rows, strings=5, ints=6, small=5)
    if values == "float":
        floats = st.floats(-1e3, 1e3, allow_subnormal=False)
        array = np.array(draw(st.lists(floats, min_size=rows, max_size=rows)), np.float64)
    else:  # small integers: repeated values, ties within a key
        array = np.array(draw(st.lists(st.integers(-4, 4), min_size=rows, max_size=rows)), np.int64)
    return keys, array


def layout(data: st.DataObject, rows: int) -> dict[str, Any]:
    return {"sizes": data.draw(size_lists(rows)), "reducers": data.draw(st.integers(1, 4)), "batch_rows": data.draw(BATCHES)}


def groups(keys: np.ndarray, values: np.ndarray) -> dict[Any, np.ndarray]:
    """{key: its values in input order}, grouped in pure Python."""
    rows: dict[Any, list[int]] = collections.defaultdict(list)
    for i, key in enumerate(keys.tolist()):
        rows[key].append(i)
    return {k: values[r] for k, r in rows.items()}


def check_keys(result: tmr.KeyedResult, expected: dict[Any, Any]) -> None:
    assert isinstance(result, tmr.KeyedResult)
    assert result.keys.tolist() == sorted(expected)


# --------------------------------------------------------------------------- per_group with a user function


def _summary(keys: tf.Tensor, values: tf.RaggedTensor) -> dict[str, Any]:
    """Dense and ragged results at once: each key's sum and count, and every value."""
    return {"sum": tf.reduce_sum(values, axis=1), "n": values.row_lengths(), "all": values}


SUMMARY = tmr.per_group(_summary)
SUMMARY_SORTED = tmr.per_group(_summary, sort_values=True)


@settings(max_examples=examples(6))
@given(data=st.data())
def test_per_group_sees_every_value_of_each_key(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    keys, values = data.draw(keyed())
    sort_values = data.draw(st.booleans())
    job = tmr.MapReduce(_pair, SUMMARY_SORTED if sort_values else SUMMARY, by_key=True)
    result = job.run((keys, values), cluster=cluster, **layout(data, len(keys)))
    expected = groups(keys, values)
    check_keys(result, expected)
    for key, got in result:
        want = expected[key]
        assert got["sum"] == want.sum(), key
        assert got["n"] == len(want), key
        assert got["sum"].dtype == np.int64
        every = got["all"]
        assert isinstance(every, np.ndarray)
        np.testing.assert_array_equal(every if sort_values else np.sort(every), np.sort(want))


def _lexicographic(keys: tf.Tensor, values: tuple[tf.RaggedTensor, tf.RaggedTensor]) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    return values


def test_nested_values_sort_as_records(cluster: tmr.LocalCluster) -> None:
    """A structure of values groups as one record per row, sorted by its first leaf, then the next (Hadoop's secondary sort)."""
    keys = np.array(["b", "a", "b", "b", "", "a"], dtype=object)
    first = np.array([2, 1, 2, 1, 7, 0], np.int32)
    second = np.array([0.5, 1.0, -1.0, 3.0, 2.0, 9.0])
    job = tmr.MapReduce(lambda k, a, b: (k, (a, b)), tmr.per_group(_lexicographic, sort_values=True), by_key=True)
    result = job.run((keys, first, second), cluster=cluster, sizes=[2, 0, 4], reducers=2)
    assert result.keys.tolist() == ["", "a", "b"]
    a, b = result["b"]
    assert a.tolist() == [1, 2, 2]
    assert b.tolist() == [3.0, -1.0, 0.5]
    a, b = result["a"]
    assert a.tolist() == [0, 1]
    assert b.tolist() == [9.0, 1.0]


def test_a_reducer_without_keys_and_an_empty_input(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(_pair, SUMMARY_SORTED, by_key=True)
    one_key = job.run((np.full(5, 3, np.int64), np.arange(5)), cluster=cluster, reducers=4, sizes=[0, 5, 0])
    assert one_key.keys.tolist() == [3]
    assert one_key[3]["sum"] == 10
    assert one_key[3]["all"].tolist() == [0, 1, 2, 3, 4]
    nothing = job.run((np.zeros(0, np.int64), np.zeros(0, np.int64)), cluster=cluster, reducers=3)
    assert len(nothing) == 0


def test_files_read_on_the_workers_group_in_batches(cluster: tmr.LocalCluster, tmp_path: Any) -> None:
    table = np.random.default_rng(3).integers(0, 5, (40, 2)).astype(np.int64)  # columns: key, value
    for i, part in enumerate(np.array_split(table, 3)):
        np.save(tmp_path / f"part-{i}.npy", part)
    job = tmr.MapReduce(lambda t: (t[:, 0], t[:, 1]), tmr.per_group(_summary, sort_values=True), by_key=True)
    result = job.run(tmr.read_npy(str(tmp_path / "*.npy")), cluster=cluster, batch_rows=4, reducers=3)
    expected = groups(table[:, 0], table[:, 1])
    check_keys(result, expected)
    for key, got in result:
        np.testing.assert_array_equal(got["all"], np.sort(expected[key]))


def test_resident_keeps_dense_and_ragged_results_on_the_reducers(cluster: tmr.LocalCluster) -> None:
    keys, values = np.array([4, 1, 4, 4, 2]), np.array([1.0, 2.0, 3.0, 5.0, 4.0])
    with tmr.median_by_key(keys, values, cluster=cluster, resident=True, reducers=2) as kept:
        assert isinstance(kept, tmr.KeyedSharded)
        assert kept.gather().to_dict() == {1: 2.0, 2: 4.0, 4: 3.0}
        assert float(tmr.sum(kept.values)) == 9.0  # a second job over the medians, in place
    with tmr.top_k_by_key(keys, values, 2, cluster=cluster, resident=True, reducers=3) as top:
        assert isinstance(top.values, tmr.RaggedSharded)
        assert {k: v.tolist() for k, v in top.gather()} == {1: [2.0], 2: [4.0], 4: [5.0, 3.0]}
        assert int(tmr.sum(top.values.row_lengths)) == 4
        assert float(tmr.sum(top.values.flat_values)) == 14.0
        with pytest.raises(TypeError, match=r"tmr.write_csv takes one row per key.*RaggedSharded"):
            tmr.write_csv(top, "unused")
    nested = tmr.per_group(lambda k, v: {"all": v["x"], "n": v["x"].row_lengths()}, sort_values=True)
    job = tmr.MapReduce(lambda k, v: (k, {"x": v}), nested, by_key=True)
    with job.run((keys, values), cluster=cluster, resident=True, reducers=2) as kept:  # a ragged leaf beside a dense one
        got = kept.gather()
        assert {k: v.tolist() for k, v in zip(got.keys, got.values["all"], strict=True)} == {
            1: [2.0],
            2: [4.0],
            4: [1.0, 3.0, 5.0],
        }
        assert got.values["n"].tolist() == [1, 1, 3]
    kept.delete()  # twice is safe


# --------------------------------------------------------------------------- recipes vs numpy


@settings(max_examples=examples(10))
@given(data=st.data())
def test_quantile_by_key_equals_numpy(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    keys, values = data.draw(keyed(values=data.draw(st.sampled_from(["int", "float"]))))
    method = data.draw(st.sampled_from(["linear", "lower", "higher", "nearest", "midpoint"]))
    q = data.draw(st.one_of(st.floats(0, 1), st.lists(st.floats(0, 1), min_size=1, max_size=3)))
    result = tmr.quantile_by_key(keys, values, q, method=method, cluster=cluster, **layout(data, len(keys)))
    expected = {k: np.quantile(v, q, method=method) for k, v in groups(keys, values).items()}
    check_keys(result, expected)
    for key, got in result:
        if method in ("lower", "higher", "nearest"):
            np.testing.assert_array_equal(got, expected[key], err_msg=repr(key))  # values of the input, exactly
            assert np.asarray(got).dtype == values.dtype
        else:
            np.testing.assert_allclose(got, expected[key], rtol=QRTOL, atol=0, err_msg=repr(key))


def test_median_by_key_equals_numpy_with_nan(cluster: tmr.LocalCluster) -> None:
    keys = np.array([1, 1, 2, 2, 2, 3, 3])
    values = np.array([5.0, -1.0, np.nan, 1.0, 2.0, 4.0, 4.5])
    result = tmr.median_by_key(keys, values, cluster=cluster, sizes=[3, 4], reducers=3)
    np.testing.assert_array_equal(result.values, [2.0, np.nan, 4.25])  # a key with a NaN: NaN, as np.median


@pytest.mark.parametrize("key_kind", ["int64", "str"])  # int keys: the native select; strings: the sorted groups
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_median_by_key_of_infinities_equals_numpy(cluster: tmr.LocalCluster, key_kind: str, dtype: type) -> None:
    # Issue 38: the median interpolated a + (b - a) / 2, so [1, inf] gave inf - inf = nan; np.median gives inf.
    groups = [[1.0, np.inf], [np.inf], [-np.inf, -np.inf, 3.0], [-np.inf, np.inf], [2.0, 5.0, np.inf, -1.0], [-np.inf, 7.0]]
    keys = np.concatenate([np.full(len(g), k, np.int64) for k, g in enumerate(groups)])
    values = np.concatenate(groups).astype(dtype)
    if key_kind == "str":
        keys = np.array([f"k{k}" for k in keys])
    with np.errstate(invalid="ignore"):  # numpy warns on [-inf, inf]
        expected = {key: np.median(values[keys == key].astype(np.float64)) for key in np.unique(keys).tolist()}
    for layout in ({"sizes": [len(keys)]}, {"sizes": [4, 0, 10], "reducers": 3}):
        got = tmr.median_by_key(keys, values, cluster=cluster, **layout).to_dict()
        assert got.keys() == expected.keys()
        for key, want in expected.items():
            np.testing.assert_array_equal(got[key], want, err_msg=f"{key!r} {layout}")


@pytest.mark.parametrize("partitioner", ["hash", "range"])
def test_a_group_recipe_over_other_row_counts_compiles_nothing(cluster: tmr.LocalCluster, partitioner: str) -> None:
    """Host arrays of new row counts at the same places run the first run's program (its shards' rows are run
    inputs, as a keyed combine's); each result equals numpy's."""
    rng = np.random.default_rng(11)
    compiled = []
    for n in (40, 7, 61):
        keys, values = rng.integers(0, 6, n), rng.normal(size=n)
        layout = {"sizes": [n // 3, 0, n - n // 3], "reducers": 2, "partitioner": partitioner}
        got, stats = tmr.median_by_key(keys, values, cluster=cluster, return_stats=True, **layout)  # type: ignore[call-overload]
        assert got.to_dict() == pytest.approx({k: np.median(values[keys == k]) for k in np.unique(keys).tolist()}, rel=1e-12)
        compiled.append(stats.compiled)
    assert compiled == [True, False, False]


@settings(max_examples=examples(5))
@given(data=st.data())
def test_top_k_by_key_equals_sorted_values(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    keys, values = data.draw(keyed())
    k, largest = data.draw(st.integers(1, 4)), data.draw(st.booleans())
    result = tmr.top_k_by_key(keys, values, k, largest=largest, cluster=cluster, **layout(data, len(keys)))
    expected = {key: (np.sort(v)[::-1] if largest else np.sort(v))[:k] for key, v in groups(keys, values).items()}
    check_keys(result, expected)
    for key, got in result:
        np.testing.assert_array_equal(got, expected[key], err_msg=repr(key))
        assert got.dtype == np.int64


@settings(max_examples=examples(4))
@given(data=st.data())
def test_count_distinct_by_key_is_exact(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    keys, values = data.draw(keyed())
    as_type: Callable[[np.ndarray], np.ndarray] = data.draw(
        st.sampled_from([lambda v: v, lambda v: v.astype(np.float32) / 2, lambda v: np.array([str(x) * 2 for x in v], object)])
    )
    values = as_type(values)
    result = tmr.count_distinct_by_key(keys, values, cluster=cluster, **layout(data, len(keys)))
    expected = {k: len(set(v.tolist())) for k, v in groups(keys, values).items()}
    check_keys(result, expected)
    assert result.to_dict() == expected
    assert result.values.dtype == np.int64


def test_count_distinct_compares_floats_as_numpy(cluster: tmr.LocalCluster) -> None:
    keys = np.array([1, 1, 1, 1, 1, 2])
    values = np.array([0.0, -0.0, np.nan, np.nan, 1.5, np.nan])
    result = tmr.count_distinct_by_key(keys, values, cluster=cluster, sizes=[2, 4], batch_rows=1)
    assert result.to_dict() == {1: len(np.unique(values[:5])), 2: 1} == {1: 3, 2: 1}


@settings(max_examples=examples(6))
@given(data=st.data())
def test_collect_by_key_gives_every_value(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    keys, values = data.draw(keyed(values="float"))
    sort_values = data.draw(st.booleans())
    result = tmr.collect_by_key(keys, values, sort_values=sort_values, cluster=cluster, **layout(data, len(keys)))
    expected = groups(keys, values)
    check_keys(result, expected)
    for key, got in result:
        np.testing.assert_array_equal(got if sort_values else np.sort(got), np.sort(expected[key]), err_msg=repr(key))
    lengths = np.fromiter(map(len, result.values), np.int64, len(result))  # as the docs say
    assert lengths.sum() == len(keys)
    assert np.concatenate([*result.values, np.zeros(0)]).size == len(keys)


def test_collect_gives_strings_back_as_they_came(cluster: tmr.LocalCluster) -> None:
    keys = np.array([1, 2, 1], np.int64)
    result = tmr.collect_by_key(keys, np.array(["b", "日本", ""], dtype=object), cluster=cluster, reducers=2)
    assert sorted(result[1].tolist()) == ["", "b"]
    assert result[2].tolist() == ["日本"]
    raw = tmr.collect_by_key(keys, np.array([b"\xff", b"x", b"y"], dtype=object), cluster=cluster, reducers=2)
    assert sorted(raw[1].tolist()) == [b"y", b"\xff"]  # bytes in, bytes out
    assert raw[2].tolist() == [b"x"]


STRINGS = ["", "a", "a\x00", "ab", "b", "é", "日本", "z" * 20, "z" * 19 + "\x00", "A"]


@settings(max_examples=examples(8))
@given(data=st.data())
def test_collect_sorts_string_values_in_byte_order(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    """sort_values=True over strings: each key's values in the order numpy sorts their UTF-8 bytes (NUL bytes, unicode,
    the empty string), by the native kernel and by stock ops (strings keyed by strings too)."""
    rows = data.draw(st.integers(0, 30))
    keys = np.array(data.draw(st.lists(st.sampled_from(["k", "", "日"]), min_size=rows, max_size=rows)), dtype=object)
    values = np.array(data.draw(st.lists(st.sampled_from(STRINGS), min_size=rows, max_size=rows)), dtype=object)
    result = tmr.collect_by_key(keys, values, sort_values=True, cluster=cluster, **layout(data, rows))
    expected = {k: sorted(v.tolist(), key=lambda x: x.encode()) for k, v in groups(keys, values).items()}
    check_keys(result, expected)
    for key, got in result:
        assert got.tolist() == expected[key]


def test_string_ranks_of_the_stock_ops_equal_the_native_ones() -> None:
    strings = tf.constant([x.encode() for x in [*STRINGS, *STRINGS[::-1], "\xff"]] + [b"\xff\x00", b"\x00"])
    expected = {x: i for i, x in enumerate(sorted(set(strings.numpy().tolist())))}
    want = [expected[x] for x in strings.numpy().tolist()]
    assert string_ranks(strings, None).numpy().tolist() == want
    if kernels() is not None:
        assert string_ranks(strings, kernels()).numpy().tolist() == want


def test_collect_keeps_rows_of_2d_values(cluster: tmr.LocalCluster) -> None:
    values = np.arange(12).reshape(6, 2)
    result = tmr.collect_by_key(np.array([1, 2, 1, 1, 2, 1]), values, cluster=cluster, reducers=2)
    assert sorted(map(tuple, result[2].tolist())) == [(2, 3), (8, 9)]
    assert result[1].shape == (4, 2)


# --------------------------------------------------------------------------- the native sort of (key, value) rows

SORTED_DTYPES = ["int8", "int16", "int32", "uint32", "int64", "float16", "float32", "float64"]


@pytest.mark.skipif(kernels() is None, reason="the native kernels could not be built here")
@settings(max_examples=examples(25))
@given(data=st.data())
def test_native_grouping_of_sorted_values_equals_the_stock_one(data: st.DataObject) -> None:
    """grouped(sort_values=True) by the native sort of the rows = by tf.argsort: every key's values in the same order
    (NaN last, -0.0 before 0.0, integer extremes), for int32 and int64 keys, empty input included."""
    dtype = np.dtype(data.draw(st.sampled_from(SORTED_DTYPES)))
    rows = data.draw(st.integers(0, 40))
    keys = np.array(data.draw(st.lists(st.sampled_from([-(2**31), -1, 0, 5, 2**31 - 1]), min_size=rows, max_size=rows)))
    keys = keys.astype(data.draw(st.sampled_from([np.int32, np.int64])))
    if dtype.kind == "f":
        pool = [np.nan, -np.inf, np.inf, -0.0, 0.0, 1.5, -2.25, float(np.finfo(dtype).max)]
    else:
        pool = [int(np.iinfo(dtype).min), -1, 0, 3, int(np.iinfo(dtype).max)]
    values = np.array(data.draw(st.lists(st.sampled_from(pool), min_size=rows, max_size=rows)), dtype=dtype)

    def by_key(native: Any) -> dict[int, bytes]:
        distinct, rows_of = grouped(tf.constant(keys), tf.constant(values), sort_values=True, native=native)
        out = {}
        for key, row in zip(distinct.numpy().tolist(), rows_of.to_list(), strict=True):
            row = np.array(row, dtype)
            row[np.isnan(row)] = np.nan if dtype.kind == "f" else 0  # one NaN: payloads may differ
            out[key] = row.tobytes()
        return out

    assert by_key(kernels()) == by_key(None)


@pytest.mark.skipif(kernels() is None, reason="the native kernels could not be built here")
@settings(max_examples=examples(25))
@given(data=st.data())
def test_native_selection_of_quantiles_equals_the_sorted_one(data: st.DataObject) -> None:
    """The quantiles by key selected in place (TmrSelectByKey) = those read from each key's sorted values, bit for bit,
    for every method: keys of a small span (grouped by offset) and of a wide one (hashed), NaN, -0.0, extremes."""
    dtype = np.dtype(data.draw(st.sampled_from([*SORTED_DTYPES, "uint8"])))
    rows = data.draw(st.integers(0, 40))
    pool = data.draw(st.sampled_from([[-3, 0, 2, 7], [-(2**31), -1, 0, 5, 2**31 - 1]]))
    keys = np.array(data.draw(st.lists(st.sampled_from(pool), min_size=rows, max_size=rows)), dtype=np.int64)
    keys = keys.astype(data.draw(st.sampled_from([np.int32, np.int64])))
    if dtype.kind == "f":
        choices = [np.nan, -np.inf, np.inf, -0.0, 0.0, 1.5, -2.25, float(np.finfo(dtype).max)]
    else:
        choices = [int(np.iinfo(dtype).min), 0, 1, 3, int(np.iinfo(dtype).max)]
    values = tf.constant(np.array(data.draw(st.lists(st.sampled_from(choices), min_size=rows, max_size=rows)), dtype=dtype))
    q = tuple(data.draw(st.lists(st.floats(0, 1), min_size=1, max_size=3)))
    method = data.draw(st.sampled_from(_by_group.METHODS))
    distinct, selected = _by_group._selected(tf.constant(keys), values, kernels(), q, method, scalar=False)
    ids, rows_of = grouped(tf.constant(keys), values, sort_values=True)
    read = _by_group._quantiles(ids, rows_of, q, method, scalar=False)
    assert selected.dtype == read.dtype
    mine = dict(zip(distinct.numpy().tolist(), selected.numpy().tolist(), strict=True))
    theirs = dict(zip(ids.numpy().tolist(), read.numpy().tolist(), strict=True))
    assert mine.keys() == theirs.keys()
    for key, got in mine.items():
        np.testing.assert_array_equal(got, theirs[key], err_msg=repr(key))


@pytest.mark.skipif(kernels() is None, reason="the native kernels could not be built here")
@settings(max_examples=examples(25))
@given(data=st.data())
def test_native_top_k_and_split_equal_the_stock_ones(data: st.DataObject) -> None:
    """Each key's top k by TmrTopKByKey = the first k of its sorted values; rows split by TmrPartition = by the hash and
    tf.dynamic_partition (the same reducer for every key, rows in order)."""
    dtype = np.dtype(data.draw(st.sampled_from(["int32", "int64", "float32", "float64", "uint8"])))
    rows = data.draw(st.integers(0, 40))
    pool = data.draw(st.sampled_from([[-3, 0, 2, 7], [-(2**31), -1, 0, 5, 2**31 - 1]]))
    keys = tf.constant(np.array(data.draw(st.lists(st.sampled_from(pool), min_size=rows, max_size=rows)), dtype=np.int64))
    choices = [np.nan, -np.inf, 0.0, 1.5, -2.25] if dtype.kind == "f" else [0, 1, 3, int(np.iinfo(dtype).max)]
    values = tf.constant(np.array(data.draw(st.lists(st.sampled_from(choices), min_size=rows, max_size=rows)), dtype=dtype))
    k, largest = data.draw(st.integers(1, 5)), data.draw(st.booleans())
    distinct, top = _by_group._top_k_selected(keys, values, kernels(), k, largest)
    ids, rows_of = grouped(keys, values, sort_values=True)
    want = _by_group._top_k(ids, rows_of, k, largest)
    assert dict(zip(distinct.numpy().tolist(), map(str, top.to_list()), strict=True)) == dict(
        zip(ids.numpy().tolist(), map(str, want.to_list()), strict=True)
    )
    reducers = data.draw(st.integers(2, 5))
    for (k1, v1), (k2, v2) in zip(split(keys, values, reducers, kernels()), split(keys, values, reducers), strict=True):
        assert k1.numpy().tolist() == k2.numpy().tolist()
        np.testing.assert_array_equal(v1.numpy(), v2.numpy())


@pytest.mark.skipif(kernels() is None, reason="the native kernels could not be built here")
def test_native_split_sends_every_int64_key_to_its_hash_mod_reducers() -> None:
    """TmrPartition's reducer (a multiply-shift, no division) = ((k * 0x9E3779B97F4A7C15 mod 2^64) >> 32) mod R for
    keys over all of int64 and any R, rows in order."""
    rng = np.random.default_rng(5)
    keys = np.concatenate([rng.integers(-(2**63), 2**63 - 1, 20_000, dtype=np.int64), [-(2**63), 2**63 - 1, -1, 0]])
    hashes = (keys.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)
    for reducers in (2, 3, 7, 10, 64, 1000):
        parts = split(tf.constant(keys), tf.constant(np.arange(len(keys))), reducers, kernels())
        want = (hashes % np.uint64(reducers)).astype(np.int64)
        for r, (k, v) in enumerate(parts):
            rows = np.flatnonzero(want == r)
            np.testing.assert_array_equal(v.numpy(), rows)
            np.testing.assert_array_equal(k.numpy(), keys[rows])


# --------------------------------------------------------------------------- skew


@pytest.mark.slow
def test_one_key_holding_every_row(cluster: tmr.LocalCluster) -> None:
    rows = 10_000_000
    values = np.random.default_rng(1).random(rows, np.float32)
    keys = np.full(rows, 7, np.int64)
    median = tmr.median_by_key(keys, values, cluster=cluster, reducers=4)
    assert median.keys.tolist() == [7]
    np.testing.assert_allclose(median[7], np.median(values), rtol=QRTOL)
    top = tmr.top_k_by_key(keys, values, 3, cluster=cluster)
    np.testing.assert_array_equal(top[7], np.sort(values)[::-1][:3])


def test_many_keys_of_one_value_each(cluster: tmr.LocalCluster) -> None:
    rows = 100_000
    keys = np.random.default_rng(2).permutation(rows).astype(np.int64)
    values = keys * 2
    result = tmr.median_by_key(keys, values, cluster=cluster, reducers=3)
    np.testing.assert_array_equal(result.keys, np.arange(rows))
    np.testing.assert_array_equal(result.values, np.arange(rows) * 2.0)
    assert tmr.count_distinct_by_key(keys, values, cluster=cluster).values.sum() == rows


def test_group_recipes_read_a_csv_table_by_column_name(cluster: tmr.LocalCluster, tmp_path: Any) -> None:
    """Every group recipe takes a read_csv table with keys= and values=, as mean_by_key does (issue 38)."""
    import pandas as pd

    rng = np.random.default_rng(38)
    frame = pd.DataFrame({"city": rng.choice(["oslo", "rome", "lima"], 300), "price": rng.integers(0, 500, 300) / 4})
    frame.to_csv(tmp_path / "t.csv", index=False)
    table, by = tmr.read_csv(str(tmp_path / "t.csv")), frame.groupby("city").price
    median = tmr.median_by_key(table, keys="city", values="price", cluster=cluster, sizes=2)
    assert median.to_dict() == pytest.approx(by.median().to_dict())
    quartiles = tmr.quantile_by_key(table, keys="city", values="price", q=[0.25, 0.75], cluster=cluster).to_dict()
    for city, values in by:
        np.testing.assert_allclose(quartiles[city], np.quantile(values, [0.25, 0.75]), rtol=QRTOL)
    top = tmr.top_k_by_key(table, keys="city", values="price", k=2, cluster=cluster, sizes=3)
    assert {c: v.tolist() for c, v in top.to_dict().items()} == {c: sorted(v)[::-1][:2] for c, v in by}
    assert tmr.count_distinct_by_key(table, keys="city", values="price", cluster=cluster).to_dict() == by.nunique().to_dict()
    collected = tmr.collect_by_key(table, keys="city", values="price", sort_values=True, cluster=cluster).to_dict()
    assert {c: v.tolist() for c, v in collected.items()} == {c: sorted(v) for c, v in by}
    with pytest.raises(TypeError, match=r"top_k_by_key: k is missing.*k=3"):
        tmr.top_k_by_key(table, keys="city", values="price", cluster=cluster)
    with pytest.raises(tmr.InputError, match=r"median_by_key: values= must name one column"):
        tmr.median_by_key(table, keys="city", values=["price", "price"], cluster=cluster)


# --------------------------------------------------------------------------- bad inputs


def test_fn_with_other_rows_than_keys_is_named(cluster: tmr.LocalCluster) -> None:
    def flat(keys: tf.Tensor, values: tf.RaggedTensor) -> tf.Tensor:
        return values.flat_values

    job = tmr.MapReduce(_pair, tmr.per_group(flat), by_key=True)
    with pytest.raises(
        tmr.MapFunctionError, match=r"per_group fn .*flat returned 3 rows on reducer 0 .* 2 keys; fn must return one row per key"
    ):
        job.run((np.array([1, 1, 2]), np.arange(3)), cluster=cluster, reducers=1)


def test_fn_that_is_not_traceable_is_named(cluster: tmr.LocalCluster) -> None:
    def eager(keys: tf.Tensor, values: tf.RaggedTensor) -> Any:
        return np.asarray(keys.numpy())

    job = tmr.MapReduce(_pair, tmr.per_group(eager), by_key=True)
    with pytest.raises(
        tmr.MapFunctionError, match=r"per_group fn .*eager raised AttributeError while traced on reducer 0.*no \.numpy\(\)"
    ):
        job.run((np.array([1, 2]), np.arange(2)), cluster=cluster)


def test_a_partition_over_budget_is_refused_before_it_travels(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(_pair, tmr.per_group(lambda k, v: tf.reduce_sum(v, axis=1), max_bytes=1000), by_key=True)
    keys = np.zeros(100, np.int64)
    for resident in (False, True):  # refused, then spilled (tests/_kinds/test_spill*.py): one key still does not fit
        with pytest.raises(
            tmr.ReducerMemoryError,
            match=r"reducer \d \(/job:local/.*\) would receive 100 values of the key 0 alone, about 1,600 bytes.*"
            r"max_bytes=1000.*even spilled",
        ):
            job.run((keys, np.arange(100)), cluster=cluster, reducers=2, resident=resident)
    assert job.run((keys[:10], np.arange(10)), cluster=cluster, reducers=2).to_dict() == {0: 45}  # 160 bytes: under budget


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda c: tmr.quantile_by_key([1], [1.0], 1.5, cluster=c), ValueError, r"q must be .* in \[0, 1\].*got 1.5"),
        (lambda c: tmr.quantile_by_key([1], [1.0], [0.5, -0.1], cluster=c), ValueError, r"q must be"),
        (lambda c: tmr.quantile_by_key([1], [1.0], 0.5, method="median", cluster=c), ValueError, r"method must be one of 'linear'.*got 'median'"),
        (lambda c: tmr.top_k_by_key([1], [1.0], 0, cluster=c), ValueError, r"k must be an int ≥ 1.*got 0"),
        (lambda c: tmr.median_by_key([1], ["a"], cluster=c), tmr.InputError, r"values of median_by_key must be a 1-D array of integers or floats"),
        (lambda c: tmr.median_by_key([1.5], [1.0], cluster=c), tmr.InputError, r"keys have dtype float64"),
        (lambda c: tmr.collect_by_key([1], [True], sort_values=True, cluster=c), tmr.MapFunctionError, r"bool.*cannot be sorted"),
        (lambda c: tmr.per_group(3), TypeError, r"fn must be a callable"),
        (lambda c: tmr.per_group(len, max_bytes=0), ValueError, r"max_bytes must be None .* or an int ≥ 1"),
        (lambda c: tmr.MapReduce(_pair, tmr.per_group(len)), TypeError, r"group reducer .* by_key=True"),
    ],
)  # fmt: skip
def test_bad_inputs_are_named(cluster: tmr.LocalCluster, call: Callable[[Any], Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        call(cluster)
