"""Whether the native kernels (see ``_native``) can be used on a cluster: the client and every task have them."""

from __future__ import annotations

import attrs
import tensorflow as tf

from .._base.errors import ClusterError, JobError
from .._base.state import ClusterVar, Memo
from .._cluster.cluster import Cluster
from .._io.files.source import FileSource
from .._io.source import Sources
from .._native.loader import kernels, log

_EVERYWHERE = ClusterVar("whether every task has the native kernels", lambda cluster: Memo[None, bool]())


def available(cluster: Cluster, timeout: float) -> bool:
    """Whether this client and every live task of ``cluster`` have the native kernels (asked of the tasks once per
    cluster, with a run of the kernel on an empty string)."""
    if kernels() is None:
        return False
    try:
        return cluster.state(_EVERYWHERE).get(None, lambda: _probe(cluster, timeout))
    except ClusterError:
        return False  # a task did not answer: ask again next time


def _probe(cluster: Cluster, timeout: float) -> bool:
    ops = kernels()
    assert ops is not None  # asked only where the client has them
    graph = tf.Graph()
    with graph.as_default():
        fetch = []
        for task in cluster.live_tasks:
            with tf.device(f"{task}/device:CPU:0"):
                fetch.append(ops.tmr_word_counts(tf.constant([""]))[1])
    try:
        cluster.run(graph, fetch, {}, tasks=cluster.live_tasks, timeout=timeout)
    except JobError as e:  # a task without them: "Op type not registered 'TmrWordCounts'"
        log.info("a task of %r has no native kernels (%s): jobs use stock TensorFlow ops there", cluster, e)
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
