"""Resident data: shards that live in resource variables on their devices, mapped again and again without shipping."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._base.checks import flag
from .._base.deadline import effective_timeout
from .._base.device import Device
from .._base.errors import ClusterError, ShardLostError
from .._base.place import default_devices
from .._base.plan import Plan, Shard, make_plan
from .._base.task import Task
from .._cluster.cluster import Cluster
from .._options import PlaceOptions, RunOptions
from .mapped import size_checks
from .resident_source import Resident
from .source import Input, host_array
from .strings import as_bytes_array, decode_keys, split_joined
from .variables import destroy_shard


@attrs.define(eq=False)
class Sharded(Input):
    """An array whose shards live on their devices.

    Made by [`scatter`][tfmapreduce.scatter], [`generate`][tfmapreduce.generate] or [`load_shards`][tfmapreduce.load_shards].

    Pass it in place of ``x`` to any recipe or ``MapReduce.run``: the run ships
    no input bytes and compiles once.  It remembers how each shard was made
    (the host array, a generator or a file) so a shard can be rebuilt; free the
    workers' memory with [`delete`][tfmapreduce.Sharded.delete] or a ``with`` block.

    Examples:
        >>> x = np.arange(1000.0)
        >>> with tmr.scatter(x, cluster=cluster) as data:
        ...     means = [float(tmr.mean(data)) for _ in range(3)]  # no run ships x again
        >>> means
        [499.5, 499.5, 499.5]
    """

    cluster: Cluster
    """The cluster the shards live on."""
    plan: Plan
    """Which rows live on which device."""
    dtype: np.dtype
    """The element type."""
    shape: tuple[int, ...]
    """The whole array's shape."""
    name: str
    """The resource container that holds the shards on the workers."""
    _builders: tuple[Callable[[Shard], Any], ...]
    _deleted: bool = False
    encoding: str | None = None
    """How its strings come back (``gather``, and the keys and strings of jobs over it): ``str`` decoded with this
    codec where they were given as ``str`` (or read as text), ``bytes`` where None."""

    def __repr__(self) -> str:
        state = "deleted" if self._deleted else f"{len(self.plan.tasks)} tasks"
        return f"Sharded({self.name}, shape={self.shape}, dtype={self.dtype}, {len(self.plan.shards)} shards on {state})"

    def explain(self) -> str:
        """The plan of the shards, as a table."""
        return self.plan.explain()

    def as_source(self) -> Resident:
        """The input source jobs read this data through (no feed, no copy)."""
        if self._deleted:
            raise ClusterError(f"{self!r} was deleted; scatter the data again")
        self.cluster.check_open()
        return Resident(self)

    def read(self, shard: Shard) -> tf.Tensor:
        """In a graph, inside the shard's device scope: the shard's current value."""
        if shard.rows == 0:
            return tf.zeros((0, *self.shape[1:]), tf.as_dtype(self.dtype))
        return tf.raw_ops.ReadVariableOp(resource=self._handle(shard), dtype=tf.as_dtype(self.dtype))

    def _handle(self, shard: Shard) -> tf.Tensor:
        return tf.raw_ops.VarHandleOp(
            dtype=tf.as_dtype(self.dtype),
            shape=(shard.rows, *self.shape[1:]),
            container=self.name,
            shared_name=f"shard{shard.index}",
        )

    def gather(self, *, timeout: float | None = None) -> np.ndarray:
        """The whole array, fetched from the workers to the client: strings as ``str`` where given as ``str``
        (see ``encoding``), else ``bytes``."""
        self.as_source()  # ClusterError for deleted data or a closed cluster
        graph = tf.Graph()
        with graph.as_default():
            parts = []
            for shard in self.plan.shards:
                with tf.device(shard.device):
                    parts.append(tf.identity(self.read(shard)))
        values = self._run(graph, parts, {}, timeout)
        whole = np.concatenate(values, axis=0) if values else np.zeros(self.shape, self.dtype)
        if self.dtype != object:
            return whole
        return decode_keys(whole.ravel().tolist(), self.encoding).reshape(whole.shape)  # str where given as str

    def survive(self, lost: frozenset[Task], *, timeout: float | None = None) -> tuple[int, ...]:
        """Move the shards that lived on ``lost`` tasks to surviving devices and rebuild them there.

        Returns the indices of the moved shards (what a retried run reports).

        Raises:
            ShardLostError: a moved shard cannot be rebuilt (no lineage: see ``keep_source``).
        """
        moved = [s for s in self.plan.shards if s.task in lost]
        if not moved:
            return ()
        available = [Device.parse(d) for d in self.cluster.devices]  # the live tasks' devices
        targets = default_devices(available)
        if not targets:
            raise ShardLostError(f"{self!r}: no task survives to hold its shards", shards=tuple(s.index for s in moved))
        spare = iter(targets * len(moved))
        devices = [str(next(spare)) if s.task in lost else s.device for s in self.plan.shards]
        self.plan = make_plan(self.plan.rows, list(self.plan.sizes), devices, available)
        _store(self, [self.plan.shards[s.index] for s in moved], timeout)
        return tuple(s.index for s in moved)

    def rebuild(self, shards: Sequence[int] | None = None, *, timeout: float | None = None) -> None:
        """Make the given shards (all by default) again from how they were first made,
        e.g. after their worker restarted."""
        self.as_source()  # deleted data stays deleted: rebuilding it would re-allocate shards nothing frees
        chosen = [self.plan.shards[i] for i in (range(len(self.plan.shards)) if shards is None else shards)]
        _store(self, chosen, timeout)

    def delete(self, *, timeout: float | None = None) -> None:
        """Free the shards' memory on the workers.  Safe to call twice; the data is unusable after."""
        delete_all([self], timeout=timeout)

    def _destroy(self, shard: Shard) -> tf.Operation:
        with tf.device(shard.device):
            return destroy_shard(self.name, shard.index, tf.as_dtype(self.dtype))

    def _run(self, graph: tf.Graph, fetches: Any, feed: dict[Any, Any], timeout: float | None, tasks: Sequence[Task] = ()) -> Any:
        """Run ``graph`` on this data's tasks (and ``tasks``), then forget it."""
        self.cluster.check_open()
        tasks = tuple(dict.fromkeys([*self.plan.tasks, *tasks]))
        try:
            return self.cluster.run(graph, fetches, feed, tasks=tasks, timeout=effective_timeout(timeout))
        finally:
            self.cluster.forget(graph)

    def __enter__(self) -> Sharded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()


