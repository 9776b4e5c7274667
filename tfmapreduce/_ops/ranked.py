"""A group reducer computed from a few ranks of a key's values: how a hot key's values need never be held at once.

A median, a quantile or a top-k of one key needs only the key's values at some ranks of their
ascending order (NaN last, as ``np.sort``).  ``Ranked`` says which ranks, and how the key's result
follows from the values there; a spilled run selects those values from the workers' disks in
passes (``_kinds.spilled_hot``), each value turned into an unsigned order code (``order_codes``)
whose bytes are counted one at a time, most significant first.

Example:
    >>> median = Ranked(ranks=lambda n: [(n - 1) // 2, n // 2], finish=lambda n, v: tf.reduce_mean(v)[None])
    >>> median.ranks(4)
    [1, 2]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

RANKABLE = (tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8, tf.uint16, tf.uint32, tf.float16, tf.bfloat16, tf.float32,
            tf.float64)  # fmt: skip
"""The value dtypes whose order codes are exact: integers that fit int64, floats that fit float64."""

_FLIP = np.uint64(1 << 63)
_MAGNITUDE = np.int64(0x7FFFFFFFFFFFFFFF)


@attrs.frozen
class Ranked:
    """How a group reducer's result for one key follows from the key's values at a few ranks.

    ``ranks(n)``: the 0-based ranks (ascending order, NaN last) the result of a key of ``n`` values needs;
    ``finish(n, values)``: the values at those ranks, in that order (a 1-D tensor of the values' dtype) → the key's
    result as the group reducer's ``fn`` gives it for a batch of one key (one row: a tensor or a RaggedTensor).
    """

    ranks: Callable[[int], Sequence[int]]
    finish: Callable[[int, tf.Tensor], Any]


def order_codes(values: tf.Tensor) -> tf.Tensor:
    """Each value's uint64 code, in the values' ascending order (NaN above +inf, -0.0 as 0.0); ``RANKABLE`` values."""
    if values.dtype.is_floating:
        x = tf.cast(values, tf.float64)
        x = tf.where(tf.math.is_nan(x), tf.constant(np.nan, tf.float64), tf.where(tf.equal(x, 0), tf.zeros_like(x), x))
        bits = tf.bitcast(x, tf.int64)
        signed = tf.where(bits < 0, tf.bitwise.bitwise_xor(bits, tf.constant(_MAGNITUDE)), bits)
    else:
        signed = tf.cast(values, tf.int64)
    return tf.bitwise.bitwise_xor(tf.bitcast(signed, tf.uint64), tf.constant(_FLIP))


def from_codes(codes: np.ndarray, dtype: tf.DType) -> np.ndarray:
    """The values of ``order_codes`` back, as ``dtype`` (its numpy type)."""
    signed = (np.asarray(codes, np.uint64) ^ _FLIP).view(np.int64)
    if not dtype.is_floating:
        integers: np.ndarray = signed.astype(dtype.as_numpy_dtype)
        return integers
    bits = np.where(signed < 0, signed ^ _MAGNITUDE, signed)
    return np.asarray(tf.cast(tf.constant(bits.view(np.float64)), dtype).numpy())
