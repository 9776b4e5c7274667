"""read_dataset: a tf.data pipeline of your own, made and read on the workers, compared with the same pipeline read in
one process (a TFRecord pipeline with a parse function, a generated one), and its errors named by split and task."""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr


def _in_one_process(make: Callable[[int, int], tf.data.Dataset], splits: int, batched: bool) -> np.ndarray:
    """Every split's dataset iterated here, in split order (the reference), as one array of rows."""
    elements = [e.numpy() for split in range(splits) for e in make(split, splits)]
    return np.concatenate(elements) if batched else np.stack(elements)


def test_a_tfrecord_pipeline_with_a_parse_function_equals_it_read_in_one_process(
    cluster: tmr.LocalCluster, tmp_path: Path
) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(500, 3)).astype(np.float32), rng.integers(0, 7, 500)
    written = tmr.write_tfrecord((x, y), tmp_path / "t", features=["x", "y"], cluster=cluster, sizes=[50, 0, 200, 250])
    files = sorted(str(p) for p in written.parts)
    spec = {"x": tf.io.FixedLenFeature([3], tf.float32), "y": tf.io.FixedLenFeature([], tf.int64)}

    def parse(records: tf.Tensor) -> tf.Tensor:  # x and y side by side, y scaled: a parse of the user's own
        parsed = tf.io.parse_example(records, spec)
        return tf.concat([parsed["x"], tf.cast(parsed["y"][:, None], tf.float32) / 10], axis=1)

    def make(split: int, num_splits: int) -> tf.data.Dataset:
        return tf.data.TFRecordDataset(files[split::num_splits]).batch(32).map(parse)

    data = tmr.read_dataset(make, splits=4)
    expected = _in_one_process(make, 4, batched=True)
    np.testing.assert_allclose(tmr.mean(data, axis=0, cluster=cluster), expected.astype(np.float64).mean(axis=0), atol=1e-6)
    assert int(tmr.count(data, cluster=cluster)) == 500  # the rows actually read are the weights
    with tmr.map(lambda r: r[:, :2] * 2, data, cluster=cluster, batch_rows=7) as doubled:
        np.testing.assert_array_equal(doubled.gather(), expected[:, :2] * 2)  # in split order, rebatched
    job = tmr.MapReduce(
        lambda r: (tf.cast(tf.round(r[:, 3] * 10), tf.int64), tf.ones_like(r[:, 0])), tmr.combiners.sum, by_key=True
    )
    counts = job.run(data, cluster=cluster, reducers=2).to_dict()
    assert counts == {int(k): float(n) for k, n in collections.Counter(y.tolist()).items()}


