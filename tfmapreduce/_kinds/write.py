"""Writers: each shard of resident (or host) data written as its own part file by the task that holds it.

The graph of one write (one distributed execution)::

    shard i (on its device)   its rows encoded as one file or its records (``_encode``) and written on that task's CPU:
                              DIRECTORY/_temporary/<attempt>/part-0000i-of-0000n.EXT
    client, once it succeeded the attempt's parts moved into DIRECTORY, _temporary removed, _SUCCESS written

The commit protocol is Hadoop's ``FileOutputCommitter``'s: each attempt (a retried run is a new attempt) writes
under its own temporary folder, and only the attempt that succeeded is moved into place, so a failed, timed-out
or retried attempt never leaves a visible part, and no part appears twice.  A run that fails removes the
temporary folder.  The directory is on a file system the client and the writing tasks share, or (``shared=False``)
on each task's own disk: then each task checks its directory is empty in the run, and commits its own parts once
the run succeeded (copied out of the attempt's folder, then its ``_SUCCESS``: a graph cannot rename a file), and
the readers given the ``Written`` pin each part to its task.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import tensorflow as tf
from typing_extensions import Unpack

from .._base.errors import JobError, OutputError, TfMapReduceError
from .._base.plan import Plan
from .._engine import driver as _engine
from .._engine.call import Call
from .._engine.kind import KindBase
from .._engine.program import Builder, Program
from .._io.files.encode import LINE_BREAK, SUCCESS, Csv, Format, Npy, Text, TfRecord, fields_of, part_name
from .._io.files.source import Written as Written
from .._io.keyed_input import keyed_sources
from .._io.source import Sources, streamed
from .._options import Options, RunOptions
from .shuffle.sharded import KeyedSharded

TEMPORARY = "_temporary"

NO_SPECULATION = (
    "speculate=True does not apply to writers: backups re-run a shard on another task and keep the first partial to "
    "finish, merged on the client, but a write's result is its part file, written on the shard's own task (and resident "
    "data is read there only); a write that hangs past timeout= is retried as a new attempt (retries=), whose parts alone "
    "are committed. Drop speculate="
)

NOT_EMPTY = "tfmapreduce-write: the directory is not empty"
"""The message of the in-run check that a task's directory is empty (``shared=False``)."""

_PART = re.compile(r"\bpart(\d+)/")
_WRITERS = ("WriteFile", "write_file", "DatasetToTFRecord")
"""The ops that write a part, as a failed run's error names them."""


@attrs.frozen
class Attempt:
    """One attempt's parts: its temporary folder and the plan it wrote."""

    folder: str
    plan: Plan


