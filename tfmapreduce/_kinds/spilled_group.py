"""A group run or keyed combine over its reducers' budget, spilled: the grace-hash spill (``grace.GraceSpill``), one
distributed run per sub-partition round, and the spill folders removed whatever happens (see ``grace`` for the design).

``MapReduce`` runs a group job (or a keyed combine) in memory first; where a reducer's check refuses
its share (``OverBudget``, before any row travels), the job runs again through the workers' disks, with P
sub-partitions per reducer planned from the refused share, and returns what the in-memory run would have.

Example:
    >>> big = tmr.median_by_key(np.arange(4_000) % 500, np.arange(4_000.0), max_bytes=20_000, cluster=cluster)
    >>> big[7], float(np.median(np.arange(7, 4_000, 500)))
    (np.float64(1757.0), 1757.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from .._base.device import Device
from .._base.errors import JobError, ReducerMemoryError
from .._engine import driver as _engine
from .._engine.call import Call
from .._ops.per_key import merge
from .._ops.splitters import key_order
from .._options import RunOptions
from .grace import Graced, GracePlan, GraceSpill, read_pieces, spill_root
from .grouped import GroupBuilt, Grouped, group_native, group_result
from .keyed import Keyed
from .shuffle.map_side import in_key_order
from .shuffle.plan import KeyedPlan
from .shuffle.result import concatenated, sorted_result
from .shuffle.sharded import KeyedBuilt
from .spill import OverBudget, again_after_spill, log
from .spilled_hot import selected, takes_hot_keys, without
from .spilled_keep import kept, written
from .spilled_sort import SpillCall


def group_spilled(
    kind: Grouped | Keyed, x: Any, settings: RunOptions, broadcast: Sequence[Any], refused: OverBudget, *, resident: bool = False
) -> Any:
    """Run ``kind`` over ``x`` through each worker's disk (see the module), after the in-memory run was ``refused``.

    With ``resident=True`` each round's per-key results are written on their reducer's disk, then their concatenation
    kept on each reducer (``spilled_keep``): the ``KeyedSharded`` of the in-memory run, its keys on the same reducers.
    With ``partitioner="range"`` the sub-partitions are ranges and each round's results sorted: the result in key order.
    A task lost after the spill (its spill files with it) while ``retries=`` are left makes the whole job run again on
    the survivors, planned anew (each attempt a whole job: every row reduced once; ``RunStats`` counts it).

    Raises:
        ReducerMemoryError: one key's values alone exceed a reducer's budget (named, with its bytes; nothing reduced).
        OutputError: a spill folder could not be written (the spill files are removed).
    """

    def again(settings: RunOptions) -> Any:
        try:
            return _engine.run(kind, x, settings, broadcast, resident=resident)
        except OverBudget as refusal:
            return group_spilled(kind, x, settings, broadcast, refusal, resident=resident)

    return again_after_spill(lambda done: _spilled(kind, x, settings, broadcast, refused, resident, done), again, settings)


def _spilled(
    kind: Grouped | Keyed,
    x: Any,
    settings: RunOptions,
    broadcast: Sequence[Any],
    refused: OverBudget,
    resident: bool,
    done: list[Call],
) -> Any:
    """One attempt of :func:`group_spilled`; the spill run's call is appended to ``done`` once it is done."""
    spill = GraceSpill(kind, root=spill_root(), refusal=refused)
    run: SpillCall[GracePlan[KeyedPlan]] = SpillCall(spill)
    stats = None
    try:
        with run.stage("the spill (each task writing its sub-partitions)"):
            out = _engine.run(run, x, settings, broadcast)
        graced: Graced[KeyedPlan] = out[0] if settings.return_stats else out
        stats = out[1] if settings.return_stats else None
        call = run.call
        assert call is not None  # (set as the run planned)
        done.append(call)
        hot = check_parts(
            kind, graced, refused, call.cluster, settings.seconds(), hot_keys=takes_hot_keys(kind, graced, resident=resident)
        )
        held = graced.size.sum(axis=0)
        for b, _, share in hot:
            held[b] -= share  # (a hot key's values stay on their tasks' disks)
        log.info(
            "%r spilled %s bytes to %s: %d sub-partition(s) per reducer, the largest %d bytes within the budget of %d%s",
            kind,
            f"{int(graced.size.sum()):,}",
            graced.plan.folder,
            graced.plan.parts,
            int(held.max()),
            graced.plan.budget,
            "".join(f"; the hot key {_shown(k)!r} (about {n:,} bytes) reduced from the disks" for _, k, n in hot),
        )
        value: dict[int, Any] = {}
        info: Any = None
        native = group_native(graced.plan.keyed, call) if isinstance(kind, Grouped) else call.native
        for j in range(graced.plan.parts):
            graph = tf.Graph()
            with graph.as_default():
                outputs, built = (
                    reduce_round(kind, graced, j, native, keep=resident, hot=hot)
                    if isinstance(kind, Grouped)
                    else merge_round(kind, graced, j, native, keep=resident)
                )
            if not outputs:
                continue
            info = info or built
            try:
                with run.stage(f"round {j + 1} of {graced.plan.parts} (each reducer reducing one sub-partition)"):
                    order = sorted(outputs)
                    fetched = call.cluster.run(
                        graph, [outputs[b] for b in order], {}, tasks=list(graced.plan.tasks), timeout=settings.seconds()
                    )
                value.update(zip(order, fetched, strict=True))
            except JobError as e:  # the group's own reading of it (fn's rows per key), as the in-memory run gives
                raise (kind.failure(e, graced.plan.keyed) or e) from None
            finally:
                call.cluster.forget(graph)
        for i, (b, key, share) in enumerate(hot):  # each hot key's result, reduced from the disks (spilled_hot)
            with run.stage(f"the hot key {_shown(key)!r} (reduced from the disks)"):
                assert isinstance(kind, Grouped)
                value[len(graced.rows[0]) + i] = selected(kind, graced, b, (key, share), call.cluster, settings.seconds())
        decode = call.note[0] if graced.key_dtype == tf.string else None
        if resident:  # each reducer's rounds, read back from its disk and kept there (before the spill folder goes)
            built = info.built if isinstance(info, GroupBuilt) else KeyedBuilt(graced.key_dtype, info)
            rounds: dict[int, int] = {}  # a hot key's row, written as a round of its sub-partition's reducer
            for i, (b, _, _) in enumerate(hot):
                rounds[at := len(graced.rows[0]) + i] = b // graced.plan.parts
                value[at] = _written_row(graced, at, rounds[at], value[at], info, call, settings.seconds())
            counts = {b: np.asarray(n, np.int64).ravel() for b, n in value.items()}
            with run.stage("keeping each reducer's rounds (resident=True)"):
                result: Any = kept(graced, counts, built, call, decode, settings.seconds(), rounds)
            return (result, stats) if settings.return_stats else result
    finally:
        run.remove()
    parts = [value[b] for b in sorted(value)]  # reducer r's rounds, then r + 1's: a range partition's key order
    ordered = graced.plan.keyed.partitioner == "range" and not hot  # (a hot key's result comes last: sorted here)
    if isinstance(kind, Grouped):
        assert info is not None  # (a refused share has rows)
        result = group_result(parts, info, call.note[0], ordered=ordered)
    else:
        keys, per_key = concatenated(parts)
        result = sorted_result(keys, per_key, decode=decode, ordered=ordered)
    return (result, stats) if settings.return_stats else result


