"""A lazy group-by over a file scan run on the workers: the scan's columns kept where they are decoded and grouped
there (``execute._aggregated_where_read``), no row through the client, the kept columns freed after; the same
answer as DuckDB's over the same file, nulls and unicode included."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tfmapreduce as tmr
from tfmapreduce import col
from tfmapreduce._table.resident import ResidentTable

SQL = """
    SELECT city, flag, sum(x * 2) AS s, avg(x) AS m, count(*) AS n, count(x) AS nx, min(day) AS first,
           count(DISTINCT k) AS kinds
    FROM t WHERE city <> 'Oslo' AND k > 40 GROUP BY city, flag ORDER BY city NULLS LAST, flag NULLS LAST
"""


def frame(n: int) -> pd.DataFrame:
    """``n`` rows: a unicode city (null in every 11th row), a flag, ``x`` (null in every 7th row), ``k``, a day, a
    note."""
    rng = np.random.default_rng(8)
    return pd.DataFrame(
        {
            "city": pd.array([None if i % 11 == 0 else ["Oslo", "Zürich", "東京", ""][i % 4] for i in range(n)], "string"),
            "flag": pd.array(rng.choice(["A", "N", "R"], n), "string"),
            "x": pd.array([None if i % 7 == 0 else float(v) for i, v in enumerate(rng.normal(50, 20, n))], "Float64"),
            "k": rng.integers(0, 100, n),
            "day": pd.to_datetime("2024-01-01") + pd.to_timedelta(rng.integers(0, 300, n), "D"),
            "note": pd.array([f"row {i}" for i in range(n)], "string"),  # read by no step
        }
    )


def query(scan: object) -> tmr.LazyTable:
    return (
        tmr.lazy(scan)
        .filter((col("city") != "Oslo") & (col("k") > 40))
        .with_columns(y=col("x") * 2)
        .group_by(["city", "flag"])
        .agg(
            s=("y", "sum"),
            m=("x", "mean"),
            n=("*", "count"),
            nx=("x", "count"),
            first=("day", "min"),
            kinds=("k", "count_distinct"),
        )
    )


@pytest.mark.usefixtures("steps_on_workers")
@pytest.mark.parametrize("files", ["parquet", "csv"])
def test_a_group_by_over_files_reads_them_where_they_are_decoded_and_frees_them(
    files: str, tmp_path: Path, cluster: tmr.LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = frame(3_000)
    path = tmp_path / f"t.{files}"
    if files == "parquet":
        pq.write_table(pa.Table.from_pandas(data, preserve_index=False), path, row_group_size=700)
        scan = tmr.plan_parquet(path)
    else:
        data.assign(day=data["day"].dt.date).to_csv(path, index=False)  # an empty field reads as a null
        scan = tmr.plan_csv(path)
    freed = []
    delete = ResidentTable.delete
    monkeypatch.setattr(ResidentTable, "delete", lambda self, **kw: (freed.append(self), delete(self, **kw))[1])
    with tmr.stats() as seen:
        got = query(scan).collect(cluster=cluster).to_pandas()
    assert len(freed) == (1 if files == "parquet" else 2)  # the kept scan (a CSV's every column first), once grouped
    for table in freed:
        with pytest.raises(ValueError, match="was deleted"):
            table.collect()
    assert [run.bytes_sent for run in seen.runs] == [0] * len(seen.runs)  # no row shipped back to the workers
    read = (
        pq.read_table(path).to_pandas()
        if files == "parquet"
        else pd.read_csv(path, dtype={"city": "string"}, keep_default_na=False, na_values=[""])
    )
    connection = duckdb.connect()
    connection.register("t", read)
    expected = connection.sql(SQL).df()
    assert got["city"].tolist() == expected["city"].where(expected["city"].notna(), None).tolist()
    assert got["flag"].tolist() == expected["flag"].tolist()
    for name in ("s", "m"):
        np.testing.assert_allclose(got[name].to_numpy(float), expected[name].to_numpy(float), rtol=1e-12)
    for name in ("n", "nx", "kinds"):
        assert got[name].tolist() == expected[name].tolist()
    assert [pd.Timestamp(d).date() for d in got["first"]] == [pd.Timestamp(d).date() for d in expected["first"]]
