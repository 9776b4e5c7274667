"""Parquet through tables on real workers: files written by pyarrow (every int and float width, bool, strings with
nulls, unicode and empty strings, dictionary-encoded strings, dates, timestamps; several files and row groups, an
empty file) read back by ``tmr.scan_parquet`` equal to ``pyarrow.parquet.read_table``, with filters and projections;
tables written by ``tmr.write_parquet`` read back by pyarrow equal."""

from __future__ import annotations

import datetime
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import tfmapreduce as tmr
from tfmapreduce._native.loader import ENV, has, kernels

WORDS = ["", "a", "é", "日本", "a b", "ü"]


def arrow_table(seed: int, rows: int) -> pa.Table:
    """Every column type, nulls in most (about one row in five)."""
    rng = np.random.default_rng(seed)

    def nulls() -> np.ndarray:
        return rng.random(rows) < 0.2

    def ints(dtype: str) -> pa.Array:
        info = np.iinfo(dtype)
        return pa.array(rng.integers(info.min, info.max, rows, dtype=dtype, endpoint=True), mask=nulls())

    words = [WORDS[i] for i in rng.integers(0, len(WORDS), rows)]
    columns: dict[str, pa.Array] = {
        d: ints(d) for d in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
    }
    columns |= {
        "f16": pa.array(rng.normal(size=rows).astype(np.float16), mask=nulls()),
        "f32": pa.array(rng.normal(size=rows).astype(np.float32), mask=nulls()),
        "f64": pa.array(rng.normal(size=rows) * 1e3, mask=nulls()),
        "b": pa.array(rng.random(rows) < 0.5, mask=nulls()),
        "s": pa.array(words, pa.string(), mask=nulls()),
        "cat": pa.array(words, pa.string(), mask=nulls()).dictionary_encode(),
        "day": pa.array((np.datetime64("1969-12-20") + rng.integers(0, 40, rows)).astype("datetime64[D]"), mask=nulls()),
        "ms": pa.array(
            np.datetime64("2024-01-01T00:00", "ms") + rng.integers(0, 10**9, rows).astype("timedelta64[ms]"), mask=nulls()
        ),
        "us": pa.array(np.datetime64("1960-01-01T00:00", "us") + rng.integers(0, 10**12, rows).astype("timedelta64[us]")),
    }
    return pa.table(columns)


def write_files(folder: Path, seed: int, sizes: list[int], group: int) -> Path:
    table = arrow_table(seed, sum(sizes))
    start = 0
    for i, n in enumerate(sizes):
        pq.write_table(table.slice(start, n), folder / f"part{i:02d}.parquet", row_group_size=group)
        start += n
    return folder


def plain(series: pd.Series) -> list[Any]:
    """A column's values as Python values, None for a null (pandas' and pyarrow's spellings alike)."""
    out: list[Any] = []
    for v in series.astype(object).tolist():
        if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v)):
            out.append(None)
        elif isinstance(v, (np.generic,)):
            out.append(v.item())
        else:
            out.append(v)
    return out


def assert_equal(ours: pd.DataFrame, theirs: pd.DataFrame | pa.Table) -> None:
    """Equal column by column; an Arrow table's values as Arrow gives them (exact uint64, no float detour)."""
    if isinstance(theirs, pa.Table):
        assert list(ours.columns) == theirs.column_names
        for name, values in theirs.to_pydict().items():
            assert plain(ours[name]) == values, name
        return
    assert list(ours.columns) == list(theirs.columns)
    for name in theirs.columns:
        assert plain(ours[name]) == plain(theirs[name]), name


@settings(max_examples=4, deadline=None, phases=[Phase.explicit, Phase.generate])  # a shrink reruns the scan
@given(seed=st.integers(0, 2**16), sizes=st.lists(st.integers(0, 30), min_size=1, max_size=4), group=st.integers(1, 12))
def test_scan_equals_pyarrow(
    cluster: tmr.LocalCluster, tmp_path_factory: pytest.TempPathFactory, seed: int, sizes: list[int], group: int
) -> None:
    folder = write_files(tmp_path_factory.mktemp("scan"), seed, sizes, group)
    ours = tmr.scan_parquet(folder, cluster=cluster)
    assert len(ours) == sum(sizes)
    assert ours.schema["cat"].type.name == "string"
    assert ours.schema["day"].type.name == "date"
    assert ours.schema["ms"].type.name == "timestamp[ms]"
    assert ours.schema["f16"].type.name == "float16"
    assert_equal(ours.to_pandas(), pq.read_table(folder))


