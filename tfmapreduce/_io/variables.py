"""Resident storage on the workers: each shard a resource variable in a container named for its data, made, found
and destroyed inside the graph (the primitives the engine and ``Sharded`` share)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import tensorflow as tf

from .._base.device import Device


def assign_shard(container: str, index: int, value: tf.Tensor) -> tf.Operation:
    """In a graph, inside the shard's device scope: store ``value`` (of any rows) as shard ``index`` of ``container``,
    where a :class:`Sharded` of that name reads it."""
    handle = tf.raw_ops.VarHandleOp(
        dtype=value.dtype, shape=tf.TensorShape(None), container=container, shared_name=f"shard{index}"
    )
    return tf.raw_ops.AssignVariableOp(resource=handle, value=value)


def named_per_run(devices: Sequence[str]) -> bool:
    """Whether results stored on ``devices`` can go into variables each run names (:func:`assign_named`): CPU devices.
    A handle is made on the CPU and a variable lives where its handle is made, so a GPU's are named in the graph."""
    return all(Device.parse(d).type == "CPU" for d in devices)


def assign_named(device: str, value: tf.Tensor) -> tuple[tf.Tensor, tf.Operation]:
    """In a graph, on ``device`` (a CPU): store ``value`` in the variable a run names (a placeholder fed with
    :func:`handle`), so one program stores each run's result under that run's own name; (the placeholder, the op)."""
    serialized = tf.compat.v1.placeholder(tf.string, (), name="stored")
    with tf.device(device):  # the assignment runs where the handle is made (TensorFlow colocates them): a CPU device
        resource = tf.io.parse_tensor(serialized, tf.resource)
        return serialized, tf.raw_ops.AssignVariableOp(resource=resource, value=value)


def read_named(device: str, dtype: tf.DType, row: tuple[int, ...]) -> tuple[tf.Tensor, tf.Tensor]:
    """In a graph: the value of the variable on ``device`` (a CPU) that a run names (a placeholder fed with
    :func:`handle`), rows of shape ``row``, so one program reads each run's own data; (the placeholder, the value)."""
    serialized = tf.compat.v1.placeholder(tf.string, (), name="resident")
    with tf.device(device):  # where the variable lives
        resource = tf.io.parse_tensor(serialized, tf.resource)
        value = tf.raw_ops.ReadVariableOp(resource=resource, dtype=dtype)
        return serialized, tf.ensure_shape(value, (None, *row))


def handle(device: str, container: str, index: int, dtype: tf.DType) -> bytes:
    """What :func:`assign_named`'s placeholder is fed: a serialized handle to shard ``index`` of ``container`` on
    ``device`` (the variable a :class:`Sharded` of that name reads), made from a handle TensorFlow serialized itself.

    Example:
        >>> a = handle("/job:local/task:1/device:CPU:0", "tfmapreduce_x_o0", 3, tf.float32)
        >>> a != handle("/job:local/task:1/device:CPU:0", "tfmapreduce_y_o0", 3, tf.float32)
        True
    """
    from tensorflow.core.framework import resource_handle_pb2, tensor_pb2

    proto = resource_handle_pb2.ResourceHandleProto.FromString(_template())
    proto.device, proto.container, proto.name = str(Device.parse(device)), container, f"shard{index}"
    proto.dtypes_and_shapes[0].dtype = dtype.as_datatype_enum
    body = proto.SerializeToString()
    tensor = tensor_pb2.TensorProto(dtype=tf.resource.as_datatype_enum, tensor_content=_varint(len(body)) + body)
    return bytes(tensor.SerializeToString())


@functools.cache
def _template() -> bytes:
    """A variable's handle as this TensorFlow serializes it (its type's hash and name), made once per process."""
    from tensorflow.core.framework import tensor_pb2

    graph = tf.Graph()
    with graph.as_default(), tf.device("/device:CPU:0"):
        var = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=tf.TensorShape(None), shared_name="template")
        serialized = tf.io.serialize_tensor(var)
    with tf.compat.v1.Session(graph=graph, config=tf.compat.v1.ConfigProto(device_count={"GPU": 0})) as session:
        content = tensor_pb2.TensorProto.FromString(session.run(serialized)).tensor_content
    length, start = 0, 0
    while True:  # the varint length that prefixes the handle
        length |= (content[start] & 0x7F) << (7 * start)
        start += 1
        if content[start - 1] < 0x80:
            return bytes(content[start : start + length])


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | 0x80 if n else byte)
        if not n:
            return bytes(out)


def destroy_shard(container: str, index: int, dtype: tf.DType) -> tf.Operation:
    """In a graph, inside the shard's device scope: free shard ``index`` of ``container`` (nothing if it is not there)."""
    handle = tf.raw_ops.VarHandleOp(dtype=dtype, shape=tf.TensorShape(None), container=container, shared_name=f"shard{index}")
    return tf.raw_ops.DestroyResourceOp(resource=handle, ignore_lookup_error=True)