def reduce_round(
    kind: Grouped,
    graced: Graced[KeyedPlan],
    j: int,
    native: Any | None,
    *,
    keep: bool = False,
    hot: Sequence[tuple[int, Any, int]] = (),
) -> tuple[dict[int, Any], GroupBuilt | None]:
    """In the current graph, round ``j``: each reducer r reads sub-partition r·P + j from every task's disk and reduces
    it as the in-memory run reduces its share (a range partition's: sorted by key); the fetches (keys, leaves; ragged
    ones as (flat values, row splits)) of the reducers with rows, by sub-partition, and the build.  ``keep``: each
    reducer's result is written on its own disk instead (``spilled_keep.written``), and its counts fetched.  ``hot``:
    the (sub-partition, key, bytes) of each key whose rows are left on their tasks (``spilled_hot`` reduces it)."""
    plan = graced.plan
    outputs: dict[int, Any] = {}
    built = None
    for r, device in enumerate(plan.keyed.reducers):
        b = r * plan.parts + j
        if not int(graced.rows[:, b].sum()):
            continue
        with tf.device(device), tf.name_scope(f"part{b}"):
            pieces = [read_pieces(graced, b, c) for c in range(1 + len(graced.leaves))]
            left = [key for at, key, _ in hot if at == b]
            if left:
                pieces = [without(p, pieces[0], left) for p in pieces]
            columns = [tf.concat(p, 0) for p in pieces]
            values = tf.nest.pack_sequence_as(graced.structure, columns[1:])
            keys, output = kind._reduce(r, device, columns[0], values, native)
            order = key_order(keys, native) if plan.keyed.partitioner == "range" else None
            result, shape, ragged = kind._leaves(r, device, keys, output, order)
            keys = tf.identity(keys if order is None else tf.gather(keys, order))
            if keep:
                outputs[b] = written(graced, b, keys, tf.nest.pack_sequence_as(shape, _leaves_of(result, ragged)))
            else:
                outputs[b] = (keys, result)
        if built is None:
            leaves = [leaf[0] if is_ragged else leaf for leaf, is_ragged in zip(result, ragged, strict=True)]
            specs = tf.nest.pack_sequence_as(shape, [tf.TensorSpec(t.shape[1:], t.dtype) for t in leaves])
            built = GroupBuilt(KeyedBuilt(graced.key_dtype, specs, False, ragged), shape)
    return outputs, built


