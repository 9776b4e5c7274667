"""Keyed jobs side by side in one run: word count and group-by mean, tfmapreduce vs one-process and peers.

``python -m benchmarks.keyed`` (see ``--help``):

- word count over a generated Zipf corpus (50k-word vocabulary, ``--tokens`` tokens, 4 files):
  ``tmr.recipes.word_count`` on a 2-worker LocalCluster (the lines read on the client and
  shipped), ``collections.Counter`` in one process, Spark local[2] (RDD ``reduceByKey`` and
  DataFrame ``groupBy().count()``, warm) and ``dask.bag`` ``frequencies`` (when installed);
- group-by mean over ``--rows`` rows, int64 keys with 1e3 and 1e6 distinct values and float32
  values: ``tmr.mean_by_key`` over resident data vs numpy (``np.unique(return_inverse=True)`` +
  ``np.bincount``), pandas ``groupby().mean()`` and Spark DataFrame ``groupBy().avg()`` (data
  cached in Spark).

Every tfmapreduce result is checked against the one-process result before it is timed.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import tfmapreduce as tmr

VOCABULARY = 50_000
FILES = 4
WORDS_PER_LINE = 20


def timed(fn: Callable[[], Any], repeats: int, label: str = "") -> float:
    """Median seconds of ``repeats`` calls, after one warm-up call (printed as it goes)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    print(f"  {label or getattr(fn, '__name__', 'call')}: {statistics.median(times):.2f} s (median of {repeats})", flush=True)
    return statistics.median(times)


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


