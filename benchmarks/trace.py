"""Where one group job spends its time: the trace of a median_by_key run, summed per phase and drawn.

``python -m benchmarks trace`` runs ``tmr.median_by_key`` over ``--rows`` resident rows (int64 keys over
``--keys`` distinct values, float32 values) on a 2-worker LocalCluster with ``trace=``, prints each task's
busiest ops and the share of each phase (map, shuffle, reduce), and with ``--plot PATH`` draws the timeline.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile

import numpy as np

import tfmapreduce as tmr

from ._plots import phase, trace_timeline
from ._registry import PLOT, Size, benchmark


@benchmark(
    "trace",
    sizes={"rows": Size(1e4, 1e7, "rows"), "keys": Size(1e2, 1e3, "distinct keys")},
    flags=(PLOT,),
)
def run(args: argparse.Namespace) -> None:
    """Trace one run, print the busiest ops and the phases' shares (and draw the timeline with ``--plot``)."""
    rng = np.random.default_rng(0)
    n = int(args.rows)
    keys, values = rng.integers(0, int(args.keys), n, dtype=np.int64), rng.random(n, dtype=np.float32)
    with tempfile.TemporaryDirectory() as folder, tmr.LocalCluster(2) as cluster:
        path = os.path.join(folder, "trace.json")
        with tmr.scatter(keys, cluster=cluster) as kd, tmr.scatter(values, cluster=cluster) as vd:
            tmr.median_by_key(kd, vd)  # compiled once: the traced run is a run as users repeat it
            tmr.median_by_key(kd, vd, trace=path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    ops = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    busy: collections.Counter[tuple[str, str]] = collections.Counter()
    for e in ops:
        busy[(e["args"]["device"].split("/device:")[0].replace("/replica:0", ""), e["name"])] += e["dur"]
    for (task, name), micros in busy.most_common(8):
        print(f"{micros / 1e3:8.1f} ms  {task}  {name}")
    shares: collections.Counter[str] = collections.Counter()
    for e in ops:
        shares[phase(e["name"])] += e["dur"]
    total = sum(shares.values())
    print("op time by phase: " + ", ".join(f"{p} {shares[p] / total:.0%}" for p in ("map", "shuffle", "reduce", "other")))
    if args.plot:
        trace_timeline(trace, args.plot, f"tmr.median_by_key: {n:.0e} rows, {int(args.keys):.0e} keys, 2 workers")
        print(f"timeline: {args.plot}")


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["trace", *sys.argv[1:]]))
