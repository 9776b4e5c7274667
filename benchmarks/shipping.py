"""Shipped host data through shared memory vs gRPC feeds (vs Ray), side by side; a tiny job vs hand-written TF.

``python -m benchmarks shipping``: on one 2-worker ``LocalCluster``, in one run and interleaved round by round (so the
machine's load hits every implementation alike):

- ``tmr.mean`` of N float32 shipped from the client with ``transfer="shm"`` (same-host
  shared-memory files), ``transfer="feed"`` (TensorFlow's gRPC feeds, the old path), and
  resident (``tmr.scatter`` once: the memory-speed bound);
- Ray's shipped path when Ray is installed (``ray.put`` of two chunks, one task each);
- a tiny shipped job (100 float32, a ``MapReduce`` of ``tf.reduce_mean`` and the weighted
  mean) against the same job written by hand in plain TensorFlow (``benchmarks/_hand.py``).

Every result is checked against numpy (float64) first.  Prints a Markdown table (median
[min-max] over the rounds; GB/s = input bytes / median time) and the per-round ratios.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from . import _peers
from ._registry import PLOT, Size, benchmark


def _row(name: str, samples: list[float], nbytes: int | None) -> str:
    med, lo, hi = np.median(samples), min(samples), max(samples)
    rate = f"{nbytes / med / 1e9:.2f}" if nbytes else ""
    return f"| {name} | {med * 1e3:.1f} [{lo * 1e3:.1f}–{hi * 1e3:.1f}] | {rate} |"


def _ratio(raw: dict[str, list[float]], a: str, b: str) -> str:
    r = [x / y for x, y in zip(raw[a], raw[b], strict=True)]
    return f"{a} / {b}: median {np.median(r):.3f} [{min(r):.3f}–{max(r):.3f}] over {len(r)} rounds"


@benchmark(
    "shipping",
    sizes={
        "size": Size(5e6, 5e7, "float32 elements of the shipped mean (5e7: 200 MB)"),
        "repeats": Size(3, 7, "timed rounds of the shipped mean"),
        "tiny_repeats": Size(20, 200, "timed rounds of the tiny job"),
    },
    peers=("ray",),
    flags=(PLOT,),
)
def run(args: argparse.Namespace) -> int:
    """Measure and print the table and the ratios; 1 where a result was wrong."""
    size, repeats, tiny_repeats = int(args.size), args.repeats, args.tiny_repeats
    import tensorflow as tf

    import tfmapreduce as tmr

    from ._hand import HandWritten
    from ._timing import interleaved

    x = np.random.default_rng(0).random(size, dtype=np.float32)
    expected = float(np.mean(x, dtype=np.float64))
    tiny = np.random.default_rng(1).random(100, dtype=np.float32)
    ray_ok = _peers.on(args.peers, "ray")
    wrong: list[str] = []
    with tmr.LocalCluster(2) as cluster, tmr.scatter(x, cluster=cluster) as resident:
        impls: dict[str, Any] = {
            "tmr.mean shipped, shared memory": lambda: tmr.mean(x, cluster=cluster, transfer="shm"),
            "tmr.mean shipped, gRPC feeds": lambda: tmr.mean(x, cluster=cluster, transfer="feed"),
            "tmr.mean resident": lambda: tmr.mean(resident),
        }
        print(tmr.MapReduce(tf.reduce_mean, tmr.combiners.weighted_mean).plan(x, cluster=cluster), file=sys.stderr)
        ray_cm = None
        if ray_ok:
            ray_cm = _peers.Ray.start(2)
            ray = ray_cm.__enter__()
            impls["ray shipped (put + 2 tasks)"] = ray.job("mean", x, None, np.zeros((1, 1)))
        try:
            values, raw = interleaved(impls, warmup=1, repeats=repeats)
        finally:
            if ray_cm is not None:
                ray_cm.__exit__(None, None, None)
        for name, value in values.items():
            if not np.isclose(float(value), expected, rtol=1e-6):
                wrong.append(f"{name}: {value} != numpy {expected}")

        job = tmr.MapReduce(tf.reduce_mean, tmr.combiners.weighted_mean)
        shards = job.plan(tiny, cluster=cluster).shards
        with HandWritten(
            cluster.target,
            f"{cluster.tasks[0]}/device:CPU:0",
            [(s.start, s.stop, s.device) for s in shards],
            tiny,
            ["mean"],
            resident=False,
        ) as hand:
            tiny_impls = {
                "tiny tmr job (100 float32)": lambda: job.run(tiny, cluster=cluster),
                "tiny hand-written TF": lambda: hand.run("mean"),
            }
            tiny_values, tiny_raw = interleaved(tiny_impls, warmup=3, repeats=tiny_repeats)
        for name, value in tiny_values.items():
            if not np.isclose(float(np.asarray(value).reshape(-1)[0]), float(np.mean(tiny, dtype=np.float64)), rtol=1e-5):
                wrong.append(f"{name}: {value}")

    print(f"mean of {size:.0e} float32 ({x.nbytes / 1e6:.0f} MB) on a 2-worker LocalCluster, {repeats} interleaved rounds\n")
    print("| implementation | ms: median [min–max] | GB/s |\n|---|---|---|")
    for name, samples in raw.items():
        print(_row(name, samples, x.nbytes if "shipped" in name else None))
    for name, samples in tiny_raw.items():
        print(_row(name, samples, None))
    print()
    print(_ratio(raw, "tmr.mean shipped, shared memory", "tmr.mean shipped, gRPC feeds"))
    if ray_ok:
        print(_ratio(raw, "tmr.mean shipped, shared memory", "ray shipped (put + 2 tasks)"))
    else:
        print("ray: not run (not asked for, or not installed: pip install -e '.[bench]'), not compared")
    print(_ratio(tiny_raw, "tiny tmr job (100 float32)", "tiny hand-written TF"))
    if args.plot:
        from ._plots import bar_chart

        ms = lambda raw: [(name, [t * 1e3 for t in samples]) for name, samples in raw.items()]  # noqa: E731
        bar_chart([(f"mean of {size:.0e} float32", ms(raw)), ("tiny job (100 float32)", ms(tiny_raw))], args.plot, unit="ms")
    for line in wrong:
        print(f"WRONG: {line}")
    return 1 if wrong else 0


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["shipping", *sys.argv[1:]]))
