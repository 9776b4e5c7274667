"""Data read on the workers from files, side by side with shipping it, with one process and with peers.

``python -m benchmarks files``: three tables, one run, a 2-worker LocalCluster (page cache warm: every file is
written, then read once before timing):

- the mean of N float32 in 4 ``.npy`` files: ``tmr.read_npy`` vs shipping the same
  array from the client vs ``np.load(mmap_mode="r").mean()`` in one process vs
  Dask (``da.from_array`` over the memmaps, threaded scheduler);
- a line count and byte sum over text files with ``tmr.read_text`` vs one Python
  process reading the same files (word count: ``python -m benchmarks keyed``);
- CSV column means with ``tmr.read_csv`` vs ``pandas.read_csv(...).mean()`` and
  ``polars.read_csv(...).mean()`` (its own threads), in rows/s.

Every result is checked against numpy first.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _peers
from ._registry import PLOT, Size, benchmark
from ._timing import repeat


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Median seconds of ``repeats`` calls after one warm-up call, and the last value."""
    times, value = repeat(fn, repeats)
    return float(np.median(times)), value


def write_npy(folder: str, n: int, files: int) -> tuple[list[str], np.ndarray]:
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    paths = []
    for i, part in enumerate(np.array_split(x, files)):
        paths.append(os.path.join(folder, f"x{i}.npy"))
        np.save(paths[-1], part)
    return paths, x


