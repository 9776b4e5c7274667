"""Quantile, percentile and median: exact against numpy bit for bit, approximate within their rank bound."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tfmapreduce as tmr
from tests.strategies import examples, size_lists
from tfmapreduce._kinds import select as _select
from tfmapreduce.recipes._quantile import METHODS

DTYPES = ["int8", "int32", "int64", "uint32", "float16", "float32", "float64"]


def same(actual: Any, expected: Any, x: np.ndarray) -> None:
    """Equal values (NaN to NaN), dtypes and shapes, a scalar where numpy returns one; and the sign of a zero, unless
    ``x`` holds both -0.0 and 0.0 (numpy holds them equal, so which one it returns depends on its partition)."""
    assert np.shape(actual) == np.shape(expected)
    assert np.asarray(actual).dtype == np.asarray(expected).dtype
    assert isinstance(actual, np.ndarray) == isinstance(expected, np.ndarray)
    np.testing.assert_array_equal(actual, expected)
    zeros = x[x == 0] if x.dtype.kind == "f" else x[:0]
    if len(np.unique(np.signbit(zeros))) < 2:  # (a NaN's sign aside: the answer is numpy's NaN, not the data's)
        numbers = ~np.isnan(expected) if np.asarray(expected).dtype.kind == "f" else True
        np.testing.assert_array_equal(np.signbit(actual) & numbers, np.signbit(expected) & numbers)


@st.composite
def arrays(draw: st.DrawFn) -> np.ndarray:
    """1-D or 2-D arrays of every dtype: int extremes, and floats with -0.0, subnormals, inf and sometimes NaN."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        elements: st.SearchStrategy[Any] = st.one_of(st.integers(-50, 50).filter(lambda v: info.min <= v <= info.max),
                                                     st.sampled_from([info.min, info.max]))  # fmt: skip
    else:
        finite = st.floats(width=dtype.itemsize * 8, allow_nan=False, allow_infinity=draw(st.booleans()))
        small = st.sampled_from([0.0, -0.0, 1.0, -1.0])  # ties
        elements = st.one_of(finite, small, st.just(np.nan)) if draw(st.integers(0, 4)) == 0 else st.one_of(finite, small)
    rows = draw(st.integers(1, 30))
    shape = (rows,) if draw(st.booleans()) else (rows, draw(st.integers(1, 3)))
    return draw(hnp.arrays(dtype, shape, elements=elements))


@settings(max_examples=examples(10), deadline=None)
@given(arrays(), st.data())
def test_quantile_equals_numpy(cluster: tmr.LocalCluster, x: np.ndarray, data: st.DataObject) -> None:
    q = data.draw(st.one_of(st.floats(0, 1), st.lists(st.floats(0, 1), min_size=1, max_size=3).map(np.array)))
    method = data.draw(st.sampled_from(METHODS))
    axis = data.draw(st.sampled_from([None, 0]))
    sizes = data.draw(size_lists(len(x), max_shards=4))
    with np.errstate(all="ignore"):  # numpy's interpolation of inf and of int extremes
        expected = np.quantile(x, q, axis=axis, method=method)
        actual = tmr.quantile(x, q, axis=axis, method=method, cluster=cluster, sizes=sizes)
    same(actual, expected, x)


@pytest.mark.parametrize(
    "x",
    [
        np.arange(7),
        np.array([3.5, 1.0, 2.0, 9.0], np.float32),
        np.array([1.0, np.nan, 2.0]),
        np.array([-0.0, -0.0, 5.0]),
        np.array([-np.inf, np.inf, 1.0, 2.0]),  # values in the ±inf buckets, no NaN
        np.array([0x7F800000, 0x3F800000, 0x7F800001, 0x40000000], np.uint32).view(np.float32),  # inf, 1, a NaN near inf, 2
        np.array([-np.nan, 1.0]),  # a NaN with its sign bit set
    ],
)
def test_median_and_percentile_equal_numpy(cluster: tmr.LocalCluster, x: np.ndarray) -> None:
    with np.errstate(invalid="ignore"):  # numpy's interpolation of inf warns
        same(tmr.median(x, cluster=cluster, sizes=[1, 0, len(x) - 1]), np.median(x), x)
        same(tmr.percentile(x, [1, 50, 99], cluster=cluster), np.percentile(x, [1, 50, 99]), x)


