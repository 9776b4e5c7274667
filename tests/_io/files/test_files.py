"""File sources: read_npy, read_raw, read_text, read_csv, read_tfrecord, read on the workers and streamed through map.

Every result equals numpy on the concatenated data, for any split, file count and
placement; bad files raise InputError naming the file and the task; each run reads
the files as they are when it starts; a worker's memory stays bounded.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import tfmapreduce as tmr
from tests.oracle import RTOL
from tfmapreduce._io.files import csv as _csv
from tfmapreduce._io.files import csv_diagnosis as _csv_diagnosis
from tfmapreduce._io.files import readers as _readers
from tfmapreduce._io.files import rows as _rows
from tfmapreduce._io.files import text as _text
from tfmapreduce._io.source import DATA_OPTIONS, Input, Source
from tfmapreduce._native import loader as _native

T0, T1 = "/job:local/task:0", "/job:local/task:1"


def npy_files(folder: Path, parts: list[np.ndarray]) -> list[str]:
    paths = []
    for i, part in enumerate(parts):
        paths.append(str(folder / f"part{i:03d}.npy"))
        np.save(paths[-1], part)
    return paths


def example(**values: list[float]) -> bytes:
    feature = {k: tf.train.Feature(float_list=tf.train.FloatList(value=v)) for k, v in values.items()}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture
def parts() -> list[np.ndarray]:
    """Uneven 2-d float32 parts, one of them empty."""
    rng = np.random.default_rng(7)
    return [rng.normal(3.0, 2.0, (n, 3)).astype(np.float32) for n in (100, 0, 37, 1, 250)]


# --------------------------------------------------------------------------- npy: any split equals numpy


@pytest.mark.parametrize(
    ("sizes", "batch_rows"),
    [(None, None), ([0, 388, 0], 7), (tmr.weights(1, 3), 50), (1, 1), ([200, 188], 1000)],
)
def test_npy_statistics_equal_numpy_for_any_split(
    cluster: tmr.LocalCluster, tmp_path: Path, parts: list[np.ndarray], sizes: object, batch_rows: int | None
) -> None:
    npy_files(tmp_path, parts)
    whole = np.concatenate(parts).astype(np.float64)
    data = tmr.read_npy(str(tmp_path / "*.npy"))
    options = dict(cluster=cluster, sizes=sizes, batch_rows=batch_rows)
    np.testing.assert_allclose(tmr.mean(data, **options), whole.mean(), rtol=RTOL)
    np.testing.assert_allclose(tmr.mean(data, axis=0, **options), whole.mean(axis=0), rtol=RTOL)
    np.testing.assert_allclose(tmr.sum(data, axis=0, **options), whole.sum(axis=0), rtol=RTOL)
    np.testing.assert_allclose(tmr.variance(data, **options), whole.var(), rtol=RTOL)
    assert tmr.min(data, **options) == whole.min()
    assert tmr.max(data, **options) == whole.max()
    assert int(tmr.count(data, **options)) == len(whole)
    weighted = tmr.MapReduce(lambda x: tf.reduce_mean(x, axis=0), tmr.combiners.weighted_mean)
    np.testing.assert_allclose(weighted.run(data, **options), whole.mean(axis=0), rtol=RTOL)


def test_one_big_npy_file_is_split_into_row_ranges_and_the_plan_shows_them(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    x = np.arange(1000, dtype=np.int32)
    (path,) = npy_files(tmp_path, [x])
    data = tmr.read_npy(path)
    text = data.explain(cluster=cluster, sizes=[100, 400, 0, 500])
    assert "read_npy: 1 files, 1000 rows in 4 shards on 2 tasks" in text
    assert "0:100" in text
    assert "100:500" in text
    assert "500:1000" in text
    assert "(reads nothing)" in text
    plan = tmr.MapReduce(tf.reduce_sum, tf.add).plan(data, cluster=cluster, sizes=[100, 400, 0, 500])
    assert plan.sizes == (100, 400, 0, 500)
    assert int(tmr.sum(data, cluster=cluster, sizes=[100, 400, 0, 500], batch_rows=33)) == x.sum()


def test_a_run_ships_no_input_bytes(cluster: tmr.LocalCluster, tmp_path: Path, parts: list[np.ndarray]) -> None:
    npy_files(tmp_path, parts)
    _, stats = tmr.mean(tmr.read_npy(str(tmp_path / "*.npy")), cluster=cluster, return_stats=True)
    assert all(s.bytes_sent == 0 for s in stats.shards)


def test_raw_binary_rows(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    x = np.arange(60, dtype=np.int16).reshape(20, 3)
    x[:7].tofile(tmp_path / "a.bin")
    x[7:].tofile(tmp_path / "b.bin")
    data = tmr.read_raw([str(tmp_path / "a.bin"), str(tmp_path / "b.bin")], dtype=np.int16, shape=(3,))
    np.testing.assert_array_equal(tmr.sum(data, axis=0, cluster=cluster, sizes=3, batch_rows=4), x.sum(axis=0))


def test_big_endian_npy(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    x = np.arange(10, dtype=">f8")
    npy_files(tmp_path, [x])
    assert float(tmr.sum(tmr.read_npy(str(tmp_path / "*.npy")), cluster=cluster)) == 45.0


# --------------------------------------------------------------------------- text, CSV, TFRecord


def test_text_line_count_and_byte_sum_over_100_small_files_and_an_empty_one(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    lines = []
    for i in range(100):
        chunk = [f"line {i} {'x' * (j % 7)}" for j in range(i % 5)]  # files of 0 to 4 lines
        (tmp_path / f"f{i:03d}.txt").write_text("".join(f"{line}\n" for line in chunk))
        lines += chunk
    (tmp_path / "f100.txt").write_text("last line without newline")
    lines.append("last line without newline")
    data = tmr.read_text(str(tmp_path / "*.txt"))
    for sizes in (None, [0, data.as_source().rows], tmr.weights(3, 1)):
        assert int(tmr.count(data, cluster=cluster, sizes=sizes, batch_rows=3)) == len(lines)
    length = tmr.MapReduce(lambda s: tf.reduce_sum(tf.strings.length(s)), tmr.combiners.sum)
    assert int(length.run(data, cluster=cluster, batch_rows=2)) == sum(len(line) for line in lines)


def test_csv_column_means_weigh_actual_rows(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(50, 3)), rng.normal(size=(3, 3))  # a long and a short file
    (tmp_path / "a.csv").write_text("x,y,z\n" + "".join(",".join(str(float(v)) for v in r) + "\n" for r in a))
    (tmp_path / "b.csv").write_text("x,y,z\n" + "\n".join(",".join(str(float(v)) for v in r) for r in b))  # no final newline
    (tmp_path / "c.csv").write_text("x,y,z\n")  # a header and nothing else
    (tmp_path / "d.csv").write_text("")  # empty
    whole = np.concatenate([a, b]).astype(np.float32).astype(np.float64)
    data = tmr.read_csv(str(tmp_path / "*.csv"))
    for sizes in (None, 1, tmr.weights(1, 1)):
        np.testing.assert_allclose(tmr.mean(data, axis=0, cluster=cluster, sizes=sizes), whole.mean(axis=0), rtol=RTOL)
    picked = tmr.read_csv(str(tmp_path / "*.csv"), columns=["z", 0], dtypes="float64")
    np.testing.assert_allclose(
        tmr.mean(picked, axis=0, cluster=cluster), np.concatenate([a, b])[:, [2, 0]].mean(axis=0), rtol=1e-12
    )
    assert int(tmr.count(data, cluster=cluster, batch_rows=4)) == 53


def test_tfrecord_features_become_rows(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    values = np.arange(12.0).reshape(6, 2)
    for name, rows in (("a", values[:4]), ("b", values[4:]), ("c", values[:0])):
        with tf.io.TFRecordWriter(str(tmp_path / f"{name}.tfrecord")) as w:
            for r in rows:
                w.write(example(u=[r[0]], v=[r[1]]))
    features = {"u": tf.io.FixedLenFeature([], tf.float32), "v": tf.io.FixedLenFeature([1], tf.float32)}
    data = tmr.read_tfrecord(str(tmp_path / "*.tfrecord"), features=features)
    assert data.as_source().shape[1:] == (2,)
    np.testing.assert_allclose(tmr.mean(data, axis=0, cluster=cluster, batch_rows=3), values.mean(axis=0), rtol=RTOL)


def test_a_shard_that_reads_no_rows_is_left_out_and_an_input_of_no_rows_is_an_error(
    cluster: tmr.LocalCluster, tmp_path: Path
) -> None:
    (tmp_path / "a.csv").write_text("x\n")
    with pytest.raises(tmr.InputError, match="0 rows"):
        tmr.mean(tmr.read_csv(str(tmp_path / "a.csv")), cluster=cluster)
    assert int(tmr.count(tmr.read_csv(str(tmp_path / "a.csv")), cluster=cluster)) == 0


# --------------------------------------------------------------------------- pinning, persist, changing files


def test_pinned_files_are_read_by_their_task_only(cluster: tmr.LocalCluster, tmp_path: Path, parts: list[np.ndarray]) -> None:
    paths = npy_files(tmp_path, parts)
    data = tmr.read_npy({T1: paths[:2], T0: paths[2:]})
    plan = tmr.MapReduce(tf.reduce_sum, tf.add).plan(data, cluster=cluster)
    assert [str(s.task) for s in plan.shards] == [T1, T0]
    assert plan.sizes == (100, 288)
    text = data.explain()
    assert all(f"{T1}" in line for line in text.splitlines() if "part000" in line or "part001" in line)
    assert all(f"{T0}" in line for line in text.splitlines() if "part002" in line or "part004" in line)
    whole = np.concatenate(parts).astype(np.float64)
    np.testing.assert_allclose(tmr.mean(data, axis=0, cluster=cluster), whole.mean(axis=0), rtol=RTOL)
    with pytest.raises(TypeError, match="do not apply"):
        tmr.mean(data, cluster=cluster, sizes=[1, 387])


def test_a_pinned_pattern_the_client_cannot_see_is_matched_on_its_task(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "seen.txt").write_text("a\nb\n")
    hidden = tmp_path / "later"
    data = tmr.read_text({T0: [str(tmp_path / "seen.txt")], T1: [str(hidden / "*.txt")]})
    assert "matched on the task at run time" in data.explain()
    with pytest.raises(tmr.InputError, match=r"later/\*\.txt matches no file on the task that must read it") as info:
        tmr.count(data, cluster=cluster)
    assert T1 in str(info.value)
    hidden.mkdir()  # the file appears where task 1 looks (the same disk here)
    (hidden / "x.txt").write_text("c\nd\ne\n")
    assert int(tmr.count(data, cluster=cluster)) == 5


def test_a_file_missing_on_the_task_that_must_read_it(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    data = tmr.read_text({T1: [str(tmp_path / "a.txt"), str(tmp_path / "gone.txt")]})
    with pytest.raises(tmr.InputError, match=r"gone\.txt") as info:
        tmr.count(data, cluster=cluster)
    assert T1 in str(info.value)


def test_persist_reads_the_files_on_the_workers_into_resident_data(
    cluster: tmr.LocalCluster, tmp_path: Path, parts: list[np.ndarray]
) -> None:
    npy_files(tmp_path, parts)
    whole = np.concatenate(parts)
    with tmr.read_npy(str(tmp_path / "*.npy")).persist(cluster=cluster, sizes=[10, 0, 300, 78]) as data:
        assert data.plan.sizes == (10, 0, 300, 78)
        np.testing.assert_array_equal(data.gather(), whole)
        np.testing.assert_allclose(tmr.mean(data), whole.astype(np.float64).mean(), rtol=RTOL)
    (tmp_path / "t.csv").write_text("a,b\n1,2\n3,4\n5,6\n")
    with tmr.read_csv(str(tmp_path / "t.csv")).persist(cluster=cluster) as table:
        assert table.shape == (3, 2)
        np.testing.assert_array_equal(table.gather(), [[1, 2], [3, 4], [5, 6]])


def test_each_run_reads_the_files_as_they_are_then(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    path = str(tmp_path / "x.npy")
    np.save(path, np.ones(10))
    data = tmr.read_npy(path)
    assert float(tmr.sum(data, cluster=cluster)) == 10.0
    _, stats = tmr.sum(data, cluster=cluster, return_stats=True)
    assert not stats.compiled  # unchanged files: the graph is reused
    time.sleep(0.01)
    np.save(path, np.full(25, 2.0))  # a longer file: a new stat, a new plan, a new graph
    total, stats = tmr.sum(data, cluster=cluster, return_stats=True)
    assert float(total) == 50.0
    assert stats.compiled


def test_a_co_partitioned_file_source_is_refused(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    (path,) = npy_files(tmp_path, [np.ones(4)])
    with pytest.raises(tmr.InputError, match="persist"):
        tmr.MapReduce(lambda a, b: tf.reduce_sum(a + b), tf.add).run((tmr.read_npy(path), np.ones(4)), cluster=cluster)


# --------------------------------------------------------------------------- errors name the file and the task


def test_a_path_that_matches_nothing_fails_at_plan_time(tmp_path: Path) -> None:
    with pytest.raises(tmr.InputError, match=r"nothing\*\.npy' matches no file on the client"):
        tmr.read_npy(str(tmp_path / "nothing*.npy")).as_source()
    with pytest.raises(tmr.InputError, match="is a directory"):
        tmr.read_text(str(tmp_path)).as_source()


def test_npy_files_must_agree_on_dtype_and_row_shape(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.zeros((2, 3), np.float32))
    np.save(tmp_path / "b.npy", np.zeros((2, 3), np.float64))
    with pytest.raises(tmr.InputError, match=r"b\.npy holds float64 rows of shape \(3,\) but .*a\.npy holds float32"):
        tmr.read_npy(str(tmp_path / "*.npy")).as_source()
    np.save(tmp_path / "b.npy", np.zeros((2, 4), np.float32))
    with pytest.raises(tmr.InputError, match=r"shape \(4,\)"):
        tmr.read_npy(str(tmp_path / "*.npy")).as_source()


def test_truncated_and_foreign_npy_files(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(100.0))
    with open(tmp_path / "a.npy", "r+b") as f:
        f.truncate(500)
    with pytest.raises(tmr.InputError, match=r"a\.npy is truncated: its header promises 100 rows"):
        tmr.read_npy(str(tmp_path / "a.npy")).as_source()
    (tmp_path / "b.npy").write_bytes(b"not numpy at all")
    with pytest.raises(tmr.InputError, match=r"b\.npy is not a readable \.npy file"):
        tmr.read_npy(str(tmp_path / "b.npy")).as_source()
    (tmp_path / "c.bin").write_bytes(b"\0" * 10)
    with pytest.raises(tmr.InputError, match=r"c\.bin has 10 bytes, not a whole number of rows of 8 bytes"):
        tmr.read_raw(str(tmp_path / "c.bin"), dtype=np.float64).as_source()


def test_a_csv_row_with_the_wrong_number_of_fields_names_its_line(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "ok.csv").write_text("a,b\n1,2\n")
    (tmp_path / "z.csv").write_text("a,b\n1,2\n3,4\n5\n7,8\n")
    with pytest.raises(
        tmr.InputError, match=r"z\.csv \(read on task /job:local/task:\d\): line 4 is '5': expected 2 numeric fields"
    ):
        tmr.mean(tmr.read_csv(str(tmp_path / "*.csv")), cluster=cluster)


def test_a_csv_field_that_is_not_a_number_names_its_line(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "z.csv").write_text("a,b\n1,2\n3,x\n")
    with pytest.raises(tmr.InputError, match=r"z\.csv \(read on task /job:local/task:1\): line 3 is '3,x'"):
        tmr.mean(tmr.read_csv({T1: [str(tmp_path / "z.csv")]}), cluster=cluster)


def _csv_with_a_bad_line(path: Path, lines: int, bad: str, at: int) -> int:
    """Write a CSV (header ``a,b``) of ``lines`` data lines ``1,2``, data line ``at`` replaced by ``bad``: its line number."""
    with open(path, "w") as f:
        f.write("a,b\n" + "1,2\n" * at + bad + "\n" + "1,2\n" * (lines - at - 1))
    return at + 2


@pytest.mark.alone  # the call must end within its deadline + 2 s
@pytest.mark.parametrize(
    ("lines", "bad", "batch_rows", "said", "diagnosis_blocks"),
    [
        (3_000_000, "3,x", None, "field 2 is 'x', not a float32 number", False),  # 12 MB: read in blocks
        (500_000, "3,x", 1000, "field 2 is 'x', not a float32 number", True),  # read and searched in 64 KiB blocks
        (3_000_000, "5", 1000, "expected 2 numeric fields separated by ',', got 1", False),
        (500_000, "1,", None, "field 2 is empty; it must hold a float32 number", False),  # 2 MB: read whole
    ],
)
def test_a_bad_line_deep_in_a_big_csv_is_named_by_the_calls_deadline(
    cluster: tmr.LocalCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    lines: int,
    bad: str,
    batch_rows: int | None,
    said: str,
    diagnosis_blocks: bool,
) -> None:
    if diagnosis_blocks:  # lines straddle the blocks
        monkeypatch.setattr(_csv_diagnosis, "WHOLE_BYTES", 0)
        monkeypatch.setattr(_csv_diagnosis, "TEXT_BLOCK", 1 << 16)
        monkeypatch.setattr(_csv, "TEXT_BLOCK", 1 << 16)
        monkeypatch.setattr(_text, "TEXT_BLOCK", 1 << 16)
    path = tmp_path / "big.csv"
    number = _csv_with_a_bad_line(path, lines, bad, lines - 1000)
    started = time.monotonic()
    with pytest.raises(tmr.InputError) as info:
        tmr.mean(tmr.read_csv(str(path)), cluster=cluster, timeout=10, batch_rows=batch_rows)
    took = time.monotonic() - started
    assert re.search(
        rf"big.csv \(read on task /job:local/task:\d\): line {number} is {re.escape(repr(bad))}: ", str(info.value)
    )  # the shard holding the file's middle byte
    assert said in str(info.value)
    assert took < 10 + 2, f"the call took {took:.1f} s with timeout=10"  # it took 62.5 s: the diagnosis had 60 s


def _native_or_skip() -> None:
    from tfmapreduce._native.loader import kernels

    if kernels() is None:
        pytest.skip("no native kernels on this machine (no compiler, or TFMAPREDUCE_NATIVE=0): the line path is tested")


@pytest.mark.parametrize("block", [5, 64, 1 << 20])  # 5: every line straddles a block
def test_a_big_csv_is_read_natively_in_byte_ranges_that_shards_share(
    cluster: tmr.LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    import pandas as pd

    _native_or_skip()
    monkeypatch.setattr(_text, "TEXT_BLOCK", 4)  # every file here counts as big: read in byte ranges
    monkeypatch.setattr(_csv, "TEXT_BLOCK", block)
    rng = np.random.default_rng(block)
    rows = rng.integers(-(10**6), 10**6, (300, 3))
    lines = [",".join(map(str, r)) for r in rows]
    lines[7] = '"{}", {} ,{}'.format(*rows[7])  # a quoted field, spaces around a number
    text = "\ufeffa,b,c\r\n" + "\r\n".join(lines[:100]) + "\n" + "\n".join(lines[100:])  # CRLF, then LF, no last \n
    (tmp_path / "t.csv").write_text(text, encoding="utf-8", newline="")
    (tmp_path / "u.csv").write_text("k,v\n" + "".join(f"{k},{v}\n" for k, v in zip(rows[:, 0] % 7, rows[:, 1], strict=True)))
    for shards in (1, 3, 8):
        data = tmr.read_csv(str(tmp_path / "t.csv"), dtypes="int64")
        np.testing.assert_array_equal(tmr.sum(data, axis=0, cluster=cluster, sizes=shards), rows.sum(axis=0))
        assert int(tmr.count(data, cluster=cluster, sizes=shards)) == 300
        sums = tmr.sum_by_key(tmr.read_csv(str(tmp_path / "u.csv")), keys="k", values="v", cluster=cluster, sizes=shards)
        want = pd.read_csv(tmp_path / "u.csv").groupby("k").v.sum()
        assert sums.to_dict() == want.to_dict()


@pytest.mark.parametrize("at", [0, 1, 150, 298, 299])
def test_the_native_reader_names_a_bad_line_and_its_number_wherever_it_is(
    cluster: tmr.LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: int
) -> None:
    _native_or_skip()
    monkeypatch.setattr(_text, "TEXT_BLOCK", 4)
    monkeypatch.setattr(_csv, "TEXT_BLOCK", 9)  # lines of 4 bytes: blocks start inside lines
    bad = '7,"x\\"é'  # a backslash, a quote and UTF-8 bytes travel escaped in the kernel's error
    number = _csv_with_a_bad_line(tmp_path / "b.csv", 300, bad, at)
    with pytest.raises(tmr.InputError) as info:
        tmr.sum(tmr.read_csv(str(tmp_path / "b.csv")), cluster=cluster, sizes=4)
    assert re.search(r"b\.csv \(read on task /job:local/task:\d\): ", str(info.value))
    assert f"line {number} is {bad!r}: " in str(info.value)


def test_a_bad_line_among_small_csv_files_read_together_names_its_file(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        _csv_with_a_bad_line(tmp_path / f"{name}.csv", 700, "1,2", 0)
    number = _csv_with_a_bad_line(tmp_path / "b.csv", 700, "7,,", 321)
    with pytest.raises(tmr.InputError, match=rf"b\.csv \(read on task /job:local/task:0\): line {number} is '7,,'"):
        tmr.sum(tmr.read_csv(str(tmp_path / "*.csv")), cluster=cluster, devices=[f"{T0}/cpu:0"], batch_rows=256)


def test_an_empty_last_field_says_so(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "z.csv").write_text("a,b\n1,2\n1,\n")
    with pytest.raises(tmr.InputError) as info:
        tmr.mean(tmr.read_csv(str(tmp_path / "z.csv"), dtypes=["int64", "float64"]), cluster=cluster)
    message = str(info.value)
    assert "line 3 is '1,': field 2 is empty; it must hold a float64 number" in message
    assert "got 2" not in message


@pytest.mark.parametrize("block", [None, 7])  # 7: the file read in blocks (a large file's path)
def test_a_utf8_bom_is_not_part_of_the_first_header_or_line(
    cluster: tmr.LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int | None
) -> None:

    if block is not None:
        monkeypatch.setattr(_text, "TEXT_BLOCK", block)
    (tmp_path / "h.csv").write_text("\ufeffa,b\n1,2\n3,4\n", encoding="utf-8")
    np.testing.assert_allclose(tmr.mean(tmr.read_csv(str(tmp_path / "h.csv"), columns=["a"]), axis=0, cluster=cluster), [2.0])
    (tmp_path / "n.csv").write_text("\ufeff1,2\n3,4\n", encoding="utf-8")
    data = tmr.read_csv(str(tmp_path / "n.csv"), header=False)
    np.testing.assert_allclose(tmr.mean(data, axis=0, cluster=cluster), [2.0, 3.0])
    with data.persist(cluster=cluster) as table:
        np.testing.assert_allclose(tmr.sum(table, axis=0), [4.0, 6.0])


def test_a_tfrecord_feature_missing(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    with tf.io.TFRecordWriter(str(tmp_path / "a.tfrecord")) as w:
        w.write(example(u=[1.0]))
    data = tmr.read_tfrecord({T1: [str(tmp_path / "a.tfrecord")]}, features={"v": tf.io.FixedLenFeature([], tf.float32)})
    with pytest.raises(tmr.InputError, match=r"a\.tfrecord \(read on task /job:local/task:1\) has a record without feature 'v'"):
        tmr.mean(data, cluster=cluster)


def test_a_corrupt_tfrecord_file(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "a.tfrecord").write_bytes(b"garbage" * 20)
    data = tmr.read_tfrecord(str(tmp_path / "a.tfrecord"), features={"v": tf.io.FixedLenFeature([], tf.float32)})
    with pytest.raises(
        tmr.InputError, match=r"a\.tfrecord could not be read on task /job:local/task:\d: it is truncated, corrupt"
    ):
        tmr.sum(data, cluster=cluster)


@attrs.frozen
class StockNpy(_rows.Npy):
    """``.npy`` read with stock TensorFlow ops (``FixedLengthRecordDataset``) though the native kernels are there."""

    def with_kernels(self) -> _readers.Reader:
        return self


@pytest.mark.parametrize("native", [True, False], ids=["TmrReadRows", "stock"])
def test_a_file_that_changes_during_a_run_is_caught(cluster: tmr.LocalCluster, tmp_path: Path, native: bool) -> None:
    """White box: the source of a run made before the file shrank (as if it changed mid-run)."""
    path = tmp_path / "x.npy"
    np.save(path, np.ones((64, 4), np.float32))
    files = tmr.read_npy(str(path))
    stale = files.as_source() if native else attrs.evolve(files.as_source(), reader=StockNpy())
    np.save(path, np.ones((32, 4), np.float32))  # same header length, half the rows
    job = tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum)

    class Stale(Input):
        def as_source(self) -> Source:
            return stale  # the run sees the description made before the file changed

    resized = r"x\.npy \(read on task /job:local/task:0\) no longer has the size .*changed during the run"
    # The native reader checks the file's size with each batch; the stock one only learns it from a partial
    # record, or from the rows it yielded.
    fewer = r"x\.npy yielded a different number of rows than the 64 .*changed during the run"
    with pytest.raises(tmr.InputError, match=resized if native else fewer):
        job.run(Stale(), cluster=cluster, sizes=1, batch_rows=16)  # whole batches
    with pytest.raises(tmr.InputError, match=resized):
        job.run(Stale(), cluster=cluster, sizes=1, batch_rows=24)


@settings(max_examples=40, deadline=None)
@given(
    dtype=st.sampled_from(["<f4", ">f4", "<f8", "<i8", ">i2", "u1", "?", "<c8"]),
    row_shape=st.sampled_from([(), (3,), (2, 5)]),
    rows=st.integers(0, 70),
    cut=st.tuples(st.integers(0, 70), st.integers(0, 70)),
    batch=st.integers(1, 25),
)
def test_native_and_stock_npy_reads_give_the_same_batches(
    tmp_path_factory: pytest.TempPathFactory, dtype: str, row_shape: tuple[int, ...], rows: int, cut: tuple[int, int], batch: int
) -> None:
    """Whichever path reads a row range (``TmrReadRows`` or ``FixedLengthRecordDataset``), its batches are the same."""
    if _native.kernels() is None:
        pytest.skip("no native kernels on this machine (no C++ compiler)")
    path = tmp_path_factory.mktemp("npy") / "x.npy"
    x = (np.arange(rows * int(np.prod(row_shape, dtype=np.int64))) % 7 - 3).astype(dtype).reshape((rows, *row_shape))
    np.save(path, x)
    layout = _rows.Npy().describe(str(path), path.stat().st_size)
    start, stop = sorted(min(c, rows) for c in cut)
    read = {
        reader.native: [b.numpy() for b in reader.rows_dataset(str(path), path.stat().st_size, layout, start, stop, batch)]
        for reader in (_rows.Npy(), _rows.Npy().with_kernels())
    }
    assert [b.shape[0] for b in read[True]] == [b.shape[0] for b in read[False]]
    assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(read[True], read[False], strict=True))
    got = np.concatenate(read[True]) if read[True] else np.zeros((0, *row_shape), dtype)
    np.testing.assert_array_equal(got, x[start:stop])


def test_a_small_file_that_vanishes_or_changes_is_named_though_read_with_others(
    cluster: tmr.LocalCluster, tmp_path: Path
) -> None:
    """White box: small text files are read in one pipeline; the missing one is still the one named."""
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.txt").write_text(f"{name}\n")
    stale = tmr.read_text(str(tmp_path / "*.txt")).as_source()
    os.remove(tmp_path / "b.txt")

    class Stale(Input):
        def as_source(self) -> Source:
            return stale

    with pytest.raises(tmr.InputError, match=r"read_text: \S*b\.txt is missing on task /job:local/task:0"):
        tmr.count(Stale(), cluster=cluster, sizes=1)
    (tmp_path / "b.txt").write_text("b\nbb\n")
    with pytest.raises(tmr.InputError, match=r"read_text: \S*b\.txt \(read on task /job:local/task:0\) no longer has the size"):
        tmr.count(Stale(), cluster=cluster, sizes=1)


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="not a task"):
        tmr.read_npy({"task1": ["a.npy"]})
    with pytest.raises(TypeError, match="non-empty list"):
        tmr.read_npy([])
    with pytest.raises(TypeError, match="FixedLenFeature"):
        tmr.read_tfrecord("a", features={"v": 3})
    with pytest.raises(ValueError, match="batch_rows must be"):
        tmr.RunOptions.of(batch_rows=0)


# --------------------------------------------------------------------------- mapped reads


@pytest.mark.parametrize("path", ["windows", "mapped batches", "read batches"])
def test_jobs_over_npy_files_give_numpys_results_however_their_rows_are_read(
    cluster: tmr.LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """Windows of mapped rows (no tf.data), tf.data batches of mapped rows, or of rows read: the same results, for any
    partition, empty and misaligned files included (each case's files are its own, so each compiles its own program)."""
    if _native.kernels() is None:
        pytest.skip("no native kernels on this machine (no C++ compiler)")
    if path != "windows":
        monkeypatch.setattr(_rows, "WINDOWS", 0)
    if path == "read batches":
        monkeypatch.setattr(_rows, "MAP", False)
    rng = np.random.default_rng(11)
    parts = [(rng.standard_normal((n, 3)) * 100).astype(np.float32) for n in (0, 1, 1000, 70001, 5)]
    for i, part in enumerate(parts):
        np.save(tmp_path / f"x{i}.npy", part)
    (tmp_path / "r.raw").write_bytes(b"\1\2\3" * 5000)  # 3-byte rows: most batches start unaligned, so are read
    x = np.concatenate(parts)
    data = tmr.read_npy(str(tmp_path / "x*.npy"))
    for sizes in (tmr.weights(1, 3), [0, x.shape[0]]):  # uneven; an empty shard
        np.testing.assert_allclose(tmr.mean(data, cluster=cluster, sizes=sizes), x.astype(np.float64).mean(), rtol=1e-12)
        np.testing.assert_allclose(
            tmr.mean(data, axis=0, cluster=cluster, sizes=sizes), x.astype(np.float64).mean(axis=0), rtol=1e-12
        )
        assert int(tmr.count(data, cluster=cluster, sizes=sizes)) == x.shape[0]
    squares = tmr.MapReduce(lambda b: tf.reduce_sum(tf.cast(b, tf.float64) ** 2), tmr.combiners.sum)
    np.testing.assert_allclose(squares.run(data, cluster=cluster, batch_rows=777), (x.astype(np.float64) ** 2).sum(), rtol=1e-12)
    raw = tmr.read_raw(str(tmp_path / "r.raw"), dtype="u1", shape=(3,))
    assert tmr.sum(raw, axis=0, cluster=cluster, sizes=tmr.weights(1, 1)).tolist() == [5000, 10000, 15000]


def test_a_file_truncated_while_its_window_is_mapped_is_named_and_the_worker_lives(
    cluster: tmr.LocalCluster, tmp_path: Path
) -> None:
    """The map function marks that its window is mapped, waits for the file to be cut, then sums the window: the pages
    cut fault on the worker, which reads zeros there instead of dying, and the run fails naming the file."""
    if _native.kernels() is None:
        pytest.skip("no native kernels on this machine (no C++ compiler)")
    path, mapped, cut = tmp_path / "x.npy", tmp_path / "mapped", tmp_path / "cut"
    np.save(path, np.ones(1 << 20, np.float32))  # 4 MiB: one window

    def wait_then_sum(batch: tf.Tensor) -> tf.Tensor:
        with tf.control_dependencies([batch]):
            told = tf.io.write_file(str(mapped), "")
        with tf.control_dependencies([told]):
            start = tf.timestamp()
        waited, _ = tf.while_loop(  # the pattern is a loop variable: a constant one would be folded, matched once
            lambda t, pattern: tf.logical_and(tf.equal(tf.size(tf.io.matching_files(pattern)), 0), t < start + 30),
            lambda t, pattern: [tf.timestamp(), pattern],
            [start, tf.constant(str(cut))],
        )
        with tf.control_dependencies([waited]):
            return tf.reduce_sum(batch)

    def truncate() -> None:
        deadline = time.monotonic() + 60
        while not mapped.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.truncate(path, 4096)
        cut.write_text("")

    pids = cluster.pids
    cutter = threading.Thread(target=truncate)
    cutter.start()
    try:
        with pytest.raises(tmr.InputError, match=r"x\.npy \(read on task /job:local/task:0\) no longer has the size"):
            tmr.MapReduce(wait_then_sum, tmr.combiners.sum).run(tmr.read_npy(str(path)), cluster=cluster, sizes=1, timeout=60)
    finally:
        cutter.join()
    assert cluster.pids == pids
    assert int(tmr.count(np.arange(10), cluster=cluster)) == 10  # every worker still runs jobs


# --------------------------------------------------------------------------- bounded memory


def peak_rss_reset(pid: int) -> None:
    """Reset the kernel's high-water mark of the process's resident memory (Linux ≥ 4.0)."""
    with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as f:
        f.write("5")


def status(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for process {pid}")


@pytest.fixture
def big_files(tmp_path: Path) -> Iterator[tuple[str, float, int]]:
    """2 GiB of float32 in 8 .npy files (written block by block, never whole in memory), and their mean.

    In a folder of its own on the memory file system where there is one: the workers read the files as from disk
    (``pread``), and writing 2 GiB there takes 2 s against 25 s through the disk's writeback here.
    """
    folder = Path(tempfile.mkdtemp(prefix="tmr-big-files-", dir="/dev/shm" if os.path.isdir("/dev/shm") else tmp_path))
    block = (np.arange(1 << 24, dtype=np.float32) % 1000) / 7  # 64 MiB
    per_file = 4
    try:
        for i in range(8):
            with open(folder / f"big{i}.npy", "wb") as f:
                np.lib.format.write_array_header_1_0(
                    f, {"descr": "<f4", "fortran_order": False, "shape": (per_file * len(block),)}
                )
                for _ in range(per_file):
                    f.write(block.data)
        yield str(folder / "big*.npy"), float(block.astype(np.float64).mean()), 8 * per_file * block.nbytes
    finally:
        shutil.rmtree(folder)


@pytest.mark.slow
def test_the_mean_of_2_gib_of_files_keeps_each_workers_memory_bounded(big_files: tuple[str, float, int]) -> None:
    pattern, expected, nbytes = big_files
    assert nbytes >= 2 << 30
    with tmr.LocalCluster(workers=2) as local:
        data = tmr.read_npy(pattern)
        assert int(tmr.count(tmr.read_npy(pattern.replace("big*", "big0")), cluster=local)) > 0  # warm up: TF's own allocations
        idle = {pid: status(pid, "VmRSS") for pid in local.pids}
        for pid in local.pids:
            peak_rss_reset(pid)
        value = tmr.mean(data, cluster=local, timeout=300)
        grown = {pid: status(pid, "VmHWM") - idle[pid] for pid in local.pids}
    print(
        f"peak RSS above idle, per worker: {sorted(round(g / 2**20) for g in grown.values())} MiB for {nbytes / 2**30:.0f} GiB of files"
    )
    np.testing.assert_allclose(value, expected, rtol=RTOL)
    assert max(grown.values()) < 1 << 30, f"peak RSS above idle, per worker: {grown}"


@pytest.mark.parametrize(("reducers", "block"), [(1, 1 << 22), (3, 1 << 22), (2, 7)])
def test_word_count_over_text_files_read_on_the_workers_equals_counter(
    cluster: tmr.LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reducers: int, block: int
) -> None:
    import collections

    from tfmapreduce._io.files import text as _text

    monkeypatch.setattr(_text, "TEXT_BLOCK", block)  # 7: words and lines straddle the blocks
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(50)] + ["é", "ünïcode"]
    texts = [" ".join(rng.choice(words, size=rng.integers(0, 400))) + "\n" + "  tab\tsep\n" for _ in range(5)]
    texts += ["", "crlf\r\nline\r\nlast without newline"]  # an empty file; Windows line ends
    for i, text in enumerate(texts):
        (tmp_path / f"part{i}.txt").write_text(text, encoding="utf-8")
    result = tmr.recipes.word_count(tmr.read_text(str(tmp_path / "*.txt")), cluster=cluster, reducers=reducers, batch_rows=2)
    expected = collections.Counter(w for text in texts for w in text.encode().split())
    assert {k if isinstance(k, bytes) else k.encode(): int(v) for k, v in result} == dict(expected)


TEXTS = [
    b"",
    b"\n",
    b"\r",
    b"one line, no newline",
    b"a\nb\n",
    b"a\r\nb\r\n\r\nc\rd\n\ne\r",
    b"\n\n\nlast",
    b"x" * 50 + b"\n" + b"y" * 23 + b"\nz",
]


def _read(dataset: tf.data.Dataset) -> list[Any]:
    """The elements of ``dataset``, read as a run reads its pipelines (``DATA_OPTIONS``: no tf.data rewriting)."""
    return list(dataset.with_options(DATA_OPTIONS).as_numpy_iterator())


_WHOLE: dict[bytes, tuple[list[bytes], list[list[bytes]], list[bytes]]] = {}


def _read_whole(text: bytes, path: str) -> tuple[list[bytes], list[list[bytes]], list[bytes]]:
    """The lines ``TextLineDataset`` yields for a file holding ``text``, and its small-file batches' lines and
    ``whole_texts`` pieces: none depends on ``TEXT_BLOCK`` or ``NEWLINE_WINDOW``, so they are read once per text
    (each pipeline traced anew costs about a CPU second), not once per block and window."""
    if text in _WHOLE:
        return _WHOLE[text]
    expected = list(tf.data.TextLineDataset(path).as_numpy_iterator())
    whole = _readers.Text().small_batches([path], [len(text)], 2)  # the small-file path: the file read at once
    pieces = [piece.tolist() for piece in _read(_text.whole_texts([path], [len(text)]))]
    _WHOLE[text] = (expected, pieces, [line for batch in _read(whole) for line in batch.tolist()])
    return _WHOLE[text]


@pytest.mark.parametrize(
    ("block", "window"),  # window 2: the first and last newlines often lie outside it; each block size with one or both
    [(1, 2), (1, 1 << 16), (3, 2), (16, 1 << 16), (1 << 20, 2), (1 << 20, 1 << 16)],
)  # 6 of the 8 pairs: each case traces three pipelines anew (all 8 pairs: 215 s of a loaded run)
@pytest.mark.parametrize("text", TEXTS)
def test_text_blocks_yield_the_lines_text_line_dataset_yields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: bytes, block: int, window: int
) -> None:
    monkeypatch.setattr(_text, "TEXT_BLOCK", block)
    monkeypatch.setattr(_text, "NEWLINE_WINDOW", window)
    path = tmp_path / "t.txt"
    path.write_bytes(text)
    expected, pieces, whole = _read_whole(text, str(path))  # (read from the first case's file of the same text)
    got = [line for batch in _read(_text.text_lines(str(path), len(text))) for line in batch.tolist()]
    assert got == expected
    with_header = _csv.Csv(None, "float64", True, ",").record_batches(str(path), len(text), 2)
    assert [line for batch in _read(with_header) for line in batch.tolist()] == expected[1:]
    assert whole == expected
    blocks = [part for piece in _read(_text.text_blocks(str(path), len(text))) for part in piece.tolist()]
    assert pieces == ([[b"\n".join(blocks)]] if blocks else [])  # the same text, as one piece


