"""Joins over their budget, spilled (grace hash): every ``how``, integer and string keys, sides several times a
device's budget, through the workers' disks, against pandas and the in-memory join on real workers."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import tfmapreduce as tmr
from tests._kinds.test_spill import _tmpfs
from tfmapreduce._native.loader import has, kernels

BUDGET = 200_000
"""A device's budget in these tests: 200 kB, against sides of 3× that and more."""

pytestmark = pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")


def _rows(r: Any) -> list[tuple[Any, ...]]:
    """A join result's rows as sorted tuples (key, left values..., right values...), None where a side is missing."""
    left = [c.tolist() for c in (r.left if isinstance(r.left, tuple) else (r.left,))]
    right = [c.tolist() for c in (r.right if isinstance(r.right, tuple) else (r.right,))]
    out = []
    for i, (key, lm, rm) in enumerate(zip(r.keys.tolist(), r.left_matched.tolist(), r.right_matched.tolist(), strict=True)):
        lv = tuple(c[i] for c in left) if lm else (None,) * len(left)
        rv = tuple(c[i] for c in right) if rm else (None,) * len(right)
        out.append((key, *lv, *rv))
    return sorted(out, key=repr)


INTS = {"key", "r", "l2"}
"""The integer columns of the pandas frames (pandas makes them float where an outer join fills them)."""


def _pandas(left: pd.DataFrame, right: pd.DataFrame, how: str) -> list[tuple[Any, ...]]:
    """``pandas.merge``'s rows as sorted tuples, None where a side is missing."""
    merged = left.merge(right, on="key", how=how)
    return sorted([tuple(_plain(c, v) for c, v in row.items()) for row in merged.to_dict("records")], key=repr)


def _plain(column: str, v: Any) -> Any:
    if isinstance(v, float) and np.isnan(v):
        return None
    return int(v) if column in INTS and not isinstance(v, str) else v


@pytest.mark.parametrize("how", ["inner", "left", "right", "outer"])
def test_a_join_over_three_times_its_budget_spills_and_equals_pandas_merge(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, spilled_parts: Callable[[], int], how: str
) -> None:
    rng = np.random.default_rng(7)
    lk, rk = rng.integers(0, 20_000, 40_000), rng.integers(8_000, 28_000, 40_000)  # 640 kB a side; some keys on one side
    lv, rv = rng.normal(size=lk.size), np.arange(rk.size)
    with caplog.at_level(logging.INFO, logger="tfmapreduce"):
        got = tmr.join((lk, lv), (rk, rv), how=how, max_bytes=BUDGET, reducers=2, cluster=cluster)
    assert spilled_parts() >= 3  # each reducer joined one sub-partition at a time
    frames = pd.DataFrame({"key": lk, "l": lv}), pd.DataFrame({"key": rk, "r": rv})
    assert _rows(got) == _pandas(*frames, how)
    assert os.listdir(spill) == []
    memory = tmr.join((lk, lv), (rk, rv), how=how, reducers=2, cluster=cluster)
    assert _rows(got) == _rows(memory)


def test_a_join_of_string_keys_and_several_columns_spills_and_equals_pandas_merge(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, spilled_parts: Callable[[], int]
) -> None:
    rng = np.random.default_rng(8)
    lk = np.array([f"user{i}" for i in rng.integers(0, 3_000, 15_000)])
    rk = np.array([f"user{i}" for i in rng.integers(1_000, 4_000, 6_000)])
    l1, l2 = rng.normal(size=lk.size), rng.integers(0, 100, lk.size).astype(np.int32)
    rv = np.array([f"city{i % 97}" for i in range(rk.size)])
    with caplog.at_level(logging.INFO, logger="tfmapreduce"):
        got, stats = tmr.join(
            (lk, (l1, l2)), (rk, rv), how="outer", max_bytes=BUDGET, reducers=2, cluster=cluster, return_stats=True
        )
    assert isinstance(stats, tmr.RunStats)  # the spill run's
    assert spilled_parts() >= 3
    assert isinstance(got.keys[0], str)
    assert isinstance(got.right[np.flatnonzero(got.right_matched)[0]], str)
    frames = pd.DataFrame({"key": lk, "l1": l1, "l2": l2}), pd.DataFrame({"key": rk, "r": rv})
    assert _rows(got) == _pandas(*frames, "outer")
    assert os.listdir(spill) == []


