"""CSV through tables on real workers: files written by pandas ``to_csv`` and by ``tmr.write_csv`` (nulls, unicode
and empty strings, quoted delimiters, quotes and line breaks, ints, floats, dates, timestamps) read back by
``tmr.scan_csv`` equal to the data written and to ``pandas.read_csv`` (an empty field null); files larger than the
split size (several byte ranges per file, text included) and several files; bad input named by file, line, column."""

from __future__ import annotations

import csv
import datetime
import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import tfmapreduce as tmr
from tfmapreduce._io.files.csv_scan import cuts
from tfmapreduce._native.loader import has, kernels
from tfmapreduce._table import csv as table_csv

TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\x00"), max_size=6)
WORDS = st.one_of(st.none(), st.just(""), st.sampled_from([",", '"', "\n", 'a,"b"\nc', "é", "日本"]), TEXT)
ROW = st.tuples(
    st.one_of(st.none(), st.integers(-(2**62), 2**62)),
    st.one_of(st.none(), st.floats(allow_nan=False, width=64)),
    WORDS.map(lambda s: s if not s else "x" + s),  # never a number or a date: stays a string column
    st.one_of(st.none(), st.dates(datetime.date(1800, 1, 1), datetime.date(2200, 12, 31))),
    st.one_of(st.none(), st.datetimes(datetime.datetime(1900, 1, 1), datetime.datetime(2200, 1, 1))),
)


def frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    i, f, s, d, t = zip(*rows, strict=True)
    return pd.DataFrame(
        {
            "i": pd.array(i, dtype="Int64"),
            "f": np.array([np.nan if v is None else v for v in f]),
            "s": np.array(s, dtype=object),
            "d": pd.to_datetime(pd.Series(d, dtype=object)).astype("datetime64[s]"),
            "t": pd.to_datetime(pd.Series(t, dtype=object)).astype("datetime64[us]"),
        }
    )


def plain(series: pd.Series, name: str) -> list[Any]:
    """A column's values as Python values, None for a null or an empty string; dates and times as Timestamps."""
    out: list[Any] = []
    for v in series.astype(object).tolist():
        if v is None or v is pd.NA or v is pd.NaT or v == "" or (isinstance(v, float) and math.isnan(v)):
            out.append(None)
        elif name in "dt":
            out.append(pd.Timestamp(v))
        else:
            out.append(v.item() if isinstance(v, np.generic) else v)
    return out


def assert_equal(ours: pd.DataFrame, theirs: pd.DataFrame) -> None:
    assert list(ours.columns) == list(theirs.columns)
    for name in theirs.columns:
        assert plain(ours[name], name) == plain(theirs[name], name), name


@settings(max_examples=5, deadline=None, phases=[Phase.explicit, Phase.generate])  # a shrink reruns the scan
@given(rows=st.lists(ROW, min_size=1, max_size=30), split=st.sampled_from([37, 1 << 24]))
def test_pandas_csv_reads_back(
    cluster: tmr.LocalCluster, tmp_path_factory: pytest.TempPathFactory, rows: list[Any], split: int
) -> None:
    """In one range or in ranges of about 37 bytes (a range boundary near every record)."""
    path = tmp_path_factory.mktemp("csv") / "a.csv"
    data = frame(rows)
    data.to_csv(path, index=False)
    ours = tmr.scan_csv(path, split_bytes=split, cluster=cluster)
    assert len(ours) == len(rows)
    assert_equal(ours.to_pandas(), data)
    theirs = pd.read_csv(path, keep_default_na=False, na_values=[""], dtype={"i": "Int64", "s": object})
    assert_equal(ours.to_pandas(), theirs)


NULLS = st.sampled_from(["NA", "null", "N/A", "-"])


