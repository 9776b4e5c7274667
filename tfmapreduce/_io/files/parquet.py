"""Parquet files as a job reads them: their footers read on the client (schema, row groups, statistics), the row
groups that ``filters`` cannot exclude as the input splits, each split decoded on its task by the native
``TmrReadParquet`` inside the run, and the rows that fail ``filters`` dropped there.

The client reads only footers (with pyarrow, an optional dependency: ``pip install tfmapreduce[parquet]``); no row
passes through it while a split is read.  A column's *kind* is its logical type's name, as a table's schema names it
(``"int64"``, ``"float16"``, ``"string"``, ``"date"``, ``"timestamp[ms]"``...).
"""

from __future__ import annotations

import difflib
import functools
import itertools
import os
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from ..._native.loader import has, kernels
from .parquet_footers import ColumnStats, Footers, count, excludes, group_stats, leaf_starts
from .source import table_files

INSTALL = "pip install tfmapreduce[parquet]"

OPS = ("==", "!=", "<", "<=", ">", ">=", "in")
"""The comparisons a filter may make (pyarrow's ``filters=`` spelling)."""

_NUMBERS = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")
_ARROW_NAMES = {"halffloat": "float16", "float": "float32", "double": "float64", "date32[day]": "date"}


def pyarrow_parquet() -> Any:
    """``pyarrow.parquet``, or ImportError saying how to install it."""
    try:
        import pyarrow.parquet as pq  # type: ignore[import-untyped]  # optional; no stubs installed
    except ImportError:
        raise ImportError(f"Parquet needs pyarrow, which is not installed: {INSTALL}") from None
    return pq


@attrs.frozen
class RowGroup:
    """One row group of one file: an input split."""

    path: str
    index: int
    rows: int


@attrs.frozen
class Filter:
    """One condition of ``filters``: ``column op value`` (``value`` a tuple for ``in``), in the column's storage."""

    column: str
    op: str
    value: Any
    index: int
    """The column's index among the file's fields (``Footers.names``)."""
    kind: str


@attrs.frozen
class ParquetPlan:
    """What a scan of Parquet files reads (see [`plan_parquet`][tfmapreduce.plan_parquet]): a frozen value.

    Examples:
        >>> plan = tmr.plan_parquet(folder, columns=["x"], filters=[("x", ">", 10)])  # doctest: +SKIP
        >>> plan.read, plan.skipped  # doctest: +SKIP
        (1, 2)
    """

    files: tuple[str, ...]
    """Every file, in the order their rows come."""
    columns: tuple[str, ...]
    """The columns read, in order."""
    kinds: tuple[str, ...]
    """Each column's logical type (``"int64"``, ``"string"``, ``"date"``, ``"timestamp[us]"``, ...)."""
    indices: tuple[int, ...]
    """Each column's index among the file's leaf columns (as its footers and readers know it)."""
    row_groups: tuple[RowGroup, ...]
    """The row groups read (the input splits), in file and row group order."""
    skipped: int
    """The row groups left unread because their statistics exclude ``filters``."""
    filters: tuple[Filter, ...] = ()
    nullable: tuple[bool, ...] = ()
    """Whether each column may hold nulls (in any file's schema, and in a row group read where the footers count
    them): only those have a validity to read."""
    footers: Footers | None = attrs.field(default=None, eq=False)
    """The statistics of every column of the row groups read, from the footers the plan was made from (None in a plan
    made by hand): a lazy query's optimizer reads them, and adds filters to the plan, opening no file. Not part of the
    plan's equality."""

    @property
    def read(self) -> int:
        """How many row groups are read."""
        return len(self.row_groups)

    def __str__(self) -> str:
        return (
            f"parquet scan: {len(self.files)} files, columns {list(self.columns)}, {self.read} row groups read "
            f"({sum(g.rows for g in self.row_groups)} rows), {self.skipped} skipped by their statistics"
        )


def kind_of(name: str, arrow_type: Any) -> str:
    """The logical type a column of ``arrow_type`` is read as.

    Raises:
        TypeError: a type no table column holds (nested lists, structs, maps, decimals, binary, times), naming it.
    """
    text = str(arrow_type)
    if text.startswith("dictionary<values=string") or text in ("string", "large_string", "string_view"):
        return "string"
    if text.startswith(("decimal128(", "decimal256(")):
        return "float64"  # the stated rule: the nearest double to the decimal's value
    if text in _NUMBERS:
        return text
    if text in _ARROW_NAMES:
        return _ARROW_NAMES[text]
    if text.startswith("timestamp[") and getattr(arrow_type, "tz", None) is None:
        return f"timestamp[{arrow_type.unit}]"
    hint = "leave it out with columns="
    raise TypeError(
        f"scan_parquet: column {name!r} is {text}, which a table column cannot hold (it holds bool, ints, floats, "
        f"strings, decimals as float64, date32 and timestamps without a time zone); {hint}"
    )


