"""Shipping through task 0 as the master vs the client as the master.

``python -m benchmarks client_master``: two 2-worker ``LocalCluster`` s run side by side in this process: one as usual (task 0 is the
master: the client sends every fed byte to it through gRPC and it forwards task 1's shard), one
with ``client_master=True`` (the client's own in-process server is the master; each worker
fetches its shard from the client).  ``tmr.mean`` of ``--rows`` float32 shipped through gRPC
(``transfer="feed"``: shared memory would bypass the master on one machine) runs on both,
interleaved round by round, after one checked warm-up run each.  Prints each side's median
[min-max] seconds and GB/s, and the per-round ratio.

The client's server cannot be stopped (TensorFlow): its port stays bound until this process exits, and a
``LocalCluster`` started after it in the same process does not answer; so this benchmark runs only by itself.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import tfmapreduce as tmr

from ._registry import Size, benchmark
from ._timing import interleaved


@benchmark(
    "client_master",
    sizes={"rows": Size(1e5, 5e7, "float32 numbers shipped per run"), "rounds": Size(1, 5, "interleaved rounds")},
    alone=True,
)
def run(args: argparse.Namespace) -> None:
    """Measure and print each side's figures and the ratio per round."""
    rows = int(args.rows)
    x = np.random.default_rng(0).random(rows, dtype=np.float32)
    expected = float(np.mean(x, dtype=np.float64))
    with tmr.LocalCluster(2) as usual, tmr.LocalCluster(2, client_master=True) as client:
        sides = {"task 0 as master": usual, "client as master": client}
        impls = {name: (lambda c=cluster: tmr.mean(x, cluster=c, transfer="feed")) for name, cluster in sides.items()}
        values, times = interleaved(impls, warmup=1, repeats=args.rounds)
    assert all(abs(float(v) - expected) < 1e-6 for v in values.values()), (values, expected)
    print(f"mean of {rows:.3g} float32 ({x.nbytes / 1e6:.0f} MB) shipped by gRPC, {args.rounds} rounds:")
    for name, seconds in times.items():
        median = float(np.median(seconds))
        print(f"  {name:>16}: {median:.3f} s [{min(seconds):.3f}-{max(seconds):.3f}], {x.nbytes / median / 1e9:.2f} GB/s")
    ratios = [a / b for a, b in zip(times["task 0 as master"], times["client as master"], strict=True)]
    print(f"  ratio per round (task 0 / client): median {np.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]")


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["client_master", *sys.argv[1:]]))
