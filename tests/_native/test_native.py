"""Native kernels: built on this machine, loaded by the client and the workers, and a stock fallback where absent."""

from __future__ import annotations

import ast
import collections
import fractions
import hashlib
import itertools
import logging
import math
import os
import pathlib
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import hypothesis
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples

import tfmapreduce as tmr
from tfmapreduce._engine import kernels as _kernels
from tfmapreduce._io.source import sources
from tfmapreduce._native import loader as _native
from tfmapreduce._ops import combine as _combine
from tfmapreduce._ops import per_key as _per_key

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


@pytest.mark.parametrize("negative", [False, True])
def test_float32_sums_with_stock_ops_equal_the_exact_float64_sum(
    without_kernels: tmr.LocalCluster, tmp_path: pathlib.Path, negative: bool
) -> None:
    # Issue 38: the stock path summed sign-checked float32 shards in float32 blocks: 1e-10 off on values near 1e6.
    x = np.random.default_rng(38).normal(1e6, 1.0, 400_000).astype(np.float32)
    x[123] = -x[123] if negative else x[123]
    exact = math.fsum(x.astype(np.float64))
    np.save(tmp_path / "x.npy", x)
    with tmr.scatter(x, cluster=without_kernels) as resident:
        for data in (x, resident, tmr.read_npy(str(tmp_path / "x.npy"))):
            assert float(tmr.sum(data, cluster=without_kernels)) == pytest.approx(exact, rel=1e-12, abs=0)
            assert float(tmr.mean(data, cluster=without_kernels)) == pytest.approx(exact / len(x), rel=1e-12, abs=0)


