"""Resident vs shipped, side by side in one run on a 2-worker LocalCluster.

``python -m benchmarks.resident`` prints the median time of ``tmr.mean`` over 5e7 float32
resident and shipped, and of one k-means iteration (1e6 points x 8, k = 16) resident, shipped
and in one numpy process; it checks the k-means centroids against numpy in float64.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np

import tfmapreduce as tmr

from ._timing import repeat


def med(f: Callable[[], Any], n: int = 7) -> tuple[float, float, float]:
    """Median, min and max in ms of ``n`` calls after one warm-up."""
    ts, _ = repeat(f, n)
    return float(np.median(ts)) * 1000, min(ts) * 1000, max(ts) * 1000


def numpy_iteration(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """One Lloyd iteration in numpy: assign each point to its nearest centroid, average."""
    d2 = (x * x).sum(1)[:, None] - 2.0 * (x @ c.T) + (c * c).sum(1)[None, :]
    labels = np.argmin(d2, axis=1)
    counts = np.bincount(labels, minlength=len(c))
    sums = np.stack([np.bincount(labels, weights=x[:, j], minlength=len(c)) for j in range(x.shape[1])], 1)
    return np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], c)


def main(argv: list[str] | None = None) -> None:
    """Measure and print the table (``--help``: say what it measures and exit)."""
    argparse.ArgumentParser(
        prog="python -m benchmarks.resident", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.random(5 * 10**7, dtype=np.float32)
    X = rng.random((10**6, 8), dtype=np.float32)
    C = X[:16].astype(np.float64)
    with tmr.LocalCluster(2) as c, tmr.scatter(x, cluster=c) as d, tmr.scatter(X, cluster=c) as D:
        rows = {
            "tmr.mean 5e7 float32 resident": med(lambda: tmr.mean(d)),
            "tmr.mean 5e7 float32 shipped": med(lambda: tmr.mean(x, cluster=c), n=5),
            "k-means iteration 1e6x8 k=16 resident": med(lambda: tmr.recipes.kmeans(D, 16, iters=1, init=C)),
            "k-means iteration 1e6x8 k=16 shipped": med(lambda: tmr.recipes.kmeans(X, 16, iters=1, init=C, cluster=c), n=5),
            "numpy iteration 1e6x8 k=16, one process": med(lambda: numpy_iteration(X, C.astype(np.float32))),
        }
        ours = tmr.recipes.kmeans(D, 16, iters=1, init=C).centroids
        ref = numpy_iteration(X.astype(np.float64), C)
        print("max |centroid difference| vs numpy float64:", np.abs(ours - ref).max())
    for k, (m, lo, hi) in rows.items():
        print(f"| {k} | {m:.1f} ms | {lo:.1f}–{hi:.1f} ms |")


if __name__ == "__main__":
    main()
