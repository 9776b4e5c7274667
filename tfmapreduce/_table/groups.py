"""The aggregates that need every value of a group — ``median``, ``("quantile", q)``, ``count_distinct``,
``("top_k", k)`` and a string's ``min`` and ``max`` — computed, with the others, by one group reducer.

On a reducer the group reducer gets each of its keys' rows (ragged, one row per key); each aggregated column's
values that are not null are sorted within their key once (a stable sort of the values' sort keys, then of the
keys' positions), and every aggregate of that column reads its answer from the sorted run of each key: the
quantile at its interpolated position, the distinct values where the sort key changes, the ``k`` last values, the
first and last string. The other aggregates (sum, mean, count, min and max of numbers) take their partial over
the key's rows, as the combiner would, and finish as it does.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from .._ops.combine import segment_count, segment_sum
from .._ops.grouping import row_ids, sort_key, string_ranks
from .column import Column, made
from .ops import holistic, partial_of, type_of
from .schema import STRING, ColumnType


@attrs.frozen
class GroupOp:
    """One aggregate as the graphs see it: its op, its input column's type (None: a row count), the input's
    position among the job's value columns (None: a row count) and its parameter (``q``, ``k`` or None); ``padded``:
    a top-k's lists as a padded ``[keys, k]`` tensor and a mask of its slots (to stay on the workers), not ragged."""

    op: str
    source: ColumnType | None
    at: int | None
    param: float | int | None
    padded: bool = False


@attrs.frozen
class Runs:
    """One column's values that are not null, sorted within their key (keys in order), with their sort keys and
    keys; ``counts`` and ``starts`` say where each key's run is."""

    values: tf.Tensor
    order: tf.Tensor
    ids: tf.Tensor
    counts: tf.Tensor
    starts: tf.Tensor


def per_group(ops: tuple[GroupOp, ...], keys: tf.Tensor, values: Any) -> Any:
    """The group reducer's ``fn``: for each aggregate its per-key result (a partial, or a value and a count, or a
    ragged row of the top ``k``), from ``values`` (one ``(values, [valid])`` pair of ragged tensors a column)."""
    ids = tf.cast(row_ids(values[0][0].row_splits), tf.int32)  # (segment sums take int32 ids)
    n = tf.size(keys)
    runs: dict[int, Runs] = {}
    out: list[Any] = []
    for op in ops:
        column = values[0 if op.at is None else op.at]
        flat = column[0].flat_values
        valid = column[1].flat_values if len(column) > 1 else None
        if not holistic(op.op, op.source):
            out.append(partial_of(op.op, op.source, flat, valid, ids, n))
            continue
        assert op.at is not None
        if op.at not in runs:
            runs[op.at] = _sorted(flat, valid, ids, n)
        out.append(_holistic(op, runs[op.at]))
    return tuple(out)


def _sorted(flat: tf.Tensor, valid: tf.Tensor | None, ids: tf.Tensor, n: tf.Tensor) -> Runs:
    """The values that are not null, sorted within their key: numbers as numpy sorts them (-0.0 equal to 0.0, every
    NaN last), strings in byte order."""
    if valid is not None:
        keep = tf.reshape(tf.where(valid), [-1])
        flat, ids = tf.gather(flat, keep), tf.gather(ids, keep)
    if flat.dtype == tf.string:
        order = string_ranks(flat, None)
    else:
        x = tf.cast(flat, tf.int32) if flat.dtype == tf.bool else flat
        order = sort_key(x + tf.zeros([], x.dtype) if x.dtype.is_floating else x)  # -0.0 + 0.0 is 0.0
    at = tf.argsort(order, stable=True)
    at = tf.gather(at, tf.argsort(tf.gather(ids, at), stable=True))
    ids = tf.gather(ids, at)
    counts = segment_count(ids, n)
    return Runs(tf.gather(flat, at), tf.gather(order, at), ids, counts, tf.cumsum(counts, exclusive=True))


