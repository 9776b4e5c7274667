"""Writers: each shard of resident (or host) data written as its own part file by the task that holds it.

The graph of one write (one distributed execution)::

    shard i (on its device)   its rows encoded as one file or its records (``_encode``) and written on that task's CPU:
                              DIRECTORY/_temporary/<attempt>/part-0000i-of-0000n.EXT
    client, once it succeeded the attempt's parts moved into DIRECTORY, _SUCCESS written, _temporary removed

The commit protocol is Hadoop's ``FileOutputCommitter``'s: each attempt (a retried run is a new attempt) writes
under its own temporary folder, and only the attempt that succeeded is moved into place, so a failed, timed-out
or retried attempt never leaves a visible part, and no part appears twice (see ``commit``: the claim on the
directory, the marker each part's write reads first, the commit and the clean-up).  The directory is on a file
system the client and the writing tasks share, or (``shared=False``) on each task's own disk: then each task
checks its directory is empty in the run, and commits its own parts once the run succeeded (copied out of the
attempt's folder, then its ``_SUCCESS``: a graph cannot rename a file), and the readers given the ``Written`` pin
each part to its task.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

import attrs
import tensorflow as tf

from .._base.deadline import time_left
from .._base.errors import JobError, OutputError, TfMapReduceError, WorkerTimeoutError, WorkerUnavailableError
from .._base.plan import Plan
from .._engine.call import Call
from .._engine.kind import KindBase
from .._engine.program import Builder, Program
from .._io.files.encode import LINE_BREAK, SUCCESS, Format, NpyWriter, part_name
from .._io.files.written import Written
from .._io.keyed_input import keyed_sources
from .._io.source import Sources, streamed
from .commit import MARKER, TEMPORARY, abandon, commit, open_attempt, remove

NO_SPECULATION = (
    "speculate=True does not apply to writers: backups re-run a shard on another task and keep the first partial to "
    "finish, merged on the client, but a write's result is its part file, written on the shard's own task (and resident "
    "data is read there only); a write that hangs past timeout= is retried as a new attempt (retries=), whose parts alone "
    "are committed. Drop speculate="
)

NOT_EMPTY = "tfmapreduce-write: the directory is not empty"
"""The message of the in-run check that a task's directory is empty (``shared=False``)."""

DRAIN_TIME = 10.0
"""The least time a failed write's clean-up waits for the parts still being written (else what is left of its deadline)."""

_PART = re.compile(r"\bpart(\d+)/")
_WRITERS = ("WriteFile", "write_file", "DatasetToTFRecord")
"""The ops that write a part, as a failed run's error names them."""


def _part_lock(index: int) -> tf.Tensor:
    """On the current device: the lock of part ``index``'s writes (one per task and part index, shared by every write
    graph run there): a part's write holds it from its marker read to its file closed."""
    return tf.raw_ops.MutexV2(shared_name=f"tfmapreduce_write_part{index}")


@attrs.frozen
class WritePlan:
    """A write's plan: its shards, and the folder this attempt writes its parts under (each attempt plans its own).

    The folder is fed to the program (``Builder.per_run``), so it is not part of the plan's identity: every attempt of
    one layout runs one program.  The kind itself keeps nothing of a run or an attempt, so one :class:`Write` serves
    any number of runs, even at once (into one directory only one at a time: ``commit.claim``).

    Examples:
        >>> shards = tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum).plan(np.arange(4.0), cluster=cluster)
        >>> WritePlan(shards, "out/_temporary/a") == WritePlan(shards, "out/_temporary/b")
        True
    """

    shards: Plan
    folder: str = attrs.field(eq=False)
    """``<directory>/_temporary/<attempt>``: where this attempt's parts are written, committed only if it succeeds."""

    @property
    def tasks(self) -> tuple[Any, ...]:
        return self.shards.tasks


