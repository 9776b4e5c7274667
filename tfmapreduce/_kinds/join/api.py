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

from typing import Any

import attrs
import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from ..._base.errors import InputError
from ..._engine import driver as _engine
from ..._engine.kernels import available
from ..._engine.kind import refuse
from ..._io.files.csv import Csv
from ..._io.files.files import Files
from ..._io.keyed_input import keyed_sources
from ..._io.resident import Sharded
from ..._io.source import Input, Source, Sources
from ..._io.strings import Encoding
from ..._options import Options, RunOptions
from ..grace import planned_folder
from ..shuffle.forecast import join_forecast, row_bytes
from ..shuffle.map_side import SHUFFLE_KEY_DTYPES
from ..shuffle.plan import resolve_reducers
from ..shuffle.sharded import KeyedSharded
from ..spill import OverBudget
from .kind import Join
from .placed import Placed, placement
from .plan import (
    HOWS,
    STRATEGIES,
    JoinLayout,
    JoinPlan,
    _spread,
)
from .sides import FileColumn, FileInput, file_columns, stacked
from .spilled import join_spilled


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
    if dtype not in SHUFFLE_KEY_DTYPES:
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
    left: Any, right: Any, how: str, strategy: str, max_bytes: int | None, options: dict[str, Any]
) -> tuple[Join, tuple[Sources, Sources], RunOptions]:
    """The join's kind, its two sides' columns and run options; nothing runs and nothing moves (a host side beside a
    resident one is :class:`Placed` where the run will scatter it)."""
    if how not in HOWS:
        raise ValueError(f"how must be one of {', '.join(map(repr, HOWS))} (SQL join semantics), got {how!r}")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(map(repr, STRATEGIES))}, got {strategy!r}")
    if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, (int, np.integer)) or max_bytes <= 0):
        raise ValueError(f"max_bytes must be a positive number of bytes or None, got {max_bytes!r}")
    settings = RunOptions.of(**options)
    refuse(Join.refused, settings)  # before anything else is asked
    native = settings.cluster is not None and available(settings.cluster, settings.seconds())
    sides = [_side(left, "left", native), _side(right, "right", native)]
    (lsrcs, lcols, ltuple, luni, lkeyed), (rsrcs, rcols, rtuple, runi, rkeyed) = sides
    if lsrcs[0].dtype != rsrcs[0].dtype:
        raise TypeError(
            f"the keys of left are {_key_name(lsrcs)} and those of right are {_key_name(rsrcs)}; join keys of one dtype: "
            "cast one side, e.g. keys.astype(np.int64) (or str(...) both sides for strings)"
        )
    resident = [s[0].home_plan is not None for s in (lsrcs, rsrcs)]
    if resident[0] != resident[1]:  # one side on the workers: the run sends the other there too, for this join alone
        host = 0 if not resident[0] else 1
        if any(isinstance(s, FileColumn) for s in (lsrcs, rsrcs)[host]):
            raise TypeError(
                f"{('left', 'right')[host]} reads files and {('left', 'right')[1 - host]} is resident on the workers; a "
                "join reads files beside host arrays or other files only: gather() the resident side, or persist() "
                "the files (.npy: tmr.read_npy(path).persist(cluster=c))"
            )
        cluster = settings.cluster or (lsrcs if resident[0] else rsrcs)[0].home
        assert cluster is not None
        data = (lsrcs, rsrcs)[host]
        where = placement(data[0].rows, cluster)
        srcs = Sources([Placed(src, where, cluster) for src in data])
        lsrcs, rsrcs = (srcs, rsrcs) if host == 0 else (lsrcs, srcs)
    copartitioned = (
        lkeyed is not None
        and rkeyed is not None
        and lkeyed.partitioner == rkeyed.partitioner == "hash"  # range-partitioned results each have their own ranges
        and [s.device for s in lkeyed.plan.shards] == [s.device for s in rkeyed.plan.shards]
    )
    if settings.sizes is None and settings.devices is None and lsrcs[0].home_plan is None and settings.cluster is not None:
        settings = attrs.evolve(settings, sizes=_spread(lsrcs[0].rows, rsrcs[0].rows, settings))
    layout = JoinLayout((lcols, rcols), (ltuple, rtuple), (luni, runi), copartitioned)
    return Join(how, strategy, layout, int(max_bytes) if max_bytes is not None else None), (lsrcs, rsrcs), settings


