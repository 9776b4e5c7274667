"""The model recipes (k-means, linear and logistic regression, model averaging, histograms) against numpy.

Every recipe runs with shipped and with resident input, over uneven partitions
(a size list with an empty shard, and ``tmr.weights(1, 3)``), and must equal a
single-process numpy reference written here.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr
from tfmapreduce import recipes
from tfmapreduce._base.partition import canonical_sizes

ROWS = 120
LAYOUTS = ["shipped-sizes", "shipped-weights", "resident-sizes", "resident-weights"]


def uneven(rows: int) -> list[int]:
    """Four shards with an empty one: a quarter, nothing, a half, the rest."""
    return [rows // 4, 0, rows // 2, rows - rows // 4 - rows // 2]


Place = Callable[..., tuple[Any, dict[str, Any], tuple[int, ...]]]


@pytest.fixture(params=LAYOUTS)
def place(request: pytest.FixtureRequest, cluster: tmr.LocalCluster) -> Iterator[Place]:
    """``place(*arrays)`` → (data, options, shard sizes): shipped (with ``cluster=``/``sizes=``) or
    scattered first (resident: no options at all, the data knows its cluster)."""
    mode, spelling = request.param.split("-")
    made: list[tmr.Sharded] = []

    def distribute(*arrays: np.ndarray) -> tuple[Any, dict[str, Any], tuple[int, ...]]:
        rows = len(arrays[0])
        sizes = uneven(rows) if spelling == "sizes" else tmr.weights(1, 3)
        canonical = canonical_sizes(sizes, rows=rows, default_shards=4)
        if mode == "shipped":
            return (arrays if len(arrays) > 1 else arrays[0]), {"cluster": cluster, "sizes": sizes}, canonical
        held = tuple(tmr.scatter(a, cluster=cluster, sizes=sizes) for a in arrays)
        made.extend(held)
        return (held if len(held) > 1 else held[0]), {}, canonical

    yield distribute
    for data in made:
        data.delete()


# --------------------------------------------------------------------------- numpy references


def lloyd(x: np.ndarray, centroids: np.ndarray, iters: int, tol: float) -> tuple[np.ndarray, list[tuple[float, float, int]]]:
    """Lloyd's k-means in one process (float64): argmin takes the lowest index on ties; empty clusters stay put."""
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    c = np.array(centroids, np.float64)
    history = []
    for _ in range(iters):
        d2 = ((x[:, None, :] - c[None, :, :]) ** 2).sum(axis=2)
        labels = d2.argmin(axis=1)
        new = c.copy()
        empty = 0
        for j in range(len(c)):
            members = x[labels == j]
            if len(members):
                new[j] = members.sum(axis=0) / len(members)
            else:
                empty += 1
        shift = float(np.sqrt(((new - c) ** 2).sum(axis=1)).max())
        history.append((float(d2[np.arange(len(x)), labels].sum()), shift, empty))
        c = new
        if shift <= tol:
            break
    return c, history


def gradient_descent(
    x: np.ndarray, y: np.ndarray, steps: int, lr: float, intercept: bool = True
) -> tuple[np.ndarray, float, list[float]]:
    """Full-batch gradient descent on the mean log-loss, in one process."""
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    y = np.asarray(y, np.float64)
    w, b, losses = np.zeros(x.shape[1]), 0.0, []
    for _ in range(steps):
        z = x @ w + b
        losses.append(float(np.mean(np.logaddexp(0.0, z) - y * z)))
        r = 1.0 / (1.0 + np.exp(-z)) - y
        w = w - lr * (x.T @ r) / len(x)
        if intercept:
            b = b - lr * r.mean()
    return w, b, losses


def lstsq(x: np.ndarray, y: np.ndarray, intercept: bool = True) -> np.ndarray:
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    a = np.c_[x, np.ones(len(x))] if intercept else x
    return np.linalg.lstsq(a, np.asarray(y, np.float64), rcond=None)[0]


