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
import re
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import tensorflow as tf

from ._deadline import effective_timeout
from ._device import Device
from ._errors import InputError, JobError, ShardLostError
from ._plan import Plan, Shard, make_plan
from ._readers import RESIZED, Csv, Layout, Npy, Raw, Reader, Text, TfRecord, size_of, tfrecord_features
from ._source import Batches, Input, ShardTensor
from ._task import Task

if TYPE_CHECKING:
    from ._cluster import Cluster
    from ._partition import SizesLike
    from ._resident import Sharded

PathsLike = str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | Mapping[Any, Any]
"""A path, a glob, a list of them, or ``{task: [paths]}`` pinning files to the task that can see them."""

_MARK = "tfmapreduce-files: "
"""Prefix of the messages of the checks the reading graph makes, so their errors are recognised as the input's."""

_SHARD = re.compile(r"\bshard(\d+)/")
_PIECE = re.compile(r"\bshard\d+/piece(\d+)/")


@attrs.frozen
class FileEntry:
    """One file of a run (or a pinned pattern the client cannot see), where its units start in the whole input."""

    path: str
    """The absolute path (or, when ``layout`` is None, the pattern its task matches at run time)."""
    size: int
    """Bytes, from the ``stat`` of this run."""
    mtime_ns: int
    """Modification time, from the same ``stat``: a changed file compiles a new graph."""
    layout: Layout | None
    """What the file holds; None for a pinned pattern matched on its task at run time."""
    first: int
    """The first unit (row or byte) of the file in the whole input."""
    task: Task | None
    """The task the file is pinned to, or None."""
    units: int
    """Rows (row formats) or bytes (byte formats)."""


def _match(pattern: str, reader: Reader) -> list[str]:
    path = os.path.abspath(os.path.expanduser(pattern))
    if any(c in path for c in "*?["):
        return sorted(p for p in glob.glob(path) if os.path.isfile(p))
    if os.path.isdir(path):
        raise InputError(f"{reader.name}: {pattern} is a directory; pass the files in it, e.g. '{os.path.join(pattern, '*')}'")
    return [path] if os.path.isfile(path) else []


def _device_of(task: Task) -> str:
    return f"/job:{task.job}/replica:0/task:{task.index}/device:CPU:0"


def _short(path: str) -> str:
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


