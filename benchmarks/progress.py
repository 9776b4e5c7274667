"""What a run's progress counting and its bar cost.

``python -m benchmarks progress``: one 2-worker ``LocalCluster``; each job runs three ways, interleaved round by round after checked
warm-up runs:

- ``off``: ``progress=False``, a program that counts nothing;
- ``counted``: ``progress=None`` with stderr not a terminal: the run counts its rows, no bar is drawn;
- ``bar``: ``progress=True``: the run counts and a bar is drawn from the first moment (to /dev/null here),
  reading the counters every 0.3 s through a second session.

The jobs: the mean of ``--rows`` float32 in 4 ``.npy`` files (batches counted), the same files through a
compute-bound map of your own (``sin(x)·cos(x) + exp(-x)`` summed: a run of seconds, the kind a bar is for), a
word count of ``--words`` words in 4 text files (blocks counted in bytes), and ``mean_by_key`` of ``--rows`` / 10
resident rows (shards counted).  Prints each way's median and its ratio to ``off``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import tfmapreduce as tmr

from ._registry import Size, benchmark

WAYS = {"off": False, "counted": None, "bar": True}


def _heavy(batch: Any) -> Any:
    import tensorflow as tf

    x = tf.cast(batch, tf.float64)
    return tf.reduce_sum(tf.sin(x) * tf.cos(x) + tf.exp(-x))


@benchmark(
    "progress",
    sizes={
        "rows": Size(2e5, 4e7, "float32 numbers in the .npy files"),
        "words": Size(2e5, 8e6, "words in the text files"),
        "rounds": Size(1, 7, "interleaved rounds"),
    },
)
def run(args: argparse.Namespace) -> None:
    """Measure and print each way's median and its ratio to ``off``."""
    rows, words, rounds = int(args.rows), int(args.words), args.rounds
    rng = np.random.default_rng(0)
    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory())
        cluster = stack.enter_context(tmr.LocalCluster(2))
        numbers = rng.random(rows, dtype=np.float32)
        for i, part in enumerate(np.array_split(numbers, 4)):
            np.save(Path(folder, f"x{i}.npy"), part)
        vocabulary = np.array([f"w{i}" for i in range(5000)])
        text = vocabulary[rng.zipf(1.3, words) % len(vocabulary)]
        for i, part in enumerate(np.array_split(text, 4)):
            Path(folder, f"t{i}.txt").write_text(
                "\n".join(" ".join(line) for line in np.array_split(part, max(1, len(part) // 8)))
            )
        keys = stack.enter_context(tmr.scatter(rng.integers(0, 1000, rows // 10), cluster=cluster))
        values = stack.enter_context(tmr.scatter(numbers[: rows // 10], cluster=cluster))
        heavy = tmr.MapReduce(_heavy, tmr.combiners.sum)
        jobs: dict[str, Callable[[bool | None], object]] = {
            "mean of .npy files": lambda p: tmr.mean(tmr.read_npy(f"{folder}/x*.npy"), cluster=cluster, progress=p),
            "your own map of .npy files": lambda p: heavy.run(tmr.read_npy(f"{folder}/x*.npy"), cluster=cluster, progress=p),
            "word count of text files": lambda p: tmr.recipes.word_count(
                tmr.read_text(f"{folder}/t*.txt"), cluster=cluster, progress=p
            ),
            "mean_by_key, resident": lambda p: tmr.mean_by_key(keys, values, progress=p),
        }
        expected = float(np.mean(numbers, dtype=np.float64))
        times: dict[tuple[str, str], list[float]] = {}
        with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
            for progress in WAYS.values():  # warm-up (compiles each way's program), checked
                assert abs(float(jobs["mean of .npy files"](progress)) - expected) < 1e-5  # type: ignore[arg-type]
                for job in jobs.values():
                    job(progress)
            for _ in range(rounds):
                for name, job in jobs.items():
                    for way, progress in WAYS.items():
                        started = time.perf_counter()
                        job(progress)
                        times.setdefault((name, way), []).append(time.perf_counter() - started)
    print(f"median of {rounds} rounds, 2-worker LocalCluster, {os.cpu_count()} cores")
    print(f"{'job':28} {'off':>9} {'counted':>9} {'bar':>9} {'counted/off':>12} {'bar/off':>8}")
    for name in jobs:
        off, counted, bar = (statistics.median(times[name, way]) for way in WAYS)
        print(f"{name:28} {off:8.3f}s {counted:8.3f}s {bar:8.3f}s {counted / off:12.3f} {bar / off:8.3f}")
    sys.stdout.flush()


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["progress", *sys.argv[1:]]))