def write_text(folder: str, nbytes: int, files: int) -> list[str]:
    words = np.array(["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "then", "some"])
    rng = np.random.default_rng(1)
    block = "\n".join(" ".join(rng.choice(words, 8)) for _ in range(20000)) + "\n"
    paths = []
    for i in range(files):
        paths.append(os.path.join(folder, f"t{i}.txt"))
        with open(paths[-1], "w") as f:
            for _ in range(max(1, nbytes // files // len(block))):
                f.write(block)
    return paths


def write_csv(folder: str, nbytes: int) -> tuple[str, np.ndarray]:
    """About ``nbytes`` of CSV, one block of 20000 rows × 8 columns written over and over; its path and column means."""
    rng = np.random.default_rng(2)
    block = "\n".join(",".join(f"{v:.6f}" for v in row) for row in rng.normal(size=(20000, 8))) + "\n"
    path = os.path.join(folder, "table.csv")
    with open(path, "w") as f:
        f.write(",".join(f"c{i}" for i in range(8)) + "\n")
        for _ in range(max(1, nbytes // len(block))):
            f.write(block)
    return path, np.loadtxt(io.StringIO(block), delimiter=",").mean(axis=0)


@benchmark(
    "files",
    sizes={
        "elements": Size(2e6, 5e7, "float32 elements in the .npy files (5e7: 200 MB)"),
        "text_mb": Size(5.0, 200.0, "MB of text"),
        "csv_mb": Size(5.0, 200.0, "MB of CSV, 8 numeric columns"),
        "repeats": Size(2, 5, "timed calls per row after one warm-up (median reported; text and CSV: half)"),
    },
    peers=("dask-threads", "pandas", "polars"),
    flags=(PLOT,),
)
def run(args: argparse.Namespace) -> None:
    """Measure and print the three tables (and draw the .npy one with ``--plot``)."""
    import tfmapreduce as tmr

    repeats = args.repeats

    rows: list[tuple[str, str, float, str]] = []
    with tempfile.TemporaryDirectory() as folder, tmr.LocalCluster(2) as cluster:
        n = int(args.elements)
        paths, x = write_npy(folder, n, 4)
        expected = x.astype(np.float64).mean()
        pattern = os.path.join(folder, "x*.npy")
        data = tmr.read_npy(pattern)
        t_files, v = timed(lambda: tmr.mean(data, cluster=cluster), repeats)
        assert abs(v - expected) <= 1e-6 * abs(expected), (v, expected)
        t_ship, v = timed(lambda: tmr.mean(x, cluster=cluster), repeats)
        maps = [np.load(p, mmap_mode="r") for p in paths]
        t_numpy, v = timed(lambda: float(np.concatenate(list(maps)).mean()) if len(maps) > 1 else float(maps[0].mean()), repeats)
        t_numpy1, _ = timed(lambda: sum(float(m.sum(dtype=np.float64)) for m in maps) / n, repeats)
        mb = n * 4 / 1e6
        title = f"mean of {n:.0e} float32 ({mb:.0f} MB) in 4 .npy files"
        npy = [
            ("tmr.read_npy, 2 workers", t_files),
            ("shipped from the client, 2 workers", t_ship),
            ("numpy np.load(mmap).mean(), one process", t_numpy),
            ("numpy memmap sum(float64) per file, one process", t_numpy1),
        ]
        npy_times = {"tmr.read_npy": t_files, "tmr, shipped": t_ship, "numpy mmap": t_numpy}
        if _peers.on(args.peers, "dask-threads"):
            t_dask, v = timed(_peers.dask_mean(maps), repeats)
            assert abs(v - expected) <= 1e-6 * abs(expected), (v, expected)
            npy.append(("dask from_array(memmap).mean(), threads", t_dask))
            npy_times["dask"] = t_dask
        for name, t in npy:
            rows.append((title, name, t, f"{mb / 1e3 / t:.2f} GB/s, {t_ship / t:.1f}× shipping, {t_numpy / t:.2f}× numpy"))

        texts = write_text(folder, int(args.text_mb * 1e6), 8)
        total = sum(os.path.getsize(p) for p in texts)
        job = tmr.MapReduce(lambda s: (tf_size(s), tf_bytes(s)), tmr.combiners.sum)
        t_text, (lines, nbytes) = timed(lambda: job.run(tmr.read_text(texts), cluster=cluster), repeats)

        def python_count() -> tuple[int, int]:
            count = size = 0
            for p in texts:
                with open(p, "rb") as f:
                    for line in f:
                        count += 1
                        size += len(line) - 1
            return count, size

        t_py, (lines_py, bytes_py) = timed(python_count, max(1, repeats // 2))
        assert (int(lines), int(nbytes)) == (lines_py, bytes_py), ((lines, nbytes), (lines_py, bytes_py))
        title = f"line count + byte sum, {total / 1e6:.0f} MB of text in 8 files ({lines_py} lines)"
        rows.append(
            (
                title,
                "tmr.read_text + MapReduce, 2 workers",
                t_text,
                f"{lines_py / t_text / 1e6:.1f} M lines/s, {t_py / t_text:.1f}× Python",
            )
        )
        rows.append((title, "Python for-line loop, one process", t_py, f"{lines_py / t_py / 1e6:.1f} M lines/s"))

        csv, ref = write_csv(folder, int(args.csv_mb * 1e6))
        size = os.path.getsize(csv) / 1e6
        t_csv, means = timed(lambda: tmr.mean(tmr.read_csv(csv, dtypes="float64"), axis=0, cluster=cluster), max(1, repeats // 2))
        assert np.allclose(means, ref, rtol=1e-9), (means, ref)
        n_rows = int(tmr.count(tmr.read_csv(csv), cluster=cluster))
        title = f"CSV column means, {size:.0f} MB, 8 columns, {n_rows} rows, 1 file (split over both tasks)"
        rows.append((title, "tmr.read_csv, 2 workers", t_csv, f"{n_rows / t_csv / 1e6:.2f} M rows/s"))
        for peer, name in (
            ("pandas", "pandas.read_csv().mean(), one process"),
            ("polars", f"polars.read_csv().mean(), {os.cpu_count()} threads"),
        ):
            if _peers.on(args.peers, peer):
                t, theirs = timed(_peers.csv_means(peer, csv), max(1, repeats // 2))
                assert np.allclose(theirs, ref, rtol=1e-9), (peer, theirs, ref)
                rows.append((title, name, t, f"{n_rows / t / 1e6:.2f} M rows/s"))

    last = None
    for title, name, t, note in rows:
        if title != last:
            print(f"\n{title}\n| run | median | |\n|---|---|---|")
            last = title
        print(f"| {name} | {t * 1000:.0f} ms | {note} |")
    if args.plot:
        from ._plots import bar_chart

        bars = [(name, [t * 1e3]) for name, t in npy_times.items()]
        bar_chart([(f"mean of {n:.0e} float32 in 4 .npy files", bars)], args.plot, unit="ms")


def tf_size(s: Any) -> Any:
    import tensorflow as tf

    return tf.size(s, out_type=tf.int64)


def tf_bytes(s: Any) -> Any:
    import tensorflow as tf

    return tf.reduce_sum(tf.cast(tf.strings.length(s), tf.int64))


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["files", *sys.argv[1:]]))
