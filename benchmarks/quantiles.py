"""Quantiles side by side: exact and approximate median and quantiles, tfmapreduce vs numpy.

``python -m benchmarks quantiles``:

- ``tmr.median`` and ``tmr.quantile(q=[0.01, 0.5, 0.99])`` of ``--values`` float32 values (default 5e7, normal),
  resident on a 2-worker LocalCluster: exact (a radix select of the ranks, one run) and approximate
  (``epsilon=1e-3``: one summary run), vs ``np.median`` / ``np.quantile`` of the same array in one process.

Issue 22's targets: exact at least as fast as numpy; approximate at least 5× faster than exact.  Every exact result
is checked equal to numpy's, and every approximate one to be a value of the data within its rank bound, before it
is timed.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import tfmapreduce as tmr

from ._registry import Size, benchmark
from ._table import Rows

Q = [0.01, 0.5, 0.99]
EPSILON = 1e-3


def _within(values: np.ndarray, ordered: np.ndarray, q: list[float], epsilon: float) -> bool:
    """Whether each value occurs in ``ordered`` (sorted) at a rank within ``epsilon · n`` of numpy's linear ranks."""
    n = len(ordered)
    for value, p in zip(values.reshape(-1).tolist(), q, strict=True):
        h = (n - 1) * p
        begin, end = np.searchsorted(ordered, value, "left"), np.searchsorted(ordered, value, "right")
        if end == begin or max(0, begin - np.ceil(h), np.floor(h) - (end - 1)) > epsilon * n:
            return False
    return True


def _check(x: np.ndarray, data: tmr.Sharded) -> None:
    """Exact results equal to numpy's, approximate ones values of ``x`` within their bound."""
    assert tmr.median(data) == np.median(x), "tmr.median differs from np.median"
    assert (tmr.quantile(data, Q) == np.quantile(x, Q)).all(), "tmr.quantile differs from np.quantile"
    ordered = np.sort(x)
    assert _within(np.asarray(tmr.median(data, epsilon=EPSILON)), ordered, [0.5], EPSILON), "approximate median"
    assert _within(tmr.quantile(data, Q, epsilon=EPSILON), ordered, Q, EPSILON), "approximate quantiles"


def quantiles(table: Rows, cluster: tmr.LocalCluster, n: int) -> None:
    """Median and quantiles of ``n`` float32 normal values: exact and approximate, resident, and numpy's."""
    x = np.random.default_rng(0).normal(size=n).astype(np.float32)
    print(f"quantiles: {n:.3g} float32 values", flush=True)
    with tmr.scatter(x, cluster=cluster) as data:
        _check(x, data)
        where = "resident, 2-worker LocalCluster"
        table.add(f"tmr.median, exact, {where}", lambda: tmr.median(data), n)
        table.add(f"tmr.median, epsilon={EPSILON:g}, {where}", lambda: tmr.median(data, epsilon=EPSILON), n)
        table.add(f"tmr.quantile(q=0.01, 0.5, 0.99), exact, {where}", lambda: tmr.quantile(data, Q), n)
        table.add(
            f"tmr.quantile(q=0.01, 0.5, 0.99), epsilon={EPSILON:g}, {where}", lambda: tmr.quantile(data, Q, epsilon=EPSILON), n
        )
    table.add("np.median, one process", lambda: np.median(x), n)
    table.add("np.quantile(q=0.01, 0.5, 0.99), one process", lambda: np.quantile(x, Q), n)


@benchmark(
    "quantiles",
    sizes={
        "values": Size(1e5, 5e7, "float32 values"),
        "repeats": Size(1, 5, "timed calls per row after one warm-up (median reported)"),
    },
)
def run(args: argparse.Namespace) -> None:
    """Measure and print one table."""
    table = Rows(args.repeats)
    with tmr.LocalCluster(workers=2) as cluster:
        quantiles(table, cluster, int(args.values))
    table.print("values")


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["quantiles", *sys.argv[1:]]))
