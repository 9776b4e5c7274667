"""Native kernels: built on this machine, loaded by the client and the workers, and a stock fallback where absent."""

from __future__ import annotations

import ast
import collections
import hashlib
import logging
import os
import pathlib
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples

import tfmapreduce as tmr
from tfmapreduce import _combine, _kernels, _native, _per_key
from tfmapreduce._source import sources

TEXTS = [
    b"the cat  the\that\n",
    b"\t\n\x0b\x0c\r ",  # only whitespace
    b"",
    b"word",
    b"a\x0bb\x0cc\rd",  # every ASCII whitespace splits
    "na\u00efve caf\u00e9 \u00e9t\u00e9".encode(),  # UTF-8 bytes are never whitespace
    b"\xa0x\x85y \x00z\x00",  # nor are non-ASCII bytes or NUL
    b" lead and trail ",
]


@pytest.fixture(scope="module")
def ops() -> object:
    found = _native.kernels()
    if found is None:
        pytest.skip("no C++ compiler on this machine: the native kernels cannot be built (the stock path is tested)")
    return found


def test_the_word_counts_kernel_counts_what_bytes_split_splits(ops: object) -> None:
    words, counts = ops.tmr_word_counts(tf.constant(TEXTS))  # type: ignore[attr-defined]
    assert dict(zip(words.numpy().tolist(), counts.numpy().tolist(), strict=True)) == collections.Counter(
        w for text in TEXTS for w in text.split()
    )
    assert words.numpy().tolist()[:3] == [b"the", b"cat", b"hat"]  # first-seen order, each word once
    empty_words, empty_counts = ops.tmr_word_counts(tf.zeros([0], tf.string))  # type: ignore[attr-defined]
    assert empty_words.shape == (0,)
    assert empty_counts.dtype == tf.int64


def test_word_count_uses_the_kernel_on_a_cluster_that_has_it(ops: object, cluster: tmr.LocalCluster) -> None:
    assert _kernels.available(cluster, 30)
    lines = np.array([t.decode("utf-8", "replace") for t in TEXTS] * 50)
    expected = collections.Counter(w for line in lines for w in line.encode().split())
    result = tmr.recipes.word_count(lines, cluster=cluster)
    assert {k.encode(): v for k, v in result.to_dict().items()} == expected
    assert result.values.dtype == np.int64


@pytest.fixture(scope="module")
def without_kernels() -> Iterator[tmr.LocalCluster]:
    """A cluster whose workers started with TFMAPREDUCE_NATIVE=0: they have no native kernel."""
    os.environ[_native.ENV] = "0"
    try:
        cluster = tmr.LocalCluster(1)
    finally:
        del os.environ[_native.ENV]
    with cluster:
        yield cluster


def test_a_cluster_without_the_kernels_counts_words_with_stock_ops(
    ops: object, without_kernels: tmr.LocalCluster, tmp_path: pathlib.Path
) -> None:
    assert not _kernels.available(without_kernels, 30)
    lines = ["the cat", "the hat", "\tthe\r"]
    assert tmr.recipes.word_count(lines, cluster=without_kernels).to_dict() == {"cat": 1, "hat": 1, "the": 3}
    path = tmp_path / "words.txt"
    path.write_bytes(b"the cat\nthe  hat\n\n\ta b\x0bc")
    counts = tmr.recipes.word_count(tmr.read_text(str(path)), cluster=without_kernels).to_dict()
    assert counts == {"the": 2, "cat": 1, "hat": 1, "a": 1, "b": 1, "c": 1}  # text files' words come back as str


