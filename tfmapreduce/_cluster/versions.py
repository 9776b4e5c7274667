"""One TensorFlow release across the cluster: each worker publishes its versions, the client compares them at connect time.

A ``tfmapreduce worker`` writes ``[tf.__version__, tfmapreduce.__version__]`` into a
string resource variable on its own CPU (container ``tfmapreduce``, name ``versions``),
built and run by the worker process itself.  When a :class:`~tfmapreduce.Cluster` first
asks for its devices it reads that variable from every task and raises
:class:`~tfmapreduce.ClusterError` if a task runs another TensorFlow release than the client:
graphs, kernels and the wire format are only promised to match within one release.
A task that publishes nothing (a ``tf.distribute.Server`` started by other code) cannot be
checked; that is logged once as a warning on ``tfmapreduce.cluster``.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

import tensorflow as tf

from .._base.errors import ClusterError, WorkerTimeoutError, WorkerUnavailableError
from .._base.log import CLUSTER
from .._base.task import Task
from .._version import __version__
from .closing import close_in_background
from .sessions import session_config

CONTAINER = "tfmapreduce"
NAME = "versions"


def _variable(device: str) -> tf.Tensor:
    with tf.device(device):
        return tf.raw_ops.VarHandleOp(dtype=tf.string, shape=[2], container=CONTAINER, shared_name=NAME)


def publish(target: str, task: Task, timeout: float = 30.0) -> None:
    """Worker side: write this process's TensorFlow and tfmapreduce versions on ``task``'s CPU, through its server at ``target``.

    The session talks to ``task`` only: the other tasks of the spec may not run yet.
    """
    device = f"/job:{task.job}/replica:0/task:{task.index}/device:CPU:0"
    graph = tf.Graph()
    with graph.as_default():
        handle = _variable(device)
        with tf.device(device):
            assign = tf.raw_ops.AssignVariableOp(resource=handle, value=tf.constant([tf.__version__, __version__]))
    with tf.compat.v1.Session(target, graph=graph, config=session_config([task], timeout)) as session:
        session.run(assign)


def read(address: str, task: Task, timeout: float) -> str | None:
    """The TensorFlow version ``task`` published, or None when it published none (not a ``tfmapreduce worker``).

    Raises:
        WorkerTimeoutError / WorkerUnavailableError: the task does not answer (a retry may leave it out).
    """
    graph = tf.Graph()
    with graph.as_default():
        device = f"/job:{task.job}/replica:0/task:{task.index}/device:CPU:0"
        handle = _variable(device)
        with tf.device(device):
            value = tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.string)
    session = tf.compat.v1.Session(f"grpc://{address}", graph=graph, config=session_config([task], timeout))
    try:
        tf_version, _ = (str(v.decode()) for v in session.run(value))
        return tf_version
    except (tf.errors.NotFoundError, tf.errors.FailedPreconditionError):
        return None
    except tf.errors.OpError as e:
        named = WorkerTimeoutError if isinstance(e, tf.errors.DeadlineExceededError) else WorkerUnavailableError
        why = f"task {task} at {address} did not say which TensorFlow it runs: {type(e).__name__}"
        raise named(why, task=task, address=address) from None
    finally:
        close_in_background(session)


def compare(client: str, reported: Mapping[Task, str | None]) -> tuple[Task, ...]:
    """Raise ClusterError if a task reports another TensorFlow version than ``client``; return the tasks that reported none.

    Example:
        >>> compare("2.21.0", {Task("local", 0): "2.21.0", Task("local", 1): None})
        (Task(job='local', index=1),)
        >>> try:
        ...     compare("2.21.0", {Task("local", 0): "2.22.0"})
        ... except ClusterError as e:
        ...     print(str(e).split(";")[0])
        the cluster runs another TensorFlow than this client (2.21.0): /job:local/task:0 runs 2.22.0
    """
    differ = {task: version for task, version in reported.items() if version is not None and version != client}
    if differ:
        listed = ", ".join(f"{task} runs {version}" for task, version in differ.items())
        raise ClusterError(
            f"the cluster runs another TensorFlow than this client ({client}): {listed}; graphs are only promised to run "
            f"within one release: install tensorflow=={client} where those workers run and restart them "
            "(or install their release here)"
        )
    return tuple(task for task, version in reported.items() if version is None)


def check(addresses: Mapping[Task, str], timeout: float) -> None:
    """Read every task's TensorFlow version at once and :func:`compare` it with this client's."""
    if not addresses:
        return
    with ThreadPoolExecutor(max_workers=min(32, len(addresses))) as pool:
        versions = dict(zip(addresses, pool.map(lambda t: read(addresses[t], t, timeout), addresses), strict=True))
    unknown = compare(tf.__version__, versions)
    if unknown:
        CLUSTER.warning(
            "cannot check which TensorFlow %s run%s (not started with 'tfmapreduce worker'); this client runs %s, "
            "and a graph may fail on another release",
            ", ".join(map(str, unknown)),
            "s" if len(unknown) == 1 else "",
            tf.__version__,
        )