@attrs.define(eq=False, repr=False)
class Write(KindBase[WritePlan]):
    """A write as the run driver sees it (see ``_engine.kind.Kind``): each shard encoded and written on its own task."""

    format: Format
    directory: str
    overwrite: bool
    shared: bool = True
    """False: the directory is on each task's own disk; each task commits its own parts (:meth:`_commit_on_tasks`)."""
    phase: ClassVar[str] = "write"
    refused: ClassVar[Mapping[str, str]] = {
        "speculate": NO_SPECULATION,
        "reducers": "reducers= does not apply to a write (each shard is written where it lives); drop it",
        "batch_rows": "batch_rows= does not apply to a write (a shard is written whole); drop it",
        "return_stats": "return_stats= does not apply to a write (it returns its Written); use tmr.stats()",
        "partitioner": "partitioner={value!r} does not apply to a write (each shard is written where it lives); drop it, "
        "and pass partitioner='range' to the keyed job whose result you write",
    }

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
        return srcs, secrets.token_hex(4)  # the run's name: its attempts' folders begin with it (see plan)

    def plan(self, shards: Plan, call: Call) -> WritePlan:
        """The shards as they are, and a new attempt with its own folder, named for the run (``call.note``, see
        :meth:`sources`): the driver plans each attempt of a run.

        On a shared file system the client makes the folder and its marker, and removes the run's earlier attempts'
        folders (never another run's): a part of an abandoned attempt that is still to be written then finds no marker
        and is not written."""
        run = call.note
        folder = os.path.join(self.directory, TEMPORARY, f"{run}-{secrets.token_hex(4)}")
        if self.shared:
            abandon(os.path.join(self.directory, TEMPORARY), f"{run}-")
            open_attempt(folder)
        return WritePlan(shards, folder)

    def variant(self, plan: WritePlan, call: Call) -> Hashable | None:
        return ()  # the directory and attempt folder are fed: one program per layout

    def fed(self, plan: WritePlan, name: str) -> str:
        """The run's directory, or its plan's attempt folder (the program's placeholders of those names)."""
        return self.directory if name == "directory" else plan.folder

    def build(self, builder: Builder, plan: WritePlan, call: Call) -> Program:
        n = len(plan.shards.shards)
        written = []
        folder = builder.per_run("attempt")
        for shard in plan.shards.shards:
            with tf.device(shard.device), tf.name_scope(f"part{shard.index}"):
                tensors = builder.inputs(shard)
                with tf.device(f"{shard.task}/device:CPU:0"):  # encoding and file ops have CPU kernels only
                    contents = self.format.encode(tensors, shard.rows)
                    builder.mapped(shard, contents)
                    path = tf.strings.join([folder, part_name(shard.index, n, self.format.ext)], separator="/")
                    if not self.shared:
                        with tf.control_dependencies([self._empty_here(builder)]):
                            written.append(self.format.write(contents, path))
                        continue
                    with tf.control_dependencies([contents]):
                        lock = tf.raw_ops.MutexLock(mutex=_part_lock(shard.index))
                    with tf.control_dependencies([lock]):  # NotFound once the client is past this attempt: no late part
                        still_open = tf.io.read_file(tf.strings.join([folder, MARKER], separator="/"))
                    with tf.control_dependencies([still_open]):
                        wrote = self.format.write(contents, path)
                    with tf.control_dependencies([wrote]):
                        written.append(tf.raw_ops.ConsumeMutexLock(mutex_lock=lock))  # the lock held until the part is written
        return builder.program(written, plan.tasks)

    def clean_up(self, plan: WritePlan, call: Call, error: BaseException) -> None:
        """After a failed run (``shared=True``): the attempt's folder removed, its marker with it, so a part not yet
        begun is not written; then each part's lock taken once on its task, so a part still being written when the run
        failed has ended when this returns (its late file goes with ``_temporary``: ``writers``).  A task lost, or the
        one the error names where it stopped answering, is not waited for (the docs say what is not covered)."""
        if not self.shared:
            return
        with contextlib.suppress(OSError, tf.errors.OpError):
            remove(plan.folder)
        cluster, gone = call.cluster, set(call.cluster.lost)
        failed = getattr(error, "task", None)
        if isinstance(error, WorkerTimeoutError | WorkerUnavailableError) and failed is not None:
            gone.add(failed)
        shards = [s for s in plan.shards.shards if s.task not in gone]
        if not shards or cluster.closed:
            return
        graph = tf.Graph()
        with graph.as_default():
            taken = []
            for shard in shards:
                with tf.device(f"{shard.task}/device:CPU:0"):
                    taken.append(tf.raw_ops.ConsumeMutexLock(mutex_lock=tf.raw_ops.MutexLock(mutex=_part_lock(shard.index))))
        tasks = sorted({s.task for s in shards})
        master = tasks[0] if failed is not None and failed == cluster.master else None
        try:
            cluster.run(graph, taken, {}, tasks=tasks, timeout=max(DRAIN_TIME, time_left(call.settings.timeout)), master=master)
        except TfMapReduceError:
            pass  # a task lost since, or one still writing at the deadline: not waited for longer
        finally:
            cluster.forget(graph)

    def _empty_here(self, builder: Builder) -> tf.Operation:
        """On the current task: the check that its directory holds nothing but earlier attempts (``shared=False``, where
        the client cannot look); the directory's name matched literally (a ``[`` in it is no pattern)."""
        directory = tf.strings.regex_replace(builder.per_run("directory"), r"([\[*?])", r"[\1]")
        entries = tf.io.matching_files(tf.strings.join([directory, "*"], separator="/"))
        others = tf.boolean_mask(entries, tf.logical_not(tf.strings.regex_full_match(entries, f".*/{TEMPORARY}")))
        return tf.debugging.assert_equal(tf.size(others), 0, message=NOT_EMPTY, summarize=3)

    def finish(self, value: Any, program: Program | None, plan: WritePlan, call: Call) -> Written:
        """Commit the attempt that succeeded (``plan``'s): its parts moved into the directory, the rest removed,
        ``_SUCCESS`` written."""
        assert program is not None  # never speculative
        shards = plan.shards.shards
        n = len(shards)
        names = [part_name(s.index, n, self.format.ext) for s in shards]
        row = None
        if isinstance(self.format, NpyWriter):
            (src,) = call.srcs
            row = (src.dtype.str, tuple(src.shape[1:]))
        written = Written(
            self.directory,
            tuple(os.path.join(self.directory, name) for name in names),
            tuple(s.task for s in shards),
            tuple(s.rows for s in shards),
            self.shared,
            self.format.reader,
            row,
        )
        if not self.shared:
            self._commit_on_tasks(plan.folder, written, call)
            return written
        missing = [name for name in names if not tf.io.gfile.exists(os.path.join(plan.folder, name))]
        if missing:
            raise OutputError(
                f"{self!r}: the tasks wrote their parts but the client does not see {missing[0]} (of {len(missing)} missing) "
                f"under {plan.folder}: the directory must be on a file system the client and every writing task share"
            )
        commit(self.format.name, self.directory, plan.folder, names, self.overwrite)
        return written

    def _commit_on_tasks(self, folder: str, written: Written, call: Call) -> None:
        """``shared=False``: each task commits its own parts, as the client does on a shared file system, with the file
        ops a graph has: each part of the attempt copied into ``directory``, then that task's ``_SUCCESS`` written, then
        the attempt's copies emptied (a graph can neither rename nor remove a file)."""
        graph = tf.Graph()
        done = []
        with graph.as_default():
            for i, task in enumerate(sorted(set(written.tasks))):
                with tf.device(f"{task}/device:CPU:0"), tf.name_scope(f"commit{i}"):
                    mine = [p for p, t in zip(written.parts, written.tasks, strict=True) if t == task]
                    temporary = [os.path.join(folder, os.path.basename(p)) for p in mine]
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
                f"parts stay under {folder} on its disk and its {SUCCESS} may be missing: write again "
                "to a new directory"
            ) from None
        finally:
            call.cluster.forget(graph)

    def failure(self, error: JobError, plan: WritePlan) -> Exception | None:
        """A part of ``plan`` that could not be written (a full disk, no permission) or encoded, named with its task."""
        details = f"{error} {error.details}"
        found = _PART.search(error.details or str(error))
        if found is None:
            return None
        shards = plan.shards.shards
        index = int(found.group(1))
        if index >= len(shards):
            return None
        task, name = shards[index].task, self.format.name
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