def test_a_failed_build_is_logged_and_leaves_the_stock_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("CXX", "false")  # a compiler that always fails
    with caplog.at_level(logging.WARNING, logger="tfmapreduce.native"):
        assert _native.build() is None
    assert "building the native kernels in" in caplog.text
    assert "false exited 1" in caplog.text
    assert not list(_native.cache_dir().glob("native-*"))  # no half-built library left to load
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "tfmapreduce").write_text("a file where the cache folder should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    monkeypatch.delenv("CXX")
    assert _native.build() is None  # an unusable cache folder: logged, stock ops
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setattr(pathlib.Path, "home", classmethod(_no_home))
    assert _native.build() is None  # no home at all: logged, stock ops
    assert "set XDG_CACHE_HOME" in caplog.text


def _no_home(cls: type) -> pathlib.Path:
    raise RuntimeError("Could not determine home directory.")


# -- trust: only a kernel this user built, whole, from a folder nobody else can write -------------

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CLIENT = """
import logging, sys
import tfmapreduce as tmr
logging.basicConfig(stream=sys.stderr, level=logging.INFO)
with tmr.LocalCluster(1) as cluster:
    print(tmr.recipes.word_count(["to be or", "not to be"], cluster=cluster).to_dict(), flush=True)
"""

_COUNTS = {"to": 2, "be": 2, "or": 1, "not": 1}


def _python(code: str, cache: pathlib.Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh client process (its workers inherit its environment) with ``cache`` as XDG_CACHE_HOME."""
    environ = dict(os.environ, XDG_CACHE_HOME=str(cache), PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    environ.pop(_native.ENV, None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=600, check=False, env=environ | env
    )


def _plant(folder: pathlib.Path, marker: pathlib.Path) -> list[pathlib.Path]:
    """Plant a shared library whose constructor writes ``marker`` under every name a kernel may have in ``folder``,
    with a record of its hash (what an attacker who can write the folder would do); the planted files."""
    source = folder / "evil.c"
    source.write_text(
        f'#include <stdio.h>\n__attribute__((constructor)) static void run(void) {{ fclose(fopen("{marker}", "w")); }}\n'
    )
    evil = folder / "evil.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(source), "-o", str(evil)], check=True, capture_output=True, timeout=120)
    source.unlink()
    digest = _native.digest()
    sha = hashlib.sha256(evil.read_bytes()).hexdigest()
    planted = [folder / f"native-{digest}.so", folder / _native.library_name(digest, sha), folder / _native.record_name(digest)]
    shutil.copy(evil, planted[0])
    os.replace(evil, planted[1])
    planted[2].write_text(sha)
    return planted


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to build the planted library with")
def test_a_library_planted_in_a_world_writable_cache_is_never_loaded(tmp_path: pathlib.Path) -> None:
    # Before: a .so with the predictable name in a world-writable XDG_CACHE_HOME ran its constructor in
    # the client and in every worker.
    cache = tmp_path / "cache"
    folder = cache / "tfmapreduce"
    folder.mkdir(parents=True)
    os.chmod(cache, 0o777)
    os.chmod(folder, 0o777)
    marker = tmp_path / "constructor-ran"
    _plant(folder, marker)
    done = _python(_CLIENT, cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert ast.literal_eval(done.stdout.strip()) == _COUNTS  # with stock ops
    assert not marker.exists(), "the planted library ran"
    assert f"{folder} is not a private folder of this user" in done.stderr
    assert "jobs use stock TensorFlow ops" in done.stderr


@pytest.mark.skipif(shutil.which("cc") is None or os.getuid() != 0, reason="needs a C compiler and root (to chown)")
def test_a_library_of_another_user_in_a_private_folder_is_never_loaded(tmp_path: pathlib.Path) -> None:
    folder = tmp_path / "tfmapreduce"
    folder.mkdir(mode=0o700)
    marker = tmp_path / "constructor-ran"
    for path in _plant(folder, marker):
        os.chown(path, 65534, 65534)  # nobody's
    done = _python(_CLIENT, tmp_path, CXX="false")  # and no compiler that works: nothing to replace them with
    assert done.returncode == 0, done.stderr[-3000:]
    assert ast.literal_eval(done.stdout.strip()) == _COUNTS
    assert not marker.exists(), "the planted library ran"
    assert "is not this user's" in done.stderr


_BUILD = """
from tfmapreduce import _native
path = _native.build()
print(path, _native.kernels() is not None, flush=True)
"""


def _build_at_once(cache: pathlib.Path, processes: int = 2) -> None:
    """``processes`` client processes building the kernels into ``cache`` at the same time: each gets a whole one."""
    environ = dict(os.environ, XDG_CACHE_HOME=str(cache), PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    environ.pop(_native.ENV, None)
    children = [
        subprocess.Popen([sys.executable, "-c", _BUILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ)
        for _ in range(processes)
    ]
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err[-3000:]
        assert out.split()[1:] == ["True"], err[-3000:]


def test_a_truncated_kernel_is_never_loaded_and_two_processes_rebuild_it_whole(ops: object, tmp_path: pathlib.Path) -> None:
    # Before: a truncated .so in the cache killed LocalCluster() with SIGBUS.
    cache = tmp_path / "cache"
    folder = cache / "tfmapreduce"
    folder.mkdir(parents=True, mode=0o700)
    record = _native.record_name(_native.digest())  # the kernel this session built (the ops fixture), copied
    built = _native.library_name(_native.digest(), (_native.cache_dir() / record).read_text().strip())
    for name in (record, built):
        shutil.copy2(_native.cache_dir() / name, folder / name)
    for library in folder.glob("native-*.so"):
        with open(library, "r+b") as f:
            f.truncate(library.stat().st_size // 2)
    done = _python(_CLIENT, cache, CXX="false")  # no working compiler: nothing to rebuild it with
    assert done.returncode == 0, done.stderr[-3000:]
    assert ast.literal_eval(done.stdout.strip()) == _COUNTS  # with stock ops
    assert "does not match the hash recorded when it was built" in done.stderr
    assert "jobs use stock TensorFlow ops" in done.stderr
    _build_at_once(cache)  # with a compiler, the damaged kernel is rebuilt in its place, by both at once
    assert stat.S_IMODE(folder.stat().st_mode) & 0o022 == 0
    libraries = sorted(folder.glob("native-*.so"))
    assert libraries, list(folder.iterdir())
    assert not [p for p in folder.iterdir() if not p.name.startswith("native-")]  # no partial file left
    for library in libraries:
        assert stat.S_IMODE(library.stat().st_mode) & 0o022 == 0
    sha = (folder / _native.record_name(_native.digest())).read_text().strip()
    assert hashlib.sha256((folder / _native.library_name(_native.digest(), sha)).read_bytes()).hexdigest() == sha


@pytest.mark.parametrize("kernels", ["native", "stock"])
@pytest.mark.parametrize("block", [None, 5])  # 5: the file read in blocks (a large file's path), words straddling them
def test_a_lone_cr_splits_words_over_files_as_over_shipped_lines(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path, kernels: str, block: int | None
) -> None:
    """One rule: ASCII whitespace, \\r included, splits words (bytes.split), whether the lines are shipped or in files."""
    from tfmapreduce import _text

    if kernels == "native":
        request.getfixturevalue("ops")  # skips where no kernel can be built
    cluster = request.getfixturevalue("cluster" if kernels == "native" else "without_kernels")
    assert _kernels.available(cluster, 30) == (kernels == "native")
    if block is not None:
        monkeypatch.setattr(_text, "TEXT_BLOCK", block)
    text = b"one\rtwo three\r\nfour\rfive\n\rsix\r"
    expected = collections.Counter(text.split())
    path = tmp_path / "cr.txt"
    path.write_bytes(text)
    over_files = tmr.recipes.word_count(tmr.read_text(str(path), encoding="bytes"), cluster=cluster).to_dict()
    assert over_files == expected
    shipped = tmr.recipes.word_count(np.array(text.split(b"\n"), dtype=object), cluster=cluster).to_dict()
    assert shipped == expected


# --------------------------------------------------------------------------- CSV lines parsed by the kernel

CSV_FIELDS = [
    "1",
    "-2.5",
    " 3 ",
    "+4",
    "1e3",
    "0x1",
    "",
    "abc",
    '"5"',
    '"a,b"',
    '"x""y"',
    "nan",
    "-inf",
    "1e400",
    "2147483648",
    "7",
]


def _csv_fields(reader: object, lines: list[bytes], layout: object) -> list[np.ndarray] | str:
    """What ``reader`` decodes of ``lines``: the columns, or the error's words (without the op's name)."""
    try:
        return [c.numpy() for c in reader.fields(tf.constant(lines, tf.string), layout, 0)]  # type: ignore[attr-defined]
    except tf.errors.InvalidArgumentError as e:
        return re.sub(r"\s*\[\[.*", "", e.message.split(";")[0]).strip()


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_the_csv_kernel_decodes_what_decode_csv_decodes(ops: object, dtype: str) -> None:
    """TmrDecodeCsv = tf.io.decode_csv on the columns read, line by line: numbers (spaces, signs, quotes, nan, inf,
    overflow), and the same error words (a field missing, not a number, too many or too few fields) for bad lines;
    lines given one per string or joined by \\n in blocks."""
    from tfmapreduce._csv import Csv
    from tfmapreduce._readers import Layout

    rng = np.random.default_rng(3)
    stock = Csv(None, dtype, True, ",")
    native = stock.with_kernels()
    layout = Layout(None, 0, np.dtype(dtype), (2,), 3, (2, 0), (np.dtype(dtype).str,) * 3)
    for _ in range(300):
        lines = [",".join(rng.choice(CSV_FIELDS, rng.choice([3, 3, 3, 2, 4]))).encode() for _ in range(rng.integers(1, 4))]
        want, got = _csv_fields(stock, lines, layout), _csv_fields(native, lines, layout)
        if isinstance(want, str) or isinstance(got, str):
            kinds = ("fields but have", "is not a valid", "required but missing", "Quote")
            assert isinstance(want, str), (lines, want, got)
            assert isinstance(got, str), (lines, want, got)
            assert [k in want for k in kinds] == [k in got for k in kinds], (lines, want, got)
            assert re.search(r"record (\d+)", want)[1] == re.search(r"record (\d+)", got)[1], (lines, want, got)  # type: ignore[index]
            continue
        for w, g in zip(want, got, strict=True):
            np.testing.assert_array_equal(g, w, err_msg=repr(lines))
            assert g.dtype == w.dtype
        blocks = _csv_fields(native, [b"\n".join(lines[:2]), *lines[2:]], layout)  # whole lines joined in one string
        for w, g in zip(want, blocks, strict=True):
            np.testing.assert_array_equal(g, w, err_msg=repr(lines))


def test_read_csv_parses_with_the_kernel_where_every_task_has_it(
    ops: object, cluster: tmr.LocalCluster, without_kernels: tmr.LocalCluster, tmp_path: pathlib.Path
) -> None:
    rows = np.random.default_rng(4).normal(size=(5000, 3))
    np.savetxt(tmp_path / "a.csv", rows, delimiter=",", header="x,y,z", comments="")
    data = tmr.read_csv(str(tmp_path / "a.csv"), columns=["z", "x"], dtypes="float64")
    for where, kernel in ((cluster, True), (without_kernels, False)):
        (source,) = _kernels.with_kernels(sources(data), where, 30)
        assert source.reader.native is kernel  # type: ignore[attr-defined]
        np.testing.assert_allclose(tmr.sum(data, axis=0, cluster=where), rows[:, [2, 0]].sum(0), rtol=1e-12)


@settings(max_examples=examples(60), deadline=None)
@given(
    n=st.integers(0, 300),
    span=st.sampled_from([1, 7, 300, 1 << 40]),  # 1 << 40: keys too sparse to bin by offset (the hashed path)
    key_dtype=st.sampled_from([tf.int32, tf.int64]),
    dtype=st.sampled_from([tf.float32, tf.float64, tf.int32, tf.int64]),
    columns=st.integers(1, 2),
    seed=st.integers(0, 2**32 - 1),
)
def test_sums_by_key_give_what_the_stock_segment_sums_give(
    ops: object, n: int, span: int, key_dtype: tf.DType, dtype: tf.DType, columns: int, seed: int
) -> None:
    """TmrSumsByKey, for every built-in form it stands in for (sum, count, mean; partial and merge), bit for bit."""
    rng = np.random.default_rng(seed)
    span = min(span, 2**31 - 1) if key_dtype == tf.int32 else span
    keys = tf.constant(rng.integers(-span // 2, span // 2 + 1, n), key_dtype)
    column = lambda: tf.constant(rng.normal(0, 1e3, n) if dtype.is_floating else rng.integers(-1000, 1000, n), dtype)  # noqa: E731
    rows = tuple(column() for _ in range(columns))
    rows = rows[0] if columns == 1 else rows
    f64 = tf.nest.map_structure(lambda t: tf.cast(t, tf.float64), rows)
    counts = tf.constant(rng.integers(1, 5, n), tf.int64)
    forms = [tmr.combiners.sum.per_key, tmr.combiners.count.per_key, tmr.combiners.mean.per_key]
    for combine, rows_in in [
        (forms[0].partial, rows),
        (forms[0].merge, rows),
        (forms[1].partial, rows),
        (forms[1].merge, counts),  # a count's partials: int64 counts
        (forms[2].partial, rows),
        (forms[2].merge, (f64, tf.cast(counts, tf.float64))),  # a mean's partials: float64 sums and counts
    ]:
        assert combine in _combine.SUMS
        native = _per_key.by_key(keys, rows_in, combine, ops)
        stock = _per_key.by_key(keys, rows_in, combine)
        order, at = np.argsort(native[0].numpy()), np.argsort(stock[0].numpy())
        np.testing.assert_array_equal(native[0].numpy()[order], stock[0].numpy()[at])
        for a, b in zip(tf.nest.flatten(native[1]), tf.nest.flatten(stock[1]), strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a.numpy()[order], b.numpy()[at])
