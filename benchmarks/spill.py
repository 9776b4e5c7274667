"""Data larger than memory: a TeraSort-like spilled sort within a budget of a quarter of the data, vs GNU sort and Spark.

``python -m benchmarks spill``:

- ``--records`` (default 2e6) records of 100 bytes, TeraGen's shape: a random 10-byte key and a 90-byte payload.  The
  spilled sort writes ``.npy`` parts, which hold numbers: a record's key is its first 8 bytes as an order-preserving
  int64 (big-endian, sign bit flipped), its last 2 key bytes travel with the 90-byte payload (a 92-byte uint8 row);
  equal 8-byte prefixes (none among random keys of this size: checked) keep their input order.
- ``tmr.sort_by_key(keys, payload, max_bytes=B, directory=..., spill_dir=...)`` over the records resident on a
  2-worker LocalCluster, B a quarter of the data's bytes: each reducer sorts one bucket at a time within B, through
  its worker's disk; the parts are checked against ``np.lexsort`` of the same records before the time is reported.
- GNU ``sort -S B --parallel=2`` (``LC_ALL=C``, temporary files beside the input) over the same records as text lines
  (the 100 bytes in hex: byte order is line order), file to file.
- Spark local[2] ``rdd.sortByKey(numPartitions=4).count()`` over the same records as cached (key, payload) byte
  pairs, when pyspark and Java are present (the JVM's own heap, not B: a JVM does not start within B at this size).

The largest worker's resident memory once the input is resident (``VmRSS``), and its peak during the spilled sort
(``VmHWM``, reset through ``/proc/PID/clear_refs`` just before) are printed.
Each is run once after a warm-up of the tfmapreduce path on a small input; seconds and MB/s are printed as one table.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import tfmapreduce as tmr

from . import _peers
from ._registry import Size, benchmark

RECORD, PREFIX = 100, 8
"""A record's bytes, and the key bytes that make its int64 sort key."""


def records(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` random records: their bytes (n, 100), their int64 keys, their payloads (the other 92 bytes)."""
    raw = np.random.default_rng(0).integers(0, 256, (n, RECORD), dtype=np.uint8)
    keys = (raw[:, :PREFIX].copy().view(">u8").ravel() ^ np.uint64(1 << 63)).astype(np.uint64).view(np.int64)
    return raw, keys, np.ascontiguousarray(raw[:, PREFIX:])


def spilled(cluster: tmr.LocalCluster, keys: np.ndarray, payload: np.ndarray, budget: int, work: Path) -> float:
    """Seconds of the spilled sort of the resident records; its output checked against numpy."""
    out, spill = work / "out", work / "spill"
    spill.mkdir(exist_ok=True)
    with tmr.scatter(keys, cluster=cluster) as k, tmr.scatter(payload, cluster=cluster) as v:
        reset, held = _reset_peaks(cluster.pids), _memory(cluster.pids, "VmRSS")
        start = time.perf_counter()
        wk, wv = tmr.sort_by_key(k, v, max_bytes=budget, directory=out, spill_dir=spill, cluster=cluster)
        seconds = time.perf_counter() - start
    peak = _memory(cluster.pids, "VmHWM")
    since = "during the sort" if reset else "since the worker started (its peak could not be reset)"
    print(f"  worker resident memory: {held / 1e6:.0f} MB holding the input, peak {peak / 1e6:.0f} MB {since}", flush=True)
    order = np.argsort(keys, kind="stable")
    assert np.array_equal(np.concatenate([np.load(p) for p in wk.parts]), keys[order]), "keys out of order"
    assert np.array_equal(np.concatenate([np.load(p) for p in wv.parts]), payload[order]), "payloads differ"
    assert not any(spill.iterdir()), "spill files left behind"
    print(f"  {len(wk.parts)} parts of at most {max(wk.rows):,} records", flush=True)
    shutil.rmtree(out)
    return seconds


def _memory(pids: tuple[int, ...], field: str) -> int:
    """The workers' largest ``field`` of ``/proc/PID/status`` (``VmRSS``, ``VmHWM``), bytes; 0 where /proc does not tell."""
    most = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                most = max(most, *(int(line.split()[1]) * 1024 for line in f if line.startswith(f"{field}:")))
        except (OSError, ValueError, TypeError):
            continue
    return most


def _reset_peaks(pids: tuple[int, ...]) -> bool:
    """Each worker's peak resident memory reset to its current (``clear_refs``: the process's owner or root)."""
    try:
        for pid in pids:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")
    except OSError:
        return False
    return True


def gnu_sort(raw: np.ndarray, budget: int, work: Path) -> float:
    """Seconds of GNU sort over the records as hex text lines, with ``-S budget``."""
    lines = work / "records.txt"
    with lines.open("wb") as f:
        for chunk in np.array_split(raw, max(1, len(raw) // 100_000)):
            f.write(("\n".join(bytes(r).hex() for r in chunk) + "\n").encode())
    start = time.perf_counter()
    subprocess.run(
        ["sort", "-S", str(budget), "--parallel=2", "-T", str(work), "-o", str(work / "sorted.txt"), str(lines)],
        env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
        check=True,
    )
    seconds = time.perf_counter() - start
    env = {"LC_ALL": "C", "PATH": "/usr/bin:/bin"}
    subprocess.run(["sort", "-c", str(work / "sorted.txt")], env=env, check=True)  # sorted, or it says where not
    assert (work / "sorted.txt").stat().st_size == lines.stat().st_size, "records lost"
    return seconds


def spark_sort(spark: Any, raw: np.ndarray) -> float:
    """Seconds of Spark's ``sortByKey`` over the records as cached (key, payload) byte pairs."""
    pairs = spark.sparkContext.parallelize([(bytes(r[:10]), bytes(r[10:])) for r in raw], 4).cache()
    pairs.count()
    start = time.perf_counter()
    pairs.sortByKey(numPartitions=4).count()
    seconds = time.perf_counter() - start
    pairs.unpersist()
    return seconds


@benchmark(
    "spill",
    sizes={"records": Size(2e4, 2e6, "records of 100 bytes (2e6: 200 MB); each reducer's budget is a quarter of them")},
    peers=("spark",),
)
def run(args: argparse.Namespace) -> None:
    """Measure and print one table."""
    n = int(args.records)
    budget = n * RECORD // 4
    raw, keys, payload = records(n)
    assert np.unique(keys).size == n, "equal 8-byte key prefixes: their order would differ from TeraSort's"
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="tmr-spill-bench-") as folder, tmr.LocalCluster(workers=2) as cluster:
        work = Path(folder)
        print(f"spill: {n:.3g} records ({n * RECORD / 1e6:.0f} MB), budget {budget / 1e6:.1f} MB per reducer", flush=True)
        small = n // 100 + 1
        spilled(cluster, keys[:small], payload[:small], max(small * RECORD // 4, 4096), work)  # warm-up
        rows.append(("tmr.sort_by_key, spilled, 2-worker LocalCluster", spilled(cluster, keys, payload, budget, work)))
    with tempfile.TemporaryDirectory(prefix="tmr-spill-bench-") as folder:
        rows.append((f"GNU sort -S {budget} --parallel=2, hex text lines", gnu_sort(raw, budget, Path(folder))))
    with _peers.spark(args.peers) as spark:
        if spark is not None:
            rows.append(("Spark local[2] sortByKey (JVM heap: 6 GB)", spark_sort(spark, raw)))
    print(f"\n| {n:.0e} records of 100 bytes | seconds | MB/s |\n|---|---:|---:|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.2f} | {n * RECORD / seconds / 1e6:.1f} |")


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["spill", *sys.argv[1:]]))
