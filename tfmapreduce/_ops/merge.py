"""Merging partials in a graph: a balanced tree of a combiner's pairwise merge."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf


def merge_tree(parts: Sequence[Any], merge: Callable[[Any, Any], Any]) -> Any:
    """Merge ``parts`` pairwise in a balanced tree (depth log n)."""
    while len(parts) > 1:
        parts = [_merge(merge, parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def _merge(merge: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """``merge(a, b)``, refusing a silent broadcast: partials of different shapes merged into one of those shapes.

    A concatenating merge ([9] and [1] into [10]) is fine; an element-wise one
    (tf.add of [9] and [1] into [9]) would quietly stretch one shard's partial.
    """
    merged = merge(a, b)
    try:
        leaves = zip(tf.nest.flatten(a), tf.nest.flatten(b), tf.nest.flatten(merged), strict=True)
    except (TypeError, ValueError):
        return merged
    for x, y, z in leaves:
        shapes = [getattr(t, "shape", None) for t in (x, y, z)]
        if any(s is None or not s.is_fully_defined() for s in shapes):
            continue
        if shapes[0] != shapes[1] and shapes[2] in (shapes[0], shapes[1]):
            raise ValueError(f"partials of shapes {shapes[0]} and {shapes[1]} would broadcast into {shapes[2]}")
    return merged
