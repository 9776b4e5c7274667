"""The arithmetic of the benchmark jobs, shared by every implementation so they all do the same work.

Three jobs: the mean, the variance, and one k-means (Lloyd) iteration over points
of ``KMEANS_DIM`` float32 coordinates with ``KMEANS_K`` centroids.  Each job has a
TensorFlow per-slice function (used by the framework's MapReduce, the hand-written
graph and the local ``tf.function``), a numpy per-chunk function (used by numpy,
Dask and Ray) and a float64 numpy reference that every result is checked against.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from ._config import KMEANS_DIM, KMEANS_K

SEED = 20240521


KMEANS_MIN_POINTS = 2 * KMEANS_K
"""k-means needs at least k points: a tiny size still gets this many (the case records the elements it used)."""


def make_data(elements: int) -> np.ndarray:
    """At least ``elements`` float32 numbers uniform in [0, 1) (mean 0.5, so relative errors mean something)."""
    return np.random.default_rng(SEED).random(max(elements, KMEANS_MIN_POINTS * KMEANS_DIM), dtype=np.float32)


def job_input(job: str, data: np.ndarray, size: int) -> np.ndarray:
    """The array a job maps for ``size``: the first ``size`` elements of ``data``, or for k-means
    ``size // 8`` (at least ``KMEANS_MIN_POINTS``) points of 8 coordinates, a view of the same memory."""
    if job == "kmeans":
        points = max(size // KMEANS_DIM, KMEANS_MIN_POINTS)
        return data[: points * KMEANS_DIM].reshape(points, KMEANS_DIM)
    return data[:size]


def initial_centroids() -> np.ndarray:
    """The k-means starting centroids: fixed, seeded, the same for every implementation."""
    return np.random.default_rng(SEED + 1).random((KMEANS_K, KMEANS_DIM), dtype=np.float32)


# --- TensorFlow: per-slice partials -------------------------------------------------------------


def tf_kmeans_partial(x: tf.Tensor, centroids: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Assign each point to its nearest centroid; per-centroid coordinate sums and point counts."""
    x2 = tf.reduce_sum(x * x, axis=1, keepdims=True)
    c2 = tf.reduce_sum(centroids * centroids, axis=1)
    distances = x2 - 2.0 * tf.matmul(x, centroids, transpose_b=True) + c2
    labels = tf.argmin(distances, axis=1, output_type=tf.int32)
    k = tf.shape(centroids)[0]
    sums = tf.math.unsorted_segment_sum(x, labels, k)
    counts = tf.math.unsorted_segment_sum(tf.ones_like(labels, dtype=tf.float32), labels, k)
    return sums, counts


def kmeans_update(sums: Any, counts: Any, centroids: np.ndarray) -> np.ndarray:
    """The new centroids from summed partials (an empty cluster keeps its centroid), on the client."""
    sums = np.asarray(sums, np.float64)
    counts = np.asarray(counts, np.float64)
    new = sums / np.maximum(counts, 1.0)[:, None]
    return np.where(counts[:, None] > 0, new, centroids).astype(np.float32)


# --- numpy: per-chunk partials and combines (numpy, Dask, Ray) -------------------------------------


def np_partial(job: str, x: np.ndarray, centroids: np.ndarray | None = None) -> tuple[Any, ...]:
    """One chunk's partial: (n, sum) for the mean, (n, mean, M2) for the variance, (sums, counts) for k-means."""
    if job == "mean":
        return (x.size, float(np.sum(x, dtype=np.float64)))
    if job == "variance":
        m = float(np.mean(x, dtype=np.float64))
        d = x - np.float32(m)
        return (x.size, m, float(np.dot(d, d)))
    assert centroids is not None
    x2 = np.einsum("ij,ij->i", x, x)[:, None]
    distances = x2 - 2.0 * (x @ centroids.T) + np.einsum("ij,ij->i", centroids, centroids)[None, :]
    labels = np.argmin(distances, axis=1)
    k = centroids.shape[0]
    sums = np.stack([np.bincount(labels, weights=x[:, j], minlength=k) for j in range(x.shape[1])], axis=1)
    return (sums, np.bincount(labels, minlength=k).astype(np.float64))


def np_combine(job: str, parts: list[tuple[Any, ...]], centroids: np.ndarray | None = None) -> Any:
    """Merge chunk partials (size-weighted for the mean and variance) into the job's result."""
    if job == "mean":
        return sum(p[1] for p in parts) / sum(p[0] for p in parts)
    if job == "variance":
        n = sum(p[0] for p in parts)
        mean = sum(p[0] * p[1] for p in parts) / n
        return sum(p[2] + p[0] * (p[1] - mean) ** 2 for p in parts) / n
    assert centroids is not None
    return kmeans_update(sum(p[0] for p in parts), sum(p[1] for p in parts), centroids)


def numpy_job(job: str, x: np.ndarray, centroids: np.ndarray) -> Any:
    """The job as a numpy user writes it, in one process."""
    if job == "mean":
        return np.mean(x)
    if job == "variance":
        return np.var(x)
    return np_combine(job, [np_partial(job, x, centroids)], centroids)


def reference(job: str, x: np.ndarray, centroids: np.ndarray) -> Any:
    """The float64 answer every implementation is checked against."""
    if job == "mean":
        return float(np.mean(x, dtype=np.float64))
    if job == "variance":
        return float(np.var(x, dtype=np.float64))
    return numpy_job(job, x, centroids)


def agrees(job: str, value: Any, expected: Any) -> tuple[bool, float]:
    """Whether a result matches the reference, and its largest relative error.

    k-means compares centroids loosely: a point on the boundary between two
    centroids may go either way under float32 rounding.
    """
    value = np.asarray(value, np.float64)
    expected = np.asarray(expected, np.float64)
    if value.shape != expected.shape:
        return False, float("inf")
    err = float(np.max(np.abs(value - expected) / np.maximum(np.abs(expected), 1e-12))) if value.size else 0.0
    return err <= (1e-2 if job == "kmeans" else 1e-4), err
