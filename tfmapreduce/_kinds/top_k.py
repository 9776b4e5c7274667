"""The top-k kind of job: the k largest (or smallest) values of the whole input and their global rows, in one run.

The graph of one top-k (one distributed execution)::

    shard i (on its device)   key = the values as ordered integers (``_splitters.order_key``: NaN largest, -0.0 = 0.0;
                              inverted for the k smallest) → ``tf.math.top_k`` of the keys: the shard's k candidates,
                              their values, and their rows + the shard's first row (global row numbers)
                              (a file shard: folded batch by batch, each batch's rows after those read before it)
    the master's CPU          the candidates of every shard, in shard order → ``tf.math.top_k`` again → fetched

``tf.math.top_k`` puts the lower index first among equal keys; each shard's candidates are in that order and the
shards are concatenated in row order, so equal values come out lower row first, over the whole input too.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._base.errors import InputError, JobError
from .._base.plan import Plan, Shard
from .._engine import driver as _engine
from .._engine.call import Call
from .._engine.kind import KindBase
from .._engine.program import Builder, Program
from .._io.files.source import FileSource
from .._io.source import Sources, Streamed, sources, streamed
from .._ops.splitters import FLOAT_DTYPES, INT_DTYPES, order_key
from .._options import Options, RunOptions

NO_SPECULATION = (
    "speculate=True does not apply to top_k: each shard's candidates go to one merge in one distributed run, "
    "so no shard can be backed up alone; drop speculate="
)

Candidates = tuple[tf.Tensor, tf.Tensor, tf.Tensor]
"""(order keys, values, global rows): the best rows seen so far, best first (equal keys: lower row first)."""


def _best(candidates: Candidates, k: int) -> Candidates:
    """The ``k`` best of ``candidates`` (all of them when fewer), best first; equal keys keep their order."""
    keys, values, rows = candidates
    kept = tf.math.top_k(keys, tf.minimum(tf.size(keys), k)).indices
    return tf.gather(keys, kept), tf.gather(values, kept), tf.gather(rows, kept)


def _concat(parts: list[Candidates]) -> Candidates:
    keys, values, rows = zip(*parts, strict=True)
    return tf.concat(keys, 0), tf.concat(values, 0), tf.concat(rows, 0)


@attrs.define(eq=False, repr=False)
class TopK(KindBase[Plan]):
    """A top-k as the run driver sees it (see ``_engine.kind.Kind``): each shard's k candidates merged on one device."""

    k: int
    largest: bool
    phase: ClassVar[str] = "merge"
    refused: ClassVar[Mapping[str, str]] = {"speculate": NO_SPECULATION}

    def __repr__(self) -> str:
        return f"top_k(k={self.k}, largest={self.largest})"

    @property
    def identity(self) -> Hashable:
        return ("top_k", self.k, self.largest)

    def sources(self, x: Any) -> tuple[Sources, Any]:
        srcs = sources(x)
        if len(srcs) > 1:
            raise TypeError(f"x must be one array, got a tuple of {len(srcs)}; take the top k of one column at a time")
        src = srcs[0]
        if len(src.shape) != 1:
            raise InputError(
                f"x must be 1-D (one value per row), got shape {src.shape}; pick one column, e.g. x[:, 0], "
                "or flatten it with x.reshape(-1)"
            )
        if src.dtype not in INT_DTYPES + FLOAT_DTYPES:
            raise TypeError(
                f"x must hold integers (int8 to int64, uint8 to uint32) or floats (float16 to float64), got dtype "
                f"{src.dtype}; convert it, e.g. x.astype(np.int64)"
            )
        stream = streamed(srcs)
        if isinstance(stream, FileSource) and stream.reader.unit != "rows":
            raise TypeError(
                f"x reads {stream.reader.name} files, whose row numbers are known only once read; top_k needs each "
                "row's number: persist them first (files.persist(cluster=c)) and take the top k of the resident data"
            )
        return srcs, None

    def plan(self, shards: Plan, call: Call) -> Plan:
        if call.settings.reducers is not None:
            raise TypeError("reducers= does not apply to top_k: its candidates merge on one device; drop reducers=")
        return shards

    def variant(self, plan: Plan, call: Call) -> Hashable:
        return ("streamed", call.settings.batch_rows) if streamed(call.srcs) is not None else ()

    def build(self, builder: Builder, plan: Plan, call: Call) -> Program:
        """Each shard's k candidates where it lives, then the k best of them all on the master's CPU."""
        stream = streamed(call.srcs)
        dtype = tf.as_dtype(call.srcs[0].dtype)
        k = min(self.k, plan.rows)  # (a k past the rows takes them all; tf.math.top_k's k is an int32)
        per_shard: list[Candidates] = []
        for shard in sorted(plan.shards, key=lambda s: s.start):  # in row order: equal keys merge lower row first
            if shard.rows == 0 and stream is None:
                continue
            with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
                if stream is None:
                    values = builder.inputs(shard)[0]
                    found = self._candidates(values, tf.constant(shard.start, tf.int64), k)
                    builder.mapped(shard, found)
                else:
                    found = self._streamed(builder, stream, shard, dtype, k, call.settings.batch_rows)
                per_shard.append(found)
        master = f"{call.cluster.master}/device:CPU:0"
        with tf.device(master), tf.name_scope("merge"):
            if per_shard:
                _, values, rows = _best(_concat(per_shard), k)
            else:
                values, rows = tf.zeros([0], dtype), tf.zeros([0], tf.int64)
        tasks = tuple(dict.fromkeys(s.task for s in plan.shards if s.rows > 0 or stream is not None))
        return builder.program(builder.fetched((values, rows), master), tasks or (call.cluster.master,))

    def _candidates(self, values: tf.Tensor, first: tf.Tensor, k: int) -> Candidates:
        """The ``k`` best rows of ``values``, whose first row is the input's row ``first``."""
        keys = order_key(values, descending=not self.largest)
        kept = tf.math.top_k(keys, tf.minimum(tf.size(keys), k)).indices
        return tf.gather(keys, kept), tf.gather(values, kept), tf.cast(kept, tf.int64) + first

    def _streamed(
        self, builder: Builder, src: Streamed, shard: Shard, dtype: tf.DType, k: int, batch_rows: int | None
    ) -> Candidates:
        """A file shard's k best rows, its batches folded in row order (each batch's rows follow the rows read before)."""
        key_dtype = order_key(tf.zeros([0], dtype)).dtype
        state = (
            tf.constant(shard.start, tf.int64),
            (tf.zeros([0], key_dtype), tf.zeros([0], dtype), tf.zeros([0], tf.int64)),
        )
        for j, piece in enumerate(builder.batches(src, shard, batch_rows)):
            with tf.name_scope(f"piece{j}"):
                batches = piece.dataset.filter(lambda b: tf.shape(b)[0] > 0)

                def step(acc: tuple[tf.Tensor, Candidates], batch: tf.Tensor, piece: Any = piece) -> Any:
                    first, best = acc
                    n = tf.shape(batch, out_type=tf.int64)[0]
                    found = self._candidates(batch, first, k)
                    return piece.counted(batch, (first + n, _best(_concat([best, found]), k)))

                before = state[0]
                state = batches.reduce(state, step)
                if piece.rows is not None:  # the rows the file promised: later rows are numbered after them
                    read = tf.debugging.assert_equal(state[0] - before, tf.constant(piece.rows, tf.int64), message=piece.mismatch)
                    with tf.control_dependencies([read]):
                        state = (tf.identity(state[0]), tf.nest.map_structure(tf.identity, state[1]))
        return state[1]

    def finish(self, value: Any, program: Program | None, plan: Plan, call: Call) -> tuple[np.ndarray, np.ndarray]:
        values, rows = value
        return np.asarray(values, call.srcs[0].dtype), np.asarray(rows, np.int64)

    def failure(self, error: JobError, plan: Plan) -> Exception | None:
        return None


