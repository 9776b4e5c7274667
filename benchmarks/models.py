"""Batch inference with a Keras model: tmr.predict on a 2-worker LocalCluster vs model.predict in one process.

``python -m benchmarks models`` makes ``--rows`` (1e6) rows of 16 float32, the models guide's Dense(64, relu) →
Dense(1) model, and prints the median rows per second of: ``model.predict`` in one process (``batch_size=--batch``),
a hand-written loop of the ``tf.function``-wrapped model over batches in one process, ``tmr.predict`` over the array (shipped),
over resident data (``tmr.scatter``) and over 4 ``.npy`` files (``batch_rows=--batch``), and the ``broadcast=``
workaround (the forward pass written with ``tf.matmul``, the weights shipped with every run); with the model
variables' bytes each sent on its first and on a later run.  Every result is checked against ``model.predict``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

import tfmapreduce as tmr

from ._registry import Size, benchmark
from ._timing import repeat


def _dense() -> Any:
    import keras

    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)])


def _stats(f: Callable[[], Any]) -> tuple[Any, tmr.RunStats]:
    with tmr.stats() as s:
        value = f()
    return value, s.last


@benchmark(
    "models",
    sizes={
        "rows": Size(1e4, 1e6, "rows of 16 float32"),
        "batch": Size(8192, 65536, "rows the model gets at once (model.predict's batch_size, tmr's batch_rows)"),
        "repeats": Size(1, 5, "timed calls per row after one warm-up"),
    },
)
def run(args: argparse.Namespace) -> None:
    """Measure and print the table."""
    n, batch, r = int(args.rows), int(args.batch), args.repeats
    x = np.random.default_rng(0).random((n, 16), dtype=np.float32)
    model = _dense()
    want = model.predict(x, batch_size=batch, verbose=0)
    weights = [w.numpy() for w in model.weights]  # kernel1, bias1, kernel2, bias2

    def by_hand(rows: tf.Tensor, w1: tf.Tensor, b1: tf.Tensor, w2: tf.Tensor, b2: tf.Tensor) -> tf.Tensor:
        return tf.nn.relu(rows @ w1 + b1) @ w2 + b2

    forward = tf.function(lambda b: model(b))

    def loop() -> np.ndarray:  # (tf.data's from_tensor_slices(x).batch(b) went row by row: 4x slower here)
        return np.concatenate([forward(x[i : i + batch]).numpy() for i in range(0, n, batch)])

    rows: dict[str, tuple[float, Any]] = {}
    with tempfile.TemporaryDirectory() as folder, tmr.LocalCluster(2) as c:
        for i, part in enumerate(np.array_split(x, 4)):
            np.save(f"{folder}/part{i}.npy", part)
        files = tmr.read_npy(f"{folder}/part*.npy")
        first, first_stats = _stats(lambda: tmr.predict(model, x, cluster=c))
        second, second_stats = _stats(lambda: tmr.predict(model, x, cluster=c))
        cases: dict[str, Callable[[], Any]] = {
            "model.predict, one process": lambda: model.predict(x, batch_size=batch, verbose=0),
            "tf.function(model) loop over batches, one process": loop,
            "tmr.predict, array shipped, LocalCluster(2)": lambda: tmr.predict(model, x, cluster=c),
            "tmr.predict, array shipped, batch_rows, LocalCluster(2)": lambda: tmr.predict(model, x, cluster=c, batch_rows=batch),
            "tmr.predict, 4 .npy files, LocalCluster(2)": lambda: tmr.predict(model, files, cluster=c, batch_rows=batch),
            "broadcast= weights + tf.matmul, LocalCluster(2)": lambda: _gathered(
                tmr.map(by_hand, x, broadcast=weights, cluster=c)
            ),
        }
        with tmr.scatter(x, cluster=c) as resident:
            cases["tmr.predict, resident data, LocalCluster(2)"] = lambda: tmr.predict(model, resident, cluster=c)
            for name, f in cases.items():
                seconds, value = repeat(f, r)
                np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5)
                rows[name] = (float(np.median(seconds)), value)
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(second, want, rtol=1e-4, atol=1e-5)
    print(f"{n:.0e} rows x 16 float32, Dense(64, relu) -> Dense(1), batch {batch}, median of {r} after one warm-up")
    print("| how | median s | rows/s |")
    print("|---|---|---|")
    for name, (s, _) in rows.items():
        print(f"| {name} | {s:.3f} | {n / s:,.0f} |")
    weight = sum(w.nbytes for w in weights)
    print(
        f"model variables: {weight} bytes; tmr.predict sent {first_stats.weight_bytes} bytes of them on its first run, "
        f"{second_stats.weight_bytes} on its second; broadcast= feeds all {weight} with every run"
    )


def _gathered(kept: tmr.Sharded) -> np.ndarray:
    with kept:
        return kept.gather()


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["models", *sys.argv[1:]]))
