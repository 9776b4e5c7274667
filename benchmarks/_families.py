"""The suite's families of cases, one function each: ``local`` (no cluster), ``layout`` (the framework beside the
hand-written graph on a cluster layout), ``layout_peers`` (Dask distributed and Ray beside the recipe) and ``sweep``
(one size in 2 … 64 shards).  Each measures its cases into a :class:`~benchmarks._bench.Bench`.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow as tf

import tfmapreduce as tmr

from . import _peers
from ._bench import Bench, Impls
from ._config import Layout
from ._hand import HandWritten
from ._work import kmeans_update, numpy_job, tf_kmeans_partial


def _moments32(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The hand-written variance's per-slice arithmetic (float32), for the engine's moments combiner."""
    m = tf.reduce_mean(x)
    d = x - m
    return tf.cast(tf.size(x), tf.float64), m, tf.reduce_sum(d * d)


# ``tmr-job``: the engine doing exactly the hand-written arithmetic, apart from the recipes' float64 work.
MEAN_JOB = tmr.MapReduce(tf.reduce_mean, tmr.combiners.weighted_mean, name="bench-mean")
VARIANCE_JOB = tmr.MapReduce(_moments32, tmr.combiners.moments, name="bench-variance")
KMEANS_JOB = tmr.MapReduce(tf_kmeans_partial, tmr.combiners.sum, name="bench-kmeans")
RECIPES = {"mean": tmr.mean, "variance": tmr.variance}


def available(bench: Bench, peer: str) -> bool:
    """Whether ``peer`` can run here; when not, a note says why."""
    why = _peers.missing(peer)
    if why:
        bench.note(why)
    return why is None


class Holders(contextlib.ExitStack):
    """Per (layout, size, input): resident data, hand-written graphs and peer data, made once and freed together on exit."""

    def __init__(self, bench: Bench, cluster: tmr.LocalCluster, sizes: Any, resident: bool):
        super().__init__()
        self.bench, self.cluster, self.sizes, self.resident = bench, cluster, sizes, resident
        self._made: dict[tuple[str, int], Any] = {}

    def _once(self, key: tuple[str, int], make: Any) -> Any:
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]

    def sharded(self, x: np.ndarray) -> tmr.Sharded:
        """``x`` scattered over the cluster (one array per dimensionality: 1-d data, 2-d k-means points)."""
        return self._once(("tmr", x.ndim), lambda: self.enter_context(tmr.scatter(x, cluster=self.cluster, sizes=self.sizes)))

    def hand(self, x: np.ndarray, plan: tmr.Plan) -> HandWritten:
        """The hand-written graph of every job over ``x``, on the slices and devices of ``plan``."""
        config = self.bench.config
        jobs = [j for j in (*config.jobs, *config.sweep_jobs) if (j == "kmeans") == (x.ndim == 2)]
        slices = [(s.start, s.stop, s.device) for s in plan.shards]
        master = f"{self.cluster.tasks[0]}/device:CPU:0"
        return self._once(
            ("hand", x.ndim),
            lambda: self.enter_context(
                HandWritten(self.cluster.target, master, slices, x, jobs, resident=self.resident, timeout=config.timeout)
            ),
        )

    def peer_data(self, peer: Any, x: np.ndarray) -> Any:
        """``x`` placed in a peer's workers once."""

        def make() -> Any:
            data = peer.scatter(x)
            self.callback(data.clear)
            return data

        return self._once((peer.name, x.ndim), make)


