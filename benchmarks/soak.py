"""Soak: many runs on one 2-worker LocalCluster, a worker killed and replaced every so often.

    python -m benchmarks soak                       # 10,000 runs, a worker killed every 1,000
    python -m benchmarks soak --runs 2000 --every 500

The runs cycle through shipped and resident data of several shapes and dtypes and
through mean, sum, variance and count, each checked against numpy.  Every
``--every`` runs one worker (alternately task 1 and task 0, the master) is killed
with SIGKILL; the next run must still be right (it is repeated on the survivor),
then the worker is restarted on its port (``LocalCluster.restart``).  Printed at the
start and the end: the client's and the workers' memory (VmRSS), threads, open file
descriptors and the cluster's listening ports; and the number of wrong results (0).
Not part of the test suite (it takes minutes).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import numpy as np

import tfmapreduce as tmr

from ._registry import Size, benchmark


def _proc(pid: int) -> dict[str, int]:
    status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":" in line)  # noqa: SIM115
    return {
        "rss_mb": int(status["VmRSS"].split()[0]) // 1024,
        "threads": int(status["Threads"]),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
    }


def _listening(ports: set[int]) -> int:
    found = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if os.path.exists(table):
            for line in open(table).read().splitlines()[1:]:  # noqa: SIM115
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) in ports:  # 0A: LISTEN
                    found += 1
    return found


def _snapshot(cluster: tmr.LocalCluster, label: str) -> str:
    ports = {int(address.rpartition(":")[2]) for address in cluster.spec["local"]}
    parts = [f"client {_proc(os.getpid())}"] + [f"task {i} {_proc(pid)}" for i, pid in enumerate(cluster.pids)]
    return f"{label}: " + "; ".join(parts) + f"; listening ports {_listening(ports)} of {len(ports)}"


@benchmark(
    "soak",
    sizes={"runs": Size(200, 10_000, "runs in all"), "every": Size(100, 1_000, "kill and replace a worker every N runs")},
)
def run(args: argparse.Namespace) -> int:
    """Run, kill and replace, print the snapshots and the count of wrong results; 1 where one was wrong."""
    rng = np.random.default_rng(0)
    inputs = [rng.random(n).astype(dtype) for n, dtype in ((100, np.float64), (10_000, np.float32), (100_000, np.float64))]
    inputs += [rng.integers(-1000, 1000, size=(5000, 3)).astype(np.int64)]
    recipes = [
        (tmr.mean, np.mean),
        (tmr.sum, np.sum),
        (tmr.variance, np.var),
        (tmr.count, len),
    ]
    wrong = kills = retried = 0
    started = time.monotonic()
    with tmr.LocalCluster(workers=2) as cluster:
        resident = [tmr.scatter(x, cluster=cluster) for x in inputs]
        for r, (recipe, _) in enumerate(recipes):  # warm: compile every program once
            recipe(resident[r % len(inputs)])
        print(_snapshot(cluster, "start"), flush=True)
        for i in range(args.runs):
            if i and i % args.every == 0:
                victim = kills % 2
                os.kill(cluster.pids[victim], signal.SIGKILL)
                kills += 1
                time.sleep(0.1)
            k = i % len(inputs)
            recipe, reference = recipes[i % len(recipes)]
            data = resident[k] if i % 2 else inputs[k]
            value, stats = recipe(data, cluster=None if i % 2 else cluster, return_stats=True)
            retried += stats.attempts > 1
            expected = reference(inputs[k].astype(np.float64))  # tfmapreduce accumulates in float64
            rtol = 1e-6 if inputs[k].dtype == np.float32 else 1e-9  # float32 variances square in float32
            if not np.allclose(value, expected, rtol=rtol):
                wrong += 1
                print(f"run {i}: {recipe.__name__} gave {value}, numpy {expected}", flush=True)
            if stats.lost:
                for task in stats.lost:
                    cluster.restart(task.index)
            if (i + 1) % args.every == 0:
                print(
                    f"{i + 1} runs, {time.monotonic() - started:.0f} s, {kills} kills, {retried} runs repeated, {wrong} wrong",
                    flush=True,
                )
        print(_snapshot(cluster, "end"), flush=True)
        for data in resident:
            data.delete()
    print(
        f"{args.runs} runs in {time.monotonic() - started:.0f} s; {kills} workers killed and replaced; {retried} runs repeated; {wrong} wrong results"
    )
    return 1 if wrong else 0


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["soak", *sys.argv[1:]]))
