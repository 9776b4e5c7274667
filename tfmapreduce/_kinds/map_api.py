"""The map-only verbs: ``tmr.map`` and ``tmr.filter``, each one run of a map-only kind (outputs kept where they are made)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from typing_extensions import Unpack

from .._engine import driver as _engine
from .._ops.per_group import check_max_bytes
from .._options import Options, RunOptions
from .map_by_key import MapByKey
from .maponly import MapOnly


def _run(kind: MapOnly | MapByKey, x: Any, broadcast: Sequence[Any], options: dict[str, Any]) -> Any:
    argument = kind.argument if isinstance(kind, MapOnly) else "fn"
    if not callable(kind.fn):
        raise TypeError(
            f"{argument} must be a callable taking a batch of rows (one tensor per input), e.g. "
            f"{'lambda x: x * 2' if argument == 'fn' else 'lambda x: x > 0'}; got {type(kind.fn).__name__} {kind.fn!r}"
        )
    return _engine.run(kind, x, RunOptions.of(**options), broadcast, resident=True)


def map(
    fn: Callable[..., Any],
    x: Any,
    /,
    *,
    broadcast: Sequence[Any] = (),
    by_key: bool = False,
    max_bytes: int | None = None,
    **options: Unpack[Options],
) -> Any:
    """Map each shard's rows to any number of output rows, kept on the shard's device as resident ``Sharded`` data;
    with ``by_key=True``, moved to the reducer of their key as a ``KeyedSharded``.

    ``fn(*rows, *broadcast)`` receives a shard's rows (one tensor per co-partitioned input; for files a batch
    of ``batch_rows`` rows at a time, so a task holds a batch and its output, never its input split) and
    returns the output rows: a tensor, or a structure of tensors of one row count, with the rows on axis 0
    and a static row shape.  It may return more rows (an explode) or fewer.  Output shard ``i`` stays on
    the device of input shard ``i``: the result is the input of any later job or write without shipping,
    and ``.gather()`` returns it in row order.  It cannot be rebuilt if its worker is lost: map again.

    With ``by_key=True``, ``fn`` returns a pair ``(keys, values)``: keys a 1-D int32, int64 or string tensor,
    values a tensor or a tuple of tensors with one row per key.  In the same run every row goes to reducer
    ``hash(key) mod R`` (the stable hash of keyed jobs and hash joins, over ``reducers=``, default one per
    task; ``partitioner="range"``: sampled key ranges).  Every row is kept (keys repeat: a repartition, not a
    reduction).  Before any row travels, each reducer's rows and bytes are checked against its budget
    (``max_bytes=``, else a quarter of its host's available memory).  Shard ``r`` of the resulting
    [`KeyedSharded`][tfmapreduce.KeyedSharded] holds reducer ``r``'s rows by input shard, then in fn's row
    order (a range partition's: sorted by key, rows of one key in that order).  It reads in place as a keyed
    job's input (``tmr.sum_by_key(r.keys, r.values)``), and ``tmr.join`` with another hash-partitioned
    ``KeyedSharded`` on the same reducers joins shard ``r`` with shard ``r`` (co-partitioned: nothing moves).
    ``.gather()`` gives a [`KeyedResult`][tfmapreduce.KeyedResult] of every row, sorted by key, stably: one
    entry per row, rows of one key in input order (its ``keys`` and ``values`` arrays, or ``to_pandas()``;
    ``to_dict()`` keeps the last row of each key).

    Args:
        fn: the traceable function of a batch of rows (TensorFlow ops; it is traced once per shard or file).
        x: an array (numbers or strings), a tuple of co-partitioned arrays, resident ``Sharded`` data or files; or a
            [`ResidentTable`][tfmapreduce.ResidentTable] (``fn`` gets and returns ``{name: tensor}``: see its ``map``).
        broadcast: values every call of ``fn`` receives whole, after the rows.
        by_key: ``fn`` returns ``(keys, values)``; the rows are partitioned by key over the reducers.
        max_bytes: with ``by_key=True``, the bytes of keys and values one reducer may receive (None: a quarter of its
            host's available memory).
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout``, ``retries``, ``transfer``,
            ``batch_rows`` (files), and with ``by_key=True`` ``reducers`` and ``partitioner``: see
            [`RunOptions`][tfmapreduce.RunOptions].

    Returns:
        A ``Sharded`` (or ``fn``'s structure of them, co-partitioned on one plan: a tuple as a
        [`ShardedTuple`][tfmapreduce.ShardedTuple]); with ``by_key=True`` a ``KeyedSharded``.  Free it with ``delete()``
        or ``with``.

    Raises:
        MapFunctionError: ``fn`` raised while traced, or its outputs are not dense tensors of one row count, or
            differ in structure, dtype or row shape between shards or batches; with ``by_key=True``, it returned
            no ``(keys, values)`` pair, keys of another dtype than int32, int64 or string, or keys and values of
            different row counts (found in the run: the message names the shard).
        ReducerMemoryError: with ``by_key=True``, a reducer would receive more than its budget (nothing was sent).
        TypeError: ``fn`` is not callable, ``by_key`` is not a bool, or ``speculate=True`` was given, or
            ``reducers=``/``partitioner=``/``max_bytes=`` without ``by_key=True``.

    Examples:
        >>> x = np.arange(6)
        >>> with tmr.map(lambda v: tf.repeat(v, 2), x, cluster=cluster) as twice:
        ...     twice.gather().tolist(), int(tmr.sum(twice))
        ([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5], 30)
        >>> def words(lines):
        ...     w = tf.strings.split(lines).flat_values
        ...     return w, tf.strings.length(w)
        >>> with tmr.map(words, np.array(["to be", "or not to be"]), by_key=True, cluster=cluster) as r:
        ...     rows = r.gather()  # every row, sorted by key
        ...     longest = tmr.max_by_key(r.keys, r.values)  # a keyed job over it, in place
        >>> rows.keys.tolist(), rows.values.tolist(), longest.values.tolist()
        (['be', 'be', 'not', 'or', 'to', 'to'], [2, 2, 3, 2, 2, 2], [2, 3, 2, 2])
    """
    if not isinstance(by_key, bool):
        raise TypeError(
            f"by_key must be True (fn returns (keys, values), partitioned by key) or False (fn's rows kept where they ran), "
            f"got {type(by_key).__name__} {by_key!r}"
        )
    if all(hasattr(x, a) for a in ("columns", "schema", "map", "collect")):  # a tmr.ResidentTable (a layer above)
        if by_key or broadcast or max_bytes is not None:
            raise TypeError("map over a ResidentTable takes fn and run options only (no by_key=, broadcast=, max_bytes=)")
        return x.map(fn, **options)
    if not by_key:
        if max_bytes is not None:
            raise TypeError(
                f"max_bytes={max_bytes!r} limits what one reducer receives with by_key=True; without it each shard's rows stay "
                "where they ran: drop max_bytes=, or pass by_key=True"
            )
        return _run(MapOnly(fn, "fn"), x, broadcast, dict(options))
    return _run(MapByKey(fn, check_max_bytes(max_bytes)), x, broadcast, dict(options))


def filter(pred: Callable[..., Any], x: Any, /, *, broadcast: Sequence[Any] = (), **options: Unpack[Options]) -> Any:
    """The rows of ``x`` where ``pred`` is true, kept on their shards' devices as resident ``Sharded`` data.

    ``pred(*rows, *broadcast)`` returns one boolean per row.  A tuple of co-partitioned inputs is filtered
    together (a [`ShardedTuple`][tfmapreduce.ShardedTuple] of ``Sharded`` comes back: ``with`` frees them all).
    Otherwise as [`map`][tfmapreduce.map]: the result stays where it was computed and ``.gather()`` returns the
    kept rows in order.

    Examples:
        >>> x = np.arange(10.0)
        >>> with tmr.filter(lambda v: tf.equal(v % 3, 0), x, cluster=cluster) as kept:
        ...     kept.gather().tolist()
        [0.0, 3.0, 6.0, 9.0]
    """
    return _run(MapOnly(pred, "pred"), x, broadcast, dict(options))
