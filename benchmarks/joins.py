"""Joins and PageRank side by side: tfmapreduce vs pandas, polars, DuckDB, Spark and scipy.

``python -m benchmarks joins``:

- an inner join of ``--rows`` rows (default 1e7; int64 keys over rows/10 distinct, one float32 column) with a
  dimension table of rows/10 unique keys (one float32 column): ``tmr.join`` with ``strategy="hash"`` and
  ``"broadcast"`` on a 2-worker LocalCluster (host arrays in, the joined rows fetched) vs ``pandas.merge``,
  polars ``join``, DuckDB ``JOIN`` (over pandas frames) and Spark local[2] DataFrame ``join`` (cached, counted
  with ``count()``: nothing collected);
- a many-to-many join of rows/10 × rows/10 rows over rows/100 keys, the same peers;
- PageRank, 20 iterations over a generated power-law graph of rows/10 nodes and ``--rows`` edges:
  ``tmr.recipes.pagerank`` (host edges, and resident ones) vs a scipy.sparse power iteration (CSR built inside the
  timing, as the recipe sorts its edges inside its own) and the Spark RDD PageRank of Spark's examples (local[2]; with
  ``--spark-pagerank``: minutes at 1e7 edges).

Every tfmapreduce result is checked (row count and a checksum against pandas; ranks against scipy) before it is timed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

import tfmapreduce as tmr

from . import _peers
from ._registry import PLOT, Size, benchmark, flag
from ._table import Rows

JOINS = ("with a dimension table", "many-to-many")
"""The two joins' names (the last words of their rows)."""


def tables(
    n: int, distinct: int, dimension: int, seed: int
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """A fact table of ``n`` rows over ``distinct`` keys and a table of ``dimension`` rows (unique keys when
    ``dimension == distinct``, else keys drawn again)."""
    rng = np.random.default_rng(seed)
    fact = (rng.integers(0, distinct, n, dtype=np.int64), rng.random(n, dtype=np.float32))
    keys = rng.permutation(distinct).astype(np.int64) if dimension == distinct else rng.integers(0, distinct, dimension)
    return fact, (keys, rng.random(dimension, dtype=np.float32))


def _check(result: tmr.JoinResult, expected_rows: int, checksum: float) -> None:
    assert len(result) == expected_rows, (len(result), expected_rows)
    got = float(np.dot(result.left.astype(np.float64), result.right.astype(np.float64)))
    assert abs(got - checksum) <= 1e-6 * max(1.0, abs(checksum)), (got, checksum)


def joins(table: Rows, cluster: tmr.LocalCluster, name: str, left: Any, right: Any, peers: frozenset[str], spark: Any) -> None:
    """One join: tfmapreduce's strategies, then each peer, on the same arrays."""
    import pandas as pd  # the reference: pandas.merge

    merged = pd.merge(pd.DataFrame({"key": left[0], "a": left[1]}), pd.DataFrame({"key": right[0], "b": right[1]}), on="key")
    rows, checksum = len(merged), float(np.dot(merged["a"].to_numpy(np.float64), merged["b"].to_numpy(np.float64)))
    del merged
    items = len(left[0]) + len(right[0])
    print(f"{name}: {len(left[0]):.3g} × {len(right[0]):.3g} rows → {rows:.3g} rows", flush=True)
    for strategy in ("hash", "broadcast"):
        _check(tmr.join(left, right, cluster=cluster, strategy=strategy), rows, checksum)
        table.add(
            f"tmr.join strategy={strategy}, 2-worker LocalCluster, {name}",
            lambda s=strategy: tmr.join(left, right, cluster=cluster, strategy=s),
            items,
        )
    _peers.join(table, left, right, name, peers, spark)


def graph(nodes: int, edges: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A power-law directed graph: sources and targets both drawn with a heavy tail (u³ and u² over the nodes), ids shuffled."""
    rng = np.random.default_rng(seed)
    ids = rng.permutation(nodes)
    src = ids[(nodes * rng.random(edges) ** 3).astype(np.int64)]
    dst = ids[(nodes * rng.random(edges) ** 2).astype(np.int64)]
    return src, dst


def pagerank(table: Rows, cluster: tmr.LocalCluster, nodes: int, edges: int, peers: frozenset[str], spark: Any) -> None:
    """PageRank, 20 iterations: the recipe over host and resident edges, checked against scipy where installed; peers."""
    src, dst = graph(nodes, edges)
    print(f"pagerank: {nodes:.3g} nodes, {edges:.3g} edges, 20 iterations", flush=True)
    ours = tmr.recipes.pagerank(src, dst, cluster=cluster)
    if _peers.installed("scipy"):
        ids, rank = _peers.scipy_pagerank(src, dst, 20)
        np.testing.assert_array_equal(ours.keys, ids)
        np.testing.assert_allclose(ours.values, rank, rtol=0, atol=1e-10)
    table.add(
        "tmr.recipes.pagerank, 2-worker LocalCluster (sort of the edges included)",
        lambda: tmr.recipes.pagerank(src, dst, cluster=cluster),
        edges,
    )
    with tmr.scatter(src, cluster=cluster) as resident_src, tmr.scatter(dst, cluster=cluster) as resident_dst:
        np.testing.assert_allclose(tmr.recipes.pagerank(resident_src, resident_dst).values, ours.values, rtol=0, atol=1e-12)
        table.add(
            "tmr.recipes.pagerank over resident edges (numbered and sorted on the workers, included)",
            lambda: tmr.recipes.pagerank(resident_src, resident_dst),
            edges,
        )
    _peers.pagerank(table, src, dst, 20, peers, spark)


def plot(table: Rows, path: str) -> None:
    """One panel per workload (the fact-table join, the many-to-many join, PageRank): each implementation's median
    seconds, its label the row's name without the workload."""
    from ._plots import bar_chart

    panels: dict[str, list[tuple[str, list[float]]]] = {}
    for name, seconds, _ in table.rows:
        label, _, workload = name.rpartition(", ")
        if workload not in JOINS:
            label, workload = name.split(" (")[0], "PageRank, 20 iterations"
        panels.setdefault(workload, []).append((label, [seconds]))
    bar_chart(list(panels.items()), path, unit="seconds")


@benchmark(
    "joins",
    sizes={
        "rows": Size(1e4, 1e7, "rows of the fact table and edges of the graph"),
        "repeats": Size(1, 3, "timed calls per row after one warm-up (median reported)"),
    },
    peers=("pandas", "polars", "duckdb", "spark", "scipy"),
    flags=(flag("--spark-pagerank", action="store_true", help="also time Spark's RDD PageRank (minutes at 1e7 edges)"), PLOT),
)
def run(args: argparse.Namespace) -> None:
    """Measure and print one table (and draw it with ``--plot``)."""
    n = int(args.rows)
    table = Rows(args.repeats)
    with _peers.spark(args.peers) as spark, tmr.LocalCluster(workers=2) as cluster:
        fact, dimension = tables(n, n // 10, n // 10, seed=1)
        joins(table, cluster, JOINS[0], fact, dimension, args.peers, spark)
        del fact, dimension
        many = tables(n // 10, n // 100, n // 10, seed=2)
        joins(table, cluster, JOINS[1], *many, args.peers, spark)
        del many
        pagerank(table, cluster, n // 10, n, args.peers, spark if args.spark_pagerank else None)
    table.print("input rows")
    if args.plot:
        plot(table, args.plot)


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["joins", *sys.argv[1:]]))