def local(bench: Bench, layout: Layout) -> None:
    """One process, no cluster: tf.function on a tensor (resident) or on the numpy array (shipped), numpy, Dask threads."""
    config, c = bench.config, bench.centroids
    dask = _peers.DaskThreads() if "dask-threads" in config.peers and available(bench, "dask-threads") else None
    functions = {job: tf.function(f) for job, f in (("mean", tf.reduce_mean), ("variance", tf.math.reduce_variance))}
    functions["kmeans"] = tf.function(tf_kmeans_partial)
    for size, input_, job in itertools.product(config.sizes, config.inputs, config.jobs):
        x = bench.input(job, size)
        arg, f = (tf.constant(x) if input_ == "resident" else x), functions[job]
        impls: Impls = {
            "tf.function": (
                (lambda f=f, arg=arg: kmeans_update(*(t.numpy() for t in f(arg, c)), c))
                if job == "kmeans"
                else (lambda f=f, arg=arg: f(arg).numpy())
            ),
            "numpy": lambda job=job, x=x: numpy_job(job, x, c),
        }
        case = bench.case(layout.name, job, size, input_, shards=1, cluster=None)
        bench.measure(case, impls, [("tf.function", "numpy")])
        if dask is not None and input_ == "resident":
            bench.measure_peers(case, "numpy", {"numpy": impls["numpy"], "dask-threads": dask.job(job, dask.prepare(x), c)})


def framework(bench: Bench, layout: Layout, cluster: tmr.LocalCluster, holders: Holders, job: str, x: np.ndarray) -> Impls:
    """``tmr`` (the recipe) and, unless the config says not, ``tmr-job`` (the engine, the hand's arithmetic) for one case."""
    c, timeout = bench.centroids, bench.config.timeout
    kw: dict[str, Any] = (
        {"timeout": timeout} if holders.resident else {"cluster": cluster, "sizes": layout.sizes(), "timeout": timeout}
    )
    arg: Any = holders.sharded(x) if holders.resident else x
    if job == "kmeans":
        impls: Impls = {
            "tmr": lambda: tmr.recipes.kmeans(arg, len(c), iters=1, init=c, **kw).centroids,
            "tmr-job": lambda: kmeans_update(*KMEANS_JOB.run(arg, broadcast=(c,), **kw), c),
        }
    elif job == "variance":
        impls = {"tmr": lambda: tmr.variance(arg, **kw), "tmr-job": lambda: _variance_of(VARIANCE_JOB.run(arg, **kw))}
    else:
        impls = {"tmr": lambda: tmr.mean(arg, **kw), "tmr-job": lambda: MEAN_JOB.run(arg, **kw)}
    if not bench.config.engine_job:
        del impls["tmr-job"]
    return impls


def layout(bench: Bench, layout: Layout, cluster: tmr.LocalCluster) -> None:
    """A cluster layout: the framework and the hand-written graph on the same slices and devices, shipped and resident."""
    config = bench.config
    for size, input_ in itertools.product(config.sizes, config.inputs):
        with Holders(bench, cluster, layout.sizes(), input_ == "resident") as holders:
            for job in config.jobs:
                _layout_case(bench, layout, cluster, holders, job, size, input_)


def _layout_case(
    bench: Bench, layout: Layout, cluster: tmr.LocalCluster, holders: Holders, job: str, size: int, input_: str
) -> None:
    x = bench.input(job, size)
    plan = MEAN_JOB.plan(x, cluster=cluster, sizes=layout.sizes())
    shape = {"shards": len(plan.shards), "shard_rows": list(plan.sizes), "cluster": f"{layout.workers}w×{layout.cpu_devices}cpu"}
    case = bench.case(layout.name, job, size, input_, **shape)
    impls: Impls = bench.attempt(bench.where(case), "tmr", lambda: framework(bench, layout, cluster, holders, job, x)) or {}
    hand = bench.attempt(bench.where(case), "hand", lambda: holders.hand(x, plan))
    if hand is not None:
        impls["hand"] = lambda: hand.run(job, bench.centroids)
    bench.measure(case, impls, [("tmr", "hand"), ("tmr-job", "hand"), ("tmr", "tmr-job")])


def layout_peers(bench: Bench, layout: Layout, cluster: tmr.LocalCluster) -> None:
    """Each measured case of ``layout`` again, the recipe beside Dask distributed and Ray (each when installed).

    The peers start here, after the framework's pass, and stop before this returns.
    """
    config = bench.config
    with distributed_peers(bench) as running:
        if not running:
            return
        for size, input_ in itertools.product(config.sizes, config.inputs):
            with Holders(bench, cluster, layout.sizes(), input_ == "resident") as holders:
                for job in config.jobs:
                    case = bench.find(layout.name, job, size, input_)
                    if case is not None:
                        _peer_case(bench, layout, cluster, holders, case, running)


