"""Progress of one run: the rows mapped so far on each task, counted by the run itself and read while it is in flight.

A program counts each shard's mapped rows in a variable on the shard's task (:class:`Counters`, built with the
program): a streamed shard (files) adds each batch's rows once the batch is mapped, an in-memory shard adds its rows
once its map is done, and every run first sets its counters to 0.  While a run goes, :func:`shown` reads them
through a second session every :data:`POLL` seconds and draws one tqdm bar on stderr: rows mapped (out of the
run's rows where they are known before reading), each task's rows as its postfix, and the phase after the map
(``reduce`` for a keyed run) once every row is mapped.  The same counters tell ``RunStats`` the rows a streamed
run actually read (:meth:`Counters.read`).

Counting costs one scalar addition per batch, and nothing for in-memory runs under :data:`COUNTED` rows (they end
before a bar would show).  Two runs of one program at the same time share its counters, so each one's bar (and
rows read) counts both.
"""

from __future__ import annotations

import contextlib
import functools
import secrets
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import tensorflow as tf

from .._base.errors import TfMapReduceError
from .._base.plan import Shard
from .._cluster.cluster import Cluster
from .._cluster.sessions import COUNTING as SCOPE
from .._io.source import Batches

COUNTED = 1 << 16
"""In-memory programs of fewer rows count nothing."""
DELAY = 2.0
"""Seconds a run goes before ``progress=None`` shows its bar (on a terminal); ``progress=True`` shows it at once."""
POLL = 0.3
"""Seconds between two reads of the counters while a bar is shown."""


@attrs.define(eq=False)
class Counters:
    """The rows each shard of a program has mapped, as variables on the shards' tasks (built in the program's graph)."""

    after: str
    """What the run does once every row is mapped (the bar's phase then): ``"combine"``, ``"reduce"``, ``"write"``..."""
    token: str = attrs.field(factory=lambda: secrets.token_hex(8))
    """Names this program's counters apart from every other program's and client's."""
    shards: dict[int, tuple[Shard, tf.Tensor, tf.Operation]] = attrs.field(factory=dict)
    """Each counted shard's index → the shard, its counter's handle and the op that sets it to 0."""
    total: int | None = 0
    """The rows the run maps, where known before reading (None: a file whose rows only reading tells)."""
    unit: str = "rows"
    """What is counted: ``"rows"``, or ``"bytes"`` where the batches are blocks of lines (``Batches.counts``)."""
    _reader: tuple[tf.Graph, list[tf.Tensor]] | None = None

    def _name(self, shard: Shard) -> str:
        return f"{SCOPE}_{self.token}_{shard.index}"

    def _counter(self, shard: Shard) -> tuple[tf.Tensor, tf.Operation]:
        found = self.shards.get(shard.index)
        if found is None:
            with tf.device(f"{shard.task}/device:CPU:0"):
                handle = tf.raw_ops.VarHandleOp(dtype=tf.int64, shape=[], shared_name=self._name(shard), name=SCOPE)
                reset = tf.raw_ops.AssignVariableOp(resource=handle, value=tf.constant(0, tf.int64), name=SCOPE)
            found = self.shards[shard.index] = (shard, handle, reset)
        return found[1], found[2]

    def streamed(self, shard: Shard, piece: Batches) -> Batches:
        """``piece`` of ``shard`` read after the run's reset, each batch counted by the job's own per-batch function
        (``Batches.counted``: a stage of its own would cost each batch a function call)."""
        handle, reset = self._counter(shard)
        self.total = None if self.total is None or piece.rows is None else self.total + piece.rows
        self.unit = piece.counts

        def count(batch: Any) -> list[tf.Operation]:
            first = tf.nest.flatten(batch)[0]
            n = (
                tf.reduce_sum(tf.cast(tf.strings.length(first), tf.int64))
                if piece.counts == "bytes"
                else tf.shape(first, out_type=tf.int64)[0]
            )
            with tf.control_dependencies([first]):  # after the batch (a window's rows are known when built: n is constant)
                return [tf.raw_ops.AssignAddVariableOp(resource=handle, value=n, name=SCOPE)]

        def after_reset(window: Callable[[], tf.Tensor]) -> tf.Tensor:
            with tf.control_dependencies([reset]):  # its read, and every op it makes
                return window()

        with tf.control_dependencies([reset]):  # a pass-through dataset op that runs once the counter is 0
            dataset = piece.dataset.take(-1)
        windows = tuple(functools.partial(after_reset, w) for w in piece.windows)
        return attrs.evolve(piece, dataset=dataset, count=count, windows=windows)

    def mapped(self, shard: Shard, partial: Any, data: tf.Tensor | None = None) -> tf.Operation:
        """The op that adds an in-memory shard's rows once its ``partial`` is made (fetched with the run): the rows of
        ``data``, its first input, as the run reads them (a program may serve data of other rows), else ``shard.rows``."""
        handle, reset = self._counter(shard)
        if self.total is not None:
            self.total += shard.rows
        made = [t for t in tf.nest.flatten(partial) if isinstance(t, tf.Tensor | tf.Operation)]
        with tf.device(shard.device):  # where the data is (a GPU's shape is in host memory): no copy of it
            rows = tf.constant(shard.rows, tf.int64) if data is None else tf.shape(data, out_type=tf.int64)[0]
        with tf.control_dependencies([reset, *made]), tf.device(f"{shard.task}/device:CPU:0"):
            return tf.raw_ops.AssignAddVariableOp(resource=handle, value=rows, name=SCOPE)

    def read(self, cluster: Cluster, timeout: float) -> dict[Shard, int]:
        """Each counted shard's rows mapped so far (or by the end of the run just made), read in a run of their own."""
        if self._reader is None:
            graph, values = tf.Graph(), []
            with graph.as_default():
                for shard, _, _ in self.shards.values():
                    with tf.device(f"{shard.task}/device:CPU:0"):
                        handle = tf.raw_ops.VarHandleOp(dtype=tf.int64, shape=[], shared_name=self._name(shard))
                        values.append(
                            tf.cond(
                                tf.raw_ops.VarIsInitializedOp(resource=handle),
                                lambda handle=handle: tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.int64),
                                lambda: tf.constant(0, tf.int64),
                            )
                        )
            graph.finalize()
            self._reader = (graph, values)
        graph, values = self._reader
        tasks = sorted({shard.task for shard, _, _ in self.shards.values()})
        counts = cluster.run(graph, values, {}, tasks=tasks, timeout=timeout)
        return {shard: int(n) for (shard, _, _), n in zip(self.shards.values(), counts, strict=True)}


