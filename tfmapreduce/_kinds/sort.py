"""The sort kind of job: sampled range partitioning (TeraSort's way) in one distributed run.

The graph of one sort (one distributed execution)::

    shard i (on its device)   a random sample of (key, global row) pairs, about SAMPLES per range in all
    reducer 0                 the samples of every shard, sorted by (key, row) → R − 1 splitters (numbers by their
                              ``order_key``: NaN last, -0.0 = 0.0; strings by their byte-order ranks)
    shard i                   range of each row = how many splitters are below its (key, row), by
                              ``tf.searchsorted`` (strings ranked together with the splitters; rows whose key equals
                              a splitter compare their row too) → ``tf.dynamic_partition`` into R ranges
    reducer r's task CPU      the bytes of range r from every shard checked against its budget (``_budget``):
                              only then does range r travel, once, to reducer r
    reducer r (its device)    the ranges of every shard in shard order, sorted (numbers alone by the native value
                              radix sort; else a stable argsort of the keys, gathered; ``tf.argsort`` where a task
                              lacks the kernels) → kept in resource variables on the reducer: shard r of the result
    client                    fetches each range's row count: the plan of the result

The splitters are computed in the graph, so the sample and the sort are one run (a retry repeats both).
Ties break by row, so a key held by many rows spreads over several ranges and the order is stable.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping
from typing import Any, ClassVar, overload

import attrs
import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._base.device import Device
from .._base.errors import InputError, JobError, ReducerMemoryError, ShardLostError
from .._base.plan import Plan, Shard, make_plan
from .._base.task import Task
from .._engine import driver as _engine
from .._engine.call import Call
from .._engine.kind import KindBase
from .._engine.program import Builder, Program
from .._io.files.written import Written
from .._io.keyed_input import keyed_sources
from .._io.resident import Sharded
from .._io.source import Sources, streamed
from .._io.variables import named_per_run
from .._native.loader import has
from .._ops.budget import check_budget, over_budget
from .._ops.grouping import argsort, nbytes, value_of
from .._ops.per_group import check_max_bytes
from .._ops.splitters import FLOAT_DTYPES, INT_DTYPES, comparable, order_key
from .._ops.splitters import sample_size as _sample_size
from .._options import Options, RunOptions
from .persist import persisted
from .ranges import KeyMaker, partition_ranges, per_run_value
from .shuffle.plan import resolve_reducers
from .spilled_sort import sort_spilled

SORT_COPIES = 3
"""A range is held about three times over while it sorts: the rows received, their order, the sorted copy."""

_TOO_BIG = "tfmapreduce: sort range too large"

NO_SPECULATION = (
    "speculate=True does not apply to sort: every shard sends a range to every reducer in one distributed run, "
    "so no shard can be backed up alone; drop speculate="
)


@attrs.frozen
class SortPlan:
    """The plan of a sort: the shards (as for any job) and the reducer devices; range ``r`` is sorted on ``reducers[r]``.

    Example:
        >>> shards = tmr.MapReduce(tf.reduce_sum, tf.add).plan(np.arange(10_000), cluster=cluster, sizes=2)
        >>> SortPlan(shards, tuple(s.device for s in shards.shards)).samples  # SAMPLES per range
        512
    """

    plan: Plan
    """The shards: which rows are sampled and partitioned on which device."""
    reducers: tuple[str, ...]
    """The reducer devices, in the order of the ranges: every key of range r is ≤ every key of range r + 1."""

    @property
    def samples(self) -> int:
        """Rows sampled in all (the whole input when it is smaller than ``SAMPLES`` per range)."""
        return sum(_sample_size(s.rows, self.plan.rows, len(self.reducers)) for s in self.plan.shards)

    @property
    def tasks(self) -> tuple[Task, ...]:
        """The tasks the run uses: the shards' and the reducers', in order."""
        return tuple(dict.fromkeys([*self.plan.tasks, *(Device.parse(d).task for d in self.reducers)]))

    def explain(self) -> str:
        """The shard table, then the ranges."""
        lines = [self.plan.explain(), f"{len(self.reducers)} range(s) from {self.samples} sampled rows:"]
        lines += [f"  range {r} → {d}" for r, d in enumerate(self.reducers)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


@attrs.define(eq=False, repr=False)
class Sort(KindBase[SortPlan]):
    """A sort as the run driver sees it (see ``_engine.kind.Kind``): ranges sorted on the reducers and kept there."""

    descending: bool
    max_bytes: int | None = None
    argument: str = "x"
    """``"x"`` (sort: the values alone) or ``"keys"`` (sort_by_key: the first input's keys order the others); names
    the keys in messages."""
    keyed: KeyMaker | None = None
    """Where the key (and the values) are made from the inputs on each shard, in the graph (``ranges.KeyMaker``)."""
    phase: ClassVar[str] = "sort"
    refused: ClassVar[Mapping[str, str]] = {"speculate": NO_SPECULATION}

    def __repr__(self) -> str:
        return f"sort(descending={self.descending})"

    @property
    def identity(self) -> Hashable:
        return ("sort", self.descending, self.max_bytes, self.keyed)

    def sources(self, x: Any) -> tuple[Sources, Any]:
        srcs, encoding = keyed_sources(x)  # values may be strings (they travel as bytes); files come persisted (see sort)
        assert streamed(srcs) is None
        if self.argument == "x" and len(srcs) > 1:
            raise TypeError(
                f"x must be one array, got a tuple of {len(srcs)}; to carry values with their keys use "
                "tmr.sort_by_key(keys, values)"
            )
        key = srcs[0]
        if len(key.shape) != 1:
            raise InputError(
                f"{self.argument} must be 1-D (one key per row), got shape {key.shape}; sort one column, e.g. "
                f"{self.argument}[:, 0], or flatten it with {self.argument}.reshape(-1)"
            )
        if self.keyed is None and key.dtype not in INT_DTYPES + FLOAT_DTYPES and key.dtype.kind not in "OSU":
            raise TypeError(
                f"{self.argument} must hold integers (int8 to int64, uint8 to uint32), floats (float16 to float64) or "
                f"strings (str or bytes), got dtype {key.dtype}; convert it, e.g. {self.argument}.astype(np.int64)"
            )
        return srcs, encoding  # how its strings come back

    def plan(self, shards: Plan, call: Call) -> SortPlan:
        if call.settings.reducers is None:  # a range per device of the shards
            return SortPlan(shards, tuple(dict.fromkeys(s.device for s in shards.shards)))
        return SortPlan(shards, resolve_reducers(call.settings.reducers, shards, call.cluster))

    def variant(self, plan: SortPlan, call: Call) -> Hashable | None:
        return () if named_per_run(plan.reducers) else None  # on GPUs: named in the graph, built for each run

    def shape_of(self, plan: SortPlan) -> Hashable:
        """Each shard's place and whether it has rows, and the ranges' reducers: all its graph reads of the plan where
        no input's graph holds its row counts (each shard's sample size and first row are run inputs: :meth:`fed`), so
        sorts of host arrays of other row counts at the same places share one program."""
        return tuple((s.index, s.device, s.rows > 0) for s in plan.plan.shards), plan.reducers

    def fed(self, plan: SortPlan, name: str) -> int:
        """A rows-free program's run input ``name``: a shard's sample size or first row (``ranges.per_run_value``)."""
        return per_run_value(plan.plan, len(plan.reducers), name)

    def build(self, builder: Builder, plan: SortPlan, call: Call) -> Program:
        """Sample, choose the splitters, partition every shard into ranges, sort each range on its reducer, keep it
        (source ``j``'s range ``r`` as shard ``r`` of the container ``{the run's name}_s{j}``)."""
        native = call.native
        full = [s for s in plan.plan.shards if s.rows > 0]
        pieces = partition_ranges(builder, plan.plan, len(plan.reducers), plan.reducers[0], self.descending, native, self.keyed)
        width = len(call.srcs) if self.keyed is None else len(self.keyed.dtypes)
        counts = []
        for r, device in enumerate(plan.reducers):
            if not full:
                counts.append(tf.constant(0, tf.int64))
                continue
            start = self._check_budget(r, device, [pieces[s.index] for s in full])
            with tf.device(device), tf.name_scope(f"range{r}"):
                columns = [tf.concat([pieces[s.index][j][r][start:] for s in full], 0) for j in range(width)]
                stored = [builder.store(device, f"_s{j}", r, c) for j, c in enumerate(self._sorted(columns, native))]
                with tf.control_dependencies(stored):
                    counts.append(tf.size(columns[0], out_type=tf.int64))
        return builder.program(counts, plan.tasks)

    def _sorted(self, columns: list[tf.Tensor], native: Any | None) -> list[tf.Tensor]:
        """A range's columns in the order of the first: numbers alone radix-sorted natively as they are (int32/64,
        float32/64; other dtypes as their ``order_key`` images, mapped back), nothing to gather after; else the stable
        order of the first column gathered from each."""
        column = columns[0]
        if len(columns) == 1 and has(native, "tmr_sort_values") and column.dtype != tf.string:
            if column.dtype in (tf.int32, tf.int64, tf.float32, tf.float64):
                return [native.tmr_sort_values(column, descending=self.descending)]
            return [value_of(native.tmr_sort_values(order_key(column), descending=self.descending), column.dtype)]
        order = argsort(comparable(column, self.descending, native), native)
        return [tf.gather(c, order) for c in columns]

    def _check_budget(self, r: int, device: str, pieces: list[list[list[tf.Tensor]]]) -> tf.Tensor:
        """On range ``r``'s task CPU: its rows and bytes from every shard, checked against its budget (its bytes three
        times: received, their order, the sorted copy); 0 once it holds, the start every piece is sent sliced from."""
        rows = [tf.size(p[0][r], tf.int64) for p in pieces]
        size = [nbytes(p[0][r], [c[r] for c in p[1:]]) * SORT_COPIES for p in pieces]
        return check_budget(r, device, rows, size, self.max_bytes, _TOO_BIG)

    def finish(self, value: Any, program: Program | None, plan: SortPlan, call: Call) -> Any:
        """One ``Sharded`` per source on one plan: range r on reducer r."""
        counts = [int(n) for n in value.value]
        available = [Device.parse(d) for d in call.cluster.devices]
        result = make_plan(sum(counts), counts, list(plan.reducers), available)
        made = [(s.dtype, s.shape[1:], call.note) for s in call.srcs] if self.keyed is None else []
        made += [(np.dtype(d), (), None) for d in (self.keyed.dtypes if self.keyed is not None else ())]
        outputs = tuple(
            Sharded(
                call.cluster,
                result,
                dtype,
                (result.rows, *inner),
                f"{value.name}_s{j}",
                (_lost,) * len(counts),
                encoding=note if dtype.kind == "O" else None,
            )
            for j, (dtype, inner, note) in enumerate(made)
        )
        return outputs[0] if len(outputs) == 1 else outputs

    def failure(self, error: JobError, plan: SortPlan) -> Exception | None:
        big = over_budget(error, _TOO_BIG, self.max_bytes)
        if big is None:
            return None
        return ReducerMemoryError(
            f"range {big.part} of the sort ({big.device}) would receive {big.rows:,} rows, {big.size:,} bytes while it "
            f"sorts (its rows {SORT_COPIES} times: received, their order, the sorted copy), more than its budget of "
            f"{big.budget:,} bytes ({big.limit}); no row was sent. Sort over more devices (reducers=N, up to the "
            "cluster's devices), add workers, "
            "or, if the host has the memory, raise max_bytes=; or sort into files with directory= (each reducer "
            "then sorts its range a bucket at a time within the budget, through its worker's disk)"
        )


def _lost(shard: Shard) -> tf.Tensor:
    raise ShardLostError(
        f"range {shard.index} of a sorted result is lost with its worker and cannot be rebuilt; sort again",
        shards=(shard.index,),
    )


@overload
def sort(
    x: Any,
    /,
    *,
    descending: bool = ...,
    max_bytes: int | None = ...,
    directory: None = ...,
    spill_dir: Any = ...,
    **options: Unpack[Options],
) -> Sharded: ...
@overload
def sort(
    x: Any,
    /,
    *,
    descending: bool = ...,
    max_bytes: int | None = ...,
    directory: str | os.PathLike[str],
    spill_dir: Any = ...,
    **options: Unpack[Options],
) -> Written: ...
def sort(
    x: Any,
    /,
    *,
    descending: bool = False,
    max_bytes: int | None = None,
    directory: Any = None,
    spill_dir: Any = None,
    **options: Unpack[Options],
) -> Sharded | Written:
    """Sort ``x`` across the cluster: a resident ``Sharded``, range-partitioned, each range sorted on its device.

    Every value of shard ``r`` of the result is ≤ every value of shard ``r + 1`` (``≥`` with ``descending``), and each
    shard is sorted, so ``.gather()`` equals ``np.sort(x)``: NaN last, as numpy; strings in byte order (UTF-8 for
    ``str``), coming back as ``bytes``; ``np.sort(x)[::-1]`` with ``descending=True``, NaN first.  One distributed run:
    each shard samples its rows, R − 1 splitters are chosen from the sample in the graph, each shard sends range ``r``
    of its rows to reducer ``r`` once, and each reducer sorts its range and keeps it (TeraSort's way).  Equal values
    may spread over several ranges, so no value held by many rows fills one device.  A device holds its range about
    three times over while it sorts (the rows received, their order, the sorted copy); each reducer checks that before
    any row travels to it.

    Args:
        x: a 1-D array of integers (int8 to int64, uint8 to uint32), floats or strings (``str`` or ``bytes``, e.g. a
            numpy ``S10`` array of binary keys), resident ``Sharded`` data, or files (``tmr.read_npy``, ...: read into
            resident data on the workers first, placed by ``sizes``/``devices``, and freed after).
        descending: sort from the largest value down.
        max_bytes: the most bytes one range may take while it sorts (three times its rows' bytes; a string counts its
            bytes and 32), or None: a quarter of the memory its reducer's host has available.
        directory: write the sorted values as ``.npy`` part files there (strings as numpy ``S`` arrays) instead of keeping them
            resident, spilling through each worker's disk so that each reducer holds at most ``max_bytes`` however
            large its range: see "Data larger than memory" in the ordering guide.  Returns its ``Written``.
        spill_dir: with ``directory``, the absolute folder each worker spills under on its own disk (None: ``/tmp``).
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout``, ``retries``, ``transfer``,
            ``reducers`` (None: a range per device of the shards; a count or device strings): see [`RunOptions`][tfmapreduce.RunOptions].

    Returns:
        A ``Sharded`` whose shard ``r`` lives on reducer ``r``; free it with ``delete()`` or ``with``.  A range lost
        with its worker cannot be rebuilt: sort again.

    Raises:
        InputError: ``x`` is not 1-D.
        TypeError: ``x`` holds neither numbers nor strings, ``descending`` is not a bool, or
            ``speculate=True`` was given.
        ValueError: ``max_bytes`` is not None or an int ≥ 1.
        ReducerMemoryError: a range would not fit its budget (nothing was sent; with ``directory``: a bucket, after the
            spill, nothing written).
        OutputError: with ``directory``: it is not empty, or a spill folder could not be written (named with its task
            and the bytes it needs; the spill files are removed).
        PlacementError: a bad ``reducers=``.

    Examples:
        >>> x = np.array([3.0, np.nan, -1.0, 2.0, 3.0, 0.5])
        >>> with tmr.sort(x, cluster=cluster, sizes=[2, 0, 4], reducers=2) as ordered:
        ...     ordered.gather().tolist()
        [-1.0, 0.5, 2.0, 3.0, 3.0, nan]
        >>> with tmr.sort(np.array([b"pear", b"", b"apple"]), cluster=cluster, descending=True) as ordered:
        ...     ordered.gather().tolist()
        [b'pear', b'apple', b'']
    """
    kind = Sort(descending_of(descending), check_max_bytes(max_bytes))
    with persisted(x, dict(options)) as (x, given):
        if directory is not None:
            return sort_spilled(kind, x, [directory], spill_dir, given)[0]
        result: Sharded = _run(kind, x, given)
    return result


def sort_by_key(
    keys: Any,
    values: Any,
    /,
    *,
    descending: bool = False,
    max_bytes: int | None = None,
    directory: Any = None,
    spill_dir: Any = None,
    **options: Unpack[Options],
) -> tuple[Any, Any]:
    """Sort ``values`` by ``keys`` across the cluster, stably: each value row travels with its key.

    As [`sort`][tfmapreduce.sort] for the keys (range-partitioned, each range sorted on its reducer, NaN last, strings
    in byte order); rows of equal keys keep their input order, so ``keys.gather()`` equals ``keys[order]`` and
    ``values.gather()`` ``values[order]`` for ``order = np.argsort(keys, kind="stable")`` (with ``descending=True``:
    the keys from the largest down, equal keys still in input order).  Equal keys may spread over several ranges.
    TeraSort's records are ``sort_by_key(keys, payload)`` with ``keys`` an ``S10`` array and ``payload`` a
    ``(n, 90)`` uint8 array.

    Args:
        keys: a 1-D array of integers, floats or strings (see [`sort`][tfmapreduce.sort]), or resident ``Sharded`` data.
        values: an array with one row per key (numbers, or strings, which come back as bytes), resident data, or a
            tuple of such arrays.
        descending: order the keys from the largest down.
        max_bytes: the most bytes of keys and values one range may take while it sorts (see [`sort`][tfmapreduce.sort]).
        directory: write the sorted keys and values as ``.npy`` parts under ``directory/keys`` and
            ``directory/values`` (``values0``, ``values1``, ... for a tuple), spilling through the workers' disks
            (see [`sort`][tfmapreduce.sort]); returns their ``Written``s as ``(keys, values)``.
        spill_dir: with ``directory``, where each worker spills (see [`sort`][tfmapreduce.sort]).
        **options: the run options of [`sort`][tfmapreduce.sort].

    Returns:
        ``(keys, values)``: co-partitioned ``Sharded`` arrays on one plan (``values`` a tuple when a tuple was given).

    Examples:
        >>> keys, values = np.array([3, 1, 3, 2, 1]), np.array([30.0, 10.0, 31.0, 20.0, 11.0])
        >>> k, v = tmr.sort_by_key(keys, values, cluster=cluster, reducers=2)
        >>> k.gather().tolist(), v.gather().tolist()
        ([1, 1, 2, 3, 3], [10.0, 11.0, 20.0, 30.0, 31.0])
        >>> k.delete(); v.delete()
    """
    many = isinstance(values, tuple)
    kind = Sort(descending_of(descending), check_max_bytes(max_bytes), "keys")
    with persisted((keys, *values) if many else (keys, values), dict(options)) as (inputs, given):
        if directory is not None:
            names = ["keys", *([f"values{i}" for i in range(len(values))] if many else ["values"])]
            written = sort_spilled(kind, inputs, [os.path.join(os.fspath(directory), n) for n in names], spill_dir, given)
            return written[0], written[1:] if many else written[1]
        out = _run(kind, inputs, given)
    if not isinstance(out[0], Sharded):  # return_stats=True: (the sorted inputs, stats)
        return (out[0][0], out[0][1:] if many else out[0][1]), out[1]
    return out[0], out[1:] if many else out[1]


def descending_of(descending: object) -> bool:
    if not isinstance(descending, (bool, np.bool_)):
        raise TypeError(f"descending must be True or False, got {type(descending).__name__} {descending!r}")
    return bool(descending)


def _run(kind: Sort, x: Any, options: dict[str, Any]) -> Any:
    return _engine.run(kind, x, RunOptions.of(**options), resident=True)
