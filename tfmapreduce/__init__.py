"""tfmapreduce: map/reduce over the tasks and devices of a TensorFlow cluster."""

import os as _os

_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's C++ start-up chatter out of the user's terminal

from . import combiners as combiners
from . import recipes as recipes
from ._backend import get_timeout as get_timeout
from ._backend import set_timeout as set_timeout
from ._by_key import count_by_key as count_by_key
from ._by_key import max_by_key as max_by_key
from ._by_key import mean_by_key as mean_by_key
from ._by_key import min_by_key as min_by_key
from ._by_key import sum_by_key as sum_by_key
from ._by_key import variance_by_key as variance_by_key
from ._cluster import Cluster as Cluster
from ._cluster import LocalCluster as LocalCluster
from ._combine import Combiner as Combiner
from ._device import Device as Device
from ._errors import ClusterError as ClusterError
from ._errors import InputError as InputError
from ._errors import JobError as JobError
from ._errors import MapFunctionError as MapFunctionError
from ._errors import PartitionError as PartitionError
from ._errors import PlacementError as PlacementError
from ._errors import TfMapReduceError as TfMapReduceError
from ._errors import WorkerTimeoutError as WorkerTimeoutError
from ._errors import WorkerUnavailableError as WorkerUnavailableError
from ._job import MapReduce as MapReduce
from ._job import RunStats as RunStats
from ._job import ShardStats as ShardStats
from ._keyed import KeyedPlan as KeyedPlan
from ._keyed import KeyedSharded as KeyedSharded
from ._keyed_result import KeyedResult as KeyedResult
from ._partition import weights as weights
from ._plan import Plan as Plan
from ._plan import Shard as Shard
from ._resident import Sharded as Sharded
from ._resident import generate as generate
from ._resident import load_shards as load_shards
from ._resident import save_shards as save_shards
from ._resident import scatter as scatter
from ._stats import count as count
from ._stats import max as max
from ._stats import mean as mean
from ._stats import min as min
from ._stats import std as std
from ._stats import sum as sum
from ._stats import variance as variance
from ._stats import weighted_mean as weighted_mean

__all__ = [
    "Cluster",
    "ClusterError",
    "Combiner",
    "Device",
    "InputError",
    "JobError",
    "KeyedPlan",
    "KeyedResult",
    "KeyedSharded",
    "LocalCluster",
    "MapFunctionError",
    "MapReduce",
    "PartitionError",
    "PlacementError",
    "Plan",
    "RunStats",
    "Shard",
    "ShardStats",
    "Sharded",
    "TfMapReduceError",
    "WorkerTimeoutError",
    "WorkerUnavailableError",
    "combiners",
    "count",
    "count_by_key",
    "generate",
    "get_timeout",
    "load_shards",
    "max",
    "max_by_key",
    "mean",
    "mean_by_key",
    "min",
    "min_by_key",
    "recipes",
    "save_shards",
    "scatter",
    "set_timeout",
    "std",
    "sum",
    "sum_by_key",
    "variance",
    "variance_by_key",
    "weighted_mean",
    "weights",
]
