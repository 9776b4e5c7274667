"""A keyed result kept on its reducer devices: keys and per-key values (or every row, of a map by key) as co-partitioned
resident arrays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from ..._base.device import Device
from ..._base.errors import ShardLostError
from ..._base.plan import Plan, Shard, make_plan
from ..._cluster.cluster import Cluster
from ..._engine.program import Builder, Stored
from ..._io.resident import Sharded, delete_all
from ..._io.strings import Encoding
from .plan import KeyedPlan
from .result import KeyedResult, rows, sorted_result


def _not_rebuildable(shard: Shard) -> tf.Tensor:
    raise ShardLostError(
        f"shard {shard.index} of a keyed resident result is lost with its reducer and cannot be rebuilt; run the keyed job again",
        shards=(shard.index,),
    )


@attrs.frozen
class KeyedBuilt:
    """What a keyed program's finish needs of its build: the keys' dtype, the values' row specs, a resident name."""

    key_dtype: tf.DType
    value_specs: Any
    """The structure of ``tf.TensorSpec`` (one row) of the finalized values."""
    resident: bool = False
    """Whether a run keeps the result on the reducers (stored in the run's variables) instead of fetching it."""
    ragged: tuple[bool, ...] = ()
    """Per leaf of the values: whether it is ragged (rows of varying length; a group job's); none when empty."""


@attrs.frozen
class RaggedSharded:
    """A resident ragged leaf of a [`KeyedSharded`][tfmapreduce.KeyedSharded]: each key's values, in any number, kept
    on the key's reducer.

    ``flat_values`` holds every key's values one after another (a reducer's keys in the order of
    its shard of ``keys``); ``row_lengths`` holds how many each key has, aligned with ``keys``.
    Both are [`Sharded`][tfmapreduce.Sharded] arrays that later jobs read in place.

    Examples:
        >>> with tmr.collect_by_key(np.array([1, 2, 1]), np.array([5, 7, 4]), resident=True, cluster=cluster) as r:
        ...     total, lengths = tmr.sum(r.values.flat_values), tmr.sum(r.values.row_lengths)
        >>> int(total), int(lengths)
        (16, 3)
    """

    flat_values: Sharded
    """Every key's values, concatenated per reducer."""
    row_lengths: Sharded
    """How many values each key has (int64), aligned with the keys."""

    @property
    def arrays(self) -> tuple[Sharded, Sharded]:
        """Both arrays (flat values, row lengths)."""
        return self.flat_values, self.row_lengths


def keep_fetch(builder: Builder, reducers: Sequence[str], outputs: Sequence[tuple[tf.Tensor, Any]]) -> list[tf.Tensor]:
    """In the graph being built: each reducer's (keys, values) stored in the run's variables on its device
    (``{name}_keys``, ``{name}_v{j}``; a ``tf.RaggedTensor`` leaf as its flat values and its row lengths
    ``{name}_l{j}``); what to fetch: each reducer's key count, then each ragged leaf's value count, once stored."""
    fetch = []
    for r, (device, (keys, values)) in enumerate(zip(reducers, outputs, strict=True)):
        with tf.device(device), tf.name_scope(f"keep{r}"):
            ops = [builder.store(device, "_keys", r, keys)]
            counts = [tf.size(keys, tf.int64)]
            for j, leaf in enumerate(tf.nest.flatten(values)):
                if isinstance(leaf, tf.RaggedTensor):
                    ops += [
                        builder.store(device, f"_v{j}", r, leaf.flat_values),
                        builder.store(device, f"_l{j}", r, leaf.row_lengths()),
                    ]
                    counts.append(tf.shape(leaf.flat_values, out_type=tf.int64)[0])
                else:
                    ops.append(builder.store(device, f"_v{j}", r, leaf))
            with tf.control_dependencies(ops):
                fetch.append(tf.stack(counts))
    return fetch


def keep(cluster: Cluster, kplan: KeyedPlan, stored: Stored, built: KeyedBuilt, decode: Encoding) -> KeyedSharded:
    """The :class:`KeyedSharded` for the variables a resident run filled: one plan, shard r on reducer r (a ragged
    leaf's flat values: a plan of their own on the same reducers)."""
    name, counts = stored.name, [np.asarray(n).ravel() for n in stored.value]
    available = [Device.parse(d) for d in cluster.devices]
    builders = (_not_rebuildable,) * len(counts)

    def plan_of(column: int) -> Plan:
        rows = [int(c[column]) for c in counts]
        return make_plan(sum(rows), rows, list(kplan.reducers), available)

    plan = plan_of(0)
    key_dtype = np.dtype(object) if built.key_dtype == tf.string else np.dtype(built.key_dtype.as_numpy_dtype)
    text = "utf-8" if decode is True else decode or None  # how its strings come back, gathered alone too
    keys = Sharded(cluster, plan, key_dtype, (plan.rows,), f"{name}_keys", builders, encoding=text)
    leaves: list[Sharded | RaggedSharded] = []
    column = 0
    for j, spec in enumerate(tf.nest.flatten(built.value_specs)):
        dtype = np.dtype(object) if spec.dtype == tf.string else np.dtype(spec.dtype.as_numpy_dtype)
        if built.ragged and built.ragged[j]:
            column += 1
            flat = plan_of(column)
            values = Sharded(cluster, flat, dtype, (flat.rows, *spec.shape), f"{name}_v{j}", builders, encoding=text)
            lengths = Sharded(cluster, plan, np.dtype(np.int64), (plan.rows,), f"{name}_l{j}", builders)
            leaves.append(RaggedSharded(values, lengths))
        else:
            leaves.append(Sharded(cluster, plan, dtype, (plan.rows, *spec.shape), f"{name}_v{j}", builders, encoding=text))
    return KeyedSharded(keys, tuple(leaves), built.value_specs, decode, name, kplan.partitioner)