def test_columns_a_nan_in_one_and_many_of_them(cluster: tmr.LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(1).normal(size=(50, 20))  # more columns than one run selects in
    x[3, 4] = np.nan
    same(tmr.median(x, axis=0, cluster=cluster), np.median(x, axis=0), x)
    same(tmr.percentile(x, [5, 95], axis=-2, cluster=cluster), np.percentile(x, [5, 95], axis=-2), x)
    same(tmr.median(x, cluster=cluster), np.median(x), x)  # axis=None: every value; a NaN makes it NaN
    y = np.random.default_rng(2).integers(0, 100, 2000)  # small integers in int64: every value in one top bucket
    monkeypatch.setattr(_select, "TARGETS", 64)  # (one program for every run)
    q = np.linspace(0, 1, 101)  # more ranks than one run selects
    same(tmr.quantile(y, q, method="midpoint", cluster=cluster), np.quantile(y, q, method="midpoint"), y)


def test_a_resident_input_many_rows_and_every_method(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(3)
    for x in [rng.normal(size=20_000).astype(np.float32), rng.integers(-(2**62), 2**62, 20_000)]:
        with tmr.scatter(x, cluster=cluster, sizes=[0, 12_000, 8_000]) as data:
            for method in METHODS:
                q = [0.01, 0.5, 0.99]
                same(tmr.quantile(data, q, method=method), np.quantile(x, q, method=method), x)
            median, stats = tmr.median(data, return_stats=True)
            same(median, np.median(x), x)
            assert isinstance(stats, tmr.RunStats)
            assert stats.bytes_sent == 0


def within(value: Any, x: np.ndarray, q: float, method: str, epsilon: float) -> bool:
    """Whether ``value`` occurs in ``x`` at a rank at most ``epsilon · n`` from the ranks numpy's ``method`` reads."""
    ordered = np.sort(x)
    n = len(x)
    h = (n - 1) * q
    first, last = {
        "lower": (np.floor(h),) * 2,
        "higher": (min(np.ceil(h), n - 1),) * 2,
        "nearest": (np.around(h),) * 2,
    }.get(method, (np.floor(h), min(np.ceil(h), n - 1)))
    begin, end = np.searchsorted(ordered, value, "left"), np.searchsorted(ordered, value, "right")
    distance = max(0, begin - last, first - (end - 1))
    return bool(end > begin and distance <= epsilon * n)


@settings(max_examples=examples(8), deadline=None)
@given(st.data())
def test_approximate_quantiles_are_values_within_their_rank_bound(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 100)))
    n = data.draw(st.integers(1, 3000))
    kind = data.draw(st.sampled_from(["normal", "ties", "narrow", "int64"]))
    x = {
        "normal": lambda: rng.normal(size=n).astype(np.float32),
        "ties": lambda: np.where(rng.random(n) < 0.9, 7.0, rng.normal(size=n)),  # 90% one value
        "narrow": lambda: (1 + rng.random(n) / 1000).astype(np.float32),  # all in one bucket: selected exactly
        "int64": lambda: rng.integers(-(2**40), 2**40, n),
    }[kind]()
    epsilon = data.draw(st.sampled_from([1e-3, 0.01, 0.2]))
    method = data.draw(st.sampled_from(METHODS))
    q = np.array(data.draw(st.lists(st.floats(0, 1), min_size=1, max_size=3)))
    sizes = data.draw(size_lists(n, max_shards=3))
    got = tmr.quantile(x, q, method=method, epsilon=epsilon, cluster=cluster, sizes=sizes)
    assert got.dtype == x.dtype
    assert got.shape == q.shape
    assert all(within(v, x, p, method, epsilon) for v, p in zip(got, q, strict=True))


