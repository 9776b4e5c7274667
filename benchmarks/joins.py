"""Joins and PageRank side by side in one run: tfmapreduce vs pandas, polars, DuckDB, Spark and scipy.

``python -m benchmarks.joins`` (see ``--help``):

- an inner join of ``--rows`` rows (default 1e7; int64 keys over rows/10 distinct, one float32 column) with a
  dimension table of rows/10 unique keys (one float32 column): ``tmr.join`` with ``strategy="hash"`` and
  ``"broadcast"`` on a 2-worker LocalCluster (host arrays in, the joined rows fetched) vs ``pandas.merge``,
  polars ``join``, DuckDB ``JOIN`` (over the numpy arrays) and Spark local[2] DataFrame ``join`` (cached, counted
  with ``count()``: nothing collected);
- a many-to-many join of rows/10 × rows/10 rows over rows/100 keys, the same peers;
- PageRank, 20 iterations over a generated power-law graph of rows/10 nodes and ``--rows`` edges:
  ``tmr.recipes.pagerank`` (host edges, and resident ones) vs a scipy.sparse power iteration (CSR built inside the
  timing, as the recipe sorts its edges inside its own) and the Spark RDD PageRank of Spark's examples (local[2]; with ``--spark-pagerank``:
  minutes at 1e7 edges).

Every tfmapreduce result is checked (row count and a checksum against pandas; ranks against scipy) before it is timed.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

import tfmapreduce as tmr

from .keyed import Rows, _importable, spark_session

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


def joins(table: Rows, cluster: tmr.LocalCluster, name: str, left: Any, right: Any, peers: bool, spark: Any) -> None:
    """One join: tfmapreduce's strategies, then each peer, on the same arrays."""
    import pandas as pd

    frames = pd.DataFrame({"key": left[0], "a": left[1]}), pd.DataFrame({"key": right[0], "b": right[1]})
    merged = pd.merge(*frames, on="key")
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
    if not peers:
        return
    table.add(f"pandas.merge, {name}", lambda: pd.merge(*frames, on="key"), items)
    if _importable("polars"):
        import polars as pl

        pl_left, pl_right = pl.DataFrame({"key": left[0], "a": left[1]}), pl.DataFrame({"key": right[0], "b": right[1]})
        table.add(f"polars join, {name}", lambda: pl_left.join(pl_right, on="key"), items)
    if _importable("duckdb"):
        import duckdb

        con = duckdb.connect()
        con.register("l", frames[0])
        con.register("r", frames[1])
        table.add(
            f"DuckDB JOIN (fetched as numpy), {name}",
            lambda: con.execute("SELECT * FROM l JOIN r USING (key)").fetchnumpy(),
            items,
        )
        con.close()
    if spark is not None:
        sl, sr = (spark.createDataFrame(f).cache() for f in frames)
        sl.count(), sr.count()
        table.add(
            f"Spark local[2] DataFrame join, cached, count(), {name}",
            lambda: sl.join(sr, "key").count(),
            items,
            max(1, table.repeats // 2),
        )
        sl.unpersist(), sr.unpersist()


def graph(nodes: int, edges: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A power-law directed graph: sources and targets both drawn with a heavy tail (u³ and u² over the nodes), ids shuffled."""
    rng = np.random.default_rng(seed)
    ids = rng.permutation(nodes)
    src = ids[(nodes * rng.random(edges) ** 3).astype(np.int64)]
    dst = ids[(nodes * rng.random(edges) ** 2).astype(np.int64)]
    return src, dst


def scipy_pagerank(src: np.ndarray, dst: np.ndarray, iters: int, damping: float = 0.85) -> tuple[np.ndarray, np.ndarray]:
    import scipy.sparse as sp

    nodes, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    n, s, d = len(nodes), inverse[: len(src)], inverse[len(src) :]
    out = np.bincount(s, minlength=n).astype(np.float64)
    share = np.divide(1.0, out, out=np.zeros(n), where=out > 0)
    matrix = sp.csr_matrix((share[s], (d, s)), shape=(n, n))
    rank, dangling = np.full(n, 1.0 / n), out == 0
    for _ in range(iters):
        rank = (1 - damping) / n + damping * (matrix @ rank + rank[dangling].sum() / n)
    return nodes, rank


def spark_pagerank(spark: Any, src: np.ndarray, dst: np.ndarray, iters: int) -> None:
    """Spark's examples/src/main/python/pagerank.py over the same edges (its own definition: no dangling redistribution)."""
    sc = spark.sparkContext
    links = sc.parallelize(list(zip(src.tolist(), dst.tolist(), strict=True)), 4).distinct().groupByKey().cache()
    ranks = links.map(lambda u: (u[0], 1.0))
    for _ in range(iters):
        contribs = links.join(ranks).flatMap(lambda u: [(v, u[1][1] / len(u[1][0])) for v in u[1][0]])
        ranks = contribs.reduceByKey(lambda a, b: a + b).mapValues(lambda r: r * 0.85 + 0.15)
    ranks.count()


def pagerank(table: Rows, cluster: tmr.LocalCluster, nodes: int, edges: int, peers: bool, spark: Any) -> None:
    src, dst = graph(nodes, edges)
    print(f"pagerank: {nodes:.3g} nodes, {edges:.3g} edges, 20 iterations", flush=True)
    ours = tmr.recipes.pagerank(src, dst, cluster=cluster)
    if _importable("scipy"):
        ids, rank = scipy_pagerank(src, dst, 20)
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
    if peers and _importable("scipy"):
        table.add("scipy.sparse power iteration, one process (CSR built included)", lambda: scipy_pagerank(src, dst, 20), edges)
    if peers and spark is not None:
        table.add("Spark local[2] RDD PageRank (Spark's example)", lambda: spark_pagerank(spark, src, dst, 20), edges, 1)


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


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, measure, and print one table."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.joins", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="1e4 rows, 1 repeat, no peers: a smoke run")
    parser.add_argument("--rows", type=float, default=1e7, help="rows of the fact table and edges of the graph (default 1e7)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per row after one warm-up (median reported)")
    parser.add_argument("--no-peers", dest="peers", action="store_false", help="skip pandas, polars, DuckDB, Spark and scipy")
    parser.add_argument("--no-spark", dest="spark", action="store_false", help="skip Spark (its start takes ~10 s)")
    parser.add_argument("--spark-pagerank", action="store_true", help="also time Spark's RDD PageRank (minutes at 1e7 edges)")
    parser.add_argument("--plot", metavar="PNG", help="also draw the medians as bar charts into this file (needs matplotlib)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.repeats, args.peers = 1e4, 1, False
    n = int(args.rows)
    spark = spark_session() if args.peers and args.spark else None
    table = Rows(args.repeats)
    try:
        with tmr.LocalCluster(workers=2) as cluster:
            fact, dimension = tables(n, n // 10, n // 10, seed=1)
            joins(table, cluster, JOINS[0], fact, dimension, args.peers, spark)
            del fact, dimension
            many = tables(n // 10, n // 100, n // 10, seed=2)
            joins(table, cluster, JOINS[1], *many, args.peers, spark)
            del many
            pagerank(table, cluster, n // 10, n, args.peers, spark if args.spark_pagerank else None)
    finally:
        if spark is not None:
            spark.stop()
    table.print("input rows")
    if args.plot:
        plot(table, args.plot)


if __name__ == "__main__":
    main()
