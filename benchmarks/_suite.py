"""The benchmark run: clusters started once per layout group, every case measured interleaved, results collected."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf

import tfmapreduce as tmr

from . import _peers, _timing
from ._config import Config, Layout
from ._hand import HandWritten
from ._work import (
    agrees,
    initial_centroids,
    job_input,
    kmeans_update,
    make_data,
    numpy_job,
    reference,
    tf_kmeans_partial,
)

CORE = ("tmr", "tmr-job", "tmr.recipes.kmeans", "hand", "numpy", "tf.function")
"""Implementations whose failure fails the run (a peer's failure is only noted)."""


def _moments32(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The hand-written variance's per-slice arithmetic (float32), for the engine's moments combiner."""
    m = tf.reduce_mean(x)
    d = x - m
    return tf.cast(tf.size(x), tf.float64), m, tf.reduce_sum(d * d)


# The engine doing exactly the hand-written arithmetic: separates the engine's overhead from the recipes' float64 work.
MEAN_JOB = tmr.MapReduce(tf.reduce_mean, tmr.combiners.weighted_mean, name="bench-mean")
VARIANCE_JOB = tmr.MapReduce(_moments32, tmr.combiners.moments, name="bench-variance")
KMEANS_JOB = tmr.MapReduce(tf_kmeans_partial, tmr.combiners.sum, name="bench-kmeans")


def has_scatter() -> bool:
    """Whether this tfmapreduce has resident data (``tmr.scatter``)."""
    return hasattr(tmr, "scatter")


def recipe_kmeans() -> Callable[..., Any] | None:
    """``tmr.recipes.kmeans`` when this tfmapreduce has it."""
    recipes = getattr(tmr, "recipes", None)
    return getattr(recipes, "kmeans", None)


def _centroids_of(result: Any) -> Any:
    """The centroids from whatever ``recipes.kmeans`` returns (an array, a tuple, or an object)."""
    for name in ("centroids", "centers"):
        if hasattr(result, name):
            return getattr(result, name)
    if isinstance(result, tuple):
        return result[0]
    return result


class Run:
    """One benchmark run: holds the data, the results, and writes progress to ``log``."""

    def __init__(self, config: Config, log: Callable[[str], None]):
        self.config = config
        self.log = log
        self.centroids = initial_centroids()
        self.data = {size: make_data(size) for size in config.sizes}
        self.references = {
            (job, size): reference(job, job_input(job, self.data[size], size), self.centroids)
            for size in config.sizes
            for job in {*config.jobs, *config.sweep_jobs}
        }
        self.results: dict[str, Any] = {
            "meta": _meta(config),
            "notes": [],
            "clusters": [],
            "startup": None,
            "cases": [],
            "errors": [],
        }
        self.peers: dict[str, Any] = {}

    # --- helpers ------------------------------------------------------------------------------

    def note(self, text: str) -> None:
        if text not in self.results["notes"]:
            self.results["notes"].append(text)
            self.log(f"note: {text}")

    def error(self, where: str, impl: str, exc: BaseException) -> None:
        core = impl in CORE
        entry = {
            "where": where,
            "impl": impl,
            "core": core,
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=6),
        }
        self.results["errors"].append(entry)
        self.log(f"{'ERROR' if core else 'peer error'} in {where} [{impl}]: {entry['error']}")

    def _check_and_time(
        self, where: str, job: str, size: int, impls: dict[str, Callable[[], Any]]
    ) -> tuple[dict[str, Any], dict[str, list[float]]]:
        """Check each implementation's result against numpy in float64, then time the ones that ran, interleaved."""
        expected = self.references[(job, size)]
        checks, working = {}, {}
        for name, fn in impls.items():
            try:
                value = fn()
            except Exception as e:
                self.error(where, name, e)
                continue
            ok, err = agrees(job, value, expected)
            checks[name] = {"ok": ok, "max_rel_err": err}
            if not ok:
                self.error(
                    where,
                    name,
                    AssertionError(
                        f"result {np.asarray(value).ravel()[:4]} disagrees with numpy's "
                        f"{np.asarray(expected).ravel()[:4]} (relative error {err:.2e})"
                    ),
                )
            working[name] = fn
        raw: dict[str, list[float]] = {}
        if working:
            try:
                _, raw = _timing.interleaved(working, warmup=self.config.warmup - 1, repeats=self.config.repeats_for(size))
            except Exception as e:
                self.error(where, "timing", e)
        return checks, raw

    @staticmethod
    def _where(case: dict[str, Any]) -> str:
        return f"{case['layout']} {case['job']} {case['size']:.0e} {case['input']}"

    def _summaries(self, case: dict[str, Any], raw: dict[str, list[float]]) -> dict[str, Any]:
        out = {}
        for name, samples in raw.items():
            s = _timing.summary(samples)
            s["gbps"] = case["bytes"] / s["median"] / 1e9
            out[name] = s
        return out

    def measure(self, case: dict[str, Any], impls: dict[str, Callable[[], Any]], ratios: list[tuple[str, str]]) -> None:
        """Check and time ``impls`` for one case and add it to the results."""
        case["checks"], raw = self._check_and_time(self._where(case), case["job"], case["size"], impls)
        case["timings"] = self._summaries(case, raw)
        case["ratios"] = {f"{a}/{b}": r for a, b in ratios if (r := _timing.ratios(raw, a, b)) is not None}
        self.results["cases"].append(case)
        parts = [f"{n} {s['median'] * 1e3:.3g} ms" for n, s in case["timings"].items()]
        parts += [f"{k} ×{v['median']:.2f}" for k, v in case["ratios"].items()]
        self.log(f"{self._where(case)}: " + ", ".join(parts))

    def measure_peers(self, case: dict[str, Any] | None, anchor: str, impls: dict[str, Callable[[], Any]]) -> None:
        """A second pass for one case: the peers interleaved with ``anchor`` (tmr or numpy) only.

        Peers run apart from the framework/hand-written pass: a call that follows a
        Dask or Ray call pays for their background work on this 2-core machine, which
        would bias whichever implementation comes next.  Peer ratios are against the
        anchor's figures in this same pass (kept as ``peer_pass``).
        """
        if case is None or len(impls) < 2:
            return
        checks, raw = self._check_and_time(self._where(case) + " (peers)", case["job"], case["size"], impls)
        summaries = self._summaries(case, raw)
        case["checks"].update({k: v for k, v in checks.items() if k != anchor})
        case["timings"].update({k: v for k, v in summaries.items() if k != anchor})
        if anchor in summaries:
            case["peer_pass"] = {"anchor": anchor, "timing": summaries[anchor]}
        for name in impls:
            if name != anchor and (r := _timing.ratios(raw, name, anchor)) is not None:
                case["ratios"][f"{name}/{anchor}"] = r
        if not summaries:
            return
        parts = [f"{n} {s['median'] * 1e3:.3g} ms" for n, s in summaries.items()]
        parts += [
            f"{n}/{anchor} ×{case['ratios'][f'{n}/{anchor}']['median']:.2f}" for n in impls if f"{n}/{anchor}" in case["ratios"]
        ]
        self.log(f"{self._where(case)} peers: " + ", ".join(parts))

    def find(self, layout: str, job: str, size: int, input_: str) -> dict[str, Any] | None:
        for case in self.results["cases"]:
            if (case["layout"], case["job"], case["size"], case["input"]) == (layout, job, size, input_):
                return case
        return None

    def _case(self, layout: str, job: str, size: int, input_: str, **extra: Any) -> dict[str, Any]:
        x = job_input(job, self.data[size], size)
        return {
            "layout": layout,
            "job": job,
            "size": size,
            "elements": int(x.size),
            "bytes": int(x.nbytes),
            "input": input_,
            **extra,
        }

    # --- layouts ------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        config = self.config
        started = time.perf_counter()
        self.results["meta"]["load_before"] = _load()
        if not has_scatter():
            self.note(
                "resident input: tmr.scatter is not in this tfmapreduce; the framework's resident figures are "
                "skipped (the hand-written resident baseline still runs)"
            )
        if "kmeans" in config.jobs and recipe_kmeans() is not None:
            self.note(
                "k-means: 'tmr' is tmr.recipes.kmeans(iters=1); on shipped (host) input it scatters the data for the "
                "call and frees it after (three runs), so each call ships the data; 'tmr-job' is one MapReduce run "
                "with broadcast centroids and the hand-written arithmetic"
            )
        if "kmeans" in config.jobs and recipe_kmeans() is None:
            self.note(
                "k-means: tmr.recipes.kmeans is not in this tfmapreduce; 'tmr' runs one iteration as a "
                "MapReduce with broadcast centroids and tmr.combiners.sum"
            )
        if not config.peers:
            self.note("peers (Dask, Ray) not run: " + ("quick mode" if config.mode == "quick" else "--no-peers"))
        if "local" in config.layouts:
            self.run_local(config.layout("local"))
        groups: dict[tuple[int, int], list[Layout]] = {}
        for name in config.layouts:
            layout = config.layout(name)
            if layout.cluster_key is not None:
                groups.setdefault(layout.cluster_key, []).append(layout)
        for (workers, cpus), layouts in groups.items():
            with self.cluster(workers, cpus) as cluster:
                for layout in layouts:
                    if layout.name == "sweep":
                        self.run_sweep(layout, cluster)
                    else:
                        self.run_layout(layout, cluster)
        self.measure_startup()
        self.results["meta"]["load_after"] = _load()
        self.results["meta"]["seconds"] = time.perf_counter() - started
        return self.results

    @contextlib.contextmanager
    def cluster(self, workers: int, cpus: int) -> Iterator[tmr.LocalCluster]:
        """A LocalCluster for one group of layouts; its start is timed and its workers checked gone after."""
        started = time.perf_counter()
        with tmr.LocalCluster(workers, cpu_devices=cpus, startup_timeout=120) as cluster:
            ready = time.perf_counter() - started
            pids = cluster.pids
            entry = {"workers": workers, "cpu_devices": cpus, "ready_s": ready, "pids": list(pids)}
            self.results["clusters"].append(entry)
            self.log(f"LocalCluster({workers}, cpu_devices={cpus}) ready in {ready:.2f} s")
            yield cluster
        entry["leftover_pids"] = _wait_gone(pids)
        if entry["leftover_pids"]:
            self.error(
                f"LocalCluster({workers}, cpu_devices={cpus})",
                "tmr",
                RuntimeError(f"workers {entry['leftover_pids']} outlived close()"),
            )

    def run_local(self, layout: Layout) -> None:
        """One process, no cluster: tf.function on a tensor (resident) or on the numpy array (shipped), numpy, Dask threads."""
        dask_threads = self.peer("dask-threads")
        functions = {
            "mean": tf.function(tf.reduce_mean),
            "variance": tf.function(tf.math.reduce_variance),
            "kmeans": tf.function(tf_kmeans_partial),
        }
        c = self.centroids
        for size in self.config.sizes:
            for input_ in self.config.inputs:
                for job in self.config.jobs:
                    x = job_input(job, self.data[size], size)
                    arg = tf.constant(x) if input_ == "resident" else x
                    f = functions[job]
                    impls: dict[str, Callable[[], Any]] = {}
                    if job == "kmeans":
                        impls["tf.function"] = lambda f=f, arg=arg: kmeans_update(*(t.numpy() for t in f(arg, c)), c)
                    else:
                        impls["tf.function"] = lambda f=f, arg=arg: f(arg).numpy()
                    impls["numpy"] = lambda job=job, x=x: numpy_job(job, x, c)
                    case = self._case(layout.name, job, size, input_, shards=1, cluster=None)
                    self.measure(case, impls, [("tf.function", "numpy")])
                    if dask_threads is not None and input_ == "resident":
                        peer = {"numpy": impls["numpy"], "dask-threads": dask_threads.job(job, dask_threads.prepare(x), c)}
                        self.measure_peers(case, "numpy", peer)
                    del arg

    def run_layout(self, layout: Layout, cluster: tmr.LocalCluster) -> None:
        """A cluster layout: the framework and the hand-written graph on the same slices and devices, shipped and resident.

        For the 2-worker layout, Dask distributed and Ray then start (not before:
        their idle processes would load the machine during the framework's pass)
        and run each case again beside the framework's recipe.
        """
        for size in self.config.sizes:
            for input_ in self.config.inputs:
                with contextlib.ExitStack() as stack:
                    holders = _Holders(self, stack, cluster, layout.sizes(), input_ == "resident")
                    for job in self.config.jobs:
                        self._layout_case(layout, cluster, job, size, input_, holders)
        if layout.name != "2w-even" or not self.config.peers:
            return
        with self.distributed_peers() as running:
            if not running:
                return
            for size in self.config.sizes:
                for input_ in self.config.inputs:
                    with contextlib.ExitStack() as stack:
                        holders = _Holders(self, stack, cluster, layout.sizes(), input_ == "resident")
                        for job in self.config.jobs:
                            self._peer_case(layout, cluster, job, size, input_, holders, running)

    def _tmr(
        self, layout: Layout, cluster: tmr.LocalCluster, job: str, x: np.ndarray, input_: str, holders: _Holders
    ) -> dict[str, Callable[[], Any]]:
        """The framework's implementations of ``job`` on this layout: ``tmr`` (the recipe) and ``tmr-job`` (the engine)."""
        c = self.centroids
        kw: dict[str, Any] = {"cluster": cluster, "sizes": layout.sizes(), "timeout": self.config.timeout}
        arg: Any = x
        if input_ == "resident":
            if not has_scatter():
                return {}  # noted once at the start of the run
            arg = holders.sharded(x)
            kw = {"timeout": self.config.timeout}
        impls: dict[str, Callable[[], Any]] = {}
        if job == "mean":
            impls["tmr"] = lambda: tmr.mean(arg, **kw)
            impls["tmr-job"] = lambda: MEAN_JOB.run(arg, **kw)
        elif job == "variance":
            impls["tmr"] = lambda: tmr.variance(arg, **kw)
            impls["tmr-job"] = lambda: _variance_of(VARIANCE_JOB.run(arg, **kw))
        else:
            recipe = recipe_kmeans()
            impls["tmr-job"] = lambda: kmeans_update(*KMEANS_JOB.run(arg, broadcast=(c,), **kw), c)
            if recipe is not None:
                impls["tmr"] = lambda: _centroids_of(recipe(arg, len(c), iters=1, init=c, **kw))
            else:
                impls["tmr"] = impls.pop("tmr-job")
        if not self.config.engine_job:
            impls.pop("tmr-job", None)
        return impls

    def _layout_case(
        self, layout: Layout, cluster: tmr.LocalCluster, job: str, size: int, input_: str, holders: _Holders
    ) -> None:
        x = job_input(job, self.data[size], size)
        plan = KMEANS_JOB.plan(x, cluster=cluster, sizes=layout.sizes())
        case = self._case(
            layout.name,
            job,
            size,
            input_,
            shards=len(plan.shards),
            shard_rows=list(plan.sizes),
            cluster=f"{layout.workers}w×{layout.cpu_devices}cpu",
        )
        if job == "kmeans":
            case["tmr_impl"] = (
                "tmr.recipes.kmeans(iters=1)"
                if recipe_kmeans() is not None
                else "MapReduce(kmeans partial, combiners.sum) with broadcast centroids"
            )
        where = self._where(case)
        impls: dict[str, Callable[[], Any]] = {}
        try:
            impls.update(self._tmr(layout, cluster, job, x, input_, holders))
        except Exception as e:
            self.error(where, "tmr", e)
        try:
            hand = holders.hand(x, job, plan)
            impls["hand"] = lambda: hand.run(job, self.centroids)
        except Exception as e:
            self.error(where, "hand", e)
        self.measure(case, impls, [("tmr", "hand"), ("tmr-job", "hand"), ("tmr", "tmr-job")])

    def _peer_case(
        self,
        layout: Layout,
        cluster: tmr.LocalCluster,
        job: str,
        size: int,
        input_: str,
        holders: _Holders,
        peers: dict[str, Any],
    ) -> None:
        case = self.find(layout.name, job, size, input_)
        if case is None:
            return
        x = job_input(job, self.data[size], size)
        impls: dict[str, Callable[[], Any]] = {}
        try:
            impls["tmr"] = self._tmr(layout, cluster, job, x, input_, holders)["tmr"]
        except Exception as e:
            self.error(self._where(case), "tmr", e)
            return
        for name, peer in peers.items():
            try:
                impls[name] = peer.job(job, x, holders.peer_data(peer, x) if input_ == "resident" else None, self.centroids)
            except Exception as e:
                self.error(self._where(case), name, e)
        self.measure_peers(case, "tmr", impls)

    def run_sweep(self, layout: Layout, cluster: tmr.LocalCluster) -> None:
        """The same data in 2 … 64 shards over every device: the framework at each count, by hand at the ends."""
        for size in self.config.sizes:
            for input_ in self.config.inputs:
                for job in self.config.sweep_jobs:
                    with contextlib.ExitStack() as stack:
                        self._sweep_case(layout, cluster, job, size, input_, stack)

    def _sweep_case(
        self, layout: Layout, cluster: tmr.LocalCluster, job: str, size: int, input_: str, stack: contextlib.ExitStack
    ) -> None:
        counts = self.config.sweep_shards
        lo, hi = min(counts), max(counts)
        x = job_input(job, self.data[size], size)
        c = self.centroids
        fn = _recipe(job)
        timeout = self.config.timeout
        where = f"sweep {job} {size:.0e} {input_}"
        impls: dict[str, Callable[[], Any]] = {}
        for n in counts:
            holders = _Holders(self, stack, cluster, n, input_ == "resident")
            try:
                if input_ == "resident":
                    arg = holders.sharded(x)
                    impls[f"tmr@{n}"] = lambda arg=arg: fn(arg, timeout=timeout)
                else:
                    impls[f"tmr@{n}"] = lambda n=n: fn(x, cluster=cluster, sizes=n, timeout=timeout)
            except Exception as e:
                self.error(where, "tmr", e)
            if n in (lo, hi):
                try:
                    hand = holders.hand(x, job, KMEANS_JOB.plan(x, cluster=cluster, sizes=n))
                    impls[f"hand@{n}"] = lambda hand=hand: hand.run(job, c)
                except Exception as e:
                    self.error(where, "hand", e)
        case = self._case(layout.name, job, size, input_, shards=list(counts), cluster=f"2w×{layout.cpu_devices}cpu")
        pairs = [
            (f"tmr@{hi}", f"tmr@{lo}"),
            (f"hand@{hi}", f"hand@{lo}"),
            (f"tmr@{lo}", f"hand@{lo}"),
            (f"tmr@{hi}", f"hand@{hi}"),
        ]
        self.measure(case, impls, pairs)

    def measure_startup(self) -> None:
        """LocalCluster(2) from the call to ready: extra timed starts, or the run's own starts in quick mode."""
        samples, first_job = [], []
        for _ in range(self.config.startup_repeats):
            started = time.perf_counter()
            with tmr.LocalCluster(2) as cluster:
                samples.append(time.perf_counter() - started)
                pids = cluster.pids
                t = time.perf_counter()
                tmr.mean(np.arange(100, dtype=np.float32), cluster=cluster)
                first_job.append(time.perf_counter() - t)
            leftover = _wait_gone(pids)
            if leftover:
                self.error("startup", "tmr", RuntimeError(f"workers {leftover} outlived close()"))
        source = "dedicated starts"
        if not samples:
            samples = [c["ready_s"] for c in self.results["clusters"] if c["workers"] == 2]
            source = "the run's own LocalCluster(2) starts"
        if samples:
            self.results["startup"] = {
                **_timing.summary(samples),
                "source": source,
                "first_job": _timing.summary(first_job) if first_job else None,
            }
            self.log(f"LocalCluster(2) ready: median {self.results['startup']['median']:.2f} s over {len(samples)} ({source})")

    # --- peers --------------------------------------------------------------------------------

    def peer(self, name: str) -> Any:
        """A peer that needs no start-up (Dask threads), or None with a note."""
        if not self.config.peers:
            return None
        why = _peers.missing(name)
        if why:
            self.note(why)
            return None
        return _peers.DaskThreads()

    @contextlib.contextmanager
    def distributed_peers(self) -> Iterator[dict[str, Any]]:
        """Dask distributed (2 worker processes) and Ray (2 CPUs), each when installed, for the 2-worker layout."""
        with contextlib.ExitStack() as stack:
            running: dict[str, Any] = {}
            for name, starter in (
                ("dask-distributed", lambda: _peers.DaskDistributed.start(2)),
                ("ray", lambda: _peers.Ray.start(2)),
            ):
                why = _peers.missing(name)
                if why:
                    self.note(why)
                    continue
                try:
                    t = time.perf_counter()
                    running[name] = stack.enter_context(starter())
                    self.log(f"{name} ready in {time.perf_counter() - t:.2f} s")
                except Exception as e:
                    self.error("peer start", name, e)
            yield running


class _Holders:
    """Per (layout, size, input): the resident Sharded data, hand-written graphs and peer data, freed together."""

    def __init__(self, run: Run, stack: contextlib.ExitStack, cluster: tmr.LocalCluster, sizes: Any, resident: bool):
        self.run, self.stack, self.cluster, self.sizes, self.resident = run, stack, cluster, sizes, resident
        self._sharded: dict[int, Any] = {}
        self._hand: dict[int, HandWritten] = {}
        self._peer: dict[tuple[str, int], Any] = {}

    def sharded(self, x: np.ndarray) -> Any:
        if not has_scatter():
            raise NotImplementedError("tmr.scatter is not available")
        key = x.ndim  # one input array per dimensionality (1-d data, 2-d k-means points) per holder
        if key not in self._sharded:
            sharded = tmr.scatter(x, cluster=self.cluster, sizes=self.sizes)  # type: ignore[attr-defined]
            if hasattr(sharded, "__exit__"):
                self.stack.enter_context(sharded)
            else:
                self.stack.callback(sharded.delete)
            self._sharded[key] = sharded
        return self._sharded[key]

    def hand(self, x: np.ndarray, job: str, plan: Any) -> HandWritten:
        if x.ndim not in self._hand:
            jobs = [j for j in (*self.run.config.jobs, *self.run.config.sweep_jobs) if (j == "kmeans") == (x.ndim == 2)]
            slices = [(s.start, s.stop, s.device) for s in plan.shards]
            master = f"{self.cluster.tasks[0]}/device:CPU:0"
            self._hand[x.ndim] = self.stack.enter_context(
                HandWritten(self.cluster.target, master, slices, x, jobs, resident=self.resident, timeout=self.run.config.timeout)
            )
        return self._hand[x.ndim]

    def peer_data(self, peer: Any, x: np.ndarray) -> Any:
        key = (peer.name, x.ndim)
        if key not in self._peer:
            self._peer[key] = data = peer.scatter(x)
            self.stack.callback(data.clear)
        return self._peer[key]


def _recipe(job: str) -> Callable[..., Any]:
    return {"mean": tmr.mean, "variance": tmr.variance}[job]


def _variance_of(moments: Any) -> float:
    n, _, m2 = (float(np.asarray(v)) for v in moments)
    return m2 / n


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
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is gone for our purposes
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


def _meta(config: Config) -> dict[str, Any]:
    def version(module: str) -> str | None:
        try:
            return __import__(module).__version__
        except Exception:
            return None

    try:
        commit = (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
                timeout=5,
                cwd=os.path.dirname(os.path.abspath(__file__)),
            ).stdout.strip()
            or None
        )
    except Exception:
        commit = None
    return {
        "mode": config.mode,
        "command": _command(sys.argv[1:]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "commit": commit,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "versions": {m: version(m) for m in ("tfmapreduce", "tensorflow", "numpy", "dask", "distributed", "ray", "matplotlib")},
        "config": {
            "sizes": list(config.sizes),
            "jobs": list(config.jobs),
            "layouts": list(config.layouts),
            "inputs": list(config.inputs),
            "sweep_shards": list(config.sweep_shards),
            "sweep_jobs": list(config.sweep_jobs),
            "sweep_cpu_devices": config.sweep_cpu_devices,
            "repeats": config.repeats,
            "small_repeats": config.small_repeats,
            "warmup": config.warmup,
            "startup_repeats": config.startup_repeats,
            "peers": config.peers,
            "engine_job": config.engine_job,
        },
        "resident_available": has_scatter(),
        "kmeans_recipe_available": recipe_kmeans() is not None,
    }
