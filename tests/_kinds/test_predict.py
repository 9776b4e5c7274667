"""Models in map functions and ``tmr.predict``: variables placed once per device, reused, sent again when changed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf
from ports import free_ports

import tfmapreduce as tmr

keras = pytest.importorskip("keras")

SIZES = [100, 250, 400, 250]
"""Uneven shards, over every device of the test cluster (two workers)."""


def _dense() -> keras.Model:
    keras.utils.set_random_seed(1)
    return keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)])


def _rows(n: int = 1000) -> np.ndarray:
    return np.random.default_rng(0).random((n, 16), np.float32)


class Affine(tf.Module):
    """A tf.Module model: x @ w + b."""

    def __init__(self) -> None:
        super().__init__()
        self.w = tf.Variable(np.random.default_rng(1).random((16, 3), np.float32))
        self.b = tf.Variable(np.arange(3, dtype=np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 16], tf.float32)])
    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return x @ self.w + self.b


def _run(fn, x, cluster, **options):
    with tmr.stats() as s:
        got = fn(x, cluster=cluster, **options)
    return got, s.last


def test_a_keras_model_predicts_as_model_predict_in_row_order(cluster: tmr.LocalCluster) -> None:
    model, x = _dense(), _rows()
    want = model.predict(x, verbose=0)
    got, stats = _run(lambda v, **o: tmr.predict(model, v, **o), x, cluster, sizes=SIZES)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert [s.rows for s in stats.shards] == SIZES
    devices = {s.device for s in stats.shards}
    kernel_bytes = sum(w.numpy().nbytes for w in model.weights)
    assert stats.weight_bytes == kernel_bytes * len(devices)  # every variable once to each device that maps a shard
    again, stats = _run(lambda v, **o: tmr.predict(model, v, **o), x, cluster, sizes=SIZES)
    np.testing.assert_array_equal(again, got)
    assert stats.weight_bytes == 0
    assert not stats.compiled


def test_changed_weights_are_sent_again_and_change_the_predictions(cluster: tmr.LocalCluster) -> None:
    model, x = _dense(), _rows()
    first, _ = _run(lambda v, **o: tmr.predict(model, v, **o), x, cluster, sizes=SIZES)
    bias = model.layers[-1].bias
    bias.assign(bias + 1.0)
    second, stats = _run(lambda v, **o: tmr.predict(model, v, **o), x, cluster, sizes=SIZES)
    np.testing.assert_allclose(second, first + 1.0, rtol=1e-5, atol=1e-5)
    assert stats.weight_bytes == bias.numpy().nbytes * len({s.device for s in stats.shards})  # the changed one alone


def test_a_map_function_that_calls_a_model_or_reads_variables(cluster: tmr.LocalCluster) -> None:
    model, x = _dense(), _rows(600)
    scale = tf.Variable(3.0)
    offset = tf.constant(1.0)  # a tensor made eagerly travels as a constant
    with tmr.map(lambda v: model(v) * scale + offset, x, cluster=cluster, sizes=[100, 200, 300]) as out:
        np.testing.assert_allclose(out.gather(), model.predict(x, verbose=0) * 3.0 + 1.0, rtol=1e-5, atol=1e-5)
    with tmr.map(model, x, cluster=cluster) as out:  # the model itself is the map function
        np.testing.assert_allclose(out.gather(), model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)


def test_a_functional_model_with_two_inputs(cluster: tmr.LocalCluster) -> None:
    a, b = keras.Input((4,)), keras.Input((2,))
    model = keras.Model([a, b], keras.layers.Dense(2)(keras.layers.Concatenate()([a, b])))
    xa, xb = np.ones((50, 4), np.float32), np.arange(100, dtype=np.float32).reshape(50, 2)
    got = tmr.predict(model, (xa, xb), cluster=cluster, sizes=[20, 30])
    np.testing.assert_allclose(got, model.predict([xa, xb], verbose=0), rtol=1e-5, atol=1e-5)


def test_a_tf_module_and_its_saved_model(cluster: tmr.LocalCluster, tmp_path) -> None:
    module, x = Affine(), _rows(500)
    want = x @ module.w.numpy() + module.b.numpy()
    np.testing.assert_allclose(tmr.predict(module, x, cluster=cluster, sizes=[123, 377]), want, rtol=1e-5)
    tf.saved_model.save(module, str(tmp_path / "affine"))
    loaded = tf.saved_model.load(str(tmp_path / "affine"))
    got, stats = _run(lambda v, **o: tmr.predict(loaded, v, **o), x, cluster, sizes=[123, 377])
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert stats.weight_bytes > 0


def test_predictions_over_files_resident_data_and_in_batches(cluster: tmr.LocalCluster, tmp_path) -> None:
    model, x = _dense(), _rows(1000)
    want = model.predict(x, verbose=0)
    for i, part in enumerate(np.array_split(x, [300, 310, 700])):
        np.save(tmp_path / f"part{i}.npy", part)
    files = tmr.read_npy(str(tmp_path / "part*.npy"))
    np.testing.assert_allclose(tmr.predict(model, files, cluster=cluster, batch_rows=64), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tmr.predict(model, x, cluster=cluster, batch_rows=64), want, rtol=1e-5, atol=1e-6)
    with (
        tmr.scatter(x, cluster=cluster, sizes=SIZES) as resident,
        tmr.predict(model, resident, cluster=cluster, resident=True) as kept,
    ):
        assert isinstance(kept, tmr.Sharded)
        assert kept.plan.sizes == resident.plan.sizes
        np.testing.assert_allclose(kept.gather(), want, rtol=1e-5, atol=1e-6)
        written = tmr.write_npy(kept, str(tmp_path / "predictions"), cluster=cluster)
    back = np.concatenate([np.load(p) for p in written.parts])
    np.testing.assert_allclose(back, want, rtol=1e-5, atol=1e-6)


def test_a_map_function_that_assigns_a_variable_is_refused_naming_it(cluster: tmr.LocalCluster) -> None:
    counter = tf.Variable(0.0, name="seen")

    def counting(v: tf.Tensor) -> tf.Tensor:
        counter.assign_add(1.0)
        return v

    with pytest.raises(tmr.MapFunctionError) as error:
        tmr.map(counting, np.ones(4, np.float32), cluster=cluster)
    assert "assigns to the variable 'seen:0'" in str(error.value)
    assert "may not change them" in str(error.value)


def test_a_model_that_does_not_take_the_rows_names_both_shapes(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.MapFunctionError) as error:
        tmr.predict(_dense(), np.ones((8, 3), np.float32), cluster=cluster)
    message = str(error.value)
    assert "does not take the rows" in message
    assert "float32[None, 3]" in message
    assert "value 16" in message


def test_predict_checks_its_arguments(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(TypeError, match="model must be a callable"):
        tmr.predict("model", np.ones(3), cluster=cluster)
    with pytest.raises(TypeError, match="resident must be True"):
        tmr.predict(_dense(), np.ones((2, 16), np.float32), cluster=cluster, resident="yes")


def test_release_frees_the_copies_and_a_later_run_places_them_again(cluster: tmr.LocalCluster) -> None:
    model, x = _dense(), _rows(200)
    tmr.predict(model, x, cluster=cluster)
    assert tmr.release(model, cluster=cluster) == len(model.weights) * len({d for d in cluster.devices if "CPU" in d})
    assert tmr.release(model, cluster=cluster) == 0  # nothing left to free
    got, stats = _run(lambda v, **o: tmr.predict(model, v, **o), x, cluster)
    assert stats.weight_bytes > 0
    np.testing.assert_allclose(got, model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="cluster must be the tmr"):
        tmr.release(model, cluster="local")
    with pytest.raises(TypeError, match="model must be a Keras model"):
        tmr.release("model", cluster=cluster)


def test_variables_over_a_hosts_memory_are_refused_before_a_byte_is_sent(cluster: tmr.LocalCluster) -> None:
    from tfmapreduce._io.models import COPIES, place
    from tfmapreduce._ops.models import Use, name_of

    big, small = tf.Variable(np.zeros(1000, np.float32)), tf.Variable(np.zeros(10, np.float32))
    devices = [d for d in cluster.devices if "CPU" in d]
    uses = [Use(big, devices[-1], name_of(big)), Use(small, devices[0], name_of(small))]
    sent = cluster.state(COPIES).sent
    with pytest.raises(tmr.PlacementError, match=r"4000 bytes on .*task:1.*against 1000 bytes.*nothing was sent") as e:
        place(cluster, uses, 10.0, limit=1000)  # the knob the check's budget honours; by default the host's memory
    assert devices[-1] in str(e.value)
    assert cluster.state(COPIES).sent == sent  # nothing sent, not even the small copy that fits
    assert not {name_of(big), name_of(small)} & {name for name, _ in cluster.state(COPIES).digests}
    assert place(cluster, uses, 10.0) == 4040  # within the hosts' available memory: placed
    assert tmr.release(big, cluster=cluster) == tmr.release(small, cluster=cluster) == 1


def test_on_a_gpu_one_copy_per_gpu_and_the_same_predictions() -> None:
    """No devices=: the shards go to the GPUs where the cluster has any (``_base/place.default_devices``)."""
    if not tf.config.list_physical_devices("GPU"):
        pytest.skip("no GPU is visible to this process: the models' GPU placement is checked where one is")
    model, x = _dense(), _rows(1000)
    with tmr.LocalCluster(workers=1) as local:
        gpus = sorted(d for d in local.devices if "/device:GPU:" in d)
        got, stats = _run(lambda v, **o: tmr.predict(model, v, **o), x, local)
        assert sorted(s.device for s in stats.shards) == gpus  # by default one shard on each GPU, none on the CPU
        assert stats.weight_bytes == sum(w.numpy().nbytes for w in model.weights) * len(gpus)  # one copy per GPU
        again, stats = _run(lambda v, **o: tmr.predict(model, v, **o), x, local)
        assert stats.weight_bytes == 0
        cpu = [d for d in local.devices if "/device:CPU:" in d]
        on_cpu = tmr.predict(model, x, cluster=local, devices=cpu)
    np.testing.assert_allclose(again, got, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got, on_cpu, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, model.predict(x, verbose=0), rtol=1e-4, atol=1e-5)


def test_a_model_in_a_map_reduce_job_with_and_without_speculation(cluster: tmr.LocalCluster) -> None:
    model, x = _dense(), _rows(800)
    job = tmr.MapReduce(lambda v: tf.reduce_sum(model(v)), tmr.combiners.sum)
    want = float(model.predict(x, verbose=0).sum())
    assert float(job.run(x, cluster=cluster, sizes=[100, 700])) == pytest.approx(want, rel=1e-4)
    assert float(job.run(x, cluster=cluster, sizes=[100, 700], speculate=True)) == pytest.approx(want, rel=1e-4)


def test_copies_gone_from_a_worker_are_placed_again(cluster: tmr.LocalCluster) -> None:
    """As after a worker restart: the devices lost the copies the client thinks they hold."""
    from tfmapreduce._io.models import COPIES, _destroy

    model, x = _dense(), _rows(300)
    tmr.predict(model, x, cluster=cluster)
    graph = tf.Graph()
    with graph.as_default():
        ops = _destroy(list(cluster.state(COPIES).digests))  # freed behind the client's back
    cluster.run(graph, ops, {}, tasks=cluster.tasks, timeout=10)
    cluster.forget(graph)
    got, stats = _run(lambda v, **o: tmr.predict(model, v, **o), x, cluster)
    np.testing.assert_allclose(got, model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    assert stats.weight_bytes == sum(w.numpy().nbytes for w in model.weights) * len({s.device for s in stats.shards})


def test_predictions_over_a_table_take_the_models_named_inputs_from_its_columns(cluster: tmr.LocalCluster) -> None:
    a, b = keras.Input((1,), name="a"), keras.Input((1,), name="b")
    model = keras.Model([a, b], keras.layers.Dense(1)(keras.layers.Concatenate()([a, b])))
    ta, tb = np.arange(20.0), np.arange(20.0) ** 2
    table = tmr.table({"b": tb, "other": np.zeros(20), "a": ta})
    want = model.predict([ta.reshape(-1, 1).astype(np.float32), tb.reshape(-1, 1).astype(np.float32)], verbose=0)
    np.testing.assert_allclose(tmr.predict(model, table, cluster=cluster), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="'b' has no column"):
        tmr.predict(model, tmr.table({"a": ta}), cluster=cluster)
    with pytest.raises(TypeError, match="'a' has nulls"):
        tmr.predict(model, tmr.table({"a": np.ma.MaskedArray(ta, mask=ta > 5), "b": tb}), cluster=cluster)


def test_a_gpu_whose_memory_cannot_hold_the_copies_is_refused_naming_it(cluster: tmr.LocalCluster) -> None:
    """The decision over the devices as a task describes them: the real CPUs of the test cluster's task 1 and a GPU
    beside them (none is visible here); only a GPU's own limit is checked (a CPU's is nominal: its host's counts)."""
    from tfmapreduce._cluster.probe import device_attributes
    from tfmapreduce._io.models import check_device_memory

    task = tmr.Task("local", 1)
    described = device_attributes(cluster.address(task), task, 10.0)
    cpus = [d for d in described if d.device_type == "CPU"]
    assert [d.name for d in described] == [d for d in cluster.devices if "/task:1/" in d]
    assert cpus
    assert all(d.memory_limit_bytes > 0 for d in cpus)
    gpu = SimpleNamespace(name=cpus[0].name.replace("device:CPU:0", "device:GPU:0"), device_type="GPU", memory_limit_bytes=1000)
    devices = [*described, gpu]
    check_device_memory([(cpus[0].name, cpus[0].memory_limit_bytes + 1)], devices, {})  # not a CPU's nominal limit
    check_device_memory([(gpu.name, 600)], devices, {gpu.name: 400})  # exactly full
    check_device_memory([("/job:local/task:1/device:GPU:1", 10**9)], devices, {})  # a device not described: not asked
    with pytest.raises(tmr.PlacementError) as error:
        check_device_memory([(gpu.name, 500), ("/job:local/task:1/gpu:0", 100)], devices, {gpu.name: 401})
    message = str(error.value)
    assert f"memory of GPU {gpu.name}: 600 bytes to send and 401 bytes of copies it holds" in message
    assert "against its memory limit of 1000 bytes; nothing was sent" in message
    assert "devices=[...]" in message