def dtype_of(kind: str) -> tf.DType:
    """The TensorFlow dtype a column of ``kind`` is held in, in graphs."""
    if kind == "string":
        return tf.string
    if kind == "date":
        return tf.int32
    if kind.startswith("timestamp["):
        return tf.int64
    return tf.as_dtype(kind)


def _same(a: Any, b: Any) -> bool:
    """Whether two Arrow types read as one (a dictionary of strings and strings do)."""
    return str(a) == str(b) or {kind_of_or_none(a), kind_of_or_none(b)} == {"string"}


def kind_of_or_none(arrow_type: Any) -> str | None:
    try:
        return kind_of("", arrow_type)
    except TypeError:
        return None


def plan(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    columns: Sequence[str] | None = None,
    filters: Sequence[tuple[str, str, Any]] | None = None,
) -> ParquetPlan:
    """What a scan reads: every file's footer read here, checked against the first file's schema, and the row groups
    whose statistics do not exclude ``filters``.

    Raises:
        ImportError: no pyarrow.  FileNotFoundError: a path with no file.  KeyError: an unknown column (did you mean).
        TypeError: a column of a type tables do not hold.  ValueError: a file whose schema differs from the first's
        (naming the file and the column), a malformed filter.
    """
    pq = pyarrow_parquet()
    files = table_files(paths, ".parquet", "scan_parquet", "Parquet")
    metas = [pq.ParquetFile(f).metadata for f in files]
    schema = metas[0].schema.to_arrow_schema()
    names = tuple(schema.names)
    for f, meta in zip(files[1:], metas[1:], strict=True):
        other = meta.schema.to_arrow_schema()
        for name in dict.fromkeys([*names, *other.names]):
            if name not in names or name not in other.names or not _same(schema.field(name).type, other.field(name).type):
                first = schema.field(name).type if name in names else "no such column"
                theirs = other.field(name).type if name in other.names else "no such column"
                raise ValueError(
                    f"scan_parquet: {f} differs from {files[0]} in column {name!r} ({theirs} there, {first} in the first "
                    "file); every file of a scan must have the first one's columns and types"
                )
    chosen = names if columns is None else tuple(_check(c, names, "columns") for c in _listed(columns))
    kinds = tuple(kind_of(c, schema.field(c).type) for c in chosen)
    every = tuple(kind_of_or_none(schema.field(n).type) for n in names)
    types = [schema.field(n).type for n in names]
    leaves = leaf_starts(types)
    groups, stats = [], []
    for f, meta in zip(files, metas, strict=True):
        for g in range(meta.num_row_groups):
            if meta.row_group(g).num_rows:
                groups.append(RowGroup(f, g, meta.row_group(g).num_rows))
                stats.append(group_stats(meta.row_group(g), types, every, leaves))
    indices = tuple(leaves[names.index(c)] for c in chosen)
    schemas = [m.schema.to_arrow_schema() for m in metas]
    nullable = tuple(any(s.field(c).nullable for s in schemas) and nulls_in(stats, names.index(c)) for c in chosen)
    footers = Footers(names, every, leaves, tuple(stats))
    return narrowed(ParquetPlan(tuple(files), chosen, kinds, indices, tuple(groups), 0, (), nullable, footers), filters or ())


def narrowed(scan: ParquetPlan, filters: Sequence[tuple[str, str, Any]]) -> ParquetPlan:
    """``scan`` with ``filters`` added to its own: of the row groups it reads, those whose kept statistics do not
    exclude them (opening no file: ``scan.footers`` holds what ``plan`` read).

    Example: ``narrowed(plan(path), [("day", ">=", datetime.date(1994, 1, 1))])`` is ``plan(path, filters=...)``.

    Raises:
        ValueError: a scan without footers (made by hand: plan it with ``tmr.plan_parquet``), a malformed filter.
        KeyError: an unknown column.
    """
    footers = scan.footers
    if footers is None:
        raise ValueError("scan_parquet: this plan keeps no footers' statistics; make it with tmr.plan_parquet(paths)")
    added = tuple(_condition(f, footers.names, footers.kinds) for f in filters)
    if not added:
        return scan
    kept = [
        (g, s)
        for g, s in zip(scan.row_groups, footers.groups, strict=True)
        if not any(excludes(s[c.index], g.rows, c.op, c.value) for c in added)
    ]
    stats = [s for _, s in kept]
    return attrs.evolve(
        scan,
        nullable=tuple(n and nulls_in(stats, footers.names.index(c)) for c, n in zip(scan.columns, scan.nullable, strict=True)),
        row_groups=tuple(g for g, _ in kept),
        skipped=scan.skipped + len(scan.row_groups) - len(kept),
        filters=(*scan.filters, *added),
        footers=attrs.evolve(footers, groups=tuple(stats)),
    )


