"""File sources: data that stays in its files, split into input splits and read by the tasks that map it.

``read_npy``, ``read_text``, ``read_csv``, ``read_tfrecord`` and ``read_raw``
describe files without reading them; the :class:`Files` value they return is
accepted wherever an array is.  Each run looks at the files as they are when
it starts (one ``stat`` per file, and the ``.npy`` headers), plans the input
splits, and each task streams its own splits through the map in batches.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from ..._base.device import Device
from ..._base.errors import InputError, JobError
from ..._base.partition import SizesLike
from ..._base.plan import Plan, Shard, make_plan
from ..._base.task import Task
from ..._cluster.cluster import Cluster
from ..._options import PlaceOptions, RunOptions
from ..resident import Sharded, build_sharded, check_cluster
from ..source import Input
from .csv import Csv, CsvTable, first_row, is_integer, is_number
from .readers import Layout, Reader, size_of
from .source import FileEntry, FileSource, count_rows, device_of, match, short


@attrs.frozen(eq=False)
class Files(Input):
    """Files described, not read: a source accepted wherever an array is, read by the tasks that map it.

    Made by [`read_npy`][tfmapreduce.read_npy], [`read_text`][tfmapreduce.read_text], [`read_csv`][tfmapreduce.read_csv],
    [`read_tfrecord`][tfmapreduce.read_tfrecord] and [`read_raw`][tfmapreduce.read_raw].  Every run looks at the files
    as they are when it starts; [`explain`][tfmapreduce.Files.explain] shows the input splits,
    [`persist`][tfmapreduce.Files.persist] reads them into resident ``Sharded`` data on the workers.

    Examples:
        >>> import tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> np.save(os.path.join(folder, "a.npy"), np.arange(6.0))
        >>> np.save(os.path.join(folder, "b.npy"), np.arange(6.0, 10.0))
        >>> data = tmr.read_npy(os.path.join(folder, "*.npy"))
        >>> float(tmr.mean(data, cluster=cluster))
        4.5
    """

    reader: Reader
    """The file format."""
    paths: tuple[str, ...]
    """Paths and globs read by any task (empty when pinned)."""
    pinned: tuple[tuple[Task, tuple[str, ...]], ...] = ()
    """``{task: [paths]}`` as pairs: each task reads only its own files."""
    encoding: str | None = None
    """Text and CSV: the codec string keys (and strings) of a keyed or group result are decoded with; None: kept as bytes."""
    described: tuple[tuple[str, int, Layout], ...] = ()
    """Pinned files whose size and layout their writer told (``write_npy`` parts on the tasks' own disks): not looked
    at on the client."""
    literal: bool = False
    """The paths name files exactly (a writer's parts): a ``[``, ``*`` or ``?`` in them is no pattern."""

    def __repr__(self) -> str:
        where = ", ".join(f"{t}: {list(p)}" for t, p in self.pinned) if self.pinned else list(self.paths)
        return f"{self.reader.name}({where})"

    def as_source(self) -> FileSource:
        """The files as they are now: each matched, stat'ed and (``.npy``) its header read, on the client.

        Raises:
            InputError: a pattern matches nothing (unpinned, or pinned for a row format), a file is
                not of the format, or the files disagree on dtype or row shape.
        """
        reader = self.reader
        groups: Sequence[tuple[Task | None, tuple[str, ...]]] = self.pinned or ((None, self.paths),)
        described = {path: (size, layout) for path, size, layout in self.described}
        entries: list[FileEntry] = []
        first = 0
        for i, (task, patterns) in enumerate(groups):
            pin = i if task is not None else None
            for pattern in patterns:
                if pattern in described:  # a part its writer described: it may be on its task's disk alone
                    size, layout = described[pattern]
                    units = layout.rows if layout.rows is not None else size
                    entries.append(FileEntry(pattern, size, 0, layout, first, task, units, pin))
                    first += units
                    continue
                matched = match(pattern, reader, self.literal)
                if not matched:
                    if task is None:
                        raise InputError(
                            f"{reader.name}: {pattern!r} matches no file on the client (working directory {os.getcwd()}); "
                            "fix the path, or pin files that only a worker can see with {task: [paths]}"
                        )
                    if reader.unit == "rows":
                        raise InputError(
                            f"{reader.name}: {pattern!r} (pinned to {task}) matches no file on the client; {reader.name} needs each "
                            "file's size (and .npy header) on the client: make the files visible to it (a shared file system)"
                        )
                    seen = glob.escape(os.path.abspath(pattern)) if self.literal else os.path.abspath(pattern)
                    entries.append(FileEntry(seen, 0, 0, None, first, task, 0, pin))  # matched on its task
                    continue
                for path in matched:
                    try:
                        size, mtime = size_of(path)
                    except OSError as e:
                        raise InputError(
                            f"{reader.name}: {path} cannot be stat'ed on the client ({e.strerror}); check it"
                        ) from None
                    layout = reader.describe(path, size)
                    units = layout.rows if layout.rows is not None else size
                    entries.append(FileEntry(path, size, mtime, layout, first, task, units, pin))
                    first += units
        layout = self._common_layout(entries)
        plan = None
        if self.pinned:
            shards, start = [], 0
            for i, (task, _) in enumerate(self.pinned):
                units = sum(e.units for e in entries if e.pin == i)
                shards.append(Shard(i, start, start + units, device_of(task)))
                start += units
            plan = Plan(start, tuple(shards))
        return FileSource(self.reader, tuple(entries), layout, plan)

    def _common_layout(self, entries: Sequence[FileEntry]) -> Layout:
        reader = self.reader
        known = [
            e
            for e in entries
            if e.layout is not None and (reader.unit == "rows" or not isinstance(reader, Csv) or e.layout.fields)
        ]
        for e in known[1:]:
            a, b = known[0].layout, e.layout
            assert a is not None
            assert b is not None
            if (a.dtype, a.row_shape, a.fields) != (b.dtype, b.row_shape, b.fields):
                raise InputError(
                    f"{reader.name}: {short(e.path)} holds {b.dtype} rows of shape {b.row_shape}"
                    + (f" ({b.fields} fields)" if b.fields else "")
                    + f" but {short(known[0].path)} holds {a.dtype} rows of shape {a.row_shape}"
                    + (f" ({a.fields} fields)" if a.fields else "")
                    + "; every file must hold the same dtype and row shape: convert or leave out the odd one"
                )
        if known:
            first = known[0].layout
            assert first is not None
            return first
        if isinstance(reader, Csv):
            if isinstance(reader.dtypes, str) or not all(isinstance(c, int) for c in reader.columns or ()):
                raise InputError(
                    "read_csv: no CSV file with a first line is visible on the client to learn the columns from; "
                    "pass dtypes= as a list (one dtype per field) and columns= as indices"
                )
            return reader.layout([str(i) for i in range(len(reader.dtypes))], "")
        if reader.unit == "rows":  # only empty .npy files were... never: every row-format file has a layout
            raise InputError(f"{reader.name}: no file to read")
        return reader.describe("", 0)

    def explain(self, **options: Any) -> str:
        """The input splits a run would read: for each shard, its task and its files (row or byte ranges).

        Args:
            **options: ``cluster`` (needed unless the files are pinned), ``sizes``, ``devices``, ``fallback``.

        Examples:
            >>> import tempfile, os
            >>> path = os.path.join(tempfile.mkdtemp(), "x.npy")
            >>> np.save(path, np.zeros(10))
            >>> print(tmr.read_npy(path).explain(cluster=cluster, sizes=[4, 6]).splitlines()[0])
            read_npy: 1 files, 10 rows in 2 shards on 2 tasks
        """
        src = self.as_source()
        plan = self._plan(src, **options)
        unit = self.reader.unit
        lines = [
            f"{self.reader.name}: {len(src.entries)} files, {src.rows} {unit} in {len(plan.shards)} shards on {len(plan.tasks)} tasks"
        ]
        lines.append(f"  shard  {'task':<20}  {unit:<14}  file")
        for shard in plan.shards:
            pieces = src.pieces(shard)
            if not pieces:
                lines.append(f"  {shard.index:>5}  {shard.task!s:<20}  {'-':<14}  (reads nothing)")
            for e, lo, hi in pieces:
                span = f"{lo}:{hi}" if e.layout is not None else "?"
                note = "" if e.layout is not None else "  (matched on the task at run time)"
                lines.append(f"  {shard.index:>5}  {shard.task!s:<20}  {span:<14}  {short(e.path)}{note}")
        return "\n".join(lines)

    def _plan(
        self,
        src: FileSource,
        *,
        cluster: Cluster | None = None,
        sizes: SizesLike = None,
        devices: Sequence[str] | None = None,
        fallback: str | None = None,
    ) -> Plan:
        if src.pinned_plan is not None:
            if sizes is not None or devices is not None:
                raise TypeError("sizes= and devices= do not apply to pinned files: each task reads the files pinned to it")
            return src.pinned_plan
        if cluster is None:
            raise TypeError("cluster= is required to place the splits: pass a Cluster, e.g. cluster=tmr.LocalCluster(2)")
        return make_plan(src.rows, sizes, devices, [Device.parse(d) for d in cluster.devices], fallback=fallback)

    def persist(self, **options: Unpack[PlaceOptions]) -> Sharded:
        """Read the files on the workers into resident ``Sharded`` data (no byte crosses the client).

        Each task reads its own splits into its shards' variables; later runs
        over the result read memory, not files.  Text, CSV and TFRecord files
        are read twice: once to count their rows, once to store them.

        Args:
            **options: ``cluster`` (required), ``sizes``, ``devices``, ``fallback``, ``timeout`` (see ``RunOptions``).

        Examples:
            >>> import tempfile, os
            >>> path = os.path.join(tempfile.mkdtemp(), "x.npy")
            >>> np.save(path, np.arange(10.0))
            >>> with tmr.read_npy(path).persist(cluster=cluster) as data:
            ...     float(tmr.sum(data)), data.plan.sizes
            (45.0, (3, 3, 2, 2))
        """
        settings = RunOptions.placing("persist", dict(options))
        cluster = check_cluster(settings.cluster)
        timeout = settings.timeout
        src = self.as_source()
        plan = self._plan(src, cluster=cluster, sizes=settings.sizes, devices=settings.devices, fallback=settings.fallback)
        rows_plan = plan
        try:
            if self.reader.unit != "rows":
                counts = count_rows(src, plan, cluster, timeout)
                shards, start = [], 0
                for shard, n in zip(plan.shards, counts, strict=True):
                    shards.append(Shard(shard.index, start, start + n, shard.device, shard.requested))
                    start += n
                rows_plan = Plan(start, tuple(shards))
            dtype, row_shape = src.layout.dtype, src.layout.row_shape

            def build(shard: Shard) -> tf.Tensor:
                parts = []
                for j, piece in enumerate(src.batches(plan.shards[shard.index], 2**31 - 1)):
                    with tf.name_scope(f"piece{j}"):
                        empty = tf.zeros((0, *row_shape), tf.as_dtype(dtype))
                        parts.append(piece.dataset.reduce(empty, lambda a, b: tf.concat([a, b], 0)))
                whole = tf.concat(parts, 0) if parts else tf.zeros((0, *row_shape), tf.as_dtype(dtype))
                return tf.ensure_shape(whole, (shard.rows, *row_shape))

            shape = (rows_plan.rows, *row_shape)
            return build_sharded(cluster, rows_plan, dtype, shape, [build] * len(plan.shards), timeout, self.encoding)
        except JobError as e:
            bad = src.input_error(e, plan, cluster)
            if bad is None:
                raise
            raise bad from None


def csv_table(files: Files, keys: Any, values: Any, name: str) -> Files:
    """A ``read_csv`` table as a by-key recipe reads it: its ``keys`` column and its ``values`` column(s) (None: none).

    The key column is int64 where ``dtypes=`` gives it an integer dtype, a string where it gives
    ``str``; else int64 when the first data line of the first file holds an integer there, a
    string otherwise.

    Raises:
        TypeError: ``keys`` or ``values`` is not a column name or index (or a list of them).
        InputError: a named column is not in a file's header, or the key column is a float column.
    """
    reader = files.reader
    assert isinstance(reader, Csv)

    def column(value: Any, argument: str) -> str | int:
        if isinstance(value, str) or (isinstance(value, (int, np.integer)) and not isinstance(value, bool)):
            return value if isinstance(value, str) else int(value)
        raise TypeError(
            f"{name}: {argument} must name a column of the CSV table (a header name or an index), got "
            f"{type(value).__name__} {value!r}; e.g. {name}(tmr.read_csv(paths), keys='k', values='v')"
        )

    key = column(keys, "keys=")
    flat = values is None or isinstance(values, (str, int, np.integer))
    listed = () if values is None else (values,) if flat else tuple(values) if isinstance(values, Sequence) else None
    if listed is None or (values is not None and not listed):
        raise TypeError(f"{name}: values= must name one column of the CSV table or a non-empty list of them, got {values!r}")
    chosen = (key, *(column(v, "values=") for v in listed))
    described = attrs.evolve(files, reader=CsvTable(chosen, reader.dtypes, reader.header, reader.delimiter, "string", flat))
    entries = [e for e in _described(described) if e.layout is not None and e.layout.fields]
    if not entries:
        key_dtype = "string"
    else:
        layout = entries[0].layout
        assert layout is not None
        index = layout.columns[0]
        given = None if isinstance(reader.dtypes, str) else reader.kinds(layout)[index]
        if isinstance(reader.dtypes, tuple) and reader.dtypes and not isinstance(reader.dtypes[0], str):  # by name
            names = first_row(entries[0].path, reader.delimiter, False) or []
            if index >= len(names) or names[index].strip() not in dict(reader.dtypes):
                given = None  # a key column dtypes= leaves out is inferred, as without dtypes=
        row = first_row(entries[0].path, reader.delimiter, reader.header)
        fields = row if row is not None and len(row) == layout.fields else None
        for i, value in zip(layout.columns[1:], chosen[1:], strict=True):
            if fields is not None and not is_number(fields[i]):
                raise InputError(
                    f"{name}: values={value!r} is a column of text: line {1 + reader.header} of {short(entries[0].path)} holds "
                    f"{fields[i]!r} there, not a number; values must be numeric columns: name other columns"
                )
        if given is None:
            key_dtype = "int64" if fields is not None and is_integer(fields[index]) else "string"
        elif given.kind in "iu":
            key_dtype = "int64"
        elif given.kind == "U":
            key_dtype = "string"
        else:
            raise InputError(
                f"{name}: keys={key!r} is a {given} column (dtypes=); keys must be integers or strings (floats have no exact "
                "equality to group by): give that column int64 or str in dtypes="
            )
    table = CsvTable(chosen, reader.dtypes, reader.header, reader.delimiter, key_dtype, flat)
    return attrs.evolve(files, reader=table)


def _described(files: Files) -> tuple[FileEntry, ...]:
    """The files' entries (each matched and described on the client, as a run does)."""
    return files.as_source().entries
