"""The fault table: each fault injected into a fresh 2-worker LocalCluster, its outcome and how long it took.

``python -m benchmarks faults``: each case kills (SIGKILL) or stops (SIGSTOP) one worker at a given moment and runs
``tmr.mean`` of ``--rows`` shipped float64 numbers (or of resident data).  The outcome is the
right answer (checked against numpy), or the named error; the time is from the call to
its return.  Loopback only; every worker is stopped at the end of its case.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable

import numpy as np

import tfmapreduce as tmr

from ._registry import Size, benchmark


def _outcome(call: Callable[[], object], x: np.ndarray) -> tuple[str, float]:
    started = time.monotonic()
    try:
        value = call()
        ok = np.isclose(float(value[0] if isinstance(value, tuple) else value), x.mean(), rtol=1e-12)  # type: ignore[arg-type, index]
        text = "right answer" if ok else f"WRONG ANSWER {value}"
        if isinstance(value, tuple):
            stats = value[1]
            text += f" (attempts {stats.attempts}, lost {', '.join(map(str, stats.lost)) or 'none'})"
    except tmr.TfMapReduceError as e:
        task = getattr(e, "task", None)
        text = f"{type(e).__name__} naming {task}" if task is not None else f"{type(e).__name__}: {str(e)[:60]}"
    return text, time.monotonic() - started


def _case(
    x: np.ndarray,
    name: str,
    fault: Callable[[tmr.LocalCluster], None],
    call: Callable[[tmr.LocalCluster, object], object],
    resident: bool = False,
) -> str:
    with tmr.LocalCluster(workers=2) as cluster:
        data: object = tmr.scatter(x, cluster=cluster) if resident else x
        tmr.mean(data, cluster=None if resident else cluster)  # sessions and graphs exist: the fault hits a warm cluster
        fault(cluster)
        try:
            text, seconds = _outcome(lambda: call(cluster, data), x)
        finally:
            for pid in cluster.pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
    return f"| {name} | {text} | {seconds:.2f} s |"


def _kill(task: int) -> Callable[[tmr.LocalCluster], None]:
    def fault(cluster: tmr.LocalCluster) -> None:
        os.kill(cluster.pids[task], signal.SIGKILL)
        time.sleep(0.1)

    return fault


def _stop(task: int) -> Callable[[tmr.LocalCluster], None]:
    return lambda cluster: os.kill(cluster.pids[task], signal.SIGSTOP)


def _mean(**options: object) -> Callable[[tmr.LocalCluster, object], object]:
    def call(cluster: tmr.LocalCluster, data: object) -> object:
        where = {} if isinstance(data, tmr.Sharded) else {"cluster": cluster}
        return tmr.mean(data, return_stats=True, **where, **options)  # type: ignore[call-overload]

    return call


@benchmark("faults", sizes={"rows": Size(1e5, 1e6, "float64 numbers of each case's tmr.mean")})
def run(args: argparse.Namespace) -> int:
    """Run every case, one fresh cluster each, and print the table."""
    x = np.random.default_rng(0).random(int(args.rows))
    rows = [
        "| fault (2-worker LocalCluster, warm) | outcome | time |",
        "|---|---|---|",
        _case(x, "task 1 killed, retries=0", _kill(1), _mean(retries=0, timeout=10)),
        _case(x, "task 0 (the master) killed, retries=0", _kill(0), _mean(retries=0, timeout=10)),
        _case(x, "task 1 killed, retries=2 (default)", _kill(1), _mean(timeout=10)),
        _case(x, "task 0 (the master) killed, retries=2", _kill(0), _mean(timeout=10)),
        _case(x, "task 1 stopped, timeout=5, retries=0", _stop(1), _mean(retries=0, timeout=5)),
        _case(x, "task 1 stopped, timeout=10, retries=2", _stop(1), _mean(timeout=10)),
        _case(x, "task 0 stopped, timeout=5, retries=0", _stop(0), _mean(retries=0, timeout=5)),
        _case(x, "resident data, task 1 killed, retries=2", _kill(1), _mean(timeout=10), resident=True),
    ]
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["faults", *sys.argv[1:]]))
