"""trace=: a run's TensorFlow step stats written as Chrome/Perfetto trace JSON, one track per task and device."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tfmapreduce as tmr
from benchmarks._plots import trace_timeline


def _events(path: Path) -> list[dict[str, Any]]:
    trace = json.loads(path.read_text())
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def test_a_keyed_and_a_whole_input_run_leave_events_of_every_task(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    keys = np.arange(1000) % 7
    path = tmp_path / "keyed.json"
    counts = tmr.count_by_key(keys, cluster=cluster, trace=path)
    assert counts.to_dict() == {k: int((keys == k).sum()) for k in range(7)}
    events = _events(path)
    tasks = {e["args"]["device"].split("/device:")[0] for e in events}
    assert tasks == {"/job:local/replica:0/task:0", "/job:local/replica:0/task:1"}
    assert all(e["dur"] >= 1 and e["ts"] > 0 for e in events)
    assert any(e["name"].startswith("reducer") for e in events)  # its name scopes say which part of the job ran
    trace_timeline(json.loads(path.read_text()), str(tmp_path / "timeline.png"), "count_by_key")  # drawn as the docs show it
    assert (tmp_path / "timeline.png").stat().st_size > 1000
    names = {e["args"]["name"] for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "M"}
    assert {"/job:local/task:0", "/job:local/task:1", "CPU:0"} <= names

    whole = tmp_path / "mean.json"
    assert tmr.mean(np.arange(100.0), cluster=cluster, sizes=[40, 60], trace=str(whole)) == 49.5
    assert {e["pid"] for e in _events(whole)} == {0, 1}


def test_bad_trace_arguments_are_named(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(TypeError, match="trace must be None or a file path"):
        tmr.mean(np.arange(4.0), cluster=cluster, trace=3)
    with pytest.raises(OSError, match=re.escape("trace='/nonexistent/t.json': the run's trace cannot be written there")):
        tmr.mean(np.arange(4.0), cluster=cluster, trace="/nonexistent/t.json")
    with pytest.raises(ValueError, match="speculate=True makes a run per shard"):
        tmr.mean(np.arange(4.0), cluster=cluster, trace="t.json", speculate=True)