def join(
    left: Any,
    right: Any,
    /,
    *,
    how: str = "inner",
    strategy: str = "auto",
    resident: bool = False,
    max_bytes: int | None = None,
    **options: Unpack[Options],
) -> Any:
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
    quarter of its host's available memory, or ``max_bytes=``) before making any; where they would not fit, a fetched
    join runs again through the workers' disks (grace hash, ``join.spilled``), with the same rows.

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
        ReducerMemoryError: a resident join's device would make more output than its budget, or one key's pairs
            alone would, even spilled (nothing was made; the key named).
        OutputError: a spill folder could not be written (full: named, with its task; the spill files removed).

    Examples:
        >>> orders = (np.array([1, 2, 1, 3]), np.array([9.5, 3.0, 1.5, 7.0]))
        >>> names = (np.array([1, 2]), np.array(["ann", "bob"]))
        >>> r = tmr.join(orders, names, cluster=cluster)
        >>> sorted(zip(r.keys.tolist(), r.left.tolist(), r.right.tolist()))
        [(1, 1.5, 'ann'), (1, 9.5, 'ann'), (2, 3.0, 'bob')]
    """
    kind, sides, settings = _prepare(left, right, how, strategy, max_bytes, dict(options))
    scattered: list[Sharded] = []  # a host side beside a resident one, sent where its plan placed it, for this run

    def moved(src: Source) -> Source:
        if not isinstance(src, Placed):
            return src
        scattered.append(src.scatter())
        return scattered[-1].as_source()

    try:
        left_srcs, right_srcs = (Sources([moved(src) for src in side]) for side in sides)
        x = stacked(left_srcs, right_srcs)
        try:
            return _engine.run(kind, x, settings, resident=resident)
        except OverBudget as refused:  # a device's output over its budget: a fetched join spills (grace hash) instead
            if resident:
                raise
            return join_spilled(kind, x, settings, refused)
    finally:
        for array in scattered:
            array.delete()


def plan_join(
    left: Any,
    right: Any,
    /,
    *,
    how: str = "inner",
    strategy: str = "auto",
    max_bytes: int | None = None,
    **options: Unpack[Options],
) -> JoinPlan:
    """The [`JoinPlan`][tfmapreduce.JoinPlan] [`join`][tfmapreduce.join] would follow with these arguments: the strategy, the shards of the stacked
    rows and where rows are joined (``print`` it).  Nothing runs and nothing moves: a host side beside a resident one
    is planned where ``join`` will send it (see ``placed``).

    The plan also says what the budget (``max_bytes``, else a quarter of this host's available memory) expects of each
    device's output, estimated from the sides' rows (``plan.spill``, see ``forecast``): in memory, or spilled through
    the workers' disks, in how many sub-partitions per reducer (one round each) and what each task writes.  A CSV table's
    rows are known once read: its files' bytes stand for them (see ``forecast.join_forecast``).

    Examples:
        >>> keys = np.arange(30_000)
        >>> plan = tmr.plan_join((keys, keys * 1.0), (keys, keys), max_bytes=100_000, reducers=2, cluster=cluster)
        >>> plan.spill.spills, plan.spill.parts  # 30,000 output rows of 24 bytes: 360,000 bytes per device
        (True, 8)
    """
    kind, (left_srcs, right_srcs), settings = _prepare(left, right, how, strategy, max_bytes, dict(options))
    planned, call = _engine.planned(kind, stacked(left_srcs, right_srcs), settings)
    hashed = resolve_reducers(settings.reducers, planned.plan, call.cluster)  # where a spilled join joins
    sides = (row_bytes(left_srcs), row_bytes(right_srcs))
    out = row_bytes([*left_srcs, *right_srcs[1:]])
    folder = planned_folder()
    forecast = join_forecast(planned.plan, planned.sizes, len(hashed), sides, out, kind.max_bytes, folder, planned.units)
    return attrs.evolve(planned, spill=forecast)
