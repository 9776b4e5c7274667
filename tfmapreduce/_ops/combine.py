"""Combiners: associative merges of per-shard partials that carry their row counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from .ranked import Ranked


def _identity(value: Any) -> Any:
    return value


@attrs.frozen
class SegmentForm:
    """A combiner's per-key form, for keyed jobs (``MapReduce(..., by_key=True)``): every function works
    on many keys at once, given each row's segment (its key's index among the distinct keys).

    - ``partial(values, segment_ids, num_segments)``: the per-key partial of the rows of a batch:
      ``values`` has one row per key occurrence, ``segment_ids`` (int32, one per row) says which of
      the ``num_segments`` distinct keys the row belongs to; every leaf of the result has
      ``num_segments`` rows.
    - ``merge(partials, segment_ids, num_segments)``: merge partials of equal keys: ``partials``
      holds one row per (key, partial), ``segment_ids`` names its key; associative.
    - ``finalize(partial)``: the per-key result, row-wise (identity by default).

    Every segment in ``range(num_segments)`` has at least one row.

    Examples:
        A per-key sum of squares, as a custom keyed combiner:

        >>> import tensorflow as tf
        >>> seg_sum = lambda v, ids, n: tf.math.unsorted_segment_sum(v, ids, n)
        >>> squares = tmr.Combiner(
        ...     partial=lambda v, rows: tf.reduce_sum(tf.square(v)),
        ...     merge=tf.add,
        ...     name="sum_of_squares",
        ...     per_key=tmr.combiners.SegmentForm(partial=lambda v, ids, n: seg_sum(tf.square(tf.cast(v, tf.float64)), ids, n), merge=seg_sum),
        ... )
        >>> # tmr.MapReduce(lambda k, v: (k, v), squares, by_key=True).run((keys, values), cluster=c)
    """

    partial: Callable[[Any, tf.Tensor, tf.Tensor], Any]
    """(values, segment_ids, num_segments) → per-key partial."""
    merge: Callable[[Any, tf.Tensor, tf.Tensor], Any]
    """(partials, segment_ids, num_segments) → per-key partial; associative."""
    finalize: Callable[[Any], Any] = _identity
    """Per-key partial → per-key result, row-wise."""


@attrs.frozen
class GroupForm:
    """A group reducer (``tmr.per_group``): ``fn(keys, values)`` sees every value of each key of a reducer at once.

    ``values`` is a ``tf.RaggedTensor`` (or the map's structure of them) with one row per key, each
    row sorted ascending when ``sort_values``.  ``precombine`` (for recipes) maps one batch's or
    task's (keys, values) to fewer (keys, values) that give the same result: it runs before the shuffle,
    given the native kernels where every device of the run has them (else None).
    """

    fn: Callable[[tf.Tensor, Any], Any]
    """(distinct keys, ragged values) → one row per key (a tensor, a RaggedTensor or a structure of them)."""
    sort_values: bool = False
    """Sort each key's values ascending before ``fn`` sees them."""
    max_bytes: int | None = None
    """The most bytes of keys and values one reducer may receive; None: a quarter of its host's available memory."""
    precombine: Callable[[tf.Tensor, Any, Any], tuple[tf.Tensor, Any]] | None = None
    """(keys, values, native kernels or None) → (keys, values) of the same result, applied map-side; None: every row
    travels."""
    select: Callable[[tf.Tensor, Any, Any], tuple[tf.Tensor, Any] | None] | None = None
    """(a reducer's keys and values, native kernels) → (distinct keys, ``fn``'s result) straight from the rows, without
    grouping them (a recipe's faster path), or None where it does not apply; used only where the native kernels run."""
    ranked: Ranked | None = None
    """How ``fn``'s result for one key follows from a few ranks of its values (a recipe's): a spilled run then selects
    those of a key whose values alone exceed the budget (a hot key) in passes over the disks; None: such a key is
    refused."""
    distinct: Callable[[tf.Tensor], tf.Tensor] | None = None
    """Where ``fn`` counts a key's distinct values (a recipe's): each value's code, equal where values count as one."""
    whole: bool = False
    """Whether ``fn``'s result for one key is its values as they are (a recipe's)."""


@attrs.frozen
class Combiner:
    """How per-shard map outputs merge into one result: a named triple of TF functions.

    - ``partial(value, rows)``: turn one shard's map output (and its row count,
      an int64 scalar tensor) into a partial; runs on the shard's device.
    - ``merge(a, b)``: merge two partials; must be associative.  Runs first
      among the shards of one task, on that task, then across tasks.
    - ``finalize(partial)``: the result from the merged partial.

    Empty shards never reach a combiner: they contribute nothing.

    Examples:
        The lesson's size-weighted mean of shard means, written by hand:

        >>> import tensorflow as tf
        >>> weighted_mean = tmr.Combiner(
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
    per_key: SegmentForm | None = None
    """The per-key form keyed jobs use (None: the combiner cannot take part in a keyed job)."""
    per_group: GroupForm | None = None
    """A group reducer's form (``tmr.per_group``): the keyed job groups every value of a key instead of combining."""

    def __repr__(self) -> str:
        """``Combiner(name='weighted_mean')``: the name, not the functions.

        Example:
            >>> tmr.combiners.weighted_mean
            Combiner(name='weighted_mean')
        """
        return f"Combiner(name={self.name!r})"

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

        segment = _SEGMENT_OPS.get(reduce_fn)
        per_key = SegmentForm(partial=_nest_segments(segment), merge=_nest_segments(segment)) if segment else None
        return cls(partial=lambda value, rows: value, merge=merge, name=name, per_key=per_key)


def segment_sum(values: tf.Tensor, ids: tf.Tensor, n: tf.Tensor) -> tf.Tensor:
    """``tf.math.unsorted_segment_sum``; on a CPU, for 1-D int32/int64/float32/float64 values, computed by
    the ``Bincount`` kernel with weights: the same sums (exact for integers), faster (measured in the keyed jobs guide).

    Example:
        >>> segment_sum(tf.constant([1.0, 2.0, 4.0]), tf.constant([1, 0, 1]), tf.constant(3)).numpy()
        array([2., 5., 0.], dtype=float32)
    """
    if values.shape.rank == 1 and values.dtype in _BINCOUNT_TYPES and "GPU" not in values.device.upper():
        return tf.raw_ops.Bincount(arr=ids, size=n, weights=values)  # one op: tf.math.bincount adds a dozen checks
    return tf.math.unsorted_segment_sum(values, ids, n)


_BINCOUNT_TYPES = (tf.int32, tf.int64, tf.float32, tf.float64)


def segment_count(ids: tf.Tensor, n: tf.Tensor, dtype: tf.DType = tf.int64) -> tf.Tensor:
    """How many of ``ids`` fall in each of the ``n`` segments, as ``dtype`` (a :func:`segment_sum` of ones).

    Example:
        >>> segment_count(tf.constant([2, 0, 2]), tf.constant(3)).numpy()
        array([1, 0, 2])
    """
    if dtype in _BINCOUNT_TYPES and "GPU" not in ids.device.upper():  # no weights: each id counts 1, no ones made
        return tf.raw_ops.Bincount(arr=ids, size=n, weights=tf.zeros([0], dtype))
    return segment_sum(tf.ones(tf.shape(ids), dtype), ids, n)


def _ieee(values: tf.Tensor, ids: tf.Tensor, n: tf.Tensor, result: tf.Tensor, start: float) -> tf.Tensor:
    """``result`` (a segment min/max of ``values``) with NaN in every segment that holds a NaN, and ``start`` (+inf for
    a min, -inf for a max) in every segment whose values all equal it.

    TF's CPU kernels fold a NaN that is not last as a reset (``[1, nan, 2, 3]`` gives 2.0), so the result would depend
    on the partition; and they start from the largest (lowest) finite value, so a segment of +inf alone (-inf alone)
    would give 3.4e38 (-3.4e38) in float32.  One segment max of a code per value puts both right: 2 for a NaN, 1 for
    a value other than ``start``, 0 for ``start``.
    """
    if not values.dtype.is_floating:
        return result
    code = 2 * tf.cast(tf.math.is_nan(values), tf.int32) + tf.cast(tf.not_equal(values, start), tf.int32)
    worst = tf.math.unsorted_segment_max(code, ids, n)  # an empty segment: the lowest int32, left as it is
    fixed = tf.where(tf.equal(worst, 0), tf.constant(start, values.dtype), result)
    return tf.where(worst >= 2, tf.constant(np.nan, values.dtype), fixed)


def segment_min(values: tf.Tensor, ids: tf.Tensor, n: tf.Tensor) -> tf.Tensor:
    """``tf.math.unsorted_segment_min`` where a NaN makes its segment NaN and a segment of +inf alone is +inf, as
    ``np.min`` does, in any order.

    Example:
        >>> segment_min(tf.constant([1.0, float("nan"), 2.0, 3.0]), tf.constant([0, 0, 0, 1]), tf.constant(2)).numpy()
        array([nan,  3.], dtype=float32)
    """
    values = tf.convert_to_tensor(values)
    return _ieee(values, ids, n, tf.math.unsorted_segment_min(values, ids, n), np.inf)


def segment_max(values: tf.Tensor, ids: tf.Tensor, n: tf.Tensor) -> tf.Tensor:
    """``tf.math.unsorted_segment_max`` where a NaN makes its segment NaN and a segment of -inf alone is -inf, as
    ``np.max`` does, in any order.

    Example:
        >>> segment_max(tf.constant([1.0, float("nan"), 2.0, 3.0]), tf.constant([1, 0, 0, 1]), tf.constant(2)).numpy()
        array([nan,  3.], dtype=float32)
    """
    values = tf.convert_to_tensor(values)
    return _ieee(values, ids, n, tf.math.unsorted_segment_max(values, ids, n), -np.inf)


_SEGMENT_OPS: dict[Any, Callable[..., tf.Tensor]] = {
    tf.add: segment_sum,
    tf.maximum: segment_max,
    tf.minimum: segment_min,
    tf.multiply: tf.math.unsorted_segment_prod,
}
"""Pairwise functions with a segment form, for keyed jobs (:attr:`Combiner.per_key` of :meth:`Combiner.lift`)."""


def _nest_segments(op: Callable[..., tf.Tensor], cast: Callable[[Any], tf.Tensor] | None = None) -> Callable[..., Any]:
    """``op(leaf, segment_ids, num_segments)`` on every leaf of a structure (after ``cast``)."""
    return lambda values, ids, n: tf.nest.map_structure(lambda t: op(cast(t) if cast else t, ids, n), values)


def _column(count: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
    """``count`` (one per key) shaped to broadcast against ``like`` (keys first)."""
    return tf.reshape(count, tf.concat([tf.shape(count), tf.ones([tf.rank(like) - 1], tf.int32)], 0))


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


_SEGMENT_SUM = _nest_segments(segment_sum)

SUM: Combiner = Combiner(
    partial=lambda v, n: tf.nest.map_structure(_wide, v),
    merge=_nest(tf.add),
    name="sum",
    per_key=SegmentForm(partial=_nest_segments(segment_sum, _wide), merge=_SEGMENT_SUM),
)
"""Sum of the map outputs (integers accumulate in int64, floats in float64)."""

COUNT: Combiner = Combiner(
    partial=lambda v, n: n,
    merge=tf.add,
    name="count",
    per_key=SegmentForm(partial=lambda v, ids, n: segment_count(ids, n), merge=segment_sum),
)
"""The number of rows; the map outputs are ignored."""

WEIGHTED_MEAN: Combiner = Combiner(
    partial=lambda v, n: (tf.nest.map_structure(lambda t: _f64(t) * _f64(n), v), _f64(n)),
    merge=lambda a, b: (tf.nest.map_structure(tf.add, a[0], b[0]), a[1] + b[1]),
    finalize=lambda p: tf.nest.map_structure(lambda t: t / p[1], p[0]),
    name="weighted_mean",
    per_key=SegmentForm(
        partial=lambda v, ids, n: (
            _nest_segments(segment_sum, _f64)(v, ids, n),
            segment_count(ids, n, tf.float64),
        ),
        merge=lambda p, ids, n: (_SEGMENT_SUM(p[0], ids, n), segment_sum(p[1], ids, n)),
        finalize=lambda p: tf.nest.map_structure(lambda t: t / _column(p[1], t), p[0]),
    ),
)
"""Mean of per-shard means weighted by shard rows: the lesson's ``Σ size_i·mean_i / Σ size_i``.
Per key (keyed jobs), the mean of each key's values, in float64."""

MEAN: Combiner = attrs.evolve(WEIGHTED_MEAN, name="mean")
"""The mean: [`weighted_mean`][tfmapreduce.combiners.weighted_mean] by another name (per key, in keyed jobs: each key's rows weigh 1)."""


@attrs.frozen
class Sums:
    """A per-key form that sums its rows' 1-D leaves and counts them, as one native pass does (``TmrSumsByKey``, in
    :func:`_per_key.by_key`): each leaf's sum dtype, and the form's result from the rows, their sums and counts."""

    dtype: Callable[[tf.DType], tf.DType]
    result: Callable[[Any, list[tf.Tensor], tf.Tensor], Any]
    leaves: bool = True
    """Whether the leaves are summed (False: the result is the count alone)."""


def _packed(rows: Any, sums: list[tf.Tensor], counts: tf.Tensor) -> Any:
    return tf.nest.pack_sequence_as(rows, sums)


def _wide_dtype(dtype: tf.DType) -> tf.DType:
    return tf.float64 if dtype.is_floating else tf.int64


def _form(combiner: Combiner) -> SegmentForm:
    assert combiner.per_key is not None
    return combiner.per_key


_SUMMED = Sums(lambda dtype: dtype, _packed)
SUMS: dict[Callable[..., Any], Sums] = {
    _form(SUM).partial: Sums(_wide_dtype, _packed),
    _SEGMENT_SUM: _SUMMED,
    segment_sum: _SUMMED,  # COUNT's merge
    _form(COUNT).partial: Sums(lambda dtype: dtype, lambda rows, sums, counts: counts, leaves=False),
    _form(WEIGHTED_MEAN).partial: Sums(
        lambda dtype: tf.float64, lambda rows, sums, counts: (_packed(rows, sums, counts), tf.cast(counts, tf.float64))
    ),
    _form(WEIGHTED_MEAN).merge: _SUMMED,
}
"""The per-key forms (their ``partial`` or ``merge``) of the built-in sums, counts and means: what one native pass
computes exactly as they do (each leaf summed in row order, as ``Bincount`` with weights sums)."""


@attrs.frozen
class Summed:
    """A per-key function (a :class:`SegmentForm`'s ``partial`` or ``merge``) made elsewhere that one native pass
    computes exactly as ``sums`` says, as it does the built-in ones of :data:`SUMS`: where :func:`_per_key.by_key` has
    the native kernels it runs ``TmrSumsByKey``, else ``fn`` itself.

    Example:
        A count and a float64 sum of each key's rows, as a table's ``agg`` makes them:

        >>> both = Summed(
        ...     lambda rows, ids, n: (segment_sum(tf.cast(rows, tf.float64), ids, n), segment_count(ids, n)),
        ...     Sums(lambda dtype: tf.float64, lambda rows, sums, counts: (sums[0], counts)),
        ... )
        >>> [t.numpy().tolist() for t in both(tf.constant([1.0, 2.0, 4.0]), tf.constant([1, 0, 1]), tf.constant(2))]
        [[2.0, 5.0], [1, 2]]
    """

    fn: Callable[[Any, tf.Tensor, tf.Tensor], Any]
    sums: Sums

    def __call__(self, rows: Any, ids: tf.Tensor, n: tf.Tensor) -> Any:
        return self.fn(rows, ids, n)


def sums_of(fn: Callable[..., Any]) -> Sums | None:
    """How one native pass computes the per-key function ``fn``: a built-in's form (:data:`SUMS`), a
    :class:`Summed`'s own, else None (``fn`` runs as it is)."""
    return fn.sums if isinstance(fn, Summed) else SUMS.get(fn)


SUMMED_AS_THEY_ARE: Sums = _SUMMED
"""Each leaf summed in its own dtype, the result packed as the rows are: a merge of partials that are all sums."""


_SEGMENT_MIN = _nest_segments(segment_min)
_SEGMENT_MAX = _nest_segments(segment_max)

MIN: Combiner = Combiner(
    partial=lambda v, n: v, merge=_nest(tf.minimum), name="min", per_key=SegmentForm(partial=_SEGMENT_MIN, merge=_SEGMENT_MIN)
)
"""Element-wise minimum of the map outputs (a NaN wins, as in ``np.min``, per key too)."""

MAX: Combiner = Combiner(
    partial=lambda v, n: v, merge=_nest(tf.maximum), name="max", per_key=SegmentForm(partial=_SEGMENT_MAX, merge=_SEGMENT_MAX)
)
"""Element-wise maximum of the map outputs (a NaN wins, as in ``np.max``, per key too)."""