def test_projection_and_filters_equal_pyarrow(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    folder = write_files(tmp_path, 7, [50, 0, 70], 16)
    columns = ["s", "int64", "day"]
    for filters in (
        [("int32", ">", 0)],
        [("day", ">=", datetime.date(1970, 1, 5)), ("cat", "in", ["a", "é"])],
        [("s", "==", "")],
        [("uint8", "!=", 3), ("f64", "<=", 0.0)],
    ):
        ours = tmr.scan_parquet(folder, columns=columns, filters=filters, cluster=cluster, sizes=3)
        theirs = pq.read_table(folder, columns=columns, filters=filters)
        assert_equal(ours.to_pandas(), theirs)


def test_filters_skip_row_groups(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    x = np.arange(1000)
    pq.write_table(pa.table({"x": x, "y": x * 0.5}), tmp_path / "a.parquet", row_group_size=100)
    filters = [("x", ">=", 250), ("x", "<", 420)]
    plan = tmr.plan_parquet(tmp_path, filters=filters)
    assert (plan.read, plan.skipped) == (3, 7)
    ours = tmr.scan_parquet(tmp_path, columns=["y"], filters=filters, cluster=cluster).to_dict()
    assert ours["y"].tolist() == (np.arange(250, 420) * 0.5).tolist()


def test_columns_after_nested_ones_are_read_and_skipped_by_their_own_statistics(
    cluster: tmr.LocalCluster, tmp_path: Path
) -> None:
    # A struct, a map and a list before the flat columns: several leaf columns each, which once shifted the index the
    # reader and the footers' statistics were asked for (the struct's second field's values read as "x").
    n = 6
    nested = {
        "s": pa.array([{"a": 100 + i, "b": 1000 + i} for i in range(n)]),
        "m": pa.array([[("k", i)] for i in range(n)], pa.map_(pa.string(), pa.int64())),
        "l": pa.array([[i, i] for i in range(n)]),
    }
    pq.write_table(
        pa.table({**nested, "x": np.arange(10, 70, 10), "y": np.arange(1, n + 1)}), tmp_path / "a.parquet", row_group_size=3
    )
    for columns, filters in ((["x", "y"], None), (["y"], [("y", ">", 3)]), (["x"], [("x", "<", 35)])):
        plan = tmr.plan_parquet(tmp_path, columns=columns, filters=filters)
        assert plan.read == (2 if filters is None else 1)  # one row group excluded by the column's own range
        ours = tmr.scan_parquet(tmp_path, columns=columns, filters=filters, cluster=cluster)
        assert_equal(ours.to_pandas(), pq.read_table(tmp_path, columns=columns, filters=filters))


def test_group_by_over_a_scan(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    folder = write_files(tmp_path, 3, [60, 40], 25)
    got = (
        tmr.scan_parquet(folder, cluster=cluster)
        .group_by(["cat", "b"])
        .agg(total=("int32", "sum"), n=("*", "count"), hi=("f64", "max"), cluster=cluster)
    )
    frame = pq.read_table(folder).to_pandas()
    frame["cat"] = frame["cat"].astype(object)
    want = (
        frame.groupby(["cat", "b"], dropna=False, sort=True)
        .agg(total=("int32", lambda v: v.sum(min_count=1)), n=("int32", "size"), hi=("f64", "max"))
        .reset_index()
    )
    rows = lambda frame: sorted(zip(*(plain(frame[c]) for c in frame.columns), strict=True), key=repr)  # noqa: E731
    assert list(got.columns) == list(want.columns)
    assert rows(got.to_pandas()) == rows(want)


def test_empty_scan(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    folder = write_files(tmp_path, 1, [20], 5)
    got = tmr.scan_parquet(folder, columns=["s", "day"], filters=[("int8", ">", 200)], cluster=cluster)
    assert len(got) == 0
    assert got.columns == ("s", "day")
    assert got.schema["day"].type.name == "date"


@pytest.mark.parametrize("sizes", [None, [0, 30, 20]])
def test_write_parquet_read_by_pyarrow(cluster: tmr.LocalCluster, tmp_path: Path, sizes: list[int] | None) -> None:
    folder = write_files(tmp_path / "in", 11, [50], 50) if (tmp_path / "in").mkdir() is None else None
    table = tmr.scan_parquet(folder, cluster=cluster)
    written = tmr.write_parquet(table, tmp_path / "out", cluster=cluster, sizes=sizes)
    assert all(p.endswith(".parquet") for p in written.parts)
    assert sum(written.rows) == 50
    back = pq.read_table(tmp_path / "out")
    assert back.schema.field("day").type == pa.date32()
    assert back.schema.field("ms").type == pa.timestamp("ms")
    assert back.schema.field("int64").nullable
    assert not back.schema.field("us").nullable
    theirs = pq.read_table(folder)
    assert_equal(table.to_pandas(), back)
    assert_equal(tmr.scan_parquet(tmp_path / "out", cluster=cluster).to_pandas(), theirs)


def test_write_parquet_refuses_a_used_directory(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("x")
    with pytest.raises(tmr.OutputError):
        tmr.write_parquet(tmr.table({"a": np.arange(3)}), tmp_path / "out", cluster=cluster)
    with pytest.raises(TypeError, match=r"expected a tmr\.Table"):
        tmr.write_parquet({"a": np.arange(3)}, tmp_path / "other", cluster=cluster)  # type: ignore[arg-type]


def test_decimals_as_float64_and_string_views(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    import decimal

    money = [decimal.Decimal("12345.67"), None, decimal.Decimal("-0.01"), decimal.Decimal("104949.50")]
    words = pa.array(["N", "é", None, ""], pa.string_view())
    pq.write_table(pa.table({"money": pa.array(money, pa.decimal128(15, 2)), "flag": words}), tmp_path / "a.parquet")
    got = tmr.scan_parquet(tmp_path, filters=[("money", ">", 0)], cluster=cluster)
    assert got.schema["money"].type.name == "float64"
    assert got.to_dict()["money"].tolist() == [12345.67, 104949.5]  # each the nearest double, as float(Decimal)
    assert got.to_dict()["flag"].tolist() == ["N", ""]


def test_a_worker_without_the_parquet_kernels_is_named(tmp_path: Path) -> None:
    """A worker process started without the native kernels (TFMAPREDUCE_NATIVE=0) fails a scan with an error naming
    its task and the fix, not TensorFlow's raw "Op type not registered"."""
    if not has(kernels(), "tmr_read_parquet"):
        pytest.skip("no native Parquet kernels on this client (no compiler, or TFMAPREDUCE_NATIVE=0)")
    pq.write_table(pa.table({"x": np.arange(10)}), tmp_path / "a.parquet")
    os.environ[ENV] = "0"
    try:
        bare = tmr.LocalCluster(1)
    finally:
        del os.environ[ENV]
    with bare, pytest.raises(RuntimeError, match=r"task\(s\) \['/job:local/task:0'\] has no native Parquet.*parquet\]"):
        tmr.scan_parquet(tmp_path, cluster=bare)


def test_a_resident_scan_stays_on_the_workers(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    folder = write_files(tmp_path, 4, [30, 20], 10)
    chosen, filters = ["s", "cat", "int32", "f64", "day"], [("int32", ">", -(2**30))]
    with tmr.stats() as runs:  # scan, filter, group-by: every result kept on the workers
        r = tmr.scan_parquet(folder, columns=chosen, filters=filters, resident=True, cluster=cluster)
        big = r.filter(lambda rows: rows["f64"] > 0.0)
        by = big.group_by("cat").agg(n=("*", "count"), total=("int32", "sum"), resident=True, cluster=cluster)
    assert all(run.bytes_sent == 0 for run in runs.runs)
    with r, big, by:
        assert isinstance(r, tmr.ResidentTable)
        assert len(r.shards) == 2 * len(cluster.tasks)  # a shard a split (its rows left by the filters), in order
        arrow = pq.read_table(folder, columns=chosen, filters=filters)
        assert [f.nullable for f in r.schema.fields] == [arrow.column(c).null_count > 0 for c in chosen]
        assert_equal(r.to_pandas(), arrow)
        got = by.to_pandas()
    frame = pq.read_table(folder, columns=chosen, filters=filters).to_pandas()
    frame = frame[frame["f64"] > 0.0].astype({"cat": object})
    want = frame.groupby("cat", dropna=False, sort=True).agg(n=("s", "size"), total=("int32", lambda v: v.sum(min_count=1)))
    assert_equal(got, want.reset_index())
    with tmr.scan_parquet(folder, columns=["s"], filters=[("int8", ">", 200)], resident=True, cluster=cluster) as none:
        assert len(none) == 0
        assert none.columns == ("s",)
