"""The join kind of job: two keyed sides joined on equal keys, in one distributed run.

Both sides' columns are stacked into one plan (``_sides``), so each shard holds rows of one side or both.
The strategies differ in what moves::

    hash            every shard splits its rows of each side by the stable key hash (as keyed jobs do);
                    reducer r receives bucket r of both sides and joins them
    broadcast       the small side's rows go to every task holding rows of the big side, which joins its
                    own rows where they live; the small side's unmatched rows (right/outer) once, on the first
    co-partitioned  both sides are keyed resident results on the same reducers (bucket r on reducer r):
                    reducer r joins its two shards; nothing moves

Each device joins with a hash table over the smaller side's keys and, before making any output row, checks the rows
it would make against its memory budget: natively ``TmrJoinMatch`` (each probe row's matches and the output's rows)
then ``TmrJoinTake`` (every output column written from those matches, no index pairs, no gathers); with stock ops
``_join_rows.join_index`` (row pairs) and a gather per column.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf

from ..._base.device import Device
from ..._base.errors import InputError, JobError, ReducerMemoryError, ShardLostError
from ..._base.place import default_devices
from ..._base.plan import Plan, Shard, make_plan
from ..._cluster.cluster import DEVICES_TIMEOUT
from ..._engine import driver as _engine
from ..._engine.kernels import available
from ..._engine.program import Builder, Call, Program, Ready
from ..._io.concat import concatenated
from ..._io.files.csv import Csv
from ..._io.files.files import Files
from ..._io.keyed_input import keyed_sources
from ..._io.resident import Sharded, named_per_run, scatter
from ..._io.source import Input, Sources
from ..._io.strings import Encoding, decode_keys
from ..._native.loader import kernels
from ..._ops.budget import over_budget, within_budget
from ..._options import RunOptions
from ..shuffle.map_side import KEY_DTYPES, NO_SPECULATION, split
from ..shuffle.plan import resolve_reducers
from ..shuffle.sharded import KeyedSharded
from .result import JoinResult
from .rows import join_index, take
from .sides import FileColumn, FileInput, Side, file_columns, stacked

HOWS = ("inner", "left", "right", "outer")
STRATEGIES = ("auto", "hash", "broadcast")
BROADCAST_BYTES = 1 << 25
"""``strategy="auto"`` broadcasts a side of at most this many bytes (keys and values; 32 MiB) when the other side is
larger: a 12 MB side broadcast to two tasks joined a 1e7-row side faster than hashed (the keyed guide's table)."""
_TOO_BIG = "tfmapreduce: join output too large"


@attrs.frozen
class Layout:
    """The columns of the two sides: how many value columns each has, and whether its values were a tuple."""

    columns: tuple[int, int]
    tuples: tuple[bool, bool]
    unicode: tuple[Encoding, Encoding]
    """Per side: how its string keys and values decode (see ``decode_keys``): ``str`` where they were given as ``str``."""

    def of(self, side: int, cols: Sequence[Any]) -> tuple[Any, list[Any]]:
        """Side ``side``'s (keys, value columns) among the stacked columns ``cols``."""
        at = 0 if side == 0 else 1 + self.columns[0]
        return cols[at], list(cols[at + 1 : at + 1 + self.columns[side]])


@attrs.frozen
class JoinPlan:
    """The plan of a join: the stacked shards (left rows, then right rows), the strategy and where rows are joined.

    Examples:
        >>> left, right = (np.arange(6), np.ones(6)), (np.array([1, 4]), np.array([2.0, 3.0]))
        >>> p = tmr.plan_join(left, right, cluster=cluster, strategy="hash", reducers=2)
        >>> p.strategy, p.sizes, len(p.reducers)
        ('hash', (6, 2), 2)
    """

    plan: Plan
    """The shards of the stacked rows: rows ``0 .. len(left)`` are the left side's, the rest the right side's."""
    how: str
    strategy: str
    """``"hash"``, ``"broadcast"`` or ``"co-partitioned"``."""
    reducers: tuple[str, ...]
    """Where rows are joined: the reducer devices (hash, co-partitioned); for broadcast, each big-side task's first device."""
    sizes: tuple[int, int]
    """Rows of the left and of the right side."""
    small: int
    """The side whose keys each device puts in its hash table (0: left, 1: right); the side broadcast for broadcast."""
    units: tuple[str, str] = ("rows", "rows")
    """What ``sizes`` counts of each side: ``"rows"``, or ``"bytes"`` for a CSV table (its rows are known once read)."""

    @property
    def tasks(self) -> tuple[Any, ...]:
        return tuple(dict.fromkeys([*self.plan.tasks, *(Device.parse(d).task for d in self.reducers)]))

    def explain(self) -> str:
        """What moves, then the shard table."""
        side = ("left", "right")
        moves = {
            "hash": f"both sides shuffled by key hash to {len(self.reducers)} reducer(s)",
            "broadcast": f"the {side[self.small]} side ({self.sizes[self.small]} {self.units[self.small]}) sent to each task of the "
            f"{side[1 - self.small]} side, which joins its rows where they live",
            "co-partitioned": f"both sides already partitioned by key hash over the same {len(self.reducers)} reducers: nothing moves",
        }[self.strategy]
        lines = [
            f"join how={self.how!r}, {self.strategy}: {moves}",
            f"left {self.units[0]} 0:{self.sizes[0]}, right {self.units[1]} {self.sizes[0]}:{self.plan.rows}",
        ]
        lines.append(self.plan.explain())
        lines += [f"  joins on {d}" for d in self.reducers]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


@attrs.define(eq=False, repr=False)
class Join:
    """A join as the run driver sees it (see ``_engine.Kind``)."""

    how: str
    strategy: str
    """``"auto"``, ``"hash"``, ``"broadcast"``, or ``"co-partitioned"`` (chosen by :func:`_prepare`)."""
    layout: Layout
    max_bytes: int | None = None
    speculation: str | None = NO_SPECULATION
    phase: ClassVar[str] = "join"
    ready: dict[Hashable, Ready] = attrs.field(factory=dict)
    """Unused: a join's inputs are stacked sides, never the plain host arrays a ready run needs."""

    def __repr__(self) -> str:
        return f"join(how={self.how!r})"

    @property
    def identity(self) -> Hashable:
        return ("join", self.how, self.strategy, self.layout, self.max_bytes)

    def sources(self, x: Any) -> tuple[Sources, Any]:
        return x, None

    def plan(self, shards: Plan, call: Call) -> JoinPlan:
        left, right = call.srcs[0], call.srcs[1 + self.layout.columns[0]]
        assert isinstance(left, Side)
        assert isinstance(right, Side)
        sizes = left.stack.rows
        weight = [_bytes(call.srcs, self.layout, side) for side in (0, 1)]
        small = 0 if weight[0] < weight[1] else 1
        strategy = self.strategy
        if strategy == "co-partitioned":
            assert left.stack.plans is not None
            reducers = tuple(s.device for s in left.stack.plans[0].shards)
        elif strategy == "broadcast" or (
            strategy == "auto"
            and weight[small] <= BROADCAST_BYTES
            and (sizes[small] < sizes[1 - small] or any(_in_bytes(call.srcs, self.layout, side) for side in (0, 1)))
        ):
            strategy = "broadcast"
            reducers = tuple(dict.fromkeys(_first_devices(shards, left if small else right)))
        else:
            strategy = "hash"
            reducers = resolve_reducers(call.settings.reducers, shards, call.cluster)
        units = tuple("bytes" if _in_bytes(call.srcs, self.layout, side) else "rows" for side in (0, 1))
        return JoinPlan(shards, self.how, strategy, reducers, sizes, small, units)  # type: ignore[arg-type]

    def variant(self, plan: JoinPlan, call: Call) -> Hashable | None:
        if call.resident and not named_per_run(_part_devices(plan)):
            return None  # kept on GPUs: named in the graph, built for each run (Builder.store)
        return (call.resident,)

    def build(self, builder: Builder, plan: JoinPlan, call: Call) -> Program:
        native = kernels() if _native(call) else None
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
        if native is not None:  # each probe row's matches, then every output column written at once
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
            columns = [
                Sharded(
                    call.cluster,
                    where,
                    np.dtype(object) if t == tf.string else np.dtype(t.as_numpy_dtype),
                    (where.rows, *shape),
                    f"{value.name}_c{j}",
                    (_lost,) * len(counts),
                )
                for j, (t, shape) in enumerate(dtypes)
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

    def failure(self, error: JobError) -> Exception | None:
        big = over_budget(error, _TOO_BIG, self.max_bytes)
        if big is None:
            return None
        return ReducerMemoryError(
            f"the join would make {big.rows:,} rows on {big.device} (part {big.part}: {big.size:,} bytes of keys and "
            f"values), more than its budget of {big.budget:,} bytes ({big.limit}); no output row was made. Spread the "
            "keys over more reducers (reducers=N), pre-aggregate a side (e.g. tmr.sum_by_key) so each key has fewer rows, or, if the host has the "
            "memory, raise max_bytes=; one key's rows always meet on one device"
        )


def _native(call: Call) -> bool:
    """Whether the run joins with the native kernels (``TmrJoinMatch`` and ``TmrJoinTake``): every task has them."""
    return available(call.cluster, call.settings.seconds(), "tmr_join_match", "tmr_join_take")


def _part_devices(plan: JoinPlan) -> list[str]:
    """The device of each output part: one per reducer, and for a broadcast join the small side's unmatched rows on the first."""
    return [*plan.reducers, plan.reducers[0]] if plan.strategy == "broadcast" else list(plan.reducers)


def _lost(shard: Shard) -> tf.Tensor:
    raise ShardLostError(
        f"part {shard.index} of a resident join result is lost with its worker and cannot be rebuilt; join again",
        shards=(shard.index,),
    )


@attrs.define(eq=False)
class JoinSharded:
    """A join's rows kept where they were made (``tmr.join(..., resident=True)``): co-partitioned ``Sharded`` columns.

    ``keys``, each side's values (one ``Sharded``, or a tuple as given) and the two masks share one plan (part
    *p* on the device that made it), so later jobs read them in place:
    ``tmr.sum_by_key(r.keys, r.left)`` ships nothing.

    Examples:
        >>> left, right = (np.array([1, 2, 2]), np.array([1.0, 2.0, 3.0])), (np.array([2, 5]), np.array([10, 50]))
        >>> with tmr.join(left, right, cluster=cluster, resident=True) as r:
        ...     float(tmr.sum(r.left)), len(r), sorted(r.gather().right.tolist())
        (5.0, 2, [10, 10])
    """

    keys: Sharded
    left: Any
    right: Any
    left_matched: Sharded
    right_matched: Sharded
    strategy: str
    encoding: tuple[Encoding, Encoding]

    def __len__(self) -> int:
        return self.keys.plan.rows

    def __repr__(self) -> str:
        return f"JoinSharded({len(self)} rows on {len(self.keys.plan.shards)} parts, {self.strategy})"

    def _each(self, fn: Any) -> tuple[Any, Any, Any, Any, Any]:
        """``fn`` of each column, in the structure of (keys, left, right, left matched, right matched)."""

        def side(values: Any) -> Any:
            return tuple(fn(c) for c in values) if isinstance(values, tuple) else fn(values)

        return fn(self.keys), side(self.left), side(self.right), fn(self.left_matched), fn(self.right_matched)

    def gather(self, *, timeout: float | None = None) -> JoinResult:
        """The rows, fetched from the workers."""
        rows = tuple((s.device, s.rows) for s in self.keys.plan.shards)
        return _decoded(*self._each(lambda c: c.gather(timeout=timeout)), self.strategy, rows, self.encoding)

    def delete(self, *, timeout: float | None = None) -> None:
        """Free the rows' memory on the workers.  Safe to call twice."""
        self._each(lambda c: c.delete(timeout=timeout))

    def __enter__(self) -> JoinSharded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()


def _first_device(plan: JoinPlan, index: int) -> str:
    """The device where shard ``index``'s big-side rows are joined: its task's first shard device."""
    task = plan.plan.shards[index].task
    return next(s.device for s in plan.plan.shards if s.task == task and s.device in plan.reducers)


def _first_devices(shards: Plan, big: Side) -> list[str]:
    """Each task holding rows of the big side: its first shard device (where that task joins); with none, the first
    shard's device (where the small side's unmatched rows are made)."""
    first: dict[Any, str] = {}
    for s in shards.shards:
        if big.part(s) is not None and s.rows:
            first.setdefault(s.task, s.device)
    return list(first.values()) or [shards.shards[0].device]


def _in_bytes(srcs: Sources, layout: Layout, side: int) -> bool:
    """Whether ``side`` is a CSV table, whose size is known in bytes (its rows only once read)."""
    inner = layout.of(side, srcs)[0].inner
    return isinstance(inner, FileColumn) and inner.unit == "bytes"


def _bytes(srcs: Sources, layout: Layout, side: int) -> int:
    """Bytes of a side's keys and values (strings: 32 bytes each, plus their length where the side is on the host; a
    CSV table: its files' bytes)."""
    keys, values = layout.of(side, srcs)
    if isinstance(keys.inner, FileColumn) and keys.inner.unit == "bytes":
        return int(keys.inner.rows)
    total = 0
    for src in [keys, *values]:
        inner = src.inner
        rows = inner.rows
        row = int(np.prod(inner.shape[1:], dtype=np.int64))
        if inner.dtype == object:
            array = getattr(inner, "array", None)
            total += rows * row * 32 + (sum(map(len, array.ravel().tolist())) if array is not None else rows * row * 16)
        else:
            total += rows * row * inner.dtype.itemsize
    return total


def _row_bytes(t: tf.Tensor) -> int:
    """Bytes of one output row of ``t`` (a string counts 32; the index pair and masks are not counted)."""
    row = int(np.prod(t.shape[1:].as_list(), dtype=np.int64)) if t.shape.rank and t.shape.rank > 1 else 1
    return row * (32 if t.dtype == tf.string else t.dtype.size)


def _pieces(builder: Builder, plan: JoinPlan, call: Call, layout: Layout) -> dict[int, list[Any]]:
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


def _concat(pieces: Sequence[Any], call: Call, layout: Layout, side: int) -> tuple[tf.Tensor, list[tf.Tensor]]:
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


def _unpacked(parts: Sequence[np.ndarray], dtypes: Sequence[np.dtype[Any]]) -> list[np.ndarray]:
    """The columns of packed parts (each a matrix of int32 words, see :func:`_rows`), each column one array."""
    columns, at = [], 0
    for dtype in dtypes:
        width = dtype.itemsize // 4
        columns.append(np.concatenate([p[:, at : at + width].view(dtype)[:, 0] for p in parts]))
        at += width
    return columns


def _decoded(
    keys: np.ndarray,
    left: Any,
    right: Any,
    left_matched: np.ndarray,
    right_matched: np.ndarray,
    strategy: str,
    rows: tuple[tuple[str, int], ...],
    encoding: tuple[Encoding, Encoding],
) -> JoinResult:
    """A :class:`JoinResult` of fetched columns, string keys and values decoded as each side was given."""
    if keys.dtype == object:
        keys = decode_keys(keys.tolist(), encoding[0] or encoding[1])
    left, right = (
        tf.nest.map_structure(lambda leaf, e=e: _text(leaf, e), side) for side, e in ((left, encoding[0]), (right, encoding[1]))
    )
    return JoinResult(keys, left, right, left_matched, right_matched, strategy, rows)


def _text(leaf: np.ndarray, unicode: Encoding) -> np.ndarray:
    if leaf.dtype != object:
        return leaf
    return decode_keys(leaf.ravel().tolist(), unicode).reshape(leaf.shape)


def _side(x: Any, argument: str, native: bool) -> tuple[Sources, int, bool, Encoding, KeyedSharded | None]:
    """A side as (its keys and value columns as sources, columns, values a tuple, unicode, the KeyedSharded given);
    ``native``: file sources read with their readers' native variants."""
    keyed = None
    keys: Any
    values: Any
    if isinstance(x, Files) and not isinstance(x.reader, Csv):
        raise TypeError(
            f"{argument} reads {x.reader.name} files alone; a file source is a join side by itself only as a CSV table "
            "(tmr.read_csv(paths, columns=['key', 'value', ...]): its first column the key); pair .npy files of keys "
            "and of values: (tmr.read_npy(keys), tmr.read_npy(values))"
        )
    if isinstance(x, KeyedSharded):
        keyed = x
        keys, values = x.keys, x.values
        x.dense(f"tmr.join's {argument}")
    elif isinstance(x, Files):  # a CSV table: its first column the key, the others its values
        table = file_columns(x, argument, native=native)
        keys, values = FileInput(table[0]), tuple(FileInput(c) for c in table[1:])
        if len(values) == 1:
            values = values[0]
    elif isinstance(x, tuple) and len(x) == 2:
        keys, values = x
    else:
        raise TypeError(
            f"{argument} must be keyed data: a (keys, values) pair of arrays (values may be a tuple of columns), a "
            f"keyed resident result (resident=True of a keyed job), or a CSV table (tmr.read_csv(paths, columns=['key', "
            f"'value'])); got {type(x).__name__}. E.g. tmr.join((ids, amounts), (ids2, names))"
        )
    many = isinstance(values, tuple)
    columns = list(values) if many else [values]
    items = [_paired_file(c, argument, native) if isinstance(c, Files) else c for c in [keys, *columns]]
    rows = [_rows_of(c) for c in items]
    if any(r != rows[0] for r in rows[1:]):
        got = ", ".join(f"values[{j}] {r}" if many else f"values {r}" for j, r in enumerate(rows[1:]))
        raise InputError(
            f"{argument}: keys have {rows[0]} rows but {got}; each value column needs one row per key. "
            "Slice them to one length, or pass the rows that belong together"
        )
    srcs, unicode = keyed_sources(tuple(items))
    if isinstance(x, Files):
        unicode = x.encoding
    key = srcs[0]
    if len(key.shape) != 1:
        raise InputError(f"{argument}: keys must be 1-D (one key per row), got shape {key.shape}; e.g. keys.reshape(-1)")
    dtype = tf.string if key.dtype == object else tf.as_dtype(key.dtype)
    if dtype not in KEY_DTYPES:
        raise TypeError(
            f"{argument}: keys must be int32, int64 or strings, got dtype {key.dtype}: float and bool keys have no exact "
            f"equality to join on; convert them, e.g. keys.astype(np.int64)"
        )
    return srcs, len(columns), many, unicode, keyed


def _paired_file(files: Files, argument: str, native: bool) -> FileInput:
    """A file source in a ``(keys, values)`` pair: ``.npy`` or raw files, read by row range beside the others."""
    if isinstance(files.reader, Csv):
        raise TypeError(
            f"{argument} pairs a CSV file source with other columns; a CSV table is a join side by itself, its first "
            "column the key: tmr.read_csv(paths, columns=['key', 'value', ...])"
        )
    return FileInput(file_columns(files, argument, native=native)[0])


def _rows_of(x: Any) -> int:
    if isinstance(x, Input):
        return x.as_source().rows
    shape = np.shape(x)
    return int(shape[0]) if shape else 0


def _key_name(srcs: Sources) -> str:
    return "strings" if srcs[0].dtype == object else str(srcs[0].dtype)


def _prepare(
    left: Any, right: Any, how: str, strategy: str, options: dict[str, Any]
) -> tuple[Join, Sources, RunOptions, list[Sharded]]:
    """The join's kind, its stacked inputs, run options, and what it scattered for the run (freed after it)."""
    if how not in HOWS:
        raise ValueError(f"how must be one of {', '.join(map(repr, HOWS))} (SQL join semantics), got {how!r}")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(map(repr, STRATEGIES))}, got {strategy!r}")
    max_bytes = options.pop("max_bytes", None)
    if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, (int, np.integer)) or max_bytes <= 0):
        raise ValueError(f"max_bytes must be a positive number of bytes or None, got {max_bytes!r}")
    settings = RunOptions.of(**options)
    if settings.partitioner != "hash":
        raise TypeError(
            f"join takes partitioner='hash' only, got partitioner={settings.partitioner!r}: both sides would need one set "
            "of key ranges; drop partitioner= (the joined rows come in no key order: sort them after, e.g. with "
            "tmr.sort_by_key(r.keys, r.left) on a resident result)"
        )
    native = settings.cluster is not None and available(settings.cluster, settings.seconds())
    sides = [_side(left, "left", native), _side(right, "right", native)]
    (lsrcs, lcols, ltuple, luni, lkeyed), (rsrcs, rcols, rtuple, runi, rkeyed) = sides
    if lsrcs[0].dtype != rsrcs[0].dtype:
        raise TypeError(
            f"the keys of left are {_key_name(lsrcs)} and those of right are {_key_name(rsrcs)}; join keys of one dtype: "
            "cast one side, e.g. keys.astype(np.int64) (or str(...) both sides for strings)"
        )
    scattered: list[Sharded] = []
    resident = [s[0].home_plan is not None for s in (lsrcs, rsrcs)]
    if resident[0] != resident[1]:  # one side on the workers: the other goes there too, for this join alone
        host = 0 if not resident[0] else 1
        if any(isinstance(s, FileColumn) for s in (lsrcs, rsrcs)[host]):
            raise TypeError(
                f"{('left', 'right')[host]} reads files and {('left', 'right')[1 - host]} is resident on the workers; a "
                "join reads files beside host arrays or other files only: gather() the resident side, or persist() "
                "the files (.npy: tmr.read_npy(path).persist(cluster=c))"
            )
        cluster = settings.cluster or (lsrcs if resident[0] else rsrcs)[0].home
        data = (lsrcs, rsrcs)[host]
        moved = [scatter(src.array, cluster=cluster) for src in data]  # type: ignore[attr-defined]
        scattered += moved
        srcs = Sources([m.as_source() for m in moved])
        lsrcs, rsrcs = (srcs, rsrcs) if host == 0 else (lsrcs, srcs)
    chosen = strategy
    if (
        lkeyed is not None
        and rkeyed is not None
        and strategy == "auto"
        and lkeyed.partitioner == rkeyed.partitioner == "hash"  # range-partitioned results each have their own ranges
        and [s.device for s in lkeyed.plan.shards] == [s.device for s in rkeyed.plan.shards]
    ):
        chosen = "co-partitioned"
    if settings.sizes is None and settings.devices is None and lsrcs[0].home_plan is None and settings.cluster is not None:
        settings = attrs.evolve(settings, sizes=_spread(lsrcs[0].rows, rsrcs[0].rows, settings))
    layout = Layout((lcols, rcols), (ltuple, rtuple), (luni, runi))
    return (
        Join(how, chosen, layout, int(max_bytes) if max_bytes is not None else None),
        stacked(lsrcs, rsrcs),
        settings,
        scattered,
    )


