"""Two inputs of different lengths as one: a join's left and right rows, stacked into the rows of one plan.

A job over two sides plans ``len(left) + len(right)`` rows, left first, and every column of either side
is a :class:`Side`: a source of that many rows holding only its side's range.  A shard then maps the part
of each side it covers (a shard astride the boundary gets both); the other side's columns are empty there.
Host sides are partitioned and placed as any input; resident sides keep their shards where they live (the
plan is the left side's shards followed by the right side's).
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Sequence
from typing import Any, cast

import attrs
import numpy as np
import tensorflow as tf

from ..._base.errors import InputError, JobError, TfMapReduceError
from ..._base.plan import Plan, Shard
from ..._base.task import Task
from ..._cluster.cluster import Cluster
from ..._io.files.csv import Csv, CsvTable, first_row, is_integer
from ..._io.files.files import Files
from ..._io.files.readers import Layout
from ..._io.files.source import FileSource
from ..._io.resident_source import rows_free
from ..._io.shm import Stageable
from ..._io.source import Input, RowsFree, ShardTensor, Source, Sources, implements


@attrs.frozen
class Stack:
    """Where each side's rows are in the stacked rows, and the stacked plan of resident sides."""

    rows: tuple[int, int]
    """Rows of the left and of the right side."""
    plans: tuple[Plan, Plan] | None = None
    """Where resident sides live (both), or None for host sides (planned by the run)."""

    @property
    def total(self) -> int:
        return self.rows[0] + self.rows[1]

    def offset(self, side: int) -> int:
        """The first stacked row of ``side`` (0: left, 1: right)."""
        return 0 if side == 0 else self.rows[0]

    @property
    def plan(self) -> Plan | None:
        """The stacked plan of resident sides: the left side's shards, then the right side's (indices and rows moved on)."""
        if self.plans is None:
            return None
        left, right = self.plans
        n = len(left.shards)
        moved = [attrs.evolve(s, index=s.index + n, start=s.start + left.rows, stop=s.stop + left.rows) for s in right.shards]
        return Plan(self.total, (*left.shards, *moved))


@attrs.frozen(eq=False)
class Side:
    """One column of one side of a :class:`Stack`, as a source of all the stacked rows (see the module's notes)."""

    inner: Source
    side: int
    stack: Stack

    @property
    def rows(self) -> int:
        return self.stack.total

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.inner.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.stack.total, *self.inner.shape[1:])

    @property
    def home(self) -> Cluster | None:
        return self.inner.home

    @property
    def home_plan(self) -> Plan | None:
        return self.stack.plan

    def part(self, shard: Shard) -> Shard | None:
        """The shard of the inner source that ``shard`` of the stacked plan covers; None where it holds none of this side."""
        if self.stack.plans is not None:
            own = self.stack.plans[self.side]
            at = shard.index - (len(self.stack.plans[0].shards) if self.side else 0)
            return own.shards[at] if 0 <= at < len(own.shards) else None
        cut = self._cut(shard)
        return cut if cut.rows else None

    def _cut(self, shard: Shard) -> Shard:
        """``shard`` of the stacked host rows cut to this side's rows (numbered from its first row; maybe none)."""
        lo = self.stack.offset(self.side)
        return attrs.evolve(
            shard, start=min(max(shard.start - lo, 0), self.inner.rows), stop=min(max(shard.stop - lo, 0), self.inner.rows)
        )

    def inner_plan(self, plan: Plan) -> Plan:
        """The inner source's plan: its own (resident), or each stacked shard cut to this side's rows."""
        if self.stack.plans is not None:
            return self.stack.plans[self.side]
        return Plan(self.inner.rows, tuple(self._cut(s) for s in plan.shards))

    def signature(self, plan: Plan) -> Hashable:
        """Which shards of ``plan`` hold rows of this side (not how many: a program kept by the plan's shape serves
        sides of other rows), and the inner source's signature."""
        held = tuple(self.part(s) is not None for s in plan.shards)
        return ("side", self.side, held, self.inner.signature(self.inner_plan(plan)))

    def fed_only(self, plan: Plan) -> bool:
        """Whether the inner source's graph over its shards can hold none of their row counts (``rows_free``)."""
        return rows_free(self.inner, self.inner_plan(plan))

    def tensor(self, shard: Shard, *, rows_free: bool = False) -> ShardTensor:
        part = self.part(shard)
        if part is None:
            dtype = tf.string if self.dtype == object else tf.as_dtype(self.dtype)
            return ShardTensor(tf.zeros((0, *self.inner.shape[1:]), dtype))
        if rows_free and implements(self.inner, RowsFree):
            return cast(RowsFree, self.inner).tensor(part, rows_free=True)
        return self.inner.tensor(part)

    def feed(self, shard: Shard) -> np.ndarray[Any, Any] | bytes | None:
        part = self.part(shard)
        return None if part is None else self.inner.feed(part)

    def bytes_sent(self, shard: Shard) -> int:
        part = self.part(shard)
        return 0 if part is None else self.inner.bytes_sent(part)

    def stageable(self, shard: Shard, min_bytes: int) -> bool:
        part = self.part(shard)
        return part is not None and implements(self.inner, Stageable) and bool(self.inner.stageable(part, min_bytes))  # type: ignore[attr-defined]

    def input_error(self, error: JobError, plan: Plan, cluster: Cluster) -> TfMapReduceError | None:
        return self.inner.input_error(error, self.inner_plan(plan), cluster)

    def survive(self, lost: frozenset[Task]) -> None:
        self.inner.survive(lost)


