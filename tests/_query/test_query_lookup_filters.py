"""``lookup_joins`` with the filters on top of the small side (a group-by's ``HAVING``, a dimension's filter): they
are evaluated on the looked-up row in the reader's map, so the filter costs no run of its own. The same answer as
DuckDB (string keys with nulls and unicode, a null aggregate the filter drops), and one run fewer."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

import tfmapreduce as tmr
from tfmapreduce import col

LINES = pd.DataFrame(
    {
        "id": np.arange(7),
        "s": ["äpfel ✓", "birne", None, "三", "birne", "kiwi", "äpfel ✓"],
        "v": [1.0, 2.0, 3.0, np.nan, 5.0, 6.0, 7.0],
    }
)
PARTS = pd.DataFrame(
    {
        "s": ["äpfel ✓", "birne", "三", "三", None, "kiwi", "birne"],
        "w": pd.array([10, 4, 20, None, 50, None, 5], dtype="Int64"),
    }
)
GROUPS = "(SELECT s, sum(w) AS total FROM p GROUP BY s HAVING sum(w) > 8)"
SQL = {
    "inner": f"SELECT l.id, l.s, l.v, g.total FROM l JOIN {GROUPS} g ON l.s = g.s",
    "semi": f"SELECT l.id, l.s, l.v FROM l WHERE l.s IN (SELECT s FROM {GROUPS})",
    "anti": f"SELECT l.id, l.s, l.v FROM l WHERE NOT EXISTS (SELECT 1 FROM {GROUPS} g WHERE g.s = l.s)",
}


@pytest.mark.usefixtures("steps_on_workers")
@pytest.mark.parametrize("how", ["inner", "semi", "anti"])
def test_a_having_on_the_small_side_is_evaluated_in_the_lookup(cluster: tmr.LocalCluster, how: str) -> None:
    groups = tmr.lazy(PARTS).group_by("s").agg(total=("w", "sum")).filter(col("total") > 8)
    q = tmr.lazy(LINES).join(groups, on="s", how=how)
    assert "lookup(table(0), 'total') > 8" in q.explain().split("physical steps:")[1]
    with tmr.stats() as seen:
        got = q.to_pandas(cluster=cluster).sort_values("id", ignore_index=True)
    connection = duckdb.connect()
    connection.register("l", LINES)
    connection.register("p", PARTS)
    want = connection.sql(SQL[how] + " ORDER BY l.id").df()
    assert got["id"].tolist() == want["id"].tolist()  # inner, semi: apples (10) and 三 (20); anti: the rest, the null key
    assert got["s"].tolist() == want["s"].tolist()
    if how == "inner":
        assert got["total"].tolist() == want["total"].tolist()
    assert len(seen.runs) == 2  # the group-by, then the lines' map, which looks the groups up and filters them


def test_a_filter_on_a_side_with_a_key_twice_stays_a_run_of_its_own(cluster: tmr.LocalCluster) -> None:
    """A lookup finds one row of a key: the filter could not tell whether another row of it passes."""
    kept = tmr.lazy(PARTS).filter(col("w") > 4)  # birne: 4 dropped, 5 kept
    q = tmr.lazy(LINES).join(kept, on="s", how="semi")
    assert "filter (col('w') > 4)" in q.explain().split("physical steps:")[1]
    got = q.to_pandas(cluster=cluster)
    assert got["id"].tolist() == [0, 1, 3, 4, 6]  # apples (10), birne (5), 三 (20)
