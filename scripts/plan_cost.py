"""The client's cost of planning a keyed combine: ``tmr.plan_by_key(keys, values, recipe=tmr.sum_by_key)`` over string
keys held on the client (the plan counts each task's distinct keys), then resident (``tmr.scatter``: the plan samples
their lengths on the workers), the median of 5 plans after one warm-up.

    python scripts/plan_cost.py [--rows 2000000] [--distinct 500000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tfmapreduce as tmr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--distinct", type=int, default=500_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    keys = np.array([f"user-{i}" for i in rng.integers(0, args.distinct, args.rows)], dtype=object)
    values = np.ones(keys.size)
    with tmr.LocalCluster(workers=2) as cluster:
        resident = (tmr.scatter(keys, cluster=cluster), tmr.scatter(values, cluster=cluster))
        for label, x, recipe in [
            ("host keys, rows (no recipe)", (keys, values), None),
            ("host keys, sum_by_key", (keys, values), tmr.sum_by_key),
            ("resident keys, sum_by_key", resident, tmr.sum_by_key),
        ]:
            times = []
            for _ in range(6):
                start = time.perf_counter()
                plan = tmr.plan_by_key(*x, recipe=recipe, max_bytes=10**8, reducers=2, cluster=cluster)
                times.append(time.perf_counter() - start)
            assert plan.spill is not None
            print(f"{label}: {statistics.median(times[1:]):.3f} s median of 5, share {plan.spill.share:,} bytes")
        for data in resident:
            data.delete()


if __name__ == "__main__":
    main()