def _check_k(k: object) -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an int (how many values to return), got {type(k).__name__} {k!r}; e.g. k=10")
    if k < 0:
        raise ValueError(f"k must be ≥ 0 (how many values to return), got {int(k)}; pass k=0 for none, or a positive count")
    return int(k)


def _check_largest(largest: object) -> bool:
    if not isinstance(largest, (bool, np.bool_)):
        raise TypeError(f"largest must be True or False, got {type(largest).__name__} {largest!r}")
    return bool(largest)


def top_k(x: Any, k: int, /, *, largest: bool = True, **options: Unpack[Options]) -> Any:
    """The ``k`` largest values of all of ``x`` and their rows, like ``tf.math.top_k`` over the whole input.

    The values come largest first; equal values lower row first, as ``tf.math.top_k`` orders them.  NaN is the largest
    value, as ``np.sort`` puts it last (so NaNs come first with ``largest=True``, last with ``largest=False``), and
    ``-0.0`` equals ``0.0``.  ``largest=False`` gives the ``k`` smallest, smallest first (equal values still lower row
    first).  A ``k`` larger than the rows gives every row.  The result equals ``x[order[:k]]`` and ``order[:k]`` for
    ``order``, the stable ``np.argsort`` of ``x`` from the largest down (NaN first).

    One distributed run: each shard takes its own ``k`` candidates where it lives (``tf.math.top_k`` of its values as
    ordered integers, its rows numbered from the shard's first row), and the master's CPU keeps the ``k`` best of the
    at most ``k`` × shards candidates.  A file shard is folded batch by batch.

    Args:
        x: a 1-D array of integers (int8 to int64, uint8 to uint32) or floats, resident ``Sharded`` data, or a file
            source whose rows are known before reading (``tmr.read_npy``, ``tmr.read_raw``).
        k: how many values to return (an int ≥ 0).
        largest: the largest values (True), or the smallest (False).
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout``, ``retries``, ``transfer``,
            ``batch_rows`` (file sources), ``return_stats``: see [`RunOptions`][tfmapreduce.RunOptions].

    Returns:
        ``(values, indices)``: numpy arrays of ``min(k, rows)`` values of ``x``'s dtype and their global row numbers
        (int64); with ``return_stats=True``, ``((values, indices), stats)``.

    Raises:
        TypeError: ``k`` is not an int, ``largest`` not a bool, ``x`` holds neither integers nor floats (or is a
            tuple, or text files), or ``reducers=``/``speculate=True`` was given.
        ValueError: ``k`` is negative.
        InputError: ``x`` is not 1-D.

    Examples:
        >>> x = np.array([3.0, np.nan, -1.0, 7.0, 3.0, 0.5])
        >>> values, rows = tmr.top_k(x, 3, cluster=cluster, sizes=[2, 0, 4])
        >>> values.tolist(), rows.tolist()
        ([nan, 7.0, 3.0], [1, 3, 0])
        >>> values, rows = tmr.top_k(x, 2, largest=False, cluster=cluster)
        >>> values.tolist(), rows.tolist()
        ([-1.0, 0.5], [2, 5])
    """
    kind = TopK(_check_k(k), _check_largest(largest))
    return _engine.run(kind, x, RunOptions.of(**options))