def stacked(left: Sources, right: Sources) -> Sources:
    """The columns of both sides as :class:`Side` sources of one stacked plan (left columns first).

    Raises:
        InputError: one side is resident and the other is not (the caller scatters the host side first).
    """
    plans = [srcs[0].home_plan for srcs in (left, right)]
    if (plans[0] is None) != (plans[1] is None):
        raise InputError("both sides of a join must be host data or both resident")
    stack = Stack((left[0].rows, right[0].rows), None if plans[0] is None else (plans[0], plans[1]))  # type: ignore[arg-type]
    return Sources([Side(s, 0, stack) for s in left] + [Side(s, 1, stack) for s in right])


@attrs.frozen
class JoinTable(CsvTable):
    """CSV files read as a join side: the first column read is the key (int64 or string), the others its values, each
    decoded in its own dtype (numbers as ``dtypes=`` gives them, ``str`` columns as strings)."""

    def layout(self, names: Sequence[str], path: str) -> Layout:
        selected = self.selected(names, path)
        dtypes = self.column_dtypes(len(names), path, names)
        key = np.dtype(np.int64) if self.key_dtype == "int64" else np.dtype(object)
        return Layout(None, 0, key, (), len(names), tuple(selected), tuple(d.str for d in dtypes))

    def field_dtypes(self, layout: Layout) -> list[tf.DType]:
        kinds = self.kinds(layout)
        result = [tf.string] * layout.fields
        for i in layout.columns[1:]:
            result[i] = tf.string if kinds[i].kind == "U" else tf.as_dtype(kinds[i])
        result[layout.columns[0]] = tf.int64 if self.key_dtype == "int64" else tf.string
        return result

    def decode(self, records: tf.Tensor, layout: Layout, batch: int = 0) -> Any:
        return self.assemble(self.fields(records, layout, batch), layout)

    def assemble(self, columns: list[tf.Tensor], layout: Layout) -> Any:
        """A batch as its columns, each 1-D in its own dtype (as the stock and the native split reader both give it)."""
        return tuple(columns)

    def empty(self, layout: Layout) -> tuple[tf.Tensor, ...]:
        dtypes = self.field_dtypes(layout)
        return tuple(tf.zeros([0], dtypes[i]) for i in layout.columns)


@attrs.define(eq=False)
class FileTable:
    """Files read as a side's columns: each shard's files read whole on its task, once for all their columns."""

    source: FileSource
    dtypes: tuple[np.dtype[Any], ...]
    """Each column's dtype (object for strings)."""
    shapes: tuple[tuple[int, ...], ...]
    """Each column's row shape."""
    _read: weakref.WeakKeyDictionary[tf.Graph, dict[Hashable, list[tf.Tensor]]] = attrs.field(factory=weakref.WeakKeyDictionary)

    def columns(self, shard: Shard) -> list[tf.Tensor]:
        """Inside a job's graph and the shard's device scope: the shard's columns, read whole (once per graph)."""
        done = self._read.setdefault(tf.compat.v1.get_default_graph(), {})
        key = (shard.index, shard.start, shard.stop, shard.device)
        if key not in done:
            done[key] = read_whole(self.source, shard)
        return done[key]


def read_whole(src: FileSource, shard: Shard) -> list[tf.Tensor]:
    """Every batch of ``shard`` of the files, collected per column (one concatenation, not one per batch)."""
    empty = list(tf.nest.flatten(src.empty_batch()))
    parts: list[list[tf.Tensor]] = []
    for j, piece in enumerate(src.batches(shard, None)):
        with tf.name_scope(f"piece{j}"):
            arrays = tuple(
                tf.TensorArray(e.dtype, size=0, dynamic_size=True, infer_shape=False, element_shape=[None, *e.shape[1:]]).write(
                    0, e
                )
                for e in empty
            )

            def add(state: tuple[Any, tf.Tensor], batch: Any) -> tuple[Any, tf.Tensor]:
                collected, i = state
                leaves = tf.nest.flatten(batch)
                return tuple(a.write(i, leaf) for a, leaf in zip(collected, leaves, strict=True)), i + 1

            collected, _ = piece.dataset.reduce((arrays, tf.constant(1)), add)
            parts.append([a.concat() for a in collected])
    if not parts:
        return empty
    if len(parts) == 1:
        return parts[0]
    return [tf.concat(list(column), 0) for column in zip(*parts, strict=True)]