def blobs(rows: int = ROWS, features: int = 3, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=4.0, size=(4, features))
    return (centers[rng.integers(0, 4, rows)] + rng.normal(size=(rows, features))).astype(np.float32)


# --------------------------------------------------------------------------- k-means


def plus_plus_reference(x: np.ndarray, k: int, rng: np.random.Generator, sizes: list[int]) -> np.ndarray:
    """k-means++ as kmeans draws it, in numpy: the first row uniform, then per round a shard ∝ its sum of squared
    distances (u1) and within it a row ∝ its own (u2), shards ordered by their candidates."""
    from tfmapreduce.recipes._kmeans import pick

    x = np.asarray(x, np.float64)
    centroids = x[[rng.integers(len(x))]]
    bounds = np.cumsum([0, *sizes])
    for _ in range(1, k):
        u1, u2 = rng.random(2)
        totals, candidates = [], []
        for a, b in itertools.pairwise(bounds):
            part = x[a:b]
            d2 = np.maximum(((part[:, None] - centroids[None]) ** 2).sum(2).min(1), 0.0)
            running = np.cumsum(d2)
            totals.append(running[-1])
            candidates.append(part[min(int(np.sum(running < u2 * running[-1])), len(part) - 1)])
        centroids = np.concatenate([centroids, pick(np.array(totals), np.array(candidates), u1)[None]])
    return centroids


def test_kmeans_plus_plus_equals_numpy_from_the_same_seed_and_n_init_keeps_the_best(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(5)
    centres = rng.uniform(-40, 40, (6, 2))
    x = np.concatenate([c + rng.normal(size=(40, 2)) for c in centres])
    x = x[rng.permutation(len(x))]
    sizes = [60, 90, 90]
    result = recipes.kmeans(x, 6, iters=30, seed=3, cluster=cluster, sizes=sizes)  # k-means++ is the default
    init = plus_plus_reference(x, 6, np.random.default_rng(3), sizes)
    expected, history = lloyd(x, init, iters=30, tol=1e-6)
    np.testing.assert_allclose(result.centroids, expected, rtol=1e-9, atol=1e-9)
    assert result.iterations == len(history)
    assert result.inertia == result.inertia_ == result.history[-1].inertia
    first = recipes.kmeans(x, 6, iters=30, init="first", cluster=cluster, sizes=sizes)
    best = recipes.kmeans(x, 6, iters=30, n_init=3, seed=3, cluster=cluster, sizes=sizes)
    attempts = [lloyd(x, plus_plus_reference(x, 6, np.random.default_rng([3, j]), sizes), iters=30, tol=1e-6) for j in range(3)]
    lowest = min(attempts, key=lambda a: a[1][-1][0])
    np.testing.assert_allclose(best.centroids, lowest[0], rtol=1e-9, atol=1e-9)
    assert best.inertia < first.inertia  # the first rows seed a poor local minimum on these blobs
    with pytest.raises(TypeError, match=r"kmeans\(\) got an unknown keyword iter=5 \(did you mean iters\?\); it accepts iters, "):
        recipes.kmeans(x, 6, iter=5, cluster=cluster)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="n_init=2 restarts from the same given centroids"):
        recipes.kmeans(x, 2, init=x[:2], n_init=2, cluster=cluster)


def test_kmeans_equals_numpy_lloyd(place: Place) -> None:
    x = blobs()
    data, options, _ = place(x)
    result = recipes.kmeans(data, 5, iters=8, tol=0.0, init="first", **options)
    expected, history = lloyd(x, x[:5], iters=8, tol=0.0)
    np.testing.assert_allclose(result.centroids, expected, rtol=1e-10, atol=1e-12)
    assert result.iterations == len(result.history) == len(history) == 8
    np.testing.assert_allclose([s.inertia for s in result.history], [h[0] for h in history], rtol=1e-10)
    np.testing.assert_allclose([s.shift for s in result.history], [h[1] for h in history], rtol=1e-8, atol=1e-12)
    assert [s.empty for s in result.history] == [h[2] for h in history]
    assert [s.iteration for s in result.history] == list(range(1, 9))
    np.testing.assert_array_equal(result.predict(x), ((x[:, None].astype(np.float64) - expected) ** 2).sum(2).argmin(1))


