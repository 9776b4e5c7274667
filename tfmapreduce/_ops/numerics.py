"""Numerics shared by the recipes: sums accumulated in float64, and shifted moments.

Where the graph being built runs on tasks that all have the native kernels, the
run driver lends :func:`native_sums` the kernel that sums float32 in float64
as it reads them (``TmrWideSum``): exact, and as fast as a float32 sum.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

import tensorflow as tf

from .moments import moments_of

BLOCK = 256
"""float32 elements the moments' shifted sums add in float32 before the partial sums widen to float64."""

SAMPLE = 4096
"""Rows of a shard sampled to pick the shift of its variance computation."""


def blocked_sum(x: tf.Tensor, axis: int | None) -> tf.Tensor:
    """float32 summed in blocks of :data:`BLOCK` in float32, then the block sums in float64.

    Its error is about 1e-7 of ``Σ|x|`` (not of ``|Σx|``): as good as float64 when
    no terms cancel, 7× faster than widening every element first (one core).
    Only the sum of everything is blocked: down axis 0, Eigen would add each
    column's block one row after another, which loses ~1e-6.
    """
    if axis is not None:
        return tf.reduce_sum(tf.cast(x, tf.float64), axis=axis)
    flat = tf.reshape(x, [-1])  # blocks along the innermost axis: Eigen's fastest, tree-shaped reduction
    if flat.shape[0] is None:  # a streamed batch of unknown length: widen every element
        return tf.reduce_sum(tf.cast(flat, tf.float64))
    blocks, rest = divmod(flat.shape[0], BLOCK)
    head, tail = tf.split(flat, [blocks * BLOCK, rest])  # split shares the buffer; a slice would copy it
    total = tf.reduce_sum(tf.cast(tf.reduce_sum(tf.reshape(head, [blocks, BLOCK]), axis=1), tf.float64))
    return total + tf.reduce_sum(tf.cast(tail, tf.float64))


_WIDE_SUM: contextvars.ContextVar[Callable[[tf.Tensor], tf.Tensor | None] | None] = contextvars.ContextVar(
    "wide_sum", default=None
)


@contextlib.contextmanager
def native_sums(wide_sum: Callable[[tf.Tensor], tf.Tensor | None]) -> Iterator[None]:
    """While graphs are built inside: float32 sums of everything on a CPU are ``wide_sum(x)`` (a float64 scalar),
    where it gives one (None: the kernels are not everywhere)."""
    token = _WIDE_SUM.set(wide_sum)
    try:
        yield
    finally:
        _WIDE_SUM.reset(token)


CHUNK = 1 << 16
"""Elements the stock float64 sum widens at a time: a 512 KiB float64 copy that stays in the cache."""


