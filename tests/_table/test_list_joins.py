"""A list column as a join key: two lists match element by element (as DuckDB's ``a.l = b.l``), a
null list matches nothing. Every ``how``, a list key alone and beside a string key, lists of ints, strings (unicode,
``""``) and floats (``-0.0``, NaN), empty and null lists, against DuckDB, of client tables, resident ones (the
right side resident or not) and a lazy query."""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import tfmapreduce as tmr

HOWS = ("inner", "left", "right", "outer", "semi", "anti")


def _lists(rng: np.random.Generator, rows: int, words: list[Any]) -> list[Any]:
    """Short lists of ``words`` (equal and prefix lists often), an empty or a null list now and then."""
    out: list[Any] = []
    for _ in range(rows):
        n = int(rng.integers(-1, 3))
        out.append(None if n < 0 else [words[j] for j in rng.integers(0, len(words), n)])
    return out


def _side(seed: int, rows: int, value: str) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "i": pa.array(_lists(rng, rows, [-(2**40), 0, 7]), pa.list_(pa.int64())),
            "s": pa.array(_lists(rng, rows, ["", "é", "日本"]), pa.list_(pa.string())),
            "f": pa.array(_lists(rng, rows, [-0.0, 0.0, float("nan"), 1.5]), pa.list_(pa.float64())),
            "g": pa.array([None if v == 2 else "ab"[v] for v in rng.integers(0, 3, rows).tolist()]),
            value: np.arange(rows),
        }
    )


def _sorted(rows: list[tuple[Any, ...]]) -> list[str]:
    return sorted(map(repr, rows))  # (repr: NaN equals NaN, None and lists order)


def _duckdb(a: pa.Table, b: pa.Table, on: list[str], how: str) -> list[str]:
    cond = " AND ".join(f"a.{k} = b.{k}" for k in on)
    if how in ("semi", "anti"):
        return _sorted(duckdb.sql(f"SELECT a.* FROM a {how.upper()} JOIN b ON {cond}").fetchall())
    keys = ", ".join(f"coalesce(a.{k}, b.{k})" if how in ("right", "outer") else f"a.{k}" for k in on)
    rest = ", ".join(f"a.{c}" for c in a.column_names if c not in on)
    sql = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "outer": "FULL OUTER JOIN"}[how]
    return _sorted(duckdb.sql(f"SELECT {keys}, {rest}, b.w FROM a {sql} b ON {cond}").fetchall())


def _ours(t: tmr.Table) -> list[str]:
    return _sorted([tuple(r.values()) for r in t.to_arrow().to_pylist()])


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("on", [["i"], ["s", "g"], ["f"]], ids=["ints", "strings and a string key", "floats"])
def test_a_join_on_list_keys_equals_duckdb(cluster: tmr.LocalCluster, how: str, on: list[str]) -> None:
    a, b = _side(1, 120, "v"), _side(2, 40, "w").select([*on, "w"])
    got = tmr.table(a).join(tmr.table(b), on=on, how=how, cluster=cluster)
    semi = how in ("semi", "anti")  # the left's columns, in its order
    assert got.columns == (tuple(a.column_names) if semi else (*on, *(c for c in a.column_names if c not in on), "w"))
    assert _ours(got) == _duckdb(a, b, on, how)


@pytest.mark.parametrize(
    ("on", "how", "order"),
    [*((["s", "g"], how, "none") for how in HOWS), (["i"], "outer", "none"), (["f"], "left", "left")],
)
def test_a_resident_join_on_list_keys_equals_duckdb(cluster: tmr.LocalCluster, on: list[str], how: str, order: str) -> None:
    """The lists' keys made on the workers for a resident side, by the same graph on the client for a client one; the
    result's key column from the side each row has, lists of either side's width."""
    a, b = _side(5, 90, "v"), _side(6, 30, "w").select([*on, "w"])
    want = _duckdb(a, b, on, how)
    with (
        tmr.scatter(tmr.table(a), cluster=cluster, sizes=[0, 40, 50]) as left,
        tmr.scatter(tmr.table(b), cluster=cluster) as right,
    ):
        for other in (right, tmr.table(b)):
            with left.join(other, on=on, how=how, maintain_order=order) as got:
                assert _ours(got.collect()) == want
                if order == "left":
                    assert got.collect().column("v").to_numpy().tolist() == sorted(got.collect().column("v").to_numpy().tolist())


def test_a_lazy_join_on_a_list_key(cluster: tmr.LocalCluster) -> None:
    a, b = _side(3, 60, "v"), _side(4, 20, "w").select(["i", "w"])
    query = tmr.lazy(tmr.table(a)).join(tmr.lazy(tmr.table(b)), on="i", how="left").filter(tmr.col("v") > 10)
    sql = "SELECT a.i, a.s, a.f, a.g, a.v, b.w FROM a LEFT JOIN b ON a.i = b.i WHERE a.v > 10"
    assert _ours(query.collect(cluster=cluster, client_rows=0)) == _sorted(duckdb.sql(sql).fetchall())
