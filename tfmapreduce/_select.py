"""The select kind of job: the values at given ranks of all of an input (or of each column), by radix select.

The graph of one exact run (one distributed execution), for keys of w = 32 or 64 bits (:func:`key`: the values as
integers in numpy's order; floats by their bits, -0.0 just below 0.0, NaN past ±inf)::

    shard i (its device)   each value's key → its top 16 bits → a histogram of 65536 counts per column, and
                           whether each column holds a NaN
    merge device           the shards' histograms summed → for each wanted (column, rank): the bucket that holds
                           the rank (a cumulative sum, a search) and the rank within it; equal buckets share a slot
    shard i                only its values in a chosen bucket (a table look-up of their top bits) → a histogram of
                           their next 16 bits, per slot
    merge device           the same choice, until every bit of the key is chosen (2 rounds of 16 bits for 32-bit
                           keys, 4 for 64-bit)
    client                 each wanted rank's key → its value

No value is sorted or sent: each round reads the shard's keys once (the later rounds only those in a chosen bucket)
and sends 65536 counts per slot.  The summary run stops after the first histogram and fetches it with a sample of
rows: the approximate quantiles' mergeable summary (exact counts per bucket, and values that occur in the data).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf

from . import _engine
from ._device import Device
from ._errors import InputError, JobError
from ._options import RunOptions
from ._plan import Plan
from ._program import Builder, Call, Program, Ready
from ._source import Sources, sources, streamed
from ._task import Task

DIGIT = 16
"""Bits of the key the first round chooses (a histogram of 65536 counts per column, over every value)."""
BINS = 1 << DIGIT

LOW = 8
"""Bits each later round chooses (a histogram of 256 counts per chosen bucket, over its values only)."""
LOW_BINS = 1 << LOW

SAMPLE_ROWS = 1 << 16
"""Rows a summary samples in all, in proportion to each shard's rows (an input of at most this many is taken whole)."""

SEED = 0x5E1E
"""The first half of each shard's stateless sampling seed (the second is the shard's index)."""

COLUMNS = 16
"""Columns one run selects in (``axis=0``): a run's first histogram holds 65536 counts per column."""

TARGETS = 256
"""Wanted (column, rank) pairs one run selects."""

WIDTHS = {
    **{np.dtype(d): 32 for d in ("int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32")},
    **{np.dtype(d): 64 for d in ("int64", "float64")},
}
"""The dtypes selected in, and the bits of their keys."""

NO_SPECULATION = (
    "speculate=True does not apply to quantiles: the shards' histograms meet on one device between rounds of one "
    "distributed run, so no shard can be backed up alone; drop speculate="
)


def np_key(values: np.ndarray) -> np.ndarray:
    """The values as int64 keys in numpy's order, in a total order: the value at rank r of the keys, mapped back
    (:func:`from_keys`), is a value at rank r of ``np.sort(values)``.

    Signed integers keep their value, uint32 is offset by -2**31.  Floats map their bits: -0.0 is just below 0.0
    (numpy holds them equal, so either order is numpy's), a NaN above +inf (below -inf with its sign bit set; a
    quantile of data with a NaN is NaN anyway), and nothing is flushed to zero, as a comparison of floats on
    TensorFlow's CPUs would flush a subnormal.  The shards never compute keys: they count the values' raw bits,
    whose buckets the merge device puts in the keys' order (:func:`orders`).

    Example:
        >>> x = np.array([2.0, -0.0, -1.5, 0.0, -np.inf, 1e-45], np.float32)
        >>> np.argsort(np_key(x)).tolist()
        [4, 2, 1, 3, 5, 0]
    """
    if values.dtype == np.float16:
        values = values.astype(np.float32)
    if values.dtype.kind == "f":
        raw = values.view(np.int32 if values.dtype == np.float32 else np.int64).astype(np.int64)
        bits = 8 * values.dtype.itemsize - 1
        keys: np.ndarray = raw ^ ((raw >> bits) & (2**bits - 1))
        return keys
    if values.dtype == np.uint32:
        return values.astype(np.int64) - 2**31
    return values.astype(np.int64)


