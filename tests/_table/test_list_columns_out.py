"""List columns out of a table's row function, on real workers: ``with_columns`` (a client table's and a resident
table's) and a resident ``map`` returning a ``tf.RaggedTensor`` give a list column, equal to pandas' ``str.split``,
with rows of other lengths on each shard, an empty shard, empty strings, unicode and null texts (a null list where
the function pairs the column with a validity), and the word count of its explode equal to pandas'."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfmapreduce as tmr

TEXTS = ["a b a", None, "", "日本 語 a", "b", "c  d e f g", None, "語"]
"""Texts of 0 to 5 words; ``sizes=[3, 0, 5]`` puts lists of at most 3 words on one shard and 5 on another."""


def _split(rows: Any) -> dict[str, Any]:
    return {"words": (tf.strings.split(rows["text"]), rows.valid["text"]), "n": rows["k"] * 2}


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"k": np.arange(len(TEXTS)), "text": pd.Series(TEXTS, dtype=object)})


def _lists(series: pd.Series) -> list[Any]:
    return [None if v is None else list(v) for v in series]


def test_a_ragged_new_column_is_a_list_column_as_pandas_str_split_gives(cluster: tmr.LocalCluster) -> None:
    frame = _frame()
    want = frame.text.str.split()
    t = tmr.table(frame)
    client = t.with_columns(_split, cluster=cluster, sizes=[3, 0, 5])
    got = client.to_pandas()
    assert _lists(got["words"]) == _lists(want)
    assert got["n"].tolist() == (frame.k * 2).tolist()
    assert client.schema["words"].type.name == "list<string>"
    assert client.schema["words"].nullable
    with pytest.raises(TypeError, match=r"agg: aggregates column 'words'.*explode it first"):
        client.group_by("k").agg(n=("words", "median"), cluster=cluster)
    plain = t.with_columns(lambda rows: {"words": tf.strings.split(rows["text"])}, cluster=cluster)
    assert _lists(plain.to_pandas()["words"]) == [v or [] for v in _lists(want)]  # unpaired: a null text's list is empty
    assert not plain.schema["words"].nullable
    with tmr.scatter(t, cluster=cluster, sizes=[3, 0, 5]) as r, r.with_columns(_split) as kept:
        assert kept.shards == (3, 0, 5)
        assert _lists(kept.to_pandas()["words"]) == _lists(want)
        assert kept.schema == client.schema


def test_a_list_column_made_on_the_workers_explodes_into_the_word_count_pandas_gives(cluster: tmr.LocalCluster) -> None:
    frame = _frame()
    want = frame.assign(words=frame.text.str.split()).explode("words").dropna().groupby("words").size()

    def exploded(rows: Any) -> dict[str, Any]:
        return {"word": rows["words"].flat_values, "k": tf.repeat(rows["k"], rows["words"].row_lengths())}

    with (
        tmr.scatter(tmr.table(frame), cluster=cluster, sizes=[3, 0, 5]) as r,
        r.with_columns(_split) as split,
        split.map(exploded) as words,
    ):
        counts = words.group_by("word").agg(n=("*", "count")).to_pandas()
        assert dict(zip(counts["word"], counts["n"], strict=True)) == want.to_dict()
        assert words.to_pandas()["k"].tolist() == frame.assign(w=frame.text.str.split()).explode("w").dropna()["k"].tolist()


def test_numbers_lists_and_nulls_in_new_columns_and_a_table_of_no_row(cluster: tmr.LocalCluster) -> None:
    t = tmr.table({"x": np.ma.MaskedArray([3, 0, 2, 5], mask=[False, False, True, False])})

    def ranged(rows: Any) -> dict[str, Any]:
        return {"r": (tf.ragged.range(rows["x"]), rows.valid["x"]), "y": (rows["x"] + 1, rows["x"] > 2)}

    got = t.with_columns(ranged, cluster=cluster, sizes=[1, 3]).to_pandas()
    assert _lists(got["r"]) == [[0, 1, 2], [], None, [0, 1, 2, 3, 4]]
    assert got["y"].isna().tolist() == [False, True, True, False]
    assert str(got["y"].dtype) == "Int64"
    assert got["y"].dropna().tolist() == [4, 6]
    empty = tmr.table({"x": np.zeros(0, np.int64)}).with_columns(ranged, cluster=cluster)
    assert len(empty) == 0
    assert empty.schema["r"].type.name == "list<int64>"


def test_a_column_of_another_form_is_an_error_that_names_it(cluster: tmr.LocalCluster) -> None:
    t = tmr.table({"s": np.array(["a b", "c"])})
    with pytest.raises(tmr.MapFunctionError, match=r"'w'.*\[rows, None\].*merge_dims"):
        t.with_columns(lambda rows: {"w": tf.strings.split(tf.strings.split(rows["s"]), "a")}, cluster=cluster)
    with pytest.raises(tmr.MapFunctionError, match=r"'w'.*pair \(values, valid\)"):
        t.with_columns(lambda rows: {"w": (rows["s"],)}, cluster=cluster)
    with pytest.raises(tmr.MapFunctionError, match=r"'w'.*validity must be one bool a row"):
        t.with_columns(lambda rows: {"w": (rows["s"], rows["s"])}, cluster=cluster)
