"""Group jobs side by side in one run: median and top-3 per key, tfmapreduce vs pandas, polars and Spark.

``python -m benchmarks.groups`` (see ``--help``):

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
from typing import Any

import numpy as np

import tfmapreduce as tmr

from .keyed import Rows, _importable, spark_session


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


def groups(table: Rows, cluster: tmr.LocalCluster, n: int, distinct: int, peers: bool, spark: Any) -> None:
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
    if peers and _importable("pandas"):
        import pandas as pd

        frame = pd.DataFrame({"k": keys, "v": values})
        table.add(f"pandas groupby().median(), {k}", lambda: frame.groupby("k")["v"].median(), n)
        table.add(f"pandas groupby().nlargest(3), {k}", lambda: frame.groupby("k")["v"].nlargest(3), n)
        del frame
    if peers and _importable("polars"):
        import polars as pl

        frame = pl.DataFrame({"k": keys, "v": values})
        table.add(f"polars group_by().agg(median), {k}", lambda: frame.group_by("k").agg(pl.col("v").median()), n)
        table.add(f"polars group_by().agg(top_k(3)), {k}", lambda: frame.group_by("k").agg(pl.col("v").top_k(3)), n)
        del frame
    if peers and spark is not None:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        cached = spark.range(n).select((F.xxhash64("id") % distinct).alias("k"), F.rand(seed=0).cast("float").alias("v")).cache()
        cached.count()
        few = max(1, table.repeats // 2)
        table.add(
            f"Spark local[2] DataFrame F.median, cached, {k}", lambda: cached.groupBy("k").agg(F.median("v")).collect(), n, few
        )
        ranked = F.row_number().over(Window.partitionBy("k").orderBy(F.desc("v")))
        top3 = lambda: cached.withColumn("r", ranked).where("r <= 3").collect()  # noqa: E731
        table.add(f"Spark local[2] DataFrame top 3 by row_number(), cached, {k}", top3, n, few)
        cached.unpersist()


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


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, measure, and print one table."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.groups", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="1e4 rows, 1 repeat, no peers, one cluster for every run: a smoke run"
    )
    parser.add_argument("--rows", type=float, default=1e7, help="rows (default 1e7)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per row after one warm-up (median reported)")
    parser.add_argument("--no-peers", dest="peers", action="store_false", help="skip pandas, polars and Spark")
    parser.add_argument("--no-hot-key", dest="hot", action="store_false", help="skip the hot-key run")
    parser.add_argument("--plot", metavar="PNG", help="also draw the medians as bar charts into this file (needs matplotlib)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.repeats, args.peers = 1e4, 1, False
    spark = spark_session() if args.peers else None
    table = Rows(args.repeats)
    try:
        with tmr.LocalCluster(workers=2) as cluster:
            for distinct in (10**3, 10**5):
                groups(table, cluster, int(args.rows), distinct, args.peers, spark)
            peaks = hot_key(table, int(args.rows), cluster) if args.hot and args.quick else []
    finally:
        if spark is not None:
            spark.stop()
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
    main()