def gather_all(arrays: Sequence[Sharded], *, timeout: float | None = None, texts: bool = False) -> list[np.ndarray]:
    """Each of ``arrays`` (of one cluster and plan: a map's outputs) whole, fetched in one run; strings as bytes, or
    with ``texts`` as ``str``, each shard's fetched as one NUL-joined string (see ``strings.split_joined``)."""
    joined = [texts and a.dtype == object and len(a.shape) == 1 for a in arrays]
    graph = tf.Graph()
    with graph.as_default():
        parts: list[list[Any]] = [[] for _ in arrays]
        for a, join, fetched in zip(arrays, joined, parts, strict=True):
            for s in a.plan.shards:
                with tf.device(s.device):
                    v = a.read(s)
                    fetched.append((tf.strings.reduce_join(v, separator="\0"), tf.size(v)) if join else tf.identity(v))
    values = arrays[0]._run(graph, parts, {}, timeout) if arrays else []
    out = []
    for a, v, join in zip(arrays, values, joined, strict=True):
        if join:  # None: a NUL inside a string; fetched again, as bytes
            v = split_joined(v) or [np.array([b.decode("utf-8", "replace") for b in gather_all([a], timeout=timeout)[0]], object)]
        out.append(np.concatenate(v) if v else np.zeros(a.shape, a.dtype))
    return out


def delete_all(arrays: Sequence[Sharded], *, timeout: float | None = None) -> None:
    """Free the shards of ``arrays`` (of one cluster: a keyed result's keys and values) in one run, empty shards too
    (a keyed result keeps those).  Safe to call twice; the data is unusable after."""
    live = [a for a in arrays if not a._deleted and not a.cluster.closed]
    for a in arrays:
        a._deleted = True
    if not live:
        return
    graph = tf.Graph()
    with graph.as_default():
        ops = [a._destroy(shard) for a in live for shard in a.plan.shards]
    live[0]._run(graph, ops, {}, timeout, [task for a in live for task in a.plan.tasks])


class ShardedTuple(tuple):  # type: ignore[type-arg]
    """A tuple of ``Sharded`` arrays (a map returning a tuple, a filter of a tuple of inputs) that frees them all.

    It unpacks as any tuple; [`delete`][tfmapreduce.ShardedTuple.delete] or a ``with`` block frees every array in it
    (nested ones too) in one run.

    Examples:
        >>> x = np.arange(6.0)
        >>> with tmr.filter(lambda a, b: a > 2, (x, -x), cluster=cluster) as (a, b):
        ...     a.gather().tolist(), b.gather().tolist()
        ([3.0, 4.0, 5.0], [-3.0, -4.0, -5.0])
    """

    __slots__ = ()

    def __init__(self, arrays: Iterable[Any] = (), /) -> None:
        """The arrays, in order (the tuple itself is made by ``tuple.__new__``)."""
        super().__init__()

    def delete(self, *, timeout: float | None = None) -> None:
        """Free the memory of every array in it on the workers.  Safe to call twice."""
        delete_all(list({id(a): a for a in _arrays(self)}.values()), timeout=timeout)

    def __enter__(self) -> ShardedTuple:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()


