"""A Parquet scan of 4 columns of TPC-H lineitem: ``tmr.scan_parquet`` against ``pyarrow.parquet.read_table``.

``python -m benchmarks parquet``: lineitem at scale factor 1 (``tpchgen-cli parquet -s 1 --tables=lineitem``,
made into a temporary folder when ``--data`` names none; 6,001,215 rows, 53 row groups), the columns of TPC-H Q1's
filter and sums (``l_quantity``, ``l_extendedprice``, ``l_discount``: decimals, read as float64; ``l_shipdate``: a
date), read whole into a table on the client. ``tmr.scan_parquet`` decodes the row groups on a 2-worker LocalCluster
(the native op over the Arrow C++ reader) and brings the columns back; pyarrow reads them in this process with its
own threads. Both results are checked equal first. The median of ``--repeats`` reads after a warm-up one. A third
row times the same scan with ``resident=True``: the columns decoded and kept on the workers (then freed), none back.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from ._registry import Size, benchmark, flag
from ._timing import repeat

COLUMNS = ["l_quantity", "l_extendedprice", "l_discount", "l_shipdate"]


def lineitem(folder: str | None, scale: float) -> tuple[str, str | None]:
    """The lineitem file in ``folder`` (made there if absent), else in a new temporary folder (returned to remove)."""
    made = None
    if folder is None:
        folder = made = tempfile.mkdtemp(prefix="tmr-tpch-")
    path = os.path.join(folder, "lineitem.parquet")
    if not os.path.exists(path):
        tool = shutil.which("tpchgen-cli") or os.path.join(os.path.dirname(sys.executable), "tpchgen-cli")
        subprocess.run([tool, "parquet", "-s", str(scale), "--tables=lineitem", f"--output-dir={folder}"], check=True)
    return path, made


@benchmark(
    "parquet",
    sizes={
        "scale": Size(0.1, 1.0, "TPC-H scale factor of the generated lineitem"),
        "repeats": Size(1, 5, "timed reads after one warm-up (median reported)"),
    },
    flags=(flag("--data", metavar="FOLDER", help="a folder with lineitem.parquet (made there by tpchgen-cli if absent)"),),
)
def run(args: argparse.Namespace) -> None:
    """Measure and print the two reads."""
    import pyarrow.parquet as pq

    import tfmapreduce as tmr

    path, made = lineitem(args.data, args.scale)
    try:
        rows = pq.ParquetFile(path).metadata.num_rows
        with tmr.LocalCluster(workers=2) as cluster:
            ours = lambda: tmr.scan_parquet(path, columns=COLUMNS, cluster=cluster)  # noqa: E731
            theirs = lambda: pq.read_table(path, columns=COLUMNS)  # noqa: E731
            ours_s, table = repeat(ours, args.repeats)
            kept_s, _ = repeat(
                lambda: tmr.scan_parquet(path, columns=COLUMNS, resident=True, cluster=cluster).delete(), args.repeats
            )
            theirs_s, arrow = repeat(theirs, args.repeats)
        got = table.to_dict()
        for name in COLUMNS:
            want = arrow.column(name).to_numpy()
            want = want.astype(np.float64) if want.dtype == object else want
            assert np.array_equal(got[name], want), name
        print(f"lineitem: {rows:,} rows, columns {COLUMNS} ({path})")
        print(f"{'reader':<32} {'median s':>9} {'Mrows/s':>9}")
        timed = (
            ("tmr.scan_parquet (2 workers)", ours_s),
            ("  resident=True (kept on them)", kept_s),
            ("pyarrow.parquet.read_table", theirs_s),
        )
        for name, seconds in timed:
            median = float(np.median(seconds))
            print(f"{name:<32} {median:>9.3f} {rows / median / 1e6:>9.1f}")
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["parquet", *sys.argv[1:]]))
