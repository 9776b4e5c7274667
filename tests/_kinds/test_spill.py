"""The spilled sort: tmr.sort / sort_by_key with directory= over data several times its reducers' budget, through the
workers' disks, against numpy on real workers."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tfmapreduce as tmr
from tfmapreduce._engine import driver as _engine
from tfmapreduce._kinds import spilled_sort
from tfmapreduce._kinds.sort import Sort
from tfmapreduce._kinds.spill import COPIES, Spill
from tfmapreduce._native.loader import has, kernels
from tfmapreduce._options import RunOptions

BUDGET = 1_000_000
"""A reducer's budget in these tests: 1 MB, against inputs of 3 MB and more."""

pytestmark = pytest.mark.skipif(not has(kernels(), "tmr_remove_spill"), reason="the native kernels' spill family")


def _read(written: tmr.Written) -> np.ndarray:
    return np.concatenate([np.load(p) for p in written.parts])


@pytest.mark.parametrize("descending", [False, True])
def test_a_sort_three_times_its_budget_equals_numpy_and_leaves_no_spill(
    cluster: tmr.LocalCluster, tmp_path: Path, descending: bool
) -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(size=400_000)  # 3.2 MB of float64: 1.6 MB per range of two
    x[rng.integers(0, x.size, 500)] = np.nan
    x[:1000] = -0.0
    x[1000:3000] = 1.5  # many equal values
    spill = tmp_path / "spill"
    spill.mkdir()
    with pytest.raises(tmr.ReducerMemoryError, match=r"or sort into files with directory="):  # in memory, it does not fit
        tmr.sort(x, cluster=cluster, max_bytes=BUDGET, reducers=2, descending=descending)
    written = tmr.sort(
        x, cluster=cluster, max_bytes=BUDGET, reducers=2, descending=descending, directory=tmp_path / "out", spill_dir=spill
    )
    expected = np.sort(x)[::-1] if descending else np.sort(x)
    np.testing.assert_array_equal(_read(written), expected)
    assert max(written.rows) * 8 * COPIES <= BUDGET  # no reducer held more than one bucket
    assert len(written.parts) > 2
    assert sorted(os.listdir(tmp_path / "out")) == ["_SUCCESS", *(os.path.basename(p) for p in written.parts)]
    assert os.listdir(spill) == []
    with tmr.read_npy(written).persist(cluster=cluster) as back:  # the writers' readers take it back
        np.testing.assert_array_equal(back.gather(), expected)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_by_key_three_times_its_budget_is_stable_as_numpy(
    cluster: tmr.LocalCluster, tmp_path: Path, descending: bool
) -> None:
    rng = np.random.default_rng(8)
    n = 150_000
    keys = rng.integers(-50, 50, n).astype(np.int64)  # few keys, many rows each: the order of equal keys shows
    values = np.stack([np.arange(n, dtype=np.float32), rng.random(n, dtype=np.float32)], axis=1)
    spill = tmp_path / "spill"
    spill.mkdir()
    k, v = tmr.sort_by_key(  # 3.6 MB of rows
        keys, values, cluster=cluster, max_bytes=BUDGET, descending=descending, directory=tmp_path / "o", spill_dir=spill
    )
    order = np.lexsort((np.arange(n), -keys if descending else keys))  # stable: equal keys in input order
    np.testing.assert_array_equal(_read(k), keys[order])
    np.testing.assert_array_equal(_read(v), values[order])
    assert k.directory.endswith("keys")
    assert v.directory.endswith("values")
    assert os.listdir(spill) == []


def _words(n: int, seed: int) -> np.ndarray:
    """``n`` unicode strings of 0 to 11 characters, some of several UTF-8 bytes (and the empty string)."""
    rng = np.random.default_rng(seed)
    return np.array(["".join(rng.choice(list("abcdé€"), rng.integers(0, 12))) for _ in range(n)])


