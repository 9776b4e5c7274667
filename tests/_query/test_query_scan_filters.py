"""``scan_filters``: a lazy query's column-literal filters on a Parquet scan become the scan's ``filters=``, so row
groups whose statistics exclude them are not read (counted in the optimized plan), the filter staying above; the
same answer as DuckDB's and as the plan without the rule, nulls and unicode included; what it cannot take exactly,
or what keeps most rows, is left alone."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tfmapreduce as tmr
from tfmapreduce import col
from tfmapreduce._query.execute import execute
from tfmapreduce._query.plan import ParquetFiles, Where, inputs, show
from tfmapreduce._query.rules import RULES, optimize, push_predicates, scan_filters

DAY = datetime.date(2024, 1, 1)


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """500 rows in 5 row groups of 100, sorted by ``day`` (a group per 100 days), ``day`` null in every 7th row."""
    n = 500
    days = [DAY + datetime.timedelta(days=i) if i % 7 else None for i in range(n)]
    frame = pa.table(
        {
            "day": pa.array(days, pa.date32()),
            "k": pa.array(np.arange(n, dtype=np.int32)),
            "x": pa.array(np.arange(n) * 0.5),
            "city": pa.array([["Oslo", "Zürich", "東京", None][i % 4] for i in range(n)]),
        }
    )
    out = tmp_path_factory.mktemp("scan_filters") / "t.parquet"
    pq.write_table(frame, out, row_group_size=100)
    return out


def scan_of(plan: object) -> ParquetFiles:
    while not isinstance(plan, ParquetFiles):
        plan = plan.input  # type: ignore[attr-defined]
    return plan


def duck(path: Path, where: str) -> list[int]:
    rows = duckdb.sql(f"SELECT k FROM read_parquet('{path}') WHERE {where} ORDER BY k").fetchall()
    return [k for (k,) in rows]


def test_filters_on_a_parquet_scan_become_its_filters_and_skip_row_groups(path: Path, cluster: tmr.LocalCluster) -> None:
    late = DAY + datetime.timedelta(days=250)
    q = (
        tmr.lazy(tmr.plan_parquet(path))
        .filter((col("day") >= late) & (col("k") < 450) & (col("x") > 10) & col("city").isin(["Zürich", "東京"]))
        .select("k")
    )
    pushed = push_predicates(q.plan)
    assert show(pushed)[-1].strip() == "scan parquet of 1 files, 5 row groups [*]"
    after = scan_filters(pushed)
    assert show(after) == [
        "select k",
        "  filter (col('day') >= datetime.date(2024, 9, 7))",
        "    filter (col('k') < 450)",
        "      filter (col('x') > 10)",
        "        filter col('city').isin(['Zürich', '東京'])",
        "          scan parquet of 1 files, 3 row groups, 2 skipped by "
        "[day >= 2024-09-07, k < 450, x > 10, city in ['Zürich', '東京']] [*]",
    ]
    scan = scan_of(optimize(q.plan))
    assert [g.index for g in scan.source.row_groups] == [2, 3, 4]  # days 250-449: the first two groups are skipped
    assert "  run 1 (map run): scan parquet of 1 files, 3 row groups, 2 skipped by [day >= 2024-09-07" in q.explain()
    want = duck(path, "day >= DATE '2024-09-07' AND k < 450 AND x > 10 AND city IN ('Zürich', '東京')")
    assert 0 < len(want) < 200
    on = q.collect(cluster=cluster).to_pandas()
    off = execute(optimize(q.plan, [r for r in RULES if r is not scan_filters]), {"cluster": cluster}).to_pandas()
    assert on.k.tolist() == off.k.tolist() == want


def test_nulls_in_the_filtered_column_and_a_filter_that_excludes_every_group(path: Path, cluster: tmr.LocalCluster) -> None:
    q = tmr.lazy(tmr.plan_parquet(path)).filter((col("day") < DAY + datetime.timedelta(days=120)) & (col("k") >= 0))
    got = q.select("k", "day").collect(cluster=cluster).to_pandas()
    assert got.k.tolist() == duck(path, "day < DATE '2024-04-30' AND k >= 0")  # the null days dropped
    assert scan_of(optimize(q.plan)).source.read == 2
    none = tmr.lazy(tmr.plan_parquet(path)).filter(col("k") > 1000).agg(n=("*", "count"))
    assert scan_of(optimize(none.plan)).source.read == 0
    assert none.collect(cluster=cluster).to_dict()["n"].tolist() == [0]


@pytest.mark.parametrize(
    "predicate",
    [
        (col("k") < 100) | (col("k") > 400),  # an or
        col("k") < col("x"),  # two columns
        col("k") + 1 < 100,  # a computed column
        col("k") < 99.5,  # a float an int column does not hold
        col("city") != "Oslo",  # a comparison the scan does not take
        (col("k") >= 10) & (col("x") < 240.0),  # keeps most rows (from the footers' min and max): the filter alone
    ],
)
def test_a_predicate_the_scan_cannot_take_exactly_is_left_alone(path: Path, predicate: tmr.Expr) -> None:
    q = tmr.lazy(tmr.plan_parquet(path)).filter(predicate)
    after = scan_filters(push_predicates(q.plan))
    assert isinstance(after, Where)
    assert (scan_of(after).filters, scan_of(after).source.read) == ((), 5)


def test_a_traced_filter_or_a_scan_read_twice_is_left_alone(path: Path, cluster: tmr.LocalCluster) -> None:
    traced = tmr.lazy(tmr.plan_parquet(path)).filter(lambda rows: rows["k"] < 100)
    assert scan_of(optimize(traced.plan)).filters == ()
    scan = tmr.lazy(tmr.plan_parquet(path))
    both = scan.filter(col("k") < 100).join(scan.filter(col("k") >= 50).select("k"), on="k", how="semi").select("k")
    seen: dict[int, ParquetFiles] = {}
    stack = [optimize(both.plan)]
    while stack:
        node = stack.pop()
        seen.update({id(node): node} if isinstance(node, ParquetFiles) else {})
        stack.extend(inputs(node))
    assert [s.filters for s in seen.values()] == [()]  # one scan, two readers: neither's filter is its alone
    assert both.collect(cluster=cluster).to_pandas().k.tolist() == list(range(50, 100))


@pytest.mark.parametrize(
    ("where", "literals", "sql"),
    [
        (lambda d: col("day") == d, [DAY + datetime.timedelta(days=305), DAY + datetime.timedelta(days=306)], "day = DATE '{}'"),
        (lambda ks: col("k").isin(ks) & (col("x") > 1.0), [[3, 250], [4, 251]], "k IN {} AND x > 1.0"),
    ],
)
def test_a_new_literal_compiles_nothing(path: Path, cluster: tmr.LocalCluster, where: Any, literals: list[Any], sql: str) -> None:
    """The scan's filter values are its run's inputs, not constants in its graph: the same query with another literal
    (the same row groups read, as many rows kept) runs the programs the first one compiled, with the new answer."""
    answers = []
    for i, literal in enumerate(literals):
        q = tmr.lazy(tmr.plan_parquet(path)).filter(where(literal)).select("k", "city")
        assert scan_of(optimize(q.plan)).filters  # the scan takes the filter
        got, runs = q.collect(stats=True, cluster=cluster)
        bound = sql.format(tuple(literal) if isinstance(literal, list) else literal)
        want = duckdb.sql(f"SELECT k, city FROM read_parquet('{path}') WHERE {bound} ORDER BY k").df()
        assert got.to_pandas().reset_index(drop=True).equals(want)
        answers.append(want.k.tolist())
        if i:
            assert runs
            assert [r.compiled for r in runs] == [False] * len(runs)
    assert answers[0] != answers[1]


def test_the_rule_reads_the_statistics_the_plan_keeps_and_opens_no_file(path: Path, tmp_path: Path) -> None:
    """The footers are read once, by ``plan_parquet``: with the file moved away, the rule still takes the filters
    and skips the same row groups, and the estimates are the footers' (as ``plan_parquet(filters=)`` gives them)."""
    moved = tmp_path / "t.parquet"
    moved.write_bytes(path.read_bytes())
    late = DAY + datetime.timedelta(days=250)
    q = tmr.lazy(tmr.plan_parquet(moved)).filter((col("day") >= late) & (col("k") < 450)).select("k", "x")
    moved.unlink()
    scan = scan_of(optimize(q.plan))
    assert scan.filters == (("day", ">=", late), ("k", "<", 450))
    assert [g.index for g in scan.source.row_groups] == [2, 3, 4]
    direct = tmr.plan_parquet(path, filters=[("day", ">=", late), ("k", "<", 450)])
    assert (scan.source.filters, scan.source.skipped, scan.source.footers) == (direct.filters, direct.skipped, direct.footers)
    footer = pq.ParquetFile(path).metadata
    for name, index in (("k", 1), ("x", 2)):  # each column's uncompressed bytes over the row groups read
        assert dict(scan.sizes)[name] == sum(footer.row_group(g).column(index).total_uncompressed_size for g in (2, 3, 4))
