"""Shard files: save_shards/load_shards round-trip, and a worker trusts nothing in a shard file.

Each test reads real files on real workers; the memory a worker grows by is read from
``/proc/<pid>/status`` (its peak resident set, VmHWM).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from tensorflow.core.framework import tensor_pb2, types_pb2

import tfmapreduce as tmr

MB = 1 << 20


def peak_rss(pid: int) -> int:
    """The peak resident memory of a process so far (VmHWM), in bytes (Linux)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for process {pid}")


def header_only(dtype: int, *dims: int, content: bytes = b"") -> bytes:
    """A serialized TensorProto that claims ``dims`` of ``dtype`` and holds ``content`` (no element by default)."""
    proto = tensor_pb2.TensorProto(dtype=dtype, tensor_content=content)
    for n in dims:
        proto.tensor_shape.dim.add(size=n)
    return proto.SerializeToString()


def test_save_and_load_shards_round_trip(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    x = np.random.default_rng(3).normal(size=(50, 3)).astype(np.float32)
    names = tmr.save_shards(x, tmp_path, sizes=[20, 0, 30])
    assert sorted(os.listdir(tmp_path)) == sorted([*names, "shards.json"])
    with tmr.load_shards(tmp_path, cluster=cluster) as data:
        assert [s.rows for s in data.plan.shards] == [20, 0, 30]
        np.testing.assert_array_equal(data.gather(), x)
        total, stats = tmr.sum(data, axis=0, return_stats=True)
        np.testing.assert_allclose(total, x.astype(np.float64).sum(axis=0), rtol=1e-12)
        assert stats.bytes_sent == 0


def test_missing_or_corrupt_shard_files_name_the_file_and_the_task(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    x = np.arange(40.0).reshape(20, 2)
    names = tmr.save_shards(x, tmp_path, sizes=[8, 12])
    os.remove(tmp_path / names[1])
    with pytest.raises(tmr.InputError, match=rf"{names[1]}.*task /job:local/task:\d") as missing:
        tmr.load_shards(tmp_path, cluster=cluster)
    assert str(tmp_path) in str(missing.value)
    (tmp_path / names[1]).write_bytes(b"not a tensor at all")
    with pytest.raises(tmr.InputError, match=rf"{names[1]}.*task /job:local/task:\d"):
        tmr.load_shards(tmp_path, cluster=cluster)
    os.remove(tmp_path / "shards.json")
    with pytest.raises(tmr.InputError, match=r"shards\.json"):
        tmr.load_shards(tmp_path, cluster=cluster)


def test_a_header_claiming_more_than_the_file_holds_is_refused_before_any_allocation(
    cluster: tmr.LocalCluster, tmp_path: Path
) -> None:
    # Before: a 12-byte file claiming [3e8] float64 (the manifest: 1 row) made its worker grow by 2.4 GB.
    names = tmr.save_shards(np.zeros(2), tmp_path, sizes=[1, 1])
    claim = header_only(types_pb2.DT_DOUBLE, 300_000_000)
    assert len(claim) == 12
    (tmp_path / names[0]).write_bytes(claim)
    task1 = "/job:local/task:1"
    before = peak_rss(cluster.pids[1])
    with pytest.raises(tmr.InputError) as error:
        tmr.load_shards(tmp_path, cluster=cluster, devices=[task1, task1])
    grew = peak_rss(cluster.pids[1]) - before
    assert grew < 200 * MB, f"the worker grew by {grew / MB:.0f} MB reading a 12-byte file"
    message = str(error.value)
    assert names[0] in message
    assert task1 in message
    assert "header" in message


@pytest.mark.parametrize(
    ("claim", "says"),
    [
        (header_only(types_pb2.DT_DOUBLE, 1, 1, content=bytes(8)), "shape"),
        (header_only(types_pb2.DT_FLOAT, 2, content=bytes(8)), "type"),
        (header_only(types_pb2.DT_DOUBLE, content=bytes(8)), "shape"),  # a scalar
    ],
    ids=["shape", "dtype", "scalar"],
)
def test_a_header_that_disagrees_with_the_manifest_is_refused(
    cluster: tmr.LocalCluster, tmp_path: Path, claim: bytes, says: str
) -> None:
    names = tmr.save_shards(np.arange(3.0), tmp_path, sizes=[1, 2])
    (tmp_path / names[0]).write_bytes(claim)  # as long as the manifest's row: only the header tells
    with pytest.raises(tmr.InputError, match=rf"{names[0]}.*header.*{says}"):
        tmr.load_shards(tmp_path, cluster=cluster)
    names = tmr.save_shards(np.zeros((0, 3)), tmp_path / "empty", sizes=[0, 0])
    with tmr.load_shards(tmp_path / "empty", cluster=cluster) as data:  # zero-row shards: dims of size 0 are omitted
        assert data.gather().shape == (0, 3)
