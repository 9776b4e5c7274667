"""Each task's distinct keys, counted on the workers where the files holding them are read: one small run.

A keyed combine whose keys are a file source's rows (``.npy`` integers, text lines, a CSV table's key column) cannot
read them on the client.  :func:`distinct_per_task` reads each task's shards' files once, where the run would read
them, keeps the distinct keys seen so far, batch by batch (``tf.unique`` of them and the batch's), and counts them:
only two numbers a task travel back, its distinct keys and, for strings, their UTF-8 bytes.  A CSV table's key column
is read alone (``read_csv`` with ``keys=``).  Float keys and rows of several values are what no keyed run takes
(their plans are refused, ``partials.traced_output``), so these are every file key a plan meets.
"""

from __future__ import annotations

import functools

import attrs
import numpy as np
import tensorflow as tf

from ..._base.plan import Plan, Shard
from ..._base.task import Task
from ..._cluster.cluster import Cluster
from ..._io.files.csv import CsvTable
from ..._io.files.readers import Layout
from ..._io.files.source import FileSource
from .distinct import STRING_BYTES, DistinctKeys
from .on_workers import count_distinct

BATCH_ROWS = 1 << 18
"""The rows of a batch read: each merges the keys seen so far once, so few batches keep the merges few."""


def distinct_per_task(plan: Plan, src: FileSource, cluster: Cluster) -> dict[Task, DistinctKeys] | None:
    """Each task's :class:`DistinctKeys` of ``src``'s rows over its shards of ``plan``, counted on its workers in one
    run, in the plan's task order; None where ``src``'s rows are not one signed integer or string each.

    Example: a text file of the lines ``a``, ``é``, ``a``, ``bc`` read whole by one task of a 2-task plan counts
    ``DistinctKeys(keys=3, bytes=3 * 32 + 4)`` there (``"é"`` is 2 bytes) and ``DistinctKeys(0, 0)`` on the other
    (tested in ``tests/_kinds/test_partials_forecast.py``).
    """
    if isinstance(src.reader, CsvTable):  # its key column alone is read
        dtype = tf.int64 if src.reader.key_dtype == "int64" else tf.string
        src = keys_only(src)
    elif len(src.shape) == 1 and np.dtype(src.dtype).kind in "iOSU":
        dtype = tf.string if np.dtype(src.dtype).kind in "OSU" else tf.as_dtype(src.dtype)
    else:
        return None

    def unique(shards: list[Shard]) -> tf.Tensor | None:
        pieces = [piece.dataset for s in shards for piece in src.batches(s, BATCH_ROWS)]
        if not pieces:
            return None
        batches = functools.reduce(lambda a, b: a.concatenate(b), pieces)
        return batches.reduce(tf.zeros([0], dtype), tf.autograph.experimental.do_not_convert(_merge))

    strings = dtype == tf.string
    return count_distinct(cluster, plan, unique, strings=strings, width=STRING_BYTES if strings else dtype.size)


def _merge(seen: tf.Tensor, *batch: tf.Tensor) -> tf.Tensor:
    """The distinct keys of those ``seen`` and the batch's (its first tensor: the keys)."""
    return tf.unique(tf.concat([seen, tf.reshape(tf.nest.flatten(batch)[0], [-1])], 0)).y


def keys_only(src: FileSource) -> FileSource:
    """``src``, a CSV table's, reading its key column alone (each batch its keys: a ``count_by_key`` table's)."""

    def key(layout: Layout) -> Layout:
        return attrs.evolve(layout, columns=layout.columns[:1], row_shape=())

    entries = tuple(attrs.evolve(e, layout=None if e.layout is None else key(e.layout)) for e in src.entries)
    return attrs.evolve(src, entries=entries, layout=key(src.layout))
