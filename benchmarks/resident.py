"""Resident vs shipped, side by side in one run on a 2-worker LocalCluster.

``python -m benchmarks resident`` prints the median time of ``tmr.mean`` over ``--elements`` (5e7) float32
resident and shipped, and of one k-means iteration (``--points`` (1e6) points x 8, k = 16) resident, shipped
and in one numpy process; it checks the k-means centroids against numpy in float64.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

import tfmapreduce as tmr

from ._registry import Size, benchmark
from ._timing import repeat


def med(f: Callable[[], Any], n: int = 7) -> tuple[float, float, float]:
    """Median, min and max in ms of ``n`` calls after one warm-up."""
    ts, _ = repeat(f, n)
    return float(np.median(ts)) * 1000, min(ts) * 1000, max(ts) * 1000


def _e(count: float) -> str:
    """``5e7`` for 5e7."""
    return f"{count:.0e}".replace("e+0", "e")


def numpy_iteration(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """One Lloyd iteration in numpy: assign each point to its nearest centroid, average."""
    d2 = (x * x).sum(1)[:, None] - 2.0 * (x @ c.T) + (c * c).sum(1)[None, :]
    labels = np.argmin(d2, axis=1)
    counts = np.bincount(labels, minlength=len(c))
    sums = np.stack([np.bincount(labels, weights=x[:, j], minlength=len(c)) for j in range(x.shape[1])], 1)
    return np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], c)


@benchmark(
    "resident",
    sizes={
        "elements": Size(1e5, 5e7, "float32 elements of the mean"),
        "points": Size(1e4, 1e6, "k-means points of 8 float32"),
        "repeats": Size(1, 7, "timed calls per resident or numpy row after one warm-up (shipped rows: 2 fewer, at least 1)"),
    },
)
def run(args: argparse.Namespace) -> None:
    """Measure and print the table."""
    rng = np.random.default_rng(0)
    n, p, r = _e(args.elements), f"{_e(args.points)}x8", args.repeats
    x = rng.random(int(args.elements), dtype=np.float32)
    X = rng.random((int(args.points), 8), dtype=np.float32)
    C = X[:16].astype(np.float64)
    with tmr.LocalCluster(2) as c, tmr.scatter(x, cluster=c) as d, tmr.scatter(X, cluster=c) as D:
        rows = {
            f"tmr.mean {n} float32 resident": med(lambda: tmr.mean(d), r),
            f"tmr.mean {n} float32 shipped": med(lambda: tmr.mean(x, cluster=c), max(1, r - 2)),
            f"k-means iteration {p} k=16 resident": med(lambda: tmr.recipes.kmeans(D, 16, iters=1, init=C), r),
            f"k-means iteration {p} k=16 shipped": med(
                lambda: tmr.recipes.kmeans(X, 16, iters=1, init=C, cluster=c), max(1, r - 2)
            ),
            f"numpy iteration {p} k=16, one process": med(lambda: numpy_iteration(X, C.astype(np.float32)), r),
        }
        ours = tmr.recipes.kmeans(D, 16, iters=1, init=C).centroids
        ref = numpy_iteration(X.astype(np.float64), C)
        print("max |centroid difference| vs numpy float64:", np.abs(ours - ref).max())
    for k, (m, lo, hi) in rows.items():
        print(f"| {k} | {m:.1f} ms | {lo:.1f}–{hi:.1f} ms |")


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["resident", *sys.argv[1:]]))
