"""Estimated rows and bytes in ``explain()`` (a Parquet scan's footers, a CSV's size, a client table's dtypes, the
filters' fixed fractions), lazy Parquet and CSV scans reading when the query runs, and the join rules from sizes (order and strategy):
the plan before and after each, and the same answer (equal to pandas) with the rule off."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tfmapreduce as tmr
from tfmapreduce import col
from tfmapreduce._query.estimate import estimate, estimates, selectivity
from tfmapreduce._query.execute import execute
from tfmapreduce._query.joins import join_order, join_sizes
from tfmapreduce._query.plan import show
from tfmapreduce._query.rules import RULES, optimize

FACTS = pd.DataFrame({"id": np.arange(12), "dim": np.arange(12) % 4, "x": np.arange(12, dtype=np.float64)})
DIMS = pd.DataFrame({"dim": np.arange(4), "group": np.array([10, 20, 10, 30])})
GROUPS = pd.DataFrame({"group": np.array([10, 20, 30]), "name": ["ten", "twenty", "thirty"]})


@pytest.mark.usefixtures("steps_on_workers")
def test_explain_estimates_a_parquet_scan_from_its_footers_and_a_filter_by_its_fixed_fraction(
    tmp_path: Path, cluster: tmr.LocalCluster
) -> None:
    path = tmp_path / "t.parquet"
    frame = pa.table({"k": np.arange(1000, dtype=np.int64), "x": np.arange(1000) * 0.5, "s": ["ab"] * 1000})
    pq.write_table(frame, path, row_group_size=400, compression="NONE")
    meta = pq.ParquetFile(path).metadata
    size = [sum(meta.row_group(g).column(c).total_uncompressed_size for g in range(3)) for c in (0, 1)]
    kx, k = size[0] + size[1], round(267 * size[0] / 1000)
    q = tmr.lazy(tmr.plan_parquet(path)).filter((col("x") >= 100.0) & (col("k") != 300)).select("k")
    plan = optimize(q.plan)
    assert show(plan) == [
        "fused [filter (col('k') != 300); filter (col('x') >= 100.0); select k]",
        "  scan parquet of 1 files, 3 row groups [k, x]",  # s is never read
    ]
    scan = estimate(plan.input)  # type: ignore[union-attr]
    assert (scan.rows, scan.bytes) == (1000, kx)  # the footers: 400 + 400 + 200 rows, k's and x's sizes
    assert selectivity((col("x") >= 100.0) & (col("k") != 300)) == (1 / 3) * 0.8
    assert estimate(plan).rows == round(1000 * (1 / 3) * 0.8) == 267
    assert estimate(plan).bytes == k  # k's bytes a row
    assert q.explain().splitlines()[-3:] == [
        f"  run 1 (map run): scan parquet of 1 files, 3 row groups [k, x]  [~1000 rows, ~{kx / 1024:.1f} KiB]",
        "  run 2 (map run): fused [filter (col('k') != 300); filter (col('x') >= 100.0); select k]"
        f"  [~267 rows, ~{k / 1024:.1f} KiB]",
        "  2 distributed runs",
    ]
    got = q.collect(cluster=cluster).to_pandas()
    assert got.k.tolist() == [k for k in range(200, 1000) if k != 300]


def test_a_csv_scan_is_estimated_from_the_files_sizes_and_reads_when_the_query_runs(
    tmp_path: Path, cluster: tmr.LocalCluster
) -> None:
    path = tmp_path / "t.csv"
    frame = pd.DataFrame({"city": ["Oslo", "Rome", "Lima", "Pisa"] * 50, "n": np.arange(200), "x": np.arange(200) * 0.5})
    frame.to_csv(path, index=False)
    scan = tmr.plan_csv(path)
    q = tmr.lazy(scan).filter(col("city") == "Rome").select("city", "x")
    plan = optimize(q.plan)
    assert show(plan)[1] == f"  scan csv of 1 files, {path.stat().st_size} bytes [city, x]"
    read = estimate(plan.input)  # type: ignore[union-attr]
    assert (read.rows, dict(read.widths)) == (200, {"city": 12.0, "x": 8.0})  # the whole file sampled; 4 characters
    assert estimate(plan).rows == 40
    got = q.collect(cluster=cluster).to_pandas()
    pd.testing.assert_frame_equal(got, frame[frame.city == "Rome"][["city", "x"]].reset_index(drop=True))


def test_a_client_table_is_estimated_from_its_rows_and_dtypes_a_group_by_as_a_fraction_and_a_limit_as_its_n() -> None:
    q = tmr.lazy(FACTS).filter(col("dim") == 1)
    sizes = estimates(optimize(q.group_by("dim").agg(total=("x", "sum")).limit(2).plan))
    assert sorted((e.rows, e.bytes, e.kept) for e in sizes.values()) == [
        (1, 16, 0.2),  # the limit of the group-by: min(2, its 1 row)
        (1, 16, 0.2),  # the group-by: a tenth of the rows its filter keeps (run in its map), at least 1; 8 bytes a column
        (12, 192, 1.0),  # the table: 12 rows of the two columns read (dim and x: int64, float64)
    ]
    assert str(estimate(optimize(q.select("dim", "x").plan))) == "~2 rows, ~32 B"  # the filter alone: 0.2 of 12 rows
    assert str(estimate(tmr.lazy(FACTS).plan)) == "~12 rows, ~288 B"


def chain() -> tmr.LazyTable:
    return tmr.lazy(FACTS).join(tmr.lazy(DIMS), on="dim").join(tmr.lazy(GROUPS).filter(col("name") == "ten"), on="group")


def expected_chain() -> pd.DataFrame:
    rows = FACTS.merge(DIMS, on="dim").merge(GROUPS[GROUPS.name == "ten"], on="group")
    return rows[["group", "dim", "id", "x", "name"]].sort_values(["id"]).reset_index(drop=True)


def test_join_order_joins_the_small_tables_first_with_the_same_rows_and_columns(cluster: tmr.LocalCluster) -> None:
    q = chain()
    assert show(q.plan) == [
        "join how=inner on group",
        "  join how=inner on dim",
        "    scan table of 12 rows [*]",
        "    scan table of 4 rows [*]",
        "  filter (col('name') == 'ten')",
        "    scan table of 3 rows [*]",
    ]
    assert show(join_order(q.plan)) == [
        "select group, dim, id, x, name",
        "  join how=inner on dim",
        "    scan table of 12 rows [*]",
        "    join how=inner on group",
        "      scan table of 4 rows [*]",
        "      filter (col('name') == 'ten')",
        "        scan table of 3 rows [*]",
    ]
    assert estimate(join_order(q.plan).input.right).rows < estimate(q.plan.left).rows  # type: ignore[union-attr]
    on_facts = tmr.lazy(FACTS).join(tmr.lazy(DIMS), on="dim").join(tmr.lazy(FACTS).select("id").limit(1), on="id")
    assert join_order(on_facts.plan) is on_facts.plan  # keyed on the first table's column: the row order would change
    also_x = tmr.lazy(GROUPS.assign(x=1.0)).filter(col("name") == "ten")
    renamed = tmr.lazy(FACTS).join(tmr.lazy(DIMS), on="dim").join(also_x, on="group")
    assert join_order(renamed.plan) is renamed.plan  # a suffix renames its x: left alone
    on = execute(optimize(q.plan), {"cluster": cluster}).to_pandas()
    off = execute(optimize(q.plan, [r for r in RULES if r is not join_order]), {"cluster": cluster}).to_pandas()
    pd.testing.assert_frame_equal(on, off)  # the same rows in the same order
    pd.testing.assert_frame_equal(on, expected_chain(), check_dtype=False)


def test_join_sizes_broadcasts_a_small_side_and_hashes_sides_over_the_threshold(cluster: tmr.LocalCluster) -> None:
    q = tmr.lazy(FACTS).join(tmr.lazy(DIMS), on="dim")
    assert show(join_sizes(q.plan))[0] == "join how=inner on dim, estimated broadcast"
    big = tmr.lazy({"dim": np.zeros(4_000_000, np.int64)})
    small = tmr.lazy({"dim": np.zeros(3_000_000, np.int64)})  # its keys and row numbers: 48 MB, over 32 MiB
    assert show(join_sizes(big.join(small, on="dim").plan))[0] == "join how=inner on dim, estimated hash"
    on = q.collect(cluster=cluster).to_pandas()
    off = execute(optimize(q.plan, [r for r in RULES if r is not join_sizes]), {"cluster": cluster}).to_pandas()
    pd.testing.assert_frame_equal(on, off)
    expected = FACTS.merge(DIMS, on="dim").sort_values("id")[["dim", "id", "x", "group"]]
    pd.testing.assert_frame_equal(on, expected.reset_index(drop=True), check_dtype=False)