def _holistic(op: GroupOp, run: Runs) -> Any:
    """One aggregate's per-key result from a column's sorted runs (a top-k's ragged, or padded: see ``GroupOp``)."""
    counts, starts = run.counts, run.starts
    total = tf.size(run.ids, tf.int64)
    if op.op == "count_distinct":
        before = tf.concat([tf.fill([1], tf.constant(-1, run.ids.dtype)), run.ids[:-1]], 0)
        previous = tf.concat([tf.zeros([1], run.order.dtype), run.order[:-1]], 0)
        new = tf.not_equal(run.ids, before) | tf.not_equal(run.order, previous)
        return (segment_sum(tf.cast(new, tf.int64), run.ids, tf.size(counts)),)
    if op.op == "top_k":
        assert isinstance(op.param, int)
        splits = tf.concat([tf.zeros([1], tf.int64), tf.cumsum(tf.minimum(counts, op.param))], 0)
        row = row_ids(splits)
        j = tf.range(splits[-1]) - tf.gather(splits, row)  # 0 .. k-1 within each key: the largest first
        offsets = tf.gather(starts + counts - 1, row) - j
        lists = tf.RaggedTensor.from_row_splits(tf.gather(run.values, offsets), splits, validate=False)
        if op.padded:  # each key's row of k slots (the filler after its values), and which slots hold a value
            return lists.to_tensor(shape=[None, op.param]), tf.sequence_mask(lists.row_lengths(), op.param)
        return (lists,)

    def at(position: tf.Tensor, values: tf.Tensor) -> tf.Tensor:  # a key's value at ``position`` in its run; a filler
        padded = tf.concat([values, tf.zeros([1], values.dtype)], 0)
        return tf.gather(padded, tf.where(counts > 0, starts + position, total))

    if op.op in ("min", "max"):  # strings
        return at(tf.zeros_like(counts) if op.op == "min" else tf.maximum(counts - 1, 0), run.values), counts
    q = 0.5 if op.op == "median" else float(op.param or 0.0)
    x = tf.cast(tf.cast(run.values, tf.int32) if run.values.dtype == tf.bool else run.values, tf.float64)
    last = tf.cast(tf.maximum(counts - 1, 0), tf.float64)
    position = q * last
    lo = tf.floor(position)
    hi = tf.minimum(lo + 1, last)
    a, b = at(tf.cast(lo, tf.int64), x), at(tf.cast(hi, tf.int64), x)
    t = position - lo
    if op.op == "median":  # numpy's median: the mean of the two middle values
        return tf.where(tf.equal(lo, hi) | tf.equal(t, 0), a, (a + b) / 2), counts
    return tf.where(t >= 0.5, b - (b - a) * (1 - t), a + (b - a) * t), counts  # numpy's "linear" (its lerp)


def finished(op: str, source: ColumnType | None, partial: list[np.ndarray[Any, Any]], output: str) -> Column:
    """The result column of one holistic aggregate from its per-key result: null where a group had no value (a
    count of distinct values is 0 there, a top-k an empty list)."""
    result = type_of(op, source, output)
    if op == "count_distinct":
        return made(result, partial[0], None)
    if op == "top_k":
        inner = result.inner
        assert inner is not None
        lists = np.empty(len(partial[0]), object)
        lists[:] = [_stored(np.asarray(row), inner) for row in partial[0]]
        return Column(result, lists, None)
    value, count = partial
    if result == STRING:
        return made(result, _stored(value, STRING), count > 0)
    return made(result, np.where(count > 0, value, 0).astype(result.storage), count > 0)


def _stored(values: np.ndarray[Any, Any], type_: ColumnType) -> np.ndarray[Any, Any]:
    """Fetched values in ``type_``'s storage: strings (``bytes`` or ``str`` from a run) as an ``object`` array of ``str``."""
    if type_ != STRING:
        return values.astype(type_.storage)
    text = np.empty(len(values), object)
    text[:] = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values]
    return text
