"""The public surface: every name exported once, importable, and exactly the list below, so
that adding or removing a public name is a deliberate change to this file."""

from __future__ import annotations

import importlib
import importlib.resources
import types

import pytest

import tfmapreduce as tmr

PUBLIC = {
    # clusters
    "Cluster", "LocalCluster", "Device", "Task", "get_timeout", "set_timeout", "deadline", "RunOptions",
    # jobs
    "MapReduce", "Combiner", "combiners", "Plan", "Shard", "RunStats", "ShardStats", "stats", "weights",
    # resident data
    "Sharded", "ShardedTuple", "scatter", "generate", "save_shards", "load_shards",
    # data in files, read on the workers
    "Files", "read_npy", "read_text", "read_csv", "read_tfrecord", "read_raw", "read_dataset", "Pipeline",
    # map-only jobs and their outputs
    "map", "filter", "predict", "release", "write_npy", "write_text", "write_csv", "write_tfrecord", "Written",
    # recipes (and the namespace of the model recipes)
    "recipes", "count", "max", "mean", "min", "std", "sum", "var", "variance", "weighted_mean",
    # keyed jobs
    "KeyedPlan", "KeyedResult", "KeyedSharded", "plan_by_key", "count_by_key", "sum_by_key", "mean_by_key", "min_by_key", "max_by_key",
    "variance_by_key", "var_by_key", "std_by_key",
    # group jobs
    "per_group", "RaggedSharded", "median_by_key", "quantile_by_key", "top_k_by_key", "count_distinct_by_key", "collect_by_key", "ReducerMemoryError",
    # order
    "sort", "sort_by_key", "plan_sort", "quantile", "percentile", "median", "top_k", "unique",
    # joins
    "join", "plan_join", "JoinPlan", "JoinResult", "JoinSharded",
    # tables
    "table", "Table", "ResidentTable", "GroupBy", "ResidentGroupBy", "Schema", "Field", "ColumnType",
    "scan_parquet", "plan_parquet", "ParquetPlan", "write_parquet", "scan_csv", "plan_csv", "CsvScan",
    # queries
    "lazy", "LazyTable", "LazyGroupBy", "col", "when",
    # errors
    "TfMapReduceError", "ClusterError", "WorkerTimeoutError", "WorkerUnavailableError", "PartitionError",
    "PlacementError", "MapFunctionError", "JobError", "InputError", "ShardLostError", "OutputError",
}  # fmt: skip

SUBMODULES = {"combiners", "recipes"}

COMBINERS = {"Combiner", "SegmentForm", "count", "max", "mean", "min", "moments", "sum", "weighted_mean"}

RECIPES = {
    "GradientStep", "KMeansResult", "KMeansStep", "LinearModel", "LogisticModel", "KMeans", "LinearRegression",
    "count", "histogram", "kmeans", "least_squares_fit", "linear_regression", "logistic_regression",
    "max", "mean", "min", "model_average", "moments", "std", "sum", "var", "variance", "weighted_mean",
    "count_by_key", "sum_by_key", "mean_by_key", "min_by_key", "max_by_key", "variance_by_key", "var_by_key", "std_by_key", "word_count",
    "median_by_key", "quantile_by_key", "top_k_by_key", "count_distinct_by_key", "collect_by_key", "pagerank",
}  # fmt: skip

ERRORS = {
    "TfMapReduceError": (Exception,),
    "ClusterError": (tmr.TfMapReduceError, RuntimeError),
    "WorkerTimeoutError": (tmr.ClusterError, TimeoutError),
    "WorkerUnavailableError": (tmr.ClusterError, ConnectionError),
    "PartitionError": (tmr.TfMapReduceError, ValueError),
    "PlacementError": (tmr.TfMapReduceError, ValueError),
    "MapFunctionError": (tmr.TfMapReduceError, ValueError),
    "JobError": (tmr.TfMapReduceError, RuntimeError),
    "InputError": (tmr.TfMapReduceError, ValueError),
    "ShardLostError": (tmr.ClusterError,),
    "ReducerMemoryError": (tmr.JobError, MemoryError),
}


