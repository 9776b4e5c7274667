"""A keyed result kept on its reducer devices: keys and per-key values as co-partitioned resident arrays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from ._cluster import Cluster
from ._device import Device
from ._errors import ShardLostError
from ._keyed_plan import KeyedPlan
from ._keyed_result import KeyedResult, sorted_result
from ._plan import Plan, Shard, make_plan
from ._program import Builder, Stored
from ._resident import Sharded
from ._strings import Encoding


def _not_rebuildable(shard: Shard) -> tf.Tensor:
    raise ShardLostError(
        f"shard {shard.index} of a keyed resident result is lost with its reducer and cannot be rebuilt; run the keyed job again",
        shards=(shard.index,),
    )


@attrs.frozen
class Built:
    """What a keyed program's finish needs of its build: the keys' dtype, the values' row specs, a resident name."""

    key_dtype: tf.DType
    value_specs: Any
    """The structure of ``tf.TensorSpec`` (one row) of the finalized values."""
    resident: bool = False
    """Whether a run keeps the result on the reducers (stored in the run's variables) instead of fetching it."""


def keep_fetch(builder: Builder, reducers: Sequence[str], outputs: Sequence[tuple[tf.Tensor, Any]]) -> list[tf.Tensor]:
    """In the graph being built: each reducer's (keys, values) stored in the run's variables on its device
    (``{name}_keys``, ``{name}_v{j}``); what to fetch (each reducer's key count, once stored)."""
    fetch = []
    for r, (device, (keys, values)) in enumerate(zip(reducers, outputs, strict=True)):
        with tf.device(device), tf.name_scope(f"keep{r}"):
            ops = [builder.store(device, "_keys", r, keys)]
            ops += [builder.store(device, f"_v{j}", r, leaf) for j, leaf in enumerate(tf.nest.flatten(values))]
            with tf.control_dependencies(ops):
                fetch.append(tf.size(keys))
    return fetch


def keep(cluster: Cluster, kplan: KeyedPlan, stored: Stored, built: Built, decode: Encoding) -> KeyedSharded:
    """The :class:`KeyedSharded` for the variables a resident run filled: one plan, shard r on reducer r."""
    name, counts = stored.name, [int(n) for n in stored.value]
    available = [Device.parse(d) for d in cluster.devices]
    plan = make_plan(sum(counts), counts, list(kplan.reducers), available)
    builders = (_not_rebuildable,) * len(counts)
    key_dtype = np.dtype(object) if built.key_dtype == tf.string else np.dtype(built.key_dtype.as_numpy_dtype)
    keys = Sharded(cluster, plan, key_dtype, (plan.rows,), f"{name}_keys", builders)
    leaves = tuple(
        Sharded(cluster, plan, np.dtype(spec.dtype.as_numpy_dtype), (plan.rows, *spec.shape), f"{name}_v{j}", builders)
        for j, spec in enumerate(tf.nest.flatten(built.value_specs))
    )
    return KeyedSharded(keys, leaves, built.value_specs, decode, name)


@attrs.define(eq=False)
class KeyedSharded:
    """A keyed result kept on the reducer devices: keys and values partitioned by key hash, one shard per reducer.

    ``keys`` and ``values`` are co-partitioned [`Sharded`][tfmapreduce.Sharded] arrays (one plan), so later jobs read
    them in place: ``MapReduce(...).run((r.keys, r.values))`` ships nothing.  Within a shard the keys
    are distinct but not sorted; [`gather`][tfmapreduce.KeyedSharded.gather] fetches and sorts them into a [`KeyedResult`][tfmapreduce.KeyedResult].

    Examples:
        >>> keys, values = np.array([1, 2, 1, 3]), np.array([10, 20, 30, 40])
        >>> with tmr.sum_by_key(keys, values, cluster=cluster, resident=True) as r:
        ...     total = tmr.sum(r.values)             # a second job over the per-key sums
        ...     table = r.gather()                    # a KeyedResult
        >>> int(total), table.to_dict()
        (100, {1: 40, 2: 20, 3: 40})
    """

    keys: Sharded
    """The distinct keys, shard ``r`` on reducer ``r``."""
    leaves: tuple[Sharded, ...]
    """The per-key values as Sharded arrays, one per leaf of the combiner's structure, aligned with ``keys``."""
    structure: Any
    """The combiner's structure of the values (``tf.TensorSpec`` leaves, one row each)."""
    decode: Encoding
    """How string keys are returned: ``str`` decoded with this codec (True: UTF-8) where the input was text, else bytes."""
    name: str
    """The prefix of the resource containers that hold it on the workers."""

    @property
    def values(self) -> Any:
        """The per-key values: one Sharded, or the combiner's structure of them (e.g. a tuple for moments)."""
        if tf.nest.is_nested(self.structure):
            return tf.nest.pack_sequence_as(self.structure, list(self.leaves))
        return self.leaves[0]

    @property
    def plan(self) -> Plan:
        """Which reducer device holds how many keys."""
        return self.keys.plan

    def __len__(self) -> int:
        return self.keys.plan.rows

    def __repr__(self) -> str:
        return f"KeyedSharded({len(self)} keys on {len(self.plan.shards)} reducers, {self.name})"

    def gather(self, *, timeout: float | None = None) -> KeyedResult:
        """The whole result, fetched from the reducers and sorted by key."""
        keys = self.keys.gather(timeout=timeout)
        gathered = [leaf.gather(timeout=timeout) for leaf in self.leaves]
        values = tf.nest.pack_sequence_as(self.structure, gathered) if tf.nest.is_nested(self.structure) else gathered[0]
        return sorted_result(keys, values, decode=self.decode)

    def delete(self, *, timeout: float | None = None) -> None:
        """Free the result's memory on the reducers (also of reducers that received no key).  Safe to call twice."""
        for array in (self.keys, *self.leaves):
            array.delete(timeout=timeout)

    def __enter__(self) -> KeyedSharded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()
