"""What a keyed combine's tasks send its reducers at most, said before any run: per-key partials, not input rows.

With a combiner, each task merges its shards' rows by key before anything travels, so a task sends at most one
partial per distinct key it holds: its distinct keys' partials, of one key and one partial each.  Where they are
known before the run they are counted; elsewhere the bound taken is sound (never below the real number):

- keys that are the map's own first input, held on the client (integers, strings): each task's distinct keys
  counted exactly, and a string key's own bytes (``distinct``);
- keys that are the map's own first input, resident on the workers (1-D ``Sharded`` data, the job placed where it
  lives): each task's distinct keys and their bytes counted exactly there, in one small run (``on_workers``);
- keys that are the map's own first input, read from files (``.npy`` integers, text lines, a CSV table's key
  column, read alone): each task's distinct keys and their bytes counted on the workers that read its files, in one
  small run reading them (``in_files``);
- any other keys the map passes through unchanged (resident data placed elsewhere):
  the task's rows, each key of a row's bytes (a resident string's from a sample of lengths taken on the workers,
  ``forecast.row_bytes``, taken only there: a resident plan makes one small run, the count or the sample);
- keys the map makes (not its first input, as it is): unknown, so the input's rows each count ``max(a row's bytes,
  a partial's bytes)`` (as a run of a map that emits one row per row at most).

Float keys and keys of several columns (a float ``.npy``, a 2-D one) are what no keyed run takes: the map traced for
the plan is checked as the run checks it (``traced_output``, then ``map_side.emit``), so such a plan is refused with the run's
``MapFunctionError`` instead of being counted.  A partial's bytes are the map's and the combiner's, traced on
placeholders shaped as the input (a mean's
partial is a sum and a count; a variance's three moments), counted as the budget checks count them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from ..._base.plan import Plan
from ..._base.task import Task
from ..._cluster.cluster import Cluster
from ..._io.files.csv import CsvTable
from ..._io.files.source import FileSource
from ..._io.resident_source import Resident
from ..._io.source import Source
from ..._ops.combine import SegmentForm
from .distinct import DistinctKeys
from .distinct import per_task as distinct_per_task
from .in_files import distinct_per_task as distinct_in_files
from .on_workers import distinct_per_task as distinct_on_workers

STRING_BYTES = 32
"""What a string costs beside its bytes, as the budget checks count it (``grouping.nbytes``)."""

UNKNOWN_STRING = 16
"""The bytes taken for a string whose length is not known before the run."""


@attrs.frozen
class Partials:
    """A keyed combine's partials, as traced: one partial's bytes beside its key's (``leaves``), one key's bytes as
    traced (``key``), and whether the map passes its first input through as the keys, one a row (then each task's
    distinct keys bound its partials)."""

    leaves: int
    """The bytes of the combiner's partial of one key's values."""
    passes_keys: bool
    key: int = 0
    """The bytes of one key as traced (a string's ``UNKNOWN_STRING`` beside ``STRING_BYTES``).  Where the map passes
    its keys through they are counted (``per_task``: each key's own bytes) or, where they cannot be, estimated from
    the input (``forecast.row_bytes``: a string's from a sample of lengths)."""

    @property
    def row(self) -> int:
        """The bytes of one key's partial, as traced: its key's and its leaves'."""
        return self.key + self.leaves

    def per_task(
        self, plan: Plan, srcs: Sequence[Source], key_bytes: Callable[[], int], cluster: Cluster | None = None
    ) -> tuple[dict[Task, tuple[int, int]], str | None]:
        """The partials each task sends at most and their bytes, and where they were counted (``"client"``,
        ``"workers"``, None: not counted): where the map passes its keys through and they are a 1-D array on the client
        (``distinct.per_task``) or resident where the job runs (``on_workers.distinct_per_task``, one small run), its
        distinct keys and their own bytes beside the combiner's partials; else its rows, each of ``key_bytes()`` (one
        input key's bytes, asked only here: a resident string's lengths are then sampled, the plan's one run) and the
        leaves' bytes.

        Example (1,000 keys of 10 distinct, int64 keys beside a float64 sum):
            >>> from tfmapreduce._base.plan import make_plan
            >>> from tfmapreduce._base.device import Device
            >>> from tfmapreduce._io.source import Shipped
            >>> cpu = Device.parse("/job:w/task:0/device:CPU:0")
            >>> keys = Shipped(np.arange(1_000) % 10)
            >>> sent, counted = Partials(8, True, 8).per_task(make_plan(1_000, [1_000], [cpu], [cpu]), [keys], lambda: 8)
            >>> list(sent.values()), counted
            ([(10, 160)], 'client')
        """
        counted, where = self._distinct(plan, srcs, cluster)
        if counted is not None:
            return {task: (d.keys, d.bytes + d.keys * self.leaves) for task, d in counted.items()}, where
        row = (key_bytes() if self.passes_keys else self.key) + self.leaves
        rows: dict[Task, int] = {}
        for shard in plan.shards:
            rows[shard.task] = rows.get(shard.task, 0) + shard.rows
        return {task: (n, n * row) for task, n in rows.items()}, None

    def _distinct(
        self, plan: Plan, srcs: Sequence[Source], cluster: Cluster | None
    ) -> tuple[dict[Task, DistinctKeys] | None, str]:
        """Each task's distinct keys where the map passes them through and they can be counted, and where."""
        if not srcs or not self.passes_keys:
            return None, ""
        if isinstance(srcs[0], FileSource) and cluster is not None:
            return distinct_in_files(plan, srcs[0], cluster), "workers reading its files"
        if isinstance(srcs[0], Resident):
            return distinct_on_workers(plan, srcs[0].sharded), "workers"
        array = getattr(srcs[0], "array", None)
        return (distinct_per_task(plan, np.asarray(array)) if array is not None else None), "client"


def _dtype(src: Source) -> tf.DType:
    return tf.string if np.dtype(src.dtype).kind in "OSU" else tf.as_dtype(np.dtype(src.dtype))


def _placeholders(src: Source) -> list[tf.Tensor]:
    """Placeholders shaped as ``src``'s batch: one, or a CSV table's keys and values (its keys alone where it reads
    no value column)."""
    if isinstance(src, FileSource) and isinstance(src.reader, CsvTable):
        keys = tf.compat.v1.placeholder(tf.int64 if src.reader.key_dtype == "int64" else tf.string, (None,))
        if not src.layout.columns[1:]:
            return [keys]
        return [keys, tf.compat.v1.placeholder(_dtype(src), (None, *src.shape[1:]))]
    return [tf.compat.v1.placeholder(_dtype(src), (None, *src.shape[1:]))]


def _leaf_bytes(t: tf.Tensor) -> int | None:
    """One row of ``t``'s bytes as the budget checks count them; None where its row shape is not known."""
    row = t.shape[1:]
    if not row.is_fully_defined():
        return None
    width = STRING_BYTES + UNKNOWN_STRING if t.dtype == tf.string else int(t.dtype.size)
    return int(math.prod(row.as_list())) * width


TRACED = "placeholders shaped as the input (the plan's trace)"
"""Where a map traced for a plan ran, as its errors name it."""


def traced_output(map_fn: Any, srcs: Sequence[Source]) -> tuple[list[tf.Tensor], Any] | None:
    """``map_fn``'s inputs and output, traced on placeholders shaped as ``srcs`` in a scratch graph; None where it
    cannot be traced (a map that takes broadcast values, or fails on placeholders).  A plan checks the output as the
    run does (``map_side.emit``, where :data:`TRACED` names it): keys no run takes (float, of several columns) refuse
    the plan, not only the run.

    Example:
        >>> from tfmapreduce._io.source import Shipped
        >>> _, (keys, _) = traced_output(lambda k: (k, tf.ones_like(k)), [Shipped(np.array([0.5]))])
        >>> keys.dtype, keys.shape.as_list()
        (tf.float64, [None])
    """
    graph = tf.Graph()
    try:
        with graph.as_default():
            inputs = [p for s in srcs for p in _placeholders(s)]
            return inputs, map_fn(*inputs)
    except Exception:  # a map that does not trace here: the plan counts rows instead
        return None


def traced(found: tuple[list[tf.Tensor], Any], form: SegmentForm) -> Partials | None:
    """The :class:`Partials` of a map's traced inputs and output (:func:`traced_output`, checked) and ``form``; None
    where the combiner does not trace on them or a partial's row shape is not known: the plan then counts input rows."""
    inputs, (keys, values) = found
    keys = tf.convert_to_tensor(keys)
    try:
        with keys.graph.as_default():
            ids = tf.compat.v1.placeholder(tf.int32, (None,))
            partial = form.partial(values, ids, tf.compat.v1.placeholder(tf.int32, ()))
    except Exception:  # a combiner that does not trace here: the plan counts rows instead
        return None
    passes = bool(inputs) and keys is inputs[0]
    leaves = [_leaf_bytes(t) for t in tf.nest.flatten(partial)]
    if any(b is None for b in leaves):
        return None
    key = STRING_BYTES + UNKNOWN_STRING if keys.dtype == tf.string else int(keys.dtype.size)
    return Partials(sum(b for b in leaves if b is not None), passes, key)
