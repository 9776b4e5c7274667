"""Map-only jobs that write their rows, side by side: tfmapreduce vs pandas, polars, Spark, numpy and tf.io.

``python -m benchmarks outputs``:

- Scan (HiBench's projection): ``--rows`` rows (default 1e7) of an 8-column CSV of floats in 4 files; keep columns
  c1 and c2 of the rows where c0 > 0.5 and write them. ``tmr.map`` over ``tmr.read_csv`` (2-worker LocalCluster,
  the kept rows resident) then ``tmr.write_npy`` (one ``.npy`` part per shard) vs ``pandas.read_csv`` (``usecols``)
  → filter → ``np.save``, polars ``scan_csv`` → filter → select → ``np.save``, and Spark local[2] DataFrame
  ``read.csv`` (a schema given) → ``filter`` → ``select`` → ``write.parquet`` (Spark writes no ``.npy``);
- write throughput: ``--gigabytes`` (default 1) of resident float32 rows of 256 values (scattered once)
  written by ``tmr.write_npy`` and ``tmr.write_tfrecord`` vs ``np.save`` of the same array and a
  ``tf.io.TFRecordWriter`` loop of one ``tf.train.Example`` per row, in one process.

Every tfmapreduce output is read back and checked against the one-process result before it is timed.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import tempfile
from typing import Any

import numpy as np

import tfmapreduce as tmr

from . import _peers
from ._registry import Size, benchmark
from ._table import Rows

COLUMNS = [f"c{i}" for i in range(8)]
FILES = 4
ROW = 256
"""Float32 values per row of the write benchmark (1 KiB rows: a ``tf.train.Example`` each)."""


def write_csv_files(directory: str, rows: int, seed: int = 0) -> list[str]:
    """``rows`` rows of 8 columns of floats with 4 decimals in [0, 1), split over :data:`FILES` CSV files; their paths."""
    rng = np.random.default_rng(seed)
    paths = []
    for i, n in enumerate(np.diff(np.linspace(0, rows, FILES + 1).astype(np.int64))):
        values = rng.integers(0, 10_000, (int(n), len(COLUMNS))) / 10_000
        path = os.path.join(directory, f"part-{i}.csv")
        if _peers.installed("polars"):
            import polars as pl

            pl.DataFrame(values, schema=COLUMNS).write_csv(path)
        else:
            np.savetxt(path, values, fmt="%.4f", delimiter=",", header=",".join(COLUMNS), comments="")
        paths.append(path)
    return paths


def _parts(directory: str) -> np.ndarray:
    return np.concatenate([np.load(p) for p in sorted(glob.glob(os.path.join(directory, "part-*.npy")))])


def scan(table: Rows, cluster: tmr.LocalCluster, directory: str, rows: int, peers: frozenset[str], spark: Any) -> None:
    """The Scan: read, filter, project, write; every implementation over the same files."""
    import tensorflow as tf

    paths = write_csv_files(directory, rows)
    out = os.path.join(directory, "out")
    print(
        f"scan: {rows:.3g} rows × 8 columns in {FILES} CSV files, {sum(os.path.getsize(p) for p in paths) / 1e6:.0f} MB",
        flush=True,
    )

    def tmr_scan() -> tmr.Written:
        source = tmr.read_csv(paths, columns=["c0", "c1", "c2"])
        with tmr.map(lambda t: tf.boolean_mask(t[:, 1:], t[:, 0] > 0.5), source, cluster=cluster) as kept:
            return tmr.write_npy(kept, out, overwrite=True)

    _peers.pandas_scan(paths, os.path.join(directory, "pandas.npy"))  # the reference
    tmr_scan()
    np.testing.assert_allclose(_parts(out), np.load(os.path.join(directory, "pandas.npy")), rtol=1e-7)  # parsed once each
    table.add("tmr.map(read_csv) → tmr.write_npy, 2-worker LocalCluster", tmr_scan, rows)
    _peers.scan(table, paths, COLUMNS, rows, directory, peers, spark)


def writes(table: Rows, cluster: tmr.LocalCluster, directory: str, gigabytes: float, peers: frozenset[str]) -> None:
    """Write throughput of resident float32 rows: the writers vs one process."""
    import tensorflow as tf

    rows = max(FILES, int(gigabytes * 1e9 / (4 * ROW)))
    x = np.random.default_rng(1).random((rows, ROW), dtype=np.float32)
    print(f"writes: {x.nbytes / 1e9:.3g} GB of resident float32 rows of {ROW} values", flush=True)
    npy, records = os.path.join(directory, "npy"), os.path.join(directory, "tfrecord")
    with tmr.scatter(x, cluster=cluster) as data:
        tmr.write_npy(data, npy, overwrite=True)
        np.testing.assert_array_equal(_parts(npy), x)
        written = tmr.write_tfrecord(data, records, features=["x"], overwrite=True)
        spec = {"x": tf.io.FixedLenFeature([ROW], tf.float32)}
        with tmr.read_tfrecord(written.directory, features=spec).persist(cluster=cluster) as back:
            np.testing.assert_array_equal(back.gather(), x)
        table.add("tmr.write_npy, resident, 2-worker LocalCluster", lambda: tmr.write_npy(data, npy, overwrite=True), x.nbytes)
        table.add(
            "tmr.write_tfrecord, resident, 2-worker LocalCluster",
            lambda: tmr.write_tfrecord(data, records, features=["x"], overwrite=True),
            x.nbytes,
        )
    _peers.one_process_writes(table, x, directory, peers)


@benchmark(
    "outputs",
    sizes={
        "rows": Size(1e4, 1e7, "rows of the Scan's CSV"),
        "gigabytes": Size(1e-3, 1.0, "resident float32 data the writers write"),
        "repeats": Size(1, 3, "timed calls per row after one warm-up (median reported)"),
    },
    peers=("pandas", "polars", "spark", "one-process"),
)
def run(args: argparse.Namespace) -> None:
    """Measure and print the two tables."""
    directory = tempfile.mkdtemp(prefix="tmr-outputs-bench-")
    scans, throughput = Rows(args.repeats), Rows(args.repeats)
    try:
        with _peers.spark(args.peers) as spark, tmr.LocalCluster(workers=2) as cluster:
            scan(scans, cluster, directory, int(args.rows), args.peers, spark)
            writes(throughput, cluster, directory, args.gigabytes, args.peers)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    scans.print("input rows")
    throughput.print("bytes")


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["outputs", *sys.argv[1:]]))
