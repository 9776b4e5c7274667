"""client_master=True: the client's own server for the spec's ``client`` task is the master, with real workers.

TensorFlow cannot stop an in-process server, so every test that starts one runs it in a
subprocess: the suite leaves no listening port behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import tfmapreduce as tmr

SPEC = {"local": ["localhost:2222", "localhost:2223"], "client": ["localhost:2230"]}


def test_the_client_task_is_not_a_worker_and_is_off_by_default() -> None:
    cluster = tmr.Cluster.from_spec(SPEC)
    assert cluster.jobs == ("local",)
    assert cluster.tasks == (tmr.Task("local", 0), tmr.Task("local", 1))
    assert not cluster.client_master
    assert str(cluster.master) == "/job:local/task:0"
    assert cluster.target == "grpc://localhost:2222"
    assert cluster.spec == SPEC  # what the workers are started with


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ({"local": ["localhost:2222"]}, tmr.ClusterError, r"client_master=True needs the client's task .* has no 'client' job"),
        (
            {"local": ["localhost:2222"], "client": ["localhost:2230", "localhost:2231"]},
            tmr.ClusterError,
            r"has a 'client' job of 2 addresses",
        ),
        ({"client": ["localhost:2230"]}, tmr.ClusterError, r"names no worker, only the client's task 'client'"),
    ],
    ids=["no-client", "two-clients", "no-worker"],
)
def test_a_spec_without_one_client_task_is_refused(spec: dict[str, list[str]], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        tmr.Cluster.from_spec(spec, client_master=True)


def test_bad_arguments_name_client_master() -> None:
    with pytest.raises(TypeError, match=r"client_master must be True or False, got str 'yes'"):
        tmr.Cluster.from_spec(SPEC, client_master="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"client_master must be True or False, got int 1"):
        tmr.LocalCluster(1, client_master=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"job must not be 'client'"):
        tmr.LocalCluster(1, job="client")


def test_no_worker_starts_as_the_client_task() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tfmapreduce", "worker", "--cluster", json.dumps(SPEC), "--job", "client", "--task", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode != 0
    assert "job 'client' is the client's own task" in result.stderr


CLIENT = textwrap.dedent(
    """
    import json, socket
    import numpy as np, tensorflow as tf, tfmapreduce as tmr

    x = np.random.default_rng(5).random((300_000, 2))
    with tmr.LocalCluster(2, client_master=True) as local:
        assert local.client_master and str(local.master) == "/job:client/task:0", local.master
        assert all("/job:client/" not in d for d in local.devices), local.devices
        job = tmr.MapReduce(lambda t: tf.reduce_mean(t, axis=0), tmr.combiners.weighted_mean)
        plan = job.plan(x, cluster=local, sizes=[100_000, 200_000])
        assert {str(s.task) for s in plan.shards} == {"/job:local/task:0", "/job:local/task:1"}, plan
        for options in ({"transfer": "feed"}, {"transfer": "auto"}, {"speculate": True}):
            np.testing.assert_allclose(job.run(x, cluster=local, **options), x.mean(axis=0), rtol=1e-9)
        with tmr.scatter(x, cluster=local) as resident:
            np.testing.assert_allclose(tmr.mean(resident), x.mean(), rtol=1e-9)
        plain = tmr.Cluster.from_spec(local.spec)  # the same workers, their task 0 as the master
        assert not plain.client_master
        np.testing.assert_allclose(tmr.mean(x, cluster=plain), x.mean(), rtol=1e-9)
        plain.close()
        port = int(local.spec["client"][0].rpartition(":")[2])
        pids = list(local.pids)
    try:  # the client's server stops listening with its cluster (TensorFlow cannot stop the server itself)
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        listening = True
    except OSError:
        listening = False
    print(json.dumps({"port": port, "pids": pids, "listening_after_close": listening}))
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def test_the_client_as_master_gives_numpy_s_results_and_its_port_ends_with_its_cluster() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CLIENT], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["listening_after_close"] is False  # closed with its cluster, not left open until the process exits
    assert not [pid for pid in report["pids"] if _alive(pid)]
