"""What a benchmark run covers: the layouts, jobs, sizes and repeats of the quick and full modes."""

from __future__ import annotations

import dataclasses
from typing import Any

import tfmapreduce as tmr  # lazy: TensorFlow loads on first use, so --help stays fast

from ._peers import PEERS

JOBS = ("mean", "variance", "kmeans")
"""Every job, in report order."""

KMEANS_DIM = 8
"""Coordinates per k-means point: a size of N elements is N // 8 points of 8 float32."""

KMEANS_K = 16
"""Centroids of the k-means iteration."""


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where the data lives and how it is split."""

    name: str
    """Short name used in tables, plots and ``--layouts``."""
    description: str
    """One line for ``--help`` and the report."""
    workers: int | None = None
    """Worker processes of the LocalCluster; None runs in this process, with no cluster."""
    cpu_devices: int = 1
    """CPU devices each worker exposes."""
    weights: tuple[float, ...] | None = None
    """Shard sizes proportional to these (``tmr.weights``); None splits evenly over the devices."""

    @property
    def cluster_key(self) -> tuple[int, int] | None:
        """Layouts with the same key share one LocalCluster."""
        return None if self.workers is None else (self.workers, self.cpu_devices)

    def sizes(self) -> Any:
        """The ``sizes=`` argument of the framework's calls for this layout."""
        return None if self.weights is None else tmr.weights(*self.weights)


LAYOUTS: dict[str, Layout] = {
    layout.name: layout
    for layout in (
        Layout("local", "one process, no cluster: a local tf.function (plain TF), numpy and Dask's threaded scheduler"),
        Layout("1w", "LocalCluster(1): one worker process holds all the data (task 0 is master and worker)", 1),
        Layout("2w-even", "LocalCluster(2): two worker processes, one even shard each; Dask distributed and Ray beside it", 2),
        Layout(
            "2w-uneven",
            "LocalCluster(2), shards 1:3 (tmr.weights(1, 3)): task 1 holds three quarters of the rows",
            2,
            weights=(1, 3),
        ),
        Layout("2w-2cpu", "LocalCluster(2, cpu_devices=2): four CPU devices, one shard each (default placement)", 2, 2),
        Layout(
            "sweep", "shard-count sweep: the same data in 2, 8, 32, 64 shards (sizes=n) over every device of the cluster", 2, 2
        ),
    )
}

INPUTS = ("shipped", "resident")
"""shipped: host data sliced on the client and fed on every call; resident: scattered once with tmr.scatter, kept on the devices."""


@dataclasses.dataclass(frozen=True)
class Config:
    """One run's coverage."""

    mode: str
    sizes: tuple[int, ...]
    jobs: tuple[str, ...]
    layouts: tuple[str, ...]
    inputs: tuple[str, ...] = INPUTS
    sweep_shards: tuple[int, ...] = (2, 8, 32, 64)
    sweep_jobs: tuple[str, ...] = ("mean",)
    sweep_cpu_devices: int = 2
    repeats: int = 5
    """Timed rounds per figure (after warm-up) for sizes above ``SMALL``."""
    small_repeats: int = 31
    """Timed rounds for sizes up to ``SMALL`` elements, whose calls take milliseconds."""
    warmup: int = 2
    """Untimed calls per implementation before timing (the first one compiles and is checked)."""
    startup_repeats: int = 5
    """Extra LocalCluster(2) starts timed for the start-up figure (0: use the run's own start)."""
    peers: tuple[str, ...] = PEERS
    """The peers to run, each when installed (``_peers.PEERS``)."""
    engine_job: bool = True
    """Also time ``tmr-job``: the MapReduce engine doing the hand-written arithmetic (a diagnostic of overhead)."""
    timeout: float = 300.0
    """Deadline in seconds of every distributed run."""

    def repeats_for(self, size: int) -> int:
        return self.small_repeats if size <= SMALL else self.repeats

    def layout(self, name: str) -> Layout:
        layout = LAYOUTS[name]
        if name == "sweep":
            layout = dataclasses.replace(layout, cpu_devices=self.sweep_cpu_devices)
        return layout


SMALL = 1_000_000
"""Sizes up to this many elements get ``small_repeats`` rounds."""

FULL = Config(
    mode="full",
    sizes=(100, 1_000_000, 10_000_000, 50_000_000),
    jobs=JOBS,
    layouts=tuple(LAYOUTS),
)

QUICK = Config(
    mode="quick",
    sizes=(100, 100_000),
    jobs=("mean", "variance"),
    layouts=("local", "2w-even", "2w-uneven", "sweep"),
    sweep_shards=(2, 8),
    sweep_cpu_devices=1,
    repeats=3,
    small_repeats=5,
    warmup=1,
    startup_repeats=0,
    peers=(),
    engine_job=False,
    timeout=120.0,
)
