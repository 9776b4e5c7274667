"""Bad input: each gets a specific exception whose message names the argument, what was expected
and what was received; never a raw TensorFlow trace, never a silently wrong number."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr

X = np.arange(10, dtype=np.float32)


def _says(error: pytest.ExceptionInfo[BaseException], *words: str) -> None:
    message = str(error.value)
    missing = [w for w in words if w not in message]
    assert not missing, f"{missing} not in the message: {message}"


# -- partitions -----------------------------------------------------------------------------------


def test_sizes_that_do_not_sum_to_the_rows(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.PartitionError) as error:
        tmr.mean(X, cluster=cluster, sizes=[2, 7])
    _says(error, "sizes must sum to the 10 rows", "got [2, 7], sum 9", "add the missing 1 rows")


def test_sizes_with_too_many_rows(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.PartitionError) as error:
        tmr.sum(X, cluster=cluster, sizes=[8, 7])
    _says(error, "10 rows", "sum 15", "remove 5 rows")


def test_a_negative_size(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.PartitionError) as error:
        tmr.mean(X, cluster=cluster, sizes=[-2, 12])
    _says(error, "sizes must be ≥ 0", "sizes[0]=-2")


def test_a_non_integer_size(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.PartitionError) as error:
        tmr.mean(X, cluster=cluster, sizes=[2.5, 7.5])
    _says(error, "whole row counts", "sizes[0]=2.5", "weights(")


def test_a_boolean_size(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.PartitionError) as error:
        tmr.mean(X, cluster=cluster, sizes=[True, 9])
    _says(error, "sizes[0]=True", "not an integer")


def test_zero_shards(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.PartitionError) as error:
        tmr.mean(X, cluster=cluster, sizes=0)
    _says(error, "sizes=0", "at least 1")


def test_an_empty_size_list(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.PartitionError) as error:
        tmr.mean(X, cluster=cluster, sizes=[])
    _says(error, "sizes=[]", "at least one row count")


def test_sizes_of_no_accepted_type(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(TypeError) as error:
        tmr.mean(X, cluster=cluster, sizes="3,7")
    _says(error, "sizes must be None, a shard count, a list of row counts or weights(...)", "got str '3,7'")


def test_weights_all_zero() -> None:
    with pytest.raises(tmr.PartitionError) as error:
        tmr.weights(0, 0)
    _says(error, "at least one of them > 0", "got (0, 0)")


def test_a_negative_weight() -> None:
    with pytest.raises(tmr.PartitionError) as error:
        tmr.weights(1, -1)
    _says(error, "weights must be finite numbers ≥ 0", "(1, -1)")


# -- placements -----------------------------------------------------------------------------------


def test_an_empty_device_list(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.PlacementError) as error:
        tmr.mean(X, cluster=cluster, devices=[])
    _says(error, "devices=[]", "names no device", "None to use every device")


def test_an_unknown_device(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.PlacementError) as error:
        tmr.mean(X, cluster=cluster, devices=["/job:local/task:0", "/job:local/task:7"])
    _says(error, "devices[1]='/job:local/task:7'", "no task /job:local/task:7", *cluster.devices)


def test_an_unknown_job(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.PlacementError) as error:
        tmr.mean(X, cluster=cluster, devices=["/job:worker/task:0"])
    _says(error, "no task /job:worker/task:0", "/job:local/replica:0/task:0/device:CPU:0")


def test_an_unknown_cpu_index(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.PlacementError) as error:
        tmr.mean(X, cluster=cluster, devices=["/job:local/task:1/cpu:5"])
    _says(error, "task /job:local/task:1 has no CPU:5", "/job:local/replica:0/task:1/device:CPU:1")


@pytest.mark.parametrize(
    "name", ["local/task0", "/job:local", "/job:local/task:x", "/job:local/task:0/tpu:0", "/job:local/task:0/task:1"]
)
def test_a_malformed_device_string(cluster: tmr.LocalCluster, name: str) -> None:
    with pytest.raises(tmr.PlacementError) as error:
        tmr.mean(X, cluster=cluster, devices=[name])
    _says(error, f"devices[0] {name!r} is not a device name", "expected '/job:NAME/task:I'")


def test_a_device_that_is_not_a_string(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(TypeError) as error:
        tmr.mean(X, cluster=cluster, devices=[0])
    _says(error, "devices[0] must be a device string", "got int 0")


def test_one_device_string_instead_of_a_list(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(TypeError) as error:
        tmr.mean(X, cluster=cluster, devices="/job:local/task:0")
    _says(error, "devices must be a list of device strings", "got str")


def test_a_gpu_without_fallback(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.PlacementError) as error:
        tmr.mean(X, cluster=cluster, devices=["/job:local/task:0/gpu:0"])
    _says(error, "task /job:local/task:0 has no GPU:0", "fallback='cpu'", "/job:local/replica:0/task:0/device:CPU:0")


def test_an_unknown_fallback(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(ValueError, match=r"fallback must be None or 'cpu', got 'gpu'"):
        tmr.mean(X, cluster=cluster, fallback="gpu")


# -- inputs ---------------------------------------------------------------------------------------


def test_co_partitioned_inputs_with_different_rows(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(lambda a, b: tf.reduce_sum(a) + tf.reduce_sum(b), tf.add)
    with pytest.raises(tmr.InputError) as error:
        job.run((X, X[:5]), cluster=cluster)
    _says(error, "same rows on axis 0", "x[0]: 10, x[1]: 5")


def test_weights_with_different_rows_than_x(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.InputError) as error:
        tmr.weighted_mean(X, np.ones(9), cluster=cluster)
    _says(error, "same rows", "10", "9")


def test_an_empty_tuple_of_inputs(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.InputError) as error:
        tmr.MapReduce(tf.reduce_sum, tf.add).run((), cluster=cluster)
    _says(error, "x=() holds no input")


def test_a_string_dtype_for_mean(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(TypeError) as error:
        tmr.mean(np.array(["a", "b"]), cluster=cluster)
    _says(error, "x must hold numbers or booleans", "dtype <U1", "np.asarray(x, dtype=np.float32)")


def test_an_object_dtype_for_mean(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(TypeError) as error:
        tmr.mean(np.array([1.0, None], dtype=object), cluster=cluster)
    _says(error, "x must hold numbers", "dtype object")


def test_a_complex_dtype(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(TypeError) as error:
        tmr.sum(np.ones(3, np.complex64), cluster=cluster)
    _says(error, "complex", "complex64")


def test_a_ragged_nested_list(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.InputError) as error:
        tmr.mean([[1.0, 2.0], [3.0]], cluster=cluster)
    _says(error, "x must be a rectangular array", "ragged list")


def test_a_0d_input(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.InputError) as error:
        tmr.mean(np.float32(3.0), cluster=cluster)
    _says(error, "x is a 0-d scalar", "at least a 1-d array")


def test_a_0d_tensor_in_a_job(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.InputError) as error:
        tmr.MapReduce(tf.reduce_sum, tf.add).run(tf.constant(1.0), cluster=cluster)
    _says(error, "0-d scalar")


def test_a_2d_weight_array(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.InputError) as error:
        tmr.weighted_mean(X, np.ones((10, 2)), cluster=cluster)
    _says(error, "w must be 1-d", "(10, 2)")


def test_weights_that_sum_to_zero(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.InputError) as error:
        tmr.weighted_mean(X, np.zeros(10), cluster=cluster)
    _says(error, "weights w sum to 0", "non-zero weight")


# -- recipe options -------------------------------------------------------------------------------


@pytest.mark.parametrize("recipe", [tmr.mean, tmr.sum, tmr.min, tmr.max, tmr.variance, tmr.std], ids=lambda f: f.__name__)
def test_an_axis_other_than_none_or_0(cluster: tmr.LocalCluster, recipe) -> None:
    with pytest.raises(ValueError, match=r"axis=1 is axis 1 of 2-d data \(one result per row\).* pass axis=0 \(or -2"):
        recipe(X.reshape(5, 2), axis=1, cluster=cluster)
    with pytest.raises(ValueError, match=r"axis must be None \(every element\) or an int: 0 or -2 .*got 'rows'"):
        recipe(X.reshape(5, 2), axis="rows", cluster=cluster)


@pytest.mark.parametrize("ddof", [-1, 1.5, True])
def test_a_bad_ddof(cluster: tmr.LocalCluster, ddof: object) -> None:
    with pytest.raises(ValueError, match="ddof") as error:
        tmr.variance(X, ddof=ddof, cluster=cluster)
    _says(error, "ddof must be an int ≥ 0", f"got {ddof!r}")


def test_a_ddof_not_below_the_rows(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(tmr.InputError) as error:
        tmr.std(np.ones((2, 3)), axis=0, ddof=2, cluster=cluster)
    _says(error, "ddof=2 needs more than 2 rows", "got 2")


# -- map functions --------------------------------------------------------------------------------


@pytest.mark.parametrize("map_fn", [3, "tf.reduce_sum", None])
def test_a_non_callable_map_fn(map_fn: object) -> None:
    with pytest.raises(TypeError) as error:
        tmr.MapReduce(map_fn, tf.add)
    _says(error, "map_fn must be a callable", f"got {type(map_fn).__name__}")


def test_a_map_fn_that_raises(cluster: tmr.LocalCluster) -> None:
    def shard_loss(t):
        raise KeyError("no such column")

    with pytest.raises(tmr.MapFunctionError) as error:
        tmr.MapReduce(shard_loss, tf.add).run(X, cluster=cluster, sizes=[0, 4, 6])
    _says(error, "map_fn test_a_map_fn_that_raises.<locals>.shard_loss raised KeyError", "shard 1 (rows 0:4", "no such column")
    assert isinstance(error.value.__cause__, KeyError)


def test_a_map_fn_that_fails_on_the_shape_of_one_shard(cluster: tmr.LocalCluster) -> None:
    def first_two(t):
        return tf.reshape(t, [2])  # only a 2-row shard reshapes to [2]

    with pytest.raises(tmr.MapFunctionError) as error:
        tmr.MapReduce(first_two, tf.add).run(X, cluster=cluster, sizes=[2, 8])
    _says(error, "map_fn", "first_two", "shard 1 (rows 2:10")


def test_a_map_fn_whose_structure_differs_between_shards(cluster: tmr.LocalCluster) -> None:
    def moody(t):
        return (tf.reduce_sum(t),) if t.shape[0] > 3 else tf.reduce_sum(t)

    with pytest.raises(tmr.MapFunctionError) as error:
        tmr.MapReduce(moody, tf.add).run(X, cluster=cluster, sizes=[2, 8])
    _says(error, "moody returned different structures for shard 0 and shard 1", "float32", "the same structure")


def test_a_map_fn_whose_dtype_differs_between_shards(cluster: tmr.LocalCluster) -> None:
    def moody(t):
        total = tf.reduce_sum(t)
        return tf.cast(total, tf.int32) if t.shape[0] > 3 else total

    with pytest.raises(tmr.MapFunctionError) as error:
        tmr.MapReduce(moody, tf.add).run(X, cluster=cluster, sizes=[2, 8])
    _says(error, "different structures", "float32", "int32", "dtypes")


def test_a_map_fn_that_forgets_to_return(cluster: tmr.LocalCluster) -> None:
    def no_return(t):
        tf.reduce_sum(t)

    with pytest.raises(tmr.MapFunctionError) as error:
        tmr.MapReduce(no_return, tf.add).run(X, cluster=cluster, sizes=[4, 6])
    _says(error, "no_return must return a tensor or a nested structure of tensors", "returned None")


def test_map_outputs_the_reduce_fn_cannot_merge(cluster: tmr.LocalCluster) -> None:
    def doubled(t):
        return 2 * t  # one value per row: shards of 3 and 7 rows cannot be added

    with pytest.raises(tmr.MapFunctionError) as error:
        tmr.MapReduce(doubled, tf.add).run(X, cluster=cluster, sizes=[3, 7])
    _says(error, "the combiner add cannot merge the shards' map outputs", "Dimensions must be equal", "float32(3,)", "same shape")


def test_a_reduce_fn_that_raises(cluster: tmr.LocalCluster) -> None:
    def merge_columns(a, b):
        return a["total"] + b["total"]

    with pytest.raises(tmr.MapFunctionError) as error:
        tmr.MapReduce(tf.reduce_sum, merge_columns).run(X, cluster=cluster, sizes=[3, 7])
    _says(error, "the combiner merge_columns cannot merge", "TypeError")
    assert isinstance(error.value.__cause__, TypeError)


def _checked_log(t):
    return tf.reduce_sum(tf.debugging.check_numerics(tf.math.log(t), "log of a negative row"))


def test_a_map_fn_that_fails_while_running(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(_checked_log, tf.add, name="logs")
    with pytest.raises(tmr.JobError) as error:
        job.run(np.array([1.0, 2.0, -3.0, 4.0]), cluster=cluster, sizes=[2, 2], devices=["/job:local/task:0"])
    _says(error, "MapReduce(logs)", "shard1/CheckNumerics", "log of a negative row")
    assert "Traceback" not in str(error.value)
    assert "log of a negative row" in error.value.details


def test_a_run_failure_reported_by_two_tasks_is_summarized(cluster: tmr.LocalCluster) -> None:
    job = tmr.MapReduce(_checked_log, tf.add, name="logs")
    for _ in range(5):
        with pytest.raises(tmr.JobError) as error:
            job.run(np.array([1.0, 2.0, -3.0, 4.0]), cluster=cluster, sizes=[2, 2])
        _says(error, "MapReduce(logs)", "log of a negative row")


# -- timeouts and clusters ------------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [0, -1.5, float("nan"), float("inf")])
def test_a_non_positive_or_infinite_timeout(cluster: tmr.LocalCluster, timeout: float) -> None:
    with pytest.raises(ValueError, match="timeout") as error:
        tmr.mean(X, cluster=cluster, timeout=timeout)
    _says(error, "timeout must be a positive, finite number of seconds", f"got {timeout!r}")


def test_a_timeout_that_is_not_a_number(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(TypeError) as error:
        tmr.MapReduce(tf.reduce_sum, tf.add).run(X, cluster=cluster, timeout="5")
    _says(error, "timeout must be a number of seconds", "got str '5'")


def test_no_cluster() -> None:
    with pytest.raises(TypeError) as error:
        tmr.mean(X)
    _says(error, "cluster= is required")


def test_a_spec_instead_of_a_cluster(cluster: tmr.LocalCluster) -> None:
    with pytest.raises(TypeError) as error:
        tmr.mean(X, cluster=cluster.spec)
    _says(error, "cluster must be a tfmapreduce Cluster", "got dict")


def test_a_closed_cluster(cluster: tmr.LocalCluster) -> None:
    handle = tmr.Cluster.from_spec(cluster.spec)  # a second handle on the session's workers
    assert tmr.sum(X, cluster=handle) == 45
    handle.close()
    for call in (lambda: tmr.sum(X, cluster=handle), lambda: tmr.MapReduce(tf.reduce_sum, tf.add).plan(X, cluster=handle)):
        with pytest.raises(tmr.ClusterError) as error:
            call()
        _says(error, "is closed", "open a new cluster")


def test_a_closed_local_cluster_refuses_before_touching_its_stopped_workers(cluster: tmr.LocalCluster) -> None:
    with tmr.LocalCluster(workers=1) as local:
        assert tmr.count(X, cluster=local) == 10
    with pytest.raises(tmr.ClusterError) as error:
        tmr.count(X, cluster=local)
    _says(error, "LocalCluster", "is closed")


@pytest.mark.alone  # a refusal must come within 5 s
def test_a_cluster_where_nothing_listens() -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with tmr.Cluster.from_spec({"local": [f"localhost:{port}"]}) as nowhere, pytest.raises(tmr.ClusterError) as error:
        tmr.mean(X, cluster=nowhere)
    _says(error, f"localhost:{port}", "/job:local/task:0", "unreachable", "start its worker")
    assert time.monotonic() - started < 5, "a refused connection should be reported at once, not at a deadline"


def test_errors_that_teach_what_to_write_instead(cluster: tmr.LocalCluster) -> None:
    x = np.arange(8.0)
    fixes = [
        (lambda s: s.numpy(), r"\.numpy\(\) has no value to give: compute with TensorFlow ops"),
        (lambda s: s if s[0] > 0 else -s, r"Python if .* write tf\.where\(condition, a, b\) .* tf\.cond\("),
        (lambda s: sum(v for v in s), r"Python for over a tensor .* tf\.map_fn\(fn, x\)"),
    ]
    for fn, said in fixes:
        with pytest.raises(tmr.MapFunctionError, match=said + r".*docs/map-functions\.md") as raised:
            tmr.MapReduce(fn, tmr.combiners.sum).run(x, cluster=cluster)
        assert "@tf.function" not in str(raised.value)  # TensorFlow's advice does not apply to a traced map function
    with pytest.warns(UserWarning, match=r"printed a tensor .* write tf\.print\(x\) instead"):
        tmr.MapReduce(lambda s: print(s) or tf.reduce_sum(s), tmr.combiners.sum).run(x, cluster=cluster)
    with pytest.raises(TypeError, match=r"unknown run option sise=2 \(did you mean sizes\?\)"):
        tmr.sum(x, cluster=cluster, sise=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"is a tf\.data\.Dataset, .*\(tmr\.read_npy, tmr\.read_text, tmr\.read_csv"):
        tmr.sum(tf.data.Dataset.from_tensor_slices(x), cluster=cluster)


# -- flags and keyed values -------------------------------------------------------------------------


@pytest.mark.parametrize("recipe", [tmr.sum_by_key, tmr.mean_by_key, tmr.min_by_key, tmr.variance_by_key])
def test_string_values_for_a_keyed_recipe_of_numbers(cluster: tmr.LocalCluster, recipe) -> None:
    with pytest.raises(TypeError) as error:
        recipe(np.array([1, 2]), np.array(["a", "b"]), cluster=cluster)
    _says(error, "the values hold strings", "cannot combine (it takes numbers)", "values.astype(np.float64)", "count_by_key")


def test_flags_that_are_not_bools(cluster: tmr.LocalCluster) -> None:
    keys, values = np.array([1, 2]), np.array([1.0, 2.0])
    calls = {
        "resident": [
            lambda: tmr.sum_by_key(keys, values, cluster=cluster, resident="no"),
            lambda: tmr.median_by_key(keys, values, cluster=cluster, resident="no"),
            lambda: tmr.join((keys, values), (keys, values), cluster=cluster, resident="no"),
        ],
        "keep_source": [lambda: tmr.scatter(X, cluster=cluster, keep_source="no")],
        "return_stats": [
            lambda: tmr.sum(X, cluster=cluster, return_stats="no"),
            lambda: tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum).run(X, cluster=cluster, return_stats="no"),
        ],
        "intercept": [lambda: tmr.recipes.linear_regression(X.reshape(-1, 1), X, cluster=cluster, intercept="no")],
    }
    for name, made in calls.items():
        for call in made:
            with pytest.raises(TypeError) as error:
                call()
            _says(error, f"{name} must be True (", "or False, got str 'no'", f"{name}=True")


def test_a_model_reached_through_another_object(cluster: tmr.LocalCluster, tmp_path) -> None:
    """A model a map function closes over itself is read from its copies on the devices (tests/_kinds/test_predict.py);
    one reached through an attribute of another object is not found: the error says how to reach it."""
    keras = pytest.importorskip("keras")

    class Holder:
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])

    holder = Holder()
    np.save(tmp_path / "rows.npy", np.ones((4, 2), np.float32))
    rows = np.ones((4, 2), np.float32)
    for x in (rows, tmr.read_npy(str(tmp_path / "rows.npy"))):
        with pytest.raises(tmr.MapFunctionError) as error:
            tmr.map(lambda v: holder.model(v), x, cluster=cluster)
        _says(
            error,
            "uses a tensor, variable or Keras model made outside it on shard 0",
            "reached through an object it holds",
            "cannot capture them",
            "model = holder.model",
        )
