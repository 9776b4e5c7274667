"""A client table's join on a (string, int) key: tfmapreduce vs pandas' merge.

``python -m benchmarks table-join`` (``--rows``, default 1e6 left rows; ``--right``, default 1e5 right rows): a left
table of a string column (10,000 values of a few characters, unicode included), an int64 column (100 values) and a
float64 value, and a right table of the same two key columns (its keys drawn from the same values) and an int64
value, both ``tmr.table`` of a pandas ``DataFrame`` made once, joined on both key columns (``how="inner"``) on a
2-worker LocalCluster. The result is checked against pandas' ``merge`` (the same rows in the same order) before it is
timed; each implementation's best of ``--repeats`` calls after one warm-up is printed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

import tfmapreduce as tmr

from . import _peers
from ._registry import Size, benchmark
from ._timing import repeat


def frames(rows: int, right: int) -> tuple[Any, Any]:
    """The left and right sides as pandas DataFrames."""
    import pandas as pd

    rng = np.random.default_rng(7)
    words = np.array([f"w{i}{'é' if i % 11 == 0 else ''}" for i in range(10_000)], object)
    left = pd.DataFrame(
        {"s": words[rng.integers(0, len(words), rows)], "i": rng.integers(0, 100, rows), "x": rng.normal(size=rows)}
    )
    other = pd.DataFrame(
        {"s": words[rng.integers(0, len(words), right)], "i": rng.integers(0, 100, right), "y": np.arange(right)}
    )
    return left, other


def _best(fn: Any, repeats: int) -> float:
    """The least seconds of ``repeats`` calls after one warm-up (it traces and compiles)."""
    return min(repeat(fn, repeats)[0])


@benchmark(
    "table-join",
    sizes={
        "rows": Size(10_000, 1e6, "left rows"),
        "right": Size(1000, 1e5, "right rows"),
        "repeats": Size(1, 3, "timed calls after one warm-up (the best reported)"),
    },
    peers=("pandas",),
)
def run(args: argparse.Namespace) -> None:
    """Join the two tables on (s, i) with each implementation; print the best time of each."""
    left, right = frames(int(args.rows), int(args.right))
    want = left.merge(right, on=["s", "i"], how="inner")
    lt, rt = tmr.table(left), tmr.table(right)
    with tmr.LocalCluster(workers=2) as cluster:

        def ours() -> Any:
            return lt.join(rt, on=["s", "i"], how="inner", cluster=cluster, timeout=900)

        got = ours().to_pandas()
        assert len(got) == len(want)
        assert all(np.array_equal(np.asarray(got[c]), np.asarray(want[c])) for c in want)
        print(f"table-join: {len(left):,} x {len(right):,} rows, {len(want):,} joined", flush=True)
        print(f"  tfmapreduce Table.join, 2-worker LocalCluster: {_best(ours, int(args.repeats)):.2f} s", flush=True)
    if _peers.on(args.peers, "pandas"):
        best = _best(lambda: left.merge(right, on=["s", "i"], how="inner"), int(args.repeats))
        print(f"  pandas merge: {best:.2f} s", flush=True)


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["table-join", *sys.argv[1:]]))
