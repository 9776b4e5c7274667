"""One TensorFlow release across the cluster: what workers report, and the client's comparison."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
import tensorflow as tf
from ports import free_port

import tfmapreduce as tmr
from tfmapreduce._base.task import Task
from tfmapreduce._cluster.versions import compare, read

T0, T1, T2 = Task("local", 0), Task("local", 1), Task("local", 2)


def test_compare_passes_equal_versions_and_returns_the_silent_tasks() -> None:
    assert compare("2.21.0", {T0: "2.21.0", T1: "2.21.0"}) == ()
    assert compare("2.21.0", {T0: "2.21.0", T1: None}) == (T1,)


def test_compare_names_every_task_that_differs_its_version_and_the_fix() -> None:
    with pytest.raises(tmr.ClusterError) as error:
        compare("2.21.0", {T0: "2.21.0", T1: "2.22.0", T2: "2.21.1"})
    message = str(error.value)
    assert message.startswith(
        "the cluster runs another TensorFlow than this client (2.21.0): /job:local/task:1 runs 2.22.0, /job:local/task:2 runs 2.21.1;"
    )
    assert "/job:local/task:0" not in message
    assert "install tensorflow==2.21.0" in message


def test_every_worker_reports_its_own_tensorflow_and_a_matching_cluster_passes(cluster: tmr.LocalCluster) -> None:
    for task in cluster.tasks:
        assert read(cluster.address(task), task, timeout=10.0) == tf.__version__
    fresh = tmr.Cluster.from_spec(cluster.spec)  # a new client object: its first devices probe runs the check
    try:
        assert fresh.devices == cluster.devices
    finally:
        fresh.close()


@pytest.fixture(scope="module")
def plain_server() -> Iterator[str]:
    """A tf.distribute.Server started by other code than `tfmapreduce worker`: it publishes no version."""
    address = f"localhost:{free_port()}"
    code = textwrap.dedent(
        f"""
        import tensorflow as tf
        server = tf.distribute.Server({{"local": ["{address}"]}}, job_name="local", task_index=0)
        print("up", flush=True)
        server.join()
        """
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "up"  # the server listens once it prints
        yield address
    finally:
        process.kill()
        process.wait(timeout=10)


def test_a_server_that_reports_nothing_is_warned_about_not_refused(plain_server: str, caplog: pytest.LogCaptureFixture) -> None:
    assert read(plain_server, T0, timeout=10.0) is None
    with caplog.at_level(logging.WARNING, logger="tfmapreduce.cluster"), tmr.Cluster.from_spec({"local": [plain_server]}) as c:
        assert c.devices == ("/job:local/replica:0/task:0/device:CPU:0",)
    assert [r.getMessage() for r in caplog.records] == [
        f"cannot check which TensorFlow /job:local/task:0 runs (not started with 'tfmapreduce worker'); this client runs "
        f"{tf.__version__}, and a graph may fail on another release"
    ]
