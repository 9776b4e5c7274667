"""Batch inference with Keras models: tmr.predict on a 2-worker LocalCluster vs model.predict and hand-written loops.

``python -m benchmarks models`` measures two models built in code (no downloads), each over ``.npy`` files and
arrays, and prints the median rows per second of each way, with the model variables' bytes ``tmr.predict`` sent on
its first and on a later run:

- the MLP of the models guide, Dense(64, relu) → Dense(1), over ``--rows`` (1e6) rows of 16 float32: ``model.predict``
  in one process (``batch_size=--batch``), a hand-written ``tf.data`` loop and a loop over numpy slices of the
  ``tf.function``-wrapped model in one process, ``tmr.predict`` over the array (shipped), over resident data
  (``tmr.scatter``) and over 4 ``.npy`` files (``batch_rows=--batch``), and the ``broadcast=`` workaround (the forward
  pass written with ``tf.matmul``, the weights shipped with every run);
- a small CNN over ``--images`` (8192) images of 32×32×3 float32 (three 3×3 convolutions with pooling, then a Dense
  of 10): ``model.predict``, the ``tf.data`` loop, and ``tmr.predict`` over the array and over 4 ``.npy`` files
  (``--image-batch`` rows at once).

Both models also run through Ray Data (where ``ray[data]`` is installed): ``map_batches`` with a pool of 2 actors
(1 CPU each, Ray started with 2 CPUs), each building the model once and calling it on its batches, over the array in
4 blocks (``ray.data.from_numpy``), its order kept.  Every result is checked against ``model.predict``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

import tfmapreduce as tmr

if TYPE_CHECKING:
    import tensorflow as tf

from ._registry import Size, benchmark
from ._timing import repeat


def _dense() -> Any:
    import keras

    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)])


def _cnn() -> Any:
    import keras

    keras.utils.set_random_seed(0)
    layers = keras.layers
    return keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            layers.Conv2D(16, 3, activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(32, 3, activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(32, 3, activation="relu"),
            layers.GlobalAveragePooling2D(),
            layers.Dense(10),
        ]
    )


class _Predictor:
    """A Ray Data actor: the model built once (``build``, then ``weights``), called on each batch of ``data``."""

    def __init__(self, build: Callable[[], Any], weights: list[np.ndarray]) -> None:
        import tensorflow as tf

        model = build()
        model.set_weights(weights)
        self.forward = tf.function(lambda b: model(b), reduce_retracing=True)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"out": self.forward(batch["data"]).numpy()}


def _ray_data(build: Callable[[], Any], model: Any, x: np.ndarray, batch: int) -> dict[str, Callable[[], Any]]:
    """Ray Data ``map_batches`` with a pool of 2 actors, where Ray is installed (Ray already started)."""
    import ray

    logging.getLogger("ray.data").setLevel(logging.WARNING)  # no lines about each execution among the tables
    ray.data.DataContext.get_current().execution_options.preserve_order = True
    ray.data.DataContext.get_current().enable_progress_bars = False
    weights = model.get_weights()

    def run() -> np.ndarray:
        ds = ray.data.from_numpy(np.array_split(x, 4)).map_batches(
            _Predictor,
            fn_constructor_kwargs={"build": build, "weights": weights},
            batch_size=batch,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=2),
            num_cpus=1,
        )
        return np.concatenate([b["out"] for b in ds.iter_batches(batch_size=None, batch_format="numpy")])

    return {"Ray Data map_batches, 2 actors (model built once each), 2 CPUs": run}


def _stats(f: Callable[[], Any]) -> tuple[Any, tmr.RunStats]:
    with tmr.stats() as s:
        value = f()
    return value, s.last


def _loops(model: Any, x: np.ndarray, batch: int) -> dict[str, Callable[[], Any]]:
    """``model.predict`` and the two hand-written loops of one process."""
    import tensorflow as tf  # here, not at the top: --help answers before TensorFlow loads

    forward = tf.function(lambda b: model(b))
    batches = tf.data.Dataset.from_tensor_slices(x).batch(batch).prefetch(tf.data.AUTOTUNE)

    def data_loop() -> np.ndarray:  # the loop a TensorFlow user writes
        return np.concatenate([forward(b).numpy() for b in batches])

    def slices() -> np.ndarray:  # batches sliced from the array, no tf.data
        return np.concatenate([forward(x[i : i + batch]).numpy() for i in range(0, len(x), batch)])

    return {
        "model.predict, one process": lambda: model.predict(x, batch_size=batch, verbose=0),
        "tf.data batches + tf.function(model) loop, one process": data_loop,
        "tf.function(model) loop over numpy slices, one process": slices,
    }


def _measure(
    title: str, model: Any, x: np.ndarray, batch: int, repeats: int, cluster: tmr.Cluster, folder: str, extra: Any = None
) -> None:
    """Time each way of predicting ``x`` with ``model`` and print its table (``extra``: more cases, given the cluster)."""
    want = model.predict(x, batch_size=batch, verbose=0)
    for i, part in enumerate(np.array_split(x, 4)):
        np.save(f"{folder}/part{i}.npy", part)
    files = tmr.read_npy(f"{folder}/part*.npy")
    first, first_stats = _stats(lambda: tmr.predict(model, files, cluster=cluster, batch_rows=batch))
    second, second_stats = _stats(lambda: tmr.predict(model, files, cluster=cluster, batch_rows=batch))
    cases = _loops(model, x, batch)
    cases["tmr.predict, array shipped, LocalCluster(2)"] = lambda: tmr.predict(model, x, cluster=cluster)
    cases["tmr.predict, array shipped, batch_rows, LocalCluster(2)"] = lambda: tmr.predict(
        model, x, cluster=cluster, batch_rows=batch
    )
    cases["tmr.predict, 4 .npy files, batch_rows, LocalCluster(2)"] = lambda: tmr.predict(
        model, files, cluster=cluster, batch_rows=batch
    )
    cases.update(extra(cluster) if extra is not None else {})
    medians: dict[str, float] = {}
    for name, f in cases.items():
        seconds, value = repeat(f, repeats)
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-4)
        medians[name] = float(np.median(seconds))
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(second, want, rtol=1e-4, atol=1e-4)
    n = len(x)
    print(f"{title}: {n:.0e} rows, batch {batch}, median of {repeats} after one warm-up")
    print("| how | median s | rows/s |")
    print("|---|---|---|")
    for name, s in medians.items():
        print(f"| {name} | {s:.3f} | {n / s:,.0f} |")
    weight = sum(w.numpy().nbytes for w in model.weights)
    print(
        f"model variables: {weight} bytes; tmr.predict sent {first_stats.weight_bytes} bytes of them on its first run, "
        f"{second_stats.weight_bytes} on its second\n"
    )


@benchmark(
    "models",
    sizes={
        "rows": Size(1e4, 1e6, "rows of 16 float32 for the MLP"),
        "batch": Size(8192, 65536, "rows the MLP gets at once (model.predict's batch_size, tmr's batch_rows)"),
        "images": Size(256, 8192, "32x32x3 float32 images for the CNN"),
        "image_batch": Size(64, 1024, "images the CNN gets at once"),
        "repeats": Size(1, 5, "timed calls per row after one warm-up"),
    },
)
def run(args: argparse.Namespace) -> None:
    """Measure and print the tables."""
    n, batch, r = int(args.rows), int(args.batch), args.repeats
    x = np.random.default_rng(0).random((n, 16), dtype=np.float32)
    mlp = _dense()
    weights = [w.numpy() for w in mlp.weights]  # kernel1, bias1, kernel2, bias2

    def by_hand(rows: tf.Tensor, w1: tf.Tensor, b1: tf.Tensor, w2: tf.Tensor, b2: tf.Tensor) -> tf.Tensor:
        import tensorflow as tf

        return tf.nn.relu(rows @ w1 + b1) @ w2 + b2

    def workarounds(c: tmr.Cluster) -> dict[str, Callable[[], Any]]:
        resident = tmr.scatter(x, cluster=c)  # freed with the cluster
        return {
            "tmr.predict, resident data, LocalCluster(2)": lambda: tmr.predict(mlp, resident, cluster=c),
            "broadcast= weights + tf.matmul, LocalCluster(2)": lambda: _gathered(
                tmr.map(by_hand, x, broadcast=weights, cluster=c)
            ),
        }

    images = np.random.default_rng(1).random((int(args.images), 32, 32, 3), dtype=np.float32)
    cnn, image_batch = _cnn(), int(args.image_batch)
    with contextlib.ExitStack() as stack:
        ray = _start_ray(stack)
        with tmr.LocalCluster(2) as c:

            def mlp_cases(c: tmr.Cluster) -> dict[str, Callable[[], Any]]:
                return {**workarounds(c), **(_ray_data(_dense, mlp, x, batch) if ray else {})}

            def cnn_cases(c: tmr.Cluster) -> dict[str, Callable[[], Any]]:
                return _ray_data(_cnn, cnn, images, image_batch) if ray else {}

            with tempfile.TemporaryDirectory() as folder:
                _measure("MLP Dense(64, relu) -> Dense(1) over 16 float32", mlp, x, batch, r, c, folder, mlp_cases)
            with tempfile.TemporaryDirectory() as folder:
                _measure("CNN, 3 conv layers, over 32x32x3 float32 images", cnn, images, image_batch, r, c, folder, cnn_cases)
    print(f"broadcast= feeds all {sum(w.nbytes for w in weights)} bytes of the MLP's weights with every run")
    if not ray:
        print("Ray Data not measured: ray[data] is not installed in this environment")


def _start_ray(stack: contextlib.ExitStack) -> bool:
    """Start Ray with 2 CPUs for the Ray Data peer (stopped with ``stack``): False where Ray is not installed."""
    try:
        import ray.data  # noqa: F401
    except ImportError:
        return False
    from ._peers import Ray

    stack.enter_context(Ray.start(2))
    return True


def _gathered(kept: tmr.Sharded) -> np.ndarray:
    with kept:
        return kept.gather()


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["models", *sys.argv[1:]]))
