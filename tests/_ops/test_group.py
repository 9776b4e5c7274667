"""Grouping keys in the graph (no cluster): every key maps back to itself and the distinct keys are those of numpy."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfmapreduce._ops.group import group, group_ints


def _check(keys: np.ndarray, distinct: tf.Tensor, ids: tf.Tensor) -> None:
    d, i = distinct.numpy(), ids.numpy()
    assert len(set(d.tolist())) == len(d), "a key is listed twice among the distinct keys"
    assert sorted(d.tolist()) == sorted(set(keys.tolist()))
    assert d[i].tolist() == keys.tolist()


@pytest.mark.parametrize("span", [1, 10, 1000, 10**6, 2**62])
@pytest.mark.parametrize("m", [0, 1, 7, 5000, 300_000])
def test_group_ints_equals_numpy(span: int, m: int) -> None:
    keys = np.random.default_rng(span + m).integers(-span, span, m, dtype=np.int64)
    _check(keys, *group_ints(tf.constant(keys, tf.int64)))


def test_group_ints_extremes() -> None:
    keys = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1, np.iinfo(np.int64).min], np.int64)
    _check(keys, *group_ints(tf.constant(keys)))


@pytest.mark.parametrize("m", [0, 1, 20_000])
def test_group_strings_equals_numpy(m: int) -> None:
    rng = np.random.default_rng(m)
    words = np.array([b"", b"a", "é".encode(), b"x" * 40, *(str(i).encode() for i in range(500))], dtype=object)
    keys = words[rng.integers(0, len(words), m)] if m else np.array([], dtype=object)
    _check(keys, *group(tf.constant(keys.tolist() if m else [], tf.string)))


def test_group_strings_falls_back_when_the_first_fingerprint_collides() -> None:
    # A fingerprint that only sees the length: "ab" and "cd" collide; the second fingerprint must catch it.
    by_length = lambda k, n: tf.cast(tf.strings.length(k), tf.int64)  # noqa: E731
    keys = np.array([b"ab", b"cd", b"ab", b"xyz", b""], dtype=object)
    _check(keys, *group(tf.constant(keys.tolist()), fingerprint=by_length))
