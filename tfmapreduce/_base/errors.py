"""The exception tree: one root, each subclass also the built-in it resembles."""

from __future__ import annotations

from .task import Task


class TfMapReduceError(Exception):
    """Root of every error tfmapreduce raises on purpose."""


class ClusterError(TfMapReduceError, RuntimeError):
    """The cluster is malformed, unreachable, closed, or lost a worker."""


class _TaskFailure(ClusterError):
    """A failure of one task of the cluster, named when it could be found.

    Attributes:
        task: the :class:`Task`, or ``None`` if no single task was found.
        address: its ``host:port``, or ``None``.
    """

    def __init__(self, message: str, *, task: Task | None = None, address: str | None = None):
        super().__init__(message)
        self.task = task
        self.address = address


class WorkerTimeoutError(_TaskFailure, TimeoutError):
    """A worker did not answer before the deadline (hung, stopped or overloaded); ``.task`` names it when found."""


class WorkerUnavailableError(_TaskFailure, ConnectionError):
    """A worker is gone (killed, crashed or never started); ``.task`` names it when TensorFlow did."""


class PartitionError(TfMapReduceError, ValueError):
    """The requested partition of the rows is invalid."""


class PlacementError(TfMapReduceError, ValueError):
    """A device is malformed, unknown to the cluster, or lacks what was asked."""


class MapFunctionError(TfMapReduceError, ValueError):
    """The user's map function failed or returned something unusable."""


class JobError(TfMapReduceError, RuntimeError):
    """A job failed while running on the cluster for a reason that is not the cluster's.

    Attributes:
        details: TensorFlow's whole message (the error's text keeps its first line).
    """

    details: str = ""


class ReducerMemoryError(JobError, MemoryError):
    """A group job's reducer would receive more keys and values than its memory budget (raised before they travel)."""


class InputError(TfMapReduceError, ValueError):
    """The data given to a job cannot be partitioned (0-d, ragged, or co-partitioned inputs of different rows)."""


class ShardLostError(ClusterError):
    """Resident shards are gone (their worker died or restarted) and cannot be rebuilt from how they were made.

    Attributes:
        shards: the indices of the lost shards.
        task: the task that held them, when known.
    """

    def __init__(self, message: str, *, shards: tuple[int, ...] = (), task: Task | None = None):
        super().__init__(message)
        self.shards = shards
        self.task = task


class OutputError(TfMapReduceError, OSError):
    """Results cannot be written: the directory is taken (``overwrite=False``), not writable, full, or not shared."""
