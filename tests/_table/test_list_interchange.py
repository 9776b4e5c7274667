"""List columns in from pyarrow (``list``, ``large_list``) and pandas (cells of lists, tuples, 1-D numpy arrays) and
out to both, on the client: the round trips give back what went in (ints, floats, bools, strings with unicode and
``""``, dates, timestamps, empty and null lists, a sliced Arrow array, a polars frame), ``to_pandas`` equals pyarrow's
own ``to_pandas``, and a null inside a list or a cell that does not mix is refused with the column and row named."""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import tfmapreduce as tmr

ARROW = pa.table(
    {
        "i": pa.array([[3, -1], [], None, [2**40]], pa.list_(pa.int64())),
        "f": pa.array([[0.5, float("nan")], None, [], [-2.0]], pa.list_(pa.float32())),
        "b": pa.array([[True, False], [False], None, []], pa.list_(pa.bool_())),
        "s": pa.array([["日本", ""], None, [], ["ä", "b", "ä"]], pa.list_(pa.string())),
        "d": pa.array([[datetime.date(1969, 12, 31)], [], None, [datetime.date(2024, 2, 29)]], pa.list_(pa.date32())),
        "t": pa.array([[1_700_000_000_123], None, [], [0, -1]], pa.list_(pa.timestamp("ms"))),
    }
)
"""Every inner type a list column holds, each with an empty and a null list."""


def _cells(series: pd.Series) -> list[Any]:
    """A pandas column of lists as plain Python lists (None a null list), NaN as the string "nan" to compare."""
    return [None if v is None else ["nan" if isinstance(x, float) and x != x else x for x in v.tolist()] for v in series]


def _same(got: pa.Table, want: pa.Table) -> None:
    """Equal Arrow tables: the same schema and values (a NaN equal to a NaN, which ``Table.equals`` does not take)."""
    assert got.schema.equals(want.schema)
    assert repr(got.to_pylist()) == repr(want.to_pylist())


def test_pyarrow_lists_round_trip_and_convert_to_pandas_as_pyarrow_does() -> None:
    t = tmr.table(ARROW)
    assert [f.type.name for f in t.schema.fields] == [
        "list<int64>",
        "list<float32>",
        "list<bool>",
        "list<string>",
        "list<date>",
        "list<timestamp[ms]>",
    ]
    assert all(f.nullable for f in t.schema.fields)
    _same(t.to_arrow(), ARROW)
    got, want = t.to_pandas(), ARROW.to_pandas()
    for name in ARROW.column_names:
        assert _cells(got[name]) == _cells(want[name]), name
        assert [None if v is None else v.dtype for v in got[name]] == [None if v is None else v.dtype for v in want[name]]
    _same(tmr.table(want).to_arrow(), ARROW)  # pyarrow's pandas frame reads back as the same lists


def test_large_lists_sliced_and_chunked_arrays_read_as_lists() -> None:
    chunks = pa.chunked_array(
        [pa.array([["x"], None], pa.large_list(pa.large_string())), pa.array([["y", "z"], []], pa.large_list(pa.large_string()))]
    )
    t = tmr.table(pa.table({"s": chunks}).slice(1))
    assert t.schema["s"].type.name == "list<string>"
    assert _cells(t.to_pandas()["s"]) == [None, ["y", "z"], []]
    assert t.to_arrow().column("s").type == pa.list_(pa.string())
    whole = pa.array([[1], [2, 3], None, [4]]).slice(1, 2)  # offsets not from 0
    assert _cells(tmr.table(pa.record_batch({"x": whole})).to_pandas()["x"]) == [[2, 3], None]


