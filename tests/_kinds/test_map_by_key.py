"""tmr.map(fn, x, by_key=True): every output row moved to the reducer of its key, kept as a KeyedSharded, compared with
numpy, collections and pandas; chained into keyed jobs and joins; the errors."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import draw_keys, examples, size_lists

import tfmapreduce as tmr
from tfmapreduce._ops.per_key import buckets


def _bucket_of(keys: np.ndarray, reducers: int) -> np.ndarray:
    """Each key's reducer, as keyed jobs and hash joins compute it (strings as their UTF-8 bytes)."""
    if keys.dtype == object:
        keys = np.array([k.encode() if isinstance(k, str) else k for k in keys.tolist()], dtype=object)
        tensor = tf.constant(keys.tolist(), tf.string)
    else:
        tensor = tf.constant(keys)
    return np.asarray(buckets(tensor, reducers))


def _shards(array: tmr.Sharded) -> list[np.ndarray]:
    """A resident array's rows, one array per shard (of its plan)."""
    rows = array.gather()
    return np.split(rows, np.cumsum(array.plan.sizes)[:-1]) if len(array.plan.sizes) > 1 else [rows]


def _text(keys: np.ndarray) -> list[Any]:
    return [k.decode() if isinstance(k, bytes) else k for k in keys.tolist()]


@settings(max_examples=examples(8))
@given(data=st.data())
def test_every_row_goes_to_the_reducer_of_its_key_in_input_order(cluster: tmr.LocalCluster, data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(("int32", "int64", "str")))
    rows = data.draw(st.integers(0, 30))
    keys = draw_keys(data.draw, kind, rows, strings=5, ints=6, small=6)
    sizes = data.draw(size_lists(rows))
    reducers = data.draw(st.integers(1, 4))
    index = np.arange(rows, dtype=np.int64)

    def fn(k: tf.Tensor, i: tf.Tensor) -> Any:
        return k, (i, tf.cast(i, tf.float64) / 2)

    with tmr.map(fn, (keys, index), by_key=True, cluster=cluster, sizes=sizes, reducers=reducers) as r:
        assert isinstance(r, tmr.KeyedSharded)
        assert r.partitioner == "hash"
        bucket = _bucket_of(keys, reducers)
        assert r.plan.sizes == tuple(int((bucket == b).sum()) for b in range(reducers))
        # shard b: the rows whose key hashes to b, by input shard then row order (here: input order)
        for b, (shard_keys, shard_rows) in enumerate(zip(_shards(r.keys), _shards(r.values[0]), strict=True)):
            np.testing.assert_array_equal(shard_rows, index[bucket == b])
            assert _text(shard_keys) == _text(keys[bucket == b])
        table = r.gather()  # every row, sorted by key, rows of one key in input order
        order = np.argsort(np.array(_text(keys)) if kind == "str" else keys, kind="stable")
        assert _text(table.keys) == _text(keys[order])
        assert all(type(k) is str for k in table.keys.tolist()) if kind == "str" else table.keys.dtype == np.dtype(kind)
        np.testing.assert_array_equal(table.values[0], order)
        np.testing.assert_array_equal(table.values[1], order / 2)


