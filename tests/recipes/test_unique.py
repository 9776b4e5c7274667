"""tmr.unique: a keyed count of each distinct value, against np.unique on real workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tfmapreduce as tmr
from tests.strategies import ORDER_DTYPES, examples, order_elements, size_lists


@st.composite
def inputs(draw: st.DrawFn) -> tuple[np.ndarray, list[int]]:
    dtype = draw(st.sampled_from(ORDER_DTYPES))
    x = draw(hnp.arrays(dtype, draw(st.integers(0, 50)), elements=order_elements(dtype)))
    return x, draw(size_lists(len(x), max_shards=5))


def check(result: Any, x: Any, *, return_counts: bool = False) -> None:
    """The result equals np.unique (values, dtype, and the counts when asked); a zero comes back as 0.0."""
    expected = np.unique(x, return_counts=return_counts)
    values, counts = result if return_counts else (result, None)
    want = expected[0] if return_counts else expected
    assert values.dtype == want.dtype
    np.testing.assert_array_equal(values, want)  # NaN equal to NaN, -0.0 to 0.0
    if values.dtype.kind == "f":
        assert not np.signbit(values[values == 0]).any()
    if return_counts:
        assert counts is not None
        assert counts.dtype == np.int64
        np.testing.assert_array_equal(counts, expected[1])


@settings(max_examples=examples(16))
@given(inputs(), st.booleans())
def test_unique_equals_numpy_for_any_partition(
    cluster: tmr.LocalCluster, case: tuple[np.ndarray, list[int]], return_counts: bool
) -> None:
    x, sizes = case
    check(tmr.unique(x, return_counts=return_counts, cluster=cluster, sizes=sizes), x, return_counts=return_counts)


TEXT = st.text(st.sampled_from(["a", "b", "z", "é", "€", "😀", " "]), max_size=3)


@settings(max_examples=examples(8))
@given(st.lists(TEXT, max_size=30), st.booleans(), st.integers(1, 4))
def test_strings_come_back_in_byte_order_with_their_dtype(
    cluster: tmr.LocalCluster, words: list[str], as_bytes: bool, reducers: int
) -> None:
    x = np.array([w.encode() for w in words] if as_bytes else words, dtype=bytes if as_bytes else str)
    check(tmr.unique(x, return_counts=True, cluster=cluster, reducers=reducers), x, return_counts=True)


def test_nans_collapse_last_and_negative_zero_is_zero(cluster: tmr.LocalCluster) -> None:
    x = np.array([np.nan, -0.0, 1.0, np.float32("nan"), 0.0, -np.inf, np.nan], np.float32)
    values, counts = tmr.unique(x, return_counts=True, cluster=cluster, sizes=[3, 0, 4])
    assert values.tolist()[:3] == [-np.inf, 0.0, 1.0]
    assert np.isnan(values[3])
    assert len(values) == 4
    assert counts.tolist() == [1, 2, 1, 3]
    check((values, counts), x, return_counts=True)


def test_lists_resident_data_and_files(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    check(tmr.unique(["b", "a", "b"], cluster=cluster), ["b", "a", "b"])
    check(tmr.unique([3, 1, 3], cluster=cluster), [3, 1, 3])
    x = np.random.default_rng(0).integers(-30, 30, 1000)
    with tmr.scatter(x, cluster=cluster, sizes=[400, 0, 600]) as data:
        check(tmr.unique(data, return_counts=True), x, return_counts=True)
        values, stats = tmr.unique(data, return_stats=True)
        check(values, x)
        assert sum(s.rows for s in stats.shards) == 1000
    parts = [np.arange(n) % 7 - 3.5 for n in (20, 0, 13)]
    for i, part in enumerate(parts):
        np.save(tmp_path / f"part{i}.npy", part)
    files = tmr.read_npy(str(tmp_path / "*.npy"))
    check(tmr.unique(files, return_counts=True, cluster=cluster, batch_rows=4), np.concatenate(parts), return_counts=True)
    (tmp_path / "words.txt").write_text("b\né\nb\n\na\n")
    lines = ["b", "é", "b", "", "a"]
    check(tmr.unique(tmr.read_text(str(tmp_path / "words.txt")), return_counts=True, cluster=cluster), lines, return_counts=True)


def test_empty_inputs(cluster: tmr.LocalCluster) -> None:
    check(tmr.unique(np.zeros(0, np.int16), return_counts=True, cluster=cluster), np.zeros(0, np.int16), return_counts=True)
    check(tmr.unique(np.array([], "<U3"), cluster=cluster), np.array([], "<U3"))
    check(tmr.unique(np.array([7, 7]), cluster=cluster, sizes=[0, 2, 0]), np.array([7, 7]))


def test_errors_name_the_argument_and_the_fix(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.InputError, match=r"x must be 1-D .* got shape \(3, 2\); pick one column"):
        tmr.unique(np.zeros((3, 2)), cluster=cluster)
    with pytest.raises(TypeError, match=r"x must hold integers .* or strings, got dtype bool; convert it"):
        tmr.unique(np.array([True, False]), cluster=cluster)
    with pytest.raises(TypeError, match=r"x must hold integers .* got dtype uint64"):
        tmr.unique(np.arange(3, dtype=np.uint64), cluster=cluster)
    with pytest.raises(TypeError, match=r"return_counts must be True or False, got int 1"):
        tmr.unique(np.arange(3), return_counts=1, cluster=cluster)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"unknown run option sise=2"):
        tmr.unique(np.arange(3), cluster=cluster, sise=2)  # type: ignore[call-arg]


def test_one_row_batches_of_npy_files(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    np.save(tmp_path / "one.npy", np.array([5.0]))
    check(tmr.unique(tmr.read_npy(str(tmp_path / "one.npy")), sizes=1, batch_rows=7, cluster=cluster), np.array([5.0]))
    x = np.arange(50.0)
    np.save(tmp_path / "fifty.npy", x)
    np.save(tmp_path / "none.npy", np.zeros(0))
    files = tmr.read_npy([str(tmp_path / "fifty.npy"), str(tmp_path / "none.npy")])
    check(tmr.unique(files, batch_rows=1, sizes=1, cluster=cluster), x)
