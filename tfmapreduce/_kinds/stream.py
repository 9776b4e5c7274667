"""The streaming fold: a job over a streamed source (files), compiled as batch-by-batch reductions on the tasks.

Each shard's pieces are read where the shard runs, as ``tf.data`` batches, or as
windows of plain graph ops where the source has them (mapped rows of local files);
each batch is mapped and turned into a partial with its own row count
(``combiner.partial(map_fn(batch), rows)``), and ``Dataset.reduce`` folds the
partials with ``combiner.merge`` inside the run.  A task therefore holds a few
batches at a time, never its shard.  The running state carries the rows read
so far: a combiner needs no identity element (the first batch's partial starts
the fold), a shard that reads nothing contributes nothing, and an input with no
rows at all maps one empty batch, as the in-memory path does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from .._base.errors import PlacementError
from .._base.plan import Plan, Shard
from .._base.task import Task
from .._cluster.cluster import Cluster
from .._io.source import Batches, Streamed
from .._ops.combine import Combiner
from .._ops.mapfn import map_shard

State = tuple[tf.Tensor, Any]
"""(rows folded so far as an int64 scalar, the running partial)."""


def _like(template: Any, value: Any) -> Any:
    """``value`` in ``template``'s nesting (a merge may return a list where the partial was a tuple)."""
    return tf.nest.pack_sequence_as(template, tf.nest.flatten(value))


def _merge_states(merge: Callable[[Any, Any], Any]) -> Callable[[State, State], State]:
    def merged(a: State, b: State) -> State:
        (na, pa), (nb, pb) = a, b

        def both() -> Any:
            return _like(pa, merge(pa, pb))

        value = tf.cond(na > 0, lambda: tf.cond(nb > 0, both, lambda: pa), lambda: pb)
        return na + nb, _like(pa, value)

    return merged


def _tree(parts: Sequence[State], merge: Callable[[State, State], State]) -> State:
    while len(parts) > 1:
        parts = [merge(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def _zeros(spec: tf.TensorSpec) -> tf.Tensor:
    shape = [0 if d is None else d for d in (spec.shape.as_list() if spec.shape.rank is not None else [])]
    return tf.zeros(shape, spec.dtype)


def _fold_windows(piece: Batches, state: State | None, mapped: Callable[[tuple[Any, ...]], State], combiner: Combiner) -> State:
    """``state`` with the partials of ``piece``'s windows merged into it, one window after another: each window is read
    once the state before it is made, so a task holds one window of the piece at a time."""
    for window in piece.windows:
        after = [] if state is None else [t for t in tf.nest.flatten(state) if isinstance(t, tf.Tensor)]
        with tf.control_dependencies(after):
            part = mapped((window(),))
        if state is None:
            state = part
            continue
        (total, value), (n, p) = state, part
        state = total + n, _like(value, combiner.merge(value, p))
    assert state is not None  # a piece has rows, so windows
    return state


def compile_fold(
    map_fn: Callable[..., Any],
    combiner: Combiner,
    plan: Plan,
    src: Streamed,
    bcast: tuple[Any, ...],
    cluster: Cluster,
    batch_rows: int | None,
    pieces_of: Callable[[Streamed, Shard, int | None], Sequence[Batches]],
) -> tuple[Any, tuple[Task, ...]]:
    """In the graph being built: a job over a streamed source, ``bcast`` its broadcast placeholders, each shard's pieces
    from ``pieces_of`` (``Builder.batches``); (fetch, tasks used)."""
    known = set(cluster.tasks)
    per_task: dict[Task, list[State]] = {}
    devices: dict[Task, str] = {}

    def mapped(shard: Shard, piece: Batches, batch: tuple[Any, ...]) -> Any:  # a batch: the map function's arguments
        rows = tf.shape(tf.nest.flatten(batch)[0], out_type=tf.int64)[0]
        return piece.counted(batch, (rows, combiner.partial(map_shard(map_fn, shard, list(batch), bcast), rows)))

    for shard in plan.shards:
        if shard.task not in known:
            raise PlacementError(
                f"{shard.task} reads files of this input but is not a task of {cluster!r}; pin the files to its tasks {[str(t) for t in cluster.tasks]}"
            )
        with tf.device(shard.device), tf.name_scope(f"shard{shard.index}"):
            pieces = pieces_of(src, shard, batch_rows)
            state: State | None = None
            for j, piece in enumerate(pieces):
                with tf.name_scope(f"piece{j}"):
                    if piece.windows:
                        state = _fold_windows(piece, state, functools.partial(mapped, shard, piece), combiner)
                        continue
                    batches = piece.dataset.filter(lambda *b: tf.shape(tf.nest.flatten(b)[0])[0] > 0)
                    parts = batches.map(lambda *b, shard=shard, piece=piece: mapped(shard, piece, b), num_parallel_calls=2)
                    if state is None:
                        state = (tf.constant(0, tf.int64), tf.nest.map_structure(_zeros, parts.element_spec[1]))
                    before = state[0]

                    def step(acc: State, part: tuple[tf.Tensor, Any]) -> State:
                        (total, value), (n, p) = acc, part
                        merged = tf.cond(total > 0, lambda: _like(p, combiner.merge(value, p)), lambda: p)
                        return total + n, _like(value, merged)

                    state = parts.reduce(state, step)
                    if piece.rows is not None:  # the rows the file's size promised when the run started
                        check = tf.debugging.assert_equal(
                            state[0] - before, tf.constant(piece.rows, tf.int64), message=piece.mismatch
                        )
                        with tf.control_dependencies([check]):
                            state = (tf.identity(state[0]), state[1])
            if state is not None:
                per_task.setdefault(shard.task, []).append(state)
                devices.setdefault(shard.task, shard.device)
    merge = _merge_states(combiner.merge)
    task_states = []
    for task, states in per_task.items():
        with tf.device(devices[task]), tf.name_scope("combine_task"):
            task_states.append(_tree(states, merge))
    with tf.device(f"{cluster.master}/device:CPU:0"), tf.name_scope("combine"):
        empty_shard = plan.shards[0]

        def nothing_read() -> Any:  # an input with no rows maps one empty batch, as in memory
            return combiner.partial(map_shard(map_fn, empty_shard, list(src.empty_batch()), bcast), tf.constant(0, tf.int64))

        if task_states:
            total, value = _tree(task_states, merge)
            fetch = combiner.finalize(_like(value, tf.cond(total > 0, lambda: value, lambda: _like(value, nothing_read()))))
        else:
            fetch = combiner.finalize(nothing_read())
    return fetch, tuple(per_task) or (cluster.master,)