def test_an_explode_chains_into_keyed_jobs_and_co_partitioned_joins_of_repeated_keys(cluster: tmr.LocalCluster) -> None:
    x = np.arange(40, dtype=np.int64)
    y = np.arange(10, dtype=np.int64)

    def explode(v: tf.Tensor) -> Any:  # each row twice, under the key v % 5: keys repeat
        return tf.repeat(v % 5, 2), tf.repeat(v, 2)

    with (
        tmr.map(explode, x, by_key=True, cluster=cluster, sizes=[0, 17, 23], reducers=3) as a,
        tmr.map(lambda v: (v % 7, v * 10), y, by_key=True, cluster=cluster, reducers=3) as b,
        tmr.sum_by_key(y % 4, y, cluster=cluster, reducers=3, resident=True) as sums,
    ):
        exploded_keys, exploded = np.repeat(x % 5, 2), np.repeat(x, 2)
        totals = collections.defaultdict(int)
        for k, v in zip(exploded_keys.tolist(), exploded.tolist(), strict=True):
            totals[k] += v
        assert tmr.sum_by_key(a.keys, a.values).to_dict() == totals  # read in place
        assert tmr.count_by_key(a.keys, cluster=cluster).to_dict() == dict.fromkeys(range(5), 16)
        assert tmr.MapReduce(lambda k, v: (k, v), tmr.combiners.max, by_key=True).run((a.keys, a.values)).to_dict() == {
            k: int(exploded[exploded_keys == k].max()) for k in range(5)
        }
        left = pd.DataFrame({"key": exploded_keys, "left": exploded})
        for right_side, frame in (
            (b, pd.DataFrame({"key": y % 7, "right": y * 10})),
            (sums, pd.DataFrame({"key": np.arange(4), "right": [int(y[y % 4 == k].sum()) for k in range(4)]})),
        ):
            for how in ("inner", "outer"):
                assert tmr.plan_join(a, right_side, how=how).strategy == "co-partitioned"
                joined = tmr.join(a, right_side, how=how)
                assert joined.strategy == "co-partitioned"
                columns = ["key", "left", "right"]
                got = joined.to_pandas()[columns].sort_values(columns).reset_index(drop=True)
                want = pd.merge(left, frame, on="key", how=how)[columns].sort_values(columns).reset_index(drop=True)
                pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_results_on_other_reducers_or_range_partitioned_are_joined_by_a_shuffle(cluster: tmr.LocalCluster) -> None:
    keys = np.array([3, 1, 3, 2, 9, 1, 3], dtype=np.int64)
    with (
        tmr.map(lambda k: (k, k * 2), keys, by_key=True, cluster=cluster, reducers=2) as two,
        tmr.map(lambda k: (k, k * 3), keys, by_key=True, cluster=cluster, reducers=3) as three,
        tmr.map(lambda k: (k, k * 4), keys, by_key=True, cluster=cluster, reducers=2, partitioner="range") as ranged,
    ):
        assert ranged.partitioner == "range"
        shards = [s.tolist() for s in _shards(ranged.keys)]  # each shard's keys sorted, all below the next shard's
        assert all(s == sorted(s) for s in shards)
        assert [k for s in shards for k in s] == sorted(keys.tolist())
        assert ranged.gather().keys.tolist() == sorted(keys.tolist())
        expected = collections.Counter(keys.tolist())
        for other in (three, ranged):
            assert tmr.plan_join(two, other, strategy="auto").strategy != "co-partitioned"
            joined = tmr.join(two, other, strategy="hash")
            assert collections.Counter(joined.keys.tolist()) == {k: n * n for k, n in expected.items()}


