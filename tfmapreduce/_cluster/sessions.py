"""How a session is made and called: its config (a deadline on everything, only the tasks it needs, hard placement),
which graphs a run may make again, and the fastest way to run a fetch."""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.python.client import pywrap_tf_session
from tensorflow.python.framework import op_def_registry

from .._base.task import Task


def session_config(tasks: Iterable[Task], timeout: float, *, fold_constants: bool = True) -> tf.compat.v1.ConfigProto:
    """A ConfigProto that bounds every call by ``timeout`` and talks only to ``tasks``.

    ``fold_constants=False`` turns off the classic graph optimizer (opt level L0) for graphs that map
    shared memory: it would read an ``ImmutableConst`` once and fold its first contents into the graph.

    Grappler is off: besides the graph, it optimized every ``tf.data`` function again each time a run made its
    dataset, about 3 ms a function (7.4 → 2.5 ms a run for ``range.map.reduce`` in one process); a file job over 4
    files read 42 → 18 ms a run, a 200 MB ``.npy`` mean 91 → 67 ms, with no slower job in the benchmarks.
    """
    config = tf.compat.v1.ConfigProto(
        operation_timeout_in_ms=max(1, int(timeout * 1000)),
        device_filters=sorted({str(t) for t in tasks}),
        allow_soft_placement=False,
    )
    if not fold_constants:
        config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    return config


REPEATABLE = frozenset(
    {"Assert", "If", "While", "StatefulPartitionedCall", "Timestamp", "ReadVariableOp", "VarHandleOp", "VarIsInitializedOp"}
    | {"TmrCheckCancelled"}
    | {"RandomStandardNormal", "RandomUniform", "RandomUniformInt", "TruncatedNormal", "Multinomial", "RandomShuffle"}
)
"""Stateful ops a run may repeat with no effect beyond its own result: checks, control flow (whose bodies are looked at
too), clocks, variable reads and random draws; datasets (reads) besides.  A graph with any other stateful op (a print,
an assignment, a file write, a py_function) is never cancelled and made again (see :func:`run`)."""


COUNTING = "tmr_progress"
"""The name of every op that counts a run's progress (``_progress``): a run sets its counters to 0 first, so a run made
again counts right too."""


def repeatable(graph: tf.Graph) -> bool:
    """Whether a run of ``graph`` may be cancelled and made again without doing anything twice (see :data:`REPEATABLE`)."""
    types = {op.type for op in graph.get_operations() if not op.name.split("/")[-1].startswith(COUNTING)}
    types |= {
        node.op
        for function in graph.as_graph_def().library.function
        for node in function.node_def
        if not node.name.startswith(COUNTING)
    }
    for name in types:
        if name in REPEATABLE or re.search(r"Dataset(V\d+)?$", name):
            continue
        op_def = op_def_registry.get(name)
        if op_def is None or op_def.is_stateful:
            return False
    return True


def session_callable(session: tf.compat.v1.Session, fetches: Any, feeds: tuple[Any, ...]) -> Callable[..., Any]:
    """As :func:`runner`, through ``Session.make_callable``: ``(values, options, run_metadata=None)``, the run's step
    stats written into ``run_metadata`` when one is given."""
    made = session.make_callable(fetches, feed_list=list(feeds) or None, accept_options=True)
    return lambda values, options, run_metadata=None: made(*values, options=options, run_metadata=run_metadata)


def runner(session: tf.compat.v1.Session, fetches: Any, feeds: tuple[Any, ...]) -> Callable[[list[Any], Any], Any]:
    """A run of ``fetches`` of ``session``'s graph: ``runner(...)(values, options)`` with the values of ``feeds`` in
    order and the run's ``RunOptions``.

    Made straight through TensorFlow's C API (``TF_SessionRun``), its errors read as ``Session.run`` reads them: that
    skips ``Session.run``'s per-call Python (its fetch handler, feed checks and conversions), measured at 0.25 ms of a
    2.5 ms run of a 100-element mean on two workers here (the tiny shipped job of ``python -m benchmarks``).  Where a
    fetch is not a tensor (an op) or a feed not an array (a resource), ``Session.make_callable`` serves instead.
    """
    flat = tf.nest.flatten(fetches)
    if not flat or not all(isinstance(t, tf.Tensor) for t in flat) or any(f.dtype in (tf.resource, tf.variant) for f in feeds):
        return session_callable(session, fetches, feeds)
    # Private: the session's C handle, and how Session._do_run calls TensorFlow and names an op's error.
    outputs = [t._as_tf_output() for t in flat]
    inputs = [f._as_tf_output() for f in feeds]
    dtypes = [f.dtype.as_numpy_dtype for f in feeds]
    pack: Callable[[list[Any]], Any]  # the fetched values in the structure of ``fetches`` (``tf.nest`` for a nested one)
    if fetches is flat[0]:
        pack = operator.itemgetter(0)
    elif type(fetches) in (tuple, list) and list(map(id, fetches)) == list(map(id, flat)):  # flat: ((a, b), (), (c,)) is not
        pack = type(fetches)
    else:
        pack = functools.partial(tf.nest.pack_sequence_as, fetches)

    extended = [-1]  # the graph's version the session last saw: ops added since are sent to it first, as run() does

    def run_once(feed: dict[Any, Any], options: Any) -> Any:
        if session.graph.version != extended[0]:
            version = session.graph.version
            session._extend_graph()
            extended[0] = version
        return pywrap_tf_session.TF_SessionRun_wrapper(session._session, options, feed, outputs, [], None)

    def run(values: list[Any], options: tf.compat.v1.RunOptions) -> Any:
        feed = {i: np.asarray(v, dtype=d) for i, v, d in zip(inputs, values, dtypes, strict=True)}
        buffer = pywrap_tf_session.TF_NewBufferFromString(options.SerializeToString())
        try:
            return pack(session._do_call(run_once, feed, buffer))
        finally:
            pywrap_tf_session.TF_DeleteBuffer(buffer)

    return run
