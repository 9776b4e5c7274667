"""What isolating a LocalCluster's workers in a network namespace costs.

``python -m benchmarks isolation``: two 2-worker ``LocalCluster`` s run side by side in this process: one with ``isolate=False``
(the workers on this machine's network, as before) and one isolated (the default: the workers in
a network namespace of their own, reached through relays on this process's loopback).  On each,
interleaved round by round after checked warm-up runs:

- tiny: ``MapReduce(tf.reduce_sum, combiners.sum)`` over ``np.ones(100, float32)``, the median of
  ``--tiny`` runs (in blocks of 50, alternating sides);
- shipped: ``tmr.mean`` of ``--rows`` float32 with ``transfer="feed"`` (gRPC through the master:
  this crosses the relay) and with ``transfer="shm"`` (shared memory), the median of ``--rounds``;
- resident: ``tmr.scatter`` once, then ``tmr.mean`` of the ``Sharded``, the median of ``--rounds`` × 4.

Prints each side's medians and the isolated/exposed ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import numpy as np

import tfmapreduce as tmr

from ._registry import Size, benchmark


def _time(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


@benchmark(
    "isolation",
    sizes={
        "rows": Size(1e5, 4e7, "float32 numbers shipped per run"),
        "rounds": Size(1, 7, "interleaved rounds of the shipped runs"),
        "tiny": Size(50, 300, "tiny runs per side"),
    },
)
def run(args: argparse.Namespace) -> None:
    """Measure and print each side's medians and the ratios."""
    import tensorflow as tf

    x = np.random.default_rng(0).random(int(args.rows), dtype=np.float32)
    expected = float(np.mean(x, dtype=np.float64))
    ones = np.ones(100, np.float32)
    tiny = tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum)
    with tmr.LocalCluster(2, isolate=False) as exposed, tmr.LocalCluster(2) as isolated:
        sides = {"exposed": exposed, "isolated": isolated}
        print(f"isolated: {isolated.isolation}")
        times: dict[str, dict[str, list[float]]] = {name: {} for name in sides}
        for cluster in sides.values():  # warm-up, checked
            for _ in range(20):
                assert float(tiny.run(ones, cluster=cluster)) == 100.0
            for transfer in ("feed", "shm"):
                assert abs(float(tmr.mean(x, cluster=cluster, transfer=transfer)) - expected) < 1e-6
        for _ in range(max(1, args.tiny // 50)):
            for name, cluster in sides.items():
                runs = times[name].setdefault("tiny", [])
                runs += [_time(lambda c=cluster: tiny.run(ones, cluster=c)) for _ in range(50)]
        for _ in range(args.rounds):
            for transfer in ("feed", "shm"):
                for name, cluster in sides.items():
                    seconds = _time(lambda c=cluster, t=transfer: tmr.mean(x, cluster=c, transfer=t))
                    times[name].setdefault(transfer, []).append(seconds)
        resident = {name: tmr.scatter(x, cluster=cluster) for name, cluster in sides.items()}
        for name in sides:
            assert abs(float(tmr.mean(resident[name])) - expected) < 1e-6
        for _ in range(args.rounds * 4):
            for name in sides:
                times[name].setdefault("resident", []).append(_time(lambda d=resident[name]: tmr.mean(d)))
        for data in resident.values():
            data.delete()
    mb = x.nbytes / 1e6
    print("2-worker LocalCluster, exposed (isolate=False) vs isolated; medians [min-max]; ratio isolated/exposed:")
    for what, label in (
        ("tiny", "tiny job (sum of 100 float32)"),
        ("feed", f"mean of {args.rows:.3g} float32 ({mb:.0f} MB), transfer='feed'"),
        ("shm", f"mean of {args.rows:.3g} float32 ({mb:.0f} MB), transfer='shm'"),
        ("resident", f"mean of {args.rows:.3g} resident float32"),
    ):
        medians = {name: float(np.median(times[name][what])) for name in sides}
        parts = []
        for name in sides:
            seconds = times[name][what]
            unit, scale = ("ms", 1e3) if medians[name] < 1 else ("s", 1.0)
            speed = f", {x.nbytes / medians[name] / 1e9:.2f} GB/s" if what in ("feed", "shm") else ""
            parts.append(
                f"{name} {medians[name] * scale:.3g} {unit} [{min(seconds) * scale:.3g}-{max(seconds) * scale:.3g}]{speed}"
            )
        print(f"  {label}: {'; '.join(parts)}; ratio {medians['isolated'] / medians['exposed']:.3f}")


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["isolation", *sys.argv[1:]]))
