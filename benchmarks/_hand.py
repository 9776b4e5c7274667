"""The benchmark jobs written by hand in plain TensorFlow, the lesson's way: the baseline for overhead.

One ``tf.compat.v1`` Graph: each slice of the input under an explicit
``tf.device("/job:local/task:i...")``, sliced on the client and fed through its own
placeholder (shipped) or kept in a resource variable on its device (resident), the
job's partial computed there, and a manual size-weighted combine on task 0.  One
``tf.compat.v1.Session(cluster.target)`` with an operation timeout and device
filters runs it.  The slices and devices are those of the framework's plan for the
same layout, so both sides do exactly the same placement.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from ._config import KMEANS_DIM, KMEANS_K
from ._work import kmeans_update, tf_kmeans_partial

_containers = itertools.count()


class HandWritten:
    """The jobs over one input array, on fixed slices ``(start, stop, device)``, by hand.

    Args:
        target: the master's gRPC target (``cluster.target``, task 0).
        master: the master task's CPU device, where the combine runs.
        slices: ``(start, stop, device)`` per slice, covering the rows.
        x: the input (1-d for the mean and variance, (points, 8) for k-means).
        jobs: the jobs to build.
        resident: keep the slices in resource variables on their devices (loaded once, here).
        timeout: seconds for ``operation_timeout_in_ms`` and each run's deadline.
    """

    def __init__(
        self,
        target: str,
        master: str,
        slices: Sequence[tuple[int, int, str]],
        x: np.ndarray,
        jobs: Sequence[str],
        *,
        resident: bool,
        timeout: float = 120.0,
    ):
        self.x = x
        self.resident = resident
        self.graph = tf.Graph()
        self._placeholders: list[tuple[Any, int, int]] = []
        self._destroy: list[Any] = []
        self._fetch: dict[str, Any] = {}
        live = [(a, b, d) for a, b, d in slices if b > a]
        tasks = sorted({d.split("/device:")[0].replace("/replica:0", "") for _, _, d in live} | {master.split("/device:")[0]})
        dtype = tf.as_dtype(x.dtype)
        with self.graph.as_default(), tf.compat.v1.container(f"tmrbench_hand_{next(_containers)}"):
            with tf.device(master):
                self.centroids = tf.compat.v1.placeholder(tf.float32, (KMEANS_K, KMEANS_DIM), name="centroids")
            parts: list[tuple[int, Any]] = []
            initializers = []
            for i, (a, b, device) in enumerate(live):
                with tf.device(device):
                    ph = tf.compat.v1.placeholder(dtype, (b - a, *x.shape[1:]), name=f"slice{i}")
                    self._placeholders.append((ph, a, b))
                    if resident:
                        var = tf.compat.v1.Variable(ph, trainable=False, use_resource=True, collections=[], name=f"resident{i}")
                        initializers.append(var.initializer)
                        self._destroy.append(tf.raw_ops.DestroyResourceOp(resource=var.handle, ignore_lookup_error=True))
                        data = var.value()
                    else:
                        data = ph
                    parts.append((b - a, self._partials(jobs, data)))
            with tf.device(master):
                self._fetch = self._combine(jobs, parts)
        self.graph.finalize()
        config = tf.compat.v1.ConfigProto(
            operation_timeout_in_ms=int(timeout * 1000), device_filters=tasks, allow_soft_placement=False
        )
        self.session = tf.compat.v1.Session(target, graph=self.graph, config=config)
        self._options = tf.compat.v1.RunOptions(timeout_in_ms=int(timeout * 1000))
        if resident:
            self.session.run(initializers, feed_dict=self._slices(), options=self._options)

    def _partials(self, jobs: Sequence[str], data: tf.Tensor) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if "mean" in jobs:
            out["mean"] = tf.reduce_mean(data)
        if "variance" in jobs:
            m = tf.reduce_mean(data)
            d = data - m
            out["variance"] = (m, tf.reduce_sum(d * d))
        if "kmeans" in jobs:
            out["kmeans"] = tf_kmeans_partial(data, self.centroids)
        return out

    @staticmethod
    def _combine(jobs: Sequence[str], parts: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
        total = float(sum(n for n, _ in parts))
        f64 = lambda t: tf.cast(t, tf.float64)  # noqa: E731 - a one-line helper reads better inline
        fetch: dict[str, Any] = {}
        if "mean" in jobs:
            fetch["mean"] = tf.add_n([f64(p["mean"]) * n for n, p in parts]) / total
        if "variance" in jobs:
            mean = tf.add_n([f64(p["variance"][0]) * n for n, p in parts]) / total
            m2 = tf.add_n([f64(p["variance"][1]) + n * tf.square(f64(p["variance"][0]) - mean) for n, p in parts])
            fetch["variance"] = m2 / total
        if "kmeans" in jobs:
            fetch["kmeans"] = (
                tf.add_n([f64(p["kmeans"][0]) for _, p in parts]),
                tf.add_n([f64(p["kmeans"][1]) for _, p in parts]),
            )
        return fetch

    def _slices(self) -> dict[Any, np.ndarray]:
        return {ph: self.x[a:b] for ph, a, b in self._placeholders}

    def run(self, job: str, centroids: np.ndarray | None = None) -> Any:
        """One run of ``job``: one ``Session.run``, feeding the slices when shipped."""
        feed = {} if self.resident else self._slices()
        if job == "kmeans":
            assert centroids is not None
            feed[self.centroids] = centroids
            sums, counts = self.session.run(self._fetch[job], feed_dict=feed, options=self._options)
            return kmeans_update(sums, counts, centroids)
        return self.session.run(self._fetch[job], feed_dict=feed, options=self._options)

    def close(self) -> None:
        """Free the resident slices on the workers and close the session."""
        try:
            if self._destroy:
                self.session.run(self._destroy, options=self._options)
        finally:
            self.session.close()

    def __enter__(self) -> HandWritten:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