def _written_row(
    graced: Graced[KeyedPlan], at: int, reducer: int, row: tuple[Any, list[Any]], info: GroupBuilt, call: Call, timeout: float
) -> Any:
    """A hot key's result ``row`` (its key, its leaves as ``selected`` gives them) written on ``reducer`` as round
    ``at`` (``spilled_keep.written``); what ``written`` fetched."""
    graph = tf.Graph()
    with graph.as_default(), tf.device(graced.plan.keyed.reducers[reducer]):
        key, leaves = row
        tensors = [
            tuple(map(tf.constant, leaf)) if ragged else tf.constant(leaf)
            for leaf, ragged in zip(leaves, info.built.ragged, strict=True)
        ]
        values = tf.nest.pack_sequence_as(info.structure, _leaves_of(tensors, info.built.ragged))
        fetch = written(graced, at, tf.constant(key, graced.key_dtype), values, reducer)
    try:
        return call.cluster.run(graph, fetch, {}, tasks=list(graced.plan.tasks), timeout=timeout)
    finally:
        call.cluster.forget(graph)


def _leaves_of(result: list[Any], ragged: tuple[bool, ...]) -> list[Any]:
    """A group round's result leaves as tensors: a ragged one's (flat values, row splits) as its ``tf.RaggedTensor``."""
    return [
        tf.RaggedTensor.from_row_splits(*leaf, validate=False) if is_ragged else leaf
        for leaf, is_ragged in zip(result, ragged, strict=True)
    ]


def merge_round(
    kind: Keyed, graced: Graced[KeyedPlan], j: int, native: Any | None, *, keep: bool = False
) -> tuple[dict[int, Any], Any]:
    """In the current graph, round ``j`` of a keyed job: each reducer r reads sub-partition r·P + j from every task's
    disk, merges the tasks' per-key partials and finalizes them (a range partition's: sorted by key), as the in-memory
    run merges its share; the fetches by sub-partition, and the values' row specs.  ``keep``: each reducer's result is
    written on its own disk instead (``spilled_keep.written``), and its rows fetched."""
    plan, form = graced.plan, kind.combiner.per_key
    assert form is not None  # (a keyed job's combiner has its per-key form)
    outputs: dict[int, Any] = {}
    specs = None
    for r, device in enumerate(plan.keyed.reducers):
        b = r * plan.parts + j
        if not int(graced.rows[:, b].sum()):
            continue
        with tf.device(device), tf.name_scope(f"part{b}"):
            columns = [read_pieces(graced, b, c) for c in range(1 + len(graced.leaves))]
            parts = [(k, tf.nest.pack_sequence_as(graced.structure, list(v))) for k, *v in zip(*columns, strict=True)]
            keys, partial = merge(parts, form, native)
            values = form.finalize(partial)
            if plan.keyed.partitioner == "range":
                keys, values = in_key_order(keys, values)
        specs = tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape[1:], t.dtype), values)
        outputs[b] = written(graced, b, keys, values) if keep else (tf.identity(keys), tf.nest.map_structure(tf.identity, values))
    return outputs, specs


