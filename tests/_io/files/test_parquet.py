"""Planning a Parquet scan on the client (footers only): row groups as splits, statistics that skip row groups, and
the errors (a file whose schema differs, unknown columns, types tables do not hold, no pyarrow)."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tfmapreduce as tmr


def _numbers(folder: Path) -> Path:
    """Two files of 40 sorted rows each in row groups of 10 (x 0..79), plus an empty file."""
    for i in range(2):
        x = np.arange(40 * i, 40 * (i + 1))
        days = np.datetime64("2024-01-01") + x.astype("timedelta64[D]")
        words = pa.array([f"w{v:02d}" for v in x]).dictionary_encode()
        pq.write_table(pa.table({"x": x, "day": days, "word": words}), folder / f"part{i}.parquet", row_group_size=10)
    pq.write_table(
        pa.table(
            {
                "x": np.zeros(0, np.int64),
                "day": np.zeros(0, "datetime64[D]"),
                "word": pa.array([], pa.string()).dictionary_encode(),
            }
        ),
        folder / "part2.parquet",
    )
    return folder


@pytest.mark.parametrize(
    ("filters", "read"),
    [
        (None, 8),
        ([("x", ">=", 65)], 2),
        ([("x", "<", 10)], 1),
        ([("x", "==", 35)], 1),
        ([("x", "in", [5, 77])], 2),
        ([("x", "!=", 3)], 8),
        ([("x", ">", 30), ("x", "<=", 41)], 2),
        ([("day", "<", "2024-01-11")], 1),
        ([("day", ">=", datetime.date(2024, 3, 20))], 1),
        ([("word", "==", "w55")], 1),
    ],
)
def test_statistics_skip_row_groups(tmp_path: Path, filters: list | None, read: int) -> None:
    plan = tmr.plan_parquet(_numbers(tmp_path), filters=filters)
    assert plan.read == read
    assert plan.skipped == 8 - read
    assert len(plan.files) == 3
    assert plan.columns == ("x", "day", "word")
    assert plan.kinds == ("int64", "date", "string")
    assert "row groups read" in str(plan)


def test_all_null_row_group_is_skipped(tmp_path: Path) -> None:
    pq.write_table(pa.table({"x": pa.array([None, None, 1, 2], pa.int64())}), tmp_path / "a.parquet", row_group_size=2)
    assert tmr.plan_parquet(tmp_path, filters=[("x", ">", 0)]).read == 1


def test_schema_differs_names_file_and_column(tmp_path: Path) -> None:
    pq.write_table(pa.table({"a": [1], "b": [1.0]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"a": [1], "b": ["x"]}), tmp_path / "b.parquet")
    with pytest.raises(ValueError, match=r"b\.parquet differs from .*a\.parquet in column 'b' \(string there, double"):
        tmr.plan_parquet(tmp_path)


def test_unknown_column_did_you_mean(tmp_path: Path) -> None:
    pq.write_table(pa.table({"price": [1.0]}), tmp_path / "a.parquet")
    with pytest.raises(KeyError, match="did you mean 'price'"):
        tmr.plan_parquet(tmp_path, columns=["prize"])
    with pytest.raises(KeyError, match="did you mean 'price'"):
        tmr.plan_parquet(tmp_path, filters=[("prices", ">", 1)])
    with pytest.raises(ValueError, match="op is one of"):
        tmr.plan_parquet(tmp_path, filters=[("price", "=", 1)])


def test_unsupported_types_name_the_column(tmp_path: Path) -> None:
    pq.write_table(pa.table({"ok": [1], "tags": [[1, 2]], "money": pa.array([1], pa.decimal128(10, 2))}), tmp_path / "a.parquet")
    with pytest.raises(TypeError, match="column 'tags' is list<"):
        tmr.plan_parquet(tmp_path)
    assert tmr.plan_parquet(tmp_path, columns=["money"]).kinds == ("float64",)  # decimals read as float64
    assert tmr.plan_parquet(tmp_path, columns=["ok"]).kinds == ("int64",)


def test_missing_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no file"):
        tmr.plan_parquet(tmp_path / "nothing.parquet")
    with pytest.raises(FileNotFoundError, match=r"holds no \.parquet file"):
        tmr.plan_parquet(tmp_path)


def test_without_pyarrow_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match=r"pip install tfmapreduce\[parquet\]"):
        tmr.plan_parquet(tmp_path)


def test_without_the_native_kernels_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tfmapreduce._io.files.parquet as parquet

    pq.write_table(pa.table({"a": [1]}), tmp_path / "a.parquet")
    monkeypatch.setattr(parquet, "kernels", lambda: None)
    with pytest.raises(RuntimeError, match="native Parquet kernels are not available"):
        tmr.scan_parquet(tmp_path)