def test_kmeans_ties_go_to_the_lowest_index_and_empty_clusters_stay(place: Place) -> None:
    # Integer points: every distance is exact, so 2 is exactly as near to 1 as to 3, and 4 to 3 and 5.
    x = np.array([[0], [1], [2], [3], [4], [5], [6], [2], [4], [3], [1], [5]], np.int64)
    init = np.array([[1.0], [3.0], [5.0], [100.0]])  # the last one attracts no point
    data, options, _ = place(x)
    one = recipes.kmeans(data, 4, init=init, iters=1, **options)
    # cluster 0 takes 0, 1, 1, 2, 2 (the ties); cluster 1 takes 3, 3, 4, 4; cluster 2 takes 5, 5, 6
    np.testing.assert_array_equal(one.centroids, [[6 / 5], [14 / 4], [16 / 3], [100.0]])
    assert one.history[0].empty == 1
    result = recipes.kmeans(data, 4, init=init, iters=6, tol=0.0, **options)
    expected, history = lloyd(x, init, iters=6, tol=0.0)
    np.testing.assert_allclose(result.centroids, expected, rtol=1e-12)
    assert [s.empty for s in result.history] == [h[2] for h in history]
    assert result.centroids[3, 0] == 100.0


def test_kmeans_stops_at_tol_and_reports_progress(cluster: tmr.LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    x = blobs(seed=1)
    seen: list[recipes.KMeansStep] = []
    result = recipes.kmeans(
        x, 4, iters=50, tol=1e-9, init="first", cluster=cluster, sizes=[50, 70], progress=True, callback=seen.append
    )
    expected, history = lloyd(x, x[:4], iters=50, tol=1e-9)
    assert result.converged
    assert result.iterations == len(history) < 50
    np.testing.assert_allclose(result.centroids, expected, rtol=1e-10)
    assert seen == list(result.history)
    assert result.history[-1].shift <= 1e-9
    err = capsys.readouterr().err  # tqdm's bar: not a terminal here, shown because progress=True forces it
    last = err.rstrip("\n").split("\r")[-1]
    assert last.startswith(f"kmeans:  {100 * result.iterations // 50}%|")
    assert f"| {result.iterations}/50 [" in last
    assert last.endswith(", converged]")
    assert err.endswith("\n")
    recipes.kmeans(x, 4, iters=2, cluster=cluster)  # progress=None: stderr is no terminal, so no bar
    recipes.kmeans(x, 4, iters=2, cluster=cluster, progress=False)
    assert capsys.readouterr().err == ""
    with pytest.raises(TypeError, match=r"progress must be None .*, True .* or False .*; got str 'yes'"):
        recipes.kmeans(x, 4, cluster=cluster, progress="yes")


def test_kmeans_init_random_and_array(place: Place) -> None:
    x = blobs(seed=2)
    data, options, _ = place(x)
    result = recipes.kmeans(data, 3, init="random", seed=7, iters=4, tol=0.0, **options)
    start = x[np.random.default_rng(7).choice(len(x), size=3, replace=False)]
    np.testing.assert_allclose(result.centroids, lloyd(x, start, iters=4, tol=0.0)[0], rtol=1e-10)
    given = np.array([[0.0, 0, 0], [5, 5, 5]])
    np.testing.assert_allclose(
        recipes.kmeans(data, 2, init=given, iters=3, tol=0.0, **options).centroids,
        lloyd(x, given, iters=3, tol=0.0)[0],
        rtol=1e-10,
    )


def test_kmeans_many_features(cluster: tmr.LocalCluster) -> None:
    x = blobs(rows=60, features=70, seed=11)  # past the per-feature bincount: one segment sum
    result = recipes.kmeans(x, 3, iters=3, tol=0.0, cluster=cluster, sizes=uneven(60))
    np.testing.assert_allclose(result.centroids, lloyd(x, x[:3], iters=3, tol=0.0)[0], rtol=1e-10, atol=1e-12)


def test_kmeans_one_feature_and_bad_arguments(cluster: tmr.LocalCluster) -> None:
    x = np.array([0.0, 0.5, 9.0, 10.0, 11.0])
    result = recipes.kmeans(x, 2, init=[[0.0], [10.0]], cluster=cluster, sizes=[2, 0, 3])
    np.testing.assert_allclose(result.centroids, [[0.25], [10.0]])
    with pytest.raises(tmr.InputError, match="k=6 clusters need at least 6 rows"):
        recipes.kmeans(x, 6, cluster=cluster)
    with pytest.raises(tmr.InputError, match=r"init must hold k=2 centroids of 1 features"):
        recipes.kmeans(x, 2, init=np.zeros((3, 1)), cluster=cluster)
    with pytest.raises(ValueError, match=r"init must be 'k-means\+\+', 'first', 'random' .* \(did you mean 'k-means\+\+'\?\)"):
        recipes.kmeans(x, 2, init="kmeans++", cluster=cluster)
    with pytest.raises(ValueError, match="iters must be an int ≥ 1"):
        recipes.kmeans(x, 2, iters=0, cluster=cluster)
    with pytest.raises(TypeError, match="callback must be a callable"):
        recipes.kmeans(x, 2, callback="print", cluster=cluster)
    with pytest.raises(tmr.InputError, match="must be 1-d"):
        recipes.kmeans(np.zeros((4, 2, 2)), 2, cluster=cluster)


# --------------------------------------------------------------------------- linear regression


def regression_data(
    rows: int = ROWS, features: int = 3, targets: int | None = None, seed: int = 3
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, features)).astype(np.float32)
    w = rng.normal(size=(features,) if targets is None else (features, targets))
    return x, x.astype(np.float64) @ w + 0.7 + 0.1 * rng.normal(size=(rows,) if targets is None else (rows, targets))


