"""The join as the run driver sees it: the graph of each strategy, each device's hash join within its budget."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf

from ..._base.device import Device
from ..._base.errors import JobError, ShardLostError
from ..._base.plan import Plan, Shard, make_plan
from ..._engine.call import Call
from ..._engine.kind import KindBase
from ..._engine.program import Builder, Program
from ..._io.concat import concatenated
from ..._io.resident import Sharded
from ..._io.source import Sources
from ..._io.variables import named_per_run
from ..._native.loader import has
from ..._ops.budget import over_budget, within_budget
from ..shuffle.map_side import NO_SPECULATION, split
from ..spill import OverBudget
from .plan import (
    JoinLayout,
    JoinPlan,
    _first_device,
    choose,
)
from .result import JoinSharded, _decoded, _unpacked
from .rows import join_index, take

_TOO_BIG = "tfmapreduce: join output too large"
_NO_PARTITIONER = (
    "join takes partitioner='hash' only, got partitioner={value!r}: both sides would need one set of key ranges; drop "
    "partitioner= (the joined rows come in no key order: sort them after, e.g. with tmr.sort_by_key(r.keys, r.left) on "
    "a resident result)"
)


@attrs.define(eq=False, repr=False)
class Join(KindBase[JoinPlan]):
    """A join as the run driver sees it (see ``_engine.kind.Kind``)."""

    how: str
    strategy: str
    """As asked: ``"auto"``, ``"hash"`` or ``"broadcast"``; the plan decides (:func:`~tfmapreduce._kinds.join.plan.choose`)."""
    layout: JoinLayout
    max_bytes: int | None = None
    phase: ClassVar[str] = "join"
    refused: ClassVar[Mapping[str, str]] = {"speculate": NO_SPECULATION, "partitioner": _NO_PARTITIONER}

    def __repr__(self) -> str:
        return f"join(how={self.how!r})"

    @property
    def identity(self) -> Hashable:
        return ("join", self.how, self.strategy, self.layout, self.max_bytes)

    def sources(self, x: Any) -> tuple[Sources, Any]:
        return x, None

    def plan(self, shards: Plan, call: Call) -> JoinPlan:
        return choose(self.how, self.strategy, self.layout, shards, call)

    def variant(self, plan: JoinPlan, call: Call) -> Hashable | None:
        if call.resident and not named_per_run(_part_devices(plan)):
            return None  # kept on GPUs: named in the graph, built for each run (Builder.store)
        return (call.resident,)

    def shape_of(self, plan: JoinPlan) -> Hashable:
        """Each shard's place and whether it has rows, the strategy, the side in hash tables and where rows are joined:
        all its graph reads of the plan where no side's graph holds its row counts (which shards hold which side is in
        the sides' signatures), so joins of host sides of other row counts at the same places share one program."""
        shards = tuple((s.index, s.device, s.rows > 0) for s in plan.plan.shards)
        return shards, plan.how, plan.strategy, plan.reducers, plan.small

    def build(self, builder: Builder, plan: JoinPlan, call: Call) -> Program:
        native = call.native
        pieces = _pieces(builder, plan, call, self.layout)
        joined = self._broadcast if plan.strategy == "broadcast" else self._by_reducer
        outputs = joined(pieces, plan, call, native)
        if not call.resident:
            fetched = builder.fetched_parts(outputs, _part_devices(plan))
            return builder.program(fetched, plan.tasks)
        counts = []
        for p, (device, columns) in enumerate(zip(_part_devices(plan), outputs, strict=True)):
            with tf.device(device), tf.name_scope(f"keep{p}"):
                stored = [builder.store(device, f"_c{j}", p, column) for j, column in enumerate(columns)]
                with tf.control_dependencies(stored):
                    counts.append(tf.size(columns[0], tf.int64))
        dtypes = tuple((c.dtype, tuple(c.shape[1:].as_list())) for c in outputs[0])
        return builder.program(counts, plan.tasks, dtypes)

    def _by_reducer(self, pieces: dict[int, list[Any]], plan: JoinPlan, call: Call, native: Any) -> list[Any]:
        """Hash: each piece split by key hash, reducer r joining bucket r of both sides; co-partitioned: shard r of each."""
        reducers = plan.reducers
        parts: list[list[list[Any]]] = [[[], []] for _ in reducers]
        if plan.strategy == "co-partitioned":
            for index, found in pieces.items():
                side = 0 if index < len(reducers) else 1
                parts[index % len(reducers)][side].append(found[side])
        else:
            for index, found in pieces.items():
                shard = plan.plan.shards[index]
                with tf.device(shard.device), tf.name_scope(f"split{index}"):
                    for side, piece in enumerate(found):
                        if piece is not None:
                            for r, bucket in enumerate(split(piece[0], piece[1], len(reducers), native)):
                                parts[r][side].append(bucket)
        outputs = []
        for r, device in enumerate(reducers):
            with tf.device(device), tf.name_scope(f"join{r}"):
                left, right = (_concat(parts[r][side], call, self.layout, side) for side in (0, 1))
                keep = (self.how in ("left", "outer"), self.how in ("right", "outer"))
                outputs.append(self._join(r, device, left, right, keep, plan.small, native, call))
        return outputs

    def _broadcast(self, pieces: dict[int, list[Any]], plan: JoinPlan, call: Call, native: Any) -> list[Any]:
        """The small side to every task of the big side, joined there; its unmatched rows once, on the first."""
        small, big = plan.small, 1 - plan.small
        keep_big = self.how in (("left", "outer") if big == 0 else ("right", "outer"))
        keep_small = self.how in (("left", "outer") if small == 0 else ("right", "outer"))
        small_pieces = [found[small] for found in pieces.values() if found[small] is not None]
        per_device: dict[str, list[Any]] = {}
        for index, found in pieces.items():
            if found[big] is not None:
                per_device.setdefault(_first_device(plan, index), []).append(found[big])
        outputs, matched = [], []
        for p, device in enumerate(plan.reducers):
            with tf.device(device), tf.name_scope(f"join{p}"):
                table = _concat(small_pieces, call, self.layout, small)
                rows = _concat(per_device.get(device, []), call, self.layout, big)
                sides = (rows, table) if big == 0 else (table, rows)
                keep = (keep_big, False) if big == 0 else (False, keep_big)
                out, used = self._join(p, device, *sides, keep, small, native, call, matched_of=small)
                outputs.append(out)
                matched.append(used)
        with tf.device(plan.reducers[0]), tf.name_scope("unmatched"):  # the small side's rows no task matched
            table = _concat(small_pieces, call, self.layout, small)
            unused = tf.logical_not(tf.reduce_any(tf.stack(matched), 0))
            unmatched = tf.where(unused)[:, 0] if keep_small else tf.zeros([0], tf.int64)
            none = -tf.ones_like(unmatched)
            other = _concat([], call, self.layout, big)
            pairs = (none, unmatched) if small == 1 else (unmatched, none)
            sides = (other, table) if small == 1 else (table, other)
            kept = (small == 0, small == 1) if keep_small else (False, False)  # (inner: no row, the others' form)
            outputs.append(_rows(*sides, *pairs, kept=kept, masks=self._masks(call), pack=self._packed(call)))
        return outputs

    def _join(
        self,
        part: int,
        device: str,
        left: Any,
        right: Any,
        keep: tuple[bool, bool],
        small: int,
        native: Any,
        call: Call,
        matched_of: int | None = None,
    ) -> Any:
        """The join of ``left`` and ``right`` (each (keys, value columns)) on ``device``: its rows; with ``matched_of``,
        also whether each row of that side matched."""
        probe, build = (left, right) if small == 1 else (right, left)
        keep_probe, keep_build = keep if small == 1 else keep[::-1]
        row_bytes = sum(_row_bytes(t) for t in [left[0], *left[1], *right[1]])
        masks = self._masks(call)
        if _native(call):  # each probe row's matches, then every output column written at once
            entry, start, rows_of, build_matched, rows = native.tmr_join_match(
                probe[0], build[0], keep_probe=keep_probe, keep_build=keep_build
            )
            check = within_budget(part, device, rows, rows * row_bytes, self.max_bytes, _TOO_BIG)
            with tf.control_dependencies([check]):
                keys, left_out, right_out, left_matched, right_matched = native.tmr_join_take(
                    left[0],
                    right[0],
                    left[1],
                    right[1],
                    entry,
                    start,
                    rows_of,
                    build_matched,
                    probe_left=small == 1,
                    keep_probe=keep_probe,
                    keep_build=keep_build,
                    left_mask=masks[0],
                    right_mask=masks[1],
                )
            out = (
                keys,
                *left_out,
                *right_out,
                *([left_matched] if masks[0] else []),
                *([right_matched] if masks[1] else []),
            )
            return (out, build_matched) if matched_of is not None else out
        probe_rows, build_rows, build_matched = join_index(probe[0], build[0], keep_left=keep_probe, keep_right=keep_build)
        index = (probe_rows, build_rows) if small == 1 else (build_rows, probe_rows)
        rows = tf.size(index[0], tf.int64)
        check = within_budget(part, device, rows, rows * row_bytes, self.max_bytes, _TOO_BIG)
        with tf.control_dependencies([check]):
            index = tuple(tf.identity(t) for t in index)
        out = _rows(left, right, *index, kept=keep, masks=masks, pack=self._packed(call))
        return (out, build_matched) if matched_of is not None else out

    def finish(self, value: Any, program: Program | None, plan: JoinPlan, call: Call) -> Any:
        """A :class:`JoinResult`, or for a resident run a :class:`JoinSharded` (part p of every column on device p)."""
        devices = _part_devices(plan)
        if call.resident:
            assert program is not None
            dtypes = program.info
            counts = [int(n) for n in value.value]
            available = [Device.parse(d) for d in call.cluster.devices]
            where = make_plan(sum(counts), counts, devices, available)
            sides = self._column_sides(len(dtypes))
            columns = [
                Sharded(
                    call.cluster,
                    where,
                    np.dtype(object) if t == tf.string else np.dtype(t.as_numpy_dtype),
                    (where.rows, *shape),
                    f"{value.name}_c{j}",
                    (_lost,) * len(counts),
                    encoding=self._encoding(side) if t == tf.string else None,
                )
                for j, ((t, shape), side) in enumerate(zip(dtypes, sides, strict=True))
            ]
            return JoinSharded(*self._sides(columns, self._masks(call)), plan.strategy, self.layout.unicode)
        parts = [tuple(np.asarray(x) for x in tf.nest.flatten(p)) for p in value]
        packed = self._packed(call)
        fetched = [concatenated(c) for c in zip(*(p[1:] if packed else p for p in parts), strict=True)]
        rows = tuple(zip(devices, (len(p[0]) for p in parts), strict=True))
        if packed:  # the keys and the left values came as one matrix of int32 words: each its own again
            fetched = [*_unpacked([p[0] for p in parts], self._left_dtypes(call)), *fetched]
        return _decoded(*self._sides(fetched, self._masks(call)), plan.strategy, rows, self.layout.unicode)

    def _left_dtypes(self, call: Call) -> list[np.dtype[Any]]:
        keys, values = self.layout.of(0, call.srcs)
        return [s.dtype for s in [keys, *values]]

    def _packed(self, call: Call) -> bool:
        """Whether each device returns the keys and the left values as one matrix of int32 words (one gather of
        their rows, not one per column): an inner join fetched to the client joined with stock ops (the native
        ``TmrJoinTake`` writes each column directly), its left columns 1-D numbers of 4 or 8 bytes."""
        keys, values = self.layout.of(0, call.srcs)
        return (
            not call.resident
            and self.how == "inner"
            and not _native(call)
            and all(len(s.shape) == 1 and s.dtype.kind in "iuf" and s.dtype.itemsize in (4, 8) for s in [keys, *values])
        )

    def _masks(self, call: Call) -> tuple[bool, bool]:
        """Whether the run makes the left and the right ``*_matched`` masks: where that side's rows may be missing
        (a right, left or outer join), or the result stays resident; other masks are all True, made by the client."""
        return (call.resident or self.how in ("right", "outer"), call.resident or self.how in ("left", "outer"))

    def _column_sides(self, n: int) -> list[int | None]:
        """Whose each of ``n`` output columns is (in :meth:`_sides`' order): the keys None (both), then 0 per left
        column, 1 per right column, and None for the masks."""
        left, right = self.layout.columns
        sides: list[int | None] = [None, *[0] * left, *[1] * right]
        return sides + [None] * (n - len(sides))

    def _encoding(self, side: int | None) -> str | None:
        """How the strings of a side's columns come back (the keys: either side's, as a fetched result's)."""
        unicode = self.layout.unicode
        found = unicode[0] or unicode[1] if side is None else unicode[side]
        return "utf-8" if found is True else found or None

    def _sides(self, columns: Sequence[Any], masks: tuple[bool, bool]) -> tuple[Any, Any, Any, Any, Any]:
        """The flat output columns as (keys, left values, right values, left matched, right matched), each side's
        values one column or a tuple of them (as given); a mask the run did not make, all True (a read-only view)."""
        layout = self.layout
        sides, at = [], 1
        for side in (0, 1):
            leaves = list(columns[at : at + layout.columns[side]])
            at += layout.columns[side]
            sides.append(tuple(leaves) if layout.tuples[side] else leaves[0] if leaves else None)
        made = iter(columns[at:])
        left, right = (next(made) if m else np.broadcast_to(np.True_, (len(columns[0]),)) for m in masks)
        return columns[0], sides[0], sides[1], left, right

    def failure(self, error: JobError, plan: JoinPlan) -> Exception | None:
        big = over_budget(error, _TOO_BIG, self.max_bytes)
        if big is None:
            return None
        return OverBudget(
            big,
            f"the join would make {big.rows:,} rows on {big.device} (part {big.part}: {big.size:,} bytes of keys and "
            f"values), more than its budget of {big.budget:,} bytes ({big.limit}); no output row was made. Spread the "
            "keys over more reducers (reducers=N), pre-aggregate a side (e.g. tmr.sum_by_key) so each key has fewer rows, or, if the host has the "
            "memory, raise max_bytes=; one key's rows always meet on one device",
        )


