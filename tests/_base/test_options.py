"""Run options: one validated value behind every job's and recipe's keywords, and deadline scopes."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr
from tfmapreduce._base import deadline as _deadline
from tfmapreduce._base.deadline import effective_timeout


def test_the_keywords_users_type_become_one_value() -> None:
    options = tmr.RunOptions.of(sizes=[30, 70], devices=["/job:local/task:1"], fallback="cpu", timeout=np.float32(2.5))
    assert options == tmr.RunOptions(sizes=[30, 70], devices=["/job:local/task:1"], fallback="cpu", timeout=2.5)
    assert tmr.RunOptions.of() == tmr.RunOptions()


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (
            {"sise": 3},
            TypeError,
            "unknown run option sise=3 (did you mean sizes?); the options are cluster, sizes, devices, fallback, timeout, reducers, batch_rows, retries",
        ),
        ({"cluster": "grpc://localhost:2222"}, TypeError, "cluster must be a tfmapreduce Cluster"),
        ({"devices": "/job:local/task:0"}, TypeError, "devices must be a list of device strings"),
        ({"fallback": "gpu"}, ValueError, "fallback must be None or 'cpu', got 'gpu'"),
        ({"timeout": 0}, ValueError, "timeout must be a positive, finite number of seconds"),
        ({"timeout": 1e300}, ValueError, "at most a year"),
        ({"timeout": float("nan")}, ValueError, "timeout must be a positive"),
        ({"timeout": "5"}, TypeError, "timeout must be a number of seconds, got str '5'"),
        ({"timeout": True}, TypeError, "timeout must be a number of seconds, got bool"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        tmr.RunOptions.of(**options)


def test_recipes_and_jobs_refuse_an_unknown_option_before_anything_runs() -> None:
    with pytest.raises(TypeError, match="unknown run option sise=2"):
        tmr.mean(np.arange(4.0), sise=2)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="unknown run option retry=1"):
        tmr.MapReduce(lambda t: t, tmr.combiners.sum).run(np.arange(4.0), retry=1)  # type: ignore[call-overload]


def test_remembered_options_still_check_their_values() -> None:
    assert tmr.RunOptions.of(retries=1, timeout=2) is tmr.RunOptions.of(retries=1, timeout=2)
    for bad in (True, 1.0):  # equal to 1 as keys go, refused as retries
        with pytest.raises((TypeError, ValueError), match="retries must be"):
            tmr.RunOptions.of(retries=bad, timeout=2)
    assert tmr.RunOptions.of(sizes=[1, 2]).sizes == [1, 2]  # unhashable: validated each time


def test_options_are_frozen() -> None:
    options = tmr.RunOptions.of(timeout=3)
    with pytest.raises(AttributeError):
        options.timeout = 4  # type: ignore[misc]


def test_a_deadline_scope_bounds_every_run_inside_and_nests() -> None:
    assert effective_timeout(None) == tmr.get_timeout()
    with tmr.deadline(30):
        assert 29 < effective_timeout(None) <= 30
        assert effective_timeout(5) == 5  # a shorter timeout still wins
        with tmr.deadline(100):  # the outer, earlier deadline still applies
            assert effective_timeout(None) <= 30
        with tmr.deadline(2):
            assert effective_timeout(None) <= 2
        assert 2 < effective_timeout(None) <= 30  # restored on exit
    assert effective_timeout(None) == tmr.get_timeout()


def test_a_scope_is_restored_when_its_block_raises() -> None:
    with pytest.raises(RuntimeError), tmr.deadline(1):
        raise RuntimeError("boom")
    assert effective_timeout(None) == tmr.get_timeout()


def test_a_call_after_the_scope_expired_raises_before_running() -> None:
    with tmr.deadline(0.05):
        time.sleep(0.1)
        with pytest.raises(tmr.WorkerTimeoutError, match="deadline\\(\\) scope\\) expired"):
            effective_timeout(None)


def _waits_forever(t: tf.Tensor) -> tf.Tensor:
    return tf.queue.FIFOQueue(1, tf.float64).dequeue() + tf.reduce_sum(t)  # never gets an element, uses no CPU


@pytest.mark.alone  # the run must end within its scope + 2 s
def test_a_deadline_scope_bounds_a_real_run(cluster: tmr.LocalCluster) -> None:
    stuck = tmr.MapReduce(_waits_forever, tmr.combiners.sum)
    started = time.monotonic()
    with pytest.raises(tmr.WorkerTimeoutError), tmr.deadline(1.5):
        stuck.run(np.ones(4), cluster=cluster, timeout=30)
    assert time.monotonic() - started < 1.5 + 2  # the scope, not timeout=30, ended it (the culprit probe included)


def test_the_default_deadline_grows_with_the_rows_of_a_run() -> None:
    # Issue 38: a flat 60 s default stopped a 2e7-row two-string-key table group-by on a loaded machine.
    assert _deadline.default_timeout(0) == _deadline.default_timeout(1_500_000) == 60.0
    assert _deadline.default_timeout(20_000_000) == 800.0  # 40 µs a row above 1.5 million rows
    assert _deadline.default_timeout(10**9) == 900.0  # a gigabyte of text: at most 15 minutes unless timeout= says more
    with _deadline.sized(20_000_000):
        assert effective_timeout(None) == 800.0
        assert effective_timeout(5) == 5.0  # timeout= is the caller's word
        with tmr.deadline(100):
            assert effective_timeout(None) <= 100  # an enclosing deadline still bounds it
    tmr.set_timeout(45)
    try:
        assert _deadline.default_timeout(20_000_000) == 45.0  # what set_timeout sets holds for every size
    finally:
        tmr.set_timeout(None)
    assert tmr.get_timeout() == 60.0


def test_a_run_without_timeout_gets_the_default_of_its_rows(cluster: tmr.LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_deadline, "ROWS_PER_SECOND", 0.02)  # 10 rows: 500 s, as 1.25e7 rows get
    seen: list[float] = []
    run = type(cluster).run

    def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["timeout"])
        return run(self, *args, **kwargs)

    monkeypatch.setattr(type(cluster), "run", recorded)
    assert tmr.sum(np.arange(10), cluster=cluster) == 45
    assert seen
    assert max(seen) > 400, seen  # the job ran under the sized deadline, not 60 s
    seen.clear()
    assert tmr.sum(np.arange(10), cluster=cluster, timeout=30) == 45
    assert seen
    assert max(seen) <= 30, seen


def test_bad_deadline_and_default_timeouts() -> None:
    with pytest.raises(ValueError, match="seconds must be a positive"):
        tmr.set_timeout(-1)
    with pytest.raises(TypeError, match="seconds must be a number of seconds"), tmr.deadline("soon"):  # type: ignore[arg-type]
        pass
    tmr.set_timeout(np.int64(45))
    try:
        assert tmr.get_timeout() == 45.0
    finally:
        tmr.set_timeout(None)


def test_calls_that_place_data_take_the_placement_keywords_only(cluster: tmr.LocalCluster, tmp_path: Any) -> None:
    with pytest.raises(TypeError, match=r"scatter\(\) takes cluster, sizes, devices, fallback, timeout; reducers=2 does not"):
        tmr.scatter(np.zeros(4), cluster=cluster, reducers=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"generate\(\) takes .*; retries=0, speculate=True do not apply"):
        tmr.generate(lambda a, b: tf.range(a, b), rows=4, cluster=cluster, retries=0, speculate=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"scatter\(\) needs cluster="):
        tmr.scatter(np.zeros(4))
    with pytest.raises(ValueError, match="fallback must be None or 'cpu'"):
        tmr.scatter(np.zeros(4), cluster=cluster, fallback="gpu")
    tmr.save_shards(np.arange(6.0), tmp_path, sizes=[2, 4])
    with pytest.raises(TypeError, match=r"load_shards\(\) takes cluster, devices, fallback, timeout; sizes=\[3, 3\] does not"):
        tmr.load_shards(tmp_path, cluster=cluster, sizes=[3, 3])
    with tmr.load_shards(tmp_path, cluster=cluster, timeout=30) as loaded:
        assert loaded.plan.sizes == (2, 4)
    np.save(tmp_path / "x.npy", np.arange(6.0))
    with pytest.raises(TypeError, match=r"persist\(\) takes cluster, sizes, devices, fallback, timeout; batch_rows=2 does not"):
        tmr.read_npy(str(tmp_path / "x.npy")).persist(cluster=cluster, batch_rows=2)  # type: ignore[call-arg]