@attrs.define(eq=False, repr=False)
class Write(KindBase[Plan]):
    """A write as the run driver sees it (see ``_engine.kind.Kind``): each shard encoded and written on its own task."""

    format: Format
    directory: str
    overwrite: bool
    shared: bool = True
    """False: the directory is on each task's own disk; each task commits its own parts (:meth:`_commit_on_tasks`)."""
    phase: ClassVar[str] = "write"
    refused: ClassVar[Mapping[str, str]] = {"speculate": NO_SPECULATION}
    attempts: list[Attempt] = attrs.field(factory=list)

    def __repr__(self) -> str:
        return f"{self.format.name}({self.directory})"

    @property
    def identity(self) -> Hashable:
        return ("write", self.format, self.shared)  # not the directory: it is fed (see build)

    def sources(self, x: Any) -> tuple[Sources, Any]:
        srcs, _ = keyed_sources(x)  # arrays of strings too
        if streamed(srcs) is not None:
            raise TypeError(
                f"{self.format.name} writes data held by the workers (resident or host arrays), not files read in a stream; "
                f"map them first: tmr.{self.format.name}(tmr.map(fn, files), directory)"
            )
        self.format.check([s.dtype for s in srcs], [s.shape for s in srcs])
        return srcs, None

    def plan(self, shards: Plan, call: Call) -> Plan:
        """The shards as they are; and a new attempt, with its own folder (the driver plans each attempt of a write)."""
        folder = os.path.join(self.directory, TEMPORARY, f"{len(self.attempts)}-{secrets.token_hex(4)}")
        self.attempts.append(Attempt(folder, shards))
        return shards

    def variant(self, plan: Plan, call: Call) -> Hashable | None:
        return ()  # the directory and attempt folder are fed: one program per layout

    def fed(self, name: str) -> str:
        """The run's directory, or its attempt's folder (the program's placeholders of those names)."""
        return self.directory if name == "directory" else self.attempts[-1].folder

    def build(self, builder: Builder, plan: Plan, call: Call) -> Program:
        n = len(plan.shards)
        written = []
        folder = builder.per_run("attempt")
        for shard in plan.shards:
            with tf.device(shard.device), tf.name_scope(f"part{shard.index}"):
                tensors = builder.inputs(shard)
                with tf.device(f"{shard.task}/device:CPU:0"):  # encoding and file ops have CPU kernels only
                    contents = self.format.encode(tensors, shard.rows)
                    builder.mapped(shard, contents)
                    path = tf.strings.join([folder, part_name(shard.index, n, self.format.ext)], separator="/")
                    with tf.control_dependencies([] if self.shared else [self._empty_here(builder)]):
                        written.append(self.format.write(contents, path))
        return builder.program(written, plan.tasks)

    def _empty_here(self, builder: Builder) -> tf.Operation:
        """On the current task: the check that its directory holds nothing but earlier attempts (``shared=False``, where
        the client cannot look)."""
        entries = tf.io.matching_files(tf.strings.join([builder.per_run("directory"), "*"], separator="/"))
        others = tf.boolean_mask(entries, tf.logical_not(tf.strings.regex_full_match(entries, f".*/{TEMPORARY}")))
        return tf.debugging.assert_equal(tf.size(others), 0, message=NOT_EMPTY, summarize=3)

    def finish(self, value: Any, program: Program | None, plan: Plan, call: Call) -> Written:
        """Commit the attempt that succeeded: its parts moved into the directory, the rest removed, ``_SUCCESS`` written."""
        assert program is not None  # never speculative
        attempt = self.attempts[-1]  # the one that ran last: it succeeded
        n = len(plan.shards)
        names = [part_name(s.index, n, self.format.ext) for s in plan.shards]
        row = None
        if isinstance(self.format, Npy):
            (src,) = call.srcs
            row = (src.dtype.str, tuple(src.shape[1:]))
        written = Written(
            self.directory,
            tuple(os.path.join(self.directory, name) for name in names),
            tuple(s.task for s in plan.shards),
            tuple(s.rows for s in plan.shards),
            self.shared,
            self.format.reader,
            row,
        )
        if not self.shared:
            self._commit_on_tasks(attempt, written, call)
            return written
        missing = [name for name in names if not tf.io.gfile.exists(os.path.join(attempt.folder, name))]
        if missing:
            raise OutputError(
                f"{self!r}: the tasks wrote their parts but the client does not see {missing[0]} (of {len(missing)} missing) "
                f"under {attempt.folder}: the directory must be on a file system the client and every writing task share"
            )
        if self.overwrite:
            for entry in tf.io.gfile.listdir(self.directory):
                path = os.path.join(self.directory, entry.rstrip("/"))
                if entry.rstrip("/") != TEMPORARY:
                    _remove(path)
        for name in names:
            tf.io.gfile.rename(os.path.join(attempt.folder, name), os.path.join(self.directory, name), overwrite=True)
        _remove(os.path.join(self.directory, TEMPORARY))
        with tf.io.gfile.GFile(os.path.join(self.directory, SUCCESS), "w") as marker:
            marker.write("")  # (a GFile never written is never made)
        return written

    def _commit_on_tasks(self, attempt: Attempt, written: Written, call: Call) -> None:
        """``shared=False``: each task commits its own parts, as the client does on a shared file system, with the file
        ops a graph has: each part of the attempt copied into ``directory``, then that task's ``_SUCCESS`` written, then
        the attempt's copies emptied (a graph can neither rename nor remove a file)."""
        graph = tf.Graph()
        done = []
        with graph.as_default():
            for i, task in enumerate(sorted(set(written.tasks))):
                with tf.device(f"{task}/device:CPU:0"), tf.name_scope(f"commit{i}"):
                    mine = [p for p, t in zip(written.parts, written.tasks, strict=True) if t == task]
                    temporary = [os.path.join(attempt.folder, os.path.basename(p)) for p in mine]
                    copies = [tf.io.write_file(p, tf.io.read_file(t)) for p, t in zip(mine, temporary, strict=True)]
                    with tf.control_dependencies(copies):
                        marker = tf.io.write_file(os.path.join(self.directory, SUCCESS), "")
                    with tf.control_dependencies([marker]):
                        done += [tf.io.write_file(t, "") for t in temporary]
        try:
            call.cluster.run(graph, done, {}, tasks=sorted(set(written.tasks)), timeout=call.settings.seconds())
        except TfMapReduceError as e:
            failed = getattr(e, "task", None)
            raise OutputError(
                f"{self!r}: the parts were written, but committing them on {failed or 'a task'} failed ({e}); that task's "
                f"parts stay under {attempt.folder} on its disk and its {SUCCESS} may be missing: write again "
                "to a new directory"
            ) from None
        finally:
            call.cluster.forget(graph)

    def failure(self, error: JobError) -> Exception | None:
        """A part that could not be written (a full disk, no permission) or encoded, named with its task."""
        details = f"{error} {error.details}"
        found = _PART.search(error.details or str(error))
        if found is None or not self.attempts:
            return None
        plan = self.attempts[-1].plan
        index = int(found.group(1))
        if index >= len(plan.shards):
            return None
        task, name = plan.shards[index].task, self.format.name
        if NOT_EMPTY in details:
            return OutputError(
                f"{name}: {self.directory} on task {task} is not empty (shared=False: each task's own disk is checked); "
                "choose a new directory, or empty it on that task's machine (overwrite=True needs shared=True)"
            )
        if LINE_BREAK in details:
            return OutputError(
                f"{name}: a string of part {index} (shard {index}, on {task}) holds a line break, which would split its row; "
                "use write_csv (which quotes it), or replace the line breaks first, e.g. "
                "tmr.map(lambda s: tf.strings.regex_replace(s, '[\\r\\n]', ' '), data)"
            )
        cause = str(error).split(": ", 1)[-1]
        if not any(op.lower() in details.lower() for op in _WRITERS):
            return None
        return OutputError(
            f"{name}: task {task} could not write part {index} under {self.directory} ({cause}); the attempt is discarded and "
            "none of its parts is visible: make the directory writable by that task's worker (and free space on its disk)"
        )