def test_small_files_read_together_yield_the_lines_text_line_dataset_yields(tmp_path: Path) -> None:
    from tfmapreduce._io.files import readers as _readers

    paths = []
    for i, text in enumerate([*TEXTS, b"x,y\n1,2\n", b"x,y\r\n3,4\r\n5,6"]):
        paths.append(str(tmp_path / f"t{i}.txt"))
        Path(paths[-1]).write_bytes(text)
    sizes = [os.path.getsize(p) for p in paths]
    per_file = [list(tf.data.TextLineDataset(p).as_numpy_iterator()) for p in paths]

    def lines(dataset: tf.data.Dataset) -> list[bytes]:
        return [line for batch in dataset.as_numpy_iterator() for line in batch.tolist()]

    assert lines(_readers.Text().small_batches(paths, sizes, 3)) == [line for f in per_file for line in f]
    with_header = _csv.Csv(None, "float64", True, ",").small_batches(paths, sizes, 3)
    assert lines(with_header) == [line for f in per_file for line in f[1:]]  # each file's first line skipped
    blocks = _readers.TextBlocks().small_batches(paths, sizes, 3)  # for word splitting: a \r is a space
    texts = [
        [part for piece in _text.text_blocks(p, n, cr=" ").as_numpy_iterator() for part in piece.tolist()]
        for p, n in zip(paths, sizes, strict=True)
    ]
    assert [piece.tolist() for piece in blocks.as_numpy_iterator()] == [[b"\n".join(text)] for text in texts if text]


