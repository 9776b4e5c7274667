"""A many-machine rehearsal on one host: four workers, each a "machine" of its own (``tests/machines.py``).

Each machine has its own network namespace and address on a bridge of veth pairs, its own pid namespace and a
private ``/tmp`` and ``/dev/shm``; the client stays in this host's namespace and reaches them over the bridge.
A fifth worker runs beside the client (same namespaces) for the mixed cluster.  Jobs run on the four machines
(``devices=``) and must equal the single-process references; shipped input must go through gRPC (``feed``) to the
machines and through shared memory to the worker beside the client; a machine's cable pulled mid-run must end in
the right answer from the survivors or a named error by the deadline; a killed machine restarted on its address
must rejoin; a Keras model predicts over files on the machines' own disks, each machine writing its predictions
there, with the weights sent once a machine.  Skipped, with the reason, where the OS refuses namespaces.
"""

from __future__ import annotations

import collections
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from machines import Rack

import tfmapreduce as tmr

pytestmark = [pytest.mark.slow, pytest.mark.alone]  # measures time: scripts/test runs it with no other test beside it

TIMEOUT = 60.0  # a run that nothing disturbs; the box's two cores are shared by every machine


@pytest.fixture(scope="module")
def rack() -> Iterator[Rack]:
    """Four machines (tasks 0-3) and one worker beside the client (task 4), started once for the module."""
    with Rack(4, beside=1) as made:
        yield made


@pytest.fixture(scope="module")
def cluster(rack: Rack) -> Iterator[tmr.Cluster]:
    with rack.cluster() as client:
        yield client


@pytest.fixture
def machines(rack: Rack, cluster: tmr.Cluster) -> Iterator[list[str]]:
    """The four machines' devices; after the test every link is plugged in and unshaped and every task live again."""
    yield [m.device for m in rack.remote]
    for m in rack.remote:
        rack.restore(m.task)
        rack.shape(m.task)
    cluster.mark_live()


def _moved(rack: Rack) -> list[int]:
    """Bytes through each machine's link so far (both ways)."""
    return [sum(rack.traffic(m.task)) for m in rack.remote]


def _lines(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}" for i in range(500)])
    words = vocabulary[np.minimum(rng.zipf(1.3, n * 6), 500) - 1]
    return np.array([" ".join(words[i : i + 6]) for i in range(0, len(words), 6)])


def _counter(lines: np.ndarray) -> dict[str, int]:
    return dict(collections.Counter(w.decode() for line in lines for w in line.encode().split()))


