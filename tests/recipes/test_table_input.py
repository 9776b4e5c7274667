"""Every by-key recipe takes a ``tmr.Table`` with ``keys=``/``values=`` column names, alike, and gives what it gives
for the columns' arrays (rows of a null value left out; a list column's elements, as pandas' explode) — on real
workers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tfmapreduce as tmr

KEYS = np.array(["a", "é", "a", "", "é", "a", "b"], dtype=object)
VALUES = np.array([3.0, 1.5, -2.0, 7.0, 0.5, 4.0, 9.0])
NULL = np.array([0, 0, 0, 0, 1, 0, 1], bool)
"""Rows whose value is null in the table (left out of every aggregate)."""

RECIPES: dict[str, Callable[..., Any]] = {
    "sum": tmr.sum_by_key,
    "mean": tmr.mean_by_key,
    "min": tmr.min_by_key,
    "max": tmr.max_by_key,
    "variance": tmr.variance_by_key,
    "std": tmr.std_by_key,
    "median": tmr.median_by_key,
    "quantile": lambda k, v=None, **o: tmr.quantile_by_key(k, v, 0.25, **o),
    "top_k": lambda k, v=None, **o: tmr.top_k_by_key(k, v, 2, **o),
    "count_distinct": tmr.count_distinct_by_key,
    "collect": tmr.collect_by_key,
}


def _plain(result: Any) -> dict[Any, Any]:
    return {k: np.asarray(v).tolist() for k, v in result.to_dict().items()}


@pytest.mark.parametrize("name", list(RECIPES))
def test_a_table_gives_what_its_columns_give(cluster: tmr.LocalCluster, name: str) -> None:
    t = tmr.table({"k": KEYS, "v": np.ma.MaskedArray(VALUES, mask=NULL), "w": VALUES})
    recipe = RECIPES[name]
    got = recipe(t, keys="k", values="v", cluster=cluster)
    assert _plain(got) == _plain(recipe(KEYS[~NULL], VALUES[~NULL], cluster=cluster))
    full = recipe(t, keys="k", values="w", cluster=cluster, sizes=[3, 0, 4])
    assert _plain(full) == _plain(recipe(KEYS, VALUES, cluster=cluster, sizes=[3, 0, 4]))


def test_keys_alone_and_integer_and_several_value_columns(cluster: tmr.LocalCluster) -> None:
    t = tmr.table({"k": KEYS, "n": np.array([1, 2, 1, 3, 2, 1, 3], np.int16), "w": VALUES, "x": VALUES * 2})
    assert tmr.count_by_key(t, keys="k", cluster=cluster).to_dict() == {"a": 3, "é": 2, "": 1, "b": 1}
    assert tmr.sum_by_key(t, keys="n", values="w", cluster=cluster).to_dict() == {1: 5.0, 2: 2.0, 3: 16.0}
    both = tmr.sum_by_key(t, keys="k", values=["w", "x"], cluster=cluster)
    assert both["a"].tolist() == [5.0, 10.0]


def test_a_table_without_column_names_or_with_null_keys_is_refused(cluster: tmr.LocalCluster) -> None:
    t = tmr.table({"k": np.array(["a", None], object), "v": np.array([1.0, 2.0]), "key": np.array([1, 2])})
    with pytest.raises(TypeError, match=r"name the Table's key column with keys= and its value column\(s\) with values="):
        tmr.sum_by_key(t, cluster=cluster)
    with pytest.raises(TypeError, match="the first argument is a Table: pass it alone"):
        tmr.mean_by_key(t, np.array([1.0, 2.0]), keys="k", cluster=cluster)
    with pytest.raises(TypeError, match="the key column 'k' holds nulls"):
        tmr.median_by_key(t, keys="k", values="v", cluster=cluster)
    with pytest.raises(KeyError, match="did you mean 'key'"):
        tmr.top_k_by_key(t, keys="keys", values="v", k=1, cluster=cluster)


@pytest.mark.parametrize("name", ["sum", "median", "count_distinct"])
def test_a_list_column_gives_its_elements_as_pandas_explode_does(cluster: tmr.LocalCluster, name: str) -> None:
    t = tmr.table(
        {"k": np.array([1, 1, 2, 3, 1, 2]), "x": np.ma.MaskedArray([5.0, 7.0, 1.0, 2.0, 6.0, 0.0], mask=[0, 0, 1, 0, 0, 1])}
    )
    tops = t.group_by("k").agg(top=("x", ("top_k", 2)), cluster=cluster)  # 1: [7, 6]; 2: [] (no value); 3: [2]
    lists = tmr.table({"g": np.array(["a", "b", "a", "c", "d"], object), "i": np.array([1, 2, 3, 9, 1])}).join(
        tops, left_on="i", right_on="k", how="left", cluster=cluster
    )  # b: an empty list; c: a null list (no k 9)
    got = _plain(RECIPES[name](lists, keys="g", values="top", cluster=cluster, sizes=[2, 0, 3]))
    exploded = lists.to_pandas().explode("top").dropna(subset=["top"]).astype({"top": float})
    want = exploded.groupby("g")["top"].agg({"count_distinct": "nunique"}.get(name, name))
    assert got == {g: np.asarray(v).tolist() for g, v in want.items()}
    assert set(got) == {"a", "d"}  # b and c have no element
    with pytest.raises(TypeError, match=r"sum_by_key: key column 'top', a list column .*group by the columns"):
        tmr.sum_by_key(lists, keys="top", values="i", cluster=cluster)
    with pytest.raises(TypeError, match=r"sum_by_key: value column 'top', a list column"):
        tmr.sum_by_key(lists, keys="g", values=["i", "top"], cluster=cluster)