@attrs.frozen(eq=False)
class FileSource:
    """The source a job reads files through, as they were when the run started: streamed, nothing fed."""

    files: Files
    entries: tuple[FileEntry, ...]
    layout: Layout
    """The layout every file shares (the reference for empty files and pinned patterns)."""
    pinned_plan: Plan | None

    @property
    def reader(self) -> Reader:
        return self.files.reader

    @property
    def rows(self) -> int:
        """Rows (``.npy``, raw) or bytes (text, CSV, TFRecord: their rows are known only once read)."""
        return sum(e.units for e in self.entries)

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.layout.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.rows, *self.layout.row_shape)

    @property
    def home(self) -> None:
        return None

    @property
    def home_plan(self) -> Plan | None:
        return self.pinned_plan

    def signature(self, plan: Plan) -> Hashable:
        return ("files", self.reader.key(), self.entries)

    def tensor(self, shard: Shard) -> ShardTensor:
        raise TypeError(f"{self.reader.name} data is streamed batch by batch; it has no whole-shard tensor (persist() it first)")

    def feed(self, shard: Shard) -> None:
        return None

    def bytes_sent(self, shard: Shard) -> int:
        return 0

    def survive(self, lost: frozenset[Task]) -> None:
        """Files on a shared file system are read again by the survivors; files pinned to a lost task cannot be."""
        if self.pinned_plan is not None:
            gone = [s.index for s in self.pinned_plan.shards if s.task in lost]
            if gone:
                raise ShardLostError(
                    f"the files pinned to {sorted(str(t) for t in lost)} cannot be read without that task; restart its worker "
                    "(and cluster.mark_live()) or copy the files where another task can read them",
                    shards=tuple(gone),
                )

    def pieces(self, shard: Shard) -> list[tuple[FileEntry, int, int]]:
        """The (file, first unit, stop unit) pieces the shard reads, in order."""
        entries = [e for e in self.entries if e.task == shard.task] if self.pinned_plan is not None else self.entries
        result = []
        for e in entries:
            if self.reader.unit == "rows":
                lo, hi = max(shard.start, e.first), min(shard.stop, e.first + e.units)
                if hi > lo:
                    result.append((e, lo - e.first, hi - e.first))
            elif (
                self.pinned_plan is not None
                or shard.start <= e.first < shard.stop
                or (
                    e.first == self.rows
                    and shard.stop == self.rows
                    and (shard.start < self.rows or (self.rows == 0 and shard.index == 0))
                )
            ):
                result.append((e, 0, e.units))  # a whole file, in the shard that holds its first byte
        return result

    def groups(self, shard: Shard) -> list[list[tuple[FileEntry, int, int]]]:
        """The shard's pieces as they are read: each alone, or consecutive small files of one layout together.

        A group of small files (:meth:`Reader.small`) is one pipeline, traced once however many files it holds.
        """
        result: list[list[tuple[FileEntry, int, int]]] = []
        for piece in self.pieces(shard):
            e = piece[0]
            last = result[-1][0][0] if result else None
            if last is not None and self._small(last) and self._small(e) and self._layout(last) == self._layout(e):
                result[-1].append(piece)
            else:
                result.append([piece])
        return result

    def _small(self, entry: FileEntry) -> bool:
        return self.reader.unit == "bytes" and entry.layout is not None and self.reader.small(entry.size)

    def _layout(self, e: FileEntry) -> Layout:
        """The layout the file is read with (its own, or the shared one for empty files and pinned patterns)."""
        return e.layout if e.layout is not None and (self.reader.unit == "rows" or e.layout.fields) else self.layout

    def batches(self, shard: Shard, batch_rows: int | None) -> list[Batches]:
        result = []
        for group in self.groups(shard):
            e, lo, hi = group[0]
            layout = self._layout(e)
            rows = batch_rows or self.reader.batch_rows(layout)
            if self.reader.unit == "rows":
                result.append(
                    Batches(self.reader.rows_dataset(e.path, e.size, layout, lo, hi, rows), hi - lo, self.changed(e, hi - lo))
                )
                continue
            if e.layout is None:  # pinned, unseen by the client: matched on its own task
                matched = tf.io.matching_files(e.path)
                found = tf.debugging.assert_greater(
                    tf.size(matched), 0, message=f"{_MARK}{e.path} matches no file on the task that must read it"
                )
                with tf.control_dependencies([found]):
                    matched = tf.identity(matched)
                records = tf.data.Dataset.from_tensor_slices(matched).flat_map(self.reader.records).batch(rows)
            elif self._small(e):
                records = self.reader.small_batches([p[0].path for p in group], [p[0].size for p in group], rows)
            else:
                records = self.reader.record_batches(e.path, e.size, rows)
            result.append(Batches(records.map(lambda r, layout=layout: self.reader.decode(r, layout)), None))
        return result

    def changed(self, entry: FileEntry, expected: int) -> str:
        """The message of the in-run check that a piece yielded the rows its file's size promised."""
        return (
            f"{_MARK}{entry.path} yielded a different number of rows than the {expected} its size and header promised "
            "when the run started: the file changed during the run, or is truncated"
        )

    def input_error(self, error: JobError, plan: Plan, cluster: Cluster) -> InputError | None:
        """The InputError a failed run means, naming the file and the task, or None when the run failed elsewhere."""
        details = error.details or str(error)
        found = _SHARD.search(details)
        if found is None or int(found.group(1)) >= len(plan.shards):
            return None
        shard = plan.shards[int(found.group(1))]
        task, name = shard.task, self.reader.name
        cause = str(error).split(": ", 1)[-1]
        mine = re.search(re.escape(_MARK) + r"(.*)", details)
        if mine:  # the checks of the reading graph name their file themselves
            text = mine.group(1).split("]")[0].split("Condition x")[0].strip().rstrip(".")
            return InputError(
                f"{name}: task {task}: {text}; check the file on that task (and pin files to the task that has them)"
            )
        piece = _PIECE.search(details)
        groups = self.groups(shard)
        if piece is None or int(piece.group(1)) >= len(groups):
            return None
        group = [p[0] for p in groups[int(piece.group(1))]]
        named = [e for e in group if e.path in details]  # small files read together: the one TensorFlow names
        entry = max(named, key=lambda e: len(e.path)) if named else group[0]  # a.txt.bak, not a.txt
        path = _short(entry.path)
        if "not an exact multiple of the record length" in details or RESIZED in details:
            return InputError(
                f"{name}: {path} (read on task {task}) no longer has the size it had when the run started ({cause}): "
                "the file changed during the run, or is truncated; run again once it is complete"
            )
        if "No such file" in details or "NotFound" in details or "not found" in details.lower():
            return InputError(
                f"{name}: {path} is missing on task {task}, which must read it ({cause}); "
                "put the file there, or pin it with {task: [paths]} to the task that has it"
            )
        if any(s in details for s in ("fields but have", "is not a valid", "required but missing", "Quote")):
            return InputError(self._csv_row(named or group, task, cluster, cause))
        feature = re.search(r"Feature: (\S+) \(data type: (\w+)\) is required but could not be found", details)
        if feature:
            return InputError(
                f"{name}: {path} (read on task {task}) has a record without feature {feature.group(1)!r} "
                f"(expected {feature.group(2)}); give it a default_value in its FixedLenFeature, or fix the file"
            )
        return InputError(
            f"{name}: {path} could not be read on task {task}: it is truncated, corrupt or not a {name[5:]} file ({cause}); write it again"
        )

    def _csv_row(self, entries: Sequence[FileEntry], task: Task, cluster: Cluster, cause: str) -> str:
        """Find the first bad line of the CSV files (small ones are read together), on the task that failed to parse them.

        Runs only after a failed run.
        """
        reader = self.reader
        assert isinstance(reader, Csv)
        layout = self.layout
        number = r"\s*[-+]?((\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|nan|NaN|inf|Inf|infinity|Infinity)\s*"
        graph = tf.Graph()
        with graph.as_default(), tf.device(_device_of(task)):

            def numbered(f: tf.Tensor, path: tf.Tensor) -> tf.data.Dataset:
                lines = tf.data.TextLineDataset(path).enumerate(start=1).skip(int(reader.header))
                return lines.map(lambda i, line: (f, i, line))

            def bad(f: tf.Tensor, i: tf.Tensor, line: tf.Tensor) -> tf.Tensor:
                fields = tf.strings.split(line, reader.delimiter)
                numeric = tf.reduce_all(tf.strings.regex_full_match(fields, number))
                return tf.logical_or(tf.not_equal(tf.size(fields), layout.fields), tf.logical_not(numeric))

            files = tf.data.Dataset.from_tensor_slices((tf.range(len(entries), dtype=tf.int64), [e.path for e in entries]))
            first = (tf.constant(0, tf.int64), tf.constant(0, tf.int64), tf.constant(""))
            first_bad = files.flat_map(numbered).filter(bad).take(1).reduce(first, lambda s, e: e)
        try:
            f, line, text = cluster.run(graph, first_bad, {}, tasks=[task], timeout=effective_timeout(None))
        except Exception:  # the diagnosis is a courtesy: the error stands without it
            f, line = 0, 0
        finally:
            cluster.forget(graph)
        where = f"read_csv: {_short(entries[int(f)].path)} (read on task {task})"
        if not line:
            if len(entries) > 1:
                where = f"read_csv: one of {len(entries)} files read together, {_short(entries[0].path)} to {_short(entries[-1].path)} (read on task {task})"
            return f"{where}: a line does not parse as {layout.fields} {reader.delimiter!r}-separated numbers ({cause}); fix the file"
        shown = text.decode("utf-8", "replace")
        return (
            f"{where}: line {line} is {shown!r}: expected {layout.fields} numeric fields separated by {reader.delimiter!r}, "
            f"got {len(shown.split(reader.delimiter))} ({cause}); fix or remove that line"
        )


