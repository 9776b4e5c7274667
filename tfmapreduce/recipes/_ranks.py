"""The by-key recipes' results from a few ranks of a key's values: the interpolation ``np.quantile`` does between
two ranks, and the ranks a quantile or a top-k needs (``Ranked``, for a hot key that a spilled run selects from the
workers' disks instead of holding its values).

Example:
    >>> quantile_ranks((0.5,), "linear", True).ranks(4)  # the values of ranks 1 and 2, and the largest (NaN or not)
    [1, 2, 3]
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from .._ops.ranked import Ranked


def interpolated(h: tf.Tensor, a: tf.Tensor, b: tf.Tensor, method: str) -> tf.Tensor:
    """``np.quantile``'s answer at virtual index ``h`` = (n - 1)·q from ``a``, the value of rank floor(h), and ``b``, the
    value of rank floor(h) + 1 (the last where there is none)."""
    below = tf.math.floor(h)
    if method == "lower":
        return a
    if method == "median":  # np.median: the middle value, or the mean of the middle two ([1, inf] gives inf, not nan)
        a, b = tf.cast(a, tf.float64), tf.cast(b, tf.float64)
        return tf.where(tf.math.ceil(h) > below, (a + b) / 2, a)
    if method in ("higher", "nearest"):
        up = tf.math.ceil(h) if method == "higher" else tf.math.round(h)  # round: half to even, as numpy
        return tf.where(up > below, b, a)
    half, zero = tf.constant(0.5, tf.float64), tf.constant(0.0, tf.float64)
    gamma = h - below if method == "linear" else tf.where(tf.math.ceil(h) > below, half, zero)
    a, b = tf.cast(a, tf.float64), tf.cast(b, tf.float64)
    d = b - a
    return tf.where(gamma >= 0.5, b - d * (1 - gamma), a + d * gamma)  # numpy's _lerp


def with_nan(result: tf.Tensor, largest: tf.Tensor) -> tf.Tensor:
    """A key whose largest value (sorted last) is NaN has NaN quantiles, as in numpy."""
    if not largest.dtype.is_floating:
        return result
    return tf.where(tf.math.is_nan(largest)[:, None], tf.constant(np.nan, result.dtype), result)


def _quantile_ranks(n: int, q: tuple[float, ...]) -> list[int]:
    """For each q, the ranks floor(h) then floor(h) + 1 (the last where there is none), h = (n - 1)·q; then n - 1."""
    below = [int(np.floor((n - 1) * x)) for x in q]
    return [*below, *(min(r + 1, n - 1) for r in below), n - 1]


def _quantile_finish(n: int, values: tf.Tensor, q: tuple[float, ...], method: str, scalar: bool) -> tf.Tensor:
    m = len(q)
    h = tf.cast(n - 1, tf.float64) * tf.constant(q, tf.float64)[None, :]
    result = with_nan(interpolated(h, values[None, :m], values[None, m : 2 * m], method), values[-1:])
    return result[:, 0] if scalar else result


def quantile_ranks(q: tuple[float, ...], method: str, scalar: bool) -> Ranked:
    """``np.quantile(values_of_key, q, method=method)`` of one key (``median_by_key``: method ``"median"``) from ranks."""
    return Ranked(
        ranks=functools.partial(_quantile_ranks, q=q),
        finish=functools.partial(_quantile_finish, q=q, method=method, scalar=scalar),
    )


def _top_ranks(n: int, k: int, largest: bool) -> list[int]:
    return list(range(n - 1, max(n - k, 0) - 1, -1)) if largest else list(range(min(k, n)))


def _top_finish(n: int, values: tf.Tensor) -> tf.RaggedTensor:
    return tf.RaggedTensor.from_row_lengths(values, tf.size(values, tf.int64)[None])


def top_k_ranks(k: int, largest: bool) -> Ranked:
    """One key's ``k`` largest values, largest first (smallest, smallest first) from ranks: its k last (first)."""
    return Ranked(ranks=functools.partial(_top_ranks, k=k, largest=largest), finish=_top_finish)
