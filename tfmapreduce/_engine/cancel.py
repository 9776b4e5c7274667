"""A given-up run stops at its next op: a cancellation check before each op of a program that computes.

TensorFlow's executor runs a step's kernels on once they are scheduled, even after the step is
cancelled (its deadline passed, the client gave up, another task failed): only kernels that wait
(receives, queues, datasets) see the cancellation.  A map of many compute kernels therefore ran on
for seconds after its run was given up, slowing the runs after it.  Before each op with data inputs
on a CPU device, :func:`guard` adds a ``TmrCheckCancelled`` (``_native/runtime.cc``) that runs once the op's
inputs are ready and fails once the step is cancelled; the op then never starts, nor what follows it
(ops whose inputs are all small and of known shape are not checked: they end quickly; nor are element-wise ops and
slices, a pass over their input at memory speed: the next op that is checked stops what follows them).
A kernel already running still runs to its end, and ops inside functions (``tf.function``, loop
bodies, dataset functions) are not checked one by one.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

CHEAP = frozenset(
    {"Identity", "IdentityN", "NoOp", "Const", "Shape", "ShapeN", "Size", "Rank", "Reshape", "ExpandDims", "Squeeze"}
    | {"ReadVariableOp", "VarHandleOp", "VarIsInitializedOp", "Placeholder", "PlaceholderWithDefault", "StopGradient"}
    | {"Assert", "TmrCheckCancelled"}
)
"""Ops not worth a check: they only look at their inputs' metadata, or are checks themselves."""

ELEMENTWISE = frozenset(
    {"Add", "AddV2", "Sub", "Mul", "Neg", "Abs", "Sign", "Floor", "Ceil", "Minimum", "Maximum", "Cast", "Bitcast"}
    | {"Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "IsNan", "IsInf", "IsFinite"}
    | {"LogicalAnd", "LogicalOr", "LogicalNot", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Select", "SelectV2"}
    | {"StridedSlice", "Slice", "ZerosLike", "OnesLike"}
)
"""Ops not worth a check either: one pass over their inputs at memory speed (a 2-shard group-by of 18 aggregates had
534 of its 984 checks before these); a chain of them ends at the next op that is checked."""

SMALL = 4096
"""Elements at most of each input of an op not worth a check either (its inputs' shapes known): a tiny job's ops."""


def _worth(op: tf.Operation) -> bool:
    if op.type in CHEAP or op.type in ELEMENTWISE or not op.inputs or tf.DeviceSpec.from_string(op.device).device_type != "CPU":
        return False  # (an op without a device type may be placed on a GPU, which has no check kernel)
    return not all(t.shape.is_fully_defined() and t.shape.num_elements() <= SMALL for t in op.inputs)


def guard(graph: tf.Graph, native: Any) -> int:
    """Put a cancellation check before each op of ``graph`` (as built so far) that computes on a CPU device, using the
    native kernels ``native``; the number of checks added.

    Example:
        >>> from tfmapreduce._native.loader import kernels
        >>> graph = tf.Graph()
        >>> with graph.as_default(), tf.device("/job:local/task:0/device:CPU:0"):
        ...     x = tf.compat.v1.placeholder(tf.float32, [None])
        ...     y = tf.reduce_sum(tf.math.cumsum(x * 2.0)) + tf.reduce_sum(tf.ones([10]))
        >>> guard(graph, kernels())  # before the Cumsum and the first Sum: the Mul is element-wise, the rest small
        2
    """
    worth = [op for op in graph.get_operations() if _worth(op)]
    for op in worth:  # (made as ``graph.create_op`` makes it: an op wrapper's conversions cost several times more)
        check = graph._create_op_internal("TmrCheckCancelled", [], [], name=f"{op.name}_check", compute_device=False)
        check._set_device_from_string(op.device)
        check._add_control_inputs([t.op for t in op.inputs])
        op._add_control_input(check)
    return len(worth)
