"""Tables: named, typed, nullable columns, and their group-by aggregates in one keyed run — on real workers.

Every aggregate equals pandas on the whole input: ``groupby(keys, dropna=False, sort=True)`` with SQL's nulls
(``sum(min_count=1)``: a group with no value sums to null), for any partition (``sizes=``, empty shards included)
and any number of reducers.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples, generated, size_lists

import tfmapreduce as tmr

AGGREGATES: dict[str, tuple[str, str]] = {
    "total": ("i64", "sum"),
    "small": ("i8", "sum"),
    "unsigned": ("u16", "sum"),
    "avg": ("f64", "mean"),
    "avg16": ("f16", "mean"),
    "n": ("f64", "count"),
    "lo": ("i8", "min"),
    "hi": ("f16", "max"),
    "first": ("d", "min"),
    "late": ("t", "max"),
    "anyb": ("b", "max"),
    "rows": ("*", "count"),
}


def reference(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """pandas' answer with SQL's nulls (a group with no value sums to null), floats summed in float64."""
    frame = frame.assign(f16=frame["f16"].astype(np.float64), rows=1)
    named: dict[str, Any] = {}
    for out, (column, op) in AGGREGATES.items():
        if column == "*":
            named[out] = ("rows", "size")
        elif op == "sum":
            named[out] = (column, lambda x: x.sum(min_count=1))
        else:
            named[out] = (column, op)
    if not keys:
        return pd.DataFrame({out: [frame[c].agg(f) if not callable(f) else f(frame[c])] for out, (c, f) in named.items()})
    return frame.groupby(keys, dropna=False, sort=True).agg(**named).reset_index()


def cells(series: pd.Series) -> list[Any]:
    """The values of a column as Python values, None for every spelling of a null."""
    out = []
    for v in series.tolist():
        if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v)):
            out.append(None)
        elif isinstance(v, pd.Timestamp | np.datetime64):
            out.append(pd.Timestamp(v).to_pydatetime())
        elif isinstance(v, np.generic):
            out.append(v.item())
        else:
            out.append(v)
    return out


def assert_same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want), (got, want)
    for name in got.columns:
        for g, w in zip(cells(got[name]), cells(want[name]), strict=True):
            if isinstance(w, datetime.date) and not isinstance(w, datetime.datetime) and isinstance(g, datetime.datetime):
                g = g.date()
            if isinstance(w, float) and g is not None:
                assert g == pytest.approx(w, rel=1e-9, abs=1e-9), (name, got, want)
            else:
                assert g == w, (name, got[name], want[name])


KEY_SETS = [["s"], ["d"], ["s", "i"], ["b", "i", "d", "s"]]


@pytest.mark.parametrize("keys", KEY_SETS, ids="-".join)
@settings(max_examples=examples(3))
@given(seed=st.integers(0, 2**32 - 1), data=st.data())
def test_group_by_equals_pandas(cluster: tmr.LocalCluster, keys: list[str], seed: int, data: st.DataObject) -> None:
    rows = data.draw(st.integers(1, 60))
    t = generated(seed, rows)
    sizes = data.draw(size_lists(rows))
    reducers = data.draw(st.integers(1, 4))
    got = t.group_by(keys).agg(**AGGREGATES, cluster=cluster, sizes=sizes, reducers=reducers)
    assert got.columns == (*keys, *AGGREGATES)
    assert_same(got.to_pandas(), reference(t.to_pandas(), keys))


@settings(max_examples=examples(3))
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 40))
def test_whole_table_agg_equals_pandas(cluster: tmr.LocalCluster, seed: int, rows: int) -> None:
    t = generated(seed, rows)
    got = t.agg(**AGGREGATES, cluster=cluster, sizes=[rows // 3, 0, rows - rows // 3])
    assert len(got) == 1
    assert_same(got.to_pandas(), reference(t.to_pandas(), []))


def test_empty_tables_give_no_groups_and_sql_nulls_for_the_whole(cluster: tmr.LocalCluster) -> None:
    t = generated(0, 0)
    assert len(t.group_by(["s", "i"]).agg(total=("i64", "sum"), cluster=cluster)) == 0
    whole = t.agg(total=("i64", "sum"), n=("f64", "count"), rows=("*", "count"), cluster=cluster).to_dict()
    assert whole["total"].mask.tolist() == [True]
    assert whole["n"].tolist() == [0]
    assert whole["rows"].tolist() == [0]


def test_a_group_of_nulls_gives_null_and_keys_of_nulls_group_together(cluster: tmr.LocalCluster) -> None:
    t = tmr.table(
        {"k": np.array(["a", None, "a", None], object), "x": np.ma.MaskedArray([1.0, 2.0, 3.0, 4.0], mask=[1, 0, 1, 0])}
    )
    got = t.group_by("k").agg(total=("x", "sum"), lo=("x", "min"), n=("x", "count"), rows=("*", "count"), cluster=cluster)
    assert got.to_dict()["k"].tolist() == ["a", None]
    assert got.to_dict()["total"].tolist() == [None, 6.0]  # SQL: SUM of no value is NULL (pandas' default gives 0)
    assert got.to_dict()["lo"].tolist() == [None, 2.0]
    assert got.to_dict()["n"].tolist() == [0, 2]
    assert got.to_dict()["rows"].tolist() == [2, 2]


def test_composite_keys_are_exact_where_their_bytes_would_meet(cluster: tmr.LocalCluster) -> None:
    # ("ab", "c") and ("a", "bc") join to the same text; -0.0 and 0.0 are one float key, as in pandas
    t = tmr.table({"a": np.array(["ab", "a", "a"]), "b": np.array(["c", "bc", "bc"]), "z": np.array([0.0, -0.0, 0.0])})
    got = t.group_by(["a", "b", "z"]).agg(rows=("*", "count"), cluster=cluster).to_dict()
    assert got["a"].tolist() == ["a", "ab"]
    assert got["b"].tolist() == ["bc", "c"]
    assert got["rows"].tolist() == [2, 1]


def test_from_pandas_nulls_and_types_round_trip() -> None:
    frame = pd.DataFrame(
        {
            "s": ["x", None, "", "é"],
            "f": [1.5, np.nan, 2.0, 3.0],
            "n": pd.array([1, None, 3, 4], dtype="Int64"),
            "u": pd.array([1, 2, None, 4], dtype="UInt8"),
            "b": pd.array([True, None, False, True], dtype="boolean"),
            "t": pd.Series(["2024-01-01", None, "2024-01-03", "2024-01-04"], dtype="datetime64[ns]"),
            "d": [datetime.date(2024, 1, 1), None, datetime.date(1969, 12, 31), datetime.date(2024, 2, 29)],
            "i": np.array([1, 2, 3, 4], np.int16),
        }
    )
    t = tmr.table(frame)
    assert [(f.name, f.type.name, f.nullable) for f in t.schema.fields] == [
        ("s", "string", True), ("f", "float64", True), ("n", "int64", True), ("u", "uint8", True),
        ("b", "bool", True), ("t", "timestamp[ns]", True), ("d", "date", True), ("i", "int16", False),
    ]  # fmt: skip
    back = t.to_pandas()
    pd.testing.assert_frame_equal(back, frame)
    assert t.to_dict()["d"].dtype == np.dtype("datetime64[D]")
    assert np.isnat(t.to_dict()["d"][1])
    assert t.schema == tmr.table(back).schema


def test_from_numpy_round_trip_and_repr() -> None:
    data = {
        "s": np.array(["a", "日本"]),
        "d": np.array(["2024-01-02", "NaT"], "datetime64[D]"),
        "x": np.ma.MaskedArray(np.array([1, 2], np.uint32), mask=[False, True]),
        "h": np.array([0.5, np.nan], np.float16),  # NaN from numpy is a value, not a null
    }
    t = tmr.table(data)
    out = t.to_dict()
    assert out["s"].tolist() == ["a", "日本"]
    assert out["x"].mask.tolist() == [False, True]
    assert out["d"].dtype == np.dtype("datetime64[D]")
    assert str(out["d"][0]) == "2024-01-02"
    assert out["h"].dtype == np.float16
    assert np.isnan(out["h"][1])
    assert not t.schema["h"].nullable
    assert len(t) == 2
    assert t.columns == ("s", "d", "x", "h")
    assert repr(t).splitlines()[:2] == [
        "Table(2 rows: s: string, d: date (nullable), x: uint32 (nullable), h: float16)",
        "  s='a', d=2024-01-02, x=1, h=0.5",
    ]
    assert t.select(["x", "s"]).columns == ("x", "s")


def test_errors_name_the_argument_and_how_to_fix_it(cluster: tmr.LocalCluster) -> None:
    t = tmr.table({"city": np.array(["a"]), "price": np.array([1.0])})
    with pytest.raises(KeyError, match="did you mean 'price'"):
        t.group_by("city").agg(total=("prices", "sum"), cluster=cluster)
    with pytest.raises(KeyError, match="did you mean 'city'"):
        t.group_by("cty")
    with pytest.raises(ValueError, match="unknown op 'total'"):
        t.agg(x=("price", "total"), cluster=cluster)
    with pytest.raises(TypeError, match="sum needs a number"):
        t.agg(x=("city", "sum"), cluster=cluster)
    with pytest.raises(TypeError, match="expected a pair"):
        t.agg(x="price", cluster=cluster)
    with pytest.raises(TypeError, match="mixes str with int"):
        tmr.table({"k": np.array(["a", 1], object)})
    with pytest.raises(ValueError, match="same length"):
        tmr.table({"a": np.arange(2), "b": np.arange(3)})


@settings(max_examples=examples(3))
@given(seed=st.integers(0, 2**32 - 1), data=st.data())
def test_filter_and_with_columns_equal_pandas(cluster: tmr.LocalCluster, seed: int, data: st.DataObject) -> None:
    rows = data.draw(st.integers(0, 40))
    t = generated(seed, rows)
    sizes = data.draw(size_lists(rows)) if rows else None
    frame = t.to_pandas()

    def keep(r: Any) -> Any:  # text that is not null nor empty, and i > 0 where i is not null
        return tf.logical_and(tf.strings.length(r["s"]) > 0, tf.logical_or(~r.valid["i"], r["i"] > 0))

    kept = t.filter(keep, cluster=cluster, sizes=sizes)
    want = frame[frame["s"].fillna("").str.len().gt(0) & (frame["i"].isna() | frame["i"].gt(0)).to_numpy(bool)]
    assert_same(kept.to_pandas(), want.reset_index(drop=True))
    assert kept.schema == t.schema or len(kept) < len(t)

    def derive(r: Any) -> dict[str, Any]:
        return {"loud": tf.strings.join([r["s"], "!"]), "f32": r["f32"] * 2, "day": r["d"] + 1}

    more = t.with_columns(derive, cluster=cluster, sizes=sizes)
    assert more.columns == (*t.columns, "loud", "day")
    out = more.to_pandas()
    assert cells(out["loud"]) == [f"{s}!" if s is not None else "!" for s in cells(frame["s"])]
    assert out["f32"].tolist() == (frame["f32"] * 2).tolist()
    days = t.column("d").values
    assert more.column("day").values.tolist() == (days + 1).tolist()


def test_map_errors_say_what_fn_must_return(cluster: tmr.LocalCluster) -> None:
    t = tmr.table({"x": np.array([1, 2])})
    with pytest.raises(tmr.MapFunctionError, match="one bool a row"):
        t.filter(lambda r: r["x"], cluster=cluster)
    with pytest.raises(tmr.MapFunctionError, match="dict of new columns"):
        t.with_columns(lambda r: r["x"], cluster=cluster)
