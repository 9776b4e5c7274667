"""tmr.recipes.pagerank against a power iteration in numpy (networkx's definition), on real workers."""

from __future__ import annotations

import numpy as np
import pytest

import tfmapreduce as tmr


def reference(src: np.ndarray, dst: np.ndarray, iters: int, damping: float = 0.85) -> tuple[np.ndarray, np.ndarray]:
    """networkx's pagerank by power iteration: uniform teleport, dangling nodes' rank spread uniformly, edges counted
    as often as they appear."""
    nodes, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    n, s, d = len(nodes), inverse[: len(src)], inverse[len(src) :]
    out = np.bincount(s, minlength=n).astype(float)
    rank = np.full(n, 1.0 / n)
    for _ in range(iters):
        spread = np.zeros(n)
        np.add.at(spread, d, rank[s] / out[s])
        rank = (1 - damping) / n + damping * (spread + rank[out == 0].sum() / n)
    return nodes, rank


@pytest.mark.parametrize(
    "edges",
    [
        ([0, 1, 2, 2], [1, 2, 0, 1]),  # a cycle and a chord
        ([0, 0, 1, 3, 3], [1, 1, 1, 3, 4]),  # a duplicate edge, a self-loop, dangling nodes 1 and 4, an isolated pair
        ([10**12, -5, 7], [-5, 10**12, 10**12]),  # ids far apart and negative
        ([5], [5]),  # one self-loop
    ],
)
def test_pagerank_equals_the_reference_power_iteration(cluster: tmr.LocalCluster, edges: tuple[list[int], list[int]]) -> None:
    src, dst = np.array(edges[0]), np.array(edges[1])
    result = tmr.recipes.pagerank(src, dst, cluster=cluster, iters=30, reducers=3)
    nodes, rank = reference(src, dst, 30)
    np.testing.assert_array_equal(result.keys, nodes)
    np.testing.assert_allclose(result.values, rank, rtol=0, atol=1e-12)
    assert abs(result.values.sum() - 1) < 1e-12


def test_pagerank_of_a_random_power_law_graph_and_its_tolerance(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(2)
    src = (rng.pareto(1.2, 20_000) * 5).astype(np.int64) % 3000
    dst = rng.integers(0, 4000, 20_000)
    result = tmr.recipes.pagerank(src, dst, cluster=cluster)
    nodes, rank = reference(src, dst, 20)
    np.testing.assert_array_equal(result.keys, nodes)
    np.testing.assert_allclose(result.values, rank, rtol=0, atol=1e-10)
    early = tmr.recipes.pagerank(src, dst, cluster=cluster, iters=100, tol=1e-6)
    assert np.abs(early.values - reference(src, dst, 100)[1]).sum() < len(nodes) * 1e-5


def test_pagerank_bad_inputs_are_named(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(TypeError, match=r"src must be a 1-D array of integer node ids, got float64"):
        tmr.recipes.pagerank(np.array([0.5]), np.array([1]), cluster=cluster)
    with pytest.raises(tmr.InputError, match=r"src has 2 edges but dst 1"):
        tmr.recipes.pagerank(np.array([0, 1]), np.array([1]), cluster=cluster)
    with pytest.raises(TypeError, match=r"damping must be a probability in \[0, 1\)"):
        tmr.recipes.pagerank(np.array([0]), np.array([1]), damping=1.5, cluster=cluster)
    assert len(tmr.recipes.pagerank(np.array([], np.int64), np.array([], np.int64), cluster=cluster)) == 0
