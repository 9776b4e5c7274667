"""Expressions against DuckDB on the same rows: which rows a filter keeps (a comparison with a null is null, and a
filter keeps the rows where it is true; ``&``, ``|`` and ``~`` in three-valued logic) and the values of computed
columns (null where an operand is null), on real workers and on the client (a small table's steps, ``client_steps``).
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
        "j": pd.array([3, 3, 1, None, 5, None, 2, 1], dtype="Int32"),
        "f": [0.5, np.nan, 2.5, -1.0, 3.0, 1.5, np.nan, 0.0],
        "s": ["a", "b", None, "a", "c", "b", None, "é"],
        "d": [datetime.date(2024, 1, d) if d else None for d in (1, 2, 3, None, 5, 6, 7, 2)],
    }
)

FILTERS = [
    (col("i") > 0, "i > 0"),
    (col("i") == col("j"), "i = j"),
    (~(col("i") > 0), "NOT (i > 0)"),
    ((col("i") > 0) | (col("f") < 1.5), "i > 0 OR f < 1.5"),
    ((col("i") > 0) & (col("s") == "a"), "i > 0 AND s = 'a'"),
    (~((col("i") <= 0) & (col("f") >= 1.0)), "NOT (i <= 0 AND f >= 1.0)"),
    (~((col("i") <= 0) | col("s").isin(["b", "c"])), "NOT (i <= 0 OR s IN ('b', 'c'))"),
    (col("s").isin(["a", "é"]), "s IN ('a', 'é')"),
    (col("j").isin([1, 5]) | col("d").isin([datetime.date(2024, 1, 7)]), "j IN (1, 5) OR d IN (DATE '2024-01-07')"),
    (-col("i") >= 1, "-i >= 1"),
    (col("s") != "a", "s <> 'a'"),
    (col("d") >= datetime.date(2024, 1, 3), "d >= DATE '2024-01-03'"),
    (col("i").is_null() | (col("f") != 0.0), "i IS NULL OR f <> 0.0"),
    ((col("i") + col("j")) * 2 > col("f") - 1, "(i + j) * 2 > f - 1"),
    (col("i") / col("j") < 0.5, "i / j < 0.5"),
    (1 < col("j"), "1 < j"),  # noqa: SIM300  # a literal on the left: Python asks col("j") > 1
]


def duckdb_ids(where: str) -> list[int]:
    frame = FRAME  # noqa: F841  # DuckDB reads the local by its name
    return [int(r[0]) for r in duckdb.sql(f"SELECT id FROM frame WHERE {where} ORDER BY id").fetchall()]


@pytest.mark.parametrize(("expr", "sql"), FILTERS, ids=[s for _, s in FILTERS])
def test_a_filter_keeps_the_rows_duckdb_keeps(cluster: tmr.LocalCluster, expr: Expr, sql: str) -> None:
    kept = tmr.lazy(FRAME).filter(expr).select("id").collect(cluster=cluster)
    assert kept.to_dict()["id"].tolist() == duckdb_ids(sql)


def test_computed_columns_are_null_where_an_operand_is_null_as_in_duckdb(cluster: tmr.LocalCluster) -> None:
    q = tmr.lazy(FRAME).with_columns(
        a=(col("i") + col("j")) * 2,
        b=col("i") / col("j"),
        c=col("f") - col("i") * 1.5,
        gt=col("i") > col("j"),
        either=(col("i") > 0) | (col("f") > 1.0),
        missing=col("s").is_null(),
    )
    ours = q.select("a", "b", "c", "gt", "either", "missing").to_pandas(cluster=cluster)
    frame = FRAME  # noqa: F841
    theirs = duckdb.sql(
        "SELECT (i + j) * 2 AS a, i / j AS b, f - i * 1.5 AS c, i > j AS gt, i > 0 OR f > 1.0 AS either, "
        "s IS NULL AS missing FROM frame ORDER BY id"
    ).df()
    for name in ours.columns:
        assert ours[name].isna().tolist() == theirs[name].isna().tolist(), name
        got = ours[name][~ours[name].isna()].astype(float).to_numpy()
        want = theirs[name][~theirs[name].isna()].astype(float).to_numpy()
        np.testing.assert_allclose(got, want, err_msg=name)


def test_types_of_computed_columns(cluster: tmr.LocalCluster) -> None:
    q = tmr.lazy(FRAME).select("d", (col("j") + 1).alias("j1"), (col("i") * 0.5).alias("half"), (col("i") > 0).alias("pos"), "s")
    schema = q.collect(cluster=cluster).schema
    assert [schema[n].type.name for n in ("d", "j1", "half", "pos", "s")] == ["date", "int64", "float64", "bool", "string"]
    assert schema["j1"].nullable
    plain = tmr.lazy(FRAME).select((col("id") + 1).alias("x")).collect(cluster=cluster)
    assert not plain.schema["x"].nullable


def test_an_expression_that_does_not_apply_says_how_to_fix_it(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(TypeError, match="compare with == and !="):
        tmr.lazy(FRAME).filter(col("s") < "b").collect(cluster=cluster)
    with pytest.raises(TypeError, match=r"datetime\.date"):
        tmr.lazy(FRAME).filter(col("d") < "2024-01-01").collect(cluster=cluster)
    with pytest.raises(KeyError, match="did you mean 'id'"):
        tmr.lazy(FRAME).filter(col("idd") > 1).collect(cluster=cluster)
    with pytest.raises(TypeError, match="no truth value"):
        bool(col("i") > 1)
    with pytest.raises(ValueError, match="alias"):
        tmr.lazy(FRAME).with_columns(col("i") + 1)
