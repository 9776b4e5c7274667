"""tmr.recipes.pagerank against a power iteration in numpy (networkx's definition), on real workers."""

from __future__ import annotations

from typing import Any

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


@pytest.mark.parametrize(
    "edges",
    [
        ([0, 0, 1, 3, 3], [1, 1, 1, 3, 4]),  # a duplicate edge, a self-loop, dangling nodes 1 and 4
        ([10**12, -5, 7, 7], [-5, 10**12, 10**12, 2]),  # ids far apart and negative, a dangling node
    ],
)
def test_pagerank_of_resident_and_file_edges_numbers_them_on_the_workers(
    cluster: tmr.LocalCluster, tmp_path: Any, edges: tuple[list[int], list[int]]
) -> None:
    """Resident src and dst (co-partitioned) and .npy files give the ranks of host edges."""
    src, dst = np.array(edges[0]), np.array(edges[1])
    nodes, rank = reference(src, dst, 30)
    with tmr.scatter(src, cluster=cluster, sizes=3) as s, tmr.scatter(dst, cluster=cluster, sizes=3) as d:
        result = tmr.recipes.pagerank(s, d, iters=30, reducers=2)
        np.testing.assert_array_equal(result.keys, nodes)
        np.testing.assert_allclose(result.values, rank, rtol=0, atol=1e-12)
        assert s.gather().tolist() == src.tolist()  # the caller's edges are still there
    np.save(tmp_path / "src.npy", src)
    np.save(tmp_path / "dst.npy", dst.astype(np.int32) if np.abs(dst).max() < 2**31 else dst)  # ids of two dtypes
    files = tmr.recipes.pagerank(
        tmr.read_npy(str(tmp_path / "src.npy")), tmr.read_npy(str(tmp_path / "dst.npy")), iters=30, cluster=cluster
    )
    np.testing.assert_array_equal(files.keys, nodes)
    np.testing.assert_allclose(files.values, rank, rtol=0, atol=1e-12)


def test_pagerank_of_a_resident_power_law_graph(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(3)
    src = (rng.pareto(1.2, 20_000) * 5).astype(np.int64) % 3000
    dst = rng.integers(0, 4000, 20_000)
    with tmr.scatter(src, cluster=cluster) as s, tmr.scatter(dst, cluster=cluster) as d:
        result = tmr.recipes.pagerank(s, d)
    nodes, rank = reference(src, dst, 20)
    np.testing.assert_array_equal(result.keys, nodes)
    np.testing.assert_allclose(result.values, rank, rtol=0, atol=1e-10)


def test_pagerank_bad_resident_and_file_inputs_are_named(cluster: tmr.LocalCluster, tmp_path: Any) -> None:
    with tmr.scatter(np.array([0, 1]), cluster=cluster) as s, tmr.scatter(np.array([0.5, 1.0]), cluster=cluster) as f:
        with pytest.raises(TypeError, match=r"src and dst must both be host arrays, both resident.*got Sharded and ndarray"):
            tmr.recipes.pagerank(s, np.array([1, 0]), cluster=cluster)
        with pytest.raises(TypeError, match=r"dst must hold 1-D integer node ids, got float64"):
            tmr.recipes.pagerank(s, f)
    (tmp_path / "e.txt").write_text("0\n1\n")
    with pytest.raises(TypeError, match=r"src reads read_text files; pagerank reads edge files of 1-D integer ids"):
        tmr.recipes.pagerank(tmr.read_text(str(tmp_path / "e.txt")), tmr.read_text(str(tmp_path / "e.txt")), cluster=cluster)