def _remove(path: str) -> None:
    if tf.io.gfile.isdir(path):
        tf.io.gfile.rmtree(path)
    elif tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


def _absolute(name: str, directory: Any, overwrite: bool) -> str:
    """``directory`` as an absolute path (or a URL as it is), its arguments checked."""
    if not isinstance(directory, str | os.PathLike):
        raise TypeError(f"{name}: directory must be a path (str or os.PathLike), got {type(directory).__name__} {directory!r}")
    if not isinstance(overwrite, bool):
        raise TypeError(f"{name}: overwrite must be True or False, got {type(overwrite).__name__} {overwrite!r}")
    path = os.fspath(directory)
    return path if "://" in path else os.path.abspath(os.path.expanduser(path))


def prepare(name: str, directory: Any, overwrite: bool) -> tuple[str, bool]:
    """The directory as an absolute path, made if new; and whether it was made (a failed write removes it again).

    Raises:
        OutputError: it is a file, it holds entries and ``overwrite`` is False, or it cannot be made.
        TypeError: ``directory`` is not a path, or ``overwrite`` not a bool.
    """
    path = _absolute(name, directory, overwrite)
    if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
        raise OutputError(f"{name}: {path} is a file; pass a directory for the part files")
    if tf.io.gfile.exists(path):
        entries = sorted(tf.io.gfile.listdir(path))
        if entries and not overwrite:
            shown = ", ".join(e.rstrip("/") for e in entries[:3]) + (", ..." if len(entries) > 3 else "")
            raise OutputError(
                f"{name}: {path} is not empty ({len(entries)} entries: {shown}); pass overwrite=True to replace what it holds "
                "once the write succeeds, or choose a new directory"
            )
        return path, False
    try:
        tf.io.gfile.makedirs(path)
    except tf.errors.OpError as e:
        raise OutputError(
            f"{name}: {path} cannot be made ({e.message}); choose a directory the client and workers can write"
        ) from None
    return path, True