def test_text_files_are_mapped_batch_by_batch_and_their_words_keyed(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    lines = ["the cat sat", "", "on the mat", "the end"] * 5
    (tmp_path / "a.txt").write_text("\n".join(lines[:9]) + "\n")
    (tmp_path / "b.txt").write_text("\n".join(lines[9:]) + "\n")

    def words(line: tf.Tensor) -> Any:
        w = tf.strings.split(line).flat_values
        return w, tf.strings.length(w)

    files = tmr.read_text(str(tmp_path / "*.txt"))
    with tmr.map(words, files, by_key=True, cluster=cluster, batch_rows=3, reducers=2) as r:
        table = r.gather()
        all_words = [w for line in lines for w in line.split()]
        assert table.keys.tolist() == sorted(all_words)  # str: the files are text
        assert table.values.tolist() == [len(w) for w in sorted(all_words)]
        assert tmr.count_by_key(r.keys).to_dict() == dict(collections.Counter(all_words))  # text read as str


def test_empty_inputs_and_empty_outputs_give_empty_shards_on_every_reducer(cluster: tmr.LocalCluster) -> None:
    with tmr.map(lambda k: (k, k), np.zeros(0, np.int32), by_key=True, cluster=cluster, reducers=3) as none:
        assert none.plan.sizes == (0, 0, 0)
        table = none.gather()
        assert table.keys.dtype == np.int32
        assert len(table) == 0
    dropped = tmr.map(
        lambda s: (tf.boolean_mask(s, tf.strings.length(s) > 9), tf.zeros([0, 2], tf.float32)),
        np.array(["a", "bb", "c"]),
        by_key=True,
        cluster=cluster,
        sizes=[0, 2, 1],
    )
    with dropped:
        assert len(dropped) == 0
        assert dropped.values.shape == (0, 2)
        assert len(tmr.sum_by_key(dropped.keys, dropped.values)) == 0


def test_errors_name_fn_what_it_returned_and_how_to_fix_the_call(cluster: tmr.LocalCluster) -> None:
    x = np.arange(10, dtype=np.int64)
    with pytest.raises(tmr.MapFunctionError, match=r"fn \S*<lambda> of a by_key=True job must return a pair.*drop by_key=True"):
        tmr.map(lambda v: v, x, by_key=True, cluster=cluster)
    with pytest.raises(tmr.MapFunctionError, match=r"keys of dtype float32.*int32, int64 or string.*tf.cast"):
        tmr.map(lambda v: (tf.cast(v, tf.float32), v), x, by_key=True, cluster=cluster)
    with pytest.raises(tmr.MapFunctionError, match=r"returned 3 keys but values with 2 rows"):
        tmr.map(lambda v: (v[:3], v[:2]), x, by_key=True, cluster=cluster)
    with pytest.raises(tmr.MapFunctionError, match=r"fn \S*<lambda> returned keys and values of different lengths \(shard \d"):
        tmr.map(lambda v: (v, tf.boolean_mask(v, v > 3)), x, by_key=True, cluster=cluster)  # known only in the run
    with pytest.raises(tmr.MapFunctionError, match=r"RaggedTensor|of tensors"):
        tmr.map(lambda v: (v, tf.RaggedTensor.from_row_lengths(v, tf.ones_like(v))), x, by_key=True, cluster=cluster)
    with pytest.raises(TypeError, match=r"by_key must be True .* or False"):
        tmr.map(lambda v: (v, v), x, by_key="yes", cluster=cluster)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"reducers= applies to keyed jobs only.*pass by_key=True"):
        tmr.map(lambda v: v, x, cluster=cluster, reducers=2)
    with pytest.raises(TypeError, match="speculate=True does not apply to map and filter"):
        tmr.map(lambda v: (v, v), x, by_key=True, cluster=cluster, speculate=True)
    with pytest.raises(TypeError, match=r"max_bytes=100 limits what one reducer receives with by_key=True"):
        tmr.map(lambda v: v, x, cluster=cluster, max_bytes=100)
    with pytest.raises(ValueError, match=r"max_bytes must be None .* or an int ≥ 1"):
        tmr.map(lambda v: (v, v), x, by_key=True, cluster=cluster, max_bytes=0)


def test_a_reducer_over_its_budget_receives_nothing_and_the_error_says_what_to_do(cluster: tmr.LocalCluster) -> None:
    x = np.arange(10, dtype=np.int64)  # 160 bytes of keys and values, all of them for one reducer
    with pytest.raises(
        tmr.ReducerMemoryError, match=r"reducer 0 .* 10 rows \(160 bytes.*max_bytes=100.*nothing was sent.*reducers=N"
    ):
        tmr.map(lambda v: (v, v), x, by_key=True, cluster=cluster, reducers=1, max_bytes=100)
    with tmr.map(lambda v: (v, v), x, by_key=True, cluster=cluster, reducers=1, max_bytes=160) as fits:
        assert fits.gather().keys.tolist() == x.tolist()
