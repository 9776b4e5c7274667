"""Sampled range partitioning (TeraSort's way), in the graph: the map side of ``tmr.sort`` and of the spilled sort.

Each shard samples its rows, R − 1 splitters are chosen from the sample on the first reducer, and each shard's rows
are split into R ranges by ``tf.searchsorted`` (see ``sort``).  Ties break by global row, so the ranges in order, each
stably sorted, are the input stably sorted.

Example (one splitter, the key 5.0 of row 1: row 1 itself is not above it, row 2 is):
    >>> _ranges(tf.constant([1.0, 5.0, 9.0]), tf.constant([5.0]), 0, tf.constant([1], tf.int64)).numpy().tolist()
    [0, 0, 1]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from .._base.plan import Plan
from .._engine.program import Builder
from .._ops.splitters import SEED, comparable, ranked_with
from .._ops.splitters import sample_size as _sample_size


@attrs.frozen
class KeyMaker:
    """A sort whose key is made in its own graph, on each shard before it is sampled: ``fn(*columns)`` returns the
    shard's ``(key, *values)`` (1-D, one row each, of ``dtypes``) from its input columns, so a key of several
    columns (a table's order-preserving bytes) is made where the rows are and never on the client. Equal ``KeyMaker``
    values (the same ``fn`` object) share a compiled sort."""

    fn: Callable[..., tuple[tf.Tensor, ...]]
    dtypes: tuple[np.dtype, ...]


def _ranges(key: tf.Tensor, split_keys: tf.Tensor, start: int | tf.Tensor, split_rows: tf.Tensor) -> tf.Tensor:
    """Each row's range: how many splitters (key, row) are below its own (key, global row ``start + i``)."""
    left = tf.searchsorted(split_keys, key, side="left", out_type=tf.int32)
    right = tf.searchsorted(split_keys, key, side="right", out_type=tf.int32)
    tied = tf.where(left < right)  # rows whose key equals a splitter's: their row decides among those splitters
    tied_keys, tied_rows = tf.gather_nd(key, tied), tied[:, 0] + start
    same_key = tf.equal(tf.expand_dims(split_keys, 0), tf.expand_dims(tied_keys, 1))
    below = tf.logical_and(same_key, tf.expand_dims(split_rows, 0) < tf.expand_dims(tied_rows, 1))
    return tf.tensor_scatter_nd_add(left, tied, tf.reduce_sum(tf.cast(below, tf.int32), axis=1))


SAMPLE = "sort_sample"
"""The name of a rows-free sort's run input: a shard's sample size (``per_run_value``), its index appended."""
START = "sort_start"
"""The name of a rows-free sort's run input: a shard's first global row, its index appended."""


def per_run_value(plan: Plan, ranges: int, name: str) -> int:
    """The value of the run input ``name`` (``SAMPLE`` or ``START`` and a shard's index) of a rows-free sort of ``plan``
    into ``ranges`` ranges.

    Example:
        >>> shards = tmr.MapReduce(tf.reduce_sum, tf.add).plan(np.arange(10), cluster=cluster, sizes=[4, 6])
        >>> per_run_value(shards, 2, "sort_start1"), per_run_value(shards, 2, "sort_sample1")
        (4, 6)
    """
    for prefix in (SAMPLE, START):
        if name.startswith(prefix):
            shard = plan.shards[int(name[len(prefix) :])]
            return _sample_size(shard.rows, plan.rows, ranges) if prefix == SAMPLE else shard.start
    raise ValueError(f"name must be {SAMPLE!r} or {START!r} and a shard index, got {name!r}")


def _sample_at(key: tf.Tensor, n: tf.Tensor, index: int) -> tf.Tensor:
    """The rows a shard of ``key`` samples, ``n`` of them (a run input): all of them in order where ``n`` is its row
    count, else ``n`` drawn at random (the same rows as a graph of this shard's row count draws)."""
    rows = tf.shape(key, out_type=tf.int64)[0]
    return tf.cond(
        tf.equal(n, rows),
        lambda: tf.range(rows, dtype=tf.int64),
        lambda: tf.random.stateless_uniform(tf.reshape(n, [1]), [SEED, index], 0, tf.maximum(rows, 1), dtype=tf.int64),
    )


def range_ids(
    builder: Builder, plan: Plan, ranges: int, chooser: str, descending: bool, native: Any | None, keyed: KeyMaker | None = None
) -> tuple[dict[int, list[tf.Tensor]], dict[int, tf.Tensor | None]]:
    """Each non-empty shard's columns (``builder.inputs``, or ``keyed``'s key and values made from them), and each
    of its rows' range (int32; None where ``ranges`` is 1), the splitters chosen on ``chooser`` from a sample of about
    ``SAMPLES`` rows per range.  In a rows-free build (``builder.rows_free``) each shard's sample size and first global
    row are run inputs (``builder.per_run``, filled by :func:`per_run_value`), so the graph holds no row count."""
    full = [s for s in plan.shards if s.rows > 0]
    tensors: dict[int, list[tf.Tensor]] = {}
    starts: dict[int, Any] = {}
    samples = []
    for shard in full:
        with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
            tensors[shard.index] = builder.inputs(shard) if keyed is None else list(keyed.fn(*builder.inputs(shard)))
            if builder.rows_free:
                starts[shard.index] = builder.per_run(f"{START}{shard.index}", tf.int64)
                at = _sample_at(tensors[shard.index][0], builder.per_run(f"{SAMPLE}{shard.index}", tf.int64), shard.index)
                samples.append((tf.gather(tensors[shard.index][0], at), at + starts[shard.index]))
                continue
            starts[shard.index] = shard.start
            n = _sample_size(shard.rows, plan.rows, ranges)
            if n == shard.rows:
                at = tf.range(shard.rows, dtype=tf.int64)
            elif n:
                at = tf.random.stateless_uniform([n], [SEED, shard.index], 0, shard.rows, dtype=tf.int64)
            if n:
                samples.append((tf.gather(tensors[shard.index][0], at), at + shard.start))
    if samples and ranges > 1:  # R − 1 splitters from the sample sorted by (key, row)
        with tf.device(chooser), tf.name_scope("splitters"):
            sample_keys = tf.concat([k for k, _ in samples], 0)
            sample_rows = tf.concat([r for _, r in samples], 0)
            by_row = tf.argsort(sample_rows, stable=True)
            sample_keys, sample_rows = tf.gather(sample_keys, by_row), tf.gather(sample_rows, by_row)
            by_key = tf.argsort(comparable(sample_keys, descending, native), stable=True)
            total = tf.shape(sample_keys, out_type=tf.int64)[0]
            at = tf.minimum(total - 1, total * tf.range(1, ranges, dtype=tf.int64) // ranges)
            split_keys = tf.gather(tf.gather(sample_keys, by_key), at)
            split_rows = tf.gather(tf.gather(sample_rows, by_key), at)
    which: dict[int, tf.Tensor | None] = {}
    for shard in full:
        with tf.device(shard.device), tf.name_scope(f"ranges{shard.index}"):
            key = tensors[shard.index][0]
            which[shard.index] = (
                None
                if ranges == 1
                else _ranges(*ranked_with(key, split_keys, descending, native), starts[shard.index], split_rows)
            )
    return tensors, which


def partition_ranges(
    builder: Builder, plan: Plan, ranges: int, chooser: str, descending: bool, native: Any | None, keyed: KeyMaker | None = None
) -> dict[int, list[list[tf.Tensor]]]:
    """Each non-empty shard's columns split into ``ranges`` ranges (shard index → per column → its ranges)
    (:func:`range_ids`); each shard's ``mapped`` is called on its ranges."""
    tensors, which = range_ids(builder, plan, ranges, chooser, descending, native, keyed)
    pieces: dict[int, list[list[tf.Tensor]]] = {}
    for shard in (s for s in plan.shards if s.rows > 0):
        with tf.device(shard.device), tf.name_scope(f"partition{shard.index}"):
            ids = which[shard.index]
            parts = (
                [[t] for t in tensors[shard.index]]
                if ids is None
                else [tf.dynamic_partition(t, ids, ranges) for t in tensors[shard.index]]
            )
            builder.mapped(shard, parts)
            pieces[shard.index] = parts
    return pieces