def from_keys(keys: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """The values of ``keys`` (int64, from :func:`np_key`) as ``dtype``: its inverse (a NaN's payload aside).

    Example:
        >>> x = np.array([-0.0, 2.5, -np.inf], np.float32)
        >>> from_keys(np_key(x), x.dtype).tolist() == x.tolist() and bool(np.signbit(from_keys(np_key(x), x.dtype)[0]))
        True
    """
    keys = np.asarray(keys, np.int64)
    if dtype == np.uint32:
        return (keys + 2**31).astype(dtype)
    if dtype.kind != "f":
        return keys.astype(dtype)
    wide = np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)
    bits = 8 * wide.itemsize - 1
    raw = keys ^ ((keys >> bits) & (2**bits - 1))
    values: np.ndarray = raw.astype(np.int32 if wide == np.float32 else np.int64).view(wide).astype(dtype)
    return values


def top_bucket(keys: np.ndarray, width: int) -> np.ndarray:
    """The first round's bucket of each key (int64 from :func:`np_key`): its top 16 bits, offset to 0..65535."""
    return (keys >> (width - DIGIT)) + BINS // 2


def raw_bits(values: tf.Tensor) -> tf.Tensor:
    """The values' bits as uint32 or uint64, which the shards count (small integers widened to int32, float16 to
    float32 first): bucket i of their top 16 bits is bucket ``orders(dtype)[i]`` of the keys'."""
    if values.dtype == tf.float16:
        values = tf.cast(values, tf.float32)
    elif values.dtype in (tf.int8, tf.int16, tf.uint8, tf.uint16):
        values = tf.cast(values, tf.int32)
    if values.dtype in (tf.uint32, tf.uint64):
        return values
    return tf.bitcast(values, tf.uint64 if values.dtype.size == 8 else tf.uint32)