def check_parts(
    kind: Grouped | Keyed, graced: Graced[KeyedPlan], refused: OverBudget, cluster: Any, timeout: float, *, hot_keys: bool
) -> list[tuple[int, Any, int]]:
    """Each sub-partition's bytes within the budget; else ``ReducerMemoryError`` naming its largest key and its bytes.
    With ``hot_keys`` (``spilled_hot.takes_hot_keys``) a sub-partition over it by keys whose values alone each exceed
    it, the rest within it, passes: each such hot key's (sub-partition, key, bytes)."""
    plan = graced.plan
    hot: list[tuple[int, Any, int]] = []
    for b, size in enumerate(graced.size.sum(axis=0).tolist()):
        if size <= plan.budget:
            continue
        found = _largest_keys(graced, b, cluster, timeout, size // plan.budget + 1)
        total = int(graced.rows[:, b].sum())
        rest, peeled = size, 0
        for key, rows in found:  # the largest keys over the budget, until the rest is within it
            share = size * rows // max(1, total)
            if not hot_keys or share <= plan.budget or rest <= plan.budget:
                break
            hot.append((b, key, share))
            rest, peeled = rest - share, peeled + 1
        if rest <= plan.budget:
            continue
        key, rows = found[min(peeled, len(found) - 1)]
        share = size * rows // max(1, total)
        r, limit = b // plan.parts, f"more than its budget of {plan.budget:,} bytes ({refused.overrun.limit})"
        where = f"reducer {r} ({plan.keyed.reducers[r]})"
        spilled = f"even spilled to disk in {plan.parts} sub-partitions per reducer"
        key = _shown(key)
        if share > plan.budget:
            others = f" ({size:,} with the other keys of its sub-partition)" if rows < total else ""
            raise ReducerMemoryError(
                f"{kind!r}: {where} would receive {rows:,} values of the key {key!r} alone, about {share:,} bytes of keys "
                f"and values{others}, {limit}, {spilled}: a group reducer holds every value of a key at once; nothing was "
                "reduced. Raise max_bytes= where the host has the memory, split the hot key (e.g. salt it and combine the "
                "parts), or use a combiner recipe (sum/mean/min/max/variance_by_key) whose partials are one row per key; "
                "median_by_key, quantile_by_key, top_k_by_key, count_distinct_by_key and collect_by_key take a hot key, "
                "reduced from the disks (fetched; with resident=True all but collect_by_key, partitioned by hash)"
            )
        raise ReducerMemoryError(
            f"{kind!r}: sub-partition {b} of {where} holds {rest:,} bytes of keys and values, {limit}, {spilled}: its "
            f"keys hashed unevenly (the largest, {key!r}, has {rows:,} values); nothing was reduced. Spread the keys over "
            "more reducers (reducers=N), or raise max_bytes= where the host has the memory"
        )
    return hot


def _shown(key: Any) -> Any:
    """A key as a message names it: a string key decoded."""
    return key.decode(errors="replace") if isinstance(key, bytes) else key


def _largest_keys(graced: Graced[KeyedPlan], b: int, cluster: Any, timeout: float, k: int) -> list[tuple[Any, int]]:
    """The ``k`` keys with the most rows in sub-partition ``b`` (fewer where it has fewer) and their rows, most first:
    counted on each task, summed on the first reducer's task."""
    device = f"{Device.parse(graced.plan.keyed.reducers[0]).task}/device:CPU:0"
    graph = tf.Graph()
    with graph.as_default():
        counted = []
        for piece in read_pieces(graced, b, 0):
            with tf.device(piece.device):
                distinct, _, counts = tf.unique_with_counts(piece, out_idx=tf.int64)
                counted.append((distinct, counts))
        with tf.device(device):
            keys, ids = tf.unique(tf.concat([k for k, _ in counted], 0), out_idx=tf.int64)
            counts = tf.math.unsorted_segment_sum(tf.concat([c for _, c in counted], 0), ids, tf.size(keys, tf.int64))
            top = tf.math.top_k(counts, tf.minimum(tf.size(counts), min(k, 64)))
            fetch = (tf.gather(keys, top.indices), top.values)
    try:
        keys, rows = cluster.run(graph, fetch, {}, tasks=list(graced.plan.tasks), timeout=timeout)
    finally:
        cluster.forget(graph)
    return [
        (key if isinstance(key, bytes) else np.asarray(key).item(), int(n))
        for key, n in zip(keys.tolist(), rows.tolist(), strict=True)
    ]