def _native(call: Call) -> bool:
    """Whether the run joins with the native kernels (``TmrJoinMatch`` and ``TmrJoinTake``): every task has them."""
    return has(call.native, "tmr_join_match") and has(call.native, "tmr_join_take")


def _part_devices(plan: JoinPlan) -> list[str]:
    """The device of each output part: one per reducer, and for a broadcast join the small side's unmatched rows on the first."""
    return [*plan.reducers, plan.reducers[0]] if plan.strategy == "broadcast" else list(plan.reducers)


def _lost(shard: Shard) -> tf.Tensor:
    raise ShardLostError(
        f"part {shard.index} of a resident join result is lost with its worker and cannot be rebuilt; join again",
        shards=(shard.index,),
    )


def _row_bytes(t: tf.Tensor) -> int:
    """Bytes of one output row of ``t`` (a string counts 32; the index pair and masks are not counted)."""
    row = int(np.prod(t.shape[1:].as_list(), dtype=np.int64)) if t.shape.rank and t.shape.rank > 1 else 1
    return row * (32 if t.dtype == tf.string else t.dtype.size)


def _pieces(builder: Builder, plan: JoinPlan, call: Call, layout: JoinLayout) -> dict[int, list[Any]]:
    """Each shard with rows: its piece of each side as (keys, value columns), or None where it holds none of a side."""
    found: dict[int, list[Any]] = {}
    for shard in plan.plan.shards:
        if shard.rows == 0:
            continue
        with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
            cols = builder.inputs(shard)
            sides = []
            for side in (0, 1):
                key_src, _ = layout.of(side, call.srcs)
                sides.append(layout.of(side, cols) if key_src.part(shard) is not None else None)
            builder.mapped(shard, [t for piece in sides if piece is not None for t in [piece[0], *piece[1]]])
        found[shard.index] = sides
    return found


