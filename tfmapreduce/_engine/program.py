"""A compiled run (:class:`Program`), how a kind of job builds one (:class:`Builder`), and one run's inputs (:class:`Call`)."""

from __future__ import annotations

import functools
import secrets
from collections.abc import Hashable, Sequence
from typing import Any, Protocol, TypeVar, cast

import attrs
import numpy as np
import tensorflow as tf

from .._base.device import Device
from .._base.plan import Plan, Shard
from .._base.task import Task
from .._io.mapped import size_checks
from .._io.results import read_returned, write_result
from .._io.shm import DECODABLE, MIN_BYTES, MappedBuffer, guard
from .._io.source import Batches, RowsFree, Sources, Streamed, implements
from .._io.variables import assign_named, assign_shard, named_per_run
from .._native.loader import has
from .._ops.models import Use
from . import cancel as _cancel
from .cache import Kept
from .call import Call
from .consts import ConstGraph
from .progress import Counters
from .route import visible


@attrs.frozen(eq=False)
class Feed:
    """A placeholder (or mapped buffer) a run fills with a shard of one of its inputs."""

    placeholder: Any
    source: int
    """The position of its source in the job's inputs."""
    shard: Shard
    staged: bool
    """Whether the shard's bytes go through shared memory (see ``_shm``)."""


@attrs.frozen(eq=False)
class Returned:
    """A result a same-host worker writes into a file the client maps, instead of sending it through gRPC."""

    path: tf.Tensor
    """The placeholder fed with the file's path for each run (``Staging.returned``)."""
    token: tf.Tensor
    """What the program fetches in its place: the result itself when small, else none of its rows (written to the file)."""
    dtype: np.dtype[Any]
    row: tuple[int, ...]
    """The shape of one row."""
    part: int | None = None
    """Where the file holds the parts of a result made on several devices (:meth:`Builder.fetched_parts`): this part's
    place among them; None: the file is this result's alone."""


@attrs.frozen(eq=False)
class Slot:
    """A variable a program stores a result's shard into, named by each run (:meth:`Builder.store`)."""

    placeholder: tf.Tensor | None
    """Fed with the variable's serialized handle (``_resident.handle``); None where the name is in the graph."""
    device: str
    suffix: str
    """The variable's container is the run's name followed by this."""
    index: int
    dtype: tf.DType


@attrs.frozen
class Stored:
    """What a run of a program with slots fetched, and the name it stored its result under (a new one each run)."""

    value: Any
    name: str


@attrs.frozen(eq=False)
class Program:
    """A compiled run: the graph, what to fetch and feed, the tasks it uses, and what the kind needs to finish."""

    graph: tf.Graph
    fetch: Any
    """What the kind fetches; a run with clocks or guards fetches ``(fetch, clocks, guards)``."""
    feeds: tuple[Feed, ...]
    broadcast: tuple[Any, ...]
    """The placeholders of the broadcast values, in order."""
    tasks: tuple[Task, ...]
    buffers: tuple[MappedBuffer, ...] = ()
    """The shared-memory buffers its graph maps (closed with the program)."""
    guards: tuple[Any, ...] = ()
    clocks: tuple[Any, ...] = ()
    clocked: tuple[Shard, ...] = ()
    """``sizes="auto"``: the shards whose clocks (start, end) are fetched, in order."""
    info: Any = None
    """What the kind keeps of the build for its finish (e.g. a keyed result's dtypes)."""
    returns: tuple[Returned, ...] = ()
    """The results written into files the client maps (see :meth:`Builder.returned`)."""
    counters: Counters | None = None
    """The rows its shards have mapped, counted in the run (see ``_progress``); None where it counts nothing."""
    slots: tuple[Slot, ...] = ()
    """Where it stores a result that stays on the devices (a run then gives a :class:`Stored`)."""
    named: str | None = None
    """The name of what it stores where the name is in the graph (a program for one run alone; a run gives a Stored)."""
    fed: tuple[tuple[str, Any], ...] = ()
    """The placeholders its kind fills for each run, by name (see :meth:`Builder.per_run` and :class:`Fed`)."""
    models: tuple[Use, ...] = ()
    """The variables its map functions read, by device: placed there before each run (``_io/models.place``)."""

    @property
    def staged(self) -> bool:
        """Whether a shard or result travels through shared memory: its runs need a Staging."""
        return bool(self.returns) or any(f.staged for f in self.feeds)

    @property
    def outlets(self) -> tuple[tf.Tensor, ...]:
        """The placeholders fed with the paths of the files its results are written into (one a result, or a result's
        parts), in order."""
        return tuple({id(r.path): r.path for r in self.returns}.values())

    def with_returns(self, value: Any, paths: Sequence[str]) -> Any:
        """``value`` (what a run fetched) with each returned result read from its file (``paths``: of the :attr:`outlets`)."""
        where = {id(p): path for p, path in zip(self.outlets, paths, strict=True)}
        written = {id(r.token): r for r in self.returns}
        files: dict[str, list[np.ndarray[Any, Any]]] = {}

        def read(tensor: Any, fetched: Any) -> Any:
            r = written.get(id(tensor))
            if r is None or len(fetched):  # fetched as it is: not returned, or small
                return fetched
            path = where[id(r.path)]
            if path not in files:
                files[path] = read_returned(path, r.dtype, r.row)
            parts = files[path]
            return parts[r.part or 0] if parts else fetched  # nothing written: an empty result, fetched

        return tf.nest.map_structure(read, self.fetch, value)

    def close(self) -> None:
        for buffer in self.buffers:
            buffer.close()


