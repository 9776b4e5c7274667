"""``tmr.scatter``: data sent to the cluster once, to stay on the devices for many jobs — an array as a ``Sharded``,
a table as a :class:`ResidentTable`."""

from __future__ import annotations

from typing import Any, overload

from typing_extensions import Unpack

from .._io.resident import Sharded
from .._io.resident import scatter as scatter_array
from .._options import PlaceOptions
from .column import placed
from .resident import ResidentTable
from .table import Table


@overload
def scatter(x: Table, /, *, keep_source: bool = True, **options: Unpack[PlaceOptions]) -> ResidentTable: ...
@overload
def scatter(x: Any, /, *, keep_source: bool = True, **options: Unpack[PlaceOptions]) -> Sharded: ...
def scatter(x: Any, /, *, keep_source: bool = True, **options: Unpack[PlaceOptions]) -> Sharded | ResidentTable:
    """Send ``x`` to the cluster once; its shards stay on their devices for many jobs.

    An array becomes a [`Sharded`][tfmapreduce.Sharded]; a [`Table`][tfmapreduce.Table] a
    [`ResidentTable`][tfmapreduce.ResidentTable]: each column's values (strings as ``tf.string``, dates int32 days,
    timestamps int64) and, where it holds a null, its validity, every one on the first column's row partition. Same
    partition and placement rules (and errors) as ``MapReduce.run``.  With ``keep_source=True`` (the default) the
    shards keep a reference to ``x`` (no copy), so a shard lost with its worker is rebuilt on a surviving task by the
    next run; ``keep_source=False`` lets ``x`` be freed, and a lost shard then raises ``ShardLostError``.

    Args:
        x: the host array to send: numbers, booleans or strings (``str`` come back as ``str``, ``bytes`` as
            ``bytes``); or a ``tmr.Table``.
        keep_source: keep a reference to ``x`` to rebuild lost shards.
        **options: ``cluster`` (required), ``sizes``, ``devices``, ``fallback``, ``timeout`` (see ``RunOptions``);
            options of jobs (``reducers=``, ``retries=``, ...) raise TypeError.

    Examples:
        >>> data = tmr.scatter(np.arange(8.0), cluster=cluster, sizes=tmr.weights(1, 3))
        >>> data.plan.sizes
        (2, 6)
        >>> float(tmr.mean(data))  # ships nothing
        3.5
        >>> data.delete()
        >>> with tmr.scatter(tmr.table({"s": np.array(["é", "b"])}), cluster=cluster, sizes=[1, 1]) as t:
        ...     t.shards, t.to_dict()["s"].tolist()
        ((1, 1), ['é', 'b'])
    """
    if isinstance(x, ResidentTable):
        raise TypeError("x is already on the workers (a ResidentTable); use it directly, or collect() it first")
    if isinstance(x, Table):
        return ResidentTable(placed({n: x.column(n) for n in x.columns}, keep_source, dict(options)))
    return scatter_array(x, keep_source=keep_source, **options)