def _concat(pieces: Sequence[Any], call: Call, layout: JoinLayout, side: int) -> tuple[tf.Tensor, list[tf.Tensor]]:
    """Pieces of one side as one (keys, value columns); no piece: the side's empty columns."""
    if len(pieces) == 1:
        return pieces[0][0], list(pieces[0][1])
    if pieces:
        keys = tf.concat([p[0] for p in pieces], 0)
        return keys, [tf.concat([p[1][j] for p in pieces], 0) for j in range(layout.columns[side])]
    key_src, value_srcs = layout.of(side, call.srcs)
    empty = [
        tf.zeros((0, *s.shape[1:]), tf.string if s.dtype == object else tf.as_dtype(s.dtype)) for s in [key_src, *value_srcs]
    ]
    return empty[0], empty[1:]


def _rows(
    left: Any,
    right: Any,
    left_rows: tf.Tensor,
    right_rows: tf.Tensor,
    *,
    kept: tuple[bool, bool],
    masks: tuple[bool, bool],
    pack: bool = False,
) -> Any:
    """The output rows of index pairs: keys, left columns, right columns, then left matched and right matched where
    ``masks`` asks for them (flat).  ``pack`` (no side kept): the keys and the left columns as one matrix of int32
    words, gathered at once (see :func:`_unpacked`).

    ``kept``: whether the left and right sides' unmatched rows are kept; a side whose rows may be missing (the other
    side kept) fills them, the other gathers its rows as they are.
    """
    left_whole, right_whole = not kept[1], not kept[0]  # every row has a row of this side
    if pack:
        words = [tf.bitcast(c, tf.int32) for c in [left[0], *left[1]]]
        packed = tf.concat([w if w.shape.rank == 2 else w[:, None] for w in words], 1)
        return (tf.gather(packed, left_rows), *(tf.gather(c, right_rows) for c in right[1]))
    left_matched, right_matched = left_rows >= 0, right_rows >= 0
    if left_whole:
        keys = tf.gather(left[0], left_rows)
    elif right_whole:
        keys = tf.gather(right[0], right_rows)
    else:
        keys = tf.where(left_matched, take(left[0], left_rows), take(right[0], right_rows))
    return (
        tf.identity(keys),
        *(tf.gather(c, left_rows) if left_whole else take(c, left_rows) for c in left[1]),
        *(tf.gather(c, right_rows) if right_whole else take(c, right_rows) for c in right[1]),
        *([left_matched] if masks[0] else []),
        *([right_matched] if masks[1] else []),
    )