@attrs.frozen(eq=False)
class FileColumn:
    """Column ``column`` of a :class:`FileTable`, as a source: read on the task of the shard that maps it."""

    table: FileTable
    column: int

    @property
    def rows(self) -> int:
        """Rows (``.npy``, raw) or bytes (CSV) of the files."""
        return self.table.source.rows

    @property
    def unit(self) -> str:
        return self.table.source.reader.unit

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.table.dtypes[self.column]

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.rows, *self.table.shapes[self.column])

    @property
    def home(self) -> Cluster | None:
        return None

    @property
    def home_plan(self) -> Plan | None:
        return None

    def signature(self, plan: Plan) -> Hashable:
        return ("file column", self.column, self.table.source.signature(plan))

    def tensor(self, shard: Shard) -> ShardTensor:
        return ShardTensor(self.table.columns(shard)[self.column])

    def feed(self, shard: Shard) -> None:
        return None

    def bytes_sent(self, shard: Shard) -> int:
        return 0

    def input_error(self, error: JobError, plan: Plan, cluster: Cluster) -> TfMapReduceError | None:
        return self.table.source.input_error(error, plan, cluster)

    def survive(self, lost: frozenset[Task]) -> None:
        self.table.source.survive(lost)


class FileInput(Input):
    """A :class:`FileColumn` where a job's data is taken (``keyed_sources``)."""

    def __init__(self, column: FileColumn) -> None:
        self.column = column

    def as_source(self) -> Source:
        return self.column


def file_columns(files: Files, argument: str, *, native: bool = False) -> list[FileColumn]:
    """A file source given in a join side as its columns: a ``read_csv`` table's (its first column the key, the rest
    values), or the one column of ``.npy`` or raw files (one of a ``(keys, values)`` pair).  ``native``: read with the
    reader's native variant (where the client and every task have the kernels).

    Raises:
        TypeError: pinned files, or files of another format.
        InputError: the CSV key column is a float column.
    """
    if files.pinned:
        raise TypeError(
            f"{argument} reads files pinned to tasks, which a join cannot take (its shards are planned over both sides); "
            "list the paths unpinned (on a file system every task sees), or persist() them first"
        )
    reader = files.reader
    if isinstance(reader, Csv) and not isinstance(reader, CsvTable):
        return _csv_columns(files, reader, argument, native)
    if reader.unit != "rows":
        raise TypeError(
            f"{argument} reads {reader.name} files, which a join takes only as a CSV table: "
            "tmr.read_csv(paths, columns=['key', 'value', ...]) (the first column is the key), or .npy/raw files of "
            "keys and of values in a pair: (tmr.read_npy(keys), tmr.read_npy(values))"
        )
    src = attrs.evolve(files, reader=reader.with_kernels() if native else reader).as_source()
    table = FileTable(src, (src.dtype,), (src.shape[1:],))
    return [FileColumn(table, 0)]


def _csv_columns(files: Files, reader: Csv, argument: str, native: bool) -> list[FileColumn]:
    """A CSV table's columns: the key's dtype as ``dtypes=`` gives it, else int64 where the first data line holds an
    integer there, a string otherwise; each value column in its own dtype."""
    provisional = JoinTable(reader.columns, reader.dtypes, reader.header, reader.delimiter, "string", False)
    entries = [e for e in attrs.evolve(files, reader=provisional).as_source().entries if e.layout is not None and e.layout.fields]
    key_dtype = "string"
    if entries:
        layout = entries[0].layout
        assert layout is not None
        key = layout.columns[0]
        kinds = provisional.kinds(layout)
        named = (
            reader.dtypes
            if isinstance(reader.dtypes, tuple) and reader.dtypes and not isinstance(reader.dtypes[0], str)
            else None
        )
        given: np.dtype[Any] | None = None
        if isinstance(reader.dtypes, tuple) and named is None:
            given = kinds[key]  # one dtype per field
        elif named is not None:
            names = first_row(entries[0].path, reader.delimiter, False) or []
            if key < len(names) and names[key].strip() in dict(named):
                given = kinds[key]
        if given is not None and given.kind == "f":
            raise InputError(
                f"{argument}: the key column (the first of columns=) is a {given} column (dtypes=); keys must be integers "
                "or strings (floats have no exact equality to join on): give it int64 or str in dtypes="
            )
        if given is not None:
            key_dtype = "int64" if given.kind in "iu" else "string"
        else:
            row = first_row(entries[0].path, reader.delimiter, reader.header)
            key_dtype = "int64" if row is not None and key < len(row) and is_integer(row[key]) else "string"
    table = JoinTable(reader.columns, reader.dtypes, reader.header, reader.delimiter, key_dtype, False, native=native)
    src = attrs.evolve(files, reader=table).as_source()
    layout = src.layout
    kinds = table.kinds(layout) if layout.fields else []
    dtypes = [np.dtype(np.int64) if key_dtype == "int64" else np.dtype(object)]
    dtypes += [np.dtype(object) if kinds[i].kind == "U" else kinds[i] for i in layout.columns[1:]]
    shared = FileTable(src, tuple(dtypes), tuple(() for _ in dtypes))
    return [FileColumn(shared, j) for j in range(len(dtypes))]