@attrs.frozen(eq=False)
class Files(Input):
    """Files described, not read: a source accepted wherever an array is, read by the tasks that map it.

    Made by :func:`read_npy`, :func:`read_text`, :func:`read_csv`,
    :func:`read_tfrecord` and :func:`read_raw`.  Every run looks at the files
    as they are when it starts; :meth:`explain` shows the input splits,
    :meth:`persist` reads them into resident ``Sharded`` data on the workers.

    Example:
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
        entries: list[FileEntry] = []
        first = 0
        for task, patterns in groups:
            for pattern in patterns:
                matched = _match(pattern, reader)
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
                    entries.append(FileEntry(os.path.abspath(pattern), 0, 0, None, first, task, 0))
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
                    entries.append(FileEntry(path, size, mtime, layout, first, task, units))
                    first += units
        layout = self._common_layout(entries)
        plan = None
        if self.pinned:
            shards, start = [], 0
            for i, (task, _) in enumerate(self.pinned):
                units = sum(e.units for e in entries if e.task == task)
                shards.append(Shard(i, start, start + units, _device_of(task)))
                start += units
            plan = Plan(start, tuple(shards))
        return FileSource(self, tuple(entries), layout, plan)

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
                    f"{reader.name}: {_short(e.path)} holds {b.dtype} rows of shape {b.row_shape}"
                    + (f" ({b.fields} fields)" if b.fields else "")
                    + f" but {_short(known[0].path)} holds {a.dtype} rows of shape {a.row_shape}"
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

        Example:
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
                lines.append(f"  {shard.index:>5}  {shard.task!s:<20}  {span:<14}  {_short(e.path)}{note}")
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

    def persist(
        self,
        *,
        cluster: Cluster,
        sizes: SizesLike = None,
        devices: Sequence[str] | None = None,
        fallback: str | None = None,
        timeout: float | None = None,
    ) -> Sharded:
        """Read the files on the workers into resident ``Sharded`` data (no byte crosses the client).

        Each task reads its own splits into its shards' variables; later runs
        over the result read memory, not files.  Text, CSV and TFRecord files
        are read twice: once to count their rows, once to store them.

        Example:
            >>> import tempfile, os
            >>> path = os.path.join(tempfile.mkdtemp(), "x.npy")
            >>> np.save(path, np.arange(10.0))
            >>> with tmr.read_npy(path).persist(cluster=cluster) as data:
            ...     float(tmr.sum(data)), data.plan.sizes
            (45.0, (3, 3, 2, 2))
        """
        from ._resident import build_sharded, check_cluster

        cluster = check_cluster(cluster)
        src = self.as_source()
        plan = self._plan(src, cluster=cluster, sizes=sizes, devices=devices, fallback=fallback)
        rows_plan = plan
        try:
            if self.reader.unit != "rows":
                counts = _count_rows(src, plan, cluster, timeout)
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

            return build_sharded(cluster, rows_plan, dtype, (rows_plan.rows, *row_shape), [build] * len(plan.shards), timeout)
        except JobError as e:
            bad = src.input_error(e, plan, cluster)
            if bad is None:
                raise
            raise bad from None


def _count_rows(src: FileSource, plan: Plan, cluster: Cluster, timeout: float | None) -> list[int]:
    """Rows per shard, counted on the workers (byte formats learn their rows only by reading)."""
    graph = tf.Graph()
    with graph.as_default():
        counts = []
        for shard in plan.shards:
            with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
                total = tf.constant(0, tf.int64)
                for j, piece in enumerate(src.batches(shard, None)):
                    with tf.name_scope(f"piece{j}"):
                        total += piece.dataset.reduce(
                            tf.constant(0, tf.int64), lambda n, b: n + tf.shape(b, out_type=tf.int64)[0]
                        )
                counts.append(total)
    try:
        return [int(n) for n in cluster.run(graph, counts, {}, tasks=plan.tasks, timeout=effective_timeout(timeout))]
    finally:
        cluster.forget(graph)


def _paths(paths: PathsLike, name: str) -> tuple[tuple[str, ...], tuple[tuple[Task, tuple[str, ...]], ...]]:
    def listed(value: Any, where: str) -> tuple[str, ...]:
        if isinstance(value, (str, os.PathLike)):
            return (os.fspath(value),)
        if isinstance(value, Sequence) and value and all(isinstance(v, (str, os.PathLike)) for v in value):
            return tuple(os.fspath(v) for v in value)
        raise TypeError(
            f"{name}: {where} must be a path, a glob or a non-empty list of them, got {type(value).__name__} {value!r}"
        )

    if isinstance(paths, Mapping):
        if not paths:
            raise TypeError(f"{name}: {{task: [paths]}} is empty; name at least one task")
        pinned = []
        for key, value in paths.items():
            try:
                task = Task.of(key)
            except (ValueError, TypeError):
                raise TypeError(
                    f"{name}: pinning key {key!r} is not a task; use '/job:NAME/task:I', e.g. '/job:local/task:1'"
                ) from None
            pinned.append((task, listed(value, f"the paths of {task}")))
        if len({t for t, _ in pinned}) != len(pinned):
            raise TypeError(f"{name}: a task is named twice in {{task: [paths]}}; list all its paths under one key")
        return (), tuple(pinned)
    return listed(paths, "paths"), ()


def read_npy(paths: PathsLike, /) -> Files:
    """``.npy`` files, one array split along axis 0: each file's header is read on the client, its rows on the workers.

    Big files are split into several shards by row range; every file must hold
    the same dtype and row shape.

    Example:
        >>> import tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> for i in range(3):
        ...     np.save(os.path.join(folder, f"part{i}.npy"), np.full((4, 2), i, np.float32))
        >>> tmr.mean(tmr.read_npy(os.path.join(folder, "*.npy")), axis=0, cluster=cluster)
        array([1., 1.])
    """
    unpinned, pinned = _paths(paths, "read_npy")
    return Files(Npy(), unpinned, pinned)


def read_raw(paths: PathsLike, /, *, dtype: Any, shape: Sequence[int] = ()) -> Files:
    """Headerless binary files of rows of ``dtype`` and row shape ``shape`` (e.g. written by ``ndarray.tofile``).

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.f64")
        >>> np.arange(12.0).tofile(path)
        >>> tmr.sum(tmr.read_raw(path, dtype=np.float64, shape=(3,)), axis=0, cluster=cluster)
        array([18., 22., 26.])
    """
    unpinned, pinned = _paths(paths, "read_raw")
    np_dtype = np.dtype(dtype)
    row_shape = tuple(int(d) for d in shape)
    if np_dtype.itemsize == 0 or any(d < 1 for d in row_shape):
        raise InputError(
            f"read_raw: dtype={np_dtype} and shape={row_shape} describe empty rows; give a numeric dtype and a row shape of sizes ≥ 1"
        )
    return Files(Raw(np_dtype.str, row_shape), unpinned, pinned)


def read_text(paths: PathsLike, /) -> Files:
    """Text files, one string row per line (without its line ending); whole files are the input splits.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.txt")
        >>> _ = open(path, "w").write("to be\\nor not\\nto be\\n")
        >>> int(tmr.count(tmr.read_text(path), cluster=cluster))
        3
    """
    unpinned, pinned = _paths(paths, "read_text")
    return Files(Text(), unpinned, pinned)


def read_csv(
    paths: PathsLike,
    /,
    *,
    columns: Sequence[str | int] | None = None,
    dtypes: Any = None,
    header: bool = True,
    delimiter: str = ",",
) -> Files:
    """CSV files of numbers as one (rows, columns) matrix; whole files are the input splits.

    Args:
        paths: a path, a glob, a list of them, or ``{task: [paths]}``.
        columns: the columns to read, by header name or index (None: all), in that order.
        dtypes: one dtype for every field (None: float32), or a list with one per field of the file.
        header: whether each file's first line names the columns (it is skipped).
        delimiter: the field separator.

    The client reads each file's first line (the header) to learn the columns, nothing else.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.csv")
        >>> _ = open(path, "w").write("a,b\\n1,10\\n2,20\\n3,30\\n")
        >>> tmr.mean(tmr.read_csv(path, columns=["b"]), axis=0, cluster=cluster)
        array([20.])
    """
    unpinned, pinned = _paths(paths, "read_csv")
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise TypeError(f"read_csv: delimiter must be one character, got {delimiter!r}")
    chosen = None if columns is None else tuple(c if isinstance(c, str) else int(c) for c in columns)
    kinds = "float32" if dtypes is None else dtypes
    kinds = np.dtype(kinds).name if isinstance(kinds, (str, type, np.dtype)) else tuple(np.dtype(d).name for d in kinds)
    for kind in [kinds] if isinstance(kinds, str) else kinds:
        if np.dtype(kind).kind not in "iuf":
            raise TypeError(f"read_csv: dtypes must be numeric (float32, float64, int32, int64), got {kind}")
    return Files(Csv(chosen, kinds, bool(header), delimiter), unpinned, pinned)


def read_tfrecord(paths: PathsLike, /, *, features: Mapping[str, Any]) -> Files:
    """TFRecord files of ``tf.train.Example`` records; whole files are the input splits.

    ``features`` maps names to ``tf.io.FixedLenFeature(shape, dtype)``: one
    feature gives rows of its shape; several are flattened and concatenated
    into one row (cast to their common dtype).

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.tfrecord")
        >>> with tf.io.TFRecordWriter(path) as w:
        ...     for v in [1.0, 2.0, 6.0]:
        ...         w.write(tf.train.Example(features=tf.train.Features(feature={
        ...             "v": tf.train.Feature(float_list=tf.train.FloatList(value=[v]))})).SerializeToString())
        >>> float(tmr.mean(tmr.read_tfrecord(path, features={"v": tf.io.FixedLenFeature([], tf.float32)}), cluster=cluster))
        3.0
    """
    unpinned, pinned = _paths(paths, "read_tfrecord")
    return Files(TfRecord(tfrecord_features(features)), unpinned, pinned)
