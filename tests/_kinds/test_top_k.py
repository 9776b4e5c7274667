"""tmr.top_k: each shard's k candidates merged on one device, against a stable numpy order on real workers."""

from __future__ import annotations

from pathlib import Path

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


def reference(x: np.ndarray, k: int, *, largest: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """numpy's answer: the stable order of x (NaNs one value, the largest; -0.0 = 0.0), from the largest down if asked."""
    _, rank = np.unique(x, return_inverse=True)  # numpy's order, NaNs collapsed into the last rank
    order = np.lexsort((np.arange(len(x)), -rank if largest else rank))[:k]
    return x[order], order.astype(np.int64)


def check(result: tuple[np.ndarray, np.ndarray], x: np.ndarray, k: int, *, largest: bool = True) -> None:
    values, rows = result
    want_values, want_rows = reference(x, k, largest=largest)
    assert values.dtype == x.dtype
    assert rows.dtype == np.int64
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(values.view(np.uint8), want_values.view(np.uint8))  # the very values of x, bit for bit


@settings(max_examples=examples(16))
@given(inputs(), st.integers(0, 60), st.booleans())
def test_top_k_equals_numpy_for_any_partition(
    cluster: tmr.LocalCluster, case: tuple[np.ndarray, list[int]], k: int, largest: bool
) -> None:
    x, sizes = case
    check(tmr.top_k(x, k, largest=largest, cluster=cluster, sizes=sizes), x, k, largest=largest)


def test_ties_come_lower_row_first_across_shards(cluster: tmr.LocalCluster) -> None:
    x = np.array([5, 1, 5, 5, 2, 5, 1, 5], np.int64)
    values, rows = tmr.top_k(x, 4, cluster=cluster, sizes=[3, 0, 2, 3])
    assert values.tolist() == [5, 5, 5, 5]
    assert rows.tolist() == [0, 2, 3, 5]
    values, rows = tmr.top_k(x, 3, largest=False, cluster=cluster, sizes=[3, 0, 2, 3])
    assert values.tolist() == [1, 1, 2]
    assert rows.tolist() == [1, 6, 4]


def test_nan_is_the_largest_and_negative_zero_equals_zero(cluster: tmr.LocalCluster) -> None:
    x = np.array([0.0, np.nan, -0.0, -np.inf, np.nan, np.inf])
    values, rows = tmr.top_k(x, 6, cluster=cluster, sizes=[2, 4])
    assert rows.tolist() == [1, 4, 5, 0, 2, 3]
    values, rows = tmr.top_k(x, 6, largest=False, cluster=cluster, sizes=[2, 4])
    assert rows.tolist() == [3, 0, 2, 5, 1, 4]
    check((values, rows), x, 6, largest=False)


def test_k_zero_k_past_the_rows_and_no_rows(cluster: tmr.LocalCluster) -> None:
    x = np.array([3, 1, 2], np.int32)
    check(tmr.top_k(x, 0, cluster=cluster), x, 0)
    check(tmr.top_k(x, 10**12, cluster=cluster), x, 3)  # every row, largest first
    values, rows = tmr.top_k(np.zeros(0, np.float32), 5, cluster=cluster)
    assert values.shape == rows.shape == (0,)
    assert values.dtype == np.float32
    check(tmr.top_k(x, np.int64(2), cluster=cluster, sizes=[0, 3, 0]), x, 2)


def test_a_resident_input_is_read_where_it_lives(cluster: tmr.LocalCluster) -> None:
    x = np.random.default_rng(0).integers(-50, 50, 1000)
    with tmr.scatter(x, cluster=cluster, sizes=[400, 0, 600]) as data:
        check(tmr.top_k(data, 25), x, 25)
        check(tmr.top_k(data, 25, largest=False), x, 25, largest=False)
        with tmr.sort(data, descending=True, reducers=3) as ordered:  # rows numbered in the sorted order
            check(tmr.top_k(ordered, 40, largest=False), np.sort(x)[::-1], 40, largest=False)
        (_, rows), stats = tmr.top_k(data, 3, return_stats=True)
        assert len(rows) == 3
        assert sum(s.rows for s in stats.shards) == 1000


@pytest.mark.parametrize("batch_rows", [None, 7])
def test_npy_files_are_folded_batch_by_batch_with_global_rows(
    cluster: tmr.LocalCluster, tmp_path: Path, batch_rows: int | None
) -> None:
    rng = np.random.default_rng(1)
    parts = [rng.integers(0, 20, n).astype(np.float64) for n in (30, 0, 45, 12)]
    parts[2][3] = np.nan
    for i, part in enumerate(parts):
        np.save(tmp_path / f"part{i}.npy", part)
    x = np.concatenate(parts)
    files = tmr.read_npy(str(tmp_path / "*.npy"))
    check(tmr.top_k(files, 10, cluster=cluster, batch_rows=batch_rows), x, 10)
    check(tmr.top_k(files, 100, largest=False, cluster=cluster, batch_rows=batch_rows), x, 100, largest=False)


def test_errors_name_the_argument_and_the_fix(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    x = np.arange(5)
    with pytest.raises(ValueError, match=r"k must be ≥ 0 .* got -1; pass k=0 for none"):
        tmr.top_k(x, -1, cluster=cluster)
    with pytest.raises(TypeError, match=r"k must be an int .* got float 2.0; e.g. k=10"):
        tmr.top_k(x, 2.0, cluster=cluster)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"k must be an int .* got bool True"):
        tmr.top_k(x, True, cluster=cluster)
    with pytest.raises(TypeError, match=r"largest must be True or False, got str 'yes'"):
        tmr.top_k(x, 2, largest="yes", cluster=cluster)  # type: ignore[arg-type]
    with pytest.raises(tmr.InputError, match=r"x must be 1-D .* got shape \(3, 2\); pick one column"):
        tmr.top_k(np.zeros((3, 2)), 1, cluster=cluster)
    with pytest.raises(TypeError, match=r"x must hold integers .* got dtype bool; convert it"):
        tmr.top_k(np.array([True, False]), 1, cluster=cluster)
    with pytest.raises(TypeError, match=r"x must be one array, got a tuple of 2"):
        tmr.top_k((x, x), 1, cluster=cluster)
    with pytest.raises(TypeError, match=r"reducers= does not apply to top_k.*drop reducers="):
        tmr.top_k(x, 1, cluster=cluster, reducers=2)
    with pytest.raises(TypeError, match=r"speculate=True does not apply to top_k.*drop speculate="):
        tmr.top_k(x, 1, cluster=cluster, speculate=True)
    (tmp_path / "a.txt").write_text("1\n2\n")
    with pytest.raises(TypeError, match=r"x must hold integers"):
        tmr.top_k(tmr.read_text(str(tmp_path / "a.txt")), 1, cluster=cluster)
    raw = tmp_path / "x.i64"
    np.arange(4).tofile(raw)
    check(tmr.top_k(tmr.read_raw(str(raw), dtype=np.int64), 2, cluster=cluster), np.arange(4), 2)


def test_one_row_batches_of_npy_files(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    """A run whose fetched structure has as many leaves as items (values and rows, no clocks, one file check) is
    fetched in its structure (it came back flattened: a raw TensorFlow ValueError)."""
    np.save(tmp_path / "one.npy", np.array([5.0]))
    check(tmr.top_k(tmr.read_npy(str(tmp_path / "one.npy")), 1, cluster=cluster), np.array([5.0]), 1)
    x = np.arange(50.0)
    np.save(tmp_path / "fifty.npy", x)
    np.save(tmp_path / "none.npy", np.zeros(0))
    files = tmr.read_npy([str(tmp_path / "fifty.npy"), str(tmp_path / "none.npy")])
    check(tmr.top_k(files, 3, cluster=cluster, batch_rows=1, sizes=1), x, 3)