def test_approximate_median_columns_nan_and_large_input(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(size=(200_000, 2))
    x[7, 1] = np.nan
    flat = tmr.quantile(x[:, :1].reshape(-1, 2), [0.1, 0.9], epsilon=1e-3, cluster=cluster)  # axis=None: every value
    assert within(flat[0], x[:, 0], 0.1, "linear", 1e-3)
    assert within(flat[1], x[:, 0], 0.9, "linear", 1e-3)
    got = tmr.median(x, axis=0, epsilon=1e-3, cluster=cluster)
    assert within(got[0], x[:, 0], 0.5, "linear", 1e-3)
    assert np.isnan(got[1])
    y = rng.random(300_000).astype(np.float32)  # buckets of 1/256 of the values near the median: too coarse for 1e-3
    with tmr.stats() as runs:
        median = tmr.median(y, epsilon=1e-3, cluster=cluster)
    assert within(median, y, 0.5, "linear", 1e-3)
    assert len(runs.runs) == 2  # the summary could not prove the bound: the median was selected exactly
    ratings = rng.integers(1, 6, 100_000)  # integers of a small range: a bucket per value, ties and all
    with tmr.stats() as runs:
        middle = tmr.quantile(ratings, [0.1, 0.5], epsilon=1e-3, cluster=cluster)
    assert within(middle[0], ratings, 0.1, "linear", 1e-3)
    assert within(middle[1], ratings, 0.5, "linear", 1e-3)
    assert len(runs.runs) == 1
    with tmr.stats() as runs:
        top = tmr.quantile(y, 0.99, epsilon=0.01, cluster=cluster)
    assert within(top, y, 0.99, "linear", 0.01)
    assert len(runs.runs) == 1


def test_errors_name_the_argument_and_the_fix(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(ValueError, match=r"q must be in the range \[0, 1\], got 1.5; e.g. q=0.5"):
        tmr.quantile(np.arange(3), 1.5, cluster=cluster)
    with pytest.raises(ValueError, match=r"p must be in the range \[0, 100\], got \[-1\]"):
        tmr.percentile(np.arange(3), [-1], cluster=cluster)
    with pytest.raises(ValueError, match=r"method must be one of 'linear', .* got 'hazen'"):
        tmr.quantile(np.arange(3), 0.5, method="hazen", cluster=cluster)
    for bad in [0, 1, -0.1, True, "0.01"]:
        with pytest.raises(ValueError, match=r"epsilon must be a number in \(0, 1\).* or None for the exact answer; got"):
            tmr.quantile(np.arange(3), 0.5, epsilon=bad, cluster=cluster)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"axis=1 is axis 1 of 2-d data .* pass axis=0 \(or -2: one result per column\) or None"):
        tmr.median(np.zeros((3, 2)), axis=1, cluster=cluster)
    with pytest.raises(ValueError, match=r"axis 1 is out of bounds for 1-d data; pass axis=0 \(or -1\) or None"):
        tmr.median(np.zeros(3), axis=1, cluster=cluster)
    with pytest.raises(tmr.InputError, match=r"x has no values \(shape \(0,\)\); a median needs at least one value"):
        tmr.median(np.zeros(0), cluster=cluster)
    same(tmr.quantile(np.zeros((4, 0)), 0.5, axis=0, cluster=cluster), np.quantile(np.zeros((4, 0)), 0.5, axis=0), np.zeros(0))
    with pytest.raises(tmr.InputError, match=r"x must be 1-D or 2-D \(rows × columns\), got shape \(2, 2, 2\)"):
        tmr.median(np.zeros((2, 2, 2)), cluster=cluster)
    with pytest.raises(TypeError, match=r"x must hold integers .* got dtype bool; convert it"):
        tmr.median(np.array([True, False]), cluster=cluster)
    with pytest.raises(TypeError, match=r"speculate=True does not apply to quantiles"):
        tmr.median(np.arange(3.0), cluster=cluster, speculate=True)
