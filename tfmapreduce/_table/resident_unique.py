"""The distinct rows of a resident table's columns, on the workers: no row passes through the client.

A map run with ``by_key=True`` moves each row of the columns to the reducer of its key (``keys.py``'s exact
encoding, a null a value of its own: SQL's ``DISTINCT`` takes two nulls as equal), so the rows of one key meet on
one device; a map-only run keeps each key's first row there (``tf.unique``); and the resident sort orders the
distinct rows by the columns, nulls last, as the eager ``unique`` gives them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from .._io.resident import Sharded, delete_all
from .._kinds.map_api import map as map_rows
from .column import ResidentColumn, column_arrays, refilled
from .keys import KeyCodec
from .maps import arrays_of
from .resident_list_keys import KEY, hex_columns
from .resident_order import resident_sorted

_MAP_OPTIONS = ("cluster", "timeout", "retries")


def resident_distinct(
    columns: Mapping[str, ResidentColumn], names: Sequence[str], options: dict[str, Any], carried: Sequence[str] = ()
) -> dict[str, ResidentColumn]:
    """The distinct rows of ``columns``' ``names``, sorted by them (nulls last), as new resident columns, with each
    distinct row's first row's ``carried`` columns beside them (columns its key decides). A list column's key is its
    lists' bytes (``resident_list_keys``, a column beside it), by which it is also sorted."""
    chosen = {n: columns[n] for n in (*names, *carried)}
    made: list[Sharded] = []
    try:
        lists = hex_columns({n: chosen[n] for n in names if chosen[n].type.inner is not None}, options)
        made.extend(c.values for c in lists.values())
        keyed_by = [KEY + n if n in lists else n for n in names]
        chosen |= {KEY + n: c for n, c in lists.items()}
        at, i = {}, 0
        for name, c in chosen.items():
            at[name] = (i, i + 1 if c.valid is not None else None)
            i += len(column_arrays(c))
        codec = KeyCodec(tuple(chosen[n].type for n in keyed_by), tuple(chosen[n].nullable for n in keyed_by))
        mapped = {k: options[k] for k in _MAP_OPTIONS if k in options}
        moved = {k: options[k] for k in (*_MAP_OPTIONS, "reducers") if k in options}
        keyed = map_rows(_keyed(codec, tuple(at[n] for n in keyed_by)), arrays_of(chosen), by_key=True, **moved)
        values = keyed.values if isinstance(keyed.values, tuple) else (keyed.values,)
        made.extend([keyed.keys, *values])
        out = map_rows(_first, (keyed.keys, *values), **mapped)
        parts = list(out) if isinstance(out, tuple) else [out]
        made.extend(parts)
        it = iter(parts[1:])
        distinct = {n: refilled(c, it) for n, c in chosen.items()}
        n = len(names)
        ordered = resident_sorted(distinct, keyed_by, [False] * n, [True] * n, None, options)
        made.extend(a for k in lists for a in column_arrays(ordered.pop(KEY + k)))
        return ordered
    finally:
        delete_all(list({id(a): a for a in made}.values()))


@functools.lru_cache(maxsize=256)
def _keyed(codec: KeyCodec, at: tuple[tuple[int, int | None], ...]) -> Callable[..., Any]:
    """The map function giving each row's key (``codec``'s, of the columns at ``at``: values, validity) and every
    column's arrays."""

    def keyed(*tensors: tf.Tensor) -> Any:
        return codec.encode([(tensors[v], None if m is None else tensors[m]) for v, m in at]), tuple(tensors)

    return keyed


def _first(keys: tf.Tensor, *columns: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """The first row of each key of the shard, in the order the keys first come."""
    distinct, ids = tf.unique(keys)
    first = tf.math.unsorted_segment_min(tf.range(tf.size(keys)), ids, tf.size(distinct))
    return (tf.gather(keys, first), *(tf.gather(c, first) for c in columns))
