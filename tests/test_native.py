"""Native kernels: built on this machine, loaded by the client and the workers, and a stock fallback where absent."""

from __future__ import annotations

import collections
import logging
import os
import pathlib
from collections.abc import Iterator

import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr
from tfmapreduce import _native

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
    assert _native.available(cluster, 30)
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
    assert not _native.available(without_kernels, 30)
    lines = ["the cat", "the hat", "\tthe\r"]
    assert tmr.recipes.word_count(lines, cluster=without_kernels).to_dict() == {"cat": 1, "hat": 1, "the": 3}
    path = tmp_path / "words.txt"
    path.write_bytes(b"the cat\nthe  hat\n\n\ta b\x0bc")
    counts = tmr.recipes.word_count(tmr.read_text(str(path)), cluster=without_kernels).to_dict()
    assert counts == {b"the": 2, b"cat": 1, b"hat": 1, b"a": 1, b"b": 1, b"c": 1}


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
    assert _native.available(cluster, 30) == (kernels == "native")
    if block is not None:
        monkeypatch.setattr(_text, "TEXT_BLOCK", block)
    text = b"one\rtwo three\r\nfour\rfive\n\rsix\r"
    expected = collections.Counter(text.split())
    path = tmp_path / "cr.txt"
    path.write_bytes(text)
    over_files = tmr.recipes.word_count(tmr.read_text(str(path)), cluster=cluster).to_dict()
    assert over_files == expected
    shipped = tmr.recipes.word_count(np.array(text.split(b"\n"), dtype=object), cluster=cluster).to_dict()
    assert shipped == expected
