"""The expressions TPC-H needs against DuckDB on the same rows: ``between``, string matches (``like``,
``startswith``, ``endswith``, ``contains``), ``substr``, a date's ``year()`` and ``when/then/otherwise``, nulls
included, on real workers and on the client (a small table's steps, ``client_steps``).
"""

from __future__ import annotations

import datetime

import duckdb
import numpy as np
import pandas as pd
import pytest

import tfmapreduce as tmr
from tfmapreduce import col
from tfmapreduce._query.expr import Expr

pytestmark = pytest.mark.usefixtures("steps_placed")


FRAME = pd.DataFrame(
    {
        "id": np.arange(8),
        "i": pd.array([1, -2, None, 4, 0, None, 7, -1], dtype="Int64"),
        "f": [0.5, np.nan, 2.5, -1.0, 3.0, 1.5, np.nan, 0.0],
        "s": ["PROMO BRASS", "b_x%", None, "a.c", "SMALL PROMO", "forest green", None, "é"],
        "d": [datetime.date(y, m, dd) if y else None for y, m, dd in [
            (1992, 1, 1), (1995, 12, 31), (2000, 2, 29), (None, 0, 0), (1969, 12, 31), (1900, 3, 1), (2024, 1, 7), (1996, 3, 1)
        ]],
    }
)  # fmt: skip

FILTERS = [
    (col("i").between(0, 4), "i BETWEEN 0 AND 4"),
    (col("d").between(datetime.date(1992, 1, 1), datetime.date(1996, 3, 1)), "d BETWEEN DATE '1992-01-01' AND DATE '1996-03-01'"),
    (col("s").like("%PROMO%"), "s LIKE '%PROMO%'"),
    (col("s").like("PROMO%"), "s LIKE 'PROMO%'"),
    (col("s").like("_.c"), "s LIKE '_.c'"),
    (~col("s").like("%green%"), "NOT s LIKE '%green%'"),
    (col("s").startswith("b_"), "starts_with(s, 'b_')"),
    (col("s").endswith("x%"), "suffix(s, 'x%')"),
    (col("s").contains("."), "contains(s, '.')"),
    (col("s").substr(1, 2).isin(["PR", "fo"]), "substring(s, 1, 2) IN ('PR', 'fo')"),
    (col("d").year() == 1995, "extract(year FROM d) = 1995"),
]


def duckdb_rows(select: str, where: str = "TRUE") -> list[tuple[object, ...]]:
    frame = FRAME  # noqa: F841  # DuckDB reads the local by its name
    return duckdb.sql(f"SELECT {select} FROM frame WHERE {where} ORDER BY id").fetchall()


@pytest.mark.parametrize(("expr", "sql"), FILTERS, ids=[s for _, s in FILTERS])
def test_a_filter_keeps_the_rows_duckdb_keeps(cluster: tmr.LocalCluster, expr: Expr, sql: str) -> None:
    kept = tmr.lazy(FRAME).filter(expr).select("id").collect(cluster=cluster)
    assert kept.to_dict()["id"].tolist() == [r[0] for r in duckdb_rows("id", sql)]


def test_computed_columns_equal_duckdb(cluster: tmr.LocalCluster) -> None:
    q = tmr.lazy(FRAME).with_columns(
        year=col("d").year(),
        head=col("s").substr(2, 3),
        case=tmr.when(col("s").like("PROMO%")).then(col("f") * 2).otherwise(0.0),
        nested=tmr.when(col("i") > 0).then(1).otherwise(tmr.when(col("i") < 0).then(-1).otherwise(col("i"))),
    )
    ours = q.select("year", "head", "case", "nested").to_pandas(cluster=cluster)
    sql = (
        "extract(year FROM d), substring(s, 2, 3), CASE WHEN s LIKE 'PROMO%' THEN f * 2 ELSE 0.0 END, "
        "CASE WHEN i > 0 THEN 1 WHEN i < 0 THEN -1 ELSE i END"
    )
    theirs = pd.DataFrame(duckdb_rows(sql), columns=ours.columns)
    for name in ours.columns:
        got = [None if pd.isna(v) else v for v in ours[name]]
        want = [None if pd.isna(v) else v for v in theirs[name]]
        assert got == want, name


def test_explain_shows_the_new_expressions_and_wrong_types_say_how_to_fix_them(cluster: tmr.LocalCluster) -> None:
    expr = tmr.when(col("s").like("A%")).then(col("d").year()).otherwise(col("s").substr(1, 2))
    assert repr(expr) == "when(col('s').like('A%')).then(col('d').year()).otherwise(col('s').substr(1, 2))"
    with pytest.raises(TypeError, match="expected a string column"):
        tmr.lazy(FRAME).filter(col("i").like("1%")).collect(cluster=cluster)
    with pytest.raises(TypeError, match="expected a date column"):
        tmr.lazy(FRAME).with_columns(y=col("i").year()).collect(cluster=cluster)
    with pytest.raises(ValueError, match="start ≥ 1"):
        col("s").substr(0, 2)
