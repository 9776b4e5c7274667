"""A word count (the recipe's, or a user's) runs as the native word count (``_kinds.fuse``): recognised only where it
is one, with the same counts as the job run as written, the same over files as over arrays of lines."""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr
from tfmapreduce._kinds.fuse import counts_words, fused
from tfmapreduce._native.loader import ENV, kernels
from tfmapreduce._options import RunOptions


def words_int64(lines: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    w = tf.strings.split(lines).flat_values
    return w, tf.ones_like(w, dtype=tf.int64)


def words_int32(lines: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    w = tf.identity(tf.strings.split(lines).flat_values)
    return tf.identity(w), tf.ones(tf.shape(w), tf.int32)


def as_written(lines: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The same count, in a form the fusion does not take (values computed, not a fill of ones)."""
    w = tf.strings.split(lines).flat_values
    return w, tf.ones_like(w, dtype=tf.int64) * 1


def _ones(words: tf.Tensor, dtype: tf.DType = tf.int64) -> tf.Tensor:
    return tf.ones_like(words, dtype=dtype)


@pytest.mark.parametrize(("fn", "dtype"), [(words_int64, tf.int64), (words_int32, tf.int32)])
def test_a_whitespace_word_count_is_recognised_with_the_dtype_of_its_ones(fn: Callable[..., Any], dtype: tf.DType) -> None:
    assert counts_words(fn) == dtype


@pytest.mark.parametrize(
    "fn",
    [
        as_written,
        lambda s: (tf.strings.split(s, " ").flat_values, _ones(tf.strings.split(s, " ").flat_values)),  # one separator
        lambda s: (tf.strings.split(s, maxsplit=1).flat_values, _ones(tf.strings.split(s, maxsplit=1).flat_values)),
        lambda s: (tf.strings.split(s).flat_values, _ones(tf.strings.split(s).flat_values, tf.float32)),  # float sums
        lambda s: (tf.strings.split(s).flat_values, _ones(tf.strings.split(s).flat_values)),  # ones of another split
        lambda s: (tf.strings.split(tf.strings.lower(s)).flat_values, _ones(tf.strings.split(tf.strings.lower(s)).flat_values)),
        lambda s: {"w": tf.strings.split(s).flat_values},
        lambda s, centroids: (s, s),  # takes a broadcast value
        lambda x: (tf.cast(x, tf.int64), x * 2),  # a map for numbers: tracing it on strings fails
    ],
    ids=["computed-values", "sep", "maxsplit", "float", "two-splits", "lowered", "dict", "broadcast", "numbers"],
)
def test_anything_else_runs_as_written(fn: Callable[..., Any]) -> None:
    assert counts_words(fn) is None


def test_the_fused_count_equals_the_job_as_written(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    if kernels() is None:
        pytest.skip("no native kernels on this machine (no C++ compiler)")
    texts = [
        "the cat\tsat\r\non  the mat\n\n\vend\fof line\n",  # CRLF, tabs, vertical tab, form feed, empty lines
        "a b c\nno final newline",
        "",
        "ünïcödé wörds ünïcödé\n" * 3 + "x" * 70_000 + " y\n",  # a long word
    ]
    for i, text in enumerate(texts):
        (tmp_path / f"t{i}.txt").write_bytes(text.encode())
    files = tmr.read_text(str(tmp_path / "t*.txt"))
    expected = collections.Counter(w for text in texts for w in text.split())
    settings = RunOptions.of(cluster=cluster)
    assert fused(lambda: counts_words(words_int64), files, settings)[0] is not None
    assert fused(lambda: counts_words(as_written), files, settings)[0] is None
    fused_job = tmr.MapReduce(words_int64, tmr.combiners.sum, by_key=True)
    written = tmr.MapReduce(as_written, tmr.combiners.sum, by_key=True)
    got = fused_job.run(files, cluster=cluster, sizes=tmr.weights(1, 3))
    assert got.to_dict() == written.run(files, cluster=cluster, sizes=tmr.weights(1, 3)).to_dict() == dict(expected)
    assert got.values.dtype == "int64"
    small = tmr.MapReduce(words_int32, tmr.combiners.sum, by_key=True).run(files, cluster=cluster, reducers=3)
    small_written = tmr.MapReduce(lambda s: (words_int32(s)[0], words_int32(s)[1] * 1), tmr.combiners.sum, by_key=True)
    assert small.to_dict() == small_written.run(files, cluster=cluster).to_dict() == dict(expected)
    assert small.values.dtype == small_written.run(files, cluster=cluster).values.dtype
    with fused_job.run(files, cluster=cluster, resident=True) as kept:
        assert kept.gather().to_dict() == dict(expected)


TRICKY = [
    "a\rb c\r\nd\te  f\n",  # a lone \r, CRLF, a tab, two spaces
    "\r\n\r\n\vg\fh\n\n",  # empty CRLF lines, vertical tab, form feed
    "no\u00a0break em\u2003space ideo\u3000graphic nel\u0085x sep\x1cy\n",  # Unicode and control "spaces": in words
    "ünï cödé\r",  # a last line ending in \r, no \n
    "",
]


@pytest.fixture(scope="module")
def stock() -> Iterator[tmr.LocalCluster]:
    """A worker started with TFMAPREDUCE_NATIVE=0: it has no native kernel, so word counts split with stock ops."""
    os.environ[ENV] = "0"
    try:
        local = tmr.LocalCluster(1, cpu_devices=2)
    finally:
        del os.environ[ENV]
    with local:
        yield local


def test_files_and_arrays_count_the_words_bytes_split_makes(
    cluster: tmr.LocalCluster, stock: tmr.LocalCluster, tmp_path: Path
) -> None:
    """Issue 37: one tokenization for the recipe and a user's word count, over read_text files and over arrays of lines,
    counted natively or with stock ops: runs of ASCII whitespace (\\r included) separate words, as bytes.split() and
    Spark's \\s+ split them; Unicode spaces stay inside words (str.split() would split there)."""
    for i, text in enumerate(TRICKY):
        (tmp_path / f"t{i}.txt").write_bytes(text.encode())
    expected = dict(collections.Counter(w.decode() for text in TRICKY for w in text.encode().split()))
    assert expected["a"] == expected["b"] == 1  # the reference, as decided: a lone \r separates words
    assert "no\u00a0break" in expected  # and a no-break space does not
    lines = np.array([line for text in TRICKY for line in text.split("\n")])  # each \r left in its line
    user = tmr.MapReduce(words_int64, tmr.combiners.sum, by_key=True)
    for on, native in ((cluster, kernels() is not None), (stock, False)):
        files = tmr.read_text(str(tmp_path / "t*.txt"))
        assert (fused(lambda: tf.int64, files, RunOptions.of(cluster=on))[0] is not None) == native
        counts = {
            "recipe over files": tmr.recipes.word_count(files, cluster=on, reducers=2),
            "recipe over lines": tmr.recipes.word_count(lines, cluster=on, sizes=[3, 5, 4]),
            "user job over files": user.run(files, cluster=on),
            "user job over lines": user.run(lines, cluster=on, reducers=2),
        }
        for path, result in counts.items():
            assert result.to_dict() == expected, (path, on)
