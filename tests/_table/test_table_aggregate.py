"""Group-by aggregates that need every value of a group — median, quantile, count_distinct, top_k, min and max of
strings — mixed with the combiner aggregates in one run, on real workers, against pandas and numpy.

The reference skips nulls (pandas' and SQL's rule): ``np.median`` and ``np.quantile`` (numpy's and pandas' default
"linear" method) of each group's values that are not null, ``nunique()`` (SQL's ``COUNT(DISTINCT)``: nulls
excluded), the ``k`` largest in descending order (polars' ``top_k`` as a list), Python's ``min``/``max`` of ``str``
(code point order, which is UTF-8 byte order).
"""

from __future__ import annotations

import datetime
import json
import math
import sys
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples, generated, size_lists

import tfmapreduce as tmr
from tfmapreduce._table import aggregate as _aggregate
from tfmapreduce._table.dictionary import packed

MIXED: dict[str, Any] = {
    "med": ("f64", "median"),
    "medi": ("i", "median"),
    "p90": ("f32", ("quantile", 0.9)),
    "p0": ("i64", ("quantile", 0.0)),
    "p1": ("u16", ("quantile", 1.0)),
    "ds": ("s", "count_distinct"),
    "di": ("i", "n_unique"),
    "df": ("f64", "count_distinct"),
    "top": ("i64", ("top_k", 2)),
    "tops": ("s", ("top_k", 3)),
    "topd": ("d", ("top_k", 1)),
    "los": ("s", "min"),
    "his": ("s", "max"),
    "total": ("f64", "sum"),
    "avg": ("i", "mean"),
    "lo": ("d", "min"),
    "n": ("s", "count"),
    "rows": ("*", "count"),
}


def _present(series: pd.Series) -> list[Any]:
    return [v for v in series.tolist() if not _null(v)]


def _null(v: Any) -> bool:
    return v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v))


def _one(values: list[Any], column: str, op: Any) -> Any:
    """The reference aggregate of one group's values that are not null."""
    name, param = op if isinstance(op, tuple) else (op, None)
    if name in ("count_distinct", "n_unique"):
        return len({0.0 if v == 0 else v for v in values})
    if name == "count":
        return len(values)
    if name == "top_k":
        return sorted(values, reverse=True)[:param]
    if not values:
        return None
    if name == "median":
        return float(np.median(np.asarray(values, np.float64)))
    if name == "quantile":
        return float(np.quantile(np.asarray(values, np.float64), param))
    if name == "sum":
        return sum(values)
    if name == "mean":
        return float(np.mean(values))
    return min(values) if name == "min" else max(values)


def reference(t: tmr.Table, keys: list[str], aggregates: dict[str, Any]) -> dict[str, list[Any]]:
    """Each output column as Python values, groups sorted by the keys (nulls last), from pandas' groups."""
    frame = t.to_pandas()
    groups = [((), frame)] if not keys else list(frame.groupby(keys, dropna=False, sort=True))
    out: dict[str, list[Any]] = {name: [] for name in [*keys, *aggregates]}
    for key, rows in groups:
        for name, value in zip(keys, key if isinstance(key, tuple) else (key,), strict=True):
            out[name].append(None if _null(value) else value)
        for name, (column, op) in aggregates.items():
            out[name].append(len(rows) if column == "*" else _one(_present(rows[column]), column, op))
    return out


def python(column: np.ndarray) -> list[Any]:
    """A result column as Python values (None for a null; a list per row for a list column)."""
    out: list[Any] = []
    for v in column.tolist(fill_value=None) if isinstance(column, np.ma.MaskedArray) else list(column):
        if isinstance(v, np.ndarray):
            out.append(v.tolist())
        elif isinstance(v, np.datetime64):
            out.append(None if np.isnat(v) else v.astype("datetime64[D]").astype(object))
        else:
            out.append(v.item() if isinstance(v, np.generic) else v)
    return out


def assert_equal(got: tmr.Table, want: dict[str, list[Any]]) -> None:
    assert got.columns == tuple(want)
    columns = got.to_dict()
    for name, expected in want.items():
        values = python(columns[name])
        assert len(values) == len(expected), (name, values, expected)
        for g, w in zip(values, expected, strict=True):
            if isinstance(w, float) and g is not None:
                assert g == pytest.approx(w, rel=1e-12, abs=1e-12), (name, values, expected)
            else:
                assert g == w, (name, values, expected)


