"""A list column as an aggregate's value: ``count``, ``count_distinct``, ``min`` and ``max`` compare its lists whole
(in the order of a list key), a null list skipped. The same table as DuckDB's ``count(l)``, ``count(DISTINCT l)``,
``min(l)``, ``max(l)`` for a client table, a resident one (its result kept on the workers too) and a lazy query (its filter in a run of its own), over
lists of ints and of strings (unicode, ``""``), empty and null lists, string keys with a null; and the refusals."""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import tfmapreduce as tmr
from tfmapreduce import col

AGGS = {f"{op}_{c}": (c, op) for c in ("i", "s") for op in ("count", "count_distinct", "min", "max")}
SQL = ", ".join(f"{'count(DISTINCT ' if op == 'count_distinct' else op + '('}{c}) AS {out}" for out, (c, op) in AGGS.items())


def _lists(rng: np.random.Generator, rows: int, words: list[str]) -> list[Any]:
    """Short lists of ``words`` (prefixes of one another often), an empty or a null list now and then."""
    out: list[Any] = []
    for _ in range(rows):
        n = int(rng.integers(-1, 4))
        out.append(None if n < 0 else [words[j] for j in rng.integers(0, 3, n)])
    return out


def _table(seed: int, rows: int = 300) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "k": pa.array([None if v == 3 else ["ä", "b", "三"][v] for v in rng.integers(0, 4, rows).tolist()]),
            "i": pa.array(_lists(rng, rows, [-(2**40), 0, 7]), pa.list_(pa.int64())),
            "s": pa.array(_lists(rng, rows, ["", "é", "日本"]), pa.list_(pa.string())),
            "x": rng.random(rows),
        }
    )


def _rows(t: tmr.Table) -> list[tuple[Any, ...]]:
    frame = t.to_arrow().to_pylist()
    return [tuple(r.values()) for r in frame]


def _duckdb(arrow: pa.Table, where: str = "TRUE") -> list[tuple[Any, ...]]:
    return duckdb.sql(f"SELECT k, {SQL} FROM arrow WHERE {where} GROUP BY k ORDER BY k NULLS LAST").fetchall()


@pytest.mark.parametrize(("seed", "rows"), [(0, 300), (1, 12), (2, 9)])  # few rows: groups of no empty list
def test_list_aggregates_equal_duckdb_on_the_client_on_the_workers_and_in_a_query(
    cluster: tmr.LocalCluster, seed: int, rows: int
) -> None:
    arrow = _table(seed, rows)
    want = _duckdb(arrow)
    t = tmr.table(arrow)
    assert _rows(t.group_by("k").agg(**AGGS, cluster=cluster)) == want
    with tmr.scatter(t, cluster=cluster, sizes=[0, rows // 3, rows // 3, rows - 2 * (rows // 3)]) as resident:
        assert _rows(resident.group_by("k").agg(**AGGS)) == want
        with resident.group_by("k").agg(**AGGS, resident=True) as kept:  # kept there, minima and maxima lists again
            assert _rows(kept.collect()) == want
        with resident.group_by("i").agg(lo=("i", "min"), n=("s", "count"), resident=True) as by_list:  # a list key too
            assert (
                _rows(by_list.collect())
                == duckdb.sql("SELECT i, min(i), count(s) FROM arrow GROUP BY i ORDER BY i NULLS LAST").fetchall()
            )
    query = tmr.lazy(t).filter(col("x") > 0.5).group_by("k").agg(**AGGS)
    assert _rows(query.collect(cluster=cluster, client_rows=0)) == _duckdb(arrow, "x > 0.5")
    whole = t.agg(i=("i", "count"), s=("s", "min"), cluster=cluster).to_arrow().to_pylist()  # (outputs named as columns)
    assert [tuple(r.values()) for r in whole] == duckdb.sql("SELECT count(i), min(s) FROM arrow").fetchall()


def test_the_lists_of_no_rows_and_the_refusals(cluster: tmr.LocalCluster) -> None:
    t = tmr.table(_table(2))
    empty = t.filter(lambda rows: rows["x"] > 2.0, cluster=cluster).group_by("k").agg(lo=("i", "min"), n=("i", "count"))
    assert len(empty) == 0
    assert empty.schema["lo"].type.name == "list<int64>"
    with pytest.raises(TypeError, match=r"column 'i', a list column .*\(of a list column: count, count_distinct, max, min\)"):
        t.group_by("k").agg(total=("i", "sum"), cluster=cluster)
    with (
        tmr.scatter(t, cluster=cluster) as resident,
        pytest.raises(TypeError, match=r"column 'i', a list column .*\(of a list column: count, count_distinct, max, min\)"),
    ):
        resident.group_by("k").agg(total=("i", "sum"), resident=True)
