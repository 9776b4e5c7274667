"""A program's graph makes each distinct constant once per device: ``ConstGraph``.

A graph built through TensorFlow's Python API gets a ``Const`` op for every Python number, slice bound and shape it
is given: most of a program's ops (571 of the 1,002 of a mean over 56 unrolled file batches), and each costs as
much to build as an op that computes. Constants are values, so one op can serve every use of an equal value on the
same device.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

LARGEST = 1024
"""Serialized bytes at most of a constant worth sharing (a larger one is made as asked: it is rarely repeated)."""


class _Placed:
    """What a device scope sees of an op it places: its device so far."""

    device = ""


class ConstGraph(tf.Graph):  # type: ignore[misc]  # (TensorFlow has no type stubs)
    """A ``tf.Graph`` whose equal constants made under the same device scope and control dependencies are one op.

    A constant is made anew under a colocation or control-flow scope or a device function, where sharing could
    change where or when it runs.

    Example:
        >>> graph = ConstGraph()
        >>> with graph.as_default(), tf.device("/job:local/task:0/device:CPU:0"):
        ...     x = tf.compat.v1.placeholder(tf.float32, [None])
        ...     y = x * 2.0 + x[1:] * 2.0
        >>> sum(op.type == "Const" for op in graph.get_operations())  # 2.0 once; the slice's bounds 1, 0 and step 1
        3
    """

    def __init__(self) -> None:
        super().__init__()
        self._consts: dict[tuple[bytes, str, frozenset[tf.Operation]], tf.Operation] = {}

    def _create_op_internal(self, op_type: str, inputs: Any, *args: Any, **kwargs: Any) -> tf.Operation:
        if op_type != "Const":
            return super()._create_op_internal(op_type, inputs, *args, **kwargs)
        key = self._const_key(kwargs.get("attrs"))
        if key is None:
            return super()._create_op_internal(op_type, inputs, *args, **kwargs)
        op = self._consts.get(key)
        if op is None:
            op = self._consts[key] = super()._create_op_internal(op_type, inputs, *args, **kwargs)
        return op

    def _const_key(self, attrs: Any) -> tuple[bytes, str, frozenset[tf.Operation]] | None:
        """The constant's value, its device and the ops it waits for; None where it must be made anew."""
        if attrs is None or self._colocation_stack or self._get_control_flow_context() is not None or self._attr_scope_map:
            return None
        value = attrs["value"].SerializeToString()
        if len(value) > LARGEST:
            return None
        at = _Placed()
        for spec in self._device_function_stack.peek_objs():  # as ``tf.Graph._apply_device_functions`` places an op
            if spec.is_null_merge:
                continue
            if spec.function is None:
                break
            if not spec.fast_string_merge:  # a device function: its device depends on the op
                return None
            at.device = spec.string_merge(at)
        waits = frozenset(self._control_dependencies_for_inputs([])) if self._control_dependencies_stack else frozenset()
        return value + attrs["dtype"].SerializeToString(), at.device, waits