@pytest.mark.parametrize("keys", [["s"], ["k"], ["s", "d"], ["k", "i", "s"]], ids="-".join)
@settings(max_examples=examples(3))
@given(seed=st.integers(0, 2**32 - 1), data=st.data())
def test_mixed_aggregates_equal_pandas(cluster: tmr.LocalCluster, keys: list[str], seed: int, data: st.DataObject) -> None:
    rows = data.draw(st.integers(1, 60))
    t = generated(seed, rows, keyed=True)
    sizes = data.draw(size_lists(rows))
    reducers = data.draw(st.integers(1, 3))
    with tmr.stats() as runs:
        got = t.group_by(keys).agg(**MIXED, cluster=cluster, sizes=sizes, reducers=reducers)
    assert len(runs.runs) == 1  # every aggregate in one distributed run
    assert_equal(got, reference(t, keys, MIXED))


@settings(max_examples=examples(2))
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 40))
def test_whole_table_takes_the_same_aggregates(cluster: tmr.LocalCluster, seed: int, rows: int) -> None:
    t = generated(seed, rows, keyed=True)
    got = t.agg(**MIXED, cluster=cluster, sizes=[rows // 3, 0, rows - rows // 3])
    assert len(got) == 1
    assert_equal(got, reference(t, [], MIXED))


def test_groups_of_nulls_one_row_groups_and_the_empty_table(cluster: tmr.LocalCluster) -> None:
    t = tmr.table(
        {
            "k": np.array(["a", "a", "b", None], object),
            "x": np.ma.MaskedArray([1.0, 2.0, 3.0, 4.0], mask=[1, 1, 0, 0]),
            "s": np.array([None, None, "", "日本"], object),
        }
    )
    aggregates: dict[str, Any] = {
        "med": ("x", "median"),
        "q": ("x", ("quantile", 0.5)),
        "d": ("s", "count_distinct"),
        "top": ("x", ("top_k", 2)),
        "lo": ("s", "min"),
        "total": ("x", "sum"),
    }
    got = t.group_by("k").agg(**aggregates, cluster=cluster).to_dict()
    assert got["k"].tolist() == ["a", "b", None]
    assert got["med"].tolist() == [None, 3.0, 4.0]  # a group of nulls: null; a group of one row: its value
    assert got["q"].tolist() == [None, 3.0, 4.0]
    assert got["d"].tolist() == [0, 1, 1]  # COUNT(DISTINCT) of no value is 0
    assert [list(v) for v in got["top"]] == [[], [3.0], [4.0]]
    assert got["lo"].tolist() == [None, "", "日本"]
    assert got["total"].tolist() == [None, 3.0, 4.0]
    empty = t.limit(0)
    assert len(empty.group_by("k").agg(**aggregates, cluster=cluster)) == 0
    whole_table = empty.agg(**aggregates, cluster=cluster)
    whole = whole_table.to_dict()
    assert whole["med"].tolist() == [None]
    assert whole["d"].tolist() == [0]
    assert [list(v) for v in whole["top"]] == [[]]
    assert whole_table.schema["top"].type.name == "list<float64>"
    rows = t.agg(n=("*", "count"), cluster=cluster).to_dict()  # a row count alone reads one column for its rows
    assert rows["n"].tolist() == [4]
    assert tmr.lazy(t).filter(tmr.col("x") > 3.0).agg(n=("*", "count")).collect(cluster=cluster).to_dict()["n"].tolist() == [1]


def test_list_columns_convert_to_pandas_and_keep_their_type(cluster: tmr.LocalCluster) -> None:
    t = tmr.table({"k": np.array([1, 1, 2]), "d": np.array(["2024-01-02", "2024-01-05", "NaT"], "datetime64[D]")})
    got = t.group_by("k").agg(last=("d", ("top_k", 2)), cluster=cluster)
    assert got.schema["last"].type.name == "list<date>"
    assert [v.tolist() for v in got.to_dict()["last"]] == [
        [np.datetime64("2024-01-05").astype(object), np.datetime64("2024-01-02").astype(object)],
        [],
    ]
    frame = got.to_pandas()
    assert frame["last"].dtype == object
    assert frame["last"][0].tolist() == [datetime.date(2024, 1, 5), datetime.date(2024, 1, 2)]  # as pyarrow gives


def test_a_second_equal_aggregation_reuses_its_graphs(cluster: tmr.LocalCluster) -> None:
    t = generated(7, 50, keyed=True)
    aggregates: dict[str, Any] = {"med": ("f64", "median"), "total": ("i64", "sum"), "d": ("s", "count_distinct")}
    first = t.group_by(["s", "k"]).agg(**aggregates, cluster=cluster, sizes=[20, 30]).to_dict()
    traced = _aggregate.TRACES[0]
    again = t.group_by(["s", "k"]).agg(**aggregates, cluster=cluster, sizes=[20, 30]).to_dict()
    assert _aggregate.TRACES[0] == traced  # no new trace, no new graph
    renamed = t.group_by(["s", "k"]).agg(
        mid=("f64", "median"), sum=("i64", "sum"), n=("s", "count_distinct"), cluster=cluster, sizes=[20, 30]
    )
    assert _aggregate.TRACES[0] == traced  # the output names change no graph
    assert python(renamed.to_dict()["mid"]) == python(first["med"])
    for name in first:
        assert python(first[name]) == python(again[name])
    t.group_by(["s"]).agg(**aggregates, cluster=cluster, sizes=[20, 30])  # another spec: its own graphs
    assert _aggregate.TRACES[0] > traced


def test_bad_aggregates_say_how_to_call_them() -> None:
    t = tmr.table({"k": np.array([1, 2]), "s": np.array(["a", "b"]), "x": np.array([1.0, 2.0])})
    with pytest.raises(ValueError, match=r"q must be a number in \[0, 1\], got 1.5"):
        t.group_by("k").agg(p=("x", ("quantile", 1.5)))
    with pytest.raises(ValueError, match="k must be an int ≥ 1, got 0"):
        t.group_by("k").agg(p=("x", ("top_k", 0)))
    with pytest.raises(ValueError, match=r"quantile takes a parameter; pass \('x', \('quantile', 0.9\)\)"):
        t.group_by("k").agg(p=("x", "quantile"))
    with pytest.raises(TypeError, match="median needs a number or bool column, got a string column"):
        t.group_by("k").agg(p=("s", "median"))
    with pytest.raises(ValueError, match="unknown op 'mode'"):
        t.group_by("k").agg(p=("x", "mode"))


def test_string_keys_without_nulls_group_by_one_packed_key_in_the_strings_order(cluster: tmr.LocalCluster) -> None:
    frame = pd.DataFrame(
        {
            "a": ["é", "z", "", "z", "é", "", "zz", "z"],
            "b": ["x", "x", "y", "x", "", "y", "x", "日本"],
            "n": np.arange(8, dtype=np.int64),
        }
    )
    t = tmr.table(frame)
    assert packed([t.column("a"), t.column("b")]).column.values.dtype == np.int8  # type: ignore[union-attr]
    got = t.group_by(["a", "b"]).agg(total=("n", "sum"), rows=("*", "count"), cluster=cluster).to_pandas()
    want = frame.groupby(["a", "b"], as_index=False).agg(total=("n", "sum"), rows=("n", "size"))
    pd.testing.assert_frame_equal(got, want, check_dtype=False)  # code point order: "" < "z" < "zz" < "é"


def test_string_codes_without_pandas_equal_those_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    values = np.array(["é", "z", "", "z", "日本", "", "zz", "a"], dtype=object)
    with_pandas = packed([tmr.table({"a": values}).column("a")])
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError: numpy's np.unique codes them
    without = packed([tmr.table({"a": values.copy()}).column("a")])
    assert with_pandas is not None
    assert without is not None
    assert without.column.values.tolist() == with_pandas.column.values.tolist() == [4, 2, 0, 2, 5, 0, 3, 1]
    assert [d.tolist() for d in without.dictionaries] == [["", "a", "z", "zz", "é", "日本"]]


def test_integer_keys_pack_into_one_key_and_distinct_counts_count_packed_pairs(cluster: tmr.LocalCluster) -> None:
    frame = pd.DataFrame(
        {
            "a": np.array([3, -2, 3, 7, -2, 3, 7], np.int32),
            "v": np.array([5, 1, 5, 9, 2, 6, 2**40], np.int64),
            "s": ["x", "y", "x", "x", "z", "y", "é"],
        }
    )
    t = tmr.table(frame)
    pack = packed([t.column("a"), t.column("v")])
    assert pack is not None
    assert [c.values.tolist() for c in pack.unpacked(pack.column)] == [frame["a"].tolist(), frame["v"].tolist()]
    assert packed([t.column("a")]) is None  # a lone integer column is its own key already
    got = t.group_by(["a", "v"]).agg(rows=("*", "count"), cluster=cluster).to_pandas()
    want = frame.groupby(["a", "v"], as_index=False).agg(rows=("v", "size"))
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    for column in ("v", "s"):  # one keyed run of the packed (a, column) pairs, counted per key on the client
        with tmr.stats() as seen:
            got = t.group_by("a").agg(n=(column, "count_distinct"), m=(column, "n_unique"), cluster=cluster).to_pandas()
        want = frame.groupby("a", as_index=False).agg(n=(column, "nunique"), m=(column, "nunique"))
        pd.testing.assert_frame_equal(got, want, check_dtype=False)
        assert len(seen.runs) == 1


@pytest.mark.usefixtures("steps_on_workers")  # a small table: its group-by in a keyed run all the same
def test_sums_means_and_counts_after_a_filter_sum_in_one_native_pass(cluster: tmr.LocalCluster, tmp_path: Any) -> None:
    """A group-by whose map filters first and whose aggregates are sums, means and counts: a filter that keeps most
    rows passes every row (a dropped one under a key that no row has, whose partials are dropped), one that keeps
    few gathers them, and ``TmrSumsByKey`` sums every column and counts in one pass; a group whose rows were all
    dropped is absent."""
    from tfmapreduce import col
    from tfmapreduce._native.loader import has, kernels

    rng = np.random.default_rng(5)
    n = 3000
    frame = pd.DataFrame(
        {
            "k": rng.choice(np.array(["a", "b", "é"], object), n),
            "x": rng.random(n) * 1e6,
            "i": rng.integers(-50, 50, n).astype(np.int32),
            "day": rng.integers(0, 100, n),
        }
    )
    frame.loc[7, "x"] = np.inf  # in a dropped row below: summed under the dropped rows' key, never seen
    frame.loc[7, "day"] = -1
    t = tmr.lazy(tmr.table(frame))
    for least in (0, 3, 90, 100):  # keeps nearly every row, most, a tenth, none
        q = t.filter((col("day") >= least) & (col("k") != "b")).group_by("k")
        got = q.agg(s=("x", "sum"), m=("x", "mean"), si=("i", "sum"), n=("*", "count")).collect(cluster=cluster).to_pandas()
        kept = frame[(frame.day >= least) & (frame.k != "b")]
        want = kept.groupby("k", as_index=False).agg(s=("x", "sum"), m=("x", "mean"), si=("i", "sum"), n=("x", "size"))
        assert got["k"].tolist() == want["k"].tolist()
        for name in ("s", "m"):  # numpy's float64 sums, as Bincount's (row order), within 1e-12 relative
            np.testing.assert_allclose(got[name].to_numpy(np.float64), want[name].to_numpy(np.float64), rtol=1e-12)
        assert got["si"].tolist() == want["si"].tolist()
        assert got["n"].tolist() == want["n"].tolist()
    if has(kernels(), "tmr_sums_by_key"):
        path = str(tmp_path / "trace.json")
        t.filter(col("day") >= 3).group_by("k").agg(s=("x", "sum"), n=("*", "count")).collect(cluster=cluster, trace=path)
        with open(path, encoding="utf-8") as f:
            ops = {e["args"].get("op") for e in json.load(f)["traceEvents"] if e.get("ph") == "X"}
        assert "TmrSumsByKey" in ops
        assert "Bincount" not in ops
        assert "GatherV2" not in ops  # 97% of the rows kept: the dropped ones given a key of their own, not gathered out
