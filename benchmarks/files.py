"""``python -m benchmarks.files``: data read on the workers from files, side by side with shipping it and with peers.

Three tables, one run, a 2-worker LocalCluster (page cache warm: every file is
written, then read once before timing):

- the mean of N float32 in 4 ``.npy`` files: ``tmr.read_npy`` vs shipping the same
  array from the client vs ``np.load(mmap_mode="r").mean()`` in one process vs
  Dask (``da.from_array`` over the memmaps, threaded scheduler);
- a line count and byte sum over text files with ``tmr.read_text`` vs one Python
  process reading the same files (word count: ``python -m benchmarks.keyed``);
- CSV column means with ``tmr.read_csv`` vs ``pandas.read_csv(...).mean()`` and, where installed,
  ``polars.read_csv(...).mean()`` (its own threads), in rows/s.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

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


def write_csv(folder: str, nbytes: int) -> str:
    rng = np.random.default_rng(2)
    block = "\n".join(",".join(f"{v:.6f}" for v in row) for row in rng.normal(size=(20000, 8))) + "\n"
    path = os.path.join(folder, "table.csv")
    with open(path, "w") as f:
        f.write(",".join(f"c{i}" for i in range(8)) + "\n")
        for _ in range(max(1, nbytes // len(block))):
            f.write(block)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.files", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small inputs and few repeats (a smoke test, seconds)")
    parser.add_argument("--elements", type=float, default=5e7, help="float32 elements in the .npy files (default 5e7 = 200 MB)")
    parser.add_argument("--text-mb", type=float, default=200, help="MB of text (default 200)")
    parser.add_argument("--csv-mb", type=float, default=200, help="MB of CSV, 8 numeric columns (default 200)")
    parser.add_argument("--plot", metavar="PNG", help="also draw the .npy table as a bar chart into this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.elements, args.text_mb, args.csv_mb = 2e6, 5, 5
    repeats = 2 if args.quick else 5

    import dask.array as da
    import pandas as pd

    import tfmapreduce as tmr

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
        darr = da.concatenate([da.from_array(m, chunks=1 << 22) for m in maps])
        t_dask, v = timed(lambda: float(darr.mean().compute(scheduler="threads")), repeats)
        mb = n * 4 / 1e6
        title = f"mean of {n:.0e} float32 ({mb:.0f} MB) in 4 .npy files"
        for name, t in [
            ("tmr.read_npy, 2 workers", t_files),
            ("shipped from the client, 2 workers", t_ship),
            ("numpy np.load(mmap).mean(), one process", t_numpy),
            ("numpy memmap sum(float64) per file, one process", t_numpy1),
            ("dask from_array(memmap).mean(), threads", t_dask),
        ]:
            rows.append((title, name, t, f"{mb / 1e3 / t:.2f} GB/s, {t_ship / t:.1f}× shipping, {t_numpy / t:.2f}× numpy"))
        npy_times = {"tmr.read_npy": t_files, "tmr, shipped": t_ship, "numpy mmap": t_numpy, "dask": t_dask}

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

        csv = write_csv(folder, int(args.csv_mb * 1e6))
        size = os.path.getsize(csv) / 1e6
        t_csv, means = timed(lambda: tmr.mean(tmr.read_csv(csv, dtypes="float64"), axis=0, cluster=cluster), max(1, repeats // 2))
        t_pd, ref = timed(lambda: pd.read_csv(csv).mean().to_numpy(), max(1, repeats // 2))
        assert np.allclose(means, ref, rtol=1e-9), (means, ref)
        try:
            import polars as pl
        except ImportError:
            t_pl = None
        else:
            t_pl, ref_pl = timed(lambda: pl.read_csv(csv).mean().to_numpy()[0], max(1, repeats // 2))
            assert np.allclose(means, ref_pl, rtol=1e-9), (means, ref_pl)
        n_rows = int(tmr.count(tmr.read_csv(csv), cluster=cluster))
        title = f"CSV column means, {size:.0f} MB, 8 columns, {n_rows} rows, 1 file (split over both tasks)"
        rows.append((title, "tmr.read_csv, 2 workers", t_csv, f"{n_rows / t_csv / 1e6:.2f} M rows/s"))
        rows.append((title, "pandas.read_csv().mean(), one process", t_pd, f"{n_rows / t_pd / 1e6:.2f} M rows/s"))
        if t_pl is not None:
            rows.append(
                (title, f"polars.read_csv().mean(), {os.cpu_count()} threads", t_pl, f"{n_rows / t_pl / 1e6:.2f} M rows/s")
            )

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
    main()
