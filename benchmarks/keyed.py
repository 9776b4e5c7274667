"""Keyed jobs side by side in one run: word count and group-by mean, tfmapreduce vs one-process and peers.

``python -m benchmarks.keyed`` (see ``--help``):

- word count over a generated Zipf corpus (50k-word vocabulary, ``--tokens`` tokens, 4 files):
  ``tmr.recipes.word_count`` on a 2-worker LocalCluster (the lines read on the client and
  shipped; ``tmr.read_text``, the files read on the workers), the same count as a user writes it
  (a ``tf.strings.split`` map and ``tmr.combiners.sum``, by key), ``collections.Counter`` in one process, Spark local[2] (RDD ``reduceByKey`` and
  DataFrame ``groupBy().count()``, warm) and ``dask.bag`` ``frequencies`` (when installed);
- group-by mean over ``--rows`` rows, int64 keys with 1e3 and 1e6 distinct values and float32
  values: ``tmr.mean_by_key`` over resident data vs numpy (``np.unique(return_inverse=True)`` +
  ``np.bincount``), pandas ``groupby().mean()``, polars ``group_by().agg(mean)``, DuckDB ``GROUP BY``
  (a table in its own storage) and Spark DataFrame ``groupBy().avg()`` (data cached in Spark).

Every tfmapreduce result is checked against the one-process result before it is timed.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import os
import shutil
import statistics
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

import tfmapreduce as tmr

from ._timing import repeat

VOCABULARY = 50_000
FILES = 4
WORDS_PER_LINE = 20


class Rows:
    """The table: ``(implementation, median seconds, items)`` per row, each timed and printed as it is added."""

    def __init__(self, repeats: int):
        self.repeats = repeats
        self.rows: list[tuple[str, float, float]] = []

    def add(self, name: str, fn: Callable[[], Any], items: float, repeats: int | None = None) -> None:
        """Time ``fn``: the median of ``repeats`` (default: the table's) calls after one warm-up call."""
        times, _ = repeat(fn, self.repeats if repeats is None else repeats)
        self.rows.append((name, statistics.median(times), items))
        print(f"  {name}: {statistics.median(times):.2f} s (median of {len(times)})", flush=True)

    def print(self, items: str) -> None:
        """The table in Markdown: each row's seconds, and ``items`` (what its count counts) per second."""
        print(f"\n| implementation | seconds | {items} per second |\n|---|---|---|")
        for name, seconds, count in self.rows:
            print(f"| {name} | {seconds:.2f} | {count / seconds:.3g} |")


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def corpus(directory: str, tokens: int, seed: int = 0) -> list[str]:
    """Write a Zipf corpus (``tokens`` words of a 50k-word vocabulary, s = 1) as 4 text files; their paths."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(2, 9, VOCABULARY)
    vocabulary = np.array(sorted({"".join(rng.choice(letters, n)) for n in lengths}), dtype=object)
    p = 1.0 / np.arange(1, len(vocabulary) + 1)
    words = vocabulary[rng.choice(len(vocabulary), tokens, p=p / p.sum())]
    paths = []
    for i, part in enumerate(np.array_split(words, FILES)):
        path = os.path.join(directory, f"part-{i}.txt")
        with open(path, "w", encoding="ascii") as f:
            for start in range(0, len(part), WORDS_PER_LINE):
                f.write(" ".join(part[start : start + WORDS_PER_LINE]) + "\n")
        paths.append(path)
    return paths


def counter(paths: list[str]) -> collections.Counter[bytes]:
    """The one-process reference: collections.Counter over each file's words."""
    counts: collections.Counter[bytes] = collections.Counter()
    for path in paths:
        with open(path, "rb") as f:
            counts.update(f.read().split())
    return counts


def as_bytes(counts: Any) -> dict[bytes, int]:
    """A word count's ``to_dict()`` with bytes words (files read by ``tmr.read_text`` give str, shipped bytes lines bytes)."""
    return {w if isinstance(w, bytes) else w.encode(): n for w, n in counts.to_dict().items()}


def read_lines(paths: list[str]) -> np.ndarray:
    lines: list[bytes] = []
    for path in paths:
        with open(path, "rb") as f:
            lines.extend(f.read().splitlines())
    return np.array(lines, dtype=object)


def spark_session() -> Any:
    """A local[2] SparkSession, or None without pyspark or Java."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return None
    return (
        SparkSession.builder.master("local[2]")
        .appName("tfmapreduce-keyed-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "6g")
        .getOrCreate()
    )


def user_words(lines: Any) -> tuple[Any, Any]:
    """A word count's map as a user writes it: each line's words, and a 1 for each."""
    import tensorflow as tf

    words = tf.strings.split(lines).flat_values
    return words, tf.ones_like(words, dtype=tf.int64)


def word_count(table: Rows, cluster: tmr.LocalCluster, tokens: int, peers: bool, spark: Any) -> None:
    """Word count over a generated corpus: tfmapreduce (lines shipped; files read on the workers), Counter, peers."""
    with tempfile.TemporaryDirectory() as directory:
        paths = corpus(directory, tokens)
        size = sum(os.path.getsize(p) for p in paths)
        print(f"word count: {tokens:.3g} tokens, {size / 1e6:.0f} MB in {len(paths)} files", flush=True)
        reference = counter(paths)
        lines, files = read_lines(paths), tmr.read_text(paths)
        for data, what in ((lines, "lines"), (files, "files")):
            assert as_bytes(tmr.recipes.word_count(data, cluster=cluster)) == reference, f"word count over {what} != Counter"
        shipped = "tmr.recipes.word_count, lines in memory shipped to a 2-worker LocalCluster"
        table.add(shipped, lambda: tmr.recipes.word_count(lines, cluster=cluster), tokens)
        read = "tmr.recipes.word_count(tmr.read_text(...)), 2-worker LocalCluster (files read on the workers)"
        table.add(read, lambda: tmr.recipes.word_count(files, cluster=cluster), tokens)
        user = tmr.MapReduce(user_words, tmr.combiners.sum, by_key=True)
        assert as_bytes(user.run(files, cluster=cluster)) == reference, "the user-written word count != Counter"
        table.add(
            "user-written word count: tf.strings.split map + combiners.sum over tmr.read_text(...), 2-worker LocalCluster",
            lambda: user.run(files, cluster=cluster),
            tokens,
        )
        table.add("collections.Counter, one process (reads the files)", lambda: counter(paths), tokens)
        if peers and spark is not None:
            from operator import add

            from pyspark.sql import functions as F

            def rdd() -> Any:
                text = spark.sparkContext.textFile(",".join(paths))
                return text.flatMap(lambda line: line.split()).map(lambda w: (w, 1)).reduceByKey(add).collect()

            def df() -> Any:
                words = spark.read.text(paths).select(F.explode(F.split(F.trim("value"), r"\s+")).alias("w"))
                return words.groupBy("w").count().collect()

            assert dict(rdd()) == {k.decode(): v for k, v in reference.items()}
            table.add("Spark local[2] RDD reduceByKey (warm)", rdd, tokens)
            table.add("Spark local[2] DataFrame groupBy().count() (warm)", df, tokens)
        if peers and _importable("dask.bag"):
            import dask.bag as db

            def bag() -> Any:
                words = db.read_text(paths, blocksize=None).str.split().flatten()
                return dict(words.frequencies().compute(scheduler="processes", num_workers=2))

            table.add("dask.bag frequencies, 2 processes", bag, tokens, max(1, table.repeats // 2))


def numpy_mean_by_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    distinct, inverse = np.unique(keys, return_inverse=True)
    return distinct, np.bincount(inverse, weights=values) / np.bincount(inverse)


def group_by(table: Rows, cluster: tmr.LocalCluster, n: int, distinct: int, peers: bool, spark: Any) -> None:
    """Group-by mean of ``n`` float32 values over ``distinct`` int64 keys: tmr.mean_by_key (resident), numpy, peers."""
    rng = np.random.default_rng(distinct)
    keys = rng.integers(0, distinct, n, dtype=np.int64)
    values = rng.random(n, dtype=np.float32)
    k = f"{distinct:.0e} keys"
    with tmr.scatter(keys, cluster=cluster) as kd, tmr.scatter(values, cluster=cluster) as vd:
        ours = tmr.mean_by_key(kd, vd)
        ref_keys, ref_means = numpy_mean_by_key(keys, values.astype(np.float64))
        np.testing.assert_array_equal(ours.keys, ref_keys)
        np.testing.assert_allclose(ours.values, ref_means, rtol=1e-6)
        table.add(f"tmr.mean_by_key, resident, 2-worker LocalCluster, {k}", lambda: tmr.mean_by_key(kd, vd), n)
        kept = lambda: tmr.mean_by_key(kd, vd, resident=True).delete()  # noqa: E731
        table.add(f"tmr.mean_by_key, resident, result kept resident, {k}", kept, n)
    table.add(f"numpy unique(return_inverse) + bincount, {k}", lambda: numpy_mean_by_key(keys, values), n, 1)
    if peers and _importable("pandas"):
        import pandas as pd

        frame = pd.DataFrame({"k": keys, "v": values})
        table.add(f"pandas groupby().mean(), {k}", lambda: frame.groupby("k")["v"].mean(), n)
        del frame
    if peers and _importable("polars"):
        import polars as pl

        frame = pl.DataFrame({"k": keys, "v": values})
        table.add(f"polars group_by().agg(mean), {k}", lambda: frame.group_by("k").agg(pl.col("v").mean()), n)
        del frame
    if peers and _importable("duckdb") and _importable("pandas"):
        import duckdb
        import pandas as pd

        con = duckdb.connect()
        con.register("t", pd.DataFrame({"k": keys, "v": values}))
        con.execute("CREATE TABLE g AS SELECT * FROM t")  # DuckDB's own storage: not a scan of the numpy arrays
        table.add(f"DuckDB GROUP BY avg, {k}", lambda: con.execute("SELECT k, avg(v) FROM g GROUP BY k").fetchnumpy(), n)
        con.close()
    if peers and spark is not None:
        from pyspark.sql import functions as F

        cached = spark.range(n).select((F.xxhash64("id") % distinct).alias("k"), F.rand(seed=0).cast("float").alias("v")).cache()
        cached.count()
        avg = lambda: cached.groupBy("k").avg("v").collect()  # noqa: E731
        table.add(f"Spark local[2] DataFrame groupBy().avg(), cached, {k}", avg, n, max(1, table.repeats // 2))
        cached.unpersist()


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, measure, and print one table."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.keyed", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="2e5 tokens and 2e5 rows, 1 repeat, no peers: a smoke run in seconds"
    )
    parser.add_argument("--tokens", type=float, default=16e6, help="word-count tokens (default 1.6e7, about 80 MB)")
    parser.add_argument("--rows", type=float, default=5e7, help="group-by rows (default 5e7)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per row after one warm-up (median reported)")
    parser.add_argument("--no-peers", dest="peers", action="store_false", help="skip Spark, dask and pandas")
    parser.add_argument("--only", choices=["wordcount", "groupby"], help="run one of the two benchmarks")
    parser.add_argument("--plot", metavar="PNG", help="also draw the table as a bar chart (seconds) into this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.tokens, args.rows, args.repeats, args.peers = 2e5, 2e5, 1, False
    spark = spark_session() if args.peers else None
    table = Rows(args.repeats)
    try:
        with tmr.LocalCluster(workers=2) as cluster:
            if args.only in (None, "wordcount"):
                word_count(table, cluster, int(args.tokens), args.peers, spark)
            if args.only in (None, "groupby"):
                for distinct in (10**3, 10**6):
                    group_by(table, cluster, int(args.rows), distinct, args.peers, spark)
    finally:
        if spark is not None:
            spark.stop()
    table.print("tokens or rows")
    if args.plot:
        plot(table.rows, args.plot, args.tokens)


def plot(rows: list[tuple[str, float, float]], path: str, tokens: float) -> None:
    """The table as bar charts (word count; group-by per key count), seconds per implementation, tfmapreduce in blue."""
    from ._plots import bar_chart

    panels = [(f"word count, {tokens:.2g} tokens", [r for r in rows if "keys" not in r[0]])]
    panels += [("group-by mean, " + k + " keys", [r for r in rows if r[0].endswith(k + " keys")]) for k in ("1e+03", "1e+06")]
    short = lambda name: ", ".join(p for p in name.split(", ") if "keys" not in p and "LocalCluster" not in p)  # noqa: E731
    bar_chart([(title, [(short(n), [t]) for n, t, _ in part]) for title, part in panels if part], path, unit="seconds")


if __name__ == "__main__":
    main()
