"""Keyed jobs side by side: word count and group-by mean, tfmapreduce vs one process, Spark, dask, pandas, polars, DuckDB.

``python -m benchmarks keyed``:

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
import os
import sys
import tempfile
from typing import Any

import numpy as np

import tfmapreduce as tmr

from . import _peers
from ._registry import PLOT, Size, benchmark, flag
from ._table import Rows

VOCABULARY = 50_000
FILES = 4
WORDS_PER_LINE = 20


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


def as_bytes(counts: Any) -> dict[bytes, int]:
    """A word count's ``to_dict()`` with bytes words (files read by ``tmr.read_text`` give str, shipped bytes lines bytes)."""
    return {w if isinstance(w, bytes) else w.encode(): n for w, n in counts.to_dict().items()}


def read_lines(paths: list[str]) -> np.ndarray:
    lines: list[bytes] = []
    for path in paths:
        with open(path, "rb") as f:
            lines.extend(f.read().splitlines())
    return np.array(lines, dtype=object)


def user_words(lines: Any) -> tuple[Any, Any]:
    """A word count's map as a user writes it: each line's words, and a 1 for each."""
    import tensorflow as tf

    words = tf.strings.split(lines).flat_values
    return words, tf.ones_like(words, dtype=tf.int64)


def word_count(table: Rows, cluster: tmr.LocalCluster, tokens: int, peers: frozenset[str], spark: Any) -> None:
    """Word count over a generated corpus: tfmapreduce (lines shipped; files read on the workers), Counter, peers."""
    with tempfile.TemporaryDirectory() as directory:
        paths = corpus(directory, tokens)
        size = sum(os.path.getsize(p) for p in paths)
        print(f"word count: {tokens:.3g} tokens, {size / 1e6:.0f} MB in {len(paths)} files", flush=True)
        reference = _peers.counter(paths)
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
        table.add("collections.Counter, one process (reads the files)", lambda: _peers.counter(paths), tokens)
        _peers.word_count(table, paths, reference, peers, spark)


def numpy_mean_by_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    distinct, inverse = np.unique(keys, return_inverse=True)
    return distinct, np.bincount(inverse, weights=values) / np.bincount(inverse)


def group_by(table: Rows, cluster: tmr.LocalCluster, n: int, distinct: int, peers: frozenset[str], spark: Any) -> None:
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
    _peers.mean_by_key(table, keys, values, distinct, peers, spark)


@benchmark(
    "keyed",
    sizes={
        "tokens": Size(2e5, 16e6, "word-count tokens (1.6e7: about 80 MB)"),
        "rows": Size(2e5, 5e7, "group-by rows"),
        "repeats": Size(1, 3, "timed calls per row after one warm-up (median reported)"),
    },
    peers=("spark", "dask-bag", "pandas", "polars", "duckdb"),
    flags=(flag("--only", choices=["wordcount", "groupby"], help="run one of the two benchmarks"), PLOT),
)
def run(args: argparse.Namespace) -> None:
    """Measure and print one table (and draw it with ``--plot``)."""
    table = Rows(args.repeats)
    with _peers.spark(args.peers) as spark, tmr.LocalCluster(workers=2) as cluster:
        if args.only in (None, "wordcount"):
            word_count(table, cluster, int(args.tokens), args.peers, spark)
        if args.only in (None, "groupby"):
            for distinct in (10**3, 10**6):
                group_by(table, cluster, int(args.rows), distinct, args.peers, spark)
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
    from ._runner import main

    sys.exit(main(["keyed", *sys.argv[1:]]))
