"""The spilled sort's runs: the spill (``spill.Spill``), then one distributed run per bucket of each reducer, then the
commit of the parts; the spill folders removed whatever happens (see ``spill`` for the design).

Example:
    >>> import shutil, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> written = tmr.sort(np.array([3.0, 1.0, 2.0]), directory=f"{folder}/out", max_bytes=1000, cluster=cluster)
    >>> np.concatenate([np.load(part) for part in written.parts]).tolist()
    [1.0, 2.0, 3.0]
    >>> shutil.rmtree(folder)
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

import attrs
import numpy as np
import tensorflow as tf

from .._base.device import Device
from .._base.errors import JobError, OutputError, ReducerMemoryError, WorkerTimeoutError, WorkerUnavailableError
from .._base.plan import Plan
from .._engine import driver as _engine
from .._engine.call import Call
from .._engine.kind import Kind
from .._engine.program import Builder, Program, Ready
from .._io.files.encode import PART_BYTES, NpyWriter, npy_bytes, npy_header, part_name
from .._io.files.written import Written
from .._io.source import Sources
from .._ops.budget import budget_of
from .._options import RunOptions
from .commit import MARKER, TEMPORARY, claim, commit, discard, open_attempt
from .spill import COPIES, REMOVE_SECONDS, RangeSorter, Spill, Spilled, Spilling, SpillPlan, again_after_spill, log, remove_spill

P = TypeVar("P", bound=Spilling)


class SpillingKind(Kind[P], Protocol[P]):
    """A spilling kind (``Spill``, ``grace.GraceSpill``): a kind whose program is fed its attempt's spill folder."""

    def fed(self, plan: P, name: str) -> str: ...


@attrs.define(eq=False, repr=False)
class SpillCall(Generic[P]):
    """One call's spill run as the driver runs it: the hooks of ``kind`` (which keeps nothing of a run), and the last
    attempt's plan and run (``Call``: its cluster, inputs and kernels), kept for this call alone so that it can reduce
    the spilled pieces and remove the spill folders however the run ends.  Each spilled call makes one."""

    kind: SpillingKind[P]
    planned: P | None = None
    """The plan of the last attempt (what to remove, where); None until the run has planned."""
    call: Call | None = None

    def __repr__(self) -> str:
        return repr(self.kind)

    @property
    def identity(self) -> Hashable:
        return self.kind.identity

    @property
    def ready(self) -> dict[Hashable, Ready]:
        return self.kind.ready

    @property
    def phase(self) -> str:
        return self.kind.phase

    @property
    def refused(self) -> Mapping[str, str]:
        return self.kind.refused

    def sources(self, x: Any) -> tuple[Sources, Any]:
        return self.kind.sources(x)

    def plan(self, shards: Plan, call: Call) -> P:
        self.planned, self.call = self.kind.plan(shards, call), call
        return self.planned

    def variant(self, plan: P, call: Call) -> Hashable | None:
        return self.kind.variant(plan, call)

    def shape_of(self, plan: P) -> Hashable | None:
        return self.kind.shape_of(plan)

    def fed(self, plan: P, name: str) -> str:
        return self.kind.fed(plan, name)

    def build(self, builder: Builder, plan: P, call: Call) -> Program:
        return self.kind.build(builder, plan, call)

    def finish(self, value: Any, program: Program | None, plan: P, call: Call) -> Any:
        return self.kind.finish(value, program, plan, call)

    def failure(self, error: JobError, plan: P) -> Exception | None:
        return self.kind.failure(error, plan)

    @contextlib.contextmanager
    def stage(self, what: str) -> Iterator[None]:
        """Within it, a run that times out or loses a worker raises as it did (the same type, task and address), its
        message naming the spilled job and ``what`` stage of it (the spill, or round j of P) ended it.

        Example:
            >>> from tfmapreduce._kinds.sort import Sort
            >>> call = SpillCall(spill_kind(Sort(False, 1000), None))
            >>> try:
            ...     with call.stage("round 2 of 3"):
            ...         raise tmr.WorkerTimeoutError("the run did not finish within its 5 s deadline")
            ... except tmr.WorkerTimeoutError as e:
            ...     print(str(e).split(": ")[0])
            spilled sort(descending=False), round 2 of 3
        """
        try:
            yield
        except (WorkerTimeoutError, WorkerUnavailableError) as e:
            raise type(e)(
                f"{self!r}, {what}: {e}; the job's spill files are removed on every task that answers",
                task=e.task,
                address=e.address,
            ) from e

    def remove(self) -> None:
        """The spill folder of the last attempt's run removed on the tasks it used (nothing, where it never planned)."""
        if self.planned is not None and self.call is not None:
            remove_spill(self.planned, self.call.native, self.call.cluster, REMOVE_SECONDS)


