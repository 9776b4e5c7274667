"""Programs kept by the shape of the work: jobs over fresh resident data (a filter's output) of one dtype, row shape
and placement reuse the program compiled for the first, which reads each run's own data through fed handles."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples

import tfmapreduce as tmr
from tfmapreduce import col


def _above(keys: object, values: object, limit: object) -> object:
    return values > limit  # type: ignore[operator]


def _sums(keys: np.ndarray, values: np.ndarray) -> dict[int, float]:
    return {int(k): float(values[keys == k].sum()) for k in np.unique(keys)}


def test_a_keyed_recipe_over_three_fresh_filter_outputs_compiles_once(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(40)
    keys, values = rng.integers(0, 20, 100_000), rng.random(100_000)  # each output over COUNTED rows: counted in the run
    compiled = []
    with tmr.scatter(keys, cluster=cluster) as k, tmr.scatter(values, cluster=cluster) as v:
        for limit in (0.1, 0.2, 0.3):  # each a filter output of other rows, in new variables
            with tmr.stats() as seen, tmr.filter(_above, (k, v), broadcast=[limit], cluster=cluster) as (kk, vv):
                got = tmr.sum_by_key(kk, vv, cluster=cluster)
            compiled.append([r.compiled for r in seen.runs])
            kept = values > limit
            assert dict(zip(got.keys.tolist(), got.values.tolist(), strict=True)) == pytest.approx(
                _sums(keys[kept], values[kept])
            )
    assert compiled[1:] == [[False, False], [False, False]]  # (the first may find both programs kept by an earlier test)


def test_a_kept_program_reads_each_runs_own_data_and_never_deleted_data(cluster: tmr.LocalCluster) -> None:
    keys = np.arange(400) % 7
    first, second = np.arange(400.0), np.arange(400.0) ** 2  # the same shape and placement: one program
    a, b = tmr.scatter(first, cluster=cluster), tmr.scatter(second, cluster=cluster)
    with tmr.scatter(keys, cluster=cluster) as k, b:
        with a:
            got_a = tmr.sum_by_key(k, a, cluster=cluster)
        got_b, stats = tmr.sum_by_key(k, b, cluster=cluster, return_stats=True)
        assert not stats.compiled
        assert dict(zip(got_a.keys.tolist(), got_a.values.tolist(), strict=True)) == pytest.approx(_sums(keys, first))
        assert dict(zip(got_b.keys.tolist(), got_b.values.tolist(), strict=True)) == pytest.approx(_sums(keys, second))
        with pytest.raises(tmr.ClusterError, match="was deleted"):
            tmr.sum_by_key(k, a, cluster=cluster)


# Host arrays fed per run (shards under 1 MiB travel by feed): a program keyed on the plan's shape, with placeholders of
# unknown rows, serves arrays of any rows whose shards keep their places and their batches (none, one, or how many).

LAYOUTS = (
    ([3, 4, 2, 1], [1, 2, 4, 3]),  # every shard one batch of at most batch_rows=4
    ([0, 3, 4, 2], [0, 1, 1, 4]),  # an empty first shard, one-row shards
    ([9, 5, 12, 6], [10, 6, 11, 7]),  # several batches each: 3, 2, 3, 2
)


def _by_key(keys: np.ndarray, values: np.ndarray) -> dict[object, float]:
    return {k: float(v) for k, v in pd.Series(values).groupby(keys).sum().items()}


def test_a_keyed_combine_over_host_arrays_of_new_rows_compiles_once_per_layout(cluster: tmr.LocalCluster) -> None:
    rng = np.random.default_rng(46)
    words = np.array(["é", "b", "日本", "a\x00b"], dtype=object)  # unicode keys, one with a NUL
    for layout in LAYOUTS:
        compiled = []
        for sizes in layout:
            rows = sum(sizes)
            keys, values = words[rng.integers(0, len(words), rows)], rng.random(rows)
            got, stats = tmr.sum_by_key(keys, values, cluster=cluster, sizes=sizes, batch_rows=4, return_stats=True)
            compiled.append(stats.compiled)
            assert dict(zip(got.keys.tolist(), got.values.tolist(), strict=True)) == pytest.approx(_by_key(keys, values))
        assert compiled[1:] == [False], layout  # the first may find the program kept by an earlier layout's test


@settings(max_examples=examples(6), deadline=None)
@given(
    batches=st.lists(st.integers(0, 3), min_size=4, max_size=4),
    batch_rows=st.integers(1, 3),
    data=st.data(),
)
def test_host_arrays_of_any_rows_in_one_layout_share_a_program(
    cluster: tmr.LocalCluster, batches: list[int], batch_rows: int, data: st.DataObject
) -> None:
    """Two draws of rows per shard of the same batches (0, 1 or k of ``batch_rows``): the second compiles nothing."""

    def rows(n: int) -> st.SearchStrategy[int]:  # rows that fold in n batches
        return (
            st.just(0)
            if n == 0
            else st.integers(1, batch_rows)
            if n == 1
            else st.integers((n - 1) * batch_rows + 1, n * batch_rows)
        )

    compiled = []
    for _ in range(2):
        sizes = [data.draw(rows(n)) for n in batches]
        keys = np.asarray(data.draw(st.lists(st.integers(-3, 3), min_size=sum(sizes), max_size=sum(sizes))), np.int64)
        values = np.arange(float(sum(sizes))) ** 2
        got, stats = tmr.sum_by_key(keys, values, cluster=cluster, sizes=sizes, batch_rows=batch_rows, return_stats=True)
        compiled.append(stats.compiled)
        assert dict(zip(got.keys.tolist(), got.values.tolist(), strict=True)) == _by_key(keys, values)
    assert not compiled[1]


def test_a_filter_of_host_arrays_of_new_rows_compiles_nothing(cluster: tmr.LocalCluster) -> None:
    compiled = []
    for sizes in ([3, 4, 2, 1], [1, 7, 5, 3]):  # every shard with rows: one layout of a map-only run
        x = np.arange(float(sum(sizes))) * 1.5
        with tmr.stats() as seen, tmr.filter(lambda v: tf.equal(v % 3.0, 0.0), x, cluster=cluster, sizes=sizes) as kept:
            assert kept.gather().tolist() == x[x % 3.0 == 0.0].tolist()
        compiled.append([r.compiled for r in seen.runs])
    assert compiled[1] == [False]


@pytest.mark.usefixtures("steps_on_workers")  # a small table: its group-by in a keyed run all the same
def test_a_lazy_group_by_after_a_filter_of_a_new_literal_compiles_nothing(cluster: tmr.LocalCluster) -> None:
    """The filter keeps other rows: the join and the group-by after it read client tables of other row counts."""
    rng = np.random.default_rng(7)
    lines = pd.DataFrame(
        {
            "k": rng.integers(0, 12, 300),
            "g": np.array(["ü", "b", "日本"], dtype=object)[rng.integers(0, 3, 300)],
            "v": np.where(rng.random(300) < 0.1, np.nan, rng.random(300)),
        }
    )
    parts = pd.DataFrame({"k": np.arange(12), "w": np.arange(12.0)})
    compiled = []
    for limit in (0.4, 0.8):
        q = tmr.lazy(lines).filter(col("k") < limit * 12).join(tmr.lazy(parts), on="k").group_by("g")
        got, runs = q.agg(s=("v", "sum"), n=("v", "count"), w=("w", "max")).collect(cluster=cluster, stats=True)
        compiled.append(runs[-1].compiled)
        kept = lines[lines.k < limit * 12].merge(parts, on="k")
        want = kept.groupby("g").agg(s=("v", lambda v: v.sum(min_count=1)), n=("v", "count"), w=("w", "max"))
        table = got.to_pandas().set_index("g").sort_index()
        pd.testing.assert_frame_equal(table, want.sort_index(), check_dtype=False, check_names=False)
    assert compiled[1] is False  # the group-by: the join before it compiles again (a join keys on its whole plan)