def test_pandas_cells_round_trip() -> None:
    frame = pd.DataFrame(
        {
            "i": pd.Series([[1, 2], (), None, np.array([7], np.int64)], dtype=object),
            "f": pd.Series([np.array([0.5, np.nan]), np.nan, [1, 2.5], []], dtype=object),
            "s": pd.Series([["é", ""], [], ("日本",), None], dtype=object),
        }
    )
    t = tmr.table(frame)
    assert [f.type.name for f in t.schema.fields] == ["list<int64>", "list<float64>", "list<string>"]
    back = t.to_pandas()
    assert _cells(back["i"]) == [[1, 2], [], None, [7]]
    assert _cells(back["f"]) == [[0.5, "nan"], None, [1.0, 2.5], []]  # NaN in a list a value; a NaN cell a null list
    assert _cells(back["s"]) == [["é", ""], [], ["日本"], None]
    pd.testing.assert_frame_equal(tmr.table(back).to_pandas(), back)
    kept = ["i", "s"]  # pyarrow's from_pandas reads as this does, but for a NaN inside a list (a null there)
    _same(pa.Table.from_pandas(back[kept], preserve_index=False), t.select(kept).to_arrow())
    arrow_backed = pd.DataFrame({"i": pd.Series([[1, 2], [], None, [7]], dtype=pd.ArrowDtype(pa.list_(pa.int64())))})
    assert _cells(tmr.table(arrow_backed).to_pandas()["i"]) == _cells(back["i"])  # dtype_backend="pyarrow"
    numpy_lists = tmr.table({"x": t.to_dict()["i"]})  # to_dict's object array reads back too
    assert numpy_lists.to_arrow().column("x").equals(t.to_arrow().column("i"))


def test_a_polars_frame_reads_through_arrow() -> None:
    pl = pytest.importorskip("polars")
    frame = pl.DataFrame({"words": [["日本", ""], None, []], "n": [1, None, 3]})
    t = tmr.table(frame)
    assert [str(f) for f in t.schema.fields] == ["words: list<string> (nullable)", "n: int64 (nullable)"]
    assert pl.from_arrow(t.to_arrow()).equals(frame)


@pytest.mark.parametrize(
    ("data", "row"),
    [
        (pa.table({"x": pa.array([[1], [], None, [2, None]], pa.list_(pa.int64()))}), 3),
        (pd.DataFrame({"x": pd.Series([[1.0], None, [None, 2.0]], dtype=object)}), 2),
        (pd.DataFrame({"x": pd.Series([["a"], [pd.NA]], dtype=object)}), 1),
    ],
)
def test_a_null_inside_a_list_is_refused_naming_the_row(data: Any, row: int) -> None:
    with pytest.raises(ValueError, match=rf"column 'x' holds a null inside a list \(row {row}: .*drop or fill them"):
        tmr.table(data)


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        ([[1], None, [2], ["a"]], r"column 'x': the list of row 3 \(\['a'\]\) does not mix"),
        ([[1], "ab"], r"column 'x' mixes lists with a str \(row 1: 'ab'\)"),
        ([[1], np.zeros((2, 2))], r"column 'x' holds a 2-D array \(row 1"),
        ([[[1]], [[2]]], r"column 'x' is a list of lists"),
        ([[], None], r"column 'x' is a list<item: null> column"),
        ([1, 2], r"column 'x' holds int values \(row 0: 1\)"),
    ],
)
def test_cells_that_make_no_list_column_are_refused(cells: list[Any], message: str) -> None:
    column = np.empty(len(cells), object)
    for i, cell in enumerate(cells):
        column[i] = cell
    with pytest.raises(TypeError, match=message):
        tmr.table(pd.DataFrame({"x": pd.Series(column, dtype=object)}))


def test_lists_of_one_length_convert_to_one_array_a_row() -> None:
    """Lists all of one length stay one list a row (numpy would make them a matrix), with their own copy."""
    t = tmr.table(
        pa.table({"x": pa.array([[1, 2], [3, 4], [5, 6]]), "t": pa.array([[0], [1], [2]], pa.list_(pa.timestamp("s")))})
    )
    got = t.to_pandas()
    assert got["x"].shape == (3,)
    assert [v.tolist() for v in got["x"]] == [[1, 2], [3, 4], [5, 6]]
    assert [v.dtype for v in got["t"]] == [np.dtype("datetime64[s]")] * 3
    assert _cells(got["t"]) == _cells(pa.table({"t": t.to_arrow().column("t")}).to_pandas()["t"])
    got["x"][0][0] = 99  # the user's copy, not the table's lists
    assert t.to_pandas()["x"][0].tolist() == [1, 2]
    assert t.to_dict()["x"].shape == (3,)