@attrs.define(eq=False)
class KeyedSharded:
    """A keyed result kept on the reducer devices: keys and values partitioned by key hash, one shard per reducer.

    ``keys`` and ``values`` are co-partitioned [`Sharded`][tfmapreduce.Sharded] arrays (one plan), so later jobs read
    them in place: ``MapReduce(...).run((r.keys, r.values))`` ships nothing.  Within a shard the keys
    are distinct (a keyed job's; [`map`][tfmapreduce.map] with ``by_key=True`` keeps every row instead, so its keys
    repeat, in input order) but not sorted; [`gather`][tfmapreduce.KeyedSharded.gather] fetches and sorts them into a [`KeyedResult`][tfmapreduce.KeyedResult].
    With ``partitioner="range"`` the result is ordered instead: shard r holds a range of keys, sorted, all below
    shard r + 1's, and ``gather`` concatenates the shards without sorting.

    Examples:
        >>> keys, values = np.array([1, 2, 1, 3]), np.array([10, 20, 30, 40])
        >>> with tmr.sum_by_key(keys, values, cluster=cluster, resident=True) as r:
        ...     total = tmr.sum(r.values)             # a second job over the per-key sums
        ...     table = r.gather()                    # a KeyedResult
        >>> int(total), table.to_dict()
        (100, {1: 40, 2: 20, 3: 40})
        >>> keys = np.array([5, 1, 9, 1, 3])
        >>> with tmr.count_by_key(keys, cluster=cluster, reducers=2, partitioner="range", resident=True) as r:
        ...     r.keys.gather().tolist()  # shard 0's keys, then shard 1's: in key order
        [1, 3, 5, 9]
    """

    keys: Sharded
    """The keys, shard ``r`` on reducer ``r``: distinct, or one per row for ``map(..., by_key=True)``."""
    leaves: tuple[Sharded | RaggedSharded, ...]
    """The per-key values, one per leaf of the combiner's structure, aligned with ``keys``: a Sharded array, or for a
    group job's ragged leaf a [`RaggedSharded`][tfmapreduce.RaggedSharded]."""
    structure: Any
    """The combiner's structure of the values (``tf.TensorSpec`` leaves, one row each)."""
    decode: Encoding
    """How string keys are returned: ``str`` decoded with this codec (True: UTF-8) where the input was text, else bytes."""
    name: str
    """The prefix of the resource containers that hold it on the workers."""
    partitioner: str = "hash"
    """How the job sent keys to reducers: ``"hash"`` (in no order) or ``"range"`` (shard r's keys sorted, below r + 1's)."""

    @property
    def values(self) -> Any:
        """The per-key values: one Sharded, or the combiner's structure of them (e.g. a tuple for moments)."""
        if tf.nest.is_nested(self.structure):
            return tf.nest.pack_sequence_as(self.structure, list(self.leaves))
        return self.leaves[0]

    def dense(self, use: str) -> tuple[Sharded, ...]:
        """The value leaves, each a Sharded array of one row per key, for ``use`` (what takes them, for the error): a
        TypeError where a leaf is ragged."""
        if any(isinstance(leaf, RaggedSharded) for leaf in self.leaves):
            raise TypeError(
                f"{use} takes one row per key, but this keyed result holds a ragged leaf (a RaggedSharded: values of varying "
                "length per key); pass its arrays instead, e.g. (r.keys, r.values.row_lengths), or r.values.flat_values"
            )
        return tuple(leaf for leaf in self.leaves if isinstance(leaf, Sharded))

    @property
    def plan(self) -> Plan:
        """Which reducer device holds how many keys."""
        return self.keys.plan

    def __len__(self) -> int:
        return self.keys.plan.rows

    def __repr__(self) -> str:
        return f"KeyedSharded({len(self)} keys on {len(self.plan.shards)} reducers, {self.name})"

    def gather(self, *, timeout: float | None = None) -> KeyedResult:
        """The whole result, fetched from the reducers and sorted by key (a range partition's: concatenated, in order).

        The sort is stable: for ``map(..., by_key=True)``, whose keys repeat, the result has one entry per row, the
        rows of one key in input order."""
        keys = self.keys.gather(timeout=timeout)
        gathered = [
            rows(leaf.flat_values.gather(timeout=timeout), leaf.row_lengths.gather(timeout=timeout))
            if isinstance(leaf, RaggedSharded)
            else leaf.gather(timeout=timeout)
            for leaf in self.leaves
        ]
        values = tf.nest.pack_sequence_as(self.structure, gathered) if tf.nest.is_nested(self.structure) else gathered[0]
        return sorted_result(keys, values, decode=self.decode, ordered=self.partitioner == "range")

    def delete(self, *, timeout: float | None = None) -> None:
        """Free the result's memory on the reducers (also of reducers that received no key).  Safe to call twice."""
        arrays = [a for leaf in (self.keys, *self.leaves) for a in (leaf.arrays if isinstance(leaf, RaggedSharded) else (leaf,))]
        delete_all(arrays, timeout=timeout)

    def __enter__(self) -> KeyedSharded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()
