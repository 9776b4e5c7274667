"""Top k and unique of a whole input: tfmapreduce vs numpy in one process.

``python -m benchmarks selection``:

- ``tmr.top_k(x, 100)`` over ``--rows`` int64 values (default 5e7) with ``--distinct`` distinct values
  (default 1e6), resident on a 2-worker LocalCluster, vs numpy's top k in one process
  (``np.argpartition``, then a sort of the k);
- ``tmr.unique(x)`` over the same data vs ``np.unique(x)``.

Every tfmapreduce result is checked against numpy before it is timed (top k against the exact, stable order:
equal values lower row first, which ``np.argpartition`` does not promise).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import tfmapreduce as tmr

from ._registry import Size, benchmark, flag
from ._table import Rows


def numpy_top_k(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """numpy's top k in one process: the k largest by ``np.argpartition``, then sorted (largest first)."""
    k = min(k, len(x))
    if k == 0:
        return x[:0], np.zeros(0, np.int64)
    rows = np.argpartition(x, len(x) - k)[len(x) - k :]
    rows = rows[np.argsort(x[rows], kind="stable")[::-1]]
    return x[rows], rows


def _check(x: np.ndarray, data: tmr.Sharded, k: int) -> None:
    values, rows = tmr.top_k(data, k)
    order = np.argsort(~x, kind="stable")[:k]  # int64: ~x reverses the order, ties stay in row order
    np.testing.assert_array_equal(rows, order)
    np.testing.assert_array_equal(values, x[order])
    np.testing.assert_array_equal(numpy_top_k(x, k)[0], x[order])  # the peer's values too (its ties may differ)
    distinct, counts = tmr.unique(data, return_counts=True)
    want, want_counts = np.unique(x, return_counts=True)
    np.testing.assert_array_equal(distinct, want)
    np.testing.assert_array_equal(counts, want_counts)


def selection(table: Rows, cluster: tmr.LocalCluster, n: int, distinct: int, k: int) -> None:
    """Top k and unique of ``n`` int64 values with ``distinct`` distinct values: tfmapreduce (resident) and numpy."""
    x = np.random.default_rng(0).integers(0, distinct, n, dtype=np.int64)
    label = f"{n:.3g} int64, {distinct:.0e} distinct"
    print(f"selection: {label}, k = {k}", flush=True)
    with tmr.scatter(x, cluster=cluster) as data:
        _check(x, data, k)
        table.add(f"tmr.top_k(x, {k}), resident, 2-worker LocalCluster, {label}", lambda: tmr.top_k(data, k), n)
        table.add(f"tmr.unique(x), resident, 2-worker LocalCluster, {label}", lambda: tmr.unique(data), n)
    table.add(f"numpy argpartition + sort of the {k}, one process, {label}", lambda: numpy_top_k(x, k), n)
    table.add(f"np.unique(x), one process, {label}", lambda: np.unique(x), n)


@benchmark(
    "selection",
    sizes={
        "rows": Size(1e4, 5e7, "rows"),
        "distinct": Size(1e3, 1e6, "distinct values"),
        "repeats": Size(1, 3, "timed calls per row after one warm-up (median reported)"),
    },
    flags=(flag("-k", type=int, default=100, help="how many values top_k returns (default 100)"),),
)
def run(args: argparse.Namespace) -> None:
    """Measure and print one table."""
    table = Rows(args.repeats)
    with tmr.LocalCluster(workers=2) as cluster:
        selection(table, cluster, int(args.rows), int(args.distinct), args.k)
    table.print("rows")


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["selection", *sys.argv[1:]]))