def test_a_generated_pipeline_of_uneven_splits_weighs_the_rows_read(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    def make(split: int, num_splits: int) -> tf.data.Dataset:  # rows, unbatched: split s makes s * 7 rows of 2 values
        return tf.data.Dataset.range(split * 7).map(lambda i: tf.cast(tf.stack([i, i * split]), tf.float64))

    data = tmr.read_dataset(make, splits=5)
    assert repr(data).endswith("make, splits=5)")
    expected = _in_one_process(make, 5, batched=False)
    np.testing.assert_allclose(tmr.mean(data, axis=0, cluster=cluster, sizes=[1, 4]), expected.mean(axis=0))
    with tmr.filter(lambda r: r[:, 1] > 10, data, cluster=cluster) as kept:  # then written and read back
        written = tmr.write_npy(kept, tmp_path / "kept")
    np.testing.assert_array_equal(np.concatenate([np.load(p) for p in written.parts]), expected[expected[:, 1] > 10])
    words = tmr.read_dataset(lambda s, n: tf.data.Dataset.from_tensor_slices([b"a b", b"b"][s : s + 1]), splits=2)
    assert tmr.recipes.word_count(words, cluster=cluster).to_dict() == {b"a": 1, b"b": 2}  # a pipeline's strings stay bytes


def test_a_pipeline_of_parsed_features_gives_the_map_function_its_dict_or_tuple(
    cluster: tmr.LocalCluster, tmp_path: Path
) -> None:
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(300, 3)).astype(np.float32), rng.integers(0, 5, 300)
    written = tmr.write_tfrecord((x, y), tmp_path / "t", features=["x", "y"], cluster=cluster, sizes=[100, 0, 120, 80])
    files = list(written.parts)
    spec = {"x": tf.io.FixedLenFeature([3], tf.float32), "y": tf.io.FixedLenFeature([], tf.int64)}

    def parsed(split: int, num_splits: int) -> tf.data.Dataset:  # batches of {"x", "y"}, as parse_example gives them
        names = tf.constant(files[split::num_splits], tf.string)
        return tf.data.TFRecordDataset(names).batch(16).map(lambda r: tf.io.parse_example(r, spec))

    def pairs(split: int, num_splits: int) -> tf.data.Dataset:  # rows of (x, y), unbatched
        return parsed(split, num_splits).unbatch().map(lambda d: (d["x"], d["y"]))

    here = [e for split in range(5) for e in parsed(split, 5)]  # the same pipeline read in one process, in split order
    rx, ry = np.concatenate([e["x"].numpy() for e in here]), np.concatenate([e["y"].numpy() for e in here])
    data = tmr.read_dataset(parsed, splits=5)  # 5 splits of 4 files: one split reads nothing
    with tmr.map(lambda d: d["x"] * tf.cast(d["y"], tf.float32)[:, None], data, cluster=cluster) as scaled:
        np.testing.assert_allclose(scaled.gather(), rx * ry[:, None], rtol=1e-6)
    total = tmr.MapReduce(lambda d: tf.reduce_sum(d["x"], axis=0), tmr.combiners.sum).run(data, cluster=cluster)
    np.testing.assert_allclose(total, rx.sum(axis=0), rtol=1e-5)
    by_y = tmr.MapReduce(lambda d: (d["y"], d["x"][:, 0]), tmr.combiners.sum, by_key=True).run(data, cluster=cluster, reducers=2)
    expected = {int(k): float(rx[ry == k, 0].sum()) for k in np.unique(ry)}
    assert by_y.to_dict().keys() == expected.keys()
    np.testing.assert_allclose([by_y.to_dict()[k] for k in expected], list(expected.values()), rtol=1e-5)
    kept = tmr.filter(lambda d: d["y"] > 2, data, cluster=cluster)  # a dict of resident columns: where pred holds
    with kept["x"], kept["y"]:
        np.testing.assert_array_equal(kept["x"].gather(), rx[ry > 2])
        np.testing.assert_array_equal(kept["y"].gather(), ry[ry > 2])
    rows = tmr.read_dataset(pairs, splits=5)  # a tuple: one argument each
    with tmr.map(lambda a, b: a[:, 0] + tf.cast(b, tf.float32), rows, cluster=cluster, batch_rows=7) as summed:
        np.testing.assert_allclose(summed.gather(), rx[:, 0] + ry, rtol=1e-6)
    none = tmr.read_dataset(lambda s, n: parsed(s + 10, n), splits=2)  # no rows at all: the map sees an empty dict
    np.testing.assert_array_equal(
        tmr.MapReduce(lambda d: tf.reduce_sum(d["x"], axis=0), tmr.combiners.sum).run(none, cluster=cluster), np.zeros(3)
    )


def test_errors_name_the_split_the_task_and_the_fix(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    path = tmp_path / "r.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as w:
        w.write(b"not an example")
    files = [str(path), str(path), str(tmp_path / "missing.tfrecord")]
    data = tmr.read_dataset(lambda s, n: tf.data.TFRecordDataset(files[s]).map(tf.strings.length), splits=3)
    with pytest.raises(
        tmr.InputError, match=r"split 2 of 3 \(make_dataset\(2, 3\), .*<lambda>\) failed on task /job:local/task:1: .*missing"
    ):
        tmr.sum(data, cluster=cluster, devices=["/job:local/task:0", "/job:local/task:1"], sizes=[2, 1])
    with pytest.raises(tmr.InputError, match=r"make_dataset\(0, 2\) yields \{'x': \{'y'.*flat tuple or dict.*Flatten it first"):
        tmr.read_dataset(lambda s, n: tf.data.Dataset.from_tensor_slices({"x": {"y": [1.0]}}), splits=2)
    with pytest.raises(tmr.InputError, match=r"make_dataset .*<lambda>\(0, 2\) raised ZeroDivisionError"):
        tmr.read_dataset(lambda s, n: 1 / 0, splits=2)
    with pytest.raises(tmr.InputError, match=r"returned list, not a tf.data.Dataset"):
        tmr.read_dataset(lambda s, n: [1, 2], splits=2)
    odd = tmr.read_dataset(lambda s, n: tf.data.Dataset.range(3).map(lambda i: tf.cast(i, tf.float32) if s == 0 else i), splits=2)
    with pytest.raises(tmr.InputError, match=r"make_dataset\(1, 2\) yields int64 rows.*but split 0 yields float32"):
        tmr.sum(odd, cluster=cluster)
    with pytest.raises(TypeError, match="splits must be a positive int"):
        tmr.read_dataset(lambda s, n: tf.data.Dataset.range(3), splits=0)