def test_on_a_gpu_copies_over_its_own_memory_are_refused_naming_it() -> None:
    if not tf.config.list_physical_devices("GPU"):
        pytest.skip("no GPU is visible to this process: a GPU's own memory is checked where one is")
    from tfmapreduce._cluster.probe import device_attributes
    from tfmapreduce._io.models import check_memory

    with tmr.LocalCluster(workers=1) as local:
        gpu = next(d for d in local.devices if "/device:GPU:" in d)
        task = tmr.Task("local", 0)
        memory = next(a.memory_limit_bytes for a in device_attributes(local.address(task), task, 10.0) if a.name == gpu)
        with pytest.raises(tmr.PlacementError, match=f"memory of GPU {re.escape(gpu)}: {memory + 1} bytes to send"):
            check_memory(local, [(gpu, memory + 1)], 10.0, limit=2**62)  # the host's check passes: the GPU's refuses
        check_memory(local, [(gpu, 4096)], 10.0)


WORKER = [sys.executable, "-m", "tfmapreduce", "worker"]


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[str]]]:
    """The spec of two workers started as processes of their own (``tfmapreduce worker``): no client started them."""
    spec = {"local": [f"localhost:{port}" for port in free_ports(2)]}
    logs = tmp_path_factory.mktemp("running")
    processes: list[subprocess.Popen] = []
    try:
        for task in range(2):
            with (logs / f"task{task}.out").open("wb") as out:
                argv = [*WORKER, "--cluster", json.dumps(spec), "--job", "local", "--task", str(task), "--allow-network"]
                processes.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        deadline = time.monotonic() + 90
        for task, process in enumerate(processes):
            log = Path(logs / f"task{task}.out")
            while " ready on " not in log.read_text():
                assert process.poll() is None, f"worker {task} exited:\n{log.read_text()}"
                assert time.monotonic() < deadline, f"worker {task} not ready after 90 s"
                time.sleep(0.05)
        yield spec
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)