def orders(dtype: np.dtype[Any]) -> np.ndarray:
    """For each bucket of the raw bits' top 16 bits (:func:`raw_bits`), the keys' bucket (:func:`top_bucket`).

    A negative float's key is its bits with all but the sign flipped, so below its top bucket the order of its
    lower digits is reversed too.

    Example:
        >>> orders(np.dtype(np.float32))[[0x3F80, 0xBF80]].tolist()  # 1.0 and -1.0
        [49024, 16511]
    """
    unsigned = np.arange(BINS, dtype=np.int64)
    signed = np.where(unsigned >= BINS // 2, unsigned - BINS, unsigned)
    if dtype.kind == "f":
        return np.where(signed < 0, signed ^ 0x7FFF, signed) + BINS // 2
    if dtype == np.uint32:
        return unsigned
    return signed + BINS // 2


def nan_buckets(dtype: np.dtype[Any]) -> tuple[np.ndarray, np.ndarray]:
    """The raw top buckets of a float dtype that hold only NaNs, and the two that hold ±inf (and NaNs whose payload
    is all in the lower bits): a value there is checked one by one."""
    width = WIDTHS[dtype]
    wide = np.float64 if width == 64 else np.float32
    low, high = top_bucket(np_key(np.array([-np.inf, np.inf], wide)), width).tolist()
    raw = np.argsort(orders(dtype))
    keys = np.arange(BINS)
    return raw[(keys < low) | (keys > high)], raw[[low, high]]


@attrs.frozen
class SelectPlan:
    """The plan of a select run: the shards, the device their histograms meet on, and the rows each samples."""

    plan: Plan
    """The shards: which rows are counted on which device."""
    merge: str
    """The device that sums the histograms and chooses the buckets (the first non-empty shard's)."""
    samples: tuple[int, ...]
    """Rows each shard samples (a summary run; zeros for an exact one)."""

    @property
    def tasks(self) -> tuple[Task, ...]:
        return tuple(dict.fromkeys([*self.plan.tasks, Device.parse(self.merge).task]))


def sample_sizes(plan: Plan) -> tuple[int, ...]:
    """Rows each shard of ``plan`` samples: all of them for an input of at most SAMPLE_ROWS, else in proportion."""
    if plan.rows <= SAMPLE_ROWS:
        return tuple(s.rows for s in plan.shards)
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
class Select:
    """A select run as the run driver sees it (see ``_engine.Kind``): exact ranks, or a summary (``summary=True``)."""

    shape: Shape
    summary: bool
    ready: dict[Hashable, Ready] = attrs.field(factory=dict)
    speculation: str | None = NO_SPECULATION
    phase: ClassVar[str] = "select"

    def __repr__(self) -> str:
        return f"select(summary={self.summary})"

    @property
    def identity(self) -> Hashable:
        return ("select", self.shape, self.summary)

    def sources(self, x: Any) -> tuple[Sources, Any]:
        return x, None  # checked by inputs()

    def plan(self, shards: Plan, call: Call) -> SelectPlan:
        full = [s for s in shards.shards if s.rows > 0] or list(shards.shards)
        return SelectPlan(shards, full[0].device, sample_sizes(shards) if self.summary else (0,) * len(shards.shards))

    def variant(self, plan: SelectPlan, call: Call) -> Hashable | None:
        return ()

    def build(self, builder: Builder, plan: SelectPlan, call: Call) -> Program:
        """The first histogram (and a sample, for a summary), then for an exact run the later rounds."""
        dtype = call.srcs[0].dtype
        width, floats, columns = WIDTHS[dtype], dtype.kind == "f", self.shape.count
        full = [s for s in plan.plan.shards if s.rows > 0]
        raws: dict[int, tf.Tensor] = {}
        bins: dict[int, tf.Tensor] = {}
        hists, nans, samples = [], [], []
        for shard in full:
            with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
                x = builder.inputs(shard)[0]
                matrix = self.shape.view(x)
                raw = raw_bits(matrix)
                top = tf.bitwise.right_shift(raw, tf.constant(width - DIGIT, raw.dtype))
                top = tf.bitcast(top, tf.int32) if width == 32 else tf.cast(top, tf.int32)
                if columns > 1:
                    top += tf.range(columns) * BINS  # column j's buckets: j * 65536 + bucket
                raws[shard.index], bins[shard.index] = tf.reshape(raw, [-1]), tf.reshape(top, [-1])
                hist = tf.math.bincount(bins[shard.index], minlength=columns * BINS, maxlength=columns * BINS)
                hists.append(hist)
                nans.append(_nan(matrix, hist, columns) if floats else tf.zeros([columns], tf.bool))
                if self.summary:
                    n = plan.samples[shard.index]
                    at = tf.range(n, dtype=tf.int64) if n == shard.rows else tf.random.stateless_uniform(
                        [n], [SEED, shard.index], 0, shard.rows, dtype=tf.int64
                    )  # fmt: skip
                    samples.append(tf.reshape(self.shape.view(tf.gather(x, at)), [-1, columns]))
                builder.mapped(shard, (hist, nans[-1]))
        with tf.device(plan.merge), tf.name_scope("merge"):
            raw_of = tf.constant(np.argsort(orders(dtype)).astype(np.int32))  # the keys' bucket i is raw bucket raw_of[i]
            counts = tf.gather(tf.reshape(tf.add_n([tf.cast(h, tf.int64) for h in hists]), [columns, BINS]), raw_of, axis=1)
            nan = tf.reduce_any(tf.stack(nans), 0)
        if self.summary:
            with tf.device(plan.merge):
                summary = (counts, tf.concat(samples, 0), nan)
            return builder.program(summary, plan.tasks)
        targets = builder.broadcast[0]  # (column, rank) pairs
        with tf.device(plan.merge), tf.name_scope("merge"):
            rows, ranks = tf.cast(targets[:, 0], tf.int32), targets[:, 1]
            digits = []
        for stage in range((width - DIGIT) // LOW):
            first = stage == 0
            with tf.device(plan.merge), tf.name_scope(f"choose{stage}"):
                bucket, ranks = _choose(counts, rows, ranks)
                digits.append(bucket)
                if first:
                    raw_bucket = tf.gather(raw_of, bucket)
                    flip = bucket < BINS // 2 if floats else tf.zeros_like(bucket, tf.bool)  # a negative float's
                else:
                    raw_bucket = tf.where(flip, tf.bitwise.bitwise_xor(bucket, LOW_BINS - 1), bucket)
                pairs, rows = tf.unique(rows * (BINS if first else LOW_BINS) + raw_bucket)
                used = tf.size(pairs)
                table = tf.tensor_scatter_nd_update(tf.fill([tf.size(counts)], -1), tf.expand_dims(pairs, 1), tf.range(used))
                reversed_rows = tf.math.unsorted_segment_max(tf.cast(flip, tf.int32), rows, used) > 0
            hists = []  # (row, raw bucket) → its slot; -1 where no wanted rank is
            for shard in full:
                with tf.device(shard.device), tf.name_scope(f"round{stage}_shard{shard.index}"):
                    slot = tf.gather(table, bins[shard.index])
                    kept = tf.where(slot >= 0)[:, 0]  # only the values in a chosen bucket
                    raw = tf.gather(raws[shard.index], kept)
                    shift = tf.constant(width - DIGIT - LOW * (stage + 1), raw.dtype)
                    digit = tf.bitwise.bitwise_and(tf.bitwise.right_shift(raw, shift), tf.constant(LOW_BINS - 1, raw.dtype))
                    raws[shard.index] = raw
                    bins[shard.index] = tf.gather(slot, kept) * LOW_BINS + tf.cast(digit, tf.int32)
                    hists.append(tf.math.bincount(bins[shard.index], minlength=used * LOW_BINS, maxlength=used * LOW_BINS))
            with tf.device(plan.merge):
                counts = tf.reshape(tf.add_n([tf.cast(h, tf.int64) for h in hists]), [-1, LOW_BINS])
                counts = tf.where(tf.expand_dims(reversed_rows, 1), tf.reverse(counts, [1]), counts)  # in the keys' order
        with tf.device(plan.merge), tf.name_scope("choose_last"):
            bucket, _ = _choose(counts, rows, ranks)
            digits.append(bucket)
            fetch = (tf.concat([tf.expand_dims(d, 1) for d in digits], 1), nan)
        return builder.program(fetch, plan.tasks)

    def finish(self, value: Any, program: Program | None, plan: SelectPlan, call: Call) -> Any:
        return value

    def failure(self, error: JobError) -> Exception | None:
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


def _nan(matrix: tf.Tensor, hist: tf.Tensor, columns: int) -> tf.Tensor:
    """Whether each column of a shard holds a NaN: read off its histogram, unless a value is in a ±inf bucket (then
    checked value by value)."""
    only_nan, inf = nan_buckets(np.dtype(matrix.dtype.as_numpy_dtype))
    counts = tf.reshape(hist, [columns, BINS])
    surely = tf.reduce_any(tf.gather(counts, only_nan, axis=1) > 0, 1)
    edge = tf.reduce_any(tf.gather(counts, inf, axis=1) > 0)
    return tf.cond(edge, lambda: tf.reduce_any(tf.math.is_nan(matrix), 0), lambda: surely)


def inputs(x: Any) -> Sources:
    """``x`` as the sources of a select run, checked: one 1-D or 2-D input of integers or floats, not read from files.

    Raises:
        TypeError: files, several inputs, or another dtype.  InputError: another shape.
    """
    if isinstance(x, tuple):
        raise TypeError(f"x must be one array, got a tuple of {len(x)}; take the quantiles of each array on its own")
    srcs = sources(x)
    if streamed(srcs) is not None:
        raise TypeError(
            "x reads files, which quantiles cannot take yet; persist them first (files.persist(cluster=c)) and take "
            "the quantiles of the resident data"
        )
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
            digits, column_nan = _engine.run(Select(shape, False), srcs, settings, (targets,))
            nan[shape.columns[0] : shape.columns[1]] |= column_nan
            keys = _assemble(np.asarray(digits, np.int64), WIDTHS[src.dtype])
            for (c, r), k in zip(part, keys, strict=False):
                found[(c, r)] = from_keys(np.array([k]), src.dtype)[0]
    return found, nan


def summarize(srcs: Sources, settings: RunOptions, shape: Shape) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One summary run over the columns of ``shape``: the first-round histogram per column ``(columns, 65536)``, a
    sample of rows ``(samples, columns)`` and whether each column holds a NaN."""
    hist, sample, nan = _engine.run(Select(shape, True), srcs, settings)
    return np.asarray(hist), np.asarray(sample), np.asarray(nan)


def _round_up(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _assemble(digits: np.ndarray, width: int) -> list[int]:
    """Each row's key from its digits (the first offset by 32768, as the buckets are)."""
    keys = []
    for row in digits.tolist():
        k = row[0] - BINS // 2
        for d in row[1:]:
            k = (k << LOW) | d
        keys.append(k)
    return keys