def _spread(left: int, right: int, settings: RunOptions) -> list[int]:
    """The default sizes of host sides: each side split evenly into one shard per default device, so that shard ``i``
    of the left and shard ``i`` of the right land on one device (``place``: shard ``i`` on device ``i % D``) and every
    task holds rows of both (a broadcast join then joins on every task, not only where the big side's rows began)."""
    assert settings.cluster is not None
    available = [Device.parse(d) for d in settings.cluster.list_devices(min(DEVICES_TIMEOUT, settings.seconds()))]
    shards = max(1, len(default_devices(available)))
    return [n // shards + (i < n % shards) for n in (left, right) for i in range(shards)]


def join(left: Any, right: Any, /, *, how: str = "inner", strategy: str = "auto", **options: Any) -> Any:
    """Join two keyed datasets on equal keys, with SQL semantics, in one distributed run.

    One row per (left row, right row) pair of equal keys (one-to-many and many-to-many multiply); ``how="left"``
    also keeps each left row without a match (its right values filled, ``right_matched`` False), ``"right"`` the
    unmatched right rows, ``"outer"`` both.  The result equals ``pandas.merge(left, right, on="key", how=how)`` as a
    multiset of rows.

    Strategies (``strategy=``): ``"hash"`` shuffles both sides by the stable key hash to the reducers, which join
    them; ``"broadcast"`` sends the smaller side to every task of the other, which joins its own rows where they
    live (nothing of it moves); ``"auto"`` (default) broadcasts a side of at most 32 MiB that is the smaller, joins
    two keyed resident results on the same reducers where they are (co-partitioned: nothing moves), and else hashes.
    [`plan_join`][tfmapreduce.plan_join] shows the choice.  Each device checks the rows it would make against its memory budget (a
    quarter of its host's available memory, or ``max_bytes=``) before making any.

    Args:
        left: keyed data: a ``(keys, values)`` pair of arrays (keys int32, int64 or strings; values one array or a
            tuple of arrays, one row per key), resident ``Sharded`` arrays, a keyed resident result
            (``tmr.sum_by_key(..., resident=True)``), a ``read_csv`` table (its first column the key, the others
            its values; read on the workers), or ``.npy``/raw files of keys and of values as a pair.
        right: the same, with keys of the same dtype.
        how: ``"inner"``, ``"left"``, ``"right"`` or ``"outer"``.
        strategy: ``"auto"``, ``"hash"`` or ``"broadcast"``.
        **options: ``resident=True`` (keep the rows where they are made: a [`JoinSharded`][tfmapreduce.JoinSharded]), ``max_bytes``
            (each device's output budget), and the run options ``cluster``, ``sizes`` (over the left rows, then
            the right; by default each side split evenly over the default devices), ``devices``, ``reducers``,
            ``timeout``, ``retries``, ``transfer``, ``return_stats``: see [`RunOptions`][tfmapreduce.RunOptions].

    Returns:
        A [`JoinResult`][tfmapreduce.JoinResult], or with ``resident=True`` a [`JoinSharded`][tfmapreduce.JoinSharded] (with ``return_stats=True``:
        ``(result, RunStats)``).

    Raises:
        TypeError: a side is not keyed data, keys of another dtype (or of different dtypes on the two sides), files
            of another format, pinned to tasks, or beside a resident side.
        InputError: values with another number of rows than their keys.
        ValueError: an unknown ``how`` or ``strategy``.
        ReducerMemoryError: a device would make more output than its budget (nothing was made).

    Examples:
        >>> orders = (np.array([1, 2, 1, 3]), np.array([9.5, 3.0, 1.5, 7.0]))
        >>> names = (np.array([1, 2]), np.array(["ann", "bob"]))
        >>> r = tmr.join(orders, names, cluster=cluster)
        >>> sorted(zip(r.keys.tolist(), r.left.tolist(), r.right.tolist()))
        [(1, 1.5, 'ann'), (1, 9.5, 'ann'), (2, 3.0, 'bob')]
    """
    given = dict(options)
    resident = bool(given.pop("resident", False))
    kind, srcs, settings, scattered = _prepare(left, right, how, strategy, given)
    try:
        return _engine.run(kind, srcs, settings, resident=resident)
    finally:
        for array in scattered:
            array.delete()


def plan_join(left: Any, right: Any, /, *, how: str = "inner", strategy: str = "auto", **options: Any) -> JoinPlan:
    """The [`JoinPlan`][tfmapreduce.JoinPlan] [`join`][tfmapreduce.join] would follow with these arguments: the strategy, the shards of the stacked
    rows and where rows are joined (nothing runs; ``print`` it)."""
    kind, srcs, settings, scattered = _prepare(left, right, how, strategy, dict(options))
    try:
        planned: JoinPlan = _engine.plan(kind, srcs, settings)
        return planned
    finally:
        for array in scattered:
            array.delete()
