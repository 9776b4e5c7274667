"""The benchmark run: each family of cases over its layouts, one LocalCluster per group of layouts, then start-up.

Example::

    results = run(QUICK, print)  # the dict _report.write turns into results.json and results.md
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import tfmapreduce as tmr

from . import _families, _timing
from ._bench import Bench
from ._config import Config, Layout


def run(config: Config, log: Callable[[str], None]) -> dict[str, Any]:
    """Measure every case ``config`` covers; the results (cases, clusters, start-up, notes, errors, meta)."""
    started = time.perf_counter()
    bench = Bench(config, log)
    bench.results["meta"] = {**_meta(config), "load_before": _load()}
    if "kmeans" in config.jobs:
        bench.note(
            "k-means: 'tmr' is tmr.recipes.kmeans(iters=1), which scatters shipped (host) input for the call and frees it "
            "after, so each call ships the data; 'tmr-job' is one MapReduce run with broadcast centroids"
        )
    if not config.peers:
        bench.note("peers (Dask, Ray) not run: " + ("quick mode" if config.mode == "quick" else "--no-peers"))
    if "local" in config.layouts:
        _families.local(bench, config.layout("local"))
    groups: dict[tuple[int, int], list[Layout]] = {}
    for layout in map(config.layout, config.layouts):
        if layout.cluster_key is not None:
            groups.setdefault(layout.cluster_key, []).append(layout)
    for (workers, cpus), layouts in groups.items():
        with _cluster(bench, workers, cpus) as cluster:
            for layout in layouts:
                family = _families.sweep if layout.name == "sweep" else _families.layout
                family(bench, layout, cluster)
                if layout.name == "2w-even" and {"dask-distributed", "ray"} & set(config.peers):
                    _families.layout_peers(bench, layout, cluster)
    _startup(bench)
    bench.results["meta"].update(load_after=_load(), seconds=time.perf_counter() - started)
    return bench.results


@contextlib.contextmanager
def _cluster(bench: Bench, workers: int, cpus: int) -> Iterator[tmr.LocalCluster]:
    """A LocalCluster for one group of layouts; its start is timed and its workers checked gone after."""
    started = time.perf_counter()
    with tmr.LocalCluster(workers, cpu_devices=cpus, startup_timeout=120) as cluster:
        ready = time.perf_counter() - started
        entry = {"workers": workers, "cpu_devices": cpus, "ready_s": ready, "pids": list(cluster.pids)}
        bench.results["clusters"].append(entry)
        bench.log(f"LocalCluster({workers}, cpu_devices={cpus}) ready in {ready:.2f} s")
        yield cluster
    entry["leftover_pids"] = _wait_gone(entry["pids"])
    if entry["leftover_pids"]:
        error = RuntimeError(f"workers {entry['leftover_pids']} outlived close()")
        bench.error(f"LocalCluster({workers}, cpu_devices={cpus})", "tmr", error)


def _startup(bench: Bench) -> None:
    """LocalCluster(2) from the call to ready: ``startup_repeats`` dedicated starts, else the run's own starts."""
    samples, first_job = [], []
    for _ in range(bench.config.startup_repeats):
        started = time.perf_counter()
        with tmr.LocalCluster(2) as cluster:
            samples.append(time.perf_counter() - started)
            pids = cluster.pids
            started = time.perf_counter()
            tmr.mean(np.arange(100, dtype=np.float32), cluster=cluster)
            first_job.append(time.perf_counter() - started)
        if leftover := _wait_gone(pids):
            bench.error("startup", "tmr", RuntimeError(f"workers {leftover} outlived close()"))
    source = "dedicated starts"
    if not samples:
        samples = [c["ready_s"] for c in bench.results["clusters"] if c["workers"] == 2]
        source = "the run's own LocalCluster(2) starts"
    if samples:
        first = _timing.summary(first_job) if first_job else None
        bench.results["startup"] = {**_timing.summary(samples), "source": source, "first_job": first}
        bench.log(f"LocalCluster(2) ready: median {bench.results['startup']['median']:.2f} s over {len(samples)} ({source})")


def _wait_gone(pids: tuple[int, ...] | list[int], timeout: float = 10.0) -> list[int]:
    """The worker pids still alive ``timeout`` seconds after their cluster closed (should be none)."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        if alive:
            time.sleep(0.05)
    return alive


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _load() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def _command(argv: list[str]) -> str:
    """The command line, without the --out folder (a path of this machine)."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--out":
            skip = True
        elif not arg.startswith("--out="):
            kept.append(arg)
    return " ".join(["python -m benchmarks", *kept])


def _version(module: str) -> str | None:
    try:
        return str(__import__(module).__version__)
    except Exception:
        return None


def _commit() -> str | None:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5, cwd=here)
    except Exception:
        return None
    return git.stdout.strip() or None


def _meta(config: Config) -> dict[str, Any]:
    fields = [f.name for f in dataclasses.fields(config) if f.name not in ("mode", "timeout")]
    modules = ("tfmapreduce", "tensorflow", "numpy", "dask", "distributed", "ray", "matplotlib")
    return {
        "mode": config.mode,
        "command": _command(sys.argv[1:]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "commit": _commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "versions": {m: _version(m) for m in modules},
        "config": {f: list(v) if isinstance(v := getattr(config, f), tuple) else v for f in fields},
    }
