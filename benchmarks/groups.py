"""Group jobs side by side: median and top-3 per key, tfmapreduce vs pandas, polars and Spark; a hot key.

``python -m benchmarks groups``:

- ``tmr.median_by_key`` and ``tmr.top_k_by_key(k=3)`` over ``--rows`` rows (default 1e7), int64 keys
  with 1e3 and 1e5 distinct values and float32 values, resident on a 2-worker LocalCluster, vs pandas
  ``groupby().median()`` / ``groupby().nlargest(3)``, polars ``group_by().agg(median)`` / ``top_k(3)``
  (one process each, when installed) and Spark local[2] DataFrame ``F.median`` / a ``row_number()``
  window (exact; cached; when pyspark and Java are present);
- a hot key: ``median_by_key`` over the same rows with 90% of them one key, against uniform keys:
  time, and the workers' peak resident memory (``VmHWM``).

Every tfmapreduce result is checked against numpy before it is timed.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

import numpy as np

import tfmapreduce as tmr

from . import _peers
from ._registry import PLOT, Size, benchmark, flag
from ._table import Rows


def reference(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """numpy per key: the distinct keys, each key's median (float64) and its 3 largest values (a padded (keys, 3) array)."""
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order].astype(np.float64)
    distinct, starts, counts = np.unique(k, return_index=True, return_counts=True)
    lo, hi = starts + (counts - 1) // 2, starts + counts // 2
    ends = starts + counts
    top = np.stack([np.where(counts > j, v[np.maximum(ends - 1 - j, starts)], np.nan) for j in range(3)], axis=1)
    return distinct, (v[lo] + v[hi]) / 2, top


def _check(keys: np.ndarray, values: np.ndarray, kd: Any, vd: Any) -> None:
    distinct, medians, top = reference(keys, values)
    median = tmr.median_by_key(kd, vd)
    np.testing.assert_array_equal(median.keys, distinct)
    np.testing.assert_allclose(median.values, medians, rtol=1e-12)
    largest = tmr.top_k_by_key(kd, vd, 3)
    for i in np.random.default_rng(0).choice(len(distinct), min(len(distinct), 200), replace=False):
        want = top[i][~np.isnan(top[i])]
        np.testing.assert_array_equal(largest.value_at(int(i)), want.astype(np.float32))


def groups(table: Rows, cluster: tmr.LocalCluster, n: int, distinct: int, peers: frozenset[str], spark: Any) -> None:
    """Median and top-3 per key of ``n`` float32 values over ``distinct`` int64 keys: tfmapreduce (resident) and peers."""
    rng = np.random.default_rng(distinct)
    keys = rng.integers(0, distinct, n, dtype=np.int64)
    values = rng.random(n, dtype=np.float32)
    k = f"{distinct:.0e} keys"
    print(f"groups: {n:.3g} rows, {k}", flush=True)
    with tmr.scatter(keys, cluster=cluster) as kd, tmr.scatter(values, cluster=cluster) as vd:
        _check(keys, values, kd, vd)
        table.add(f"tmr.median_by_key, resident, 2-worker LocalCluster, {k}", lambda: tmr.median_by_key(kd, vd), n)
        table.add(f"tmr.top_k_by_key(k=3), resident, 2-worker LocalCluster, {k}", lambda: tmr.top_k_by_key(kd, vd, 3), n)
    _peers.median_and_top3(table, keys, values, distinct, peers, spark)


def _peak(pids: tuple[int, ...]) -> int:
    """The workers' largest peak resident memory (VmHWM), bytes; 0 where /proc does not tell."""
    peak = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                peak = max(peak, *(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:")))
        except (OSError, ValueError, TypeError):
            continue
    return peak


def hot_key(table: Rows, n: int, shared: tmr.LocalCluster | None = None) -> list[tuple[str, float]]:
    """median_by_key with 90% of the rows on one key vs uniform keys, each on a fresh cluster (or on ``shared``, a smoke
    run's, whose peak then counts every earlier run too): seconds and peak memory."""
    peaks = []
    rng = np.random.default_rng(7)
    values = rng.random(n, dtype=np.float32)
    uniform = rng.integers(0, 10**5, n, dtype=np.int64)
    hot = np.where(rng.random(n) < 0.9, 0, uniform)
    for name, keys in (("uniform keys", uniform), ("90% of the rows on one key", hot)):
        with contextlib.nullcontext(shared) if shared is not None else tmr.LocalCluster(workers=2) as cluster:
            with tmr.scatter(keys, cluster=cluster) as kd, tmr.scatter(values, cluster=cluster) as vd:
                table.add(f"tmr.median_by_key, resident, hot key run: {name}", lambda: tmr.median_by_key(kd, vd, reducers=2), n)
            peaks.append((name, _peak(cluster.pids) / 2**20))
    return peaks


def plot(table: Rows, path: str) -> None:
    """One panel per recipe and key count: each implementation's median seconds (the hot-key rows left out)."""
    from ._plots import bar_chart

    panels: dict[str, list[tuple[str, list[float]]]] = {}
    for name, seconds, _ in table.rows:
        if "hot key" in name:
            continue
        keys = name.rsplit(", ", 1)[1]
        recipe = "median per key" if "median" in name else "top 3 per key"
        panels.setdefault(f"{recipe}, {keys}", []).append((name.split(" ")[0].split(".")[0], [seconds]))
    bar_chart(list(panels.items()), path, unit="seconds")


@benchmark(
    "groups",
    sizes={
        "rows": Size(1e4, 1e7, "rows"),
        "repeats": Size(1, 3, "timed calls per row after one warm-up (median reported)"),
    },
    peers=("pandas", "polars", "spark"),
    flags=(flag("--no-hot-key", dest="hot", action="store_false", help="skip the hot-key run"), PLOT),
)
def run(args: argparse.Namespace) -> None:
    """Measure and print the table and the hot-key run's peak memory; with --quick, every run on one cluster."""
    table = Rows(args.repeats)
    with _peers.spark(args.peers) as spark, tmr.LocalCluster(workers=2) as cluster:
        for distinct in (10**3, 10**5):
            groups(table, cluster, int(args.rows), distinct, args.peers, spark)
        peaks = hot_key(table, int(args.rows), cluster) if args.hot and args.quick else []
    if args.hot and not args.quick:
        peaks = hot_key(table, int(args.rows))
    table.print("rows")
    if args.plot:
        plot(table, args.plot)
    if peaks:
        print("\n| hot-key run | workers' peak resident memory (MiB) |\n|---|---|")
        for name, mib in peaks:
            print(f"| {name} | {mib:.0f} |")


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["groups", *sys.argv[1:]]))
