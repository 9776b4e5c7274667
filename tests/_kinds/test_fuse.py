"""A user's word count over read_text files runs as the native word count (``_fuse``): recognised only where it is one,
with the same counts as the job run as written."""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tensorflow as tf

import tfmapreduce as tmr
from tfmapreduce._kinds.fuse import counts_words
from tfmapreduce._native.loader import kernels
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
        "a\rb c\nno final newline",  # a lone \r is dropped as the line reader drops it: "ab"
        "",
        "ünïcödé wörds ünïcödé\n" * 3 + "x" * 70_000 + " y\n",  # a long word
    ]
    for i, text in enumerate(texts):
        (tmp_path / f"t{i}.txt").write_bytes(text.encode())
    files = tmr.read_text(str(tmp_path / "t*.txt"))
    expected: collections.Counter[str] = collections.Counter()
    for text in texts:
        for line in text.split("\n"):
            expected.update(line.replace("\r", "").split())
    fused = tmr.MapReduce(words_int64, tmr.combiners.sum, by_key=True)
    assert fused._is_word_count(files, RunOptions.of(cluster=cluster), ())
    written = tmr.MapReduce(as_written, tmr.combiners.sum, by_key=True)
    assert not written._is_word_count(files, RunOptions.of(cluster=cluster), ())
    got = fused.run(files, cluster=cluster, sizes=tmr.weights(1, 3))
    assert got.to_dict() == written.run(files, cluster=cluster, sizes=tmr.weights(1, 3)).to_dict() == dict(expected)
    assert got.values.dtype == "int64"
    small = tmr.MapReduce(words_int32, tmr.combiners.sum, by_key=True).run(files, cluster=cluster, reducers=3)
    small_written = tmr.MapReduce(lambda s: (words_int32(s)[0], words_int32(s)[1] * 1), tmr.combiners.sum, by_key=True)
    assert small.to_dict() == small_written.run(files, cluster=cluster).to_dict() == dict(expected)
    assert small.values.dtype == small_written.run(files, cluster=cluster).values.dtype
    with fused.run(files, cluster=cluster, resident=True) as kept:
        assert kept.gather().to_dict() == dict(expected)