@settings(max_examples=5, deadline=None, phases=[Phase.explicit, Phase.generate])
@given(
    rows=st.lists(ROW.map(lambda r: r[:3]), min_size=1, max_size=20),
    spelling=NULLS,
    others=st.lists(NULLS, max_size=2),
    rename=st.booleans(),
    split=st.sampled_from([29, 1 << 24]),
)
def test_headerless_files_and_null_spellings_read_as_pandas_reads_them(
    cluster: tmr.LocalCluster,
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[Any],
    spelling: str,
    others: list[str],
    rename: bool,
    split: int,
) -> None:
    """has_header=False names the columns column_1, ... (new_columns= renames the first ones); a null spelling is null
    in every column type, as pandas.read_csv(header=None, na_values=...) reads it."""
    path = tmp_path_factory.mktemp("csv") / "a.csv"
    i, f, s = zip(*rows, strict=True)
    pd.DataFrame({"i": pd.array(i, dtype="Int64"), "f": np.array(f, dtype=object), "s": np.array(s, dtype=object)}).to_csv(
        path, index=False, header=False, na_rep=spelling
    )
    nulls = [spelling, *others]
    ours = tmr.scan_csv(
        path, has_header=False, new_columns=["i", "f"] if rename else None, null_values=nulls, split_bytes=split, cluster=cluster
    ).to_pandas()
    theirs = pd.read_csv(path, header=None, keep_default_na=False, na_values=["", *nulls], dtype={0: "Int64", 2: object})
    theirs.columns = ["i", "f", "column_3"] if rename else ["column_1", "column_2", "column_3"]
    assert len(ours) == len(rows)
    assert_equal(ours, theirs)


