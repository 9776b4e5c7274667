"""Values as unsigned integers in numpy's order: the bits a radix select counts (see ``_select``).

A value's ``u`` is a w-bit unsigned integer (w = 32 or 64): a float's raw bits, whose order the counts are put back
in (:func:`orders`: a negative float's bits run backwards), or an integer's distance from its column's minimum.
Its first digit is its top 16 bits (after the bits every value of the column shares, for integers).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

DIGIT = 16
"""Bits of the key the first round chooses (a histogram of 65536 counts per column, over every value)."""
BINS = 1 << DIGIT

WIDTHS = {
    **{np.dtype(d): 32 for d in ("int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32")},
    **{np.dtype(d): 64 for d in ("int64", "float64")},
}
"""The dtypes selected in, and the bits of their keys."""


def np_key(values: np.ndarray) -> np.ndarray:
    """The values as int64 keys in numpy's order, in a total order: the value at rank r of the keys is a value at rank
    r of ``np.sort(values)``.

    Signed integers keep their value, uint32 is offset by -2**31.  Floats map their bits: -0.0 is just below 0.0
    (numpy holds them equal, so either order is numpy's), a NaN above +inf (below -inf with its sign bit set; a
    quantile of data with a NaN is NaN anyway), and nothing is flushed to zero, as a comparison of floats on
    TensorFlow's CPUs would flush a subnormal.

    Example:
        >>> x = np.array([2.0, -0.0, -1.5, 0.0, -np.inf, 1e-45], np.float32)
        >>> np.argsort(np_key(x)).tolist()
        [4, 2, 1, 3, 5, 0]
    """
    if values.dtype == np.float16:
        values = values.astype(np.float32)
    if values.dtype.kind == "f":
        raw = values.view(np.int32 if values.dtype == np.float32 else np.int64).astype(np.int64)
        bits = 8 * values.dtype.itemsize - 1
        keys: np.ndarray = raw ^ ((raw >> bits) & (2**bits - 1))
        return keys
    if values.dtype == np.uint32:
        return values.astype(np.int64) - 2**31
    return values.astype(np.int64)


def top_bucket(keys: np.ndarray, width: int) -> np.ndarray:
    """A float's first-round bucket from its key (:func:`np_key`): its top 16 bits, offset to 0..65535."""
    return (keys >> (width - DIGIT)) + BINS // 2


def value_of(bits: int, low: int, dtype: np.dtype[Any]) -> Any:
    """The value whose ``u`` (see the module) is ``bits``, in a column of minimum ``low``: a float's raw bits, or an
    integer's distance from ``low``."""
    width = WIDTHS[dtype]
    bits %= 2**width
    if dtype.kind == "f":
        raw = np.array([bits], np.uint32 if width == 32 else np.uint64)
        return raw.view(np.float32 if width == 32 else np.float64).astype(dtype)[0]
    key = (low + bits + 2 ** (width - 1)) % 2**width - 2 ** (width - 1)  # the signed key, wrapped to its width
    return np.array([key + (2**31 if dtype == np.uint32 else 0)]).astype(dtype)[0]


def as_bits(values: tf.Tensor) -> tf.Tensor:
    """On a shard: floats as their raw bits (uint32 or uint64; float16 as float32), integers as their key (int32 or
    int64: small ones widened, uint32 offset by -2**31)."""
    if values.dtype == tf.float16:
        values = tf.cast(values, tf.float32)
    if values.dtype in (tf.float32, tf.float64):
        return tf.bitcast(values, tf.uint64 if values.dtype == tf.float64 else tf.uint32)
    if values.dtype == tf.uint32:
        return tf.bitwise.bitwise_xor(tf.bitcast(values, tf.int32), tf.constant(-(2**31), tf.int32))
    if values.dtype in (tf.int32, tf.int64):
        return values
    return tf.cast(values, tf.int32)


def orders(dtype: np.dtype[Any]) -> np.ndarray:
    """For each first-round bucket of ``u`` (see the module), its place in the values' order.

    A float's raw top 16 bits: a negative float's key is its bits with all but the sign flipped, so its bucket's
    place is mirrored, and below its top bucket the order of its lower bits is reversed too.  An integer's ``u``
    is in order already.

    Example:
        >>> orders(np.dtype(np.float32))[[0x3F80, 0xBF80]].tolist()  # 1.0 and -1.0
        [49024, 16511]
    """
    unsigned = np.arange(BINS, dtype=np.int64)
    if dtype.kind != "f":
        return unsigned
    signed = np.where(unsigned >= BINS // 2, unsigned - BINS, unsigned)
    return np.where(signed < 0, signed ^ (BINS // 2 - 1), signed) + BINS // 2


def nan_buckets(dtype: np.dtype[Any]) -> tuple[np.ndarray, np.ndarray]:
    """The raw top buckets of a float dtype that hold only NaNs, and the two that hold ±inf (and NaNs whose payload
    is all in the lower bits): a value there is checked one by one."""
    width = WIDTHS[dtype]
    wide = np.float64 if width == 64 else np.float32
    low, high = top_bucket(np_key(np.array([-np.inf, np.inf], wide)), width).tolist()
    raw = np.argsort(orders(dtype))
    keys = np.arange(BINS)
    return raw[(keys < low) | (keys > high)], raw[[low, high]]