def nulls_in(groups: Sequence[tuple[ColumnStats, ...]], column: int) -> bool:
    """Whether column ``column`` (among the files' fields) may hold a null in the row groups of statistics ``groups``:
    a footer counts one, or does not say."""
    return any((g[column].nulls is None) or g[column].nulls != 0 for g in groups)


def _listed(columns: Any) -> list[Any]:
    return [columns] if isinstance(columns, str) else list(columns)


def _check(name: object, names: tuple[str, ...], argument: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"scan_parquet: {argument} must name columns (str), got {type(name).__name__} {name!r}")
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise KeyError(f"scan_parquet: {argument}: no column {name!r} in the files; {hint}their columns are {list(names)}")
    return name


def _storage(value: Any, kind: str) -> Any:
    """A filter's value as the column's storage holds it (a date as int32 days, a timestamp as int64 of its unit)."""
    if kind == "date":
        return count(value, "D")
    if kind.startswith("timestamp["):
        return count(value, kind[len("timestamp[") : -1])
    if kind == "string":
        if not isinstance(value, str):
            raise TypeError(f"scan_parquet: filters compare a string column with a str, got {type(value).__name__} {value!r}")
        return value
    return value


def _condition(item: Any, names: tuple[str, ...], kinds: tuple[str | None, ...]) -> Filter:
    if not isinstance(item, (tuple, list)) or len(item) != 3:
        raise ValueError(f"scan_parquet: each filter is a (column, op, value) tuple, e.g. ('x', '>', 3); got {item!r}")
    column, op, value = item
    column = _check(column, names, "filters")
    if op not in OPS:
        raise ValueError(f"scan_parquet: a filter's op is one of {list(OPS)}, got {op!r} (in {item!r})")
    kind = kinds[names.index(column)]
    if kind is None:
        raise TypeError(
            f"scan_parquet: filters: column {column!r} is of a type a table column cannot hold (nested, binary, "
            "times...); filter on another column, or on the table after reading"
        )
    if op == "in":
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise ValueError(f"scan_parquet: 'in' takes a list of values, e.g. ('x', 'in', [1, 2]); got {value!r}")
        return Filter(column, op, tuple(_storage(v, kind) for v in value), names.index(column), kind)
    return Filter(column, op, _storage(value, kind), names.index(column), kind)


def fed(scan: ParquetPlan) -> list[np.ndarray[Any, Any]]:
    """The run's inputs (broadcast, not graph constants: a new value compiles nothing): each non-string filter's value
    (an array for ``in``), in filter order, as ``tf.constant`` makes it the column's dtype. Strings stay in the graph."""
    return [tf.constant(c.value, dtype_of(c.kind)).numpy() for c in scan.filters if c.kind != "string"]


def row_filter(scan: ParquetPlan) -> Callable[..., tuple[tf.Tensor, ...]]:
    """The map function of a scan's run: ``fn(*columns, *tested, *fed(scan))`` takes what :func:`read_split` yields
    and the filters' values, and returns the columns' rows that pass every filter; one function object per filter
    shape (ops, columns, dtypes, string values), so a scan with other values finds its compiled program.

    Example: ``filters=[("day", ">=", "1994-01-01")]`` on columns ``("k",)`` gives ``fn(k, day, day_valid, value)``
    returning ``(k[(day >= value) & day_valid],)``.
    """
    tested = list(dict.fromkeys(c.column for c in scan.filters))
    tests = tuple((tested.index(c.column), c.op, c.kind, c.value if c.kind == "string" else None) for c in scan.filters)
    return _row_filter(len(scan.columns) + sum(scan.nullable), len(tested), tests)


