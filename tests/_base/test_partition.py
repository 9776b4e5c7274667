"""The partitioner: every spelling of ``sizes=`` becomes one checked tuple of row counts."""

from __future__ import annotations

import doctest
import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import size_lists, weight_values

import tfmapreduce as tmr
import tfmapreduce._base.device
import tfmapreduce._base.partition
import tfmapreduce._base.place
import tfmapreduce._base.plan
import tfmapreduce._cluster.spec
from tfmapreduce._base.partition import canonical_sizes, even_sizes


@pytest.mark.parametrize(
    "module",
    [
        tfmapreduce._base.partition,
        tfmapreduce._base.place,
        tfmapreduce._base.device,
        tfmapreduce._cluster.spec,
        tfmapreduce._base.plan,
    ],
)
def test_doctests_of_the_canonicalizers(module: object, cluster: tmr.LocalCluster) -> None:
    import tensorflow as tf

    names = {"np": np, "tf": tf, "tmr": tmr, "cluster": cluster}  # as the docstrings' own namespace (conftest.py)
    result = doctest.testmod(module, extraglobs=names, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.attempted > 0, f"{module} has no doctest"
    assert result.failed == 0


def test_none_is_even_over_the_default_shards() -> None:
    assert canonical_sizes(None, rows=10, default_shards=4) == (3, 3, 2, 2)
    assert canonical_sizes(None, rows=2, default_shards=4) == (1, 1, 0, 0)
    assert canonical_sizes(None, rows=0, default_shards=3) == (0, 0, 0)


def test_an_int_is_that_many_even_shards() -> None:
    assert canonical_sizes(3, rows=10, default_shards=4) == (4, 3, 3)
    assert canonical_sizes(1, rows=10, default_shards=4) == (10,)
    assert canonical_sizes(np.int64(2), rows=5, default_shards=4) == (3, 2)


def test_a_list_is_kept_as_given_empty_shards_included() -> None:
    assert canonical_sizes([0, 30, 0, 70, 0], rows=100, default_shards=2) == (0, 30, 0, 70, 0)
    assert canonical_sizes((10,), rows=10, default_shards=2) == (10,)
    assert canonical_sizes(np.array([3, 7]), rows=10, default_shards=2) == (3, 7)
    assert canonical_sizes([np.int32(3), np.int64(7)], rows=10, default_shards=2) == (3, 7)
    assert all(type(s) is int for s in canonical_sizes(np.array([3, 7]), rows=10, default_shards=2))


def test_weights_round_by_largest_remainder() -> None:
    assert canonical_sizes(tmr.weights(1, 3), rows=10, default_shards=2) == (3, 7)  # 2.5, 7.5: tie → first index
    assert canonical_sizes(tmr.weights(1, 1, 1), rows=10, default_shards=2) == (4, 3, 3)
    assert canonical_sizes(tmr.weights(1, 2), rows=10, default_shards=2) == (3, 7)  # 3.33, 6.67
    assert canonical_sizes(tmr.weights(2, 1), rows=10, default_shards=2) == (7, 3)
    assert canonical_sizes(tmr.weights(0, 1), rows=10, default_shards=2) == (0, 10)
    assert canonical_sizes(tmr.weights(0.1, 0.2, 0.7), rows=1000, default_shards=2) == (100, 200, 700)
    assert canonical_sizes(tmr.weights([1, 3]), rows=4, default_shards=2) == (1, 3)


@given(rows=st.integers(0, 10_000), shards=st.integers(1, 50))
def test_even_sizes_differ_by_at_most_one(rows: int, shards: int) -> None:
    sizes = even_sizes(rows, shards)
    assert len(sizes) == shards
    assert sum(sizes) == rows
    assert max(sizes) - min(sizes) <= 1
    assert list(sizes) == sorted(sizes, reverse=True)


@given(rows=st.integers(0, 10_000), values=weight_values())
def test_weights_sum_exactly_and_stay_within_one_row_of_the_exact_share(rows: int, values: list[float]) -> None:
    sizes = canonical_sizes(tmr.weights(*values), rows=rows, default_shards=2)
    assert len(sizes) == len(values)
    assert sum(sizes) == rows
    total = math.fsum(values)
    exact = [rows * v / total for v in values]
    assert all(math.floor(e) <= s <= math.floor(e) + 1 for s, e in zip(sizes, exact, strict=True)), (sizes, exact)
    assert all(s == 0 for s, v in zip(sizes, values, strict=True) if v == 0), "a weight of 0 gets no rows"
    # largest remainder: every shard rounded up had a remainder at least that of every shard rounded down
    up = [e - math.floor(e) for s, e in zip(sizes, exact, strict=True) if s > math.floor(e)]
    down = [e - math.floor(e) for s, e in zip(sizes, exact, strict=True) if s == math.floor(e)]
    if up and down:
        assert min(up) >= max(down) - 1e-9


@given(data=st.data(), rows=st.integers(0, 200))
def test_size_lists_are_canonical_as_given(data: st.DataObject, rows: int) -> None:
    sizes = data.draw(size_lists(rows))
    assert canonical_sizes(sizes, rows=rows, default_shards=3) == tuple(sizes)


@given(rows=st.integers(0, 200), shards=st.integers(1, 8))
def test_int_and_weights_of_ones_agree(rows: int, shards: int) -> None:
    assert canonical_sizes(shards, rows=rows, default_shards=8) == canonical_sizes(
        tmr.weights(*[1] * shards), rows=rows, default_shards=8
    )


def test_the_plan_uses_each_spelling(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(lambda t: t, tmr.combiners.sum)
    x = np.zeros((10, 2), np.float32)
    assert job.plan(x, cluster=cluster).sizes == (3, 3, 2, 2)  # 4 devices
    assert job.plan(x, cluster=cluster, devices=["/job:local/task:1"]).sizes == (10,)  # one shard per listed device
    assert job.plan(x, cluster=cluster, sizes=3).sizes == (4, 3, 3)
    assert job.plan(x, cluster=cluster, sizes=[0, 10, 0]).sizes == (0, 10, 0)
    assert job.plan(x, cluster=cluster, sizes=tmr.weights(1, 4)).sizes == (2, 8)


def test_a_shard_count_is_at_most_the_rows_or_the_devices(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(lambda t: t, tmr.combiners.sum)
    x = np.zeros(100)
    with pytest.raises(tmr.PartitionError) as error:
        job.plan(x, cluster=cluster, sizes=10**6)  # accepted before: a million shards, 999,900 of them empty
    message = str(error.value)
    for words in ("sizes=1000000", "100 rows", "4 devices", "at most max(rows, devices) = 100", "pass sizes=100 or fewer"):
        assert words in message, f"{words!r} not in {message!r}"
    assert job.plan(x, cluster=cluster, sizes=100).sizes == (1,) * 100  # one row a shard: the most rows allow
    assert job.plan(np.zeros(2), cluster=cluster, sizes=4).sizes == (1, 1, 0, 0)  # one shard a device: empty ones too
    with pytest.raises(tmr.PartitionError, match=r"= 4; pass sizes=4"):
        job.plan(np.zeros(2), cluster=cluster, sizes=5)
    with pytest.raises(tmr.PartitionError, match=r"= 100; pass sizes=100"):
        tmr.scatter(x, cluster=cluster, sizes=101)
    assert canonical_sizes(3, rows=0, default_shards=3) == (0, 0, 0)
    with pytest.raises(tmr.PartitionError, match=r"= 3; pass sizes=3"):
        canonical_sizes(4, rows=0, default_shards=3)


_HUGE_COUNT = """
import os, resource, sys
import numpy as np
import tensorflow as tf
import tfmapreduce as tmr
from tfmapreduce._base.partition import canonical_sizes
save, refused = tmr.save_shards, tmr.PartitionError  # every import made before the limit
with open("/proc/self/status") as f:
    vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + (512 << 20), resource.RLIM_INFINITY))  # 512 MiB more, at most
calls = [
    lambda: canonical_sizes(10**12, rows=100, default_shards=4),
    lambda: save(np.zeros(100), sys.argv[1], sizes=10**12),
    lambda: save(np.zeros(100), sys.argv[1], shards=10**12),
]
for call in calls:
    try:
        call()
    except refused as e:
        print("refused:", e)
    else:
        print("accepted")
"""


def test_a_huge_shard_count_is_refused_before_any_list_of_its_length_is_built(tmp_path: pathlib.Path) -> None:
    # Before: sizes=10**12 built a tuple of 10**12 sizes and was OOM-killed past 4 GB (here: a MemoryError).
    done = subprocess.run(
        [sys.executable, "-c", _HUGE_COUNT, str(tmp_path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 3, done.stdout
    assert all(line.startswith("refused: ") and "=1000000000000 asks" in line for line in lines), done.stdout
    assert not list(tmp_path.iterdir())  # nothing written either
