"""Whether the native kernels (see ``_native``) can be used on a cluster: the client and every task have them (each
op of them: its family built on the client)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import tensorflow as tf

from .._base.errors import ClusterError, JobError
from .._base.state import ClusterVar, Memo
from .._cluster.cluster import Cluster
from .._io.files.source import FileSource
from .._io.source import Sources
from .._native.loader import FAMILIES, has, kernels, log

_EVERYWHERE = ClusterVar("whether every task has the native kernels", lambda cluster: Memo[None, bool]())


def available(cluster: Cluster, timeout: float, *ops: str) -> bool:
    """Whether this client and every live task of ``cluster`` have the native kernels, and the client each op of ``ops``
    (``"tmr_wide_sum"``: its family built here; see ``_native``).  The tasks are asked once per cluster, with a run of
    one op of each family the client has: a task that lacks any of them counts as having none."""
    native = kernels()
    if native is None or not all(has(native, op) for op in ops):
        return False
    try:
        return cluster.state(_EVERYWHERE).get(None, lambda: _probe(cluster, timeout))
    except ClusterError:
        return False  # a task did not answer: ask again next time


_PROBES: dict[str, Callable[[Any], Any]] = {
    "words": lambda ops: ops.tmr_word_counts(tf.constant([""]))[1],
    "sorting": lambda ops: ops.tmr_stable_argsort(tf.zeros([0], tf.int64)),
    "by_key": lambda ops: ops.tmr_sums_by_key(tf.zeros([0], tf.int64), [], out_types=[], dense_slack=0)[-1],
    "csv": lambda ops: ops.tmr_decode_csv(tf.zeros([0], tf.string), out_types=[tf.int64], columns=[0], fields=1)[0],
    "csv_scan": lambda ops: ops.tmr_scan_csv("", 0, 0, 0, out_types=[tf.string], columns=1, kinds=["string"], null_values=[])[0][
        0
    ],
    "joins": lambda ops: ops.tmr_join_match(tf.zeros([0], tf.int64), tf.zeros([0], tf.int64), keep_probe=False, keep_build=False)[
        4
    ],
    "files": lambda ops: ops.tmr_read_rows("/dev/null", 0, 0, 0, T=tf.uint8, map=False),
    "runtime": lambda ops: ops.tmr_wide_sum(tf.zeros([0])),
}
"""A run of one op of each family of kernels that costs nothing (by family, as ``_native.FAMILIES`` names them)."""


def _probe(cluster: Cluster, timeout: float) -> bool:
    ops = kernels()
    assert ops is not None  # asked only where the client has them
    graph = tf.Graph()
    with graph.as_default():
        fetch = []
        for task in cluster.live_tasks:
            with tf.device(f"{task}/device:CPU:0"):
                fetch += [probe(ops) for family, probe in _PROBES.items() if has(ops, FAMILIES[family][0])]
    try:
        cluster.run(graph, fetch, {}, tasks=cluster.live_tasks, timeout=timeout)
    except JobError as e:  # a task without them: "Op type not registered 'TmrWordCounts'"
        log.info("a task of %r lacks native kernels this client has (%s): jobs use stock TensorFlow ops there", cluster, e)
        return False
    finally:
        cluster.forget(graph)
    return True


def with_kernels(srcs: Sources, cluster: Cluster, timeout: float) -> Sources:
    """``srcs`` with each file source read by its reader's native variant (``Reader.with_kernels``) where the client and
    every task of ``cluster`` have the kernels; as they are otherwise."""
    files = {i: s for i, s in enumerate(srcs) if isinstance(s, FileSource)}
    native = {i: f.reader.with_kernels() for i, f in files.items()}
    native = {i: r for i, r in native.items() if r is not files[i].reader}
    if not native or not available(cluster, timeout):
        return srcs
    return Sources(attrs.evolve(files[i], reader=native[i]) if i in native else s for i, s in enumerate(srcs))
