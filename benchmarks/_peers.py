"""Peers run side by side with tfmapreduce when installed (the ``bench`` extra): Dask and Ray.

Every peer does the same arithmetic as the framework, chunk by chunk, with the
numpy functions of ``_work``: per-chunk partials, then the size-weighted combine
on the client.

- ``dask-threads``: a Dask array over the in-process numpy array, computed by the
  threaded scheduler with 2 threads (``.mean()``, ``.var()``; k-means with
  ``dask.delayed`` chunk partials).  Compared with the single-process layout.
- ``dask-distributed``: a ``distributed.LocalCluster`` of 2 worker processes
  (1 thread each); chunk ``i`` is scattered to worker ``i`` — once for resident
  input, on every call for shipped input.  Compared with the 2-worker layout.
- ``ray``: ``ray.init(num_cpus=2)``; chunks put in Ray's object store — once for
  resident input, on every call for shipped input — and one remote task per chunk.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ._work import np_combine, np_partial

PEERS = ("dask-threads", "dask-distributed", "ray")

_MODULES = {"dask-threads": ("dask", "dask.array"), "dask-distributed": ("dask", "distributed"), "ray": ("ray",)}


def missing(peer: str) -> str | None:
    """Why ``peer`` cannot run here (a note for the report), or None when it can."""
    absent = [m for m in _MODULES[peer] if importlib.util.find_spec(m.split(".")[0]) is None]
    if absent:
        return f"{peer} skipped: {', '.join(sorted({m.split('.')[0] for m in absent}))} not installed (pip install -e '.[bench]')"
    return None


def _chunks(x: np.ndarray, n: int) -> list[np.ndarray]:
    bounds = np.linspace(0, x.shape[0], n + 1).astype(int)
    return [x[a:b] for a, b in itertools.pairwise(bounds) if b > a]


class DaskThreads:
    """Dask's threaded scheduler in this process, 2 threads, 2 chunks."""

    name = "dask-threads"

    def __init__(self, threads: int = 2):
        self.threads = threads

    def prepare(self, x: np.ndarray) -> Any:
        import dask.array as da

        return da.from_array(x, chunks=(-(-x.shape[0] // self.threads), *x.shape[1:]))

    def job(self, job: str, data: Any, centroids: np.ndarray) -> Callable[[], Any]:
        import dask

        if job == "mean":
            return lambda: data.mean().compute(scheduler="threads", num_workers=self.threads)
        if job == "variance":
            return lambda: data.var().compute(scheduler="threads", num_workers=self.threads)

        def kmeans() -> Any:
            parts = [dask.delayed(np_partial)(job, block, centroids) for block in data.to_delayed().ravel()]
            return np_combine(job, list(dask.compute(*parts, scheduler="threads", num_workers=self.threads)), centroids)

        return kmeans


class DaskDistributed:
    """A 2-process ``distributed.LocalCluster``; chunk i lives on worker i."""

    name = "dask-distributed"

    def __init__(self, client: Any):
        self.client = client
        self.workers = sorted(client.scheduler_info()["workers"])

    @classmethod
    @contextlib.contextmanager
    def start(cls, workers: int = 2) -> Iterator[DaskDistributed]:
        from distributed import Client, LocalCluster

        for name in ("distributed", "distributed.worker", "distributed.scheduler", "distributed.nanny", "distributed.core"):
            logging.getLogger(name).setLevel(logging.ERROR)
        with (
            LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, memory_limit=0
            ) as cluster,
            Client(cluster) as client,
        ):
            client.wait_for_workers(workers)
            yield cls(client)

    def scatter(self, x: np.ndarray) -> list[Any]:
        # hash=False: a fresh key every time, so shipped input really travels on every call (the same bytes
        # would otherwise hash to the key of the last call's data, which is being released concurrently)
        return [
            self.client.scatter(c, workers=[w], direct=True, hash=False)
            for c, w in zip(_chunks(x, len(self.workers)), self.workers, strict=False)
        ]

    def job(self, job: str, x: np.ndarray, resident: Sequence[Any] | None, centroids: np.ndarray) -> Callable[[], Any]:
        def run() -> Any:
            chunks = resident if resident is not None else self.scatter(x)
            futures = [
                self.client.submit(np_partial, job, c, centroids, pure=False, workers=[w])
                for c, w in zip(chunks, self.workers, strict=False)
            ]
            return np_combine(job, self.client.gather(futures), centroids)

        return run


class Ray:
    """Ray on this machine with 2 CPUs; one remote task per chunk."""

    name = "ray"

    def __init__(self, ray: Any):
        self.ray = ray
        self.remote_partial = ray.remote(np_partial)

    @classmethod
    @contextlib.contextmanager
    def start(cls, cpus: int = 2) -> Iterator[Ray]:
        import ray

        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        ray.init(
            num_cpus=cpus,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.ERROR,
            object_store_memory=2 * 1024**3,
            configure_logging=False,
        )
        try:
            yield cls(ray)
        finally:
            ray.shutdown()

    def scatter(self, x: np.ndarray) -> list[Any]:
        return [self.ray.put(c) for c in _chunks(x, 2)]

    def job(self, job: str, x: np.ndarray, resident: Sequence[Any] | None, centroids: np.ndarray) -> Callable[[], Any]:
        def run() -> Any:
            chunks = resident if resident is not None else self.scatter(x)
            return np_combine(job, self.ray.get([self.remote_partial.remote(job, c, centroids) for c in chunks]), centroids)

        return run
