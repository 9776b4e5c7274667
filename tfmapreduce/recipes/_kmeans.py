"""k-means: Lloyd's iterations, each one distributed run over (resident) data."""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._base.deadline import effective_timeout
from .._base.errors import InputError
from .._engine.stats import RunStats
from .._io.resident import Sharded
from .._io.source import as_array, host_array, sources
from .._ops.combine import SUM, Combiner
from .._options import Options, RunOptions
from ._recipe import (
    as_matrix,
    check_callback,
    check_float,
    check_int,
    feature_count,
    held_resident,
    progress_bar,
    recipe,
    run,
    run_with_stats,
)


@attrs.frozen
class KMeansStep:
    """One Lloyd iteration of [`kmeans`][tfmapreduce.recipes.kmeans], as passed to ``callback`` and kept in the history."""

    iteration: int
    """1 for the first iteration."""
    inertia: float
    """Sum of squared distances of the points to the centroids they were assigned to (the centroids before this update)."""
    shift: float
    """The largest distance a centroid moved in this update."""
    empty: int
    """Clusters that received no point (they kept their centroid)."""
    seconds: float
    """Wall time of the iteration: the distributed run and the client's update."""
    stats: RunStats
    """What the distributed run did (bytes sent, whether it compiled)."""


@attrs.frozen(eq=False)
class KMeansResult:
    """The result of [`kmeans`][tfmapreduce.recipes.kmeans]."""

    centroids: np.ndarray
    """The final centroids, shape ``(k, features)``, float64."""
    iterations: int
    """Lloyd iterations run."""
    converged: bool
    """True when the last update moved no centroid further than ``tol``."""
    history: tuple[KMeansStep, ...]
    """One record per iteration."""

    @property
    def inertia(self) -> float:
        """The last iteration's inertia (of the centroids before its update: the final ones' once converged); the
        ``n_init`` attempts are compared by it."""
        return self.history[-1].inertia if self.history else float("nan")

    @property
    def inertia_(self) -> float:
        """scikit-learn's name for [`inertia`][tfmapreduce.recipes.KMeansResult.inertia]."""
        return self.inertia

    @property
    def cluster_centers_(self) -> np.ndarray[Any, Any]:
        """scikit-learn's name for [`centroids`][tfmapreduce.recipes.KMeansResult.centroids]."""
        return self.centroids

    @property
    def n_iter_(self) -> int:
        """scikit-learn's name for [`iterations`][tfmapreduce.recipes.KMeansResult.iterations]."""
        return self.iterations

    def __repr__(self) -> str:
        return (
            f"KMeansResult(k={len(self.centroids)}, features={self.centroids.shape[1]}, iterations={self.iterations}, "
            f"converged={self.converged}, history=<{len(self.history)} steps>)"
        )

    def predict(self, x: Any) -> np.ndarray[Any, Any]:
        """The index of the nearest centroid for each row of ``x`` (a host array; the lowest index on ties).

        Computed on the client; for resident data, ``gather()`` it first.

        Examples:
            >>> result = KMeansResult(np.array([[0.0], [10.0]]), 1, True, ())
            >>> result.predict(np.array([[1.0], [9.0], [5.0]]))
            array([0, 1, 0])
        """
        x = as_array(x, argument="x").astype(np.float64)
        x = x.reshape(-1, 1) if x.ndim == 1 else x
        if x.ndim != 2 or x.shape[1] != self.centroids.shape[1]:
            raise InputError(f"x must have {self.centroids.shape[1]} features per row like the centroids, got shape {x.shape}")
        d2 = (x * x).sum(1)[:, None] - 2.0 * (x @ self.centroids.T) + (self.centroids * self.centroids).sum(1)[None, :]
        nearest: np.ndarray[Any, Any] = np.argmin(d2, axis=1)
        return nearest


