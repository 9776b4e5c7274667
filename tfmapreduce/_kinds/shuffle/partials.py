"""What a keyed combine's tasks send its reducers at most, said before any run: per-key partials, not input rows.

With a combiner, each task merges its shards' rows by key before anything travels, so a task sends at most one
partial per distinct key it holds: at most ``min(its rows, its distinct keys)`` partials of one key and one partial
each.  The number of distinct keys is unknown before the run; the bound taken for it is sound (never below the real
number):

- integer keys that are the map's own first input, held on the client: each task's ``max - min + 1`` over its rows;
- any other keys the map passes through unchanged (strings, resident or file inputs): the task's rows;
- keys the map makes (not its first input, as it is): unknown, so the input's rows each count ``max(a row's bytes,
  a partial's bytes)`` (as a run of a map that emits one row per row at most).

A partial's bytes are the map's and the combiner's, traced on placeholders shaped as the input (a mean's
partial is a sum and a count; a variance's three moments), counted as the budget checks count them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from ..._base.plan import Plan
from ..._base.task import Task
from ..._io.source import Source
from ..._ops.combine import SegmentForm

STRING_BYTES = 32
"""What a string costs beside its bytes, as the budget checks count it (``grouping.nbytes``)."""

UNKNOWN_STRING = 16
"""The bytes taken for a string whose length is not known before the run."""


@attrs.frozen
class Partials:
    """A keyed combine's partials, as traced: one partial's bytes (its key's and its leaves'), and whether the map
    passes its first input through as the keys, one a row (then each task's distinct keys bound its partials)."""

    row: int
    """The bytes of one key's partial: the key, and the combiner's partial of its values."""
    passes_keys: bool

    def per_task(self, plan: Plan, srcs: Sequence[Source]) -> dict[Task, int]:
        """The partials each task sends at most: ``min(its rows, its integer keys' range)`` where the map passes its
        keys through (the range where the keys are integers on the client), else its rows.

        Example:
            >>> from tfmapreduce._base.plan import make_plan
            >>> from tfmapreduce._base.device import Device
            >>> from tfmapreduce._io.source import Shipped
            >>> cpu = Device.parse("/job:w/task:0/device:CPU:0")
            >>> keys = Shipped(np.arange(1_000) % 10)
            >>> list(Partials(16, True).per_task(make_plan(1_000, [1_000], [cpu], [cpu]), [keys]).values())
            [10]
        """
        rows: dict[Task, int] = {}
        spans: dict[Task, tuple[int, int]] = {}
        array = getattr(srcs[0], "array", None) if srcs else None
        integers = self.passes_keys and array is not None and np.asarray(array).dtype.kind in "iu"
        for shard in plan.shards:
            rows[shard.task] = rows.get(shard.task, 0) + shard.rows
            if integers and shard.rows:
                part = np.asarray(array)[shard.start : shard.start + shard.rows]
                low, high = spans.get(shard.task, (int(part.min()), int(part.max())))
                spans[shard.task] = (min(low, int(part.min())), max(high, int(part.max())))
        return {task: min(n, spans[task][1] - spans[task][0] + 1) if task in spans else n for task, n in rows.items()}


def _dtype(src: Source) -> tf.DType:
    return tf.string if np.dtype(src.dtype).kind in "OSU" else tf.as_dtype(np.dtype(src.dtype))


def _leaf_bytes(t: tf.Tensor) -> int | None:
    """One row of ``t``'s bytes as the budget checks count them; None where its row shape is not known."""
    row = t.shape[1:]
    if not row.is_fully_defined():
        return None
    width = STRING_BYTES + UNKNOWN_STRING if t.dtype == tf.string else int(t.dtype.size)
    return int(math.prod(row.as_list())) * width


def traced(map_fn: Any, form: SegmentForm, srcs: Sequence[Source], key_bytes: int) -> Partials | None:
    """The :class:`Partials` of ``map_fn`` and ``form`` over inputs shaped as ``srcs`` (``key_bytes``: one input key's
    bytes, where the map passes its keys through), traced in a scratch graph; None where it cannot be traced (a map
    that takes broadcast values, or fails on placeholders): the plan then counts input rows."""
    graph = tf.Graph()
    try:
        with graph.as_default():
            inputs = [tf.compat.v1.placeholder(_dtype(s), (None, *s.shape[1:])) for s in srcs]
            keys, values = map_fn(*inputs)
            ids = tf.compat.v1.placeholder(tf.int32, (None,))
            partial = form.partial(values, ids, tf.compat.v1.placeholder(tf.int32, ()))
    except Exception:  # a map or combiner that does not trace here: the plan counts rows instead
        return None
    passes = bool(inputs) and keys is inputs[0]
    leaves = [_leaf_bytes(t) for t in tf.nest.flatten(partial)]
    if any(b is None for b in leaves) or not isinstance(keys, tf.Tensor):
        return None
    own = STRING_BYTES + UNKNOWN_STRING if keys.dtype == tf.string else keys.dtype.size
    return Partials((key_bytes if passes else own) + sum(b for b in leaves if b is not None), passes)