@pytest.mark.parametrize("descending", [False, True])
def test_a_sort_of_strings_over_its_budget_equals_numpy_as_s_arrays(
    cluster: tmr.LocalCluster, tmp_path: Path, descending: bool
) -> None:
    x = _words(6_000, 9)  # about 240 kB as the budget counts strings: 120 kB per range of two, held 3× in memory
    spill = tmp_path / "spill"
    spill.mkdir()
    with pytest.raises(tmr.ReducerMemoryError):  # in memory, it does not fit
        tmr.sort(x, cluster=cluster, max_bytes=300_000, reducers=2)
    written = tmr.sort(
        x, cluster=cluster, max_bytes=300_000, reducers=2, descending=descending, directory=tmp_path / "out", spill_dir=spill
    )
    expected = np.char.encode(np.sort(x)[::-1] if descending else np.sort(x), "utf-8")  # UTF-8 bytes: code point order
    got = _read(written)
    assert got.dtype.kind == "S"
    assert written.row == (got.dtype.str, ())
    assert got.tolist() == expected.tolist()
    assert len(written.parts) > 2
    assert os.listdir(spill) == []


def test_a_spilled_sort_of_unicode_strings_runs_the_rounds_it_logs_each_bucket_within_the_budget(
    cluster: tmr.LocalCluster, tmp_path: Path, spill: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 42: the rounds are the buckets the spill logs (one fed graph runs them all), each part within the budget
    as the sort counts it, the result numpy's."""
    x = _words(12_000, 12)  # the empty string and 2- and 3-byte characters among them
    budget = 200_000
    with caplog.at_level(logging.INFO, logger="tfmapreduce"):
        written = tmr.sort(x, cluster=cluster, max_bytes=budget, reducers=2, directory=tmp_path / "out", spill_dir=spill)
    logged = [re.search(r"(\d+) bucket\(s\) per reducer, one round each", r.getMessage()) for r in caplog.records]
    rounds = [int(found.group(1)) for found in logged if found is not None]
    assert rounds == [len(written.parts) // 2]
    assert rounds[0] > 2
    parts = [np.load(p) for p in written.parts]
    assert np.concatenate(parts).tolist() == np.char.encode(np.sort(x), "utf-8").tolist()
    assert max(sum(len(s) + 32 for s in part.tolist()) for part in parts) * COPIES <= budget
    assert os.listdir(spill) == []


def test_sort_by_key_of_binary_keys_and_string_values_is_stable_as_numpy(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    rng = np.random.default_rng(10)
    keys = rng.integers(0, 30, 4_000).astype("S2")  # TeraSort-like fixed-width binary keys, many equal
    values = _words(4_000, 11)
    k, v = tmr.sort_by_key(keys, values, cluster=cluster, max_bytes=500_000, directory=tmp_path / "o", reducers=2)
    order = np.argsort(keys, kind="stable")
    assert _read(k).tolist() == keys[order].tolist()
    assert _read(v).tolist() == np.char.encode(values[order], "utf-8").tolist()
    assert len(k.parts) > 2


def test_the_plan_says_what_spills_where(cluster: tmr.LocalCluster) -> None:
    x = np.arange(400_000, dtype=np.float64)
    kind = Spill(Sort(False, BUDGET), "/scratch", BUDGET)
    plan = _engine.plan(kind, x, RunOptions.of(cluster=cluster, reducers=2, sizes=2))
    assert plan.buckets == 16  # 1.6 MB a range, held 5 times, in buckets of half the budget
    assert "spills 3,200,000 bytes to /scratch/tfmapreduce-spill-" in plan.explain()
    assert "2 range(s) × 16 bucket(s) of about 100,000 bytes" in plan.explain()


def test_a_spill_carries_its_folders_in_its_plan_so_one_kind_serves_two_runs(cluster: tmr.LocalCluster) -> None:
    """Issue 37: each run's spill folder and each attempt's folder in it are values of the plan, fed from it; the kind
    keeps nothing of a run (what a call removes afterwards, spilled_sort.SpillCall holds for that call alone)."""
    import attrs

    x = np.arange(400_000, dtype=np.float64)
    kind = Spill(Sort(False, BUDGET), "/scratch", BUDGET)
    assert {f.name for f in attrs.fields(Spill)} == {"sort", "root", "budget", "ready"}
    settings = RunOptions.of(cluster=cluster, reducers=2, sizes=2)
    first, second = _engine.plan(kind, x, settings), _engine.plan(kind, x, settings)  # two runs planned at once
    assert first == second  # one layout: one program (the folders are fed, not part of the plan's identity)
    assert first.folder != second.folder
    assert os.path.dirname(first.folder) == os.path.dirname(second.folder) == "/scratch"
    assert first.attempt != second.attempt
    assert (kind.fed(first, "spill"), kind.fed(second, "spill")) == (
        os.path.join(first.folder, first.attempt),
        os.path.join(second.folder, second.attempt),
    )
    assert not kind.ready


def test_two_runs_of_one_spill_kind_share_its_program_and_each_removes_its_own_folder(
    cluster: tmr.LocalCluster, tmp_path: Path
) -> None:
    x = np.arange(20_000, dtype=np.float64)[::-1].copy()
    kind = Spill(Sort(False, BUDGET), str(tmp_path), BUDGET // 10)
    settings = RunOptions.of(cluster=cluster, reducers=2, sizes=2)
    runs = [spilled_sort.SpillCall(kind), spilled_sort.SpillCall(kind)]
    with tmr.stats() as stats:
        spilled = [_engine.run(run, x, settings) for run in runs]
    assert [s.compiled for s in stats.runs] == [True, False]  # one program, each run fed its own folder
    first, second = (s.plan.folder for s in spilled)
    assert first != second
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(f) for f in (first, second))
    assert [s.rows.sum() for s in spilled] == [x.size, x.size]
    runs[0].remove()  # the first call's spill removed, the second's untouched
    assert os.listdir(tmp_path) == [os.path.basename(second)]
    runs[1].remove()
    assert os.listdir(tmp_path) == []


def test_a_failure_after_the_spill_leaves_no_spill_file_and_no_output(
    cluster: tmr.LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spilled_sort, "COPIES", 10**6)  # every bucket now counts over the budget once it is spilled
    spill = tmp_path / "spill"
    spill.mkdir()
    with pytest.raises(tmr.ReducerMemoryError, match=r"bucket 0 of the spilled sort \(/job:local/.*\) holds [\d,]+ rows"):
        tmr.sort(np.arange(10_000.0), cluster=cluster, max_bytes=BUDGET, directory=tmp_path / "out", spill_dir=spill)
    assert os.listdir(spill) == []
    assert not (tmp_path / "out").exists()


def test_strings_of_rows_and_bad_spill_dirs_are_refused_before_anything_runs(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    with pytest.raises(
        TypeError, match=r"writes \.npy parts of numbers, or of 1-D strings .*; values has dtype object and shape \(2, 1\)"
    ):
        tmr.sort_by_key(np.arange(2), np.array([[b"a"], [b"b"]]), cluster=cluster, directory=tmp_path / "s")
    with pytest.raises(TypeError, match=r"spill_dir must be an absolute path .*got 'rel'"):
        tmr.sort(np.arange(3), cluster=cluster, directory=tmp_path / "r", spill_dir="rel")
    assert list((tmp_path / "s").glob("**/*")) == []  # its keys and values folders discarded (s itself may stay)
    assert not (tmp_path / "r").exists()


@contextlib.contextmanager
def _tmpfs(mount: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted at ``mount`` (root only; skipped where the OS refuses), unmounted even if the test fails."""
    mount.mkdir()
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("no mount/umount command to make a small spill disk")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for the full spill disk test (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=True)


def test_a_full_spill_disk_names_the_task_the_folder_and_the_bytes_and_leaves_nothing(
    cluster: tmr.LocalCluster, tmp_path: Path
) -> None:
    x = np.arange(400_000, dtype=np.float64)[::-1].copy()  # 3.2 MB to spill on a 1 MiB disk
    with _tmpfs(tmp_path / "small") as small:
        with pytest.raises(
            tmr.OutputError,
            match=r"sort: task /job:local/task:\d could not write its spill files under .*small/tfmapreduce-spill-\w+ "
            r"\(it is full\); it needs [\d,]+ bytes there",
        ):
            tmr.sort(x, cluster=cluster, max_bytes=BUDGET, directory=tmp_path / "out", spill_dir=small, retries=0)
        assert os.listdir(small) == []
    assert not (tmp_path / "out").exists()