def _rows_of(data: Any, indices: np.ndarray[Any, Any], timeout: float | None) -> np.ndarray[Any, Any]:
    """Rows ``indices`` (in that order) of a host array or resident data; only those rows travel."""
    if not isinstance(data, Sharded):
        rows: np.ndarray[Any, Any] = host_array(data, argument="data")[indices]
        return rows
    data.as_source()  # raises ClusterError for deleted data or a closed cluster
    wanted = np.unique(indices)
    graph = tf.Graph()
    parts, found = [], []
    with graph.as_default():
        for shard in data.plan.shards:
            local = wanted[(wanted >= shard.start) & (wanted < shard.stop)]
            if local.size:
                with tf.device(shard.device):
                    parts.append(tf.gather(data.read(shard), local - shard.start))
                found.append(local)
    try:
        values = data.cluster.run(graph, parts, {}, tasks=data.plan.tasks, timeout=effective_timeout(timeout))
    finally:
        data.cluster.forget(graph)
    rows = np.concatenate(values, axis=0)
    position = {int(g): i for i, g in enumerate(np.concatenate(found))}
    return rows[[position[int(i)] for i in indices]]


def _assign(x: tf.Tensor, centroids: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Squared distances to every centroid, and the nearest one (the LOWEST index among equals)."""
    d2 = (
        tf.reduce_sum(x * x, axis=1, keepdims=True)
        - 2.0 * tf.matmul(x, centroids, transpose_b=True)
        + tf.reduce_sum(centroids * centroids, axis=1)[None, :]
    )
    nearest = tf.reduce_min(d2, axis=1, keepdims=True)
    k = tf.shape(centroids)[0]
    index = tf.reduce_min(tf.where(d2 <= nearest, tf.range(k)[None, :], k), axis=1)  # tf.argmin leaves ties unspecified
    return index, tf.maximum(nearest[:, 0], 0.0)


_BINCOUNT_FEATURES = 64
"""Up to this many features, k-means sums each feature with its own weighted bincount."""


def _kmeans_map(x: tf.Tensor, centroids: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Per shard: the sum and count of the points nearest each centroid, and their squared distances."""
    x = as_matrix(x)
    labels, distance = _assign(x, centroids)
    k = tf.shape(centroids)[0]
    if x.shape[1] is not None and x.shape[1] <= _BINCOUNT_FEATURES:  # a weighted bincount per feature is ~4x faster on CPU
        sums = tf.stack(
            [tf.math.bincount(labels, weights=x[:, j], minlength=k, maxlength=k, dtype=tf.float64) for j in range(x.shape[1])], 1
        )
    else:
        sums = tf.math.unsorted_segment_sum(x, labels, k)
    counts = tf.math.bincount(labels, minlength=k, maxlength=k, dtype=tf.int64)
    return sums, counts, tf.reduce_sum(distance)


def _seed_map(x: tf.Tensor, centroids: tf.Tensor, u: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Per shard, one k-means++ round: the sum of its points' squared distances to the nearest chosen centroid, and its
    candidate, the point where their running sum first reaches ``u`` times that sum (drawn ∝ squared distance)."""
    x = tf.cast(as_matrix(x), tf.float64)
    _, distance = _assign(x, centroids)
    running = tf.cumsum(distance)
    total = running[-1]
    n = tf.shape(x)[0]
    at = tf.minimum(tf.reduce_sum(tf.cast(running < u * total, tf.int32)), n - 1)
    return tf.reshape(total, [1]), x[at][None, :]


def _concatenated(a: Any, b: Any) -> Any:
    return tf.nest.map_structure(lambda p, q: tf.concat([p, q], 0), a, b)


_PER_SHARD = Combiner(partial=lambda v, n: v, merge=_concatenated, name="per_shard")
"""Every shard's map output, one row each (in no promised order)."""


def plus_plus(
    data: Any, k: int, rows: int, features: int, rng: np.random.Generator, settings: RunOptions
) -> np.ndarray[Any, Any]:
    """k-means++ seeding (Arthur and Vassilvitskii): the first centroid a row drawn uniformly, each next one a row drawn
    with probability ∝ its squared distance to the nearest centroid chosen so far; each round one run over ``data``.

    A round's run gives each shard's sum of squared distances and its candidate (drawn within the
    shard with ``u2``); the client picks a shard ∝ its sum (with ``u1``, shards ordered by their
    candidates), so a row is drawn with exactly its k-means++ probability.  ``rng`` draws the
    first row's index, then ``u1, u2`` per round.
    """
    centroids = _rows_of(data, np.array([rng.integers(rows)]), settings.timeout).astype(np.float64).reshape(1, features)
    mapreduce = recipe(("kmeans++",), lambda: (_seed_map, _PER_SHARD))
    for _ in range(1, k):
        u1, u2 = rng.random(2)
        totals, candidates = run(mapreduce, data, settings, (centroids, np.float64(u2)))
        centroids = np.concatenate([centroids, pick(np.asarray(totals), np.asarray(candidates), u1)[None, :]])
    return centroids


def pick(totals: np.ndarray[Any, Any], candidates: np.ndarray[Any, Any], u: float) -> np.ndarray[Any, Any]:
    """The candidate of the shard drawn ∝ its total with ``u`` (shards in the order of their candidates, as rows).

    Example:
        >>> pick(np.array([1.0, 3.0]), np.array([[5.0], [2.0]]), 0.5).tolist()  # [2.0] first: 0.5 of 4 falls in its 3
        [2.0]
    """
    order = np.lexsort(candidates.T[::-1])
    totals, candidates = totals[order], candidates[order]
    running = np.cumsum(totals)
    chosen: np.ndarray[Any, Any] = candidates[0]
    if running[-1] > 0:  # else every point is a chosen centroid already (fewer distinct points than k)
        chosen = candidates[min(int(np.sum(running < u * running[-1])), len(totals) - 1)]
    return chosen


def _initial_centroids(
    data: Any, k: int, init: Any, rows: int, features: int, rng: np.random.Generator, settings: RunOptions
) -> np.ndarray[Any, Any]:
    timeout = settings.timeout
    if isinstance(init, str):
        if init == "k-means++":
            return plus_plus(data, k, rows, features, rng, settings)
        if init == "first":
            indices = np.arange(k)
        elif init == "random":
            indices = rng.choice(rows, size=k, replace=False)
        else:
            raise ValueError(f"init must be 'k-means++', 'first', 'random' or an array of k starting centroids, got {init!r}")
        return _rows_of(data, indices, timeout).astype(np.float64).reshape(k, features)
    centroids = as_array(init, argument="init").astype(np.float64)
    centroids = centroids.reshape(-1, 1) if centroids.ndim == 1 and features == 1 else centroids
    if centroids.shape != (k, features):
        raise InputError(
            f"init must hold k={k} centroids of {features} features, shape ({k}, {features}); got shape {centroids.shape}"
        )
    if not np.all(np.isfinite(centroids)):
        raise InputError("init holds NaN or infinite values; give finite starting centroids")
    return centroids


INITS = ("k-means++", "first", "random")
"""The named ways :func:`kmeans` seeds its centroids."""

_KEYWORDS = ("iters", "init", "n_init", "tol", "seed", "callback")
"""The keywords :func:`kmeans` takes beyond the run options (named in the error of an unknown one)."""


def kmeans(
    data: Any,
    k: int,
    /,
    *,
    iters: int = 10,
    init: Any = "k-means++",
    n_init: int = 1,
    tol: float = 1e-6,
    seed: int = 0,
    callback: Callable[[KMeansStep], Any] | None = None,
    **options: Unpack[Options],
) -> KMeansResult:
    """Lloyd's k-means: each iteration is one distributed run over the data.

    Each shard assigns its points to the nearest centroid (the lowest index among
    equally near ones) and returns per-cluster sums and counts; the sums add up
    across shards and the client divides.  A cluster that receives no point keeps
    its centroid.  The result equals the same Lloyd iterations computed in one
    numpy process (in float64) from the same starting centroids.

    Host data is scattered once for the call (and freed after), so only the
    first iteration ships it; pass resident data (``tmr.scatter``) to reuse it
    across calls.

    Args:
        data: a ``(rows, features)`` array (1-d: one feature) or resident ``Sharded`` data.
        k: the number of clusters, 1 ≤ k ≤ rows.
        iters: the most Lloyd iterations to run.
        init: ``"k-means++"`` (k-means++ seeding: each next centroid a row drawn with
            probability ∝ its squared distance to the nearest one chosen so far, each round
            one distributed run), ``"first"`` (the first k rows), ``"random"`` (k distinct
            rows drawn with ``seed``) or a ``(k, features)`` array of starting centroids.
        n_init: how many times to seed and iterate (each from its own draws); the result
            of the lowest inertia is kept (scikit-learn's ``n_init``).
        tol: stop once no centroid moves further than this (Euclidean distance).
        seed: the seed of ``"k-means++"`` and ``"random"`` (``np.random.default_rng(seed)``;
            with ``n_init > 1``, attempt j draws from ``np.random.default_rng([seed, j])``).
            k-means++ draws depend on the shards too: the same seed over the same plan gives
            the same centroids.
        callback: called with a [`KMeansStep`][tfmapreduce.recipes.KMeansStep] after each iteration.
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout``
            (see ``RunOptions``; ``timeout`` bounds each run); ``progress`` is one bar of the iterations.

    Returns:
        A [`KMeansResult`][tfmapreduce.recipes.KMeansResult]: centroids, iterations, converged, history (and ``predict``).

    Raises:
        InputError: k exceeds the rows, or ``init`` has the wrong shape.
        ValueError: a bad setting.

    Examples:
        >>> x = np.array([[0.0, 0], [0, 1], [10, 10], [10, 11]])
        >>> result = tmr.recipes.kmeans(x, 2, init=x[[0, 2]], cluster=cluster)
        >>> result.centroids
        array([[ 0. ,  0.5],
               [10. , 10.5]])
    """
    settings = RunOptions.checked("kmeans", _KEYWORDS, dict(options))
    progress, settings = settings.progress, attrs.evolve(settings, progress=False)  # the rounds' bar stands for its runs'

    k = check_int(k, "k", 1)
    iters = check_int(iters, "iters", 1)
    n_init = check_int(n_init, "n_init", 1)
    tol = check_float(tol, "tol")
    check_callback(callback)
    if not isinstance(init, str) and n_init > 1:
        raise ValueError(
            f"n_init={n_init} restarts from the same given centroids would give the same result; pass n_init=1 with init=<array>"
        )
    src = sources(data, argument="data")
    if len(src) != 1:
        raise InputError("kmeans clusters one array; pass the points as one (rows, features) array, not a tuple")
    rows, features = src[0].rows, feature_count(src[0].shape, "data")
    if k > rows:
        raise InputError(f"k={k} clusters need at least {k} rows of data, got {rows}")
    if isinstance(init, str) and init not in INITS:
        near = difflib.get_close_matches(init, INITS, n=1)
        raise ValueError(
            f"init must be 'k-means++', 'first', 'random' or an array of k starting centroids, got {init!r}"
            + (f" (did you mean {near[0]!r}?)" if near else "")
        )
    mapreduce = recipe(("kmeans",), lambda: (_kmeans_map, SUM))
    bar = progress_bar("kmeans", iters * n_init, progress)
    best: KMeansResult | None = None
    seeding = k if isinstance(init, str) and init == "k-means++" else 0
    with held_resident(data, n_init * (iters + seeding), settings) as (held, resident):
        for attempt in range(n_init):
            rng = np.random.default_rng([seed, attempt]) if n_init > 1 else np.random.default_rng(seed)
            centroids = _initial_centroids(held, k, init, rows, features, rng, resident)
            history: list[KMeansStep] = []
            converged = False
            for i in range(1, iters + 1):
                started = time.perf_counter()
                (sums, counts, inertia), stats = run_with_stats(mapreduce, held, resident, broadcast=(centroids,))
                if counts.sum() != rows or not np.all(np.isfinite(sums)):
                    raise InputError(
                        f"data holds rows with NaN or infinite values ({rows - int(counts.sum())} of {rows} rows could not be assigned); "
                        "k-means needs finite points: drop them first, e.g. x[np.isfinite(x).all(axis=1)]"
                    )
                filled = counts > 0
                new = centroids.copy()
                new[filled] = sums[filled] / counts[filled][:, None]
                shift = float(np.sqrt(((new - centroids) ** 2).sum(axis=1)).max())
                centroids = new
                step = KMeansStep(i, float(inertia), shift, int((~filled).sum()), time.perf_counter() - started, stats)
                history.append(step)
                bar.set_postfix_str(f"inertia={step.inertia:.6g} shift={shift:.3g}", refresh=False)
                bar.update()
                if callback is not None:
                    callback(step)
                if shift <= tol:
                    converged = True
                    break
            if attempt < n_init - 1:
                bar.update(iters - len(history))  # the bar counts every attempt's iters; one that converged early is done
            result = KMeansResult(centroids, len(history), converged, tuple(history))
            if best is None or result.inertia < best.inertia:
                best = result
    assert best is not None
    if best.converged:
        bar.set_postfix_str(f"{bar.postfix}, converged" if bar.postfix else "converged")
    bar.close()
    return best