def test_one_key_whose_pairs_exceed_the_budget_is_refused_named_with_its_bytes_and_leaves_no_spill(
    cluster: tmr.LocalCluster, spill: Path
) -> None:
    lk = np.concatenate([np.arange(10_000), np.full(600, 42)])  # key 42: 601 × 61 pairs, 879,744 bytes alone
    rk = np.concatenate([np.arange(10_000), np.full(60, 42)])
    with pytest.raises(
        tmr.ReducerMemoryError,
        match=r"join\(how='inner'\): reducer \d \(/job:local/.*\) would make 36,661 rows of the key 42 alone, about "
        r"879,864 bytes of keys and values, more than its budget of 200,000 bytes \(max_bytes=200000\), even spilled",
    ):
        tmr.join((lk, np.ones(lk.size)), (rk, np.ones(rk.size)), max_bytes=BUDGET, reducers=2, cluster=cluster)
    assert os.listdir(spill) == []


def test_a_resident_join_over_its_budget_is_still_refused(cluster: tmr.LocalCluster, spill: Path) -> None:
    keys = np.arange(40_000) % 5_000
    with pytest.raises(tmr.ReducerMemoryError, match=r"the join would make [\d,]+ rows on .*max_bytes=200000"):
        tmr.join((keys, np.ones(keys.size)), (keys, np.ones(keys.size)), max_bytes=BUDGET, cluster=cluster, resident=True)
    assert os.listdir(spill) == []


def test_a_full_spill_disk_fails_the_join_naming_the_task_and_leaves_nothing(
    cluster: tmr.LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = np.arange(70_000)  # 2.2 MB of both sides to spill on a 1 MiB disk
    with _tmpfs(tmp_path / "small") as small:
        monkeypatch.setattr(tempfile, "tempdir", str(small))
        with pytest.raises(
            tmr.OutputError,
            match=r"join\(how='left'\): task /job:local/task:\d could not write its spill files under "
            r".*small/tfmapreduce-spill-\w+ \(it is full\); it needs about [\d,]+ bytes there",
        ):
            tmr.join(
                (keys, np.ones(keys.size)), (keys, np.ones(keys.size)), how="left", max_bytes=BUDGET, cluster=cluster, retries=0
            )
        assert os.listdir(small) == []


@pytest.mark.parametrize("how", ["semi", "anti", "left"])
def test_a_table_join_over_its_budget_spills_or_runs_nothing_and_equals_pandas(
    cluster: tmr.LocalCluster, spill: Path, caplog: pytest.LogCaptureFixture, spilled_parts: Callable[[], int], how: str
) -> None:
    rng = np.random.default_rng(9)
    left = pd.DataFrame({"k": rng.integers(0, 30_000, 40_000), "a": rng.normal(size=40_000)})
    right = pd.DataFrame({"k": rng.integers(15_000, 45_000, 40_000), "b": np.arange(40_000)})
    with caplog.at_level(logging.INFO, logger="tfmapreduce"), tmr.stats() as seen:
        got = tmr.table(left).join(tmr.table(right), on="k", how=how, max_bytes=BUDGET, reducers=2, cluster=cluster)
    if how == "left":
        assert spilled_parts() >= 2
    else:  # a semi or anti join of client tables runs nothing, whatever its budget: its keys are looked up on the client
        assert seen.runs == []
    if how == "left":
        expected = left.merge(right, on="k", how="left").astype({"b": "Int64"})  # (a table fills with nulls)
    else:
        inside = left["k"].isin(right["k"])
        expected = left[inside if how == "semi" else ~inside]
    frame = got.to_pandas()
    assert sorted(map(repr, frame.itertuples(index=False))) == sorted(map(repr, expected.itertuples(index=False)))
    assert os.listdir(spill) == []
