"""A run's TensorFlow step stats as a Chrome/Perfetto trace: one process per task, one thread per device.

TensorFlow records, for a run made with ``trace_level=FULL_TRACE``, every op each device ran (start and
duration, on that task's clock) in the run's ``RunMetadata.step_stats``; every task reports its own.  The
trace is the `Trace Event Format <https://ui.perfetto.dev>`_'s JSON object: ``{"traceEvents": [...]}``,
one complete ("X") event per op, named after the op's node (its name scope says which part of the job it is:
``map``, ``bucket_task``, ``send0``, ``reducer0``, ...), with the op type and the device in its ``args``.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

_DEVICE = re.compile(r"^(?P<task>/job:[^/]+(?:/replica:\d+)?/task:\d+)(?:/device:(?P<device>.+))?$")


def events(step_stats: Any) -> list[dict[str, Any]]:
    """The trace events of ``step_stats`` (a ``tensorflow.StepStats``): names of each task and device, then each op.

    Example:
        >>> from tensorflow.core.framework import step_stats_pb2
        >>> stats = step_stats_pb2.StepStats()
        >>> device = stats.dev_stats.add(device="/job:local/replica:0/task:1/device:CPU:0")
        >>> _ = device.node_stats.add(node_name="map/Sum", all_start_micros=10, all_end_rel_micros=5, timeline_label="Sum")
        >>> [(e["ph"], e["name"]) for e in events(stats)]
        [('M', 'process_name'), ('M', 'thread_name'), ('X', 'map/Sum')]
    """
    tasks: dict[str, int] = {}
    devices: dict[str, int] = {}
    out: list[dict[str, Any]] = []
    for dev in step_stats.dev_stats:
        match = _DEVICE.match(dev.device)
        task, device = (match["task"], match["device"] or dev.device) if match else (dev.device, dev.device)
        task = task.replace("/replica:0", "")
        if task not in tasks:
            tasks[task] = len(tasks)
            out.append({"ph": "M", "name": "process_name", "pid": tasks[task], "args": {"name": task}})
        pid = tasks[task]
        if dev.device not in devices:
            devices[dev.device] = len(devices)
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": devices[dev.device], "args": {"name": device}})
        tid = devices[dev.device]
        for node in dev.node_stats:
            op = node.timeline_label.split(" = ")[-1].split("(")[0] if node.timeline_label else node.node_name
            out.append(
                {
                    "ph": "X",
                    "name": node.node_name,
                    "pid": pid,
                    "tid": tid,
                    "ts": node.all_start_micros,
                    "dur": max(node.all_end_rel_micros, 1),
                    "args": {"op": op, "device": dev.device},
                }
            )
    return out


def write(path: str | os.PathLike[str], step_stats: Any) -> None:
    """Write the trace of ``step_stats`` to ``path`` (JSON; open it in Perfetto or ``chrome://tracing``).

    Raises:
        OSError: ``path`` cannot be written (named, with the reason).
    """
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"traceEvents": events(step_stats), "displayTimeUnit": "ms"}, f)
    except OSError as e:
        raise OSError(
            e.errno,
            f"trace={os.fspath(path)!r}: the run's trace cannot be written there ({e.strerror}); pass a "
            "path in a folder you can write to",
        ) from None