def test_a_csv_table_feeds_the_by_key_recipes_by_column_name(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    import pandas as pd

    rng = np.random.default_rng(3)
    frames = []
    for i in range(3):  # a text column left out (with empty and quoted fields), string and integer key columns
        frame = pd.DataFrame(
            {
                "note": rng.choice(["", "a,b", "x"], 40),
                "city": rng.choice(["Oslo", "Zürich", "Paris"], 40),
                "k": rng.integers(0, 6, 40),
                "v": rng.normal(size=40),
                "w": rng.normal(size=40),
            }
        )
        frame.to_csv(tmp_path / f"part{i}.csv", index=False)
        frames.append(pd.read_csv(tmp_path / f"part{i}.csv", keep_default_na=False))
    (tmp_path / "part3.csv").write_text("note,city,k,v,w\n")  # a header alone: no rows
    table, whole = tmr.read_csv(str(tmp_path / "*.csv")), pd.concat(frames)
    means = tmr.mean_by_key(table, keys="k", values="v", cluster=cluster)
    assert means.keys.dtype == np.int64
    np.testing.assert_allclose(means.values, whole.groupby("k").v.mean().to_numpy(), rtol=1e-6)
    by_city = tmr.sum_by_key(table, keys="city", values=["v", "w"], cluster=cluster, reducers=3)
    assert by_city.keys.tolist() == ["Oslo", "Paris", "Zürich"]
    np.testing.assert_allclose(np.stack(by_city.values), whole.groupby("city")[["v", "w"]].sum().to_numpy(), rtol=1e-5)
    assert tmr.count_by_key(table, keys="city", cluster=cluster).to_dict() == whole.city.value_counts().to_dict()
    spread = tmr.std_by_key(table, keys=2, values=3, ddof=1, cluster=cluster)  # columns by index
    np.testing.assert_allclose(spread.values, whole.groupby("k").v.std().to_numpy(), rtol=1e-5)
    typed = tmr.read_csv(str(tmp_path / "part0.csv"), dtypes=["str", "str", "str", "float64", "float64"])
    assert tmr.max_by_key(typed, keys="k", values="v", cluster=cluster)["3"] == frames[0][frames[0].k == 3].v.max()


def test_a_csv_table_given_wrongly_is_told_in_columns_and_lines(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("city,v\nOslo,1.5\nParis,2\n")
    (tmp_path / "u.csv").write_text("city,v\nOslo,1.5\nParis,x\n")
    table = tmr.read_csv(str(tmp_path / "t.csv"))
    with pytest.raises(TypeError, match=r"is a CSV table: name its key column with keys= .*values='v'"):
        tmr.mean_by_key(table, cluster=cluster)
    with pytest.raises(tmr.InputError, match=r"has no column 'k'; its header names \['city', 'v'\]"):
        tmr.mean_by_key(table, keys="k", values="v", cluster=cluster)
    with pytest.raises(tmr.InputError, match=r"values='city' is a column of text: line 2 of .*t\.csv holds 'Oslo'"):
        tmr.mean_by_key(table, keys="v", values="city", cluster=cluster)
    with pytest.raises(TypeError, match=r"keys= and values= name the columns of a CSV table"):
        tmr.mean_by_key(np.array([1]), keys="k", values="v", cluster=cluster)
    with pytest.raises(tmr.InputError, match=r"keys='v' is a float64 column"):
        tmr.mean_by_key(tmr.read_csv(str(tmp_path / "t.csv"), dtypes=["str", "float64"]), keys="v", values="v", cluster=cluster)
    with pytest.raises(tmr.InputError, match=r"u\.csv \(read on task .*\): line 3 is 'Paris,x': field 2 is 'x', not a float32"):
        tmr.mean_by_key(tmr.read_csv(str(tmp_path / "u.csv")), keys="city", values="v", cluster=cluster)
    with pytest.raises(tmr.InputError, match=r"column\(s\) \['city'\] are strings"):
        tmr.mean(tmr.read_csv(str(tmp_path / "t.csv"), dtypes=["str", "float32"]), cluster=cluster)


def test_nearly_equal_text_files_split_evenly_over_the_shards(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    """Each file goes whole to the shard holding its middle byte: four files a few bytes apart split 2:2 (and 1 each
    over four shards), not 3:1 as by their first bytes."""
    from tfmapreduce._base.plan import make_plan

    paths = []
    for i, extra in enumerate((0, 7, 3, 12)):
        path = tmp_path / f"part{i}.txt"
        path.write_text("a b c\n" * 500 + "x" * extra + "\n")
        paths.append(str(path))
    src = tmr.read_text(paths).as_source()
    devices = [tmr.Device.parse(d) for d in cluster.devices]
    for shards, want in ((2, [2, 2]), (4, [1, 1, 1, 1])):
        plan = make_plan(src.rows, shards, None, devices)
        assert [len(src.pieces(s)) for s in plan.shards] == want
    lines = tmr.count(tmr.read_text(paths), cluster=cluster, sizes=2)
    assert int(lines) == 4 * 501
