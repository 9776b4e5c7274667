"""read_csv with dtypes= by column name: string and int64 columns as the keys of keyed jobs and joins, against pandas."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tfmapreduce as tmr


@pytest.mark.slow
def test_string_and_int64_columns_named_in_dtypes_key_keyed_jobs_and_joins(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    n = 300
    visits = pd.DataFrame(
        {
            "url": [f"site{i}.example/{'a,b' if i % 5 == 0 else 'p'}" for i in rng.integers(0, 20, n)],
            "revenue": rng.random(n).round(3),
            "code": rng.integers(-(2**40), 2**40, n) // 2**36,
        }
    )
    for i in range(3):
        visits.iloc[i * 100 : (i + 1) * 100].to_csv(tmp_path / f"uv{i}.csv", index=False)
    rankings = pd.DataFrame({"url": sorted(set(visits.url))[::2], "rank": np.arange(10) * 3})
    rankings.to_csv(tmp_path / "rankings.csv", index=False)

    table = tmr.read_csv(tmp_path / "uv*.csv", dtypes={"url": str, "revenue": float, "code": "int64"})
    counts = tmr.count_by_key(table, keys="code", cluster=cluster).to_dict()
    assert counts == visits.code.value_counts().to_dict()  # an int64 column as the keys: exact

    ranks = tmr.read_csv(tmp_path / "rankings.csv", dtypes={"url": str, "rank": "int64"})
    with (
        tmr.sum_by_key(table, keys="url", values="revenue", cluster=cluster, resident=True) as left,
        tmr.max_by_key(ranks, keys="url", values="rank", cluster=cluster, resident=True) as right,
    ):
        revenue = left.gather().to_dict()
        joined = tmr.join(left, right).to_pandas()
    assert revenue.keys() == set(visits.url)  # str keys, quoted delimiters and all
    expected = visits.groupby("url").revenue.sum()
    assert all(np.isclose(revenue[k], expected[k]) for k in expected.index)
    reference = expected.reset_index().merge(rankings, on="url")
    got = joined.sort_values("key").reset_index(drop=True)
    assert list(got.key) == sorted(reference.url)  # a join of resident results gives str keys, as given
    np.testing.assert_allclose(got.iloc[:, 1], reference.sort_values("url").revenue)
    np.testing.assert_array_equal(got.iloc[:, 2], reference.sort_values("url")["rank"])

    with pytest.raises(
        tmr.InputError, match=r"dtypes= names column\(s\) \['price'\], which .*uv0.csv does not have; its header names"
    ):
        tmr.sum(tmr.read_csv(tmp_path / "uv0.csv", dtypes={"price": float}), cluster=cluster)
    with pytest.raises(TypeError, match="dtypes as a dict must map column names to dtypes"):
        tmr.read_csv(tmp_path / "uv0.csv", dtypes={0: float})


def test_a_partial_dtypes_dict_leaves_the_key_column_inferred(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    """dtypes= naming only a value column: the key column is inferred as without dtypes= (int64 or str), not made a
    float32 column and refused (issue 38)."""
    path = tmp_path / "t.csv"
    pd.DataFrame({"k": [1, 1, 2], "v": [2, 3, 5], "c": ["x", "y", "x"]}).to_csv(path, index=False)
    ints = tmr.sum_by_key(tmr.read_csv(str(path), dtypes={"v": "int64"}), keys="k", values="v", cluster=cluster)
    assert ints.to_dict() == {1: 5, 2: 5}
    texts = tmr.sum_by_key(tmr.read_csv(str(path), dtypes={"v": "int64"}), keys="c", values="v", cluster=cluster)
    assert texts.to_dict() == {"x": 7, "y": 3}
    with pytest.raises(tmr.InputError, match=r"keys='k' is a float32 column"):  # named a float: still refused
        tmr.sum_by_key(tmr.read_csv(str(path), dtypes={"k": "float32"}), keys="k", values="v", cluster=cluster)


@pytest.mark.parametrize("dtypes", ["foo", {"v": "foo"}, ["int64", "foo", "str"]])
def test_read_csv_names_dtypes_for_a_dtype_numpy_does_not_know(dtypes: object) -> None:
    with pytest.raises(TypeError, match=r"read_csv: dtypes= must hold dtypes .*got 'foo'; e\.g\."):
        tmr.read_csv("t.csv", dtypes=dtypes)


def test_a_partial_dtypes_dict_reads_the_other_columns_as_their_first_line_holds(
    cluster: tmr.LocalCluster, tmp_path: Path
) -> None:
    """Issue 38 item 16: the columns a dtypes= dict leaves out are no longer float32 silently: an integer is int64
    (exact beyond float32's 2**24), a number float64, and text is refused naming dtypes= and columns=."""
    path = tmp_path / "t.csv"
    big = 2**40 + 1
    path.write_text(f"a,b,c\n1,{big},x\n2,{big + 2},y\n")
    matrix = tmr.read_csv(str(path), columns=["a", "b"], dtypes={"a": "int64"})
    assert tmr.max(matrix, axis=0, cluster=cluster).tolist() == [2, big + 2]
    with pytest.raises(tmr.InputError, match=r"column\(s\) \['c'\] are strings \(dtypes=\).*columns="):
        tmr.sum(tmr.read_csv(str(path), dtypes={"a": "int64"}), cluster=cluster)