def test_a_failed_build_is_logged_and_leaves_the_stock_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("CXX", "false")  # a compiler that always fails
    with caplog.at_level(logging.WARNING, logger="tfmapreduce.native"):
        assert _native.build() == {}
    assert "building the native kernels in" in caplog.text
    assert "false exited 1" in caplog.text
    assert not list(_native.cache_dir().glob("native-*"))  # no half-built library left to load
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "tfmapreduce").write_text("a file where the cache folder should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    monkeypatch.delenv("CXX")
    assert _native.build() == {}  # an unusable cache folder: logged, stock ops
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setattr(pathlib.Path, "home", classmethod(_no_home))
    assert _native.build() == {}  # no home at all: logged, stock ops
    assert "set XDG_CACHE_HOME" in caplog.text


def _no_home(cls: type) -> pathlib.Path:
    raise RuntimeError("Could not determine home directory.")


# -- trust: only a kernel this user built, whole, from a folder nobody else can write -------------

ROOT = str(Path(__file__).resolve().parents[2])

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
    planted = [folder / f"native-{digest}.so"]
    shutil.copy(evil, planted[0])
    for family in _native.FAMILIES:
        planted += [folder / _native.library_name(digest, family, sha), folder / _native.record_name(digest, family)]
        shutil.copy(evil, planted[-2])
        planted[-1].write_text(sha)
    evil.unlink()
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
from tfmapreduce._native import loader as _native
print(sorted(_native.build()) == sorted(_native.FAMILIES), _native.kernels() is not None, flush=True)
"""


def _build_at_once(cache: pathlib.Path, compiler: pathlib.Path, processes: int = 2) -> None:
    """``processes`` client processes building the kernels into ``cache`` with ``compiler`` at the same time: each gets
    a whole one."""
    environ = dict(os.environ, XDG_CACHE_HOME=str(cache), PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    environ.pop(_native.ENV, None)
    environ["CXX"] = str(compiler)
    children = [
        subprocess.Popen([sys.executable, "-c", _BUILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ)
        for _ in range(processes)
    ]
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err[-3000:]
        assert out.split() == ["True", "True"], err[-3000:]


def _built() -> dict[str, pathlib.Path]:
    """The library of each family that this session built (the ``ops`` fixture), by family."""
    digest = _native.digest()
    records = {f: (_native.cache_dir() / _native.record_name(digest, f)).read_text().strip() for f in _native.FAMILIES}
    return {f: _native.cache_dir() / _native.library_name(digest, f, sha) for f, sha in records.items()}


def _slow_compiler(folder: pathlib.Path, libraries: dict[str, pathlib.Path]) -> pathlib.Path:
    """A stand-in for the C++ compiler that writes the library of the family it is given (``<family>.cc``), as this
    session built it, where ``-o`` says, half of it first and the rest a second later: two builds at once overlap while
    each output is incomplete, as two real compiles (25 s each here) would, without paying for them (the session's own
    build ran the real compiler)."""
    script = folder / "slow-cxx"
    cases = "".join(f'  */{family}.cc) lib="{library}";;\n' for family, library in libraries.items())
    script.write_text(
        "#!/bin/sh\n"
        'out=""; prev=""; lib=""\n'
        'for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"\n'
        f'case "$a" in\n{cases}esac; done\n'
        'head -c $(($(wc -c < "$lib") / 2)) "$lib" > "$out" && sleep 1 && cat "$lib" > "$out"\n'
    )
    script.chmod(0o700)
    return script


def test_a_truncated_kernel_is_never_loaded_and_two_processes_rebuild_it_whole(ops: object, tmp_path: pathlib.Path) -> None:
    # Before: a truncated .so in the cache killed LocalCluster() with SIGBUS.
    cache = tmp_path / "cache"
    folder = cache / "tfmapreduce"
    folder.mkdir(parents=True, mode=0o700)
    built = _built()  # the kernels this session built (the ops fixture), copied
    for family, library in built.items():
        for path in (library, _native.cache_dir() / _native.record_name(_native.digest(), family)):
            shutil.copy2(path, folder / path.name)
    for library in folder.glob("native-*.so"):
        with open(library, "r+b") as f:
            f.truncate(library.stat().st_size // 2)
    done = _python(_CLIENT, cache, CXX="false")  # no working compiler: nothing to rebuild it with
    assert done.returncode == 0, done.stderr[-3000:]
    assert ast.literal_eval(done.stdout.strip()) == _COUNTS  # with stock ops
    assert "does not match the hash recorded when it was built" in done.stderr
    assert "jobs use stock TensorFlow ops" in done.stderr
    compiler = _slow_compiler(tmp_path, built)
    _build_at_once(cache, compiler)  # with a compiler, the damaged kernel is rebuilt in its place, by both at once
    assert stat.S_IMODE(folder.stat().st_mode) & 0o022 == 0
    libraries = sorted(folder.glob("native-*.so"))
    assert libraries, list(folder.iterdir())
    assert not [p for p in folder.iterdir() if not p.name.startswith("native-")]  # no partial file left
    for library in libraries:
        assert stat.S_IMODE(library.stat().st_mode) & 0o022 == 0
    for family in _native.FAMILIES:
        sha = (folder / _native.record_name(_native.digest(), family)).read_text().strip()
        assert hashlib.sha256((folder / _native.library_name(_native.digest(), family, sha)).read_bytes()).hexdigest() == sha


_PARTIAL = """
import logging, sys
import tensorflow as tf
import tfmapreduce as tmr
from tfmapreduce._engine import kernels as _kernels
from tfmapreduce._native import loader as _native
logging.basicConfig(stream=sys.stderr, level=logging.INFO)
ops = _native.kernels()
print(sorted(op for op in _native.OPS if _native.has(ops, op)), flush=True)
print(ops.tmr_stable_argsort(tf.constant([3, 1, 2])).numpy().tolist(), flush=True)
with tmr.LocalCluster(1) as cluster:
    print([_kernels.available(cluster, 60, *op) for op in [(), ("tmr_word_counts",), ("tmr_read_csv",)]], flush=True)
    print(tmr.recipes.word_count(["to be or", "not to be"], cluster=cluster).to_dict(), flush=True)
"""


def test_a_family_that_fails_to_build_leaves_the_others_usable(ops: object, tmp_path: pathlib.Path) -> None:
    # Before: one kernel that did not build turned all 17 off.
    cache = tmp_path / "cache"
    folder = cache / "tfmapreduce"
    folder.mkdir(parents=True, mode=0o700)
    built = _built()
    for family, library in built.items():  # the session's libraries, but for csv (fails) and words (built now)
        if family not in ("csv", "words"):
            for path in (library, _native.cache_dir() / _native.record_name(_native.digest(), family)):
                shutil.copy2(path, folder / path.name)
    # A compiler that fails on csv.cc and writes words.cc's library as this session's real g++ built it (the ops
    # fixture ran the real compiler; a second real compile of words.cc here costs 25 s and checks nothing more).
    compiler = tmp_path / "cxx"
    compiler.write_text(
        "#!/bin/sh\n"
        'out=""; prev=""\n'
        'for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"\n'
        'case "$a" in */csv.cc) echo "csv.cc:1:1: error: a planted failure" >&2; exit 1;; esac; done\n'
        f'cat "{built["words"]}" > "$out"\n'
    )
    compiler.chmod(0o700)
    done = _python(_PARTIAL, cache, CXX=str(compiler))
    assert done.returncode == 0, done.stderr[-3000:]
    present, order, available, counts = done.stdout.strip().splitlines()
    assert ast.literal_eval(present) == sorted(_native.OPS - {"tmr_decode_csv", "tmr_read_csv"})
    assert ast.literal_eval(order) == [1, 2, 0]
    assert ast.literal_eval(available) == [True, True, False]  # the tasks have the rest; csv jobs use stock ops
    assert ast.literal_eval(counts) == _COUNTS
    assert (folder / _native.record_name(_native.digest(), "words")).exists()  # compiled beside the failed one
    assert not (folder / _native.record_name(_native.digest(), "csv")).exists()
    assert "failed for the csv family (csv.cc: " in done.stderr
    assert "csv.cc:1:1: error: a planted failure)" in done.stderr
    assert "for tmr_decode_csv, tmr_read_csv jobs use stock TensorFlow ops" in done.stderr


@pytest.mark.parametrize("kernels", ["native", "stock"])
@pytest.mark.parametrize("block", [None, 5])  # 5: the file read in blocks (a large file's path), words straddling them
def test_a_lone_cr_splits_words_over_files_as_over_shipped_lines(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path, kernels: str, block: int | None
) -> None:
    """One rule: ASCII whitespace, \\r included, splits words (bytes.split), whether the lines are shipped or in files."""
    from tfmapreduce._io.files import text as _text

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
    from tfmapreduce._io.files.csv import Csv
    from tfmapreduce._io.files.readers import Layout

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


# --------------------------------------------------------------------------- numbers parsed by hand (FastNumber)


def _decode_one(ops: object, text: str, dtype: tf.DType) -> np.ndarray | None:
    """``text`` as one field of one line through TmrDecodeCsv: the value (0-d), or None where the kernel rejects it."""
    try:
        (values,) = ops.tmr_decode_csv(tf.constant([text.encode()]), out_types=[dtype], columns=[0], fields=1)  # type: ignore[attr-defined]
    except tf.errors.InvalidArgumentError:
        return None
    return values.numpy()[0]


def _nearest_float32(x: fractions.Fraction) -> np.float32:
    """The float32 nearest ``x`` (ties to an even last bit), for |x| in float32's normal range: what strtof and
    std::from_chars give (a double rounded again to float32 is not always it)."""
    f = np.float32(float(x))  # within one float32 step of the nearest
    candidates = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    return min(candidates, key=lambda c: (abs(fractions.Fraction(float(c)) - x), int(c.view(np.uint32)) & 1))


_DIGITS = st.text("0123456789", max_size=25)
_DECIMALS = st.builds(
    lambda sign, whole, point, part, exponent: sign + whole + point + part + exponent,
    st.sampled_from(["", "-", "+"]),
    st.one_of(_DIGITS, st.builds(lambda z, d: z + d, st.text("0", min_size=1, max_size=6), _DIGITS)),
    st.sampled_from([".", ""]),
    _DIGITS,
    st.one_of(
        st.just(""),
        st.builds(lambda e, s, n: f"{e}{s}{n}", st.sampled_from("eE"), st.sampled_from(["", "+", "-"]), st.integers(0, 40)),
    ),
).filter(lambda s: any(c.isdigit() for c in s.split("e")[0].split("E")[0]))


@hypothesis.given(text=_DECIMALS)
@hypothesis.settings(max_examples=400)
@hypothesis.example(text="0.1")
@hypothesis.example(text="-0")
@hypothesis.example(text="5.")
@hypothesis.example(text=".5")
@hypothesis.example(text="9007199254740993")
@hypothesis.example(text="1e22")
@hypothesis.example(text="1e23")
@hypothesis.example(text="0.0000000000000000000012345678901234567890")
def test_decimals_parse_to_the_correctly_rounded_double(ops: object, text: str) -> None:
    """A decimal (signs, leading zeros, '.5', '5.', long mantissas, exponents) gives the double float() gives, bit
    for bit, as std::from_chars did before the fast path: the fast path decides only where it is exact."""
    got = _decode_one(ops, text, tf.float64)
    assert got is not None, text
    assert got.tobytes() == np.float64(float(text)).tobytes(), (text, got, float(text))


@hypothesis.given(text=_DECIMALS)
@hypothesis.settings(max_examples=400)
@hypothesis.example(text="16777217")
@hypothesis.example(text="8.500003337860107")  # its nearest double is halfway between two floats: float() rounds twice
@hypothesis.example(text="8.500004291534424")
@hypothesis.example(text="1.00000005960464477539062")
@hypothesis.example(text="0.500000029802322387695312")
@hypothesis.example(text="-3.4028235e38")
@hypothesis.example(text="1.17549435e-38")
def test_decimals_parse_to_the_correctly_rounded_float32(ops: object, text: str) -> None:
    """A float32 field is the float32 nearest the decimal (as std::from_chars gives it), not float() rounded again:
    the fast path takes a double only where it does not lie halfway between two floats."""
    exact = fractions.Fraction(text.removeprefix("+"))
    hypothesis.assume(exact == 0 or 1e-37 < abs(exact) < 3e38)
    got = _decode_one(ops, text, tf.float32)
    assert got is not None, text
    want = np.float32(float(text)) if exact == 0 else _nearest_float32(exact)
    assert got.tobytes() == want.tobytes(), (text, got, want)


@hypothesis.given(text=st.text("0123456789.eE+- \t", max_size=12))
@hypothesis.settings(max_examples=400)
@hypothesis.example(text="+-5")
@hypothesis.example(text="++5")
@hypothesis.example(text=" 1.5\t")
@hypothesis.example(text="5e")
@hypothesis.example(text=".")
@hypothesis.example(text="-")
def test_any_text_is_a_double_exactly_where_it_was(ops: object, text: str) -> None:
    """Text made of number bytes and spaces: a double where the parse before the fast path took it (spaces and one
    '+' dropped, then std::from_chars, then strtod, which skips spaces and takes a sign: float()'s rules on what is
    left), with float()'s value; every other text still fails."""
    stripped = text.strip(" \t").removeprefix("+")
    try:
        want: float | None = float(stripped) if stripped else None
    except ValueError:
        want = None
    got = _decode_one(ops, text, tf.float64)
    if want is None:
        assert got is None, (text, got)
    else:
        assert got is not None, (text, want)
        assert got.tobytes() == np.float64(want).tobytes(), (text, got, want)


@hypothesis.given(sign=st.sampled_from(["", "-", "+", "+-"]), digits=st.text("0123456789", min_size=1, max_size=21))
@hypothesis.settings(max_examples=300)
def test_integers_parse_as_before(ops: object, sign: str, digits: str) -> None:
    """int32 and int64 fields: the value where it fits the type, a failure where it does not."""
    value = int(sign.removeprefix("+") + digits)
    for dtype, bits in ((tf.int32, 32), (tf.int64, 64)):
        got = _decode_one(ops, sign + digits, dtype)
        if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            assert got is not None, (sign + digits, dtype)
            assert int(got) == value, (sign + digits, dtype, got)
        else:
            assert got is None, (sign + digits, dtype, got)


def _read_csv_kernel(ops: object, path: pathlib.Path, header: bool, blocks: int = 1, fields: int = 2) -> np.ndarray:
    """TmrReadCsv over ``path`` in ``blocks`` byte ranges, columns 1 and 0 as float64, rows joined; the same rows as
    one matrix (``matrix=True``) checked to be those columns stacked."""
    size = path.stat().st_size
    edges = np.linspace(0, size, blocks + 1).astype(int)
    parts = []
    for start, stop in itertools.pairwise(edges):
        columns = ops.tmr_read_csv(  # type: ignore[attr-defined]
            str(path), size, int(start), int(stop), out_types=[tf.float64] * 2, columns=[1, 0], fields=fields, header=header
        )
        parts.append(np.stack([c.numpy() for c in columns], axis=1))
        (matrix,) = ops.tmr_read_csv(  # type: ignore[attr-defined]
            str(path),
            size,
            int(start),
            int(stop),
            out_types=[tf.float64],
            columns=[1, 0],
            fields=fields,
            header=header,
            matrix=True,
        )
        assert matrix.shape == (len(parts[-1]), 2)
        np.testing.assert_array_equal(matrix.numpy(), parts[-1])
    return np.concatenate(parts)


@pytest.mark.parametrize("blocks", [1, 3])
def test_read_csv_kernel_reads_plain_quoted_cr_bom_and_header_lines(ops: object, tmp_path: pathlib.Path, blocks: int) -> None:
    """Plain lines (the fast split), quoted fields, \\r before the \\n or inside a line (dropped), a BOM, a header, spaces,
    a last line without \\n: the rows the general parse gives, each line read once however the file is split."""
    lines = [b"1,2", b'"3",4.5', b' 5 ,"6"', b"7\r,8", b"-0.25,1e3", b"+9,-.5", b'"1""0",2', b"11,12"]
    want = np.array([[2, 1], [4.5, 3], [6, 5], [8, 7], [1e3, -0.25], [-0.5, 9], [np.nan, np.nan], [12, 11]])
    text = b"\r\n".join(lines[:6]) + b"\n" + lines[7]  # the quoted 1"0 is not a number: left out here
    keep = [0, 1, 2, 3, 4, 5, 7]
    path = tmp_path / "a.csv"
    path.write_bytes(b"\xef\xbb\xbfx,y\r\n" + text)
    np.testing.assert_array_equal(_read_csv_kernel(ops, path, True, blocks), want[keep])
    path.write_bytes(b"\xef\xbb\xbf" + text + b"\n")
    np.testing.assert_array_equal(_read_csv_kernel(ops, path, False, blocks), want[keep])


def test_read_csv_kernel_names_a_bad_line_as_before(ops: object, tmp_path: pathlib.Path) -> None:
    """A bad line (a quoted field that is not a number, a field missing, a field too many) fails with its line number
    and its bytes, \\r dropped, and the words of the general parse."""
    path = tmp_path / "a.csv"
    for bad, words in [
        (b'"1""0",2\r', r'tfmapreduce: CSV line 3: "\"1\"\"0\",2": Field 0 is not a valid double: 1"0'),
        (b"1,", 'tfmapreduce: CSV line 3: "1,": Field 1 is required but missing!'),
        (b"1,2,3", 'tfmapreduce: CSV line 3: "1,2,3": Expect 2 fields but have 3'),
        (b"1,x", 'tfmapreduce: CSV line 3: "1,x": Field 1 is not a valid double: x'),
    ]:
        path.write_bytes(b"x,y\n1,2\n" + bad + b"\n4,5\n")
        with pytest.raises(tf.errors.InvalidArgumentError) as caught:
            _read_csv_kernel(ops, path, True)
        assert re.sub(r"^\{\{.*?\}\} ", "", caught.value.message.split(" [Op:")[0]) == words, caught.value.message


# --------------------------------------------------------------------------- mapped rows and the wide sum


@pytest.mark.parametrize("offset", [0, 64, 4096, 4, 100])
@pytest.mark.parametrize("count", [0, 1, 1000, 20000])
def test_mapped_rows_are_the_bytes_a_read_gives(ops: object, tmp_path: pathlib.Path, offset: int, count: int) -> None:
    """Mapped (an offset TensorFlow's alignment allows) or read (any other), the rows are the file's."""
    data = np.arange(30000, dtype=np.float32) * 0.5
    path = tmp_path / "x.raw"
    data.tofile(path)
    size = path.stat().st_size
    got = {
        m: ops.tmr_read_rows(str(path), size, offset, count, T=tf.float32, map=m).numpy()  # type: ignore[attr-defined]
        for m in (True, False)
    }
    want = np.frombuffer(path.read_bytes()[offset : offset + 4 * count], np.float32)
    np.testing.assert_array_equal(got[True], want)
    np.testing.assert_array_equal(got[False], want)


def test_a_file_truncated_while_mapped_reads_zeros_there_and_its_size_check_names_it(ops: object, tmp_path: pathlib.Path) -> None:
    """The pages a truncation takes fault with SIGBUS; the kernel's handler maps zeros there (the process lives), and the
    check after the run (a read of no rows) names the file."""
    page = os.sysconf("SC_PAGESIZE")
    n = 64 * page // 4
    path = tmp_path / "x.raw"
    np.ones(n, np.float32).tofile(path)
    kept = 3 * page

    def cut() -> np.int64:
        os.truncate(path, kept)
        return np.int64(0)

    graph = tf.Graph()
    with graph.as_default():
        rows = ops.tmr_read_rows(str(path), 4 * n, 0, n, T=tf.float32)  # type: ignore[attr-defined]
        with tf.control_dependencies([rows.op]):  # truncate once mapped: a cut before the read fails the read itself
            truncated = tf.numpy_function(cut, [], tf.int64)
        with tf.control_dependencies([truncated]):
            total = tf.reduce_sum(rows)  # read after the truncation
        check = ops.tmr_read_rows(str(path), 4 * n, 0, 0, T=tf.uint8)  # type: ignore[attr-defined]
    with tf.compat.v1.Session(graph=graph) as session:
        assert session.run(total) == kept // 4  # the kept pages' ones; zeros past them
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"x\.raw no longer has the size it had when the run started"):
            session.run(check)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1 << 16, (1 << 16) + 1, 1_000_003])