def _peer_case(
    bench: Bench, layout: Layout, cluster: tmr.LocalCluster, holders: Holders, case: dict[str, Any], peers: dict[str, Any]
) -> None:
    job, x, where = case["job"], bench.input(case["job"], case["size"]), bench.where(case)
    ours = bench.attempt(where, "tmr", lambda: framework(bench, layout, cluster, holders, job, x))
    if ours is None:
        return
    impls: Impls = {"tmr": ours["tmr"]}
    for name, peer in peers.items():
        try:
            impls[name] = peer.job(job, x, holders.peer_data(peer, x) if holders.resident else None, bench.centroids)
        except Exception as e:
            bench.error(where, name, e)
    bench.measure_peers(case, "tmr", impls)


@contextlib.contextmanager
def distributed_peers(bench: Bench) -> Iterator[dict[str, Any]]:
    """Dask distributed (2 worker processes) and Ray (2 CPUs), each when installed and started; stopped on exit."""
    starters = {"dask-distributed": lambda: _peers.DaskDistributed.start(2), "ray": lambda: _peers.Ray.start(2)}
    with contextlib.ExitStack() as stack:
        running: dict[str, Any] = {}
        for name, start in starters.items():
            if name not in bench.config.peers or not available(bench, name):
                continue
            started = time.perf_counter()
            try:
                running[name] = stack.enter_context(start())
            except Exception as e:
                bench.error("peer start", name, e)
            else:
                bench.log(f"{name} ready in {time.perf_counter() - started:.2f} s")
        yield running


def sweep(bench: Bench, layout: Layout, cluster: tmr.LocalCluster) -> None:
    """The same data in each of ``config.sweep_shards`` shards over every device: the framework at each count, by hand
    at the smallest and largest."""
    config = bench.config
    for size, input_, job in itertools.product(config.sizes, config.inputs, config.sweep_jobs):
        with contextlib.ExitStack() as stack:
            _sweep_case(bench, layout, cluster, stack, job, size, input_)


def _sweep_case(
    bench: Bench, layout: Layout, cluster: tmr.LocalCluster, stack: contextlib.ExitStack, job: str, size: int, input_: str
) -> None:
    counts, timeout = bench.config.sweep_shards, bench.config.timeout
    lo, hi = min(counts), max(counts)
    x, fn, where = bench.input(job, size), RECIPES[job], f"sweep {job} {size:.0e} {input_}"
    impls: Impls = {}
    for n in counts:
        holders = stack.enter_context(Holders(bench, cluster, n, input_ == "resident"))
        if input_ == "shipped":
            impls[f"tmr@{n}"] = lambda n=n: fn(x, cluster=cluster, sizes=n, timeout=timeout)
        elif (arg := bench.attempt(where, "tmr", holders.sharded, x)) is not None:
            impls[f"tmr@{n}"] = lambda arg=arg: fn(arg, timeout=timeout)
        if n in (lo, hi):
            try:
                hand = holders.hand(x, MEAN_JOB.plan(x, cluster=cluster, sizes=n))
            except Exception as e:
                bench.error(where, "hand", e)
            else:
                impls[f"hand@{n}"] = lambda hand=hand: hand.run(job, bench.centroids)
    case = bench.case(layout.name, job, size, input_, shards=list(counts), cluster=f"2w×{layout.cpu_devices}cpu")
    pairs = [(f"tmr@{hi}", f"tmr@{lo}"), (f"hand@{hi}", f"hand@{lo}"), (f"tmr@{lo}", f"hand@{lo}"), (f"tmr@{hi}", f"hand@{hi}")]
    bench.measure(case, impls, pairs)


def _variance_of(moments: Any) -> float:
    n, _, m2 = (float(np.asarray(v)) for v in moments)
    return m2 / n