@attrs.define(eq=False)
class Builder:
    """The graph a kind builds, and what the driver needs of it: feeds, mapped buffers, guards and clocks.

    Inside ``with builder.graph.as_default()`` and a shard's device scope, :meth:`inputs` gives the
    shard's tensors (one per input); :meth:`mapped` is told the shard's partial once it is made.
    """

    srcs: Sources
    timed: bool
    """``sizes="auto"``: each shard's device reads ``tf.timestamp()`` before its map and once its partial is made."""
    call: Call | None = None
    graph: tf.Graph = attrs.field(factory=ConstGraph)
    broadcast: tuple[Any, ...] = ()
    feeds: list[Feed] = attrs.field(factory=list)
    buffers: list[MappedBuffer] = attrs.field(factory=list)
    guards: list[Any] = attrs.field(factory=list)
    clocks: list[Any] = attrs.field(factory=list)
    clocked: list[Shard] = attrs.field(factory=list)
    returns: list[Returned] = attrs.field(factory=list)
    counters: Counters | None = None
    """Where the run counts its shards' mapped rows (:meth:`batches` and :meth:`mapped`); None: it counts nothing."""
    rows_free: bool = False
    """The program is kept by its plan's shape (the driver's ``_shape``): host arrays' fed shards enter as placeholders
    of unknown rows (``Shipped.tensor``), so runs over arrays of other rows share it."""
    slots: list[Slot] = attrs.field(factory=list)
    named: str | None = None
    """The name of what a program for one run alone stores (on devices whose variables are named in the graph)."""
    fed: dict[str, Any] = attrs.field(factory=dict)
    """The placeholders the kind fills for each run (:meth:`per_run`), by name."""
    _open: dict[int, tuple[Any, list[Any], Any]] = attrs.field(
        factory=dict
    )  # shard → (its start clock, its mapped tensors, its first input)

    @classmethod
    def of(cls, call: Call, *, timed: bool, counters: Counters | None = None, rows_free: bool = False) -> Builder:
        builder = cls(call.srcs, timed, call, counters=counters, rows_free=rows_free)
        with builder.graph.as_default():
            builder.broadcast = tuple(
                tf.compat.v1.placeholder(tf.as_dtype(v.dtype), v.shape, name=f"broadcast{i}") for i, v in enumerate(call.values)
            )
        return builder

    def inputs(self, shard: Shard) -> list[tf.Tensor]:
        """The shard's data, one tensor per input, entering on the current device (nothing of it before its clock)."""
        start = tf.timestamp(name="clock_start") if self.timed else None
        tensors, in_memory = [], []
        for i, src in enumerate(self.srcs):
            free = self.rows_free and implements(src, RowsFree)
            data = cast(RowsFree, src).tensor(shard, rows_free=True) if free else src.tensor(shard)
            value = data.value
            if start is not None:
                with tf.control_dependencies([start]):
                    value = tf.identity(value)
            tensors.append(value)
            if data.placeholder is not None:
                self.feeds.append(Feed(data.placeholder, i, shard, data.staged))
            if isinstance(data.placeholder, MappedBuffer):
                self.buffers.append(data.placeholder)
            if data.mapped is not None:
                in_memory.append(data.mapped)
        self._open[shard.index] = (start, in_memory, tensors[0] if tensors else None)
        return tensors

    def mapped(self, shard: Shard, partial: Any) -> None:
        """The shard's partial is made: its mapped memory is guarded until then, and its clock stops."""
        start, in_memory, first = self._open.pop(shard.index)
        self.guards += [guard(m, partial) for m in in_memory]
        if start is not None:
            with tf.control_dependencies([t for t in tf.nest.flatten(partial) if isinstance(t, tf.Tensor | tf.Operation)]):
                self.clocks.append(tf.stack([start, tf.timestamp(name="clock_end")]))
            self.clocked.append(shard)
        if self.counters is not None:
            self.guards.append(self.counters.mapped(shard, partial, first))

    def batches(self, src: Streamed, shard: Shard, batch_rows: int | None) -> list[Batches]:
        """The pieces of a streamed shard (``src.batches``), each batch counted as it is read where the run counts."""
        pieces = list(src.batches(shard, batch_rows))
        counters = self.counters
        return pieces if counters is None else [counters.streamed(shard, p) for p in pieces]

    def per_run(self, name: str, dtype: tf.DType = tf.string) -> tf.Tensor:
        """A scalar the kind gives each run from its plan (its :meth:`Fed.fed`), so what differs between runs of one layout
        (a write's directory and attempt folder; a rows-free sort's sample sizes and shard starts) is not in the graph
        and the program is built once."""
        if name not in self.fed:
            self.fed[name] = tf.compat.v1.placeholder(dtype, (), name=name)
        return self.fed[name]

    def store(self, device: str, suffix: str, index: int, value: tf.Tensor) -> tf.Operation:
        """On ``device``: keep ``value`` as shard ``index`` of the container ``<the run's name><suffix>``, which a
        ``Sharded`` of that name reads.  On CPUs each run gets a new name (``_engine``), so the program is built once
        however many results it keeps; elsewhere the name is in the graph, and the kind builds a program per run
        (its ``variant`` is None where ``_resident.named_per_run`` is False)."""
        if not named_per_run([device]):
            if self.named is None:
                self.named = f"tfmapreduce_{secrets.token_hex(8)}"
            self.slots.append(Slot(None, device, suffix, index, value.dtype))
            with tf.device(device):
                return assign_shard(self.named + suffix, index, value)
        placeholder, stored = assign_named(device, value)
        self.slots.append(Slot(placeholder, device, suffix, index, value.dtype))
        return stored

    def fetched(self, value: Any, device: str) -> Any:
        """What to fetch for ``value``, a structure of results made on ``device``: each tensor itself, or where the
        device's task sees this client's files (and ``transfer`` is not ``"feed"``) and it holds at least a MiB of
        numbers, its rows written into a file the client maps after the run (several times faster than gRPC for
        large results: see the architecture guide) and no rows fetched: as raw bytes by the native ``TmrWriteResult``
        where every task has the kernels, else a serialized ``TensorProto``."""
        call = self.call
        if call is None or call.settings.transfer == "feed":
            return value
        if not visible(call.cluster, Device.parse(device).task, timeout=call.settings.seconds()):
            return value
        native = call.native
        with tf.device(device):
            return tf.nest.map_structure(lambda v: self._returned(v, native), value)

    def fetched_parts(self, values: Sequence[Any], devices: Sequence[str]) -> list[Any]:
        """What to fetch for a result made in parts that the client concatenates (``values[p]``, a structure of rows
        made on ``devices[p]``; every part alike): as :meth:`fetched` each, except that where every task has the
        native kernels and sees this client's files, each tensor's parts are written into one file, each at its
        rows' place, so that the client maps their concatenation (``_concat.concatenated`` copies nothing)."""
        call = self.call
        native = call.native if call is not None else None
        if (
            call is None
            or not has(native, "tmr_write_result")
            or call.settings.transfer == "feed"
            or len(values) < 2
            or not all(visible(call.cluster, Device.parse(d).task, timeout=call.settings.seconds()) for d in devices)
        ):
            return [self.fetched(v, d) for v, d in zip(values, devices, strict=True)]
        columns = [self._returned_parts(c, devices, native) for c in zip(*(tf.nest.flatten(v) for v in values), strict=True)]
        return [tf.nest.pack_sequence_as(v, list(out)) for v, out in zip(values, zip(*columns, strict=True), strict=True)]

    def _returned_parts(self, column: Sequence[tf.Tensor], devices: Sequence[str], native: Any) -> list[tf.Tensor]:
        """The tokens of one tensor's parts (``column[p]`` on ``devices[p]``) written into one file (or each returned
        alone, where the parts are not rows of numbers alike)."""
        first = column[0]
        row = first.shape[1:]
        dtype = np.dtype(first.dtype.as_numpy_dtype) if first.dtype != tf.string else None
        alike = all(c.dtype == first.dtype and c.shape[1:] == row for c in column)
        if dtype not in DECODABLE or first.shape.rank in (0, None) or not row.is_fully_defined() or not alike:
            tokens = []
            for c, d in zip(column, devices, strict=True):
                with tf.device(d):
                    tokens.append(self._returned(c, native))
            return tokens
        path = tf.compat.v1.placeholder(tf.string, (), name="result_path")
        rows = []
        for c, d in zip(column, devices, strict=True):
            with tf.device(d):
                rows.append(tf.shape(c, out_type=tf.int64)[0])
        tokens = []
        for p, (c, d) in enumerate(zip(column, devices, strict=True)):
            with tf.device(d), tf.name_scope(f"part{p}"):
                big = tf.add_n(rows) * (row.num_elements() * dtype.itemsize) >= MIN_BYTES
                write = functools.partial(_written, path, c, native, part=p, rows=rows)
                token = tf.cond(big, write, functools.partial(tf.identity, c))
            self.returns.append(Returned(path, token, dtype, tuple(row.as_list()), part=p))
            tokens.append(token)
        return tokens

    def _returned(self, value: tf.Tensor, native: Any | None) -> tf.Tensor:
        dtype = np.dtype(value.dtype.as_numpy_dtype) if value.dtype != tf.string else None
        row = value.shape[1:]
        if dtype not in DECODABLE or value.shape.rank == 0 or not row.is_fully_defined():
            return value
        known = value.shape.is_fully_defined()
        if known and value.shape.num_elements() * dtype.itemsize < MIN_BYTES:
            return value  # small, as its shape says: fetched as it is
        path = tf.compat.v1.placeholder(tf.string, (), name="result_path")
        write = functools.partial(_written, path, value, native)
        if known:  # large, as its shape says
            token = write()
        else:  # its size is known only in the run
            big = tf.size(value, tf.int64) * dtype.itemsize >= MIN_BYTES
            token = tf.cond(big, write, lambda: tf.identity(value))
        self.returns.append(Returned(path, token, dtype, tuple(row.as_list())))
        return token

    def program(self, fetch: Any, tasks: Sequence[Task], info: Any = None) -> Program:
        """The program of what was built; each op that computes on a CPU first checks that its run was not given up
        (:func:`~tfmapreduce._engine.cancel.guard`), where every task has the native kernels; once ``fetch`` is made, each file
        whose batches were mapped is checked for its size (:func:`~tfmapreduce._io.mapped.size_checks`)."""
        with self.graph.as_default():
            self.guards += size_checks(fetch)
        if self.call is not None and has(self.call.native, "tmr_check_cancelled"):
            _cancel.guard(self.graph, self.call.native)
        self.graph.finalize()
        return Program(
            self.graph,
            fetch,
            tuple(self.feeds),
            self.broadcast,
            tuple(tasks),
            tuple(self.buffers),
            tuple(self.guards),
            tuple(self.clocks),
            tuple(self.clocked),
            info,
            tuple(self.returns),
            self.counters,
            tuple(self.slots),
            self.named,
            tuple(self.fed.items()),
        )


P_contra = TypeVar("P_contra", contravariant=True)


class Fed(Protocol[P_contra]):
    """A kind whose programs have placeholders it fills for each run (made with :meth:`Builder.per_run`), from the
    run's plan: what differs between runs of one program is a value of the plan, never state of the kind, so one
    kind object serves any number of runs at once.  A program with such placeholders is not kept ready for the next
    run (the driver plans each run of it)."""

    def fed(self, plan: P_contra, name: str) -> Any:
        """The value of the placeholder ``name`` for a run of ``plan``."""


@attrs.frozen(eq=False)
class Ready:
    """A plain run's plans and program, kept for the next run of the same kind (see :func:`_ready_key`)."""

    shards: Plan
    plan: Any
    signature: tuple[Hashable, ...]
    kept: Kept

    def fits(self, srcs: Sources) -> bool:
        return self.kept.alive and self.signature == tuple(s.signature(self.shards) for s in srcs)


def _written(path: tf.Tensor, value: tf.Tensor, native: Any, **part: Any) -> tf.Tensor:
    """None of ``value``'s rows, once it is written into the file at ``path`` (see ``_shm.write_result``)."""
    with tf.control_dependencies([write_result(path, value, native, **part)]):
        return tf.identity(value[:0])
