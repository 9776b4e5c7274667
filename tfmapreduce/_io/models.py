"""Model variables on the workers: each variable a map function reads copied once to each device that maps a shard,
kept there for later runs, and sent again only when its value changed.

A program records the variables its map functions read and on which devices (``_ops.models.Use``).  Before each
of its runs, :func:`place` reads every such variable on the client and takes a digest of its bytes (BLAKE2b, at
memory speed); a (variable, device) pair whose digest differs from the one last placed there on this cluster (or
was never placed) is sent, in one run that assigns every such copy, once :func:`check_memory` found room for them
on each task's host and in each GPU's own memory.  The copies live in resource variables in the client's container
(``_ops.models.CONTAINER``) on each device, like resident data; they are freed as the cluster closes (a
``LocalCluster``'s stop with its workers; a client of workers it did not start frees them: :meth:`Copies.close`),
by :func:`release` (one model's, or all), and a variable's copies once the variable itself is gone (at the
cluster's next placement; the programs a cluster keeps hold their map functions, and so the models they call, until
they leave its cache).
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from .._base.device import Device
from .._base.errors import PlacementError, TfMapReduceError
from .._base.state import ClusterVar
from .._base.task import Task
from .._cluster.cluster import Cluster
from .._cluster.local import LocalCluster
from .._cluster.probe import device_attributes
from .._ops.budget import available_memory
from .._ops.models import CONTAINER, Use, name_of

CLOSE_TIMEOUT = 5.0
"""Seconds a closing client of workers it did not start gives them to free its copies."""


@attrs.define(eq=False)
class Copies:
    """What a cluster's devices hold: each copy's digest by (variable name, device), and copies left to free."""

    cluster: weakref.ref[Cluster] | None = None
    """The cluster whose devices hold them (its close frees them: :meth:`close`)."""
    digests: dict[tuple[str, str], bytes] = attrs.field(factory=dict)
    sizes: dict[str, int] = attrs.field(factory=dict)
    """The bytes of each variable last placed (a device's copies count against its memory)."""
    variables: dict[str, weakref.ref[Any]] = attrs.field(factory=dict)
    """The variable each name copies (a dead reference: its copies are freed at the next placement)."""
    sent: int = 0
    """Bytes of variables sent to this cluster's devices so far."""
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    def close(self) -> None:
        """Free the copies on workers the cluster did not start, as it closes (a ``LocalCluster``'s stop with its
        workers); a task that does not answer within :data:`CLOSE_TIMEOUT` keeps them until its worker exits."""
        cluster = self.cluster() if self.cluster is not None else None
        if cluster is not None and not isinstance(cluster, LocalCluster) and not cluster.closed:
            _free(cluster, self, None, CLOSE_TIMEOUT)


COPIES: ClusterVar[Copies] = ClusterVar(
    "model variables", lambda cluster: Copies(weakref.ref(cluster)), close=lambda copies: copies.close()
)


def digest(value: np.ndarray[Any, Any]) -> bytes:
    """A digest of a variable's value (its dtype, shape and bytes).

    Example:
        >>> digest(np.zeros(3, np.float32)) == digest(np.zeros(3, np.float32)) != digest(np.ones(3, np.float32))
        True
    """
    h = hashlib.blake2b(f"{value.dtype.str}{value.shape}".encode(), digest_size=16)
    data: Any = repr(value.tolist()).encode() if value.dtype == object else np.ascontiguousarray(value).reshape(-1).view(np.uint8)
    h.update(data)  # the array's own bytes, not copied
    return h.digest()


def _read(variable: tf.Variable) -> np.ndarray[Any, Any]:
    with tf.init_scope():
        return np.asarray(variable.numpy())


def place(cluster: Cluster, uses: Sequence[Use], timeout: float, *, limit: int | None = None) -> int:
    """Copy each used variable to its device where the device does not hold its current value: the bytes sent (0 when
    every device holds them all).

    Raises:
        PlacementError: the copies to send to a task's devices exceed what its host can hold (``limit`` bytes, None:
            its available memory), before any is sent (:func:`check_memory`).
    """
    if not uses:
        return 0
    state = cluster.state(COPIES)
    with state.lock:
        values: dict[str, np.ndarray[Any, Any]] = {}
        digests: dict[str, bytes] = {}
        send: list[Use] = []
        for use in uses:
            if use.name not in values:
                values[use.name] = _read(use.variable)
                digests[use.name] = digest(values[use.name])
                state.variables[use.name] = weakref.ref(use.variable)
            if state.digests.get((use.name, use.device)) != digests[use.name]:
                send.append(use)
        gone = [(name, device) for name, device in state.digests if state.variables[name]() is None]
        if not send and not gone:
            return 0
        replaced = {(u.name, u.device) for u in send}
        held: dict[str, int] = {}
        for name, device in state.digests:
            if (name, device) not in replaced and state.variables[name]() is not None:
                held[device] = held.get(device, 0) + state.sizes.get(name, 0)
        check_memory(cluster, [(u.device, values[u.name].nbytes) for u in send], timeout, limit, held=held)
        graph = tf.Graph()
        feed: dict[Any, Any] = {}
        ops = []
        with graph.as_default():
            for use in send:
                with tf.device(use.device):
                    value = tf.compat.v1.placeholder(use.variable.dtype, use.variable.shape)
                    ops.append(tf.raw_ops.AssignVariableOp(resource=_handle(use.name, use.variable.dtype), value=value))
                feed[value] = values[use.name]
            ops += _destroy(gone)
        tasks = sorted({Device.parse(d).task for d in [*(u.device for u in send), *(d for _, d in gone)]})
        try:
            cluster.run(graph, ops, feed, tasks=tasks, timeout=timeout)
        finally:
            cluster.forget(graph)
        for name, device in gone:
            del state.digests[(name, device)]
        for use in send:
            state.digests[(use.name, use.device)] = digests[use.name]
            state.sizes[use.name] = values[use.name].nbytes
        sent = sum(values[u.name].nbytes for u in send)
        state.sent += sent
        return sent


def check_memory(
    cluster: Cluster,
    copies: Sequence[tuple[str, int]],
    timeout: float,
    limit: int | None = None,
    *,
    held: Mapping[str, int] | None = None,
) -> None:
    """Refuse copies (device, bytes) that their task's host or their GPU cannot hold.

    A task's copies are counted against ``limit`` bytes, or (None) the memory its host has available
    (``MemAvailable``, asked of each task in one run; it counts the copies already there); a copy for a GPU is
    counted there too (it is received there first).  The copies for each GPU, with the bytes of this client's copies
    it already ``held`` (by device name), are then counted against the GPU's own memory, as its task describes its
    devices (:func:`check_device_memory`).

    Raises:
        PlacementError: naming each device of the first task over its host's memory, or the first GPU over its own,
            the bytes and the fix.
    """
    per_task: dict[Task, dict[str, int]] = {}
    for device, size in copies:
        on = per_task.setdefault(Device.parse(device).task, {})
        on[device] = on.get(device, 0) + size
    tasks = sorted(per_task)
    if limit is not None:
        available = [limit] * len(tasks)
    else:
        graph = tf.Graph()
        with graph.as_default():
            fetches = []
            for task in tasks:
                with tf.device(f"{task}/device:CPU:0"):
                    fetches.append(available_memory())
        try:
            available = [int(a) for a in cluster.run(graph, fetches, {}, tasks=tasks, timeout=timeout)]
        finally:
            cluster.forget(graph)
    for task, free in zip(tasks, available, strict=True):
        total = sum(per_task[task].values())
        if total > free:
            each = ", ".join(f"{size} bytes on {device}" for device, size in sorted(per_task[task].items()))
            where = f"max {limit} bytes a task" if limit is not None else "its host's available memory"
            raise PlacementError(
                f"the model's variables do not fit the memory of {task}: {each} ({total} bytes in all) against {free} "
                f"bytes ({where}); nothing was sent. Run on fewer devices of that task or on a host with more memory "
                f"(devices=[...]), free other models' copies (tmr.release(cluster=...)), or use a smaller model"
            )
    with_gpus = sorted({Device.parse(d).task for d, _ in copies if Device.parse(d).type == "GPU"})
    if with_gpus:
        described = [a for task in with_gpus for a in device_attributes(cluster.address(task), task, timeout)]
        check_device_memory(copies, described, held or {})


def check_device_memory(copies: Sequence[tuple[str, int]], devices: Iterable[Any], held: Mapping[str, int]) -> None:
    """Refuse copies (device, bytes) that a GPU's own memory cannot hold: the copies for it and those it ``held``
    already (bytes by device name) against its ``memory_limit_bytes``, what its allocator may hold.

    ``devices`` describe the devices as TensorFlow's ``DeviceAttributes`` do (``name``, ``device_type``,
    ``memory_limit_bytes``: what a session's ``list_devices()`` gives); only GPUs are checked (a CPU's limit is
    nominal: its host's memory is what :func:`check_memory` asks).  Room for the activations is the model's to leave.

    Raises:
        PlacementError: naming the first GPU over its memory, the bytes and the fix.

    Example:
        >>> from types import SimpleNamespace
        >>> gpu = SimpleNamespace(name="/job:local/replica:0/task:0/device:GPU:0", device_type="GPU", memory_limit_bytes=100)
        >>> check_device_memory([("/job:local/task:0/device:GPU:0", 60)], [gpu], {})  # fits
        >>> try:
        ...     check_device_memory([("/job:local/task:0/device:GPU:0", 60)], [gpu], {gpu.name: 50})
        ... except PlacementError as e:
        ...     print(str(e).split(" against ")[1].split(";")[0])
        its memory limit of 100 bytes
    """
    bound: dict[Device, int] = {}
    for device, size in copies:
        bound[Device.parse(device)] = bound.get(Device.parse(device), 0) + size
    holding: dict[Device, int] = {}
    for device, size in held.items():
        holding[Device.parse(device)] = holding.get(Device.parse(device), 0) + size
    for described in devices:
        gpu = Device.parse(described.name)
        if described.device_type != "GPU" or gpu not in bound:
            continue
        sending, there, memory = bound[gpu], holding.get(gpu, 0), int(described.memory_limit_bytes)
        if sending + there > memory:
            raise PlacementError(
                f"the model's variables do not fit the memory of GPU {gpu}: {sending} bytes to send and {there} bytes "
                f"of copies it holds ({sending + there} bytes) against its memory limit of {memory} bytes; nothing was "
                "sent. Place the shards on more GPUs or on the CPUs (devices=[...]), free other models' copies "
                "(tmr.release(cluster=...)), or use a smaller model"
            )


def lost(cluster: Cluster, uses: Sequence[Use], timeout: float) -> bool:
    """Whether a device no longer holds a copy in ``uses`` (its worker restarted) — asked of the devices themselves,
    since a failed run may report another task's cancellation rather than the missing copy.  If so, the cluster
    forgets every copy it placed, so that the next :func:`place` sends them all again.  A device that cannot answer
    (its worker is gone) counts as not lost here: the run's own error stands."""
    graph = tf.Graph()
    with graph.as_default():
        held = []
        for use in uses:
            with tf.device(use.device):
                held.append(tf.raw_ops.VarIsInitializedOp(resource=_handle(use.name, use.variable.dtype)))
        everywhere = tf.reduce_all(tf.stack(held))
    tasks = sorted({Device.parse(u.device).task for u in uses})
    try:
        found = bool(cluster.run(graph, everywhere, {}, tasks=tasks, timeout=timeout))
    except TfMapReduceError:
        return False
    finally:
        cluster.forget(graph)
    if found:
        return False
    state = cluster.state(COPIES)
    with state.lock:
        state.digests.clear()
    return True


def _handle(name: str, dtype: tf.DType) -> tf.Tensor:
    return tf.raw_ops.VarHandleOp(dtype=dtype, shape=tf.TensorShape(None), container=CONTAINER, shared_name=name)


def _destroy(copies: Iterable[tuple[str, str]]) -> list[tf.Operation]:
    ops = []
    for name, device in copies:
        with tf.device(device):
            ops.append(tf.raw_ops.DestroyResourceOp(resource=_handle(name, tf.float32), ignore_lookup_error=True))
    return ops


def variables_of(model: Any) -> list[tf.Variable]:
    """The variables of a Keras model or layer, a ``tf.Module`` or a variable (what :func:`release` frees).

    Raises:
        TypeError: ``model`` holds no variables.
    """
    if isinstance(model, tf.Variable):
        return [model]
    found = getattr(model, "variables", None)
    if found is None:
        raise TypeError(
            f"model must be a Keras model or layer, a tf.Module or a tf.Variable; got {type(model).__name__} {model!r}"
        )
    return [getattr(v, "value", v) if not isinstance(v, tf.Variable) else v for v in found]


def release(cluster: Cluster, model: Any = None, *, timeout: float = 10.0) -> int:
    """Free the copies of ``model``'s variables (None: of every model) on ``cluster``'s devices: how many were freed.
    A later run places them again."""
    return _free(cluster, cluster.state(COPIES), model, timeout)


def _free(cluster: Cluster, state: Copies, model: Any, timeout: float) -> int:
    with state.lock:
        names = None if model is None else {name_of(v) for v in variables_of(model)}
        copies = [(n, d) for n, d in state.digests if names is None or n in names]
        if not copies or cluster.closed:
            return 0
        graph = tf.Graph()
        with graph.as_default():
            ops = _destroy(copies)
        tasks = sorted({Device.parse(d).task for _, d in copies} - set(cluster.lost))
        try:
            if tasks:
                cluster.run(graph, ops, {}, tasks=tasks, timeout=timeout)
        except TfMapReduceError:
            pass  # a task lost since: its memory went with it
        finally:
            cluster.forget(graph)
        for copy in copies:
            del state.digests[copy]
        return len(copies)