def test_stock_ops_read_as_the_kernel_does(cluster: tmr.LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a task lacks the native kernels the stock ops read the same table (every column type, nulls spelled)."""
    path = tmp_path / "a.csv"
    path.write_bytes(
        b'\xef\xbb\xbf1,"a,""b""\r\nc",2.5,2024-02-29,2024-01-02 03:04:05.25,TRUE,7\r\n'
        b"NA,,nan,null,2024-01-02T03:04,false,NA\n\n-3,null,-1e3,1999-12-31,,,-128\n"
    )
    options: dict[str, Any] = dict(has_header=False, null_values=["NA", "null"], dtypes={"column_7": "int8"}, cluster=cluster)
    if has(kernels(), "tmr_scan_csv"):  # built here (a compiler): the session cluster's tasks have it too
        assert table_csv._native({"cluster": cluster})
    native = tmr.scan_csv(path, **options)
    monkeypatch.setattr(table_csv, "_native", lambda options: False)
    stock = tmr.scan_csv(path, **options)
    assert [native.schema[c].type.name for c in native.columns] == [
        "int64", "string", "float64", "date", "timestamp[us]", "bool", "int8"
    ]  # fmt: skip
    assert native.to_pandas().equals(stock.to_pandas())
    got = native.to_dict()
    assert got["column_1"].tolist() == [1, None, -3]
    assert got["column_2"].tolist() == ['a,"b"\r\nc', None, None]
    assert got["column_4"].tolist() == [np.datetime64("2024-02-29"), None, np.datetime64("1999-12-31")]
    assert got["column_7"].tolist() == [7, None, -128]
    path.write_text("1,2\n3,4\nfive,6\n")
    with pytest.raises(ValueError, match=r"a\.csv line 3, column 'column_1': 'five' is not of the column's type, int64"):
        tmr.scan_csv(path, has_header=False, infer_rows=2, cluster=cluster)


def test_written_csv_with_line_breaks_reads_back(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    """Issue 38 item 6: write_csv quotes a key holding a line break; its output reads back."""
    keys = np.array(["new\nline", 'say "hi"', "a,b", "日本", "plain", "two\n\nbreaks"] * 50, dtype=object)
    numbers = np.arange(len(keys), dtype=np.int64) - 100
    halves = numbers * 0.5
    written = tmr.write_csv((keys, numbers, halves), tmp_path / "out", columns=["k", "n", "h"], cluster=cluster)
    ours = tmr.scan_csv(written.parts, cluster=cluster, split_bytes=256).to_dict()
    assert sorted(zip(ours["k"].tolist(), ours["n"].tolist(), ours["h"].tolist(), strict=True)) == sorted(
        zip(keys.tolist(), numbers.tolist(), halves.tolist(), strict=True)
    )
    assert tmr.scan_csv(tmp_path / "out", cluster=cluster).schema["n"].type.name == "int64"


def test_files_over_the_split_size(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    frames = []
    for part in range(3):
        n = 1500
        words = np.array(["", "a", "b,c", 'q"q', "line\nbreak", "é日"], dtype=object)[rng.integers(0, 6, n)]
        data = pd.DataFrame(
            {
                "id": np.arange(n) + part * n,
                "w": ["x" + w if w else None for w in words],
                "v": np.round(rng.normal(size=n), 3),
                "day": (np.datetime64("2020-02-27") + rng.integers(0, 5, n)).astype("datetime64[s]"),
            }
        )
        data.to_csv(tmp_path / f"p{part}.csv", index=False)
        frames.append(data)
    size = (tmp_path / "p0.csv").stat().st_size
    assert len(cuts(str(tmp_path / "p0.csv"), size, 2048)) > 10  # several ranges a file
    ours = tmr.scan_csv(tmp_path, split_bytes=2048, cluster=cluster, sizes=3)
    assert [ours.schema[c].type.name for c in ours.columns] == ["int64", "string", "float64", "date"]
    assert_equal(ours.to_pandas().rename(columns={"day": "d"}), pd.concat(frames, ignore_index=True).rename(columns={"day": "d"}))


def test_cuts_start_at_records(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    rows = [["k", "v"], *([f'x"{i}"\n,y' * (i % 3), str(i)] for i in range(300))]
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    data = path.read_bytes()
    for split in (1, 7, 50, 1000):
        pieces = [list(csv.reader(io.StringIO(data[a:b].decode(), newline=""))) for a, b in cuts(str(path), len(data), split)]
        assert [r for p in pieces for r in p] == rows


def test_dtypes_override_only_the_columns_named(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("zip,n,when,small\n007,1,2024-01-02,3\n010,,2024-01-03 04:05:06.7,\n")
    ours = tmr.scan_csv(tmp_path / "a.csv", dtypes={"zip": "string", "small": "int8", "when": "timestamp[ms]"}, cluster=cluster)
    assert {c: ours.schema[c].type.name for c in ours.columns} == {
        "zip": "string", "n": "int64", "when": "timestamp[ms]", "small": "int8",
    }  # fmt: skip
    got = ours.to_dict()
    assert got["zip"].tolist() == ["007", "010"]
    assert got["n"].tolist() == [1, None]
    assert got["when"].tolist() == [np.datetime64("2024-01-02T00:00:00.000"), np.datetime64("2024-01-03T04:05:06.700")]
    assert got["small"].tolist() == [3, None]


def test_a_value_that_contradicts_its_inferred_type_names_file_line_and_column(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("x,y\n1,2\n3,4\n5,6\nfive,7\n")
    with pytest.raises(ValueError, match=r"a\.csv line 5, column 'x': 'five' is not of the column's type, int64.*dtypes=\{'x'"):
        tmr.scan_csv(path, infer_rows=2, cluster=cluster)
    assert tmr.scan_csv(path, dtypes={"x": "string"}, cluster=cluster).to_dict()["x"].tolist() == ["1", "3", "5", "five"]
    path.write_text('x,y\n2024-01-01,"two\nlines"\n2024-02-29,4\n2024-02-30,5\n')
    with pytest.raises(ValueError, match=r"line 5, column 'x': '2024-02-30'"):
        tmr.scan_csv(path, dtypes={"x": "date"}, cluster=cluster)
    path.write_text("x,y\n1,2\n3,4,5\n")
    with pytest.raises(ValueError, match=r"line 3 has 3 fields where the header names 2"):
        tmr.scan_csv(path, cluster=cluster)
    path.write_text('x,y\n1,2\n3,"4\n5,6\n')
    with pytest.raises(ValueError, match=r"line 3 is not a CSV record"):
        tmr.scan_csv(path, cluster=cluster)
    path.write_text("x,y\n300,2\n")
    with pytest.raises(ValueError, match=r"line 2, column 'x': '300' is not of the column's type, int8 \(the type dtypes= gives"):
        tmr.scan_csv(path, dtypes={"x": "int8"}, cluster=cluster)


def test_bad_arguments_and_files(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("price,n\n1,2\n")
    with pytest.raises(KeyError, match=r"dtypes= names column 'prices'.*did you mean 'price'"):
        tmr.scan_csv(tmp_path / "a.csv", dtypes={"prices": "float32"})
    with pytest.raises(TypeError, match=r"dtypes=\{'price': 'decimal'\} is not a type"):
        tmr.scan_csv(tmp_path / "a.csv", dtypes={"price": "decimal"})
    with pytest.raises(TypeError, match=r"dtypes= maps column names to types"):
        tmr.scan_csv(tmp_path / "a.csv", dtypes=["float32"])  # type: ignore[arg-type]
    (tmp_path / "b.csv").write_text("price,m\n1,2\n")
    with pytest.raises(ValueError, match=r"b\.csv has the columns \['price', 'm'\]"):
        tmr.scan_csv(tmp_path)
    (tmp_path / "b.csv").write_text("")
    with pytest.raises(ValueError, match=r"b\.csv is empty"):
        tmr.scan_csv(tmp_path)
    with pytest.raises(FileNotFoundError, match="no file"):
        tmr.scan_csv(tmp_path / "nothing.csv")
    with pytest.raises(ValueError, match=r"new_columns= gives 3 names, the files have 2 columns"):
        tmr.scan_csv(tmp_path / "a.csv", new_columns=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"new_columns= makes the columns \['n', 'n'\]"):
        tmr.scan_csv(tmp_path / "a.csv", new_columns=["n"])
    with pytest.raises(TypeError, match=r"null_values= is a string or a list of strings.*got 0"):
        tmr.scan_csv(tmp_path / "a.csv", null_values=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"has_header= is True .* or False, got 'no'"):
        tmr.scan_csv(tmp_path / "a.csv", has_header="no")  # type: ignore[arg-type]
    with pytest.raises(KeyError, match=r"dtypes= names column 'price'.*they have \['column_1', 'column_2'\]"):
        tmr.scan_csv(tmp_path / "a.csv", has_header=False, dtypes={"price": "float32"})


def test_a_header_alone_gives_no_rows(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("a,b\n")
    ours = tmr.scan_csv(tmp_path / "a.csv", dtypes={"b": "date"}, cluster=cluster)
    assert (len(ours), ours.schema["a"].type.name, ours.schema["b"].type.name) == (0, "string", "date")


def test_crlf_lines_a_bom_and_blank_lines(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_bytes(b'\xef\xbb\xbfk,v\r\n"a\r\nb",1\r\n\r\nc,\r\n"",3\r\nd,4')
    ours = tmr.scan_csv(path, split_bytes=8, cluster=cluster).to_dict()
    assert ours["k"].tolist() == ["a\r\nb", "c", None, "d"]
    assert ours["v"].tolist() == [1, None, 3, 4]
    theirs = pd.read_csv(path, keep_default_na=False, na_values=[""], encoding="utf-8-sig")
    assert plain(theirs["k"], "k") == ["a\r\nb", "c", None, "d"]


def test_a_resident_scan_stays_on_the_workers(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    data = pd.DataFrame({"id": np.arange(40), "w": ["a", None, "é日", "b,c"] * 10, "v": np.arange(40) / 4})
    data.to_csv(tmp_path / "p.csv", index=False)
    with tmr.stats() as runs, tmr.scan_csv(tmp_path, split_bytes=128, resident=True, cluster=cluster) as r:
        assert isinstance(r, tmr.ResidentTable)
        assert len(r.shards) > 1  # a shard a split, in file then line order
        assert all(run.bytes_sent == 0 for run in runs.runs)
        got = r.collect()
    eager = tmr.scan_csv(tmp_path, split_bytes=128, cluster=cluster)
    assert r.schema == eager.schema  # only "w" holds a null: the others' validity dropped on the workers
    pd.testing.assert_frame_equal(got.to_pandas(), eager.to_pandas())
    assert_equal(got.to_pandas(), data)
    (tmp_path / "p.csv").write_text("id,w\n")
    with tmr.scan_csv(tmp_path / "p.csv", resident=True, cluster=cluster) as none:
        assert len(none) == 0
        assert none.columns == ("id", "w")