def test_the_wide_sum_is_the_float64_sum_of_the_float32_values(ops: object, n: int) -> None:
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(np.float32)
    got = float(ops.tmr_wide_sum(tf.constant(x)))  # type: ignore[attr-defined]
    exact = math.fsum(x.astype(np.float64).tolist())
    assert abs(got - exact) <= 1e-14 * float(np.abs(x.astype(np.float64)).sum())  # float64 rounding, not float32's
    assert got == float(ops.tmr_wide_sum(tf.constant(x)))  # type: ignore[attr-defined]  # the same sum every time


@pytest.mark.parametrize(
    ("values", "want"), [([1.0, np.nan], np.nan), ([np.inf, 1.0], np.inf), ([np.inf, -np.inf], np.nan), ([-0.0], 0.0)]
)
def test_the_wide_sum_of_nan_and_infinities_is_numpys(ops: object, values: list[float], want: float) -> None:
    got = float(ops.tmr_wide_sum(tf.constant(np.array(values * 20, np.float32))))  # type: ignore[attr-defined]
    np.testing.assert_equal(got, want)


def test_a_window_kept_between_runs_shows_a_rewritten_file(ops: object, tmp_path: pathlib.Path) -> None:
    """A window stays mapped between reads, taken again only while its file is the same: rewritten in place, or
    replaced by another file of that name, the next read gives the new rows."""
    path = tmp_path / "x.raw"
    np.arange(4096, dtype=np.float32).tofile(path)

    def read() -> np.ndarray:
        return ops.tmr_read_rows(str(path), 4 * 4096, 0, 4096, T=tf.float32).numpy()  # type: ignore[attr-defined]

    np.testing.assert_array_equal(read(), np.arange(4096))
    with open(path, "r+b") as f:  # in place: the same inode, the same pages
        f.write(np.full(4096, 7, np.float32).tobytes())
    np.testing.assert_array_equal(read(), np.full(4096, 7))
    np.full(4096, 9, np.float32).tofile(tmp_path / "y.raw")
    os.replace(tmp_path / "y.raw", path)  # another inode
    np.testing.assert_array_equal(read(), np.full(4096, 9))
