"""The select kind of job: the values at given ranks of all of an input (or of each column), by radix select.

Each value is read as an unsigned integer ``u`` of w = 32 or 64 bits whose order is numpy's: a float's raw bits
(a negative one's order reversed, which the merge device undoes: -0.0 just below 0.0, NaN past ±inf), an integer's
distance from its column's minimum.  The graph of one exact run (one distributed execution)::

    shard i (its device)   integers: each column's minimum and maximum
    merge device           integers: the columns' minimum, and how many of u's bits vary (a small range needs few)
    shard i                the top 16 varying bits of u → a histogram of 65536 counts per column, and whether
                           each column holds a NaN (read off the histogram)
    merge device           the histograms summed, in the values' order → for each wanted (column, rank): the bucket
                           that holds it (a cumulative sum, a search) and the rank within it; equal buckets share a slot
    shard i                only its values in a chosen bucket (a table look-up) → a histogram of their next 12 bits
    merge device           the same choice; rounds go on until every bit of a rank's value is chosen (at most
                           2 more for 32-bit values, 4 for 64-bit); a round with nothing left to choose reads nothing
    client                 each rank's bits → its value

No value is sorted or sent: the shards send counts, the first round reads every value once and the later ones only
those in a chosen bucket.  The summary run stops after the first histogram: the approximate quantiles' mergeable
summary, a sample of values (which occur in the data) each with the exact ranks its bucket spans.  The values' bits
and their order are ``_bits``'.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf

from .._base.device import Device
from .._base.errors import InputError, JobError
from .._base.plan import Plan
from .._base.task import Task
from .._engine import driver as _engine
from .._engine.call import Call
from .._engine.kind import KindBase
from .._engine.program import Builder, Program
from .._io.source import Sources, sources, streamed
from .._ops.bits import BINS, DIGIT, WIDTHS, as_bits, nan_buckets, orders, value_of
from .._options import RunOptions

LOW = 12
"""Bits each later round chooses (a histogram of 4096 counts per chosen bucket, over its values only)."""
LOW_BINS = 1 << LOW

SAMPLE_ROWS = 1 << 16
"""Rows a summary samples in all, in proportion to each shard's rows (an input of at most this many is taken whole)."""

SEED = 0x5E1E
"""The first half of each shard's stateless sampling seed (the second is the shard's index)."""

COLUMNS = 16
"""Columns one run selects in (``axis=0``): a run's first histogram holds 65536 counts per column."""

TARGETS = 256
"""Wanted (column, rank) pairs one run selects."""

NO_SPECULATION = (
    "speculate=True does not apply to quantiles: the shards' histograms meet on one device between rounds of one "
    "distributed run, so no shard can be backed up alone; drop speculate="
)


@attrs.frozen
class SelectPlan:
    """The plan of a select run: the shards, the device their histograms meet on, and the rows each samples."""

    plan: Plan
    """The shards: which rows are counted on which device."""
    merge: str
    """The device that sums the histograms and chooses the buckets (the first non-empty shard's)."""
    samples: tuple[int, ...]
    """Rows of its ``(values, columns)`` view each shard samples (a summary run; zeros for an exact one)."""
    per_row: int = 1
    """Rows of the view per row of the input: its columns where a 2-D input is flattened."""

    @property
    def tasks(self) -> tuple[Task, ...]:
        return tuple(dict.fromkeys([*self.plan.tasks, Device.parse(self.merge).task]))


def sample_sizes(plan: Plan, per_row: int = 1) -> tuple[int, ...]:
    """Rows of the view (``per_row`` per input row) each shard of ``plan`` samples: all of them for a view of at most
    SAMPLE_ROWS rows, else in proportion."""
    if plan.rows * per_row <= SAMPLE_ROWS:
        return tuple(s.rows * per_row for s in plan.shards)
    return tuple(max(1, round(SAMPLE_ROWS * s.rows / plan.rows)) if s.rows else 0 for s in plan.shards)


