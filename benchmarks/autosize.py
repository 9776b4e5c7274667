"""sizes="auto" vs even shards, with one worker slowed and with equal workers.

``python -m benchmarks autosize``: on one 2-worker ``LocalCluster`` (one CPU device per worker; task i pinned to core i with
``os.sched_setaffinity`` unless ``--no-pin``, so the workers behave like two machines), a compute-bound job over
shipped float32 rows (``sum(sin(x) * cos(x))`` per column) runs with even shards and with
``sizes="auto"``, interleaved round by round.  Three scenarios, each with its own job (so
each starts with no recorded speeds):

- **slowed**: task 1's worker process is throttled by :class:`Throttle`, a thread that
  sends it SIGSTOP and SIGCONT in a fixed duty cycle (stopped ``--stopped`` of every
  ``--period`` seconds), reproducibly slower whatever else the machine does;
- **equal**: no throttle;
- **recovery**: task 1 slowed ~20x for the first run of a fresh job only, then healthy: its
  share of the rows after each run (back toward even, since its small shard is timed too).

``sizes="auto"`` first runs ``--warmup`` times (its first run is even and measures; the
later ones adapt).  Every result is checked against numpy (float64) first.  Prints a
Markdown table (makespan = wall time of one ``job.run``: median [min-max] over the
rounds) and the per-round ratios even / auto.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import numpy as np

from ._registry import PLOT, Size, benchmark, flag


class Throttle:
    """Slow a process down reproducibly: SIGSTOP for ``stopped`` of every ``period`` seconds, from a thread.

    The process runs at most ``1 - stopped / period`` of the wall time, whatever the load of the
    machine: a running phase that lasts longer than ``period - stopped`` (this thread woke late) is
    followed by a stopped phase as much longer, but no longer than ``longest`` seconds (a run's liveness
    probes declare a worker silent for 2 s stopped).  On exit (and if the process is gone) it is left
    running (SIGCONT).

    Example:
        >>> import subprocess, sys
        >>> child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
        >>> with Throttle(child.pid, stopped=0.01, period=0.02):
        ...     time.sleep(0.1)
        >>> child.wait(timeout=5)
        0
    """

    def __init__(self, pid: int, *, stopped: float = 0.03, period: float = 0.04, longest: float = math.inf):
        if not 0 < stopped < period:
            raise ValueError(f"stopped must be > 0 and < period ({period}), got {stopped}")
        self.pid, self.stopped, self.period, self.longest = pid, stopped, period, longest
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._cycle, name=f"throttle-{pid}", daemon=True)

    def _cycle(self) -> None:
        running = self.period - self.stopped
        ran = running
        try:
            while not self._done.is_set():
                os.kill(self.pid, signal.SIGSTOP)
                try:
                    self._done.wait(min(self.stopped * ran / running, self.longest))
                finally:
                    os.kill(self.pid, signal.SIGCONT)
                began = time.monotonic()
                self._done.wait(running)
                ran = max(running, time.monotonic() - began)
        except ProcessLookupError:  # the process is gone: nothing left to throttle
            return

    def __enter__(self) -> Throttle:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._done.set()
        self._thread.join()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGCONT)


def pin(pid: int, cores: set[int]) -> None:
    """Run every thread of process ``pid`` on ``cores`` only (threads it starts later inherit it)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError, FileNotFoundError):  # a thread that just ended
            os.sched_setaffinity(int(tid), cores)


FLAGS = (
    flag("--stopped", type=float, default=0.03, help="seconds task 1 is stopped per period (default 0.03)"),
    flag("--period", type=float, default=0.04, help="seconds of one throttle cycle (default 0.04)"),
    flag(
        "--no-pin",
        action="store_true",
        help="leave the workers on every core (default: task i pinned to core i, so the throttled worker does not "
        "hand its core to the other one, as separate machines would not)",
    ),
    PLOT,
)


def _job() -> Any:
    """A fresh job (its own identity, so no speeds recorded yet): per-column sum of sin(x)·cos(x)."""
    import tensorflow as tf

    import tfmapreduce as tmr

    def sin_cos(t: Any) -> Any:
        t = tf.cast(t, tf.float64)
        return tf.reduce_sum(tf.sin(t) * tf.cos(t), axis=0)

    return tmr.MapReduce(sin_cos, tmr.combiners.sum)


def _scenario(
    cluster: Any, x: np.ndarray[Any, Any], expected: np.ndarray[Any, Any], warmup: int, repeats: int
) -> tuple[dict[str, list[float]], str, list[str]]:
    from ._timing import interleaved

    job = _job()
    wrong: list[str] = []
    for _ in range(warmup):  # retries=0: no hang check, which may take a throttled task for a hung one
        job.run(x, cluster=cluster, sizes="auto", retries=0)
    impls: dict[str, Callable[[], Any]] = {
        "even": lambda: job.run(x, cluster=cluster, retries=0),
        "auto": lambda: job.run(x, cluster=cluster, sizes="auto", retries=0),
    }
    values, raw = interleaved(impls, warmup=1, repeats=repeats)
    for name, value in values.items():
        if not np.allclose(value, expected, rtol=1e-4):
            wrong.append(f"{name}: {value} != numpy {expected}")
    return raw, str(job.plan(x, cluster=cluster, sizes="auto")), wrong