def _held(cluster: tmr.Cluster, copies: list[tuple[str, str]]) -> list[bool]:
    """Whether each (name, device) copy of this process's container is on its device, asked of the devices."""
    from tfmapreduce._io.models import _handle

    graph = tf.Graph()
    with graph.as_default():
        flags = []
        for name, device in copies:
            with tf.device(device):
                flags.append(tf.raw_ops.VarIsInitializedOp(resource=_handle(name, tf.float32)))
    try:
        return [bool(f) for f in cluster.run(graph, flags, {}, tasks=cluster.tasks, timeout=10)]
    finally:
        cluster.forget(graph)


def test_closing_a_client_of_running_workers_frees_its_copies_there(running: dict[str, list[str]]) -> None:
    from tfmapreduce._io.models import COPIES

    model, x = _dense(), _rows(200)
    with tmr.Cluster.from_spec(running) as client:
        np.testing.assert_allclose(tmr.predict(model, x, cluster=client), model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
        copies = sorted(client.state(COPIES).digests)
        assert len(copies) == len(model.weights) * len(client.devices)  # one of each variable on each worker
        assert _held(client, copies) == [True] * len(copies)
    assert tmr.release(model, cluster=client) == 0  # closed: nothing left to free
    with tmr.Cluster.from_spec(running) as other:  # a later client of the same workers finds none of them
        assert _held(other, copies) == [False] * len(copies)
