"""Writers (write_npy, write_text, write_csv, write_tfrecord): part files written on the workers, read back by the matching reader,
and their commit protocol (attempt folders, _SUCCESS, overwrite=), with real workers killed."""

from __future__ import annotations

import contextlib
import glob
import os
import re
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr


def _visible(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def _read(files: tmr.Files, cluster: tmr.Cluster) -> np.ndarray:
    with files.persist(cluster=cluster) as data:
        return data.gather()


def test_write_npy_round_trips_through_read_npy_in_shard_order(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    x = np.random.default_rng(1).normal(size=(50, 3)).astype(np.float32)
    with tmr.scatter(x, cluster=cluster, sizes=[0, 20, 30]) as data:
        written = tmr.write_npy(data, tmp_path / "out")
    assert _visible(tmp_path / "out") == ["_SUCCESS", *(f"part-{i:05d}-of-00003.npy" for i in range(3))]
    assert written.rows == (0, 20, 30)
    assert [str(t) for t in written.tasks] == [str(s.task) for s in data.plan.shards]
    assert sum(len(v) for v in written.by_task().values()) == 3
    np.testing.assert_array_equal(_read(tmr.read_npy(written.directory), cluster), x)
    for dtype in (np.int64, np.bool_, np.uint8, np.float16):  # host arrays are partitioned as for any job
        y = (np.arange(11) % 3).astype(dtype)
        folder = tmp_path / np.dtype(dtype).name
        tmr.write_npy(y, folder, cluster=cluster)
        np.testing.assert_array_equal(np.concatenate([np.load(p) for p in sorted(folder.glob("part-*"))]), y)


def test_write_text_of_exploded_words_and_lossless_numbers(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    lines = np.array(["to be or", "not to be", "", "that is the question"])
    with tmr.map(lambda s: tf.strings.split(s).flat_values, lines, cluster=cluster) as words:
        tmr.write_text(words, tmp_path / "words")
    assert _read(tmr.read_text(tmp_path / "words"), cluster).tolist() == " ".join(lines).split()  # text read back as str
    x = np.random.default_rng(2).normal(size=40) * 10.0 ** np.arange(-20, 20)
    tmr.write_text(x, tmp_path / "numbers", cluster=cluster)
    with tmr.map(lambda s: tf.strings.to_number(s, tf.float64), tmr.read_text(tmp_path / "numbers"), cluster=cluster) as back:
        np.testing.assert_array_equal(back.gather(), x)  # every float64 digit kept


def test_write_csv_round_trips_matrices_and_keyed_results(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    x = np.random.default_rng(3).normal(size=(30, 2))
    tmr.write_csv(x, tmp_path / "m", columns=["a", "b"], cluster=cluster)
    assert (tmp_path / "m" / "part-00000-of-00004.csv").read_text().splitlines()[0] == "a,b"
    np.testing.assert_array_equal(_read(tmr.read_csv(tmp_path / "m", dtypes="float64"), cluster), x)
    keys, values = np.array([5, 1, 5, 2, 1, 5]), np.arange(6.0)
    with tmr.sum_by_key(keys, values, cluster=cluster, resident=True) as result:
        written = tmr.write_csv(result, tmp_path / "k")
        expected = result.gather()
    assert len(written.parts) == len(result.plan.shards)  # one part per reducer, those without keys too
    table = _read(tmr.read_csv(tmp_path / "k", columns=["key", "value"], dtypes="float64"), cluster)
    assert sorted(map(tuple, table.tolist())) == list(zip(expected.keys.tolist(), expected.values.tolist(), strict=True))
    strings = np.array(["a,b", 'say "hi"', "plain", "two\nlines"], dtype=object)
    tmr.write_csv(strings, tmp_path / "s", columns=["text"], cluster=cluster, sizes=1)
    assert (tmp_path / "s" / "part-00000-of-00001.csv").read_text() == 'text\n"a,b"\n"say ""hi"""\nplain\n"two\nlines"\n'


def test_write_tfrecord_round_trips_numbers_strings_and_keyed_results(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    x, n = rng.normal(size=(40, 2, 3)).astype(np.float32), rng.integers(-(2**40), 2**40, 40)
    flags, half = rng.random(40) > 0.5, rng.normal(size=40).astype(np.float16)
    written = tmr.write_tfrecord(
        (x, n, flags, half), tmp_path / "t", features=["x", "n", "flag", "h"], cluster=cluster, sizes=[0, 15, 25]
    )
    assert _visible(tmp_path / "t") == ["_SUCCESS", *(f"part-{i:05d}-of-00003.tfrecord" for i in range(3))]
    assert written.rows == (0, 15, 25)
    assert os.path.getsize(written.parts[0]) == 0  # an empty shard's part holds no record
    first = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(written.parts[1]))).numpy()).features.feature
    assert list(first["n"].int64_list.value) == [n[0]]
    assert list(first["flag"].int64_list.value) == [int(flags[0])]
    spec = {
        "x": tf.io.FixedLenFeature([2, 3], tf.float32), "n": tf.io.FixedLenFeature([], tf.int64),
        "flag": tf.io.FixedLenFeature([], tf.int64), "h": tf.io.FixedLenFeature([], tf.float32),
    }  # fmt: skip
    for name, expected in (("x", x), ("n", n), ("flag", flags.astype(np.int64)), ("h", half.astype(np.float32))):
        np.testing.assert_array_equal(_read(tmr.read_tfrecord(tmp_path / "t", features={name: spec[name]}), cluster), expected)
    words = np.array(["to", "be", "", "or, not"], dtype=object)
    tmr.write_tfrecord(words, tmp_path / "w", cluster=cluster)
    back = _read(tmr.read_tfrecord(tmp_path / "w", features={"f0": tf.io.FixedLenFeature([], tf.string)}), cluster)
    assert back.tolist() == [w.encode() for w in words]
    with tmr.sum_by_key(np.array([3, 1, 3]), np.array([1, 2, 4]), cluster=cluster, resident=True) as r:
        tmr.write_tfrecord(r, tmp_path / "k")
    spec_k = {"key": tf.io.FixedLenFeature([], tf.int64), "value": tf.io.FixedLenFeature([], tf.int64)}
    table = _read(tmr.read_tfrecord(tmp_path / "k", features=spec_k), cluster)
    assert sorted(map(tuple, table.tolist())) == [(1, 2), (3, 5)]
    for dtype, fix in ((np.float64, r"cannot hold dtype float64 \(feature 'f0'\).*cast it to float32"), (np.uint64, "write_npy")):
        with pytest.raises(TypeError, match=fix):
            tmr.write_tfrecord(np.zeros(3, dtype), tmp_path / "bad", cluster=cluster)
    with pytest.raises(TypeError, match=r"features= names 1 features \(\['a'\]\) but the data has 2 arrays"):
        tmr.write_tfrecord((x, n), tmp_path / "bad", features=["a"], cluster=cluster)
    assert not (tmp_path / "bad").exists()


def test_overwrite_replaces_the_old_parts_only_once_the_write_succeeds(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    folder = tmp_path / "out"
    tmr.write_npy(np.arange(8.0), folder, cluster=cluster, sizes=4)
    with pytest.raises(tmr.OutputError, match=r"is not empty \(5 entries: _SUCCESS, part-00000.*overwrite=True"):
        tmr.write_npy(np.arange(8.0), folder, cluster=cluster)
    strings = np.array(["ok", "not\nok"], dtype=object)
    with pytest.raises(tmr.OutputError, match=r"write_text: a string of part 1 .* holds a line break.*write_csv"):
        tmr.write_text(strings, folder, cluster=cluster, sizes=2, overwrite=True)
    assert len(list(folder.glob("part-*.npy"))) == 4  # the failed write left the old output as it was
    assert "_temporary" not in _visible(folder)
    tmr.write_npy(np.arange(3.0), folder, cluster=cluster, sizes=2, overwrite=True)
    assert _visible(folder) == ["_SUCCESS", "part-00000-of-00002.npy", "part-00001-of-00002.npy"]
    np.testing.assert_array_equal(_read(tmr.read_npy(folder), cluster), np.arange(3.0))


def test_errors_name_the_argument_and_the_fix(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(tmr.OutputError, match="is a file"):
        tmr.write_npy(np.arange(3.0), tmp_path / "file", cluster=cluster)
    with pytest.raises(tmr.OutputError, match="cannot be made"):
        tmr.write_npy(np.arange(3.0), tmp_path / "file" / "sub", cluster=cluster)
    with pytest.raises(TypeError, match=r"write_npy cannot hold dtype object.*write_text or write_csv"):
        tmr.write_npy(np.array(["a"], dtype=object), tmp_path / "a", cluster=cluster)
    with pytest.raises(TypeError, match="write_npy writes one array, got 2"):
        tmr.write_npy((np.arange(3), np.arange(3)), tmp_path / "b", cluster=cluster)
    with pytest.raises(TypeError, match=r"columns= names 1 columns \(\['a'\]\) but the data has 2 fields"):
        tmr.write_csv(np.zeros((3, 2)), tmp_path / "c", columns=["a"], cluster=cluster)
    with pytest.raises(TypeError, match=r"reshape them to \(rows, k\)"):
        tmr.write_text(np.zeros((3, 2, 2)), tmp_path / "d", cluster=cluster)
    np.save(tmp_path / "x.npy", np.arange(3.0))
    with pytest.raises(TypeError, match=r"map them first"):
        tmr.write_npy(tmr.read_npy(tmp_path / "x.npy"), tmp_path / "e", cluster=cluster)
    for write in (tmr.write_npy, tmr.write_text, tmr.write_csv, tmr.write_tfrecord):  # no backup may write a part twice
        with pytest.raises(TypeError, match=r"speculate=True does not apply to writers: .* part file.*retries="):
            write(np.arange(3.0), tmp_path / "f", cluster=cluster, speculate=True)
    assert not any((tmp_path / name).exists() for name in "abcdef")  # refused before anything was made or written
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "part-00000-of-00001.npy").write_bytes((tmp_path / "x.npy").read_bytes())
    with pytest.raises(tmr.InputError, match="without a _SUCCESS marker"):
        tmr.read_npy(tmp_path / "g").as_source()


def test_parts_on_the_tasks_own_disks_are_committed_there_and_read_back_pinned_to_them(
    cluster: tmr.LocalCluster, tmp_path: Path
) -> None:
    x = np.random.default_rng(5).normal(size=(40, 2)).astype(np.float32)
    devices = list(cluster.devices)
    order = [devices[-1], devices[0], devices[-2], devices[1]]  # parts alternate between the two tasks
    with tmr.scatter(x, cluster=cluster, sizes=[10, 0, 17, 13], devices=order) as data:
        written = tmr.write_npy(data, tmp_path / "out", shared=False)
        tasks = [s.task for s in data.plan.shards]
    assert not written.shared
    assert written.tasks == tuple(tasks)
    assert written.rows == (10, 0, 17, 13)
    parts = [str(tmp_path / "out" / f"part-{i:05d}-of-00004.npy") for i in range(4)]
    assert written.by_task() == {str(tasks[0]): [parts[0], parts[2]], str(tasks[1]): [parts[1], parts[3]]}
    assert _visible(tmp_path / "out") == ["_SUCCESS", "_temporary", *(os.path.basename(p) for p in parts)]
    left = glob.glob(str(tmp_path / "out" / "_temporary" / "*" / "*"))
    assert len(left) == 4
    assert all(os.path.getsize(p) == 0 for p in left)
    files = tmr.read_npy(written)
    plan = files.explain()  # no cluster= needed: each part is read by the task that wrote it, in part order
    placed = [line.split() for line in plan.splitlines()[2:]]
    assert [(row[1], os.path.basename(row[-1])) for row in placed if row[2] != "-"] == [
        (str(tasks[i]), os.path.basename(parts[i])) for i in (0, 2, 3)
    ]
    np.testing.assert_array_equal(_read(files, cluster), x)  # rows in their order
    words = np.array(["to", "be", "or", "not", "to", "be"], dtype=object)
    for write, read in ((tmr.write_text, tmr.read_text), (tmr.write_csv, tmr.read_csv)):
        folder = tmp_path / write.__name__
        w = write(words if write is tmr.write_text else x, folder, shared=False, cluster=cluster, devices=order, sizes=4)
        assert [str(t) for t in w.tasks] == [str(t) for t in tasks]
        assert (folder / "_SUCCESS").exists()
        back = _read(read(w), cluster)
        np.testing.assert_array_equal(back, words if write is tmr.write_text else x)  # text read back as str
    spec = {"f0": tf.io.FixedLenFeature([2], tf.float32)}
    w = tmr.write_tfrecord(x, tmp_path / "rec", shared=False, cluster=cluster, devices=order, sizes=4)
    np.testing.assert_array_equal(_read(tmr.read_tfrecord(w, features=spec), cluster), x)
    with pytest.raises(tmr.OutputError, match=r"write_npy: .*out on task /job:\w+/task:\d is not empty \(shared=False"):
        tmr.write_npy(x, tmp_path / "out", shared=False, cluster=cluster)  # checked by the task that must write
    assert len(glob.glob(str(tmp_path / "out" / "part-*"))) == 4
    with pytest.raises(TypeError, match="overwrite=True needs shared=True"):
        tmr.write_npy(x, tmp_path / "out", shared=False, overwrite=True, cluster=cluster)
    with pytest.raises(TypeError, match=r"written by write_tfrecord; read them with tmr\.read_tfrecord"):
        tmr.read_npy(w)


def test_a_second_write_of_the_same_layout_does_not_compile(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    x = np.random.default_rng(6).normal(size=(7, 3)).astype(np.float32)
    folders = [tmp_path / f"out{i}" for i in range(6)]
    with tmr.scatter(x, cluster=cluster, sizes=[3, 4]) as data, tmr.stats() as runs:
        for folder, shared in zip(folders[:4], (True, True, False, False), strict=True):
            tmr.write_npy(data, folder, shared=shared)  # the directory and attempt folder are fed, not in the graph
        for folder, k in zip(folders[4:], (1, 2), strict=True):
            tmr.write_npy(x + k, folder, cluster=cluster, sizes=[3, 4])
    assert [run.compiled for run in runs.runs] == [True, False, True, False, True, False]
    for folder, want in zip(folders, (x, x, x, x, x + 1, x + 2), strict=True):
        np.testing.assert_array_equal(_read(tmr.read_npy(folder), cluster), want)  # each in its own directory
        assert "_temporary" not in _visible(folder) or folder in folders[2:4]
    with pytest.raises(TypeError, match=r"return_stats= does not apply to a write.*tmr\.stats\(\)"):
        tmr.write_npy(x, tmp_path / "s", cluster=cluster, return_stats=True)


@contextlib.contextmanager
def _tmpfs(mount: Path, options: str, purpose: str) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted at ``mount`` with ``options`` (root only; skipped where the OS refuses), unmounted even if
    the test fails."""
    mount.mkdir()
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip(f"no mount/umount command to make a disk for {purpose}")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for {purpose} (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted for one test."""
    with _tmpfs(tmp_path / "small", "size=1m", "the disk-full test") as mount:
        yield mount


@pytest.fixture
def read_only_disk(tmp_path: Path) -> Iterator[Path]:
    """A read-only tmpfs mounted for one test (read-only even for root, whom file modes do not stop)."""
    with _tmpfs(tmp_path / "readonly", "ro,size=1m", "the read-only test") as mount:
        yield mount


def test_a_directory_the_writing_task_cannot_write_is_named_with_the_task(
    cluster: tmr.LocalCluster, read_only_disk: Path
) -> None:
    with pytest.raises(
        tmr.OutputError,
        match=r"write_npy: task /job:local/task:\d could not write part \d under .*readonly \(.*Read-only file system.*\); "
        r"the attempt is discarded .*make the directory writable by that task's worker",
    ):
        tmr.write_npy(np.arange(10.0), read_only_disk, cluster=cluster, shared=False)
    with pytest.raises(  # shared: the client, which claims the directory first, cannot write it either
        tmr.OutputError, match=r"write_npy: .*readonly cannot take a write .*\(Read-only file system\); choose a directory"
    ):
        tmr.write_npy(np.arange(10.0), read_only_disk, cluster=cluster)
    assert os.listdir(read_only_disk) == []


def test_a_full_disk_discards_the_attempt_and_names_the_task(cluster: tmr.LocalCluster, small_disk: Path) -> None:
    x = np.arange(400_000, dtype=np.float64)  # 3.2 MB: the parts do not fit in 1 MiB
    with pytest.raises(
        tmr.OutputError,
        match=r"write_npy: task /job:local/task:\d could not write part \d under .*small/out \(.*No space left on device.*\); "
        r"the attempt is discarded",
    ):
        tmr.write_npy(x, small_disk / "out", cluster=cluster)
    assert os.listdir(small_disk) == []  # the attempt's parts and the directory it made are gone
    with pytest.raises(tmr.OutputError, match=r"write_tfrecord: task .* could not write part .*No space left on device"):
        tmr.write_tfrecord(x.astype(np.float32).reshape(-1, 4), small_disk / "t", cluster=cluster, sizes=1)
    assert os.listdir(small_disk) == []


@pytest.fixture(scope="module")
def trio() -> Iterator[tmr.LocalCluster]:
    """Three fresh workers for the kill tests of this module (one CPU each): each test kills its own task."""
    with tmr.LocalCluster(workers=3) as local:
        local.devices  # noqa: B018 - ask for the devices (and versions) while every worker lives
        yield local


def _kill(cluster: tmr.LocalCluster, task: int) -> None:
    os.kill(cluster.pids[task], signal.SIGKILL)
    time.sleep(0.1)  # let the kernel close its port


@contextlib.contextmanager
def _killed_mid_write(cluster: tmr.LocalCluster, task: int, folder: Path) -> Iterator[list[bool]]:
    """Kill ``task`` once the attempt's first part is written (part 0, a small shard): while it writes its big part 1.

    Yields a list that gets, as the kill is made, whether part 1 was still unwritten then (the kill was mid-write).
    On a quiet machine it is; on a loaded one the watcher may wake only after part 1 is written too, and the kill
    then lands between the writes and the commit, which must leave the same outcome.
    """
    killed: list[bool] = []
    stop = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not stop.is_set():
            if glob.glob(str(folder / "_temporary" / "*" / "part-00000-*")):
                killed.append(not glob.glob(str(folder / "_temporary" / "*" / "part-00001-*")))
                _kill(cluster, task)
                return
            time.sleep(0.002)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield killed
    finally:
        stop.set()  # a watcher that saw nothing stops; one that is killing finishes first (the run may fail before it)
        watcher.join()


_BIG = 6_000_000
"""Rows of the part the killed task writes: text of that many float64 rows takes it seconds to encode."""


@pytest.mark.slow
def test_a_worker_killed_mid_write_with_retries_commits_one_complete_set(trio: tmr.LocalCluster, tmp_path: Path) -> None:
    x = np.arange(_BIG + 10, dtype=np.float64) / 7
    devices = ["/job:local/task:0", "/job:local/task:1"]
    folder = tmp_path / "out"
    with _killed_mid_write(trio, 1, folder) as killed:
        written = tmr.write_text(x, folder, cluster=trio, sizes=[10, _BIG], devices=devices, retries=2)
    assert killed  # task 1 died after part 0 of the first attempt was written (part 1 not yet, on a quiet machine)
    assert _visible(folder) == ["_SUCCESS", "part-00000-of-00002.txt", "part-00001-of-00002.txt"]  # no _temporary
    assert tmr.Task("local", 1) not in written.tasks
    assert written.rows == (10, _BIG)
    back = np.concatenate([np.loadtxt(p, dtype=np.float64, ndmin=1) for p in written.parts])
    np.testing.assert_array_equal(back, x)


@pytest.mark.slow
def test_a_worker_killed_mid_write_without_retries_leaves_no_part(trio: tmr.LocalCluster, tmp_path: Path) -> None:
    x = np.arange(_BIG + 10, dtype=np.float64) / 7
    devices = ["/job:local/task:0", "/job:local/task:2"]
    folder = tmp_path / "out"
    with _killed_mid_write(trio, 2, folder) as killed, pytest.raises(tmr.WorkerUnavailableError, match="task:2"):
        tmr.write_text(x, folder, cluster=trio, sizes=[10, _BIG], devices=devices, retries=0)
    assert killed  # killed after part 0 was written (part 1 not yet, on a quiet machine)
    assert not folder.exists()  # made by the write, removed with its attempt: no part, no _SUCCESS
    with pytest.raises(TypeError, match="speculate=True does not apply to writers"):  # so no backup copy writes a part twice
        tmr.write_npy(x, tmp_path / "s", cluster=trio, speculate=True)


def test_two_writes_into_one_new_directory_at_once_never_mix_their_parts(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    folder = tmp_path / "out"

    def write(start: threading.Barrier, outcomes: list[object], i: int, overwrite: bool) -> None:
        start.wait()
        try:
            outcomes[i] = tmr.write_npy(np.arange(12.0), folder, cluster=cluster, sizes=2 + i, overwrite=overwrite)
        except tmr.OutputError as e:
            outcomes[i] = e

    for round in range(3):  # two threads of one client, started together: one commits, the other is refused
        start, outcomes = threading.Barrier(2), [None, None]
        threads = [threading.Thread(target=write, args=(start, outcomes, i, round > 0)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        parts = sorted(p for p in _visible(folder) if p.startswith("part-"))
        assert len({p.rsplit("-of-", 1)[1] for p in parts}) == 1, parts  # one write's parts, never two writes'
        assert "_SUCCESS" in _visible(folder)
        assert "_temporary" not in _visible(folder)
        np.testing.assert_array_equal(_read(tmr.read_npy(folder), cluster), np.arange(12.0))  # each row once
        refused = [o for o in outcomes if isinstance(o, tmr.OutputError)]
        assert len(refused) <= 1
        for error in refused:
            assert re.search(r"another write into .*out is in progress|is not empty", str(error))
    (folder / "_temporary").mkdir()  # a write in progress (or one interrupted): the directory is taken
    with pytest.raises(tmr.OutputError, match=r"another write into .*out is in progress \(its _temporary folder exists\)"):
        tmr.write_npy(np.arange(3.0), folder, cluster=cluster, overwrite=True)
    assert (folder / "_temporary").is_dir()  # the other write's claim is left alone
    assert "_SUCCESS" in _visible(folder)


def test_overwrite_never_follows_a_link_and_a_failed_one_keeps_the_old_output(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the output's")
    folder = tmp_path / "out"
    tmr.write_npy(np.arange(4.0), folder, cluster=cluster, sizes=2)
    (folder / "link").symlink_to(outside, target_is_directory=True)
    before = _visible(folder)
    with pytest.raises(tmr.OutputError, match="holds a line break"):  # a failed overwrite: the old output as it was
        tmr.write_text(np.array(["a", "b\nc"], dtype=object), folder, cluster=cluster, sizes=2, overwrite=True)
    assert _visible(folder) == before
    assert (folder / "link").is_symlink()
    tmr.write_npy(np.arange(3.0), folder, cluster=cluster, sizes=1, overwrite=True)
    assert _visible(folder) == ["_SUCCESS", "part-00000-of-00001.npy"]
    assert (outside / "keep.txt").read_text() == "not the output's"  # the link went, never what it points to
    np.testing.assert_array_equal(_read(tmr.read_npy(folder), cluster), np.arange(3.0))


def test_a_written_directory_with_glob_characters_reads_its_own_parts(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    tmr.write_npy(np.full(4, 7.0), tmp_path / "out0", cluster=cluster, sizes=2)  # a sibling the pattern out[0] matches
    written = tmr.write_npy(np.arange(4.0), tmp_path / "out[0]", cluster=cluster, sizes=2)
    np.testing.assert_array_equal(_read(tmr.read_npy(written), cluster), np.arange(4.0))
    text = tmr.write_text(np.array(["x", "y"], dtype=object), tmp_path / "t[*]", cluster=cluster, sizes=2)
    assert _read(tmr.read_text(text), cluster).tolist() == ["x", "y"]
    local = tmr.write_text(np.array(["p", "q"], dtype=object), tmp_path / "l[?]", cluster=cluster, sizes=2, shared=False)
    assert _read(tmr.read_text(local), cluster).tolist() == ["p", "q"]  # matched on each task, literally


def test_an_output_path_with_a_nul_byte_is_refused_naming_the_argument(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    for shared in (True, False):
        with pytest.raises(tmr.OutputError, match=r"write_npy: directory .* holds a NUL byte"):
            tmr.write_npy(np.arange(3.0), f"{tmp_path}/a\0b", cluster=cluster, shared=shared)
    assert os.listdir(tmp_path) == []


def test_what_a_writer_writes_its_reader_reads(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    keys = np.array(["plain", "new\nline", 'say "hi"', "a,b", "two\n\nbreaks"], dtype=object)
    values = np.arange(5.0)
    with tmr.sum_by_key(keys, values, cluster=cluster, resident=True) as sums:
        written = tmr.write_csv(sums, tmp_path / "csv")
    back = tmr.sum_by_key(tmr.read_csv(written), keys="key", values="value", cluster=cluster).to_dict()
    assert back == dict(zip(keys.tolist(), values.tolist(), strict=True))
    table = _read(tmr.read_csv(tmp_path / "csv", columns=["value"]), cluster)
    assert sorted(table[:, 0].tolist()) == values.tolist()
    for dtype in (np.uint32, np.uint64, np.uint16, np.int8, np.bool_, np.float16):
        x = (np.arange(10) * 37 + (2**32 - 10 if dtype == np.uint32 else 0)).astype(dtype).reshape(5, 2)
        folder = tmp_path / f"npy_{np.dtype(dtype).name}"
        tmr.write_npy(x, folder, cluster=cluster, sizes=2)
        got = _read(tmr.read_npy(folder), cluster)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got, x)


_HOLD = 2.0
"""Seconds the test keeps task 1's write blocked (or until the write raised, were that first): the clean-up of a failed
write must wait for it, however long; without that wait the write raises while task 1 is still writing."""


def test_a_failed_write_waits_for_every_task_and_leaves_no_part_behind(
    cluster: tmr.LocalCluster, small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38, item 4: task 0's part fills the disk while task 1 is still writing its own part; the write raises only
    once task 1's write has ended, and nothing of the attempt is left: the disk is empty and takes the next write.

    Task 1's part file is made a named pipe the test reads (its write blocks once the pipe is full, until the test
    reads it), so task 1 is mid-write when task 0's far bigger part fails.  No assertion depends on a time: were task
    1 not yet writing then, its write never begins (the marker is gone) and the outcome is the same."""
    from tfmapreduce._kinds import write as write_module

    part = "part-00001-of-00002.txt"
    pipes: list[int] = []
    readers: list[threading.Thread] = []
    raised = threading.Event()
    let_go = threading.Event()  # the test stopped holding task 1's write: only from then on can that write end
    never_began: list[bool] = []
    opened = write_module.open_attempt

    def read(pipe: int) -> None:
        while not select.select([pipe], [], [], 0.05)[0]:  # until task 1 has written into its part
            if raised.is_set():
                never_began.append(True)  # nor will it: the attempt's marker is gone
                return
        raised.wait(_HOLD)
        let_go.set()
        os.set_blocking(pipe, True)
        while os.read(pipe, 1 << 16):
            pass

    def open_attempt(folder: str) -> None:  # the attempt's folder as the client makes it, with task 1's part a pipe
        opened(folder)
        os.mkfifo(os.path.join(folder, part))
        pipes.append(os.open(os.path.join(folder, part), os.O_RDONLY | os.O_NONBLOCK))
        readers.append(threading.Thread(target=read, args=(pipes[-1],), daemon=True))
        readers[-1].start()

    monkeypatch.setattr(write_module, "open_attempt", open_attempt)
    x = np.arange(1_020_000, dtype=np.float64) / 7  # part 0: 1,000,000 rows of text, about 19 MB; part 1: 20,000 rows
    devices = ["/job:local/task:0", "/job:local/task:1"]
    try:
        with pytest.raises(tmr.OutputError, match=r"task /job:local/task:0 could not write part 0 .*No space left on device"):
            tmr.write_text(x, small_disk / "out", cluster=cluster, sizes=[1_000_000, 20_000], devices=devices)
    finally:
        waited = let_go.is_set()  # read as the write raised, not once the pipe's end is seen (a race under load)
        raised.set()
        for reader in readers:
            reader.join()
        for pipe in pipes:
            os.close(pipe)
    assert waited or never_began  # the clean-up waited for task 1's write, which could end only once let go
    assert os.listdir(small_disk) == []  # then removed all of the attempt: no part of any task, nor the directory
    monkeypatch.undo()
    written = tmr.write_text(np.arange(10.0), small_disk / "out", cluster=cluster, sizes=2)  # the disk takes the next write
    assert _visible(small_disk / "out") == ["_SUCCESS", *(os.path.basename(p) for p in written.parts)]


def _idle(pid: int) -> None:
    """Wait until process ``pid`` has used no CPU for a second (it finished what it was doing); 60 s at most."""

    def ticks() -> int:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    deadline, last, quiet = time.monotonic() + 60, -1, 0
    while time.monotonic() < deadline and quiet < 4:
        now = ticks()
        quiet = quiet + 1 if now == last else 0
        last = now
        time.sleep(0.25)


@pytest.mark.slow
def test_an_abandoned_attempt_that_resumes_after_the_commit_writes_nothing(tmp_path: Path) -> None:
    x = np.arange(_BIG + 10, dtype=np.float64) / 7
    devices = ["/job:local/task:0", "/job:local/task:1"]
    folder = tmp_path / "out"
    with tmr.LocalCluster(workers=3) as local:
        local.devices  # noqa: B018 - ask for the devices while every worker answers
        stopped = threading.Event()

        def stop_mid_write() -> None:  # task 1 stopped while it encodes its big part, once part 0 is written
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not glob.glob(str(folder / "_temporary" / "*" / "part-00000-*")):
                time.sleep(0.002)
            os.kill(local.pids[1], signal.SIGSTOP)
            stopped.set()

        watcher = threading.Thread(target=stop_mid_write, daemon=True)
        watcher.start()
        try:
            written = tmr.write_text(x, folder, cluster=local, sizes=[10, _BIG], devices=devices, retries=2, timeout=60)
        finally:
            watcher.join()
            os.kill(local.pids[1], signal.SIGCONT)
        assert stopped.is_set()
        assert tmr.Task("local", 1) not in written.tasks  # retried elsewhere, and committed
        _idle(local.pids[1])  # the resumed task finished its abandoned attempt
        assert _visible(folder) == ["_SUCCESS", "part-00000-of-00002.txt", "part-00001-of-00002.txt"]


def test_a_write_carries_its_attempt_in_its_plan_so_one_kind_serves_two_runs(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    """Issue 37: the attempt folder is a value of the plan (``WritePlan``), fed from it; the kind keeps nothing of a run."""
    import attrs

    from tfmapreduce._engine import driver
    from tfmapreduce._io.files.encode import NpyWriter
    from tfmapreduce._kinds.commit import claim
    from tfmapreduce._kinds.write import Write, WritePlan
    from tfmapreduce._options import RunOptions

    x = np.arange(10.0)
    path, _ = claim("write_npy", tmp_path / "out", True)
    kind = Write(NpyWriter(), path, overwrite=True)
    assert {f.name for f in attrs.fields(Write)} == {"format", "directory", "overwrite", "shared", "ready"}
    settings = RunOptions.of(cluster=cluster, sizes=[4, 6])
    first, second = driver.plan(kind, x, settings), driver.plan(kind, x, settings)  # two runs planned at once
    assert isinstance(first, WritePlan)
    assert first == second  # one layout: one program (the folder is fed, not part of the plan's identity)
    assert first.folder != second.folder
    assert (kind.fed(first, "attempt"), kind.fed(second, "attempt")) == (first.folder, second.folder)
    assert sorted(os.listdir(tmp_path / "out" / "_temporary")) == sorted(os.path.basename(p.folder) for p in (first, second))
    with tmr.stats() as runs:
        for k in (1, 2):  # the same kind, two runs one after the other: each plans (and is fed) its own attempt
            if k == 2:
                claim("write_npy", path, True)
            written = driver.run(kind, x + k, settings)
            np.testing.assert_array_equal(_read(tmr.read_npy(written.directory), cluster), x + k)
            assert "_temporary" not in _visible(tmp_path / "out")
    assert [run.compiled for run in runs.runs] == [True, False]
    assert not kind.ready  # a fed program is not kept ready: a run like the last one still plans its own attempt
