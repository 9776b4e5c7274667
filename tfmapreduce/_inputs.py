"""Inputs: the data a job maps, canonicalized once into sources that know how to reach each shard."""

from __future__ import annotations

import weakref
from typing import Any, Protocol

import attrs
import numpy as np
import tensorflow as tf

from ._errors import InputError
from ._plan import Plan, Shard


class Source(Protocol):
    """One input of a job, as the compiler sees it."""

    @property
    def rows(self) -> int: ...

    @property
    def dtype(self) -> np.dtype: ...

    @property
    def shape(self) -> tuple[int, ...]:
        """The whole input's shape (rows first)."""
        ...

    def signature(self, plan: Plan) -> tuple[Any, ...]:
        """What the graph compiled for ``plan`` depends on (not the values)."""
        ...

    def tensor(self, shard: Shard) -> tuple[tf.Tensor, tf.Tensor | None]:
        """Inside the job's graph and the shard's device scope: the shard's tensor, and the placeholder to feed (or None)."""
        ...

    def feed(self, shard: Shard) -> Any:
        """The value fed to that placeholder for this run."""
        ...


_nonnegative: weakref.WeakKeyDictionary[tf.Graph, set[str]] = weakref.WeakKeyDictionary()


def mark_nonnegative(tensor: tf.Tensor) -> tf.Tensor:
    """Record, while building a graph, that ``tensor`` holds no negative number (and no NaN)."""
    _nonnegative.setdefault(tensor.graph, set()).add(tensor.name)
    return tensor


def known_nonnegative(tensor: tf.Tensor) -> bool:
    """Whether :func:`mark_nonnegative` recorded ``tensor``: a sum over it cannot cancel."""
    return tensor.name in _nonnegative.get(tensor.graph, ())


def as_array(value: Any, *, argument: str) -> np.ndarray:
    """``value`` (numpy array, tf.Tensor, nested list, scalar) as a numeric numpy array.

    Raises:
        TypeError: strings, objects or other non-numeric data.
        InputError: a ragged nested list.
    """
    if isinstance(value, (tf.Tensor, tf.Variable)):
        value = value.numpy()
    try:
        array = np.asarray(value)
    except ValueError as e:
        raise InputError(f"{argument} must be a rectangular array, got a ragged {type(value).__name__} ({e})") from None
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise TypeError(f"{argument} must hold numbers or booleans, got dtype {array.dtype}; convert it, e.g. np.asarray(x, dtype=np.float32)")
    if np.iscomplexobj(array):
        raise TypeError(f"{argument} has complex dtype {array.dtype}; tfmapreduce maps real numbers")
    return array


@attrs.frozen(eq=False)
class Shipped:
    """Host data sliced on the client: each task receives only its shards' bytes, fed per run."""

    array: np.ndarray

    @property
    def rows(self) -> int:
        return int(self.array.shape[0])

    @property
    def dtype(self) -> np.dtype:
        return self.array.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    def signature(self, plan: Plan) -> tuple[Any, ...]:
        return ("shipped", self.array.dtype.str, self.array.shape[1:], tuple(self._nonnegative(s) for s in plan.shards))

    def _nonnegative(self, shard: Shard) -> bool:
        """float32 shards without a negative (or NaN) element: their sums take the blocked path."""
        return self.array.dtype == np.float32 and bool(shard.rows) and bool(self.array[shard.start : shard.stop].min() >= 0)

    def tensor(self, shard: Shard) -> tuple[tf.Tensor, tf.Tensor | None]:
        ph = tf.compat.v1.placeholder(tf.as_dtype(self.array.dtype), (shard.rows, *self.array.shape[1:]), name="x")
        return (mark_nonnegative(ph) if self._nonnegative(shard) else ph), ph

    def feed(self, shard: Shard) -> Any:
        return self.array[shard.start : shard.stop]


def sources(x: Any, *, argument: str = "x") -> tuple[Any, ...]:
    """Canonicalize a job's data: one array, or a tuple of co-partitioned inputs, into sources with equal rows.

    A tuple means several inputs partitioned together on axis 0; anything else
    is one input.  Objects with an ``as_source()`` method (resident ``Sharded``
    data) supply their own source.
    """
    items = x if isinstance(x, tuple) else (x,)
    if not items:
        raise InputError(f"{argument}=() holds no input; pass an array or a tuple of arrays with equal rows")
    result = []
    for i, item in enumerate(items):
        name = f"{argument}[{i}]" if isinstance(x, tuple) else argument
        if hasattr(item, "as_source"):
            result.append(item.as_source())
            continue
        array = as_array(item, argument=name)
        if array.ndim == 0:
            raise InputError(f"{name} is a 0-d scalar ({array!r}); the rows to partition are its axis 0, so pass at least a 1-d array")
        result.append(Shipped(array))
    rows = {s.rows for s in result}
    if len(rows) > 1:
        shapes = ", ".join(f"{argument}[{i}]: {s.rows}" for i, s in enumerate(result))
        raise InputError(f"co-partitioned inputs must have the same rows on axis 0, got {shapes}; slice or pad them to one length")
    return tuple(result)
