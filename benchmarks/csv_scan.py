"""A CSV scan into a table: ``tmr.scan_csv`` against ``pandas.read_csv``, ``polars.read_csv`` and
``pyarrow.csv.read_csv``.

``python -m benchmarks csv``: a file of ``--rows`` rows written by pandas ``to_csv`` into a temporary folder: an int64
id, a float64 price, a string city (some with a comma, so quoted; one row in ten empty: null), a date. Every reader
infers the types (polars with ``try_parse_dates=True``); ``tmr.scan_csv`` reads it on a 2-worker LocalCluster in byte
ranges of 16 MiB and brings the columns back into a table; the peers read it in this process with their own threads.
The columns are checked equal to pandas' first; polars is timed where it is installed (the ``bench`` extra). The
median of ``--repeats`` reads after a warm-up one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

from . import _peers
from ._registry import Size, benchmark
from ._timing import repeat

CITIES = np.array(["Oslo", "Rome", "São Paulo", "Washington, D.C.", "東京", ""], dtype=object)


def write(path: str, rows: int) -> None:
    import pandas as pd

    rng = np.random.default_rng(0)
    pd.DataFrame(
        {
            "id": np.arange(rows, dtype=np.int64),
            "price": np.round(rng.random(rows) * 1000, 2),
            "city": CITIES[rng.integers(0, len(CITIES), rows)],
            "day": (np.datetime64("1992-01-01") + rng.integers(0, 2500, rows)).astype("datetime64[s]"),
        }
    ).to_csv(path, index=False)


@benchmark(
    "csv",
    sizes={
        "rows": Size(20_000, 2_000_000, "rows of the CSV file", parse=lambda s: int(float(s))),
        "repeats": Size(1, 3, "timed reads after one warm-up (median reported)"),
    },
)
def run(args: argparse.Namespace) -> None:
    """Measure and print the four reads."""
    import pandas as pd
    import pyarrow.csv as pacsv

    import tfmapreduce as tmr

    folder = tempfile.mkdtemp(prefix="tmr-csv-")
    try:
        path = os.path.join(folder, "sales.csv")
        write(path, args.rows)
        with tmr.LocalCluster(workers=2) as cluster:
            readers = {
                "tmr.scan_csv (2 workers)": lambda: tmr.scan_csv(path, cluster=cluster),
                "pandas.read_csv": lambda: pd.read_csv(path, keep_default_na=False, na_values=[""], parse_dates=["day"]),
                "pyarrow.csv.read_csv": lambda: pacsv.read_csv(path),
            }
            if _peers.on({"polars"}, "polars"):
                import polars as pl

                readers["polars.read_csv"] = lambda: pl.read_csv(path, try_parse_dates=True)
            timed = {name: repeat(read, args.repeats) for name, read in readers.items()}
        ours, theirs = timed["tmr.scan_csv (2 workers)"][1].to_dict(), timed["pandas.read_csv"][1]
        for name in ("id", "price"):
            assert np.array_equal(ours[name], theirs[name].to_numpy()), name
        assert ours["city"].tolist() == [None if v is np.nan else v for v in theirs["city"]]
        assert np.array_equal(ours["day"], theirs["day"].to_numpy().astype("datetime64[D]"))
        print(f"{args.rows:,} rows, {os.path.getsize(path) / 1e6:.1f} MB")
        print(f"{'reader':<28} {'median s':>9} {'Mrows/s':>9}")
        for name, (seconds, _) in timed.items():
            median = float(np.median(seconds))
            print(f"{name:<28} {median:>9.3f} {args.rows / median / 1e6:>9.2f}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["csv", *sys.argv[1:]]))
