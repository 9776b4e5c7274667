"""A file source as one run sees it: its files (stat'ed when the run started), their pieces per shard, and their errors."""

from __future__ import annotations

import codecs
import glob
import os
import re
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import tensorflow as tf

from ..._base.deadline import effective_timeout
from ..._base.errors import InputError, JobError, ShardLostError
from ..._base.plan import Plan, Shard
from ..._base.task import Task
from ..mapped import note_mapped
from ..source import Batches, ShardTensor
from .csv import BAD_LINE, Csv
from .csv_diagnosis import BadLine, bad_line_message, find_bad_line
from .encode import PARTS, SUCCESS
from .readers import Layout, Reader
from .text import RESIZED
from .written import PathsLike, Written

if TYPE_CHECKING:
    from ..._cluster.cluster import Cluster


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
    pin: int | None = None
    """The pinned group the file belongs to (its shard in the pinned plan), or None."""


def device_of(task: Task) -> str:
    return f"/job:{task.job}/replica:0/task:{task.index}/device:CPU:0"


def short(path: str) -> str:
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


@attrs.frozen(eq=False)
class FileSource:
    """The source a job reads files through, as they were when the run started: streamed, nothing fed."""

    reader: Reader
    """How the files are read (the ``Files``' reader)."""
    entries: tuple[FileEntry, ...]
    layout: Layout
    """The layout every file shares (the reference for empty files and pinned patterns)."""
    pinned_plan: Plan | None

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
        entries = [e for e in self.entries if e.pin == shard.index] if self.pinned_plan is not None else self.entries
        result = []
        for e in entries:
            if self.reader.unit == "rows" or (self.pinned_plan is None and self._splits(e)):
                lo, hi = max(shard.start, e.first), min(shard.stop, e.first + e.units)
                if hi > lo:
                    result.append((e, lo - e.first, hi - e.first))
            elif (
                self.pinned_plan is not None
                or shard.start <= e.first + e.units // 2 < shard.stop
                or (
                    e.first == self.rows
                    and shard.stop == self.rows
                    and (shard.start < self.rows or (self.rows == 0 and shard.index == 0))
                )
            ):
                result.append((e, 0, e.units))  # a whole file, in the shard that holds its middle byte
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

    def _splits(self, entry: FileEntry) -> bool:
        """A file read in byte ranges: pieces of it in several shards (see ``Csv.splits``)."""
        return isinstance(self.reader, Csv) and self.reader.splits(entry.layout, entry.size)

    def _small(self, entry: FileEntry) -> bool:
        return self.reader.unit == "bytes" and entry.layout is not None and self.reader.small(entry.size)

    def _layout(self, e: FileEntry) -> Layout:
        """The layout the file is read with (its own, or the shared one for empty files and pinned patterns)."""
        return e.layout if e.layout is not None and (self.reader.unit == "rows" or e.layout.fields) else self.layout

    def empty_batch(self) -> tuple[tf.Tensor, ...]:
        """A batch of no rows, as the batches are (in the graph being built)."""
        return self.reader.empty(self.layout)

    def batches(self, shard: Shard, batch_rows: int | None) -> list[Batches]:
        result: list[Batches] = []
        for group in self.groups(shard):
            e, lo, hi = group[0]
            layout = self._layout(e)
            rows = batch_rows or self.reader.batch_rows(layout)
            if self.reader.unit == "rows":
                if self.reader.maps(layout):
                    note_mapped(shard.device, f"shard{shard.index}/piece{len(result)}", e.path, e.size)
                dataset = self.reader.rows_dataset(e.path, e.size, layout, lo, hi, rows)
                windows = self.reader.windows(e.path, e.size, layout, lo, hi, batch_rows)
                result.append(Batches(dataset, hi - lo, self.changed(e, hi - lo), windows=windows))
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
            elif self._splits(e):
                assert isinstance(self.reader, Csv)
                native = self.reader.native_batches(e.path, e.size, layout, batch_rows, lo, hi)  # default: a block's lines
                result.append(Batches(native, None, counts=self.reader.counts))
                continue
            else:
                records = self.reader.record_batches(e.path, e.size, rows)
            decoded = records.map(lambda r, layout=layout, rows=rows: self.reader.decode(r, layout, rows))
            result.append(Batches(decoded, None, counts=self.reader.counts))
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
        path = short(entry.path)
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
            return InputError(self._csv_row(group, task, cluster, details, cause))
        feature = re.search(r"Feature: (\S+) \(data type: (\w+)\) is required but could not be found", details)
        if feature:
            return InputError(
                f"{name}: {path} (read on task {task}) has a record without feature {feature.group(1)!r} "
                f"(expected {feature.group(2)}); give it a default_value in its FixedLenFeature, or fix the file"
            )
        return InputError(
            f"{name}: {path} could not be read on task {task}: it is truncated, corrupt or not a {name[5:]} file ({cause}); write it again"
        )

    def _csv_row(self, group: Sequence[FileEntry], task: Task, cluster: Cluster, details: str, cause: str) -> str:
        """The message of a CSV piece that failed to decode: its first bad line, found on the task that read it.

        Runs only after a failed run, under :data:`DIAGNOSIS_SECONDS` (see :func:`find_bad_line`).
        """
        reader = self.reader
        assert isinstance(reader, Csv)
        layout = self.layout

        def run(graph: tf.Graph, fetches: Any, seconds: float) -> Any:
            try:
                return cluster.run(graph, fetches, {}, tasks=[task], timeout=seconds)
            finally:
                cluster.forget(graph)

        files = [(e.path, e.size) for e in group]
        bad = None
        named = BAD_LINE.search(details)  # the native reader names the line itself
        if named is not None:
            text = codecs.escape_decode(named.group(2).encode("ascii"))[0]
            bad = BadLine(0, int(named.group(1)), text.decode("utf-8", "replace"))
        elif all(e.layout is not None for e in group):
            bad = find_bad_line(reader, layout, files, self._small(group[0]), details, device_of(task), run)
        if bad is None:
            where = f"read_csv: {short(group[0].path)} (read on task {task})"
            if len(group) > 1:
                where = f"read_csv: one of {len(group)} files read together, {short(group[0].path)} to {short(group[-1].path)} (read on task {task})"
            return f"{where}: a line does not parse as {layout.fields} {reader.delimiter!r}-separated numbers ({cause}); fix the file"
        return bad_line_message(reader, layout, bad, f"read_csv: {short(group[bad.file].path)} (read on task {task})", cause)


