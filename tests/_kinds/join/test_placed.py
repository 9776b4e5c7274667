"""plan_join beside a resident side: the host side is planned where the run will scatter it, and nothing moves."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tfmapreduce as tmr
from tests._kinds.join.test_join import check


def test_plan_join_beside_a_resident_side_runs_nothing_and_is_what_join_does(
    cluster: tmr.LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37: plan_join used to scatter the host side (and free it); now the plan is computed from the sizes the
    inputs know, and the scatter is the run's.  Every graph a client runs goes through ``Cluster.run``: counted."""
    rng = np.random.default_rng(37)
    host = (rng.integers(0, 60, 400), rng.random(400))
    keys, values = rng.integers(0, 60, 300), rng.random(300)
    real = tmr.Cluster.run
    ran: list[Any] = []

    def counted(self: tmr.Cluster, *args: Any, **kwargs: Any) -> Any:
        ran.append(args[0])
        return real(self, *args, **kwargs)

    with tmr.scatter(keys, cluster=cluster, sizes=[100, 200]) as rk, tmr.scatter(values, cluster=cluster, sizes=[100, 200]) as rv:
        for strategy in ("auto", "hash", "broadcast"):
            for left, right in ((host, (rk, rv)), ((rk, rv), host)):
                tmr.plan_join(left, right, strategy=strategy, cluster=cluster)  # the cluster's facts (devices, kernels) known
                ran.clear()
                monkeypatch.setattr(tmr.Cluster, "run", counted)
                plan = tmr.plan_join(left, right, strategy=strategy, cluster=cluster, reducers=3)
                monkeypatch.undo()
                assert ran == []  # nothing ran on the workers: no side scattered, nothing freed
                result, stats = tmr.join(left, right, strategy=strategy, cluster=cluster, reducers=3, return_stats=True)
                assert result.strategy == plan.strategy == ("broadcast" if strategy == "auto" else strategy)
                assert tuple(dict.fromkeys(device for device, _ in result.parts)) == plan.reducers
                assert [(s.device, s.rows) for s in stats.shards] == [(s.device, s.rows) for s in plan.plan.shards]
                check(result, left if left is host else (keys, values), right if right is host else (keys, values), "inner")
    assert rk.plan.sizes == (100, 200)