def word_count(cluster: tmr.LocalCluster, tokens: int, repeats: int, peers: bool, spark: Any) -> list[tuple[str, float]]:
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as directory:
        paths = corpus(directory, tokens)
        size = sum(os.path.getsize(p) for p in paths)
        print(f"word count: {tokens:.3g} tokens, {size / 1e6:.0f} MB in {len(paths)} files", flush=True)
        reference = counter(paths)
        lines = read_lines(paths)
        result = tmr.recipes.word_count(lines, cluster=cluster)
        assert result.to_dict() == reference, "tfmapreduce word count differs from collections.Counter"
        rows.append(
            (
                "tmr.recipes.word_count, lines in memory shipped to a 2-worker LocalCluster",
                timed(lambda: tmr.recipes.word_count(lines, cluster=cluster), repeats, "tmr word_count, lines shipped"),
            )
        )
        files = tmr.read_text(paths)
        assert tmr.recipes.word_count(files, cluster=cluster).to_dict() == reference, "word count over files differs from Counter"
        rows.append(
            (
                "tmr.recipes.word_count(tmr.read_text(...)), 2-worker LocalCluster (files read on the workers)",
                timed(
                    lambda: tmr.recipes.word_count(files, cluster=cluster), repeats, "tmr word_count, read_text on the workers"
                ),
            )
        )
        rows.append(
            (
                "collections.Counter, one process (reads the files)",
                timed(lambda: counter(paths), repeats, "collections.Counter, one process (reads the files)"),
            )
        )
        if peers and spark is not None:
            from operator import add

            from pyspark.sql import functions as F

            sc = spark.sparkContext

            def rdd() -> Any:
                return (
                    sc.textFile(",".join(paths))
                    .flatMap(lambda line: line.split())
                    .map(lambda w: (w, 1))
                    .reduceByKey(add)
                    .collect()
                )

            assert dict(rdd()) == {k.decode(): v for k, v in reference.items()}
            rows.append(("Spark local[2] RDD reduceByKey (warm)", timed(rdd, repeats, "Spark local[2] RDD reduceByKey (warm)")))

            def df() -> Any:
                return (
                    spark.read.text(paths)
                    .select(F.explode(F.split(F.trim("value"), r"\s+")).alias("w"))
                    .groupBy("w")
                    .count()
                    .collect()
                )

            rows.append(
                (
                    "Spark local[2] DataFrame groupBy().count() (warm)",
                    timed(df, repeats, "Spark local[2] DataFrame groupBy().count() (warm)"),
                )
            )
        if peers:
            try:
                import dask.bag as db
            except ImportError:
                db = None
            if db is not None:

                def bag() -> Any:
                    return dict(
                        db.read_text(paths, blocksize=None)
                        .str.split()
                        .flatten()
                        .frequencies()
                        .compute(scheduler="processes", num_workers=2)
                    )

                rows.append(
                    ("dask.bag frequencies, 2 processes", timed(bag, max(1, repeats // 2), "dask.bag frequencies, 2 processes"))
                )
    return rows


def numpy_mean_by_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    distinct, inverse = np.unique(keys, return_inverse=True)
    return distinct, np.bincount(inverse, weights=values) / np.bincount(inverse)


def group_by(cluster: tmr.LocalCluster, n: int, distinct: int, repeats: int, peers: bool, spark: Any) -> list[tuple[str, float]]:
    rng = np.random.default_rng(distinct)
    keys = rng.integers(0, distinct, n, dtype=np.int64)
    values = rng.random(n, dtype=np.float32)
    rows: list[tuple[str, float]] = []
    with tmr.scatter(keys, cluster=cluster) as kd, tmr.scatter(values, cluster=cluster) as vd:
        ours = tmr.mean_by_key(kd, vd)
        ref_keys, ref_means = numpy_mean_by_key(keys, values.astype(np.float64))
        np.testing.assert_array_equal(ours.keys, ref_keys)
        np.testing.assert_allclose(ours.values, ref_means, rtol=1e-6)
        rows.append(
            (
                f"tmr.mean_by_key, resident, 2-worker LocalCluster, {distinct:.0e} keys",
                timed(lambda: tmr.mean_by_key(kd, vd), repeats),
            )
        )
        rows.append(
            (
                f"tmr.mean_by_key, resident, result kept resident, {distinct:.0e} keys",
                timed(lambda: tmr.mean_by_key(kd, vd, resident=True).delete(), repeats),
            )
        )
    rows.append(
        (f"numpy unique(return_inverse) + bincount, {distinct:.0e} keys", timed(lambda: numpy_mean_by_key(keys, values), 1))
    )
    if peers:
        try:
            import pandas as pd
        except ImportError:
            pd = None
        if pd is not None:
            frame = pd.DataFrame({"k": keys, "v": values})
            rows.append(
                (
                    f"pandas groupby().mean(), {distinct:.0e} keys",
                    timed(lambda: frame.groupby("k")["v"].mean(), repeats, f"pandas groupby().mean(), {distinct:.0e} keys"),
                )
            )
            del frame
        if spark is not None:
            from pyspark.sql import functions as F

            frame = (
                spark.range(n).select((F.xxhash64("id") % distinct).alias("k"), F.rand(seed=0).cast("float").alias("v")).cache()
            )
            frame.count()
            rows.append(
                (
                    f"Spark local[2] DataFrame groupBy().avg(), cached, {distinct:.0e} keys",
                    timed(lambda: frame.groupBy("k").avg("v").collect(), max(1, repeats // 2)),
                )
            )
            frame.unpersist()
    return rows


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, measure, and print one table."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.keyed", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="1e6 tokens and 1e6 rows, 1 repeat, no peers: a smoke run in well under a minute"
    )
    parser.add_argument("--tokens", type=float, default=16e6, help="word-count tokens (default 1.6e7, about 80 MB)")
    parser.add_argument("--rows", type=float, default=5e7, help="group-by rows (default 5e7)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per row after one warm-up (median reported)")
    parser.add_argument("--no-peers", dest="peers", action="store_false", help="skip Spark, dask and pandas")
    parser.add_argument("--only", choices=["wordcount", "groupby"], help="run one of the two benchmarks")
    parser.add_argument("--plot", metavar="PNG", help="also draw the table as a bar chart (seconds) into this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.tokens, args.rows, args.repeats, args.peers = 1e6, 1e6, 1, False
    spark = spark_session() if args.peers else None
    rows: list[tuple[str, float]] = []
    try:
        with tmr.LocalCluster(workers=2) as cluster:
            if args.only in (None, "wordcount"):
                rows += word_count(cluster, int(args.tokens), args.repeats, args.peers, spark)
            if args.only in (None, "groupby"):
                for distinct in (10**3, 10**6):
                    rows += group_by(cluster, int(args.rows), distinct, args.repeats, args.peers, spark)
    finally:
        if spark is not None:
            spark.stop()
    print("\n| implementation | seconds | tokens or rows per second |\n|---|---|---|")
    for name, seconds in rows:
        items = (
            args.tokens
            if "word" in name.lower() or "Counter" in name or "RDD" in name or "count()" in name or "dask" in name
            else args.rows
        )
        print(f"| {name} | {seconds:.2f} | {items / seconds:.3g} |")
    if args.plot:
        plot(rows, args.plot)


def plot(rows: list[tuple[str, float]], path: str) -> None:
    """The table as bar charts (word count; group-by per key count), seconds per implementation, tfmapreduce in blue."""
    from ._plots import bar_chart

    panels = [("word count, 1.6e7 tokens", [r for r in rows if "keys" not in r[0]])]
    panels += [("group-by mean, " + k + " keys", [r for r in rows if r[0].endswith(k + " keys")]) for k in ("1e+03", "1e+06")]
    short = lambda name: ", ".join(p for p in name.split(", ") if "keys" not in p and "LocalCluster" not in p)  # noqa: E731
    bar_chart([(title, [(short(n), [t]) for n, t in part]) for title, part in panels if part], path, unit="seconds")


if __name__ == "__main__":
    main()
