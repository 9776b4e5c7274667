"""``tmr.per_group``: a reducer that sees every value of each key (Hadoop's ``reduce(key, values)``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from .combine import Combiner, GroupForm
from .mapfn import callable_name


def _no_whole_input(*_: Any) -> Any:
    raise TypeError("a per_group reducer takes part in keyed jobs only: MapReduce(map_fn, tmr.per_group(fn), by_key=True)")


def group_reducer(form: GroupForm, name: str) -> Combiner:
    """The reducer of ``form`` as the combiner slot of a ``MapReduce`` holds it (its whole-input functions refuse)."""
    return Combiner(partial=_no_whole_input, merge=_no_whole_input, name=name, per_group=form)


def check_max_bytes(max_bytes: object) -> int | None:
    """``max_bytes`` as None or an int ≥ 1 (ValueError otherwise)."""
    if max_bytes is None:
        return None
    if isinstance(max_bytes, (bool, np.bool_)) or not isinstance(max_bytes, (int, np.integer)) or max_bytes < 1:
        raise ValueError(
            f"max_bytes must be None (a quarter of each reducer host's available memory) or an int ≥ 1 (bytes of keys and "
            f"values one reducer may receive), got {max_bytes!r}"
        )
    return int(max_bytes)


def per_group(fn: Callable[[tf.Tensor, Any], Any], *, sort_values: bool = False, max_bytes: int | None = None) -> Combiner:
    """A reducer that sees every value of each key, for ``tmr.MapReduce(map_fn, reducer, by_key=True)``.

    After the shuffle, on each reducer device, ``fn(keys, values)`` is traced and called once on
    that reducer's partition: ``keys`` is a 1-D tensor of its distinct keys, in no particular order;
    ``values`` is a ``tf.RaggedTensor`` with one row per key holding every value of that key (for a
    structure of values, the same structure of ragged tensors), each row sorted ascending when
    ``sort_values=True`` (integer, float and string values; NaN last and strings in byte order, as numpy sorts).  ``fn`` returns a tensor
    (or structure of tensors) with one row per key, or a ``tf.RaggedTensor`` with one row per key for
    results of varying length.  It is also called on a reducer that received no key (0 rows).

    Every (key, value) row travels to its key's reducer: no map-side combine is possible for a
    general ``fn``.  A reducer holds its whole partition; before any value travels, each reducer
    checks that its partition's keys and values fit in ``max_bytes`` (None: a quarter of the memory
    its host has available, from ``/proc/meminfo``); over it, the run spills to the workers' disks and
    each reducer reduces one sub-partition of its keys at a time (fetched or ``resident=True``, by hash
    or by range: the in-memory run's result).  ``ReducerMemoryError`` is left for one key whose values
    alone exceed the budget.

    Args:
        fn: ``(keys, values) -> rows``, built from TensorFlow ops (it is traced in a graph).
        sort_values: sort each key's values ascending (Hadoop's secondary sort).
        max_bytes: the most bytes of keys and values one reducer may receive, or None.

    Returns:
        A reducer (a [`Combiner`][tfmapreduce.Combiner] whose ``per_group`` is set) for a ``by_key=True`` job.

    Raises:
        TypeError: ``fn`` is not callable, or ``sort_values`` is not a bool.
        ValueError: ``max_bytes`` is not None or an int ≥ 1.

    Examples:
        >>> spread = tmr.per_group(lambda keys, v: tf.reduce_max(v, axis=1) - tf.reduce_min(v, axis=1))
        >>> job = tmr.MapReduce(lambda k, v: (k, v), spread, by_key=True)
        >>> job.run((np.array([1, 2, 1, 1]), np.array([5, 7, 2, 4])), cluster=cluster).to_dict()
        {1: 3, 2: 0}
        >>> firsts = tmr.per_group(lambda keys, v: v[:, :2], sort_values=True)  # ragged: each key's 2 smallest
        >>> tmr.MapReduce(lambda k, v: (k, v), firsts, by_key=True).run((np.array([1, 2, 1, 1]), np.array([5, 7, 2, 4])), cluster=cluster)[1]
        array([2, 4])
    """
    if not callable(fn):
        raise TypeError(
            f"fn must be a callable (keys, values) -> one row per key, e.g. lambda keys, v: tf.reduce_max(v, axis=1); "
            f"got {type(fn).__name__} {fn!r}"
        )
    if not isinstance(sort_values, (bool, np.bool_)):
        raise TypeError(f"sort_values must be True or False, got {type(sort_values).__name__} {sort_values!r}")
    form = GroupForm(fn, bool(sort_values), check_max_bytes(max_bytes))
    return group_reducer(form, f"per_group({callable_name(fn)})")
