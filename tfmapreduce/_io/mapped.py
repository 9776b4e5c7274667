"""Files whose batches a run maps into memory, and the check after the run that each kept its size.

A file truncated while mapped reads zeros where its pages went (the native ``mapped`` reads); the
readers note each mapped file in the graph being built (:func:`note_mapped`) and the program that
fetches the run adds a check per file (:func:`size_checks`) that names it, as a failed read would.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from .._native.loader import kernels

MAPPED = "tfmapreduce_mapped_files"
"""The graph collection of ``(device, name scope, path, size)``: the files whose batches a run may map, and where
(:func:`note_mapped`, :func:`size_checks`)."""


def note_mapped(device: str, scope: str, path: str, size: int) -> None:
    """In the graph being built: the batches of ``path`` (``size`` bytes) read on ``device`` may be mapped; its check
    after the run (:func:`size_checks`) is named inside ``scope``, as the piece's own ops are."""
    tf.compat.v1.add_to_collection(MAPPED, (device, scope, path, size))


def size_checks(after: Any) -> list[tf.Tensor]:
    """In the graph being built: once ``after`` (what a run fetches) is made, on the device that read it, the check of
    each file whose batches may have been mapped (:func:`note_mapped`) that it still has its size of the run's start.

    A file truncated while mapped read zeros where its pages went (``_native/files.cc``'s ``mapped``); this check
    names it, as a read would have (the error :meth:`FileSource.input_error` knows).
    """
    graph = tf.compat.v1.get_default_graph()
    files = dict.fromkeys(graph.get_collection(MAPPED))
    if not files:
        return []
    ops = kernels()
    assert ops is not None  # noted only where the kernels are
    made = [t for t in tf.nest.flatten(after) if isinstance(t, tf.Tensor | tf.Operation)]
    checks = []
    for device, scope, path, size in files:
        with tf.device(device), tf.control_dependencies(made), graph.name_scope(f"{scope}/"):
            checks.append(ops.tmr_read_rows(path, size, 0, 0, T=tf.uint8, name="size_check"))  # fetched: no bytes
    return checks
