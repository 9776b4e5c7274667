"""Map-only jobs (tmr.map, tmr.filter): output rows kept on the shards' devices, compared with numpy."""

from __future__ import annotations

import collections
import itertools
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr


def test_map_explodes_and_drops_rows_in_order_on_uneven_shards(cluster: tmr.LocalCluster) -> None:
    x = np.arange(12, dtype=np.int64)
    with tmr.map(lambda v: tf.repeat(v, v % 3), x, cluster=cluster, sizes=[0, 5, 7]) as out:
        expected = np.repeat(x, x % 3)
        np.testing.assert_array_equal(out.gather(), expected)
        assert out.plan.sizes == (0, int((x[:5] % 3).sum()), int((x[5:] % 3).sum()))
        assert int(tmr.sum(out)) == expected.sum()  # a later whole-input job reads it in place


def test_filter_keeps_co_partitioned_rows_and_chains_into_a_keyed_job(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(0)
    keys, values = rng.integers(0, 5, 200), rng.normal(size=200)
    kept_keys, kept_values = tmr.filter(lambda k, v: v > 0, (keys, values), cluster=cluster, sizes=3)
    try:
        assert kept_keys.plan == kept_values.plan
        mask = values > 0
        np.testing.assert_array_equal(kept_keys.gather(), keys[mask])
        np.testing.assert_array_equal(kept_values.gather(), values[mask])
        result = tmr.sum_by_key(kept_keys, kept_values).to_dict()
        expected = {int(k): values[mask & (keys == k)].sum() for k in np.unique(keys[mask])}
        assert result.keys() == expected.keys()
        assert all(np.isclose(result[k], expected[k]) for k in expected)
    finally:
        kept_keys.delete()
        kept_values.delete()


def test_map_returns_a_structure_of_sharded_and_takes_broadcast_values(cluster: tmr.LocalCluster) -> None:
    x = np.arange(10.0).reshape(5, 2)
    out = tmr.map(lambda r, w: {"s": tf.reduce_sum(r * w, axis=1), "r": r}, x, broadcast=[np.array([1.0, 10.0])], cluster=cluster)
    try:
        np.testing.assert_array_equal(out["s"].gather(), x @ [1.0, 10.0])
        np.testing.assert_array_equal(out["r"].gather(), x)
    finally:
        out["s"].delete()
        out["r"].delete()


def test_a_tuple_result_frees_every_column_in_a_with_block(cluster: tmr.LocalCluster) -> None:
    x = np.arange(8.0)
    with tmr.filter(lambda a, b: a > 4, (x, -x), cluster=cluster) as kept:
        a, b = kept  # still a tuple
        assert isinstance(kept, tuple)
        assert a.gather().tolist() == [5.0, 6.0, 7.0]
        assert b.gather().tolist() == [-5.0, -6.0, -7.0]
    with tmr.map(lambda v: (v, (v * 2, v + 1)), x, cluster=cluster) as out:
        doubled = out[1][0]
        assert doubled.gather().tolist() == (x * 2).tolist()
    for array in (a, b, out[0], doubled, out[1][1]):
        with pytest.raises(tmr.ClusterError, match="was deleted"):
            array.gather()
    out.delete()  # twice: nothing to do


def test_empty_outputs_and_empty_inputs(cluster: tmr.LocalCluster) -> None:
    with tmr.filter(lambda v: v > 100, np.arange(10.0), cluster=cluster) as none:
        assert none.shape == (0,)
        assert none.gather().shape == (0,)
        assert float(tmr.sum(none)) == 0.0
    with tmr.map(lambda v: v * 2, np.zeros((0, 3), np.float32), cluster=cluster) as empty:
        assert empty.gather().shape == (0, 3)
        assert empty.dtype == np.float32


def test_strings_explode_into_words_counted_by_key(cluster: tmr.LocalCluster) -> None:
    lines = np.array(["to be or", "not to be", "", "that is"])
    with tmr.map(lambda s: tf.strings.split(s).flat_values, lines, cluster=cluster) as words:
        assert words.gather().tolist() == " ".join(lines).split()  # str in, str out
        assert tmr.count_by_key(words).to_dict() == collections.Counter(" ".join(lines).split())


def test_a_resident_input_is_mapped_in_place(cluster: tmr.LocalCluster) -> None:
    x = np.arange(20.0)
    with tmr.scatter(x, cluster=cluster, sizes=[8, 12]) as data, tmr.map(lambda v: v[v > 10], data) as out:
        assert [s.device for s in out.plan.shards] == [s.device for s in data.plan.shards]
        np.testing.assert_array_equal(out.gather(), x[x > 10])


def test_files_are_mapped_batch_by_batch_on_the_workers(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    x = np.arange(200.0).reshape(100, 2)
    np.save(tmp_path / "a.npy", x[:30])
    np.save(tmp_path / "b.npy", x[30:])
    files = tmr.read_npy(str(tmp_path / "*.npy"))
    with tmr.filter(lambda r: r[:, 0] % 4 < 2, files, cluster=cluster, batch_rows=7, sizes=3) as kept:
        np.testing.assert_array_equal(kept.gather(), x[x[:, 0] % 4 < 2])
    (tmp_path / "t.txt").write_text("x y\nz\n\nw v u\n")
    with tmr.map(
        lambda s: tf.strings.split(s).flat_values, tmr.read_text(str(tmp_path / "t.txt")), batch_rows=1, cluster=cluster
    ) as w:
        assert w.gather().tolist() == ["x", "y", "z", "w", "v", "u"]  # text read as str comes back as str


def test_an_error_checked_in_a_reused_program_names_the_rows_of_the_failed_run(cluster: tmr.LocalCluster) -> None:
    """A program over resident data is kept by its layout, so a run over data of other sizes reuses it: its in-graph
    message, built with the first run's rows, is named anew from the failed run's own plan."""
    fn = lambda v: (v, tf.boolean_mask(v, tf.not_equal(v, 7.0)))  # noqa: E731 - the shard holding 7 fails in the run
    for rows, sizes in ((10, [4, 6]), (12, [4, 8])):
        failed = pytest.raises(tmr.MapFunctionError, match=rf"on shard 1 \(rows 4:{rows} on .*different row counts")
        with tmr.scatter(np.arange(float(rows)), cluster=cluster, sizes=sizes) as data, failed:
            tmr.map(fn, data)


def test_errors_name_the_function_what_it_returned_and_the_fix(cluster: tmr.LocalCluster) -> None:
    x = np.arange(10.0)
    with pytest.raises(TypeError, match="fn must be a callable"):
        tmr.map(3, x, cluster=cluster)  # type: ignore[arg-type]
    with pytest.raises(tmr.MapFunctionError, match=r"\.numpy\(\) has no value to give: compute with TensorFlow ops"):
        tmr.map(lambda v: v.numpy(), x, cluster=cluster)
    with pytest.raises(tmr.MapFunctionError, match="different row counts"):
        tmr.map(lambda v: (v, v[:2]), x, cluster=cluster)
    with pytest.raises(tmr.MapFunctionError, match=r"RaggedTensor.*flat_values"):
        tmr.map(lambda v: tf.strings.split(tf.strings.as_string(v)), x, cluster=cluster)
    traced = itertools.count()  # rows fed: unknown in the graph, so the shards differ by when they are traced
    with pytest.raises(tmr.MapFunctionError, match="share one structure, dtype and row shape"):  # the first shard's int32
        tmr.map(lambda v: tf.cast(v, tf.int32) if next(traced) == 0 else v, x, cluster=cluster, sizes=[3, 7])
    with pytest.raises(tmr.MapFunctionError, match=r"pred \S*<lambda> must return a 1-D boolean.*tf.equal"):
        tmr.filter(lambda v: v == 3, x, cluster=cluster)
    with pytest.raises(
        tmr.MapFunctionError, match=r"pred \S*<lambda> on shard \d.*one boolean per row"
    ):  # rows fed: known in the run
        tmr.filter(lambda v: v[:2] > 0, x, cluster=cluster)
    with pytest.raises(tmr.MapFunctionError, match=r"fn \S*<lambda> on shard \d.*different row counts"):  # known only in the run
        tmr.map(lambda v: (v, tf.boolean_mask(v, v > 3)), x, cluster=cluster)
    with pytest.raises(tmr.MapFunctionError, match=r"pred \S*<lambda> on shard \d.*one boolean per row"):
        tmr.filter(lambda v: tf.boolean_mask(v, v > 3) > 0, x, cluster=cluster)
    with pytest.raises(TypeError, match="reducers= applies to keyed jobs only"):
        tmr.map(lambda v: v, x, cluster=cluster, reducers=2)
    with pytest.raises(TypeError, match="speculate=True does not apply to map and filter"):
        tmr.map(lambda v: v, x, cluster=cluster, speculate=True)


def test_a_map_compiles_once_and_each_run_keeps_its_own_rows(cluster: tmr.LocalCluster) -> None:
    def double(v: tf.Tensor) -> tf.Tensor:
        return v * 2

    runs = [tmr.map(double, np.arange(6.0) + k, cluster=cluster, sizes=[2, 4], return_stats=True) for k in (0, 100)]
    (first, stats), (second, stats2) = runs
    with first, second:
        assert stats.compiled
        assert not stats2.compiled
        np.testing.assert_array_equal(first.gather(), np.arange(6.0) * 2)
        np.testing.assert_array_equal(second.gather(), (np.arange(6.0) + 100) * 2)
        assert float(tmr.sum(first)) == 30.0  # a later job reads it in place