def _write(format: Format, data: Any, directory: Any, overwrite: bool, shared: bool, options: dict[str, Any]) -> Written:
    if not isinstance(shared, bool):
        raise TypeError(f"{format.name}: shared must be True or False, got {type(shared).__name__} {shared!r}")
    if overwrite is True and not shared:
        raise TypeError(
            f"{format.name}: overwrite=True needs shared=True: a task cannot remove its old parts (TensorFlow's graph has no "
            "op that removes a file), so they could stay beside the new ones; write to a new directory instead"
        )
    settings = RunOptions.of(**options)
    given = [n for n, v in (("reducers", settings.reducers), ("batch_rows", settings.batch_rows)) if v is not None]
    if given:
        raise TypeError(f"{format.name}: {', '.join(f'{n}=' for n in given)} do not apply to a write; drop them")
    if settings.return_stats:
        raise TypeError(f"{format.name}: return_stats= does not apply to a write (it returns its Written); use tmr.stats()")
    if settings.partitioner != "hash":
        raise TypeError(
            f"{format.name}: partitioner={settings.partitioner!r} does not apply to a write (each shard is written where it "
            "lives); drop it, and pass partitioner='range' to the keyed job whose result you write"
        )
    if isinstance(data, KeyedSharded):
        data = (data.keys, *data.dense(f"tmr.{format.name}"))
    if shared:
        path, made = prepare(format.name, directory, overwrite)
    else:  # each task's own disk: the client neither makes nor checks it (each task checks its own in the run)
        path, made = _absolute(format.name, directory, overwrite), False
    kind = Write(format, path, overwrite, shared)
    try:
        written: Written = _engine.run(kind, data, settings)
        return written
    except BaseException:
        temporary = os.path.join(path, TEMPORARY)
        try:
            _remove(temporary)
            if made and not tf.io.gfile.listdir(path):
                tf.io.gfile.rmtree(path)
        except tf.errors.OpError:
            pass  # a late write of a hung task may race the removal: still under _temporary, never a visible part
        raise


def _key_columns(data: Any) -> tuple[str, ...] | None:
    """The default CSV columns of a keyed result: key, then value (value0, value1, ... for several fields)."""
    if not isinstance(data, KeyedSharded):
        return None
    fields = fields_of([leaf.shape for leaf in data.dense("tmr.write_csv")])
    return ("key", *(["value"] if fields == 1 else [f"value{i}" for i in range(fields)]))


