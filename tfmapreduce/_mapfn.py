"""The user's map function inside a graph: called on a shard's tensors, its output checked and named in errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import tensorflow as tf

from ._errors import MapFunctionError
from ._plan import Shard

T = TypeVar("T")


def traced(build: Callable[[], T]) -> T:
    """``build()`` with AutoGraph off: what it traces (map functions, and every ``tf.data`` function made inside) is
    traced as written, one rule for every path (the map-function guide: TensorFlow ops, ``tf.cond`` for branches).

    AutoGraph rewrote each ``tf.data`` function otherwise: seconds for one keyed program in ``batch_rows`` batches.

    Example:
        >>> traced(lambda: 1 + 1)
        2
    """
    plain: Callable[[], T] = tf.autograph.experimental.do_not_convert(build)
    return plain()


def callable_name(fn: object) -> str:
    """A readable name of a user's function, for messages.

    Example:
        >>> callable_name(tf.reduce_sum)
        'reduce_sum'
    """
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


def where(shard: Shard) -> str:
    """How messages name a shard: its index, rows and device."""
    return f"shard {shard.index} (rows {shard.start}:{shard.stop} on {shard.device})"


def describe(output: Any) -> str:
    """A map output's structure of dtypes and shapes, for messages."""
    try:
        return repr(
            tf.nest.map_structure(lambda t: f"{tf.convert_to_tensor(t).dtype.name}{tf.convert_to_tensor(t).shape}", output)
        )
    except (TypeError, ValueError):
        return repr(output)


def first_line(error: BaseException) -> str:
    """The first line of an error's message (TensorFlow's run on for pages)."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


TRACED = (
    "it is called once on symbolic tensors as the graph is built: use TensorFlow ops "
    "(no .numpy(), no Python if/for on a tensor's value; tf.where, tf.cond, tf.map_fn instead)"
)
"""The hint of an error raised while tracing a user's function."""


def call_map(map_fn: Any, tensors: Any, broadcast: tuple[Any, ...], at: str, *, argument: str = "map_fn") -> Any:
    """``map_fn(*tensors, *broadcast)`` as the graph is built; MapFunctionError naming ``argument`` and ``at`` if it raises."""
    try:
        return map_fn(*tensors, *broadcast)
    except Exception as e:
        raise MapFunctionError(f"{argument} {callable_name(map_fn)} raised {type(e).__name__} on {at}: {e}; {TRACED}") from e


def map_shard(map_fn: Any, shard: Shard, tensors: Any, broadcast: tuple[Any, ...]) -> Any:
    """``map_fn`` on one shard's tensors (inside its device scope), its output converted to tensors.

    Raises:
        MapFunctionError: ``map_fn`` raised, or returned something that is not a (nested structure of) tensor(s).
    """
    at = where(shard)
    output = call_map(map_fn, tensors, broadcast, at)
    try:
        return tf.nest.map_structure(tf.convert_to_tensor, output)
    except (TypeError, ValueError) as e:
        raise MapFunctionError(
            f"map_fn {callable_name(map_fn)} must return a tensor or a nested structure of tensors; on {at} it returned {output!r} ({e})"
        ) from None


def check_same_outputs(map_fn: object, first: tuple[Shard, Any], shard: Shard, output: Any) -> None:
    """MapFunctionError unless ``output`` (of ``shard``) has the structure and dtypes of the first shard's."""
    shard0, output0 = first
    try:
        tf.nest.assert_same_structure(output0, output)
        same = all(a.dtype == b.dtype for a, b in zip(tf.nest.flatten(output0), tf.nest.flatten(output), strict=True))
    except (TypeError, ValueError):
        same = False
    if not same:
        raise MapFunctionError(
            f"map_fn {callable_name(map_fn)} returned different structures for shard {shard0.index} and shard {shard.index}: "
            f"{describe(output0)} vs {describe(output)}; it must return the same structure and dtypes for every shard"
        )
