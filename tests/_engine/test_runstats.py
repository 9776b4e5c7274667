"""tmr.stats(): the RunStats of every run made in a block, and return_stats=True beside it."""

from __future__ import annotations

import numpy as np
import pytest

import tfmapreduce as tmr


def test_a_stats_block_collects_every_run_and_blocks_nest(cluster: tmr.LocalCluster) -> None:
    x = np.arange(100.0)
    with tmr.stats() as outer:
        mean = tmr.mean(x, cluster=cluster, sizes=[30, 70])
        with tmr.stats() as inner:
            variance = tmr.variance(x, cluster=cluster, sizes=[50, 50])
        centroids = tmr.recipes.kmeans(x.reshape(50, 2), 2, cluster=cluster, iters=3, tol=0).centroids
    assert np.isclose(mean, x.mean())
    assert np.isclose(variance, x.var())
    assert centroids.shape == (2, 2)
    assert [s.rows for s in inner.last.shards] == [50, 50]
    assert len(inner.runs) == 1
    assert [s.rows for s in outer.runs[0].shards] == [30, 70]
    assert outer.runs[1] is inner.last
    assert len(outer.runs) >= 2 + 3  # and one per k-means round


def test_return_stats_still_returns_the_result_and_its_stats(cluster: tmr.LocalCluster) -> None:
    x = np.arange(10, dtype=np.int64)
    total, stats = tmr.sum(x, cluster=cluster, sizes=[4, 6], return_stats=True)
    assert int(total) == 45
    assert [s.rows for s in stats.shards] == [4, 6]
    assert stats.bytes_sent == x.nbytes
    counts, edges, run = tmr.recipes.histogram(x, bins=2, cluster=cluster, return_stats=True)
    assert counts.tolist() == [5, 5]
    assert len(edges) == 3
    assert run.shards


def test_an_empty_block_says_so() -> None:
    with tmr.stats() as collected:
        pass
    assert collected.runs == []
    with pytest.raises(LookupError, match=r"no run was made inside this tmr\.stats"):
        _ = collected.last