def write_npy(
    data: Any,
    directory: str | os.PathLike[str],
    /,
    *,
    overwrite: bool = False,
    shared: bool = True,
    **options: Unpack[Options],
) -> Written:
    """Write ``data`` as ``.npy`` part files, each shard's by the task that holds it: nothing crosses the client.

    ``directory`` gets ``part-00000-of-0000N.npy``, ... (one per shard, in row order) and ``_SUCCESS`` once every
    part is written; ``tmr.read_npy(directory)`` reads the same array back.  Each attempt writes under
    ``directory/_temporary/`` first, and only the attempt that succeeds is moved into place: a failed or retried
    attempt leaves no visible part.

    Args:
        data: resident ``Sharded`` data (e.g. a ``tmr.map`` output) or a host array (partitioned as for any job).
        directory: where the parts go, on a file system the client and the writing tasks share (or, with
            ``shared=False``, the same path on each writing task's own disk).
        overwrite: replace what the directory holds once the write succeeds (False: a non-empty directory is refused).
        shared: False where the tasks have no file system in common with the client (each machine's local disk):
            each task checks that its directory is empty, writes and commits its own parts there (``_SUCCESS``
            per task), and the returned ``Written`` pins each part to its task: ``tmr.read_npy(written)``.
        **options: ``cluster`` (for host arrays), ``sizes``, ``devices``, ``timeout``, ``retries``, ``transfer``.

    Returns:
        A [`Written`][tfmapreduce.Written]: the directory, each part's path, task and rows.

    Raises:
        OutputError: the directory is a file or not empty, or a task cannot write its part (named).
        TypeError: the data is not numeric (strings need ``write_text`` or ``write_csv``), or several arrays;
            ``overwrite=True`` with ``shared=False``.

    Examples:
        >>> import tempfile, os
        >>> folder = os.path.join(tempfile.mkdtemp(), "out")
        >>> with tmr.scatter(np.arange(10.0), cluster=cluster) as data:
        ...     written = tmr.write_npy(data, folder)
        >>> [os.path.basename(p) for p in written.parts][:2], written.rows
        (['part-00000-of-00004.npy', 'part-00001-of-00004.npy'], (3, 3, 2, 2))
        >>> float(tmr.sum(tmr.read_npy(folder), cluster=cluster))
        45.0
    """
    return _write(Npy(), data, directory, overwrite, shared, dict(options))


def write_text(
    data: Any,
    directory: str | os.PathLike[str],
    /,
    *,
    delimiter: str = "\t",
    overwrite: bool = False,
    shared: bool = True,
    **options: Unpack[Options],
) -> Written:
    """Write ``data`` as text part files, one line per row, each shard's by the task that holds it.

    Strings are written as they are (a line break in one is an error), booleans as 1 and 0, numbers losslessly
    (floats with the digits that read back the same value).  Rows of several fields (a ``(rows, k)`` array, a tuple of
    co-partitioned arrays, a ``KeyedSharded``'s key and values) are joined with ``delimiter``.  ``tmr.read_text``
    reads the lines back in order.  Directory, commit protocol, ``shared=`` and options as for [`write_npy`][tfmapreduce.write_npy].

    Examples:
        >>> import tempfile, os
        >>> folder = os.path.join(tempfile.mkdtemp(), "words")
        >>> with tmr.map(lambda s: tf.strings.split(s).flat_values, np.array(["to be", "or not"]), cluster=cluster) as words:
        ...     _ = tmr.write_text(words, folder)
        >>> with tmr.read_text(folder).persist(cluster=cluster) as lines:
        ...     lines.gather().tolist()
        [b'to', b'be', b'or', b'not']
    """
    if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in "\r\n":
        raise TypeError(f"write_text: delimiter must be one character other than a line break, got {delimiter!r}")
    return _write(Text(delimiter), data, directory, overwrite, shared, dict(options))