def chunked_sum(x: tf.Tensor) -> tf.Tensor:
    """The float64 sum of every element of ``x``, widened :data:`CHUNK` elements at a time in a loop.

    As exact as widening every element at once (each chunk's float64 sum is a tree, the
    chunks' sums add in order), without the float64 copy of the whole input: 5e7 float32
    sum in about the time of their float32 sum instead of 8x that (stock ops, one process).
    """
    flat = tf.reshape(x, [-1])
    size = flat.shape[0]
    if size is not None and size < 2 * CHUNK:
        return tf.reduce_sum(tf.cast(flat, tf.float64))
    n = tf.size(flat, out_type=tf.int64) if size is None else tf.constant(size, tf.int64)  # streamed: dynamic
    chunks = n // CHUNK
    head, tail = tf.split(flat, tf.stack([chunks * CHUNK, n - chunks * CHUNK]))  # split shares the buffer
    rows = tf.reshape(head, [-1, CHUNK])

    def add(i: tf.Tensor, total: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return i + 1, total + tf.reduce_sum(tf.cast(rows[i], tf.float64))

    start = (tf.constant(0, tf.int64), tf.constant(0.0, tf.float64))
    _, total = tf.while_loop(lambda i, _: i < chunks, add, start)
    return total + tf.reduce_sum(tf.cast(tail, tf.float64))


def exact_sum(x: tf.Tensor, axis: int | None) -> tf.Tensor:
    """Sum ``x`` (over everything, or down axis 0) accumulating every element in float64.

    Signed integers and booleans sum in int64 (wrapping on overflow, as numpy's
    ``sum`` does), unsigned integers in uint64, floats in float64: on data without
    cancellation the result is within about 1e-13 of the correctly rounded sum
    (as ``np.sum(x, dtype=np.float64)``).  A float32 sum of everything on a CPU
    takes the native wide sum where it is lent (:func:`native_sums`), any other
    float sum of everything on a CPU the stock :func:`chunked_sum`: both as fast as
    a float32 sum.  No path sums in float32: 256 values near 1e6 already lose 1e-10.
    """
    if x.dtype.is_unsigned:
        return tf.reduce_sum(tf.cast(x, tf.uint64), axis=axis)
    if x.dtype.is_integer or x.dtype.is_bool:
        return tf.reduce_sum(tf.cast(x, tf.int64), axis=axis)
    if x.dtype == tf.float64 or axis is not None or "GPU" in x.device.upper():
        return tf.reduce_sum(tf.cast(x, tf.float64), axis=axis)
    wide = _WIDE_SUM.get()
    if wide is not None and x.dtype == tf.float32:
        total = wide(x)
        if total is not None:
            return total
    return chunked_sum(x)


def float_sum(x: tf.Tensor, axis: int | None) -> tf.Tensor:
    """Sum ``x`` accumulating in float64, as numpy's ``mean`` does for integers (no int64 overflow)."""
    if x.dtype.is_floating:
        return exact_sum(x, axis)
    return tf.reduce_sum(tf.cast(x, tf.float64), axis=axis)


def moments_map(axis: int | None) -> Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor, tf.Tensor]]:
    def shard_moments(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        # Shift by c, an estimate of the mean in x's own float type: y = x - c is exact
        # near the mean, so data far from 0 (mean 1e6, std 1) keeps its digits, and
        # Σ(x - m)² = Σy² - (Σy)²/n with Σy small (no cancellation).  c and Σy may be
        # approximate (blocked float32): they move the mean by ~1e-7·std, never M2.
        if not x.dtype.is_floating or x.dtype in (tf.float16, tf.bfloat16):
            x = tf.cast(x, tf.float64)
        approx = blocked_sum if x.dtype == tf.float32 else exact_sum
        n = tf.cast(tf.size(x) if axis is None else tf.shape(x)[0], tf.float64)
        rows = x.shape[0]
        stride = (
            (rows // SAMPLE or 1) if rows is not None else tf.maximum(tf.shape(x)[0] // SAMPLE, 1)
        )  # streamed batches: dynamic
        sample = x[::stride]  # c needs only be near the mean: a strided sample saves a pass
        c = tf.cast(tf.reduce_mean(tf.cast(sample, tf.float64), axis=axis), x.dtype)
        y = x - c
        s1 = approx(y, axis)
        mean, m2 = tf.cast(c, tf.float64) + s1 / n, approx(tf.square(y), axis) - s1 * s1 / n
        # Where y, y² or their sums overflow x's float type, the shifted sums give inf - inf: the two-pass
        # moments in float64 then give numpy's answer (inf where the variance overflows float64, never nan).
        shifted = tf.math.is_finite(mean) & tf.math.is_finite(m2)
        result: tuple[tf.Tensor, tf.Tensor, tf.Tensor] = tf.cond(
            tf.reduce_all(shifted),
            lambda: (n, mean, m2),
            lambda: (n, *(tf.where(shifted, a, b) for a, b in zip((mean, m2), moments_of(x, axis)[1:], strict=True))),
        )
        return result

    return shard_moments
