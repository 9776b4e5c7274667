"""A query as a lazy plan against the same steps on the eager table: runs, compiles and seconds.

``python -m benchmarks queries``: over ``--rows`` rows (default 1e6) of a table on the client (a string key of 4
values, float64 and int32 columns), on a 2-worker LocalCluster, the query
``filter((price > lo) & (qty < 40)) → with_columns(revenue = price * qty) → select → group_by(part).agg(sum)``:

- eager: ``Table.filter`` and ``Table.with_columns`` with traced functions, ``select``, ``group_by().agg()``;
- lazy: the same steps with ``tmr.col`` expressions through ``tmr.lazy(...).collect()`` (filters and the new column
  fused and run in the group-by's map: one run).

Each is timed warm (the median of ``--repeats`` calls after one warm-up call, a new ``lo`` each call), and one call
of each prints its runs and which of them compiled. Both answers are checked against numpy first.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from typing import Any

import numpy as np

import tfmapreduce as tmr

from ._registry import Size, benchmark
from ._table import Rows


def _eager(t: tmr.Table, lo: float, cluster: tmr.LocalCluster) -> tmr.Table:
    import tensorflow as tf  # here, not at the top: --help answers before TensorFlow loads

    kept = t.filter(lambda r: (r["price"] > lo) & (r["qty"] < 40), cluster=cluster)
    priced = kept.with_columns(lambda r: {"revenue": r["price"] * tf.cast(r["qty"], tf.float64)}, cluster=cluster)
    return priced.select(["part", "revenue"]).group_by("part").agg(total=("revenue", "sum"), cluster=cluster)


def _lazy(t: tmr.Table, lo: float, cluster: tmr.LocalCluster) -> tmr.Table:
    q = (
        tmr.lazy(t)
        .filter((tmr.col("price") > lo) & (tmr.col("qty") < 40))
        .with_columns(revenue=tmr.col("price") * tmr.col("qty"))
        .select("part", "revenue")
        .group_by("part")
        .agg(total=("revenue", "sum"))
    )
    out: tmr.Table = q.collect(cluster=cluster, client_rows=0)  # on the workers at --quick's 1e4 rows too
    return out


def _runs(fn: Any, t: tmr.Table, lo: float, cluster: tmr.LocalCluster) -> str:
    with tmr.stats() as seen:
        fn(t, lo, cluster)
    n = len(seen.runs)
    return f"{n} run{'' if n == 1 else 's'}, compiled {[r.compiled for r in seen.runs]}"


@benchmark(
    "queries",
    sizes={
        "rows": Size(1e4, 1e6, "rows"),
        "repeats": Size(1, 3, "timed calls per row after one warm-up (median reported)"),
    },
)
def run(args: argparse.Namespace) -> None:
    """Measure and print the table, and each way's runs and compiles."""
    n = int(args.rows)
    rng = np.random.default_rng(0)
    parts = rng.choice(np.array(["a", "b", "c", "d"], object), n)
    price, qty = rng.random(n), rng.integers(1, 50, n).astype(np.int32)
    t = tmr.table({"part": parts, "price": price, "qty": qty, "note": rng.random(n)})
    keep = (price > 0.5) & (qty < 40)
    want = [float((price * qty)[keep & (parts == p)].sum()) for p in "abcd"]
    table = Rows(args.repeats)
    los = itertools.count(1)
    with tmr.LocalCluster(workers=2) as cluster:
        for name, fn in (("eager table, one run a step", _eager), ("lazy plan, fused", _lazy)):
            np.testing.assert_allclose(fn(t, 0.5, cluster).to_dict()["total"], want, rtol=1e-9)
            print(f"{name}: {_runs(fn, t, 0.25, cluster)} (a second call, a new literal)", flush=True)
            table.add(f"{name}, 2-worker LocalCluster", lambda fn=fn: fn(t, 0.5 / (1 + next(los) % 7), cluster), n)
    table.print("rows")


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["queries", *sys.argv[1:]]))
