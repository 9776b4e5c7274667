"""The cost of planning a keyed combine over string and integer keys, on the client and resident.

``python -m benchmarks plan_cost`` (``--rows``, default 2e6; ``--distinct``, default 5e5 distinct keys):
``tmr.plan_by_key(keys, values, ...)`` of string keys held on the client without ``recipe=`` (every row counted) and
with ``recipe=tmr.sum_by_key`` (each task's distinct keys counted on the client), then of the same keys, and of as
many integer keys, resident (``tmr.scatter``): without ``recipe=`` (a string's lengths sampled on the workers) and
with it (each task's distinct keys counted on the workers, one run), and of the same keys and values as a CSV
table (``read_csv(..., keys=, values=)``, written to a temporary folder): without ``recipe=`` (its rows from its
files' bytes) and with it (each task's distinct keys counted on the workers reading its key column, one run), on a
2-worker LocalCluster; each the median of ``--repeats`` plans after one warm-up, with the reducer share the plan
forecasts; last the CSV table's ``sum_by_key`` run itself, for scale.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

import numpy as np
import pandas as pd

import tfmapreduce as tmr

from ._registry import Size, benchmark
from ._timing import repeat


@benchmark(
    "plan_cost",
    sizes={
        "rows": Size(2e5, 2e6, "string keys"),
        "distinct": Size(5e4, 5e5, "distinct keys"),
        "repeats": Size(1, 5, "timed plans per row after one warm-up (median reported)"),
    },
)
def run(args: argparse.Namespace) -> None:
    """Plan each way; print the median seconds and the forecast share."""
    rng = np.random.default_rng(0)
    numbers = rng.integers(0, int(args.distinct), int(args.rows))
    keys = np.array([f"user-{i}" for i in numbers], dtype=object)
    values = np.ones(keys.size)
    folder = tempfile.TemporaryDirectory(prefix="tmr-plan-cost-")
    path = os.path.join(folder.name, "orders.csv")
    pd.DataFrame({"user": keys, "amount": values}).to_csv(path, index=False)
    table = tmr.read_csv(path, dtypes={"amount": "float64"})
    with folder, tmr.LocalCluster(workers=2) as cluster:
        resident = (tmr.scatter(keys, cluster=cluster), tmr.scatter(values, cluster=cluster))
        integers = tmr.scatter(numbers, cluster=cluster)
        try:
            for label, x, recipe in [
                ("host keys, rows (no recipe)", (keys, values), None),
                ("host keys, sum_by_key", (keys, values), tmr.sum_by_key),
                ("resident keys, rows (no recipe)", resident, None),
                ("resident keys, sum_by_key", resident, tmr.sum_by_key),
                ("resident int keys, rows (no recipe)", (integers, resident[1]), None),
                ("resident int keys, sum_by_key", (integers, resident[1]), tmr.sum_by_key),
            ]:
                seconds, plan = repeat(
                    lambda x=x, recipe=recipe: tmr.plan_by_key(*x, recipe=recipe, max_bytes=10**8, reducers=2, cluster=cluster),
                    int(args.repeats),
                )
                print(f"  {label}: {statistics.median(seconds):.3f} s, share {plan.spill.share:,} bytes", flush=True)
            for label, recipe in [("CSV table keys, rows (no recipe)", None), ("CSV table keys, sum_by_key", tmr.sum_by_key)]:
                seconds, plan = repeat(
                    lambda recipe=recipe: tmr.plan_by_key(
                        table, keys="user", values="amount", recipe=recipe, max_bytes=10**8, reducers=2, cluster=cluster
                    ),
                    int(args.repeats),
                )
                print(f"  {label}: {statistics.median(seconds):.3f} s, share {plan.spill.share:,} bytes", flush=True)
            seconds, _ = repeat(
                lambda: tmr.sum_by_key(table, keys="user", values="amount", max_bytes=10**8, reducers=2, cluster=cluster),
                int(args.repeats),
            )
            print(f"  CSV table keys, the sum_by_key run itself: {statistics.median(seconds):.3f} s", flush=True)
        finally:
            for data in (*resident, integers):
                data.delete()


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["plan_cost", *sys.argv[1:]]))