def test_the_readmes_jobs_across_four_machines_equal_numpy_through_feeds(
    rack: Rack, cluster: tmr.Cluster, machines: list[str]
) -> None:
    x = np.random.default_rng(0).random(400_000)
    plan = tmr.MapReduce(lambda t: tf.reduce_sum(t), tf.add).plan(x, cluster=cluster, devices=machines)
    assert [s.path for s in plan.shards] == ["feed"] * 4, plan  # 800 kB shards: shared memory is never tried either way
    before = _moved(rack)
    mean, stats = tmr.mean(x, cluster=cluster, devices=machines, timeout=TIMEOUT, return_stats=True)
    np.testing.assert_allclose(mean, x.mean())
    assert [s.device for s in stats.shards] == machines
    assert all(after - b >= x.nbytes // 4 for after, b in zip(_moved(rack), before, strict=True))  # each crossed its link
    np.testing.assert_allclose(tmr.variance(x, cluster=cluster, devices=machines[1:2], timeout=TIMEOUT), x.var())
    np.testing.assert_allclose(tmr.sum(x, cluster=cluster, devices=machines, timeout=TIMEOUT), x.sum())
    assert tmr.max(x, cluster=cluster, devices=machines, timeout=TIMEOUT) == x.max()
    keys = np.random.default_rng(1).integers(0, 1000, 200_000)
    means = tmr.mean_by_key(keys, x[: len(keys)], cluster=cluster, devices=machines, timeout=TIMEOUT).to_dict()
    sums, counts = np.bincount(keys, x[: len(keys)]), np.bincount(keys)
    expected = {k: sums[k] / counts[k] for k in np.flatnonzero(counts)}
    assert means.keys() == expected.keys()
    np.testing.assert_allclose([means[k] for k in expected], list(expected.values()))


def test_a_keyed_shuffle_word_count_across_four_machines_equals_counter(
    rack: Rack, cluster: tmr.Cluster, machines: list[str]
) -> None:
    lines = _lines(20_000, seed=2)
    counts = tmr.recipes.word_count(lines, cluster=cluster, devices=machines, timeout=TIMEOUT)
    assert counts.to_dict() == _counter(lines)


def test_a_group_reducer_median_by_key_across_four_machines_equals_numpy(cluster: tmr.Cluster, machines: list[str]) -> None:
    rng = np.random.default_rng(3)
    keys, values = rng.integers(0, 300, 100_000), rng.random(100_000)
    medians = tmr.median_by_key(keys, values, cluster=cluster, devices=machines, timeout=TIMEOUT).to_dict()
    assert sorted(medians) == sorted(set(keys.tolist()))
    np.testing.assert_allclose([medians[k] for k in sorted(medians)], [np.median(values[keys == k]) for k in sorted(medians)])


def test_a_sort_across_four_machines_equals_np_sort(cluster: tmr.Cluster, machines: list[str]) -> None:
    x = np.random.default_rng(4).integers(-(2**40), 2**40, 500_000)
    with tmr.sort(x, cluster=cluster, devices=machines, timeout=TIMEOUT) as ordered:
        assert {s.device for s in ordered.plan.shards} <= set(machines)
        np.testing.assert_array_equal(ordered.gather(timeout=TIMEOUT), np.sort(x))


def test_a_hash_join_across_four_machines_equals_the_reference(cluster: tmr.Cluster, machines: list[str]) -> None:
    rng = np.random.default_rng(5)
    left = (rng.integers(0, 20_000, 200_000), rng.random(200_000))
    right = (rng.permutation(30_000)[:15_000].astype(np.int64), rng.random(15_000))
    joined = tmr.join(left, right, cluster=cluster, devices=machines, strategy="hash", timeout=TIMEOUT)
    value_of = dict(zip(right[0].tolist(), right[1].tolist(), strict=True))
    kept = np.isin(left[0], right[0])
    assert len(joined) == int(kept.sum())
    expected = sorted(
        zip(left[0][kept].tolist(), left[1][kept].tolist(), [value_of[k] for k in left[0][kept].tolist()], strict=True)
    )
    got = sorted(zip(joined.keys.tolist(), joined.left.tolist(), joined.right.tolist(), strict=True))
    assert got == expected


def test_shared_memory_is_chosen_beside_the_client_and_never_for_a_machine(
    rack: Rack, cluster: tmr.Cluster, machines: list[str]
) -> None:
    """A mixed cluster: the worker beside the client sees its files; the three "remote" machines do not."""
    beside = rack.beside[0].device
    mixed = [beside, *machines[1:]]
    x = np.random.default_rng(6).random(4 * 300_000)  # 2.4 MB shards: over the 1 MiB from which shared memory pays
    job = tmr.MapReduce(lambda t: tf.reduce_sum(t), tf.add)
    plan = job.plan(x, cluster=cluster, devices=mixed)
    assert [s.path for s in plan.shards] == ["shm", "feed", "feed", "feed"], plan
    before = _moved(rack)
    np.testing.assert_allclose(job.run(x, cluster=cluster, devices=mixed, timeout=TIMEOUT), x.sum())
    moved = [after - b for after, b in zip(_moved(rack), before, strict=True)]
    shard = x.nbytes // 4
    assert all(m >= shard for m in moved[1:]), moved  # machines 1-3 fed their shards over their links
    # Machine 0 runs no shard but is the master: feeds enter there and leave for their tasks (in and out, 3 shards);
    # the shard in shared memory crosses no link at all.
    assert 6 * shard <= moved[0] < 7 * shard, moved
    with pytest.raises(tmr.ClusterError, match=r"transfer='shm': task /job:local/task:1 at 10\.233\.\d+\.11:2222 cannot open"):
        job.run(x, cluster=cluster, devices=mixed, transfer="shm", timeout=TIMEOUT)


def test_a_keras_model_predicts_over_npy_files_on_four_machines_each_writing_its_predictions(
    rack: Rack, cluster: tmr.Cluster, machines: list[str]
) -> None:
    """The models guide's Dense model over `.npy` files on the machines' own disks; each machine writes its part."""
    keras = pytest.importorskip("keras")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)])
    x = np.random.default_rng(11).random((40_000, 16), dtype=np.float32)
    want = model.predict(x, verbose=0)
    folder = f"/tmp/tmr-machines-{secrets.token_hex(4)}"  # each machine's own /tmp: invisible to the client
    rows = tmr.write_npy(x, f"{folder}/rows", shared=False, cluster=cluster, devices=machines, timeout=TIMEOUT)
    tasks = sorted(str(tmr.Task("local", m.task)) for m in rack.remote)
    assert sorted(rows.by_task()) == tasks
    assert not os.path.exists(f"{folder}/rows")
    weights = sum(w.numpy().nbytes for w in model.weights)
    for run in range(2):
        with tmr.stats() as s:
            kept = tmr.predict(model, tmr.read_npy(rows), cluster=cluster, batch_rows=4096, resident=True, timeout=TIMEOUT)
        with kept:
            assert sorted(sh.device for sh in s.last.shards) == sorted(machines)  # each machine predicts its own file
            assert s.last.weight_bytes == (weights * len(machines) if run == 0 else 0)  # once to each machine, then none
            written = tmr.write_npy(kept, f"{folder}/predictions{run}", shared=False, cluster=cluster, timeout=TIMEOUT)
        assert sorted(written.by_task()) == tasks  # one part on each machine, committed there
        assert not os.path.exists(f"{folder}/predictions{run}")
        with tmr.read_npy(written).persist(cluster=cluster, timeout=TIMEOUT) as back:  # read where they were written
            np.testing.assert_allclose(back.gather(timeout=TIMEOUT), want, rtol=1e-5, atol=1e-6)
    assert tmr.release(model, cluster=cluster) == len(model.weights) * len(machines)


