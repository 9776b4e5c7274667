"""A table group-by on two string columns with five aggregates: tfmapreduce vs pandas, polars and DuckDB.

``python -m benchmarks tables`` (``--rows``, default 2e7): a table of two string key columns (``--groups`` distinct
pairs: 100 × ``groups / 100`` values of a few characters, unicode included), a float64 and an int64 column, in
memory for every peer (pandas a DataFrame, polars the frame converted once, DuckDB a table made from it once,
tfmapreduce a ``tmr.table`` of it), grouped by both key columns:

    sum(x), mean(x), min(n), max(n), count(*)

tfmapreduce runs one keyed job on a 2-worker LocalCluster (the two keys encoded as one byte string in the map,
a per-column combiner), then the same group-by of the table scattered once (``tmr.scatter(table)``: the run reads
the columns on the workers, nothing shipped; the scatter's own time printed). Also printed: the first call's time
(it traces and compiles the job's graphs) against a second identical call's, which reuses them, and how many times
the map function was traced for each (the count in ``tfmapreduce._table.aggregate.TRACES``). Each result is checked against pandas before it is timed.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

import tfmapreduce as tmr

from . import _peers
from ._registry import Size, benchmark
from ._table import Rows

SQL = """
SELECT a, b, sum(x) AS total, avg(x) AS avg, min(n) AS lo, max(n) AS hi, count(*) AS rows
FROM t GROUP BY a, b ORDER BY a, b
"""


def frame_of(rows: int, groups: int) -> Any:
    """The input as a pandas DataFrame: keys ``a`` (100 values) and ``b`` (``groups // 100``), ``x`` float64, ``n`` int64."""
    import pandas as pd

    rng = np.random.default_rng(3)
    first = np.array([f"k{i:02d}{'é' if i % 7 == 0 else ''}" for i in range(100)], object)
    second = np.array([f"v{i}" for i in range(max(1, groups // 100))], object)
    return pd.DataFrame(
        {
            "a": first[rng.integers(0, len(first), rows)],
            "b": second[rng.integers(0, len(second), rows)],
            "x": rng.normal(size=rows),
            "n": rng.integers(-(10**6), 10**6, rows),
        }
    )


def ours(t: tmr.Table | tmr.ResidentTable, cluster: tmr.LocalCluster) -> Any:
    result = t.group_by(["a", "b"]).agg(
        total=("x", "sum"), avg=("x", "mean"), lo=("n", "min"), hi=("n", "max"), rows=("*", "count"), cluster=cluster, timeout=900
    )
    return result.to_pandas()


def by_pandas(frame: Any) -> Any:
    g = frame.groupby(["a", "b"], sort=True)
    return g.agg(total=("x", "sum"), avg=("x", "mean"), lo=("n", "min"), hi=("n", "max"), rows=("x", "size")).reset_index()


def by_polars(frame: Any) -> Any:
    import polars as pl

    return (
        frame.lazy()
        .group_by(["a", "b"])
        .agg(
            pl.col("x").sum().alias("total"),
            pl.col("x").mean().alias("avg"),
            pl.col("n").min().alias("lo"),
            pl.col("n").max().alias("hi"),
            pl.len().alias("rows"),
        )
        .sort(["a", "b"])
        .collect()
    )


def check(got: Any, want: Any, who: str) -> None:
    for name in ("a", "b", "total", "avg", "lo", "hi", "rows"):
        g, w = np.asarray(got[name]), np.asarray(want[name])
        if g.dtype.kind in "fiu":
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-9, err_msg=f"{who}: {name}")
        else:
            assert [str(x) for x in g] == [str(x) for x in w], (who, name)


def _once(fn: Any) -> tuple[float, int]:
    """Seconds of one call of ``fn``, and how many times it traced an aggregation's map function."""
    from tfmapreduce._table import aggregate

    traces = aggregate.TRACES[0]
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started, aggregate.TRACES[0] - traces


@benchmark(
    "tables",
    sizes={
        "rows": Size(10_000, 2e7, "rows"),
        "groups": Size(1000, 10_000, "distinct (a, b) pairs, about"),
        "repeats": Size(1, 3, "timed calls per row after one warm-up (median reported)"),
    },
    peers=("pandas", "polars", "duckdb"),
)
def run(args: argparse.Namespace) -> None:
    """Make the frame and each peer's copy once, then time the group-by by each implementation; print the table."""
    rows = int(args.rows)
    frame = frame_of(rows, int(args.groups))
    print(f"tables: {rows:,} rows, {frame.groupby(['a', 'b']).ngroups:,} groups", flush=True)
    table = Rows(args.repeats)
    reference = by_pandas(frame)
    t = tmr.table(frame)
    with tmr.LocalCluster(workers=2) as cluster:
        first, traced = _once(lambda: check(ours(t, cluster), reference, "tfmapreduce"))
        second, again = _once(lambda: ours(t, cluster))
        print(f"  first call {first:.2f} s ({traced} traces of the map function), an identical second {second:.2f} s ({again})")
        table.add("tfmapreduce group_by.agg, one keyed run, 2-worker LocalCluster", lambda: ours(t, cluster), rows)
        started = time.perf_counter()
        with tmr.scatter(t, cluster=cluster, timeout=900) as resident:
            print(f"  tmr.scatter(table) once: {time.perf_counter() - started:.2f} s", flush=True)
            check(ours(resident, cluster), reference, "tfmapreduce resident")
            table.add(
                "tfmapreduce, the table scattered once (ResidentTable): the same run, no row shipped",
                lambda: ours(resident, cluster),
                rows,
            )
    if _peers.on(args.peers, "duckdb"):
        import duckdb

        duck = duckdb.connect()
        duck.execute("CREATE TABLE t AS SELECT * FROM frame")
        check(duck.execute(SQL).df(), reference, "duckdb")
        table.add("DuckDB (its threads)", lambda: duck.execute(SQL).df(), rows)
        duck.close()
    if _peers.on(args.peers, "polars"):
        import polars as pl

        pframe = pl.from_pandas(frame)
        check(by_polars(pframe).to_pandas(), reference, "polars")
        table.add("polars (lazy, its threads)", lambda: by_polars(pframe), rows)
    if _peers.on(args.peers, "pandas"):
        table.add("pandas", lambda: by_pandas(frame), rows)
    table.print("rows")


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["tables", *sys.argv[1:]]))
