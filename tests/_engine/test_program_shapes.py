"""Programs kept by the shape of the work: jobs over fresh resident data (a filter's output) of one dtype, row shape
and placement reuse the program compiled for the first, which reads each run's own data through fed handles."""

from __future__ import annotations

import numpy as np
import pytest

import tfmapreduce as tmr


def _above(keys: object, values: object, limit: object) -> object:
    return values > limit  # type: ignore[operator]


def _sums(keys: np.ndarray, values: np.ndarray) -> dict[int, float]:
    return {int(k): float(values[keys == k].sum()) for k in np.unique(keys)}


def test_a_keyed_recipe_over_three_fresh_filter_outputs_compiles_once(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(40)
    keys, values = rng.integers(0, 20, 100_000), rng.random(100_000)  # each output over COUNTED rows: counted in the run
    compiled = []
    with tmr.scatter(keys, cluster=cluster) as k, tmr.scatter(values, cluster=cluster) as v:
        for limit in (0.1, 0.2, 0.3):  # each a filter output of other rows, in new variables
            with tmr.stats() as seen, tmr.filter(_above, (k, v), broadcast=[limit], cluster=cluster) as (kk, vv):
                got = tmr.sum_by_key(kk, vv, cluster=cluster)
            compiled.append([r.compiled for r in seen.runs])
            kept = values > limit
            assert dict(zip(got.keys.tolist(), got.values.tolist(), strict=True)) == pytest.approx(
                _sums(keys[kept], values[kept])
            )
    assert compiled[1:] == [[False, False], [False, False]]  # (the first may find both programs kept by an earlier test)


def test_a_kept_program_reads_each_runs_own_data_and_never_deleted_data(cluster: tmr.LocalCluster) -> None:
    keys = np.arange(400) % 7
    first, second = np.arange(400.0), np.arange(400.0) ** 2  # the same shape and placement: one program
    a, b = tmr.scatter(first, cluster=cluster), tmr.scatter(second, cluster=cluster)
    with tmr.scatter(keys, cluster=cluster) as k, b:
        with a:
            got_a = tmr.sum_by_key(k, a, cluster=cluster)
        got_b, stats = tmr.sum_by_key(k, b, cluster=cluster, return_stats=True)
        assert not stats.compiled
        assert dict(zip(got_a.keys.tolist(), got_a.values.tolist(), strict=True)) == pytest.approx(_sums(keys, first))
        assert dict(zip(got_b.keys.tolist(), got_b.values.tolist(), strict=True)) == pytest.approx(_sums(keys, second))
        with pytest.raises(tmr.ClusterError, match="was deleted"):
            tmr.sum_by_key(k, a, cluster=cluster)