def count_rows(src: FileSource, plan: Plan, cluster: Cluster, timeout: float | None) -> list[int]:
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


def match(pattern: str, reader: Reader, literal: bool = False) -> list[str]:
    """The files ``pattern`` (a path or a glob; ``literal``: a path, whatever characters it holds) names on the
    client, sorted."""
    path = os.path.abspath(os.path.expanduser(pattern))
    if literal:
        return [path] if os.path.isfile(path) else []
    if any(c in path for c in "*?["):
        return sorted(p for p in glob.glob(path) if os.path.isfile(p))
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, SUCCESS)):  # a directory a writer committed: its parts, in order
            return sorted(p for p in glob.glob(os.path.join(glob.escape(path), PARTS)) if os.path.isfile(p))
        raise InputError(
            f"{reader.name}: {pattern} is a directory without a {SUCCESS} marker (not a committed write, or one that failed); "
            f"pass the files in it, e.g. '{os.path.join(pattern, '*')}'"
        )
    return [path] if os.path.isfile(path) else []


def table_files(paths: Any, suffix: str, caller: str, kind: str) -> list[str]:
    """The files a table scan's ``paths`` name: a file, a folder (its ``*<suffix>`` files, sorted), a glob pattern, or a
    list of them, as absolute paths.

    Raises:
        FileNotFoundError: a path that names no file, or paths that name no ``*<suffix>`` file.
    """
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    found: list[str] = []
    for item in items:
        path = os.fspath(item)
        if os.path.isdir(path):
            found += sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(suffix))
        elif os.path.isfile(path):
            found.append(path)
        elif matches := sorted(glob.glob(path)):
            found += matches
        else:
            raise FileNotFoundError(
                f"{caller}: no file {path!r}; pass a {kind} file, a folder of *{suffix} files or a glob pattern"
            )
    if not found:
        raise FileNotFoundError(f"{caller}: {paths!r} holds no {suffix} file")
    return [os.path.abspath(f) for f in found]


def paths_of(paths: PathsLike, name: str) -> tuple[tuple[str, ...], tuple[tuple[Task, tuple[str, ...]], ...]]:
    """``paths`` as (unpinned paths, pinned (task, paths) pairs); TypeError naming ``name`` for anything else."""

    def listed(value: Any, where: str) -> tuple[str, ...]:
        if isinstance(value, (str, os.PathLike)):
            return (os.fspath(value),)
        if isinstance(value, Sequence) and value and all(isinstance(v, (str, os.PathLike)) for v in value):
            return tuple(os.fspath(v) for v in value)
        raise TypeError(
            f"{name}: {where} must be a path, a glob or a non-empty list of them, got {type(value).__name__} {value!r}"
        )

    if isinstance(paths, Written):
        if paths.reader != name:
            raise TypeError(
                f"{name}: these parts were written by {'write_' + paths.reader[5:]}; read them with tmr.{paths.reader}"
            )
        if paths.shared:
            return paths.parts, ()
        return (), tuple((task, (path,)) for task, path in zip(paths.tasks, paths.parts, strict=True))
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
