"""Exact quantile, percentile and median over a distributed sort, against numpy bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tfmapreduce as tmr
from tests.strategies import examples, size_lists
from tfmapreduce._quantile import METHODS


def same(actual: Any, expected: Any) -> None:
    """Equal values (NaN to NaN), dtypes and shapes; a scalar where numpy returns one."""
    assert np.shape(actual) == np.shape(expected)
    assert np.asarray(actual).dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(actual, expected)


@st.composite
def cases(draw: st.DrawFn) -> tuple[np.ndarray, list[int], Any, str]:
    dtype = np.dtype(draw(st.sampled_from(["int32", "int64", "float32", "float64"])))
    if dtype.kind == "i":
        elements: st.SearchStrategy[Any] = st.integers(-1000, 1000)
    else:
        nan = draw(st.integers(0, 4)) == 0  # sometimes a NaN
        finite = st.floats(-1e3, 1e3, width=dtype.itemsize * 8)
        elements = st.one_of(finite, st.just(np.nan)) if nan else finite
    x = draw(hnp.arrays(dtype, draw(st.integers(1, 40)), elements=elements))
    q = draw(st.one_of(st.floats(0, 1), st.lists(st.floats(0, 1), min_size=1, max_size=4).map(np.array)))
    return x, draw(size_lists(len(x), max_shards=4)), q, draw(st.sampled_from(METHODS))


@settings(max_examples=examples(10))
@given(cases())
def test_quantile_equals_numpy(cluster: tmr.LocalCluster, case: tuple[np.ndarray, list[int], Any, str]) -> None:
    x, sizes, q, method = case
    same(tmr.quantile(x, q, method=method, cluster=cluster, sizes=sizes), np.quantile(x, q, method=method))


@pytest.mark.parametrize("x", [np.arange(7), np.array([3.5, 1.0, 2.0, 9.0], np.float32), np.array([1.0, np.nan, 2.0])])
def test_median_and_percentile_equal_numpy(cluster: tmr.LocalCluster, x: np.ndarray) -> None:
    same(tmr.median(x, cluster=cluster, sizes=[1, 0, len(x) - 1]), np.median(x))
    same(tmr.percentile(x, [1, 50, 99], cluster=cluster), np.percentile(x, [1, 50, 99]))


def test_a_resident_input_many_rows_and_every_method(cluster: tmr.LocalCluster) -> None:
    x = np.random.default_rng(3).normal(size=20_000).astype(np.float32)
    with tmr.scatter(x, cluster=cluster) as data:
        for method in METHODS:
            same(tmr.quantile(data, [0.01, 0.5, 0.99], method=method), np.quantile(x, [0.01, 0.5, 0.99], method=method))
        same(tmr.median(data), np.median(x))


def test_errors_name_the_argument_and_the_fix(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(ValueError, match=r"q must be in the range \[0, 1\], got 1.5; e.g. q=0.5"):
        tmr.quantile(np.arange(3), 1.5, cluster=cluster)
    with pytest.raises(ValueError, match=r"p must be in the range \[0, 100\], got \[-1\]"):
        tmr.percentile(np.arange(3), [-1], cluster=cluster)
    with pytest.raises(ValueError, match=r"method must be one of 'linear', .* got 'hazen'"):
        tmr.quantile(np.arange(3), 0.5, method="hazen", cluster=cluster)
    with pytest.raises(tmr.InputError, match=r"x has no rows; a median needs at least one value"):
        tmr.median(np.zeros(0), cluster=cluster)