@pytest.mark.parametrize("intercept", [True, False])
def test_linear_regression_equals_lstsq(place: Place, intercept: bool) -> None:
    x, y = regression_data()
    data, options, _ = place(x, y)
    model = recipes.linear_regression(*data, intercept=intercept, **options)
    expected = lstsq(x, y, intercept)
    np.testing.assert_allclose(model.coef, expected[:3], rtol=1e-9)
    assert model.intercept == pytest.approx(expected[3] if intercept else 0.0, rel=1e-9)
    assert model.rows == ROWS
    np.testing.assert_allclose(model.predict(x), x.astype(np.float64) @ model.coef + model.intercept)


def test_linear_regression_several_targets_one_feature(cluster: tmr.LocalCluster) -> None:
    x, y = regression_data(targets=2)
    model, stats = recipes.linear_regression(x, y, cluster=cluster, sizes=uneven(ROWS), return_stats=True)
    expected = lstsq(x, y)
    np.testing.assert_allclose(model.coef, expected[:3], rtol=1e-9)
    np.testing.assert_allclose(model.intercept, expected[3], rtol=1e-9)
    assert stats.bytes_sent == x.nbytes + y.nbytes
    column = x[:, 0]
    one = recipes.linear_regression(column, y[:, 0], cluster=cluster, sizes=tmr.weights(1, 3))
    np.testing.assert_allclose([*one.coef, one.intercept], lstsq(column, y[:, 0]), rtol=1e-9)
    with pytest.raises(tmr.InputError, match="same rows"):
        recipes.linear_regression(x, y[:-1], cluster=cluster)
    with pytest.raises(tmr.InputError, match="0 rows"):
        recipes.linear_regression(x[:0], y[:0], cluster=cluster)


# --------------------------------------------------------------------------- logistic regression


def classification_data(rows: int = ROWS, seed: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 3))
    p = 1.0 / (1.0 + np.exp(-(x @ np.array([1.5, -2.0, 0.5]) + 0.3)))
    return x, (rng.random(rows) < p).astype(np.int64)