def _arrays(value: Any) -> list[Sharded]:
    """The ``Sharded`` arrays in ``value``, nested in tuples, lists and dicts (``tf.nest`` would open a Sharded too)."""
    if isinstance(value, Sharded):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else ()
    return [a for item in items for a in _arrays(item)]


STORE_BYTES = 2**30
"""Host bytes one storing run ships at most: larger data is stored in several runs (gRPC requests stay under 2 GiB)."""


def _store(data: Sharded, shards: Sequence[Shard], timeout: float | None) -> None:
    """Build each shard with its builder, on its device, into its variable: one run per up to :data:`STORE_BYTES` shipped."""
    row_bytes = int(np.prod(data.shape[1:], dtype=np.int64)) * data.dtype.itemsize
    group: list[Shard] = []
    for shard in (s for s in shards if s.rows):  # 0 rows: nothing to store
        if group and (sum(s.rows for s in group) + shard.rows) * row_bytes > STORE_BYTES:
            _store_group(data, group, timeout)
            group = []
        group.append(shard)
    if group:
        _store_group(data, group, timeout)


def _store_group(data: Sharded, shards: Sequence[Shard], timeout: float | None) -> None:
    graph = tf.Graph()
    feed: dict[Any, Any] = {}
    with graph.as_default():
        ops = []
        for shard in shards:
            with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
                value = data._builders[shard.index](shard)
                if isinstance(value, tuple):  # (placeholder, host value) for shipped data
                    value, feed[value] = value[0], value[1]
                ops.append(tf.raw_ops.AssignVariableOp(resource=data._handle(shard), value=value))
        checks = size_checks(ops)
    data._run(graph, (ops, checks), feed, timeout)


def build_sharded(
    cluster: Cluster,
    plan: Plan,
    dtype: Any,
    shape: tuple[int, ...],
    builders: Sequence[Callable[[Shard], Any]],
    timeout: float | None,
    encoding: str | None = None,
) -> Sharded:
    name = f"tfmapreduce_{secrets.token_hex(8)}"
    data = Sharded(cluster, plan, np.dtype(dtype), tuple(shape), name, tuple(builders), encoding=encoding)
    _store(data, plan.shards, timeout)
    return data


def check_cluster(cluster: object) -> Cluster:
    if not isinstance(cluster, Cluster):
        raise TypeError(
            f"cluster must be a tfmapreduce Cluster (e.g. tmr.LocalCluster(2)), got {type(cluster).__name__} {cluster!r}"
        )
    cluster.check_open()
    return cluster


def scatter(x: Any, /, *, keep_source: bool = True, **options: Unpack[PlaceOptions]) -> Sharded:
    """An array sent to the cluster once, as a ``Sharded``: the array form of ``tmr.scatter``, whose docstring (in
    ``tfmapreduce._table.resident``) states the contract for both."""
    keep_source = flag(keep_source, "keep_source", "keep a reference to x to rebuild lost shards")
    settings = RunOptions.placing("scatter", dict(options))
    cluster = check_cluster(settings.cluster)
    if isinstance(x, Input):
        raise TypeError(f"x is already on the workers ({type(x).__name__}); use it directly, or gather() it first")
    strings = None if isinstance(x, (tf.Tensor, tf.Variable)) else as_bytes_array(x)
    if strings is not None and strings[0].ndim == 0:
        raise TypeError(f"x is one string ({x!r}); pass an array of strings, e.g. np.array([x])")
    array = host_array(x) if strings is None else strings[0]  # strings travel as bytes (str as UTF-8)
    encoding = "utf-8" if strings is not None and strings[1] else None
    plan = make_plan(
        len(array), settings.sizes, settings.devices, [Device.parse(d) for d in cluster.devices], fallback=settings.fallback
    )

    source: list[np.ndarray[Any, Any] | None] = [array]

    def shipped(shard: Shard) -> tuple[tf.Tensor, np.ndarray[Any, Any]]:
        if source[0] is None:
            raise ShardLostError(
                f"shard {shard.index} of scattered data is lost and scatter(..., keep_source=False) kept no copy to rebuild it; "
                "scatter the data again",
                shards=(shard.index,),
            )
        ph = tf.compat.v1.placeholder(tf.as_dtype(array.dtype), (shard.rows, *array.shape[1:]), name="x")
        return ph, source[0][shard.start : shard.stop]

    data = build_sharded(cluster, plan, array.dtype, array.shape, [shipped] * len(plan.shards), settings.timeout, encoding)
    if not keep_source:
        source[0] = None
    return data
