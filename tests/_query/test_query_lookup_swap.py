"""``lookup_joins`` on an inner join whose small side, unique on its keys, is the left one: the sides are swapped, so
the larger side looks the small one up (its filter too) in one map run, and the columns keep the unswapped join's
names and order. The same answer as DuckDB (string keys with nulls and unicode, a column on both sides), one run
fewer."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

import tfmapreduce as tmr
from tfmapreduce import col

REGION = pd.DataFrame({"rk": ["äsia ✓", "europe", None, "三"], "r_name": ["A", "E", "N", "S"], "x": [1, 2, 3, 4]})
NATION = pd.DataFrame(
    {"nk": np.arange(7), "nrk": ["europe", "äsia ✓", None, "三", "europe", "zz", "三"], "x": [10, 20, 30, 40, 50, 60, 70]}
)
SQL = """SELECT r.rk, r.r_name, r.x, n.nk, n.x AS x_right FROM r JOIN n ON r.rk = n.nrk
         WHERE r.r_name <> 'S' ORDER BY n.nk"""


@pytest.mark.usefixtures("steps_on_workers")
def test_a_small_unique_left_side_is_looked_up_by_the_right_side(cluster: tmr.LocalCluster) -> None:
    q = tmr.lazy(REGION).filter(col("r_name") != "S").join(tmr.lazy(NATION), left_on="rk", right_on="nrk")
    steps = q.explain().split("physical steps:")[1]
    assert "col('nrk').lookup(table(0), 'r_name') != 'S'" in steps  # the region's filter, in the nations' map
    assert "join how" not in steps
    with tmr.stats() as seen:
        got = q.to_pandas(cluster=cluster).sort_values("nk", ignore_index=True)
    connection = duckdb.connect()
    connection.register("r", REGION)
    connection.register("n", NATION)
    want = connection.sql(SQL).df()
    assert list(got.columns) == ["rk", "r_name", "x", "nk", "x_right"] == list(want.columns)
    for name in got.columns:
        assert got[name].tolist() == want[name].tolist(), name  # nations 0, 1, 4: europe, äsia ✓, europe
    assert len(seen.runs) == 1  # the nations' map; without the swap, the region's filter and the join


def test_a_left_side_with_a_key_twice_is_not_swapped() -> None:
    """Looked up, the left side's second row of a key would be lost."""
    twice = pd.concat([REGION, REGION.iloc[[1]]], ignore_index=True)
    q = tmr.lazy(twice).filter(col("r_name") != "S").join(tmr.lazy(NATION), left_on="rk", right_on="nrk")
    assert "join how=inner on rk=nrk" in q.explain().split("physical steps:")[1]