def test_logistic_regression_equals_full_batch_gradient_descent(place: Place) -> None:
    x, y = classification_data()
    data, options, _ = place(x, y)
    model = recipes.logistic_regression(*data, steps=25, lr=0.5, **options)
    w, b, losses = gradient_descent(x, y, steps=25, lr=0.5)
    np.testing.assert_allclose(model.coef, w, rtol=1e-10)
    assert model.intercept == pytest.approx(b, rel=1e-10)
    np.testing.assert_allclose([s.loss for s in model.history], losses, rtol=1e-10)
    assert model.steps == 25
    assert [s.step for s in model.history] == list(range(1, 26))
    assert losses[-1] < losses[0]
    np.testing.assert_array_equal(model.predict(x), (x @ w + b > 0).astype(np.int64))


def test_logistic_regression_options(cluster: tmr.LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    x, y = classification_data(seed=5)
    seen: list[recipes.GradientStep] = []
    model = recipes.logistic_regression(
        x, y, steps=10, lr=1.0, intercept=False, cluster=cluster, sizes=[0, 40, 80], progress=True, callback=seen.append
    )
    w, b, _ = gradient_descent(x, y, steps=10, lr=1.0, intercept=False)
    np.testing.assert_allclose(model.coef, w, rtol=1e-10)
    assert model.intercept == b == 0.0
    assert seen == list(model.history)
    err = capsys.readouterr().err
    last = err.rstrip("\n").split("\r")[-1]
    assert last.startswith("logistic_regression: 100%|")
    assert "| 10/10 [" in last
    assert "loss=" in last
    assert err.endswith("\n")
    # tol: stops (without a last update) once the gradient is small enough
    stopped = recipes.logistic_regression(x, y, steps=500, lr=1.0, tol=0.05, cluster=cluster)
    assert stopped.history[-1].grad_norm <= 0.05 < stopped.history[-2].grad_norm
    assert stopped.steps == len(stopped.history) - 1
    w, b, _ = gradient_descent(x, y, steps=stopped.steps, lr=1.0)
    np.testing.assert_allclose(stopped.coef, w, rtol=1e-9)
    with pytest.raises(tmr.InputError, match=r"labels in \[0, 1\]"):
        recipes.logistic_regression(x, y * 2 - 1, cluster=cluster)
    with pytest.raises(ValueError, match="lr must be a finite number > 0"):
        recipes.logistic_regression(x, y, lr=0, cluster=cluster)


# --------------------------------------------------------------------------- model averaging


def normal_moments(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """A per-shard "model" that is a mean of per-row terms: (AᵀA/n, Aᵀy/n) with A = [x, 1]."""
    a = tf.concat([x, tf.ones_like(x[:, :1])], axis=1)
    n = tf.cast(tf.shape(a)[0], a.dtype)
    return tf.matmul(a, a, transpose_a=True) / n, tf.linalg.matvec(a, y, transpose_a=True) / n


def shifted_shards(sizes: tuple[int, ...], seed: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Regression data whose shards differ (each its own range of x) and do not follow one line."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(loc=3.0 * i, size=(n, 2)) for i, n in enumerate(sizes)])
    y = np.sin(x).sum(axis=1) + 0.05 * rng.normal(size=len(x))
    return x, y


def test_model_average_of_normal_equations_equals_the_full_fit(place: Place) -> None:
    _, _, sizes = place(np.zeros(ROWS))
    x, y = shifted_shards(sizes)
    data, options, _ = place(x, y)
    ata, aty = recipes.model_average(normal_moments, data, **options)
    np.testing.assert_allclose(np.linalg.solve(ata, aty), lstsq(x, y), rtol=1e-9)


def test_model_average_of_per_shard_fits(place: Place) -> None:
    _, _, sizes = place(np.zeros(ROWS))
    x, y = shifted_shards(sizes)
    data, options, _ = place(x, y)
    coef, const = recipes.model_average(recipes.least_squares_fit, data, **options)
    # what it computes: the row-weighted mean of each shard's own least squares ...
    bounds = np.cumsum((0, *sizes))
    fits = [(n, lstsq(x[a:b], y[a:b])) for n, a, b in zip(sizes, bounds, bounds[1:], strict=False) if n]
    expected = sum(n * fit for n, fit in fits) / sum(n for n, _ in fits)
    np.testing.assert_allclose([*coef, const], expected, rtol=1e-8)
    # ... which is NOT the full-data fit when the shards differ
    assert not np.allclose(expected, lstsq(x, y), rtol=1e-2)


def test_model_average_equals_the_full_fit_when_every_shard_fits_the_same_model(cluster: tmr.LocalCluster) -> None:
    x = np.random.default_rng(8).normal(size=(ROWS, 3))
    y = x @ np.array([1.0, -2.0, 3.0]) - 4.0  # noise-free: every shard's least squares is this line
    coef, const = recipes.model_average(recipes.least_squares_fit, (x, y), cluster=cluster, sizes=uneven(ROWS))
    np.testing.assert_allclose([*coef, const], lstsq(x, y), rtol=1e-9)
    no_const = functools.partial(recipes.least_squares_fit, intercept=False)
    coef, const = recipes.model_average(no_const, (x, y + 4.0), cluster=cluster, sizes=tmr.weights(1, 3))
    np.testing.assert_allclose(coef, [1.0, -2.0, 3.0], rtol=1e-9)
    assert const == 0.0
    with pytest.raises(TypeError, match="fit must be a callable"):
        recipes.model_average("lstsq", (x, y), cluster=cluster)


# --------------------------------------------------------------------------- histogram


def assert_histogram(actual: tuple[np.ndarray, np.ndarray], expected: tuple[np.ndarray, np.ndarray]) -> None:
    counts, edges = actual
    np.testing.assert_array_equal(counts, expected[0])
    np.testing.assert_array_equal(edges, expected[1])
    assert counts.dtype == expected[0].dtype
    assert edges.dtype == expected[1].dtype


def test_histogram_equals_numpy(place: Place) -> None:
    x = np.random.default_rng(9).normal(size=(ROWS, 3)).astype(np.float32)
    x[5, 1] = 1.0  # exactly on an edge of range=(-1, 1): the last bin includes it
    x[7, 0] = -1.0
    data, options, _ = place(x)
    assert_histogram(recipes.histogram(data, 7, **options), np.histogram(x, 7))  # the max lands in the last bin
    assert_histogram(recipes.histogram(data, 4, (-1, 1), **options), np.histogram(x, 4, (-1, 1)))
    edges = [-2.0, -0.5, 0.0, 0.1, 3.0]
    assert_histogram(recipes.histogram(data, edges, **options), np.histogram(x, edges))
    density = recipes.histogram(data, 5, (-2, 2), density=True, **options)
    expected = np.histogram(x, 5, (-2, 2), density=True)
    np.testing.assert_allclose(density[0], expected[0], rtol=1e-12)
    np.testing.assert_array_equal(density[1], expected[1])


def test_histogram_integers_constants_and_empty(cluster: tmr.LocalCluster) -> None:
    ints = np.random.default_rng(10).integers(-5, 20, size=200)
    assert_histogram(recipes.histogram(ints, 5, cluster=cluster, sizes=uneven(200)), np.histogram(ints, 5))
    assert_histogram(recipes.histogram(ints, 3, (0, 9), cluster=cluster), np.histogram(ints, 3, (0, 9)))
    flat = np.full(10, 3.0)
    assert_histogram(recipes.histogram(flat, 4, cluster=cluster), np.histogram(flat, 4))
    nothing = np.zeros(0, np.float32)
    assert_histogram(recipes.histogram(nothing, 4, cluster=cluster), np.histogram(nothing, 4))
    *result, stats = recipes.histogram(ints, 5, (0, 10), cluster=cluster, return_stats=True)
    assert_histogram(tuple(result), np.histogram(ints, 5, (0, 10)))
    assert stats.bytes_sent == ints.nbytes
    with pytest.raises(TypeError, match="bins must be a number of bins"):
        recipes.histogram(ints, "auto", cluster=cluster)
    with pytest.raises(ValueError, match="monotonically"):
        recipes.histogram(ints, [3, 1, 2], cluster=cluster)


# --------------------------------------------------------------------------- the namespace


def test_recipes_namespace_reexports_the_statistics() -> None:
    for name in ("mean", "sum", "min", "max", "count", "variance", "std", "weighted_mean"):
        assert getattr(recipes, name) is getattr(tmr, name)
    assert sorted(recipes.__all__) == sorted(set(recipes.__all__))
    for name in recipes.__all__:
        assert getattr(recipes, name).__doc__, name


# --------------------------------------------------------------------------- scikit-learn names and estimators


def test_kmeans_estimator_and_names_equal_the_recipe(cluster: tmr.LocalCluster) -> None:
    x = blobs(seed=3)
    result = recipes.kmeans(x, 3, iters=5, tol=0.0, cluster=cluster, sizes=[50, 70])
    np.testing.assert_array_equal(result.cluster_centers_, result.centroids)
    assert result.n_iter_ == result.iterations == len(result.history) > 1
    estimator = recipes.KMeans(n_clusters=3, max_iter=5, tol=0.0, cluster=cluster, sizes=[50, 70])
    assert repr(estimator) == "KMeans(n_clusters=3, max_iter=5, not fitted)"
    with pytest.raises(ValueError, match=r"not fitted yet: call fit\(x\) first"):
        estimator.predict(x)
    labels = estimator.fit(x).predict(x)
    np.testing.assert_array_equal(estimator.cluster_centers_, result.centroids)
    assert estimator.n_iter_ == result.iterations
    np.testing.assert_array_equal(labels, result.predict(x))
    np.testing.assert_array_equal(labels, np.argmin(((x[:, None, :] - result.centroids[None]) ** 2).sum(-1), axis=1))
    # a short repr: the history is counted, not printed
    n = result.iterations
    assert repr(result) == f"KMeansResult(k=3, features=3, iterations={n}, converged={result.converged}, history=<{n} steps>)"


def test_linear_regression_estimator_and_names_follow_scikit_learn_shapes(cluster: tmr.LocalCluster) -> None:
    x, y = regression_data(seed=8)
    expected = lstsq(x, y)
    model = recipes.LinearRegression(cluster=cluster, sizes=[30, 90]).fit(x, y)
    np.testing.assert_allclose(model.coef_, expected[:-1], rtol=1e-9)
    assert model.intercept_ == pytest.approx(expected[-1], rel=1e-9)
    np.testing.assert_allclose(model.predict(x), x.astype(np.float64) @ expected[:-1] + expected[-1], rtol=1e-9)
    assert repr(model) == "LinearRegression(fit_intercept=True, fitted)"
    two = np.stack([y, 2 * y], axis=1)  # two targets: scikit-learn's coef_ is (targets, features)
    fitted = recipes.linear_regression(x, two, cluster=cluster)
    assert fitted.coef.shape == (x.shape[1], 2)
    np.testing.assert_array_equal(fitted.coef_, fitted.coef.T)
    np.testing.assert_array_equal(fitted.intercept_, fitted.intercept)
    with pytest.raises(ValueError, match=r"not fitted yet: call fit\(X, y\) first"):
        recipes.LinearRegression().predict(x)


def test_logistic_model_names_and_short_repr(cluster: tmr.LocalCluster) -> None:
    x, y = classification_data(seed=6)
    model = recipes.logistic_regression(x, y, steps=4, cluster=cluster)
    assert model.coef_.shape == (1, x.shape[1])
    np.testing.assert_array_equal(model.coef_[0], model.coef)
    np.testing.assert_array_equal(model.intercept_, [model.intercept])
    np.testing.assert_array_equal(model.n_iter_, [4])
    assert repr(model).endswith(", steps=4, history=<4 steps>)")
    assert "GradientStep" not in repr(model)
