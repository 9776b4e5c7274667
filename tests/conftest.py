"""The hypothesis profiles, the check after each test that the session cluster lost no worker, the spilling tests' fixtures,
``steps_on_workers`` and ``steps_placed`` (the session cluster fixture itself lives in the repository's root conftest.py).

Hypothesis profiles: ``ci`` (fast, derandomized; the default, and what CI uses) and
``thorough`` (many more examples), chosen with ``HYPOTHESIS_PROFILE=thorough``.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import tfmapreduce as tmr
from tfmapreduce._query import client_steps

# Distributed runs take milliseconds to seconds, so no per-example deadline in either profile.
settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "ci")


def _gone(pid: int) -> str | None:
    """Why worker ``pid`` cannot serve the next test (exited, a zombie, stopped), or None while it runs."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "exited"
    except OSError:  # no /proc here: only whether it exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return "exited"
        return None
    return {"Z": "exited", "X": "exited", "T": "stopped", "t": "stopped"}.get(state)


@pytest.fixture(autouse=True)
def _session_cluster_keeps_its_workers(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that used the session ``cluster``: every worker process still runs (not exited, not stopped), so a
    test that broke the shared cluster fails itself instead of the tests after it (it should use a cluster of its own).
    A task marked lost is not checked here: a loaded machine may make a run leave a slow task out (``cluster.lost``)."""
    yield
    if "cluster" not in request.fixturenames:
        return
    cluster = request.getfixturevalue("cluster")
    if not isinstance(cluster, tmr.LocalCluster) or cluster.closed:  # a module's own cluster (a rack's): its own checks
        return
    broken = [f"task {i} (pid {pid}) {why}" for i, pid in enumerate(cluster.pids) if (why := _gone(pid))]
    assert not broken, f"this test broke the session cluster: {', '.join(broken)}; give it a LocalCluster of its own"


@pytest.fixture
def steps_on_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lazy query's sorts and row-wise steps run on the workers however few rows they take (``CLIENT_ROWS`` 0): for
    a test of the distributed path over small tables."""
    monkeypatch.setattr(client_steps, "CLIENT_ROWS", 0)


@pytest.fixture(params=["workers", "client"])
def steps_placed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test twice: a lazy query's small steps in runs on the workers (``CLIENT_ROWS`` 0), then on the client."""
    if request.param == "workers":
        monkeypatch.setattr(client_steps, "CLIENT_ROWS", 0)


@pytest.fixture
def spill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder the spilled runs spill under (the client's temporary directory), for a test to check empty."""
    folder = tmp_path / "spill"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def spilled_parts(caplog: pytest.LogCaptureFixture) -> Callable[[], int]:
    """The last spilled run's sub-partitions per reducer, from its log line (capture INFO on ``tfmapreduce.spill``)."""

    def parts() -> int:
        found = [re.search(r"(\d+) sub-partition\(s\) per reducer", r.getMessage()) for r in caplog.records]
        return int(next(f for f in reversed(found) if f is not None).group(1))

    return parts
