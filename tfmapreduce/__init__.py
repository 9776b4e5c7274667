"""tfmapreduce: map/reduce over the tasks and devices of a TensorFlow cluster.

The public names are imported lazily: ``import tfmapreduce`` (and the
``tfmapreduce`` command's ``--help``) does not import TensorFlow; the first use
of a name that needs it does, with TensorFlow's start-up lines silenced.
"""

import importlib as _importlib
import typing as _typing

__version__ = "0.2.0.dev0"

_EXPORTS = {
    "Cluster": "_cluster",
    "ClusterError": "_errors",
    "Files": "_files",
    "Combiner": "_combine",
    "Device": "_device",
    "InputError": "_errors",
    "JobError": "_errors",
    "KeyedPlan": "_keyed",
    "KeyedResult": "_keyed_result",
    "KeyedSharded": "_keyed",
    "LocalCluster": "_local",
    "MapFunctionError": "_errors",
    "MapReduce": "_mapreduce",
    "PartitionError": "_errors",
    "PlacementError": "_errors",
    "Plan": "_plan",
    "RunOptions": "_options",
    "RunStats": "_runstats",
    "Shard": "_plan",
    "ShardLostError": "_errors",
    "ShardStats": "_runstats",
    "Sharded": "_resident",
    "Task": "_task",
    "TfMapReduceError": "_errors",
    "WorkerTimeoutError": "_errors",
    "WorkerUnavailableError": "_errors",
    "combiners": "",
    "count": "_statistics",
    "count_by_key": "_by_key",
    "deadline": "_options",
    "generate": "_resident",
    "get_timeout": "_options",
    "load_shards": "_shardfile",
    "max": "_statistics",
    "max_by_key": "_by_key",
    "mean": "_statistics",
    "mean_by_key": "_by_key",
    "min": "_statistics",
    "min_by_key": "_by_key",
    "read_csv": "_files",
    "read_npy": "_files",
    "read_raw": "_files",
    "read_text": "_files",
    "read_tfrecord": "_files",
    "recipes": "",
    "save_shards": "_shardfile",
    "scatter": "_resident",
    "set_timeout": "_options",
    "std": "_statistics",
    "sum": "_statistics",
    "sum_by_key": "_by_key",
    "var": "_statistics",
    "variance": "_statistics",
    "variance_by_key": "_by_key",
    "weighted_mean": "_statistics",
    "weights": "_partition",
}
"""Each public name and the private module that defines it ("" for a public submodule)."""

__all__ = sorted(_EXPORTS)

if _typing.TYPE_CHECKING:
    from . import combiners as combiners
    from . import recipes as recipes
    from ._by_key import count_by_key as count_by_key
    from ._by_key import max_by_key as max_by_key
    from ._by_key import mean_by_key as mean_by_key
    from ._by_key import min_by_key as min_by_key
    from ._by_key import sum_by_key as sum_by_key
    from ._by_key import variance_by_key as variance_by_key
    from ._cluster import Cluster as Cluster
    from ._combine import Combiner as Combiner
    from ._device import Device as Device
    from ._errors import ClusterError as ClusterError
    from ._errors import InputError as InputError
    from ._errors import JobError as JobError
    from ._errors import MapFunctionError as MapFunctionError
    from ._errors import PartitionError as PartitionError
    from ._errors import PlacementError as PlacementError
    from ._errors import ShardLostError as ShardLostError
    from ._errors import TfMapReduceError as TfMapReduceError
    from ._errors import WorkerTimeoutError as WorkerTimeoutError
    from ._errors import WorkerUnavailableError as WorkerUnavailableError
    from ._files import Files as Files
    from ._files import read_csv as read_csv
    from ._files import read_npy as read_npy
    from ._files import read_raw as read_raw
    from ._files import read_text as read_text
    from ._files import read_tfrecord as read_tfrecord
    from ._keyed import KeyedPlan as KeyedPlan
    from ._keyed import KeyedSharded as KeyedSharded
    from ._keyed_result import KeyedResult as KeyedResult
    from ._local import LocalCluster as LocalCluster
    from ._mapreduce import MapReduce as MapReduce
    from ._options import RunOptions as RunOptions
    from ._options import deadline as deadline
    from ._options import get_timeout as get_timeout
    from ._options import set_timeout as set_timeout
    from ._partition import weights as weights
    from ._plan import Plan as Plan
    from ._plan import Shard as Shard
    from ._resident import Sharded as Sharded
    from ._resident import generate as generate
    from ._resident import scatter as scatter
    from ._runstats import RunStats as RunStats
    from ._runstats import ShardStats as ShardStats
    from ._shardfile import load_shards as load_shards
    from ._shardfile import save_shards as save_shards
    from ._statistics import count as count
    from ._statistics import max as max
    from ._statistics import mean as mean
    from ._statistics import min as min
    from ._statistics import std as std
    from ._statistics import sum as sum
    from ._statistics import var as var
    from ._statistics import variance as variance
    from ._statistics import weighted_mean as weighted_mean
    from ._task import Task as Task


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tfmapreduce' has no attribute {name!r}")
    from ._quiet import import_tensorflow

    import_tensorflow()
    value: object = _importlib.import_module(f".{module or name}", __name__)
    if module:
        value = getattr(value, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