def _cut_while(run: Callable[[], Any], rack: Rack, task: int, after: float) -> tuple[Any, BaseException | None, float]:
    """``run()`` on a thread, machine ``task``'s cable pulled ``after`` seconds in: (its value, its error, seconds)."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = run()
        except BaseException as e:  # handed to the test
            out["error"] = e

    thread = threading.Thread(target=target)
    started = time.monotonic()
    thread.start()
    time.sleep(after)
    assert thread.is_alive(), f"the run ended within {after} s, before the cut: {out}"
    rack.cut(task)
    thread.join(timeout=120)
    assert not thread.is_alive(), "the run did not end after the cut"
    return out.get("value"), out.get("error"), time.monotonic() - started


def test_a_cable_pulled_during_a_shuffle_ends_in_the_right_answer_from_the_survivors(
    rack: Rack, cluster: tmr.Cluster, machines: list[str]
) -> None:
    lines = _lines(60_000, seed=7)
    expected = _counter(lines)
    assert tmr.recipes.word_count(lines[:100], cluster=cluster, devices=machines, timeout=TIMEOUT)  # compiled and warm
    # 200 kbit/s: machine 2's 120 kB shard takes about 5 s to arrive, so the cut lands in the run (at 2 Mbit/s the
    # warm run, which compiles nothing for the new row count, ended in 0.4 s, before the cut)
    rack.shape(2, rate_bps=2e5)
    timeout = 30.0  # the lost attempt (the watchdog's probes name task 2 in ~2 s) and the rerun fit in it

    def count() -> Any:
        return tmr.recipes.word_count(lines, cluster=cluster, devices=machines, timeout=timeout, retries=2, return_stats=True)

    value, error, took = _cut_while(count, rack, 2, after=1.0)
    assert error is None, repr(error)
    counts, stats = value
    assert counts.to_dict() == expected
    assert stats.lost == (tmr.Task("local", 2),), stats
    assert stats.attempts == 2
    assert {s.device for s in stats.shards} <= {machines[0], machines[1], machines[3]}
    assert took < timeout, took  # the lost attempt, the probes naming task 2, the rerun: all within the deadline


def test_a_cable_pulled_during_a_sort_ends_by_its_deadline_naming_the_machine(
    rack: Rack, cluster: tmr.Cluster, machines: list[str]
) -> None:
    x = np.random.default_rng(8).integers(0, 2**62, 400_000)
    with tmr.sort(x[:100], cluster=cluster, devices=machines, timeout=TIMEOUT):
        pass
    rack.shape(1, rate_bps=2e6)
    timeout = 4.0

    def sort() -> Any:
        return tmr.sort(x, cluster=cluster, devices=machines, timeout=timeout, retries=0)

    value, error, took = _cut_while(sort, rack, 1, after=1.0)
    if value is not None:
        value.delete()
    assert isinstance(error, (tmr.WorkerTimeoutError, tmr.WorkerUnavailableError)), repr(error)
    assert error.task == tmr.Task("local", 1), error
    assert took < timeout + 2, took


def test_a_killed_machine_restarted_on_its_address_rejoins_and_later_runs_use_it(
    rack: Rack, cluster: tmr.Cluster, machines: list[str]
) -> None:
    x = np.random.default_rng(9).random(100_000)
    rack.kill(3)
    mean, stats = tmr.mean(x, cluster=cluster, devices=machines, timeout=TIMEOUT, return_stats=True)
    np.testing.assert_allclose(mean, x.mean())
    assert stats.lost == (tmr.Task("local", 3),)
    assert machines[3] not in {s.device for s in stats.shards}
    rack.restart(3)
    cluster.mark_live(tmr.Task("local", 3))
    mean, stats = tmr.mean(x, cluster=cluster, devices=machines, timeout=TIMEOUT, return_stats=True)
    np.testing.assert_allclose(mean, x.mean())
    assert [s.device for s in stats.shards] == machines
    assert stats.attempts == 1
    lines = _lines(5_000, seed=10)
    assert tmr.recipes.word_count(lines, cluster=cluster, devices=machines, timeout=TIMEOUT).to_dict() == _counter(lines)
