"""Combiners: associative merges of per-shard partials that carry their row counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import tensorflow as tf


def _identity(value: Any) -> Any:
    return value


@attrs.frozen
class Combiner:
    """How per-shard map outputs merge into one result: a named triple of TF functions.

    - ``partial(value, rows)``: turn one shard's map output (and its row count,
      an int64 scalar tensor) into a partial; runs on the shard's device.
    - ``merge(a, b)``: merge two partials; must be associative.  Runs first
      among the shards of one task, on that task, then across tasks.
    - ``finalize(partial)``: the result from the merged partial.

    Empty shards never reach a combiner: they contribute nothing.

    Example — the lesson's size-weighted mean of shard means, written by hand:
        >>> import tensorflow as tf
        >>> weighted_mean = Combiner(
        ...     partial=lambda mean, rows: (tf.cast(mean, tf.float64) * tf.cast(rows, tf.float64), rows),
        ...     merge=lambda a, b: (a[0] + b[0], a[1] + b[1]),
        ...     finalize=lambda p: p[0] / tf.cast(p[1], tf.float64),
        ...     name="weighted_mean",
        ... )
        >>> x = np.arange(100.0)
        >>> float(tmr.MapReduce(tf.reduce_mean, weighted_mean).run(x, cluster=cluster, sizes=[30, 70]))
        49.5
    """

    partial: Callable[[Any, tf.Tensor], Any]
    """(map output, rows) → partial, on the shard's device."""
    merge: Callable[[Any, Any], Any]
    """(partial, partial) → partial; associative."""
    finalize: Callable[[Any], Any] = _identity
    """Merged partial → result."""
    name: str = "combiner"
    """A name for plans, stats and errors."""

    @classmethod
    def lift(cls, reduce_fn: Callable[[Any, Any], Any]) -> Combiner:
        """A combiner from a plain pairwise ``reduce_fn(a, b)`` such as ``tf.add`` (the lesson's ``add``).

        The map outputs are merged as they are; rows are not used.  A nested
        map output (tuple, dict) is handed to ``reduce_fn`` whole when it keeps
        the structure (a structure-aware merge); otherwise ``reduce_fn`` merges
        it leaf by leaf, so ``tf.add`` or ``lambda a, b: a + b`` sums each
        element rather than packing or concatenating the tuple.
        """
        if not callable(reduce_fn):
            raise TypeError(
                f"reduce_fn must be a Combiner or a callable (a, b) -> c such as tf.add, got {type(reduce_fn).__name__} {reduce_fn!r}"
            )
        name = getattr(reduce_fn, "__name__", type(reduce_fn).__name__)

        def merge(a: Any, b: Any) -> Any:
            if not tf.nest.is_nested(a):
                return reduce_fn(a, b)
            try:
                whole = reduce_fn(a, b)
                tf.nest.assert_same_structure(a, whole)
                return whole
            except (TypeError, ValueError):
                return tf.nest.map_structure(reduce_fn, a, b)

        return cls(partial=lambda value, rows: value, merge=merge, name=name)


def _wide(value: tf.Tensor) -> tf.Tensor:
    """Integers as int64 (uint64 if unsigned) and floats as float64, so merging shards neither overflows nor loses digits."""
    value = tf.convert_to_tensor(value)
    if value.dtype.is_unsigned:
        return tf.cast(value, tf.uint64)
    if value.dtype.is_integer or value.dtype.is_bool:
        return tf.cast(value, tf.int64)
    if value.dtype.is_floating:
        return tf.cast(value, tf.float64)
    return value


def _f64(value: Any) -> tf.Tensor:
    return tf.cast(value, tf.float64)


def _nest(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *structures: tf.nest.map_structure(fn, *structures)


SUM = Combiner(partial=lambda v, n: tf.nest.map_structure(_wide, v), merge=_nest(tf.add), name="sum")
"""Sum of the map outputs (integers accumulate in int64, floats in float64)."""

COUNT = Combiner(partial=lambda v, n: n, merge=tf.add, name="count")
"""The number of rows; the map outputs are ignored."""

WEIGHTED_MEAN = Combiner(
    partial=lambda v, n: (tf.nest.map_structure(lambda t: _f64(t) * _f64(n), v), _f64(n)),
    merge=lambda a, b: (tf.nest.map_structure(tf.add, a[0], b[0]), a[1] + b[1]),
    finalize=lambda p: tf.nest.map_structure(lambda t: t / p[1], p[0]),
    name="weighted_mean",
)
"""Mean of per-shard means weighted by shard rows: the lesson's ``Σ size_i·mean_i / Σ size_i``."""

MIN = Combiner(partial=lambda v, n: v, merge=_nest(tf.minimum), name="min")
"""Element-wise minimum of the map outputs."""

MAX = Combiner(partial=lambda v, n: v, merge=_nest(tf.maximum), name="max")
"""Element-wise maximum of the map outputs."""


def _chan(a: tuple[Any, Any, Any], b: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
    """Chan et al.'s parallel merge of (count, mean, M2)."""
    na, ma, m2a = a
    nb, mb, m2b = b
    n = na + nb
    delta = mb - ma
    return n, ma + delta * (nb / n), m2a + m2b + delta * delta * (na * nb / n)


MOMENTS = Combiner(
    partial=lambda v, n: tuple(_f64(t) for t in v),
    merge=_chan,
    name="moments",
)
"""(count, mean, M2) from per-shard ``(count, mean, M2)`` map outputs, merged with Chan's formula;
variance is ``M2 / (count - ddof)``.  Stable where ``E[x²] − E[x]²`` is not."""
