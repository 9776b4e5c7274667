"""Progress of one run: rows counted on the tasks while the run goes, a bar drawn from them, and rows read in RunStats."""

from __future__ import annotations

import secrets
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfmapreduce as tmr
from tfmapreduce._base.plan import Shard
from tfmapreduce._cluster import sessions as _sessions
from tfmapreduce._engine import progress as _progress
from tfmapreduce._io.source import Batches


def test_a_forced_bar_counts_every_row_of_a_file_job_on_each_task(
    cluster: tmr.LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = np.arange(400_000, dtype=np.float32)
    for i, part in enumerate(np.array_split(x, 4)):
        np.save(tmp_path / f"x{i}.npy", part)
    mean = tmr.mean(tmr.read_npy(tmp_path / "x*.npy"), cluster=cluster, batch_rows=10_000, progress=True)
    assert float(mean) == pytest.approx(float(np.mean(x, dtype=np.float64)))
    err = capsys.readouterr().err  # not a terminal: drawn because progress=True forces it
    final = err.split("\r")[-1]
    assert "MapReduce(mean)" in final, err
    assert "400k/400k" in final, err
    assert "local:0 200k" in final, err  # rows per task
    assert "local:1 200k" in final, err


def test_a_keyed_bar_shows_the_reduce_once_every_row_is_mapped(
    cluster: tmr.LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(1)
    keys, values = rng.integers(0, 100, 200_000), rng.random(200_000)
    result = tmr.mean_by_key(keys, values, cluster=cluster, progress=True)
    expected = pd.Series(values).groupby(keys).mean()
    np.testing.assert_allclose(result.values, expected.to_numpy())
    final = capsys.readouterr().err.split("\r")[-1]
    assert "MapReduce(mean_by_key): reduce" in final, final
    assert "200k/200k" in final, final


def test_a_batch_is_counted_once_mapped_not_once_read(
    cluster: tmr.LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 38: the bar started at 50%: a file batch was counted when read, before its map ran.  Each batch's map here
    # writes "arrived_<first row>", then takes a token from a queue on its device, which the test fills one token at a
    # time: the test reads the run's counters while a batch is read but not mapped, and they must count only the
    # batches that got a token.
    rows, files = 20_000, 4  # over the rows a run needs to count (progress.COUNTED); one batch a file
    for i in range(files):
        np.save(tmp_path / f"x{i}.npy", np.arange(i * rows, (i + 1) * rows, dtype=np.int64))
    device, queue = f"{cluster.tasks[0]}/device:CPU:0", f"tmr_test_gate_{secrets.token_hex(4)}"
    counters: list[_progress.Counters] = []
    shown = _progress.shown

    def watched(found: _progress.Counters | None, *args: Any) -> Any:
        counters.extend([found] if found is not None else [])
        return shown(found, *args)

    monkeypatch.setattr(_progress, "shown", watched)
    folder = str(tmp_path)

    def gated(batch: tf.Tensor) -> tf.Tensor:
        first = tf.strings.reduce_join(tf.strings.as_string(batch[:1]))  # (traced on an empty batch too)
        arrived = tf.io.write_file(tf.strings.join([folder, "/arrived_", first]), tf.strings.as_string(tf.size(batch)))
        with tf.control_dependencies([arrived]):
            token = tf.queue.FIFOQueue(2 * files, [tf.int64], [[]], shared_name=queue).dequeue()
        return tf.reduce_sum(batch) + 0 * token

    gates = tf.Graph()
    with gates.as_default(), tf.device(device):
        enqueue = tf.queue.FIFOQueue(2 * files, [tf.int64], [[]], shared_name=queue).enqueue(tf.constant(1, tf.int64))
        with tf.control_dependencies([enqueue]):
            given = tf.constant(0)

    def release() -> None:
        cluster.run(gates, given, {}, tasks=[cluster.tasks[0]], timeout=30)

    result: list[Any] = []
    data = tmr.read_npy(tmp_path / "x*.npy")
    job = threading.Thread(
        target=lambda: result.append(
            tmr.MapReduce(gated, tmr.combiners.sum).run(data, cluster=cluster, devices=[device], batch_rows=rows, timeout=300)
        )
    )
    job.start()
    released: dict[str, int] = {}
    try:
        while len(released) < files and job.is_alive():
            arrived = {p.name.removeprefix("arrived_"): p.read_text() for p in tmp_path.glob("arrived_*")}
            waiting = sorted(set(arrived) - set(released), key=int)
            if not waiting or not counters or not all(arrived.values()):
                time.sleep(0.01)
                continue
            counted = sum(counters[0].read(cluster, timeout=30).values())
            assert counted <= sum(released.values()), (counted, released, waiting)  # read, not mapped: not counted
            released[waiting[0]] = int(arrived[waiting[0]])
            release()
    finally:
        for _ in range(files - len(released)):
            release()
        job.join()
    assert sorted(released, key=int) == [str(i * rows) for i in range(files)]
    assert int(result[0]) == sum(range(files * rows))
    assert sum(counters[0].read(cluster, timeout=30).values()) == files * rows


def test_no_bar_unless_asked_or_on_a_terminal_past_the_delay(
    cluster: tmr.LocalCluster, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    x = np.ones(100_000, np.float32)
    tmr.sum(x, cluster=cluster)  # stderr is no terminal here: no bar
    tmr.sum(x, cluster=cluster, progress=False)
    monkeypatch.setattr(_progress, "_terminal", lambda: True)
    tmr.sum(x, cluster=cluster)  # a terminal, but the run ends before the 2 s delay
    assert capsys.readouterr().err == ""
    with pytest.raises(TypeError, match=r"progress must be None .* True .* or False .*; got str 'yes'"):
        tmr.sum(x, cluster=cluster, progress="yes")


def test_run_stats_give_the_rows_read_from_text_and_csv_files(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    lines = [f"line {i} " + "x" * (i % 50) for i in range(30_000)]
    for i in range(4):
        (tmp_path / f"t{i}.txt").write_text("\n".join(lines[i::4]) + "\n")
    text = tmr.read_text(tmp_path / "t*.txt")
    count, stats = tmr.MapReduce(lambda b: tf.size(b, tf.int64), tmr.combiners.sum).run(text, cluster=cluster, return_stats=True)
    assert int(count) == len(lines)
    assert sum(s.rows for s in stats.shards) == len(lines)  # rows read, not the files' bytes the plan split
    assert all(s.rows in (len(lines) // 4 * k for k in range(5)) for s in stats.shards)  # whole files: 0 to 4 of them

    frame = pd.DataFrame({"k": np.arange(5_000) % 7, "v": np.arange(5_000) / 3})
    for i in range(2):
        frame.iloc[i * 2_500 : (i + 1) * 2_500].to_csv(tmp_path / f"c{i}.csv", index=False)
    table = tmr.read_csv(tmp_path / "c*.csv", dtypes={"k": "int64", "v": float})
    means, stats = tmr.mean_by_key(table, keys="k", values="v", cluster=cluster, return_stats=True)
    assert means.to_dict() == pytest.approx(frame.groupby("k").v.mean().to_dict())
    assert sum(s.rows for s in stats.shards) == len(frame)


def test_counting_leaves_a_run_repeatable_and_other_assignments_do_not() -> None:
    """A run made again after a cancel sets its counters to 0 first, so counting must not stop the quick path."""
    shard = Shard(0, 0, 10, "/job:local/task:0/device:CPU:0")
    graph = tf.Graph()
    with graph.as_default():
        counters = _progress.Counters("combine")
        counted = counters.mapped(shard, tf.reduce_sum(tf.ones([10])))
        piece = counters.streamed(shard, Batches(tf.data.Dataset.range(10).batch(3), None))
        total = piece.dataset.reduce(tf.constant(0, tf.int64), lambda a, b: piece.counted(b, a + tf.reduce_sum(b)))
    assert counters.total is None  # a piece whose rows only reading tells
    assert isinstance(counted, tf.Operation)
    assert isinstance(total, tf.Tensor)
    assert _sessions.repeatable(graph)
    with graph.as_default():
        variable = tf.raw_ops.VarHandleOp(dtype=tf.int64, shape=[], shared_name="someone_elses")
        tf.raw_ops.AssignAddVariableOp(resource=variable, value=tf.constant(1, tf.int64))
    assert not _sessions.repeatable(graph)
