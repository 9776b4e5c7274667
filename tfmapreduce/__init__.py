"""tfmapreduce: map/reduce over the tasks and devices of a TensorFlow cluster."""

import os as _os

_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's C++ start-up chatter out of the user's terminal

from ._backend import get_timeout as get_timeout
from ._backend import set_timeout as set_timeout
from ._cluster import Cluster as Cluster
from ._cluster import LocalCluster as LocalCluster
from ._device import Device as Device
from ._errors import ClusterError as ClusterError
from ._errors import JobError as JobError
from ._errors import MapFunctionError as MapFunctionError
from ._errors import PartitionError as PartitionError
from ._errors import PlacementError as PlacementError
from ._errors import TfMapReduceError as TfMapReduceError
from ._errors import WorkerTimeoutError as WorkerTimeoutError
from ._errors import WorkerUnavailableError as WorkerUnavailableError

__all__ = [
    "Cluster",
    "ClusterError",
    "Device",
    "JobError",
    "LocalCluster",
    "MapFunctionError",
    "PartitionError",
    "PlacementError",
    "TfMapReduceError",
    "WorkerTimeoutError",
    "WorkerUnavailableError",
    "get_timeout",
    "set_timeout",
]