def write_csv(
    data: Any,
    directory: str | os.PathLike[str],
    /,
    *,
    columns: Sequence[str] | None = None,
    delimiter: str = ",",
    overwrite: bool = False,
    shared: bool = True,
    **options: Unpack[Options],
) -> Written:
    """Write ``data`` as CSV part files with a header line, each shard's by the task that holds it.

    Fields as in [`write_text`][tfmapreduce.write_text] (strings quoted where they hold the delimiter, a quote or a line break); a
    ``(rows, k)`` array gives ``k`` columns, a tuple of arrays or a ``KeyedSharded`` one or more each.  ``columns``
    names them (default ``c0, c1, ...``; ``key, value`` for a keyed result).  ``tmr.read_csv`` reads the numbers
    back.  Directory, commit protocol, ``shared=`` and options as for [`write_npy`][tfmapreduce.write_npy].

    Examples:
        >>> import tempfile, os
        >>> folder = os.path.join(tempfile.mkdtemp(), "sums")
        >>> with tmr.sum_by_key(np.array([1, 2, 1]), np.array([1.5, 2.0, 3.0]), cluster=cluster, resident=True) as r:
        ...     written = tmr.write_csv(r, folder)
        >>> open(written.parts[0]).readline().strip()
        'key,value'
        >>> with tmr.read_csv(folder).persist(cluster=cluster) as table:
        ...     sorted(map(tuple, table.gather().tolist()))
        [(1.0, 4.5), (2.0, 2.0)]
    """
    if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '\r\n"':
        raise TypeError(f"write_csv: delimiter must be one character other than a quote or line break, got {delimiter!r}")
    if columns is not None and (isinstance(columns, str) or not all(isinstance(c, str) for c in columns)):
        raise TypeError(f"write_csv: columns must be a list of names, one per field, got {columns!r}")
    names = tuple(columns) if columns is not None else _key_columns(data)
    return _write(Csv(names, delimiter), data, directory, overwrite, shared, dict(options))


def write_tfrecord(
    data: Any,
    directory: str | os.PathLike[str],
    /,
    *,
    features: Sequence[str] | None = None,
    overwrite: bool = False,
    shared: bool = True,
    **options: Unpack[Options],
) -> Written:
    """Write ``data`` as TFRecord part files of one ``tf.train.Example`` per row, each shard's by the task that holds it.

    Each array of ``data`` (one, a tuple of co-partitioned arrays, or a ``KeyedSharded``'s keys and values) is one
    feature of every Example, named by ``features`` (default ``f0, f1, ...``; ``key, value`` for a keyed result),
    holding its row's values flattened: floats (float16, float32) in a ``float_list``, integers and booleans in
    an ``int64_list``, strings in a ``bytes_list``.  ``tmr.read_tfrecord(directory, features={name:
    tf.io.FixedLenFeature(row_shape, dtype)})`` reads them back.  The records are serialized and written on the
    workers.  Directory, commit protocol, ``shared=`` and options as for [`write_npy`][tfmapreduce.write_npy].

    Raises:
        TypeError: a dtype a ``tf.train.Feature`` cannot hold exactly (float64, uint64: the message says what to do),
            or ``features`` does not name each array once.

    Examples:
        >>> import tempfile, os
        >>> folder = os.path.join(tempfile.mkdtemp(), "records")
        >>> x, y = np.arange(6, dtype=np.float32).reshape(3, 2), np.array([7, 8, 9])
        >>> _ = tmr.write_tfrecord((x, y), folder, features=["x", "y"], cluster=cluster)
        >>> spec = {"x": tf.io.FixedLenFeature([2], tf.float32), "y": tf.io.FixedLenFeature([], tf.int64)}
        >>> with tmr.read_tfrecord(folder, features=spec).persist(cluster=cluster) as back:
        ...     back.gather().tolist()
        [[0.0, 1.0, 7.0], [2.0, 3.0, 8.0], [4.0, 5.0, 9.0]]
    """
    if features is not None and (isinstance(features, str) or not all(isinstance(f, str) for f in features)):
        raise TypeError(f"write_tfrecord: features must be a list of names, one per array, got {features!r}")
    names = tuple(features) if features is not None else _key_features(data)
    return _write(TfRecord(names), data, directory, overwrite, shared, dict(options))


def _key_features(data: Any) -> tuple[str, ...] | None:
    """The default features of a keyed result: key, then value (value0, value1, ... for several leaves)."""
    if not isinstance(data, KeyedSharded):
        return None
    n = len(data.leaves)
    return ("key", *(["value"] if n == 1 else [f"value{i}" for i in range(n)]))