@functools.lru_cache(maxsize=64)
def _row_filter(outputs: int, tested: int, tests: tuple[tuple[int, str, str, Any], ...]) -> Callable[..., Any]:
    """The map function of one filter shape: ``outputs`` tensors kept, ``tested`` columns' values then validity."""
    if not tests:
        return _all_rows

    def kept(*tensors: tf.Tensor) -> tuple[tf.Tensor, ...]:
        out, values = tensors[:outputs], tensors[outputs : outputs + tested]
        valid, given = tensors[outputs + tested : outputs + 2 * tested], iter(tensors[outputs + 2 * tested :])
        passes = []
        for at, op, kind, strings in tests:
            v = tf.constant(strings, tf.string) if kind == "string" else tf.cast(next(given), values[at].dtype)
            passes.append(valid[at] & _passes(op, values[at], v))
        keep = tf.reduce_all(tf.stack(passes), axis=0)
        return tuple(tf.boolean_mask(t, keep) for t in out)

    return kept


def _all_rows(*columns: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """The map function of a scan without filters: the decoded columns as they are."""
    return columns


def _passes(op: str, values: tf.Tensor, v: tf.Tensor) -> tf.Tensor:
    """In the graph: which of ``values`` pass ``op`` with ``v`` (a 1-D tensor of the values for ``in``)."""
    if op == "in":
        return tf.reduce_any(tf.equal(tf.expand_dims(values, 1), tf.reshape(v, [1, -1])), axis=1)
    compare = {"==": tf.equal, "!=": tf.not_equal, "<": tf.less, "<=": tf.less_equal, ">": tf.greater, ">=": tf.greater_equal}
    return compare[op](values, v)


def native_reader() -> Any:
    """The native ops, or RuntimeError saying why Parquet cannot be read (the parquet family did not build here)."""
    native = kernels()
    if not has(native, "tmr_read_parquet"):
        raise RuntimeError(
            "scan_parquet: the native Parquet kernels are not available here (they need pyarrow and a C++ compiler, "
            f"and TFMAPREDUCE_NATIVE must not be 0; {INSTALL}, and see the warning that named why they did not build)"
        )
    return native


def split_ranges(scan: ParquetPlan, splits: int) -> list[tuple[int, int]]:
    """``splits`` contiguous ranges of the scan's row groups (``[start, stop)``), of about equal rows, none empty.

    Example:
        >>> groups = tuple(RowGroup("f", i, n) for i, n in enumerate([10, 10, 10, 30]))
        >>> split_ranges(ParquetPlan(("f",), (), (), (), groups, 0), 2)
        [(0, 3), (3, 4)]
    """
    count = len(scan.row_groups)
    splits = max(1, min(splits, count))
    ends = np.cumsum([g.rows for g in scan.row_groups])
    cuts = np.searchsorted(ends, ends[-1] * np.arange(1, splits) / splits, side="left") + 1
    bounds = sorted({0, count, *(int(min(max(c, 1), count - 1)) for c in cuts)})
    return list(itertools.pairwise(bounds))


def read_split(scan: ParquetPlan, groups: tuple[int, int]) -> tf.data.Dataset:
    """In the graph being built, on the split's task: the scan's row groups ``groups`` (a ``[start, stop)`` range), a
    batch each, as a tuple of each column's values, then the validity of each nullable column, then the values and
    then the validity of each column the filters test (every row: :func:`row_filter` drops those that fail them; the
    filters' values are not read here, so a scan that differs only in them reads its splits with the same graph)."""
    native = native_reader()
    chosen = scan.row_groups[groups[0] : groups[1]]
    field = dict(zip(scan.columns, zip(scan.indices, scan.kinds, strict=True), strict=True))
    for c in scan.filters:  # (a plan with filters has footers: ``narrowed``)
        field.setdefault(c.column, (scan.footers.leaves[c.index] if scan.footers else c.index, c.kind))
    names = list(field)
    tested = list(dict.fromkeys(c.column for c in scan.filters))

    def decode(path: tf.Tensor, index: tf.Tensor) -> tuple[tf.Tensor, ...]:
        out = native.tmr_read_parquet(
            path,
            tf.reshape(index, [1]),
            out_types=[dtype_of(field[c][1]) for c in names],
            columns=[field[c][0] for c in names],
            n=len(names),
        )
        values, valid = dict(zip(names, out[0], strict=True)), dict(zip(names, out[1], strict=True))
        nullable = [c for c, n in zip(scan.columns, scan.nullable, strict=True) if n]
        return (
            *(values[c] for c in scan.columns),
            *(valid[c] for c in nullable),
            *(values[c] for c in tested),
            *(valid[c] for c in tested),
        )

    paths = tf.constant([g.path for g in chosen])
    indices = tf.constant([g.index for g in chosen], tf.int64)
    return tf.data.Dataset.from_tensor_slices((paths, indices)).map(
        tf.autograph.experimental.do_not_convert(decode)
    )  # plain ops: nothing to convert