@attrs.frozen
class Shape:
    """How a select run reads its input: as ``columns`` separate columns (``axis=0``), or flattened to one."""

    columns: tuple[int, int]
    """The input's columns this run reads, ``[start, stop)`` (``(0, 1)`` for 1-D or flattened input)."""
    flatten: bool
    """Every element of a 2-D input as one column (``axis=None``)."""

    @property
    def count(self) -> int:
        return self.columns[1] - self.columns[0]

    def view(self, x: tf.Tensor) -> tf.Tensor:
        """A shard as a ``(values, columns)`` matrix."""
        if x.shape.rank == 1 or self.flatten:
            return tf.reshape(x, [-1, 1])
        if self.columns == (0, x.shape[1]):
            return x
        return x[:, self.columns[0] : self.columns[1]]


@attrs.define(eq=False, repr=False)
class Select(KindBase[SelectPlan]):
    """A select run as the run driver sees it (see ``_engine.kind.Kind``): exact ranks, or a summary (``summary=True``)."""

    shape: Shape
    summary: bool
    phase: ClassVar[str] = "select"
    refused: ClassVar[Mapping[str, str]] = {"speculate": NO_SPECULATION}

    def __repr__(self) -> str:
        return f"select(summary={self.summary})"

    @property
    def identity(self) -> Hashable:
        return ("select", self.shape, self.summary)

    def sources(self, x: Any) -> tuple[Sources, Any]:
        return x, None  # checked by inputs()

    def plan(self, shards: Plan, call: Call) -> SelectPlan:
        full = [s for s in shards.shards if s.rows > 0] or list(shards.shards)
        shape = call.srcs[0].shape
        per_row = shape[1] if self.shape.flatten and len(shape) == 2 else 1
        samples = sample_sizes(shards, per_row) if self.summary else (0,) * len(shards.shards)
        return SelectPlan(shards, full[0].device, samples, per_row)

    def variant(self, plan: SelectPlan, call: Call) -> Hashable | None:
        return ()

    def build(self, builder: Builder, plan: SelectPlan, call: Call) -> Program:
        """The first histogram (and a sample, for a summary), then for an exact run the later rounds."""
        dtype = call.srcs[0].dtype
        width, floats, columns = WIDTHS[dtype], dtype.kind == "f", self.shape.count
        unsigned = tf.uint32 if width == 32 else tf.uint64
        full = [s for s in plan.plan.shards if s.rows > 0]
        xs: dict[int, tf.Tensor] = {}
        images: dict[int, tf.Tensor] = {}
        for shard in full:
            with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
                xs[shard.index] = builder.inputs(shard)[0]
                images[shard.index] = as_bits(self.shape.view(xs[shard.index]))
        with tf.device(plan.merge), tf.name_scope("range"):
            if floats:  # every bit varies: the top 16 first
                low = tf.zeros([columns], tf.int64)
                shift = tf.fill([columns], width - DIGIT)
            else:
                lows, highs = [], []
                for shard in full:
                    with tf.device(shard.device):
                        lows.append(tf.reduce_min(images[shard.index], 0))
                        highs.append(tf.reduce_max(images[shard.index], 0))
                low, high = tf.reduce_min(tf.stack(lows), 0), tf.reduce_max(tf.stack(highs), 0)
                span = tf.bitcast(high - low, unsigned)  # the column's largest u, wrapping as unsigned
                varying = tf.reduce_max(
                    [(b + 1) * tf.cast(tf.bitwise.bitwise_and(tf.bitwise.right_shift(span, b), 1), tf.int32) for b in range(width)], 0
                )  # fmt: skip
                shift = tf.maximum(varying - DIGIT, 0)
                low = tf.cast(low, tf.int64)
        us: dict[int, tf.Tensor] = {}
        bins: dict[int, tf.Tensor] = {}
        hists, nans, samples = [], [], []
        for shard in full:
            with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
                image = images[shard.index]
                u = image if floats else tf.bitcast(image - tf.cast(low, image.dtype), unsigned)
                top = tf.bitwise.right_shift(u, tf.cast(shift, unsigned))
                top = tf.bitcast(top, tf.int32) if width == 32 else tf.cast(top, tf.int32)
                if columns > 1:
                    top += tf.range(columns) * BINS  # column j's buckets follow column j - 1's
                us[shard.index], bins[shard.index] = tf.reshape(u, [-1]), tf.reshape(top, [-1])
                size = columns * BINS
                hist = tf.math.bincount(bins[shard.index], minlength=size, maxlength=size)
                hists.append(hist)
                nans.append(_nan(self.shape.view(xs[shard.index]), hist, columns) if floats else tf.zeros([columns], tf.bool))
                if self.summary:  # sampled rows of the (values, columns) view, and their buckets
                    n, view_rows = plan.samples[shard.index], shard.rows * plan.per_row
                    at = tf.range(n, dtype=tf.int64) if n == view_rows else tf.random.stateless_uniform(
                        [n], [SEED, shard.index], 0, view_rows, dtype=tf.int64
                    )  # fmt: skip
                    samples.append((tf.gather(self.shape.view(xs[shard.index]), at), tf.gather(top, at)))
                builder.mapped(shard, (hist, nans[-1]))
        with tf.device(plan.merge), tf.name_scope("merge"):
            raw_of = tf.constant(np.argsort(orders(dtype)).astype(np.int32))  # bucket i in order is u's raw_of[i]
            counts = tf.add_n([tf.cast(h, tf.int64) for h in hists])
            counts = tf.gather(tf.reshape(counts, [columns, BINS]), raw_of, axis=1)
            nan = tf.reduce_any(tf.stack(nans), 0)
        if self.summary:  # each sampled value, and the ranks [begin, end) of its bucket
            with tf.device(plan.merge), tf.name_scope("summary"):
                values, raw = tf.concat([v for v, _ in samples], 0), tf.concat([b for _, b in samples], 0)
                place = tf.gather(tf.constant(orders(dtype).astype(np.int32)), raw % BINS)
                place += tf.range(columns) * BINS
                ends = tf.gather(tf.reshape(tf.cumsum(counts, axis=1), [-1]), place)
                begins = ends - tf.gather(tf.reshape(counts, [-1]), place)
                summary = (values, begins, ends, nan, tf.equal(shift, 0))  # shift 0: a bucket is one value
            return builder.program(summary, plan.tasks)
        targets = builder.broadcast[0]  # (column, rank) pairs
        with tf.device(plan.merge), tf.name_scope("choose"):
            rows, ranks = tf.cast(targets[:, 0], tf.int32), targets[:, 1]
            bucket, ranks = _choose(counts, rows, ranks)
            digit = tf.gather(raw_of, bucket)  # u's bits, as the shards count them
            shift = tf.gather(shift, rows)  # below it, each wanted rank's bits are still to choose
            flip = bucket < BINS // 2 if floats else tf.zeros_like(bucket, tf.bool)  # a negative float's
            bits = tf.bitwise.left_shift(tf.cast(digit, tf.int64), tf.cast(shift, tf.int64))
            row_width = BINS
        for stage in range(-(-(width - DIGIT) // LOW)):
            with tf.device(plan.merge), tf.name_scope(f"choose{stage}"):
                open_ = tf.where(shift > 0)[:, 0]  # the wanted ranks with bits to choose
                pairs, slots = tf.unique(tf.gather(rows * row_width + digit, open_))
                used = tf.size(pairs)
                table = tf.tensor_scatter_nd_update(tf.fill([tf.size(counts)], -1), tf.expand_dims(pairs, 1), tf.range(used))
                below = tf.maximum(shift - LOW, 0)  # the next 12 bits (fewer where fewer are left)
                mask = tf.bitwise.left_shift(1, shift - below) - 1
                slot_below = tf.math.unsorted_segment_max(tf.gather(below, open_), slots, used)
                slot_mask = tf.math.unsorted_segment_max(tf.gather(mask, open_), slots, used)
                slot_flip = tf.math.unsorted_segment_max(tf.cast(tf.gather(flip, open_), tf.int32), slots, used) > 0
            hists = []
            for shard in full:
                with tf.device(shard.device), tf.name_scope(f"round{stage}_shard{shard.index}"):
                    us[shard.index], bins[shard.index], hist = _round(
                        us[shard.index], bins[shard.index], table, slot_below, slot_mask, used
                    )
                    hists.append(hist)
            with tf.device(plan.merge), tf.name_scope(f"merge{stage}"):
                counts = tf.reshape(tf.add_n([tf.cast(h, tf.int64) for h in hists]), [-1, LOW_BINS])
                counts = tf.where(tf.expand_dims(slot_flip, 1), tf.reverse(counts, [1]), counts)  # in the values' order
                counts = tf.concat([counts, tf.zeros([1, LOW_BINS], tf.int64)], 0)  # the row of the ranks already chosen
                rows = tf.tensor_scatter_nd_update(tf.fill(tf.shape(rows), used), tf.expand_dims(open_, 1), slots)
                bucket, chosen = _choose(counts, rows, ranks)
                choosing = shift > 0
                ranks = tf.where(choosing, chosen, ranks)
                digit = tf.where(flip, tf.bitwise.bitwise_xor(bucket, LOW_BINS - 1), bucket)
                step = tf.bitwise.left_shift(tf.cast(digit, tf.int64), tf.cast(below, tf.int64))
                bits = tf.where(choosing, tf.bitwise.bitwise_or(bits, step), bits)
                shift, row_width = below, LOW_BINS
        with tf.device(plan.merge):
            fetch = (bits, low, nan)
        return builder.program(fetch, plan.tasks)

    def finish(self, value: Any, program: Program | None, plan: SelectPlan, call: Call) -> Any:
        return value

    def failure(self, error: JobError, plan: SelectPlan) -> Exception | None:
        return None


def _choose(counts: tf.Tensor, rows: tf.Tensor, ranks: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """For each wanted rank in row ``rows`` of ``counts`` (each row in the keys' order): the bucket that holds it, and
    its rank within that bucket (one cumulative sum of every row, one search)."""
    width = tf.shape(counts, out_type=tf.int64)[1]
    cum = tf.cumsum(tf.reshape(counts, [-1]))
    start = tf.cast(rows, tf.int64) * width
    base = tf.where(start > 0, tf.gather(cum, tf.maximum(start - 1, 0)), tf.zeros_like(start))  # the rows before
    at = tf.searchsorted(tf.expand_dims(cum, 0), tf.expand_dims(base + ranks, 0), side="right", out_type=tf.int64)[0]
    before = tf.where(at > 0, tf.gather(cum, tf.maximum(at - 1, 0)), tf.zeros_like(at))
    return tf.cast(at - start, tf.int32), base + ranks - before


def _round(
    u: tf.Tensor, bins: tf.Tensor, table: tf.Tensor, below: tf.Tensor, mask: tf.Tensor, used: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """A later round on a shard: of its values in the last round's ``bins``, those in a chosen bucket (``table``:
    bin → slot, or -1), each with its slot's next bits (``u >> below & mask``) as the next bin; their histogram.
    With no bucket chosen (``used`` 0) it reads nothing."""
    reading = tf.where(used > 0, tf.size(bins), 0)
    u, bins = u[:reading], bins[:reading]  # (a prefix: no copy)
    slot = tf.gather(table, bins)
    kept = tf.where(slot >= 0)[:, 0]
    u, slot = tf.gather(u, kept), tf.gather(slot, kept)
    digit = tf.bitwise.bitwise_and(
        tf.bitwise.right_shift(u, tf.cast(tf.gather(below, slot), u.dtype)), tf.cast(tf.gather(mask, slot), u.dtype)
    )
    bins = slot * LOW_BINS + tf.cast(digit, tf.int32)
    return u, bins, tf.math.bincount(bins, minlength=used * LOW_BINS, maxlength=used * LOW_BINS)


def _nan(matrix: tf.Tensor, hist: tf.Tensor, columns: int) -> tf.Tensor:
    """Whether each column of a shard holds a NaN: read off its histogram, unless a value is in a ±inf bucket (then
    checked value by value)."""
    only_nan, inf = nan_buckets(np.dtype(matrix.dtype.as_numpy_dtype))
    counts = tf.reshape(hist, [columns, BINS])
    surely = tf.reduce_any(tf.gather(counts, only_nan, axis=1) > 0, 1)
    edge = tf.reduce_any(tf.gather(counts, inf, axis=1) > 0)
    checked = matrix[: tf.where(edge, tf.shape(matrix)[0], 0)]  # all of it next to ±inf, else none (no copy)
    return tf.logical_or(surely, tf.reduce_any(tf.math.is_nan(checked), 0))


def inputs(x: Any) -> Sources:
    """``x`` as the sources of a select run, checked: one 1-D or 2-D input of integers or floats (files read already).

    Raises:
        TypeError: several inputs, or another dtype.  InputError: another shape.
    """
    if isinstance(x, tuple):
        raise TypeError(f"x must be one array, got a tuple of {len(x)}; take the quantiles of each array on its own")
    srcs = sources(x)
    assert streamed(srcs) is None  # files come persisted (see _sort.persisted)
    src = srcs[0]
    if len(src.shape) not in (1, 2):
        raise InputError(f"x must be 1-D or 2-D (rows × columns), got shape {src.shape}; reshape it, e.g. x.reshape(len(x), -1)")
    if src.dtype not in WIDTHS:
        raise TypeError(
            f"x must hold integers (int8 to int64, uint8 to uint32) or floats (float16 to float64), got dtype {src.dtype}; "
            "convert it, e.g. x.astype(np.float64)"
        )
    return srcs


def select(
    srcs: Sources, wanted: list[tuple[int, int]], settings: RunOptions, *, flatten: bool
) -> tuple[dict[tuple[int, int], Any], np.ndarray]:
    """The value at each wanted (column, rank) of ``srcs`` (ranks in the order of ``np.sort`` of the column), and
    whether each column holds a NaN: one exact run per ``COLUMNS`` columns and ``TARGETS`` pairs."""
    src = srcs[0]
    total = 1 if flatten or len(src.shape) == 1 else src.shape[1]
    found: dict[tuple[int, int], Any] = {}
    nan = np.zeros(total, bool)
    by_chunk: dict[int, list[tuple[int, int]]] = {}
    for column, rank in dict.fromkeys(wanted):
        by_chunk.setdefault(column // COLUMNS, []).append((column, rank))
    for chunk, pairs in by_chunk.items():
        start = chunk * COLUMNS
        shape = Shape((start, min(total, start + COLUMNS)), flatten)
        for i in range(0, len(pairs), TARGETS):
            part = pairs[i : i + TARGETS]
            padded = part + [part[-1]] * (_round_up(len(part)) - len(part))  # few shapes: few programs
            targets = np.array([(c - start, r) for c, r in padded], np.int64)
            bits, low, column_nan = _engine.run(Select(shape, False), srcs, settings, (targets,))
            nan[shape.columns[0] : shape.columns[1]] |= column_nan
            for (c, r), b in zip(part, np.asarray(bits).tolist(), strict=False):
                found[(c, r)] = value_of(b, int(low[c - start]), src.dtype)
    return found, nan


def summarize(srcs: Sources, settings: RunOptions, shape: Shape) -> tuple[np.ndarray, ...]:
    """One summary run over the columns of ``shape``: a sample of values ``(samples, columns)``, the ranks
    ``[begin, end)`` of each one's first-round bucket in its column (so of the value itself), whether each column
    holds a NaN, and whether each column's buckets hold one value each (integers of a range under 65536: then a
    sampled value holds every rank of its bucket)."""
    values, begin, end, nan, single = _engine.run(Select(shape, True), srcs, settings)
    return np.asarray(values), np.asarray(begin), np.asarray(end), np.asarray(nan), np.asarray(single)


def _round_up(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())