@attrs.frozen(eq=False)
class Rounds:
    """The one graph every bucket round runs (compiled once, then fed the round): in round ``j`` each reducer r reads
    bucket r·B + j from the shards' disks, sorts it and writes it as that part of each column's attempt folder."""

    graph: tf.Graph
    ops: list[Any]
    """What a round runs: the parts' writes."""
    round: tf.Tensor
    """Fed: the round ``j``."""
    parts: list[tuple[tf.Tensor, list[tf.Tensor]]]
    """Fed, per reducer: its part's file name, and each column's ``.npy`` header (the part's rows are known only now)."""

    def feed(self, spilled: Spilled, j: int, srcs: Sources) -> dict[tf.Tensor, Any]:
        """What round ``j`` is fed: its index, and each reducer's part's name and headers (each checked to fit a part)."""
        plan = spilled.plan
        fed: dict[tf.Tensor, Any] = {self.round: j}
        for r, (name, headers) in enumerate(self.parts):
            b = r * plan.buckets + j
            fed[name] = part_name(b, plan.ranges, NpyWriter.ext)
            for header, src, width in zip(headers, srcs, spilled.widths, strict=True):
                fed[header] = _header(src, width, int(spilled.rows[:, b].sum()))
        return fed


def _header(src: Any, width: int, rows: int) -> bytes:
    """The ``.npy`` header of a part of ``rows`` rows of ``src`` (strings: numpy's ``S{width}``), checked to fit a part."""
    dtype = np.dtype(f"S{max(1, width)}") if src.dtype == object else np.dtype(src.dtype)
    header = npy_header(dtype, (rows, *src.shape[1:]))
    if rows * math.prod(src.shape[1:]) * dtype.itemsize + len(header) > PART_BYTES:
        raise OutputError(
            f"a part of {rows} rows of {dtype} holds more than the 2 GiB one part can hold; sort over more reducers "
            "(reducers=N) or with a smaller max_bytes="
        )
    return header


def rounds(sort: RangeSorter, native: Any | None, spilled: Spilled, folders: Sequence[str], srcs: Sources) -> Rounds:
    """The graph of every bucket round (see :class:`Rounds`): each piece is read on its shard's task (every piece has a
    file for every bucket, empty or not), the parts written on the reducer's task into ``folders``."""
    plan = spilled.plan
    graph = tf.Graph()
    written: list[Any] = []
    parts = []
    with graph.as_default():
        j = tf.compat.v1.placeholder(tf.int64, [], name="round")
        for r, device in enumerate(plan.reducers):
            cpu = f"{Device.parse(device).task}/device:CPU:0"
            with tf.device(cpu), tf.name_scope(f"part{r}"):
                name = tf.compat.v1.placeholder(tf.string, [], name="name")
                headers = [tf.compat.v1.placeholder(tf.string, [], name=f"header{c}") for c in range(len(srcs))]
                bucket = tf.strings.as_string(r * plan.buckets + j, width=5, fill="0")
            parts.append((name, headers))
            columns = []
            for c, src in enumerate(srcs):
                dtype, row = tf.string if src.dtype == object else tf.as_dtype(src.dtype), tuple(src.shape[1:])
                pieces = []
                for i, (task, piece) in enumerate(spilled.pieces):
                    with tf.device(f"{task}/device:CPU:0"), tf.name_scope(f"read{r}_{i}"):
                        path = tf.strings.join([f"{spilled.folder}/b", bucket, f"-{piece}-c{c}"])
                        pieces.append(tf.ensure_shape(tf.io.parse_tensor(tf.io.read_file(path), dtype), (None, *row)))
                with tf.device(device):
                    columns.append(tf.concat(pieces, 0) if pieces else tf.zeros((0, *row), dtype))
            with tf.device(device), tf.name_scope(f"bucket{r}"):
                ordered = sort._sorted(columns, native)
            with tf.device(cpu), tf.name_scope(f"write{r}"):
                for folder, column, width, header in zip(folders, ordered, spilled.widths, headers, strict=True):
                    contents = npy_bytes(column, header, width)
                    with tf.control_dependencies([tf.io.read_file(f"{folder}/{MARKER}")]):
                        written.append(tf.io.write_file(tf.strings.join([folder, name], separator="/"), contents))
    return Rounds(graph, written, j, parts)


def check_buckets(plan: SpillPlan, spilled: Spilled) -> None:
    """Each bucket's exact bytes, held ``COPIES`` times, within the budget; else ``ReducerMemoryError`` naming it."""
    for b, (rows, size) in enumerate(zip(spilled.rows.sum(axis=0).tolist(), spilled.size.sum(axis=0).tolist(), strict=True)):
        if size * COPIES > plan.budget:
            raise ReducerMemoryError(
                f"bucket {b} of the spilled sort ({plan.reducers[b // plan.buckets]}) holds {rows:,} rows, "
                f"{size * COPIES:,} bytes while it sorts ({COPIES}× its rows), more than its budget of "
                f"{plan.budget:,} bytes: the sample under-estimated it (many equal keys?); nothing was written. Raise "
                "max_bytes= or sort over more reducers (reducers=N)"
            )