def _recovery(cluster: Any, x: np.ndarray[Any, Any], slow: int, stopped: float, period: float, runs: int) -> list[float]:
    """Task 1's share of the rows, planned after each of ``runs`` healthy runs that follow one run with task 1 slowed.

    At most 4e5 rows (a 5% shard takes a few ms), and no hang check in the slowed run (``retries=0``): the scenario is
    about task 1's recovery, not its loss.
    """
    x = x[:400_000]
    job = _job()
    with Throttle(slow, stopped=stopped, period=period):
        job.run(x, cluster=cluster, sizes="auto", retries=0)  # the job's first run: measured slow on task 1
    shares = [job.plan(x, cluster=cluster, sizes="auto").sizes[1] / len(x)]
    for _ in range(runs):
        job.run(x, cluster=cluster, sizes="auto")
        shares.append(job.plan(x, cluster=cluster, sizes="auto").sizes[1] / len(x))
    return shares


@benchmark(
    "autosize",
    sizes={
        "rows": Size(4e5, 4e6, "rows of 4 float32 (4e6: 64 MB)"),
        "warmup": Size(3, 8, "sizes='auto' runs before timing"),
        "repeats": Size(3, 15, "timed rounds per scenario"),
    },
    flags=FLAGS,
)
def run(args: argparse.Namespace) -> int:
    """Measure and print the table, the ratios and the recovery; 1 where a result was wrong."""
    started = time.perf_counter()
    rows, warmup, repeats = int(args.rows), args.warmup, args.repeats
    import tfmapreduce as tmr

    x = np.random.default_rng(0).random((rows, 4), dtype=np.float32)
    x64 = x.astype(np.float64)
    expected = np.sum(np.sin(x64) * np.cos(x64), axis=0)
    results: dict[str, dict[str, list[float]]] = {}
    wrong: list[str] = []
    with tmr.LocalCluster(2, cpu_devices=1) as cluster:
        # Connect to both tasks before throttling: a first gRPC contact with a stopped process backs off for seconds.
        tmr.sum(x[:10], cluster=cluster)
        cores = sorted(os.sched_getaffinity(0))
        pinned = not args.no_pin and len(cores) >= 2
        if pinned:
            for i, pid in enumerate(cluster.pids):
                pin(pid, {cores[i]})
        slow = cluster.pids[1]
        with Throttle(slow, stopped=args.stopped, period=args.period):
            results["slowed"], plan, bad = _scenario(cluster, x, expected, warmup, repeats)
        wrong += bad
        print(
            f"slowed (task 1 stopped {args.stopped:g} s of every {args.period:g} s), last auto plan:\n{plan}\n", file=sys.stderr
        )
        results["equal"], plan, bad = _scenario(cluster, x, expected, warmup, repeats)
        wrong += bad
        print(f"equal, last auto plan:\n{plan}\n", file=sys.stderr)
        recovery = _recovery(cluster, x, slow, 0.2, 0.21, 5)

    print(
        f"sum(sin(x)·cos(x)) over {rows:.0e} × 4 float32 ({x.nbytes / 1e6:.0f} MB, shipped) on a 2-worker LocalCluster "
        f"({'each worker pinned to its own core' if pinned else 'workers on every core'}), "
        f"{repeats} interleaved rounds after {warmup} sizes='auto' runs; task 1 throttled by SIGSTOP/SIGCONT "
        f"({args.stopped:g} s of every {args.period:g} s) in the slowed scenario\n"
    )
    print("| scenario | even shards, ms | sizes='auto', ms | even / auto (per round) |\n|---|---|---|---|")
    for name, raw in results.items():
        cells = [f"{np.median(raw[k]) * 1e3:.1f} [{min(raw[k]) * 1e3:.1f}–{max(raw[k]) * 1e3:.1f}]" for k in ("even", "auto")]
        r = [a / b for a, b in zip(raw["even"], raw["auto"], strict=True)]
        print(f"| {name} | {cells[0]} | {cells[1]} | ×{np.median(r):.2f} [{min(r):.2f}–{max(r):.2f}] |")
    shares = " → ".join(f"{share:.0%}" for share in recovery)
    print(
        f"\nrecovery: task 1 slowed ~20x (SIGSTOP 0.2 s of every 0.21 s) for a job's first run, then healthy: "
        f"its share of the rows after that run and each of 5 more: {shares}"
    )
    if args.plot:
        from ._plots import bar_chart

        titles = {"slowed": f"task 1 slowed (stopped {args.stopped:g} s of every {args.period:g} s)", "equal": "equal workers"}
        labels = {"even": "tmr, even shards", "auto": "tmr, sizes='auto'"}
        panels = [(titles[name], [(labels[k], [t * 1e3 for t in raw[k]]) for k in labels]) for name, raw in results.items()]
        bar_chart(panels, args.plot, unit="ms")
    for line in wrong:
        print(f"WRONG: {line}")
    print(f"\n({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["autosize", *sys.argv[1:]]))