def test_the_public_names_are_exactly_the_list() -> None:
    assert set(tmr.__all__) == PUBLIC, (
        f"added: {sorted(set(tmr.__all__) - PUBLIC)}, removed: {sorted(PUBLIC - set(tmr.__all__))}; "
        "update PUBLIC here if that was deliberate"
    )


ALIASES = {"var": "variance", "var_by_key": "variance_by_key"}
"""Deliberate second names: numpy's name for a recipe."""


def test_every_name_is_exported_once() -> None:
    assert len(tmr.__all__) == len(set(tmr.__all__)), sorted(n for n in tmr.__all__ if tmr.__all__.count(n) > 1)
    names = [name for name in tmr.__all__ if name not in ALIASES]
    objects = [getattr(tmr, name) for name in names]
    aliases = {name for name, obj in zip(names, objects, strict=True) if sum(o is obj for o in objects) > 1}
    assert not aliases, f"one object under several public names: {sorted(aliases)}"
    for alias, name in ALIASES.items():
        assert getattr(tmr, alias) is getattr(tmr, name)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_every_name_is_importable(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from tfmapreduce import {name}", namespace)
    assert namespace[name] is getattr(tmr, name)
    assert namespace[name] is not None


def test_star_import_gives_exactly_the_public_names() -> None:
    namespace: dict[str, object] = {}
    exec("from tfmapreduce import *", namespace)
    assert set(namespace) - {"__builtins__"} == PUBLIC


def test_no_public_attribute_is_left_out_of_all() -> None:
    stray = {
        name
        for name in dir(tmr)
        if not name.startswith("_") and name not in tmr.__all__ and not isinstance(getattr(tmr, name), types.ModuleType)
    }
    assert not stray, f"public attributes missing from __all__: {sorted(stray)}"


@pytest.mark.parametrize("name", sorted(SUBMODULES))
def test_public_submodules_are_the_modules_of_that_name(name: str) -> None:
    module = importlib.import_module(f"tfmapreduce.{name}")
    assert getattr(tmr, name) is module
    assert module.__all__, f"tfmapreduce.{name} has no __all__"
    assert len(module.__all__) == len(set(module.__all__))
    for attribute in module.__all__:
        assert getattr(module, attribute) is not None


def test_the_combiners_namespace() -> None:
    combiners = importlib.import_module("tfmapreduce.combiners")
    assert tmr.combiners is combiners
    assert set(combiners.__all__) == COMBINERS
    assert len(combiners.__all__) == len(COMBINERS)
    for name in COMBINERS - {"Combiner", "SegmentForm"}:
        assert isinstance(getattr(combiners, name), tmr.Combiner), name
    assert combiners.Combiner is tmr.Combiner


def test_the_recipes_namespace() -> None:
    assert set(tmr.recipes.__all__) == RECIPES, (
        f"added: {sorted(set(tmr.recipes.__all__) - RECIPES)}, removed: {sorted(RECIPES - set(tmr.recipes.__all__))}"
    )
    for name in set(tmr.__all__) & RECIPES:  # the top-level statistics are the recipes themselves
        assert getattr(tmr, name) is getattr(tmr.recipes, name), name


def test_the_version_is_the_packages() -> None:
    import importlib.metadata

    assert tmr.__version__ == importlib.metadata.version("tfmapreduce")


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_each_error_is_also_the_builtin_it_resembles(name: str) -> None:
    error = getattr(tmr, name)
    for base in ERRORS[name]:
        assert issubclass(error, base), f"{name} should subclass {base.__name__}"
    assert issubclass(error, tmr.TfMapReduceError)


def test_every_public_callable_has_a_docstring() -> None:
    missing = [name for name in tmr.__all__ if callable(getattr(tmr, name)) and not (getattr(tmr, name).__doc__ or "").strip()]
    assert not missing, f"no docstring: {missing}"


def test_the_package_is_typed() -> None:
    files = importlib.resources.files("tfmapreduce")
    assert files.joinpath("py.typed").is_file()
