"""Numbers and inputs that v0.1 got wrong or answered with a raw TensorFlow error (regression tests)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr


def test_an_int64_mean_whose_sum_overflows_accumulates_in_float64(cluster: tmr.LocalCluster) -> None:
    x = np.array([2**62, 2**62, 1], np.int64)
    assert tmr.mean(x, cluster=cluster) == np.mean(x)
    assert tmr.mean(x, cluster=cluster) > 0


def test_uint64_values_above_2_63_sum_without_wrapping_negative(cluster: tmr.LocalCluster) -> None:
    x = np.array([2**63 + 5, 7, 2**62], np.uint64)
    assert tmr.sum(x, cluster=cluster, sizes=[1, 2]) == np.sum(x)
    assert tmr.sum(x, cluster=cluster).dtype == np.uint64
    assert tmr.mean(x, cluster=cluster) == pytest.approx(np.mean(x), rel=1e-15)


@pytest.mark.parametrize("recipe", [tmr.min, tmr.max])
def test_min_and_max_of_booleans(cluster: tmr.LocalCluster, recipe: object) -> None:
    x = np.array([[True, False], [True, True], [False, True]])
    for axis in (None, 0):
        got = recipe(x, axis=axis, cluster=cluster, sizes=[1, 2])  # type: ignore[operator]
        expected = getattr(np, recipe.__name__)(x, axis=axis)  # type: ignore[attr-defined]
        assert np.array_equal(got, expected)
        assert np.asarray(got).dtype == np.bool_


def test_a_histogram_with_explicit_edges_ignores_nan_like_numpy(cluster: tmr.LocalCluster) -> None:
    x = np.array([0.5, np.nan, 1.5, 2.5, np.nan])
    counts, edges = tmr.recipes.histogram(x, bins=[0, 1, 2, 3], cluster=cluster)
    expected = np.histogram(x, bins=[0, 1, 2, 3])
    assert np.array_equal(counts, expected[0])
    assert np.array_equal(edges, expected[1])


def test_a_histogram_with_explicit_edges_needs_no_data_range(cluster: tmr.LocalCluster) -> None:
    x = np.array([np.inf, 1.0, 7.0, -np.inf])  # a min/max pass would find an infinite range and refuse it
    counts, edges = tmr.recipes.histogram(x, bins=[0, 5, 10], cluster=cluster)
    expected = np.histogram(x, bins=[0, 5, 10])
    np.testing.assert_array_equal(counts, expected[0])
    np.testing.assert_array_equal(edges, expected[1])


@pytest.mark.parametrize(
    ("x", "message"),
    [
        (np.zeros(4, np.longdouble), "wider than TensorFlow's float64; convert it with x.astype"),
        (np.array([1, 2], "timedelta64[s]"), "dates or durations"),
        (np.array(["2026-01-01"], "datetime64[D]"), "dates or durations"),
    ],
)
def test_dtypes_tensorflow_cannot_hold_are_refused_with_a_fix(cluster: tmr.LocalCluster, x: np.ndarray, message: str) -> None:
    if x.dtype == np.longdouble and np.dtype(np.longdouble).itemsize <= 8:
        pytest.skip("long double is float64 on this platform")
    with pytest.raises(TypeError, match=message):
        tmr.mean(x, cluster=cluster)


def test_huge_weights_still_split_evenly(cluster: tmr.LocalCluster) -> None:
    plan = tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum).plan(np.zeros(10), cluster=cluster, sizes=tmr.weights(1e308, 1e308))
    assert plan.sizes == (5, 5)


def test_linear_regression_of_nan_says_so(cluster: tmr.LocalCluster) -> None:
    X = np.array([[0.0], [1.0], [np.nan]])
    with pytest.raises(tmr.InputError, match="NaN or infinite"):
        tmr.recipes.linear_regression(X, np.arange(3.0), cluster=cluster)


def test_kmeans_refuses_nan_rows_instead_of_dropping_them(cluster: tmr.LocalCluster) -> None:
    x = np.array([[0.0, 0.0], [np.nan, 1.0], [10.0, 10.0], [10.0, 11.0]])
    with pytest.raises(tmr.InputError, match="1 of 4 rows could not be assigned"):
        tmr.recipes.kmeans(x, 2, init=np.array([[0.0, 0.0], [10.0, 10.0]]), cluster=cluster)


def test_map_outputs_that_would_broadcast_are_an_error(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(lambda t: t[:1] if t.shape[0] == 1 else t[:9], tf.add)
    with pytest.raises(tmr.MapFunctionError, match=r"would broadcast"):
        job.run(np.arange(10.0), cluster=cluster, sizes=[9, 1])


def test_a_concatenating_merge_of_different_shapes_is_fine(cluster: tmr.LocalCluster) -> None:
    gather = tmr.Combiner(partial=lambda v, n: v, merge=lambda a, b: tf.concat([a, b], 0), name="concat")
    result = tmr.MapReduce(lambda t: t * 2, gather).run(np.arange(10.0), cluster=cluster, sizes=[9, 1])
    assert sorted(result) == sorted(np.arange(10.0) * 2)


# -- save_shards / load_shards trust nothing in the directory ---------------------------------------


def _saved(tmp_path: Path) -> Path:
    tmr.save_shards(np.arange(12.0).reshape(6, 2), tmp_path, sizes=[2, 4])
    return tmp_path


def _rewrite(directory: Path, **changes: object) -> None:
    manifest = json.loads((directory / "shards.json").read_text())
    manifest.update(changes)
    (directory / "shards.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"files": ["/etc/passwd", "shard-00001-of-00002.tensor"]}, "not a plain file name inside the directory"),
        ({"files": ["../x.tensor", "shard-00001-of-00002.tensor"]}, "not a plain file name inside the directory"),
        ({"files": ["shard-00000-of-00002.tensor"]}, "one file name per shard"),
        ({"sizes": [2, 5]}, "sum to 7, not the 6 rows"),
        ({"shape": [6, -2]}, "shape must be a list of ints"),
        ({"dtype": "U5"}, "not a numeric type"),
        ({"dtype": "nonsense"}, "not a readable shard manifest"),
    ],
)
def test_a_bad_manifest_is_refused_before_anything_runs(
    cluster: tmr.LocalCluster, tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    directory = _saved(tmp_path)
    _rewrite(directory, **changes)
    with pytest.raises(tmr.InputError, match=message):
        tmr.load_shards(directory, cluster=cluster)


def test_a_symlink_out_of_the_directory_is_refused(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    directory = _saved(tmp_path / "data")
    outside = tmp_path / "outside.tensor"
    os.replace(directory / "shard-00000-of-00002.tensor", outside)
    os.symlink(outside, directory / "shard-00000-of-00002.tensor")
    with pytest.raises(tmr.InputError, match="symlinks out are refused"):
        tmr.load_shards(directory, cluster=cluster)


def test_a_file_claiming_more_rows_than_it_holds_allocates_nothing(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    directory = _saved(tmp_path)
    (directory / "shard-00001-of-00002.tensor").write_bytes(b"x" * 12)
    _rewrite(directory, shape=[2 + 30_000_000, 2], sizes=[2, 30_000_000], dtype="<f8")
    with pytest.raises(tmr.InputError, match="shorter than the 30000000 rows"):
        tmr.load_shards(directory, cluster=cluster)


def test_a_file_that_is_not_a_tensor_is_not_echoed(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    directory = _saved(tmp_path)
    secret = b"SECRET-" * 100
    (directory / "shard-00001-of-00002.tensor").write_bytes(secret)
    with pytest.raises(tmr.InputError) as info:
        tmr.load_shards(directory, cluster=cluster)
    assert "SECRET" not in str(info.value)
    assert "shard-00001-of-00002.tensor" in str(info.value)


def test_a_feed_over_2_gib_is_refused_before_anything_is_sent(cluster: tmr.LocalCluster) -> None:
    x = np.zeros(2**29 + 2**25, np.float32)  # 2.1 GiB, never touched: calloc'd pages cost nothing
    with pytest.raises(tmr.InputError, match="2 GiB") as info:
        tmr.mean(x, cluster=cluster, transfer="feed")
    assert "read it on the workers" in str(info.value).lower() or "tmr.read_npy" in str(info.value)
    assert tmr.mean(np.ones(10), cluster=cluster) == 1.0  # the client and the cluster are fine


def test_scatter_stores_large_data_in_several_runs(cluster: tmr.LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    from tfmapreduce._io import resident as _resident

    monkeypatch.setattr(_resident, "STORE_BYTES", 3000)  # a few shards per storing run
    x = np.arange(1000.0)
    with tmr.scatter(x, cluster=cluster, sizes=8) as data:
        np.testing.assert_array_equal(data.gather(), x)
        assert tmr.sum(data) == x.sum()


NUMPY_PARITY = [
    (tmr.min, np.min, np.array([1.0, np.nan, 2.0])),
    (tmr.max, np.max, np.array([np.nan, 5.0, 2.0, 1.0])),
    (tmr.mean, np.mean, np.array([1.0, np.inf])),
    (tmr.mean, np.mean, np.array([np.inf, -np.inf])),
    (tmr.variance, np.var, np.array([1.0, np.inf])),
    (tmr.max, np.max, np.array([-128, 127], np.int8)),
    (tmr.sum, np.sum, np.array([200, 100], np.uint8)),
    (tmr.mean, np.mean, np.array([True, False, True])),
    (tmr.std, np.std, np.array([3.0])),
]


@pytest.mark.parametrize(
    ("recipe", "reference", "x"), NUMPY_PARITY, ids=lambda v: getattr(v, "__name__", None) or str(getattr(v, "dtype", ""))
)
def test_nan_inf_and_small_types_as_numpy(cluster: tmr.LocalCluster, recipe: object, reference: object, x: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        expected = reference(x)  # type: ignore[operator]
    got = recipe(x, cluster=cluster, sizes=2)  # type: ignore[operator]
    np.testing.assert_array_equal(got, expected)


def test_float16_sums_accumulate_in_float64_where_numpy_overflows(cluster: tmr.LocalCluster) -> None:
    x = np.full(70_000, 1.0, np.float16)
    assert tmr.sum(x, cluster=cluster) == 70_000.0  # numpy's float16 sum is inf (documented difference)


# -- booleans with non-canonical bytes, long-double histogram ranges ------------------------------

NONCANONICAL = np.frombuffer(b"\xff\x00\x02\x01" * 25, bool)  # numpy counts every nonzero byte as True


@pytest.mark.parametrize(("recipe", "reference"), [(tmr.sum, np.sum), (tmr.mean, np.mean), (tmr.min, np.min), (tmr.max, np.max)])
def test_booleans_with_non_canonical_bytes_are_true_as_numpy_says(
    cluster: tmr.LocalCluster, recipe: object, reference: object
) -> None:
    # Before: "Invalid TensorProto for feed value 1" from TensorFlow.
    np.testing.assert_array_equal(recipe(NONCANONICAL, cluster=cluster, sizes=2), reference(NONCANONICAL))  # type: ignore[operator]
    np.testing.assert_array_equal(recipe(~NONCANONICAL[:4], cluster=cluster), reference(~NONCANONICAL[:4]))  # type: ignore[operator]
    large = np.frombuffer(b"\x00\x07" * (1 << 20), bool)  # 2 MiB: through shared memory
    assert tmr.sum(large, cluster=cluster, transfer="shm") == np.sum(large) == 1 << 20
    assert tmr.mean(large.reshape(-1, 2), axis=0, cluster=cluster).tolist() == [0.0, 1.0]
    assert NONCANONICAL.view(np.uint8).max() == 0xFF  # the caller's array is left as it was


def test_a_long_double_histogram_range_is_refused_where_float64_would_move_an_edge(cluster: tmr.LocalCluster) -> None:
    x = np.array([1.0])
    hi = np.longdouble(1) - np.longdouble(2) ** -60  # 0.99999999999999999913: float64 rounds it to 1.0
    if hi == 1:
        pytest.skip("this platform's long double is float64")
    assert np.histogram(x, bins=1, range=(np.longdouble(0), hi))[0].tolist() == [0]  # numpy leaves 1.0 out
    with pytest.raises(TypeError) as error:  # before: counted 1.0, as if the range ended at 1.0
        tmr.recipes.histogram(x, bins=1, range=(np.longdouble(0), hi), cluster=cluster)
    for words in ("range", "longdouble", "float64", "edge"):
        assert words in str(error.value), str(error.value)
    with pytest.raises(TypeError, match="bins"):
        tmr.recipes.histogram(x, bins=np.array([0, hi], np.longdouble), cluster=cluster)
    exact = (np.longdouble(0), np.longdouble(2))  # every edge of 4 bins over [0, 2] is a float64: counted exactly
    counts, edges = tmr.recipes.histogram(np.array([0.5, 1.0, 2.0]), bins=4, range=exact, cluster=cluster)
    expected = np.histogram(np.array([0.5, 1.0, 2.0]), bins=4, range=exact)
    np.testing.assert_array_equal(counts, expected[0])
    np.testing.assert_array_equal(edges, expected[1])


def test_string_feeds_count_their_bytes_for_the_feed_limits(cluster: tmr.LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    from tfmapreduce._cluster import feeds as _feeds

    lines = [("word " * 100).encode()] * 10_000  # 5 MB of text in 10,000 rows (80 kB of pointers)
    assert _feeds.feed_bytes({"lines": np.array(lines, object)}) == 10_000 * 502
    monkeypatch.setattr(_feeds, "FEED_LIMIT", 4 << 20)  # the real 2 GiB limit, scaled down to these 5 MB
    with pytest.raises(tmr.InputError, match="through gRPC in one request"):  # before: counted as 80 kB, sent
        tmr.recipes.word_count(lines, cluster=cluster, transfer="feed")
    monkeypatch.undo()
    assert tmr.recipes.word_count(lines[:10], cluster=cluster).to_dict() == {b"word": 1000}
