"""Moments: ``(count, mean, M2)`` of values and their merge (Chan et al.), per key or of a whole input.

One piece of code computes them both ways: a whole input is one segment.  Every mean is a sum of
means weighted by their share of the count, so finite values never overflow it; M2 is then a sum of
squares, ``inf`` where the variance overflows (as numpy's), never ``inf - inf`` (nan).

Example:
    >>> [float(t) for t in moments_of(tf.constant([1.0, 2.0, 3.0, 4.0]), None)]
    [4.0, 2.5, 5.0]
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from .combine import Combiner, SegmentForm, _column, _f64, segment_count, segment_sum

Moments = tuple[tf.Tensor, tf.Tensor, tf.Tensor]
"""``(count, mean, M2)`` in float64."""


def _segment_moments(values: Any, ids: tf.Tensor, n: tf.Tensor) -> Any:
    """Per key (count, mean, M2) of the rows, in two passes (the mean first): exact, no cancellation.  A tuple of
    value columns gives a tuple of such triples, one per column.

    The mean sums ``x / count`` (not ``Σx / count``), so finite values never overflow it: M2 is then a sum of squares,
    inf where the variance overflows, never ``inf - inf`` (nan).
    """
    if isinstance(values, tuple):
        return tuple(_segment_moments(column, ids, n) for column in values)
    x = _f64(values)
    count = segment_count(ids, n, tf.float64)
    mean = segment_sum(x / _column(tf.gather(count, ids), x), ids, n)
    d = x - tf.gather(mean, ids)
    return count, mean, segment_sum(d * d, ids, n)


def _segment_chan(p: Any, ids: tf.Tensor, n: tf.Tensor) -> Any:
    """Merge per-key (count, mean, M2) partials of equal keys: Chan's formula over many partials at once (each mean
    weighted by its share of the key's count, so finite means never overflow the merged one); a tuple of triples
    column by column."""
    if isinstance(p[0], tuple):
        return tuple(_segment_chan(column, ids, n) for column in p)
    count_i, mean_i, m2_i = p
    count = segment_sum(count_i, ids, n)
    mean = segment_sum(mean_i * _column(count_i / tf.gather(count, ids), mean_i), ids, n)
    d = mean_i - tf.gather(mean, ids)
    return count, mean, segment_sum(m2_i + d * d * _column(count_i, d), ids, n)


def _first(moments: Moments) -> Moments:
    count, mean, m2 = moments
    return count[0], mean[0], m2[0]


def moments_of(x: tf.Tensor, axis: int | None) -> Moments:
    """(count, mean, M2) of every element of ``x`` (``axis=None``) or of each column (``axis=0``), in float64, in
    two passes: the per-key code with every row in one segment.  Slower than a shifted one-pass sum, and exact."""
    values = tf.reshape(x, [-1]) if axis is None else x
    return _first(_segment_moments(values, tf.zeros(tf.shape(values)[:1], tf.int32), tf.constant(1)))


def _chan(a: Any, b: Any) -> Moments:
    """Chan et al.'s parallel merge of (count, mean, M2): two partials as two rows of one segment."""
    parts = tuple(tf.stack([_f64(u), _f64(v)]) for u, v in zip(a, b, strict=True))
    return _first(_segment_chan((parts[0], parts[1], parts[2]), tf.zeros([2], tf.int32), tf.constant(1)))


MOMENTS: Combiner = Combiner(
    partial=lambda v, n: tuple(_f64(t) for t in v),
    merge=_chan,
    name="moments",
    per_key=SegmentForm(partial=_segment_moments, merge=_segment_chan),
)
"""(count, mean, M2) from per-shard ``(count, mean, M2)`` map outputs, merged with Chan's formula;
variance is ``M2 / (count - ddof)``.  Stable where ``E[x²] − E[x]²`` is not, and ``inf`` (never nan) where
the variance of finite values overflows.  Per key (keyed jobs), the map emits the values themselves (one
tensor, or a tuple of columns) and each key gets its (count, mean, M2) (a tuple of them, one per column)."""