def _terminal() -> bool:
    """Whether stderr shows a bar: a terminal, or a Jupyter kernel (tqdm.auto draws a widget there)."""
    return "ipykernel" in sys.modules or (hasattr(sys.stderr, "isatty") and sys.stderr.isatty())


@contextlib.contextmanager
def shown(
    counters: Counters | None, cluster: Cluster, progress: bool | None, label: str, total: int | None = None
) -> Iterator[None]:
    """While the block runs a program with ``counters``: its bar, as ``progress`` asks (see ``RunOptions.progress``),
    out of ``total`` rows (None: the rows the program was built for, or unknown)."""
    if counters is None or not counters.shards or progress is False or (progress is None and not _terminal()):
        yield
        return
    done = threading.Event()
    total = counters.total if total is None or counters.total is None else total
    thread = threading.Thread(target=_draw, args=(counters, cluster, progress, label, done, total), daemon=True, name=SCOPE)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _draw(
    counters: Counters, cluster: Cluster, progress: bool | None, label: str, done: threading.Event, total: int | None
) -> None:
    """The bar's thread: waits out the delay, then reads the counters every POLL seconds until the run is done."""
    if done.wait(0.0 if progress else DELAY):
        return  # over before a bar was due
    from tqdm.auto import tqdm

    tasks = sorted({shard.task for shard, _, _ in counters.shards.values()})
    unit = "B" if counters.unit == "bytes" else " rows"
    bar = tqdm(total=total, desc=f"{label}: map", unit=unit, unit_scale=True, leave=True, dynamic_ncols=True)
    try:
        while True:
            last = done.wait(POLL)
            try:
                counts = counters.read(cluster, timeout=POLL + 1.0)
            except TfMapReduceError:  # a busy or lost task: the run itself says what happened
                counts = None
            if counts is not None:
                rows = sum(counts.values())
                per_task = {t: sum(n for s, n in counts.items() if s.task == t) for t in tasks}
                bar.set_postfix_str(", ".join(f"{t.job}:{t.index} {_short(n)}" for t, n in per_task.items()), refresh=False)
                if total is not None and rows >= total:
                    bar.set_description_str(f"{label}: {counters.after}", refresh=False)
                bar.update(rows - bar.n)
            if last:
                return
    finally:
        bar.close()


def _short(n: int) -> str:
    """``n``, short: 950, 12.3k, 4.56M."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)