def written_of(directory: str, plan: SpillPlan, spilled: Spilled, src: Any, width: int) -> Written:
    """The ``Written`` of one column's committed parts (strings: numpy's ``S{width}``): part b on reducer b // B."""
    rows = spilled.rows.sum(axis=0).tolist()
    return Written(
        directory,
        tuple(os.path.join(directory, part_name(b, plan.ranges, ".npy")) for b in range(plan.ranges)),
        tuple(Device.parse(plan.reducers[b // plan.buckets]).task for b in range(plan.ranges)),
        tuple(int(n) for n in rows),
        True,
        NpyWriter.reader,
        (f"|S{max(1, width)}" if src.dtype == object else src.dtype.str, tuple(src.shape[1:])),
    )


def sort_spilled(
    sort: RangeSorter, x: Any, directories: Sequence[str], spill_dir: Any, options: dict[str, Any]
) -> tuple[Written, ...]:
    """Run a spilled sort of ``x`` (see the module): column ``j`` written to ``directories[j]``; its ``Written``s. A
    task lost after the spill while ``retries=`` are left makes the whole sort run again on the survivors, the failed
    attempt's directories removed first (``spill.again_after_spill``).

    Raises:
        OutputError: a directory is not empty, or a spill folder could not be written (the spill files are removed).
        ReducerMemoryError: one bucket would exceed the budget (nothing was written).
    """
    settings = RunOptions.of(**options)

    def again(fewer: RunOptions) -> tuple[Written, ...]:
        return sort_spilled(sort, x, directories, spill_dir, {**options, "retries": fewer.retries})

    written: tuple[Written, ...] = again_after_spill(
        lambda done: _sorted(sort, x, directories, spill_dir, settings, done), again, settings
    )
    return written


def _sorted(
    sort: RangeSorter, x: Any, directories: Sequence[str], spill_dir: Any, settings: RunOptions, done: list[Call]
) -> tuple[Written, ...]:
    """One attempt of :func:`sort_spilled`; the spill run's call is appended to ``done`` once it is done."""
    run: SpillCall[SpillPlan] = SpillCall(spill_kind(sort, spill_dir))
    claimed: list[tuple[str, bool]] = []
    try:
        for directory in directories:
            claimed.append(claim("sort", directory, False))
        try:
            with run.stage("the spill (each shard writing its buckets)"):
                spilled: Spilled = _engine.run(run, x, settings)
            plan, call = spilled.plan, run.call
            assert call is not None  # (set as the run planned)
            done.append(call)
            check_buckets(plan, spilled)
            log.info(
                "%r spilled %s bytes to %s: %d bucket(s) per reducer, one round each, the largest %d bytes (%d× while it "
                "sorts) within the budget of %d",
                run,
                f"{int(spilled.size.sum()):,}",
                plan.folder,
                plan.buckets,
                int(spilled.size.sum(axis=0).max(initial=0)),
                COPIES,
                plan.budget,
            )
            attempts = [os.path.join(path, TEMPORARY, f"0-{secrets.token_hex(4)}") for path, _ in claimed]
            for folder in attempts:
                open_attempt(folder)
            each = rounds(sort, call.native, spilled, attempts, call.srcs)
            try:
                for j in range(plan.buckets):
                    with run.stage(f"round {j + 1} of {plan.buckets} (each reducer sorting one bucket)"):
                        fed = each.feed(spilled, j, call.srcs)
                        call.cluster.run(each.graph, each.ops, fed, tasks=list(plan.tasks), timeout=settings.seconds())
            finally:
                call.cluster.forget(each.graph)
            names = [part_name(b, plan.ranges, NpyWriter.ext) for b in range(plan.ranges)]
            for (path, _), folder in zip(claimed, attempts, strict=True):
                commit("sort", path, folder, names, False)
        finally:
            run.remove()
    except BaseException:
        for path, made in claimed:
            discard(path, made)
        raise
    return tuple(
        written_of(path, plan, spilled, src, width)
        for (path, _), src, width in zip(claimed, call.srcs, spilled.widths, strict=True)
    )


def spill_kind(sort: RangeSorter, spill_dir: Any) -> Spill:
    """The spill run of ``sort`` under ``spill_dir`` (checked: an absolute path, or None: ``/tmp``)."""
    return Spill(sort, _spill_root(spill_dir), budget_of(sort.max_bytes))


def _spill_root(spill_dir: Any) -> str:
    if spill_dir is None:
        return "/tmp"
    if not isinstance(spill_dir, (str, os.PathLike)) or not os.path.isabs(os.fspath(spill_dir)):
        raise TypeError(
            f"spill_dir must be an absolute path (the folder each worker spills under, on its own disk), got {spill_dir!r}; "
            "e.g. spill_dir='/scratch'"
        )
    return os.fspath(spill_dir)
