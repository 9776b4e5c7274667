"""Spread by key: the variance and the standard deviation of each key's values, each one keyed run (the keywords of
``sum_by_key``, ``ddof=`` besides).

Example:
    >>> tmr.variance_by_key(np.array([1, 1, 2]), np.array([1.0, 3.0, 5.0]), ddof=1, cluster=cluster).to_dict()[1]
    2.0
"""

from __future__ import annotations

from typing import Any, Literal, overload

import attrs
import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._kinds.shuffle.result import KeyedResult
from .._kinds.shuffle.sharded import KeyedSharded
from .._ops.combine import Combiner, SegmentForm
from .._ops.moments import MOMENTS
from .._options import Options
from ._by_key import keyed_run
from ._keyed_input import keyed_input, pair


def _variance_combiner(ddof: int, *, root: bool = False) -> Combiner:
    """:data:`MOMENTS` whose per-key result is ``M2 / (count - ddof)`` (NaN where ``count ≤ ddof``, as numpy), or its
    square root with ``root``."""
    form = MOMENTS.per_key
    assert form is not None

    def finalize(p: Any) -> Any:
        if isinstance(p[0], tuple):  # one (count, mean, M2) per value column
            return tuple(finalize(column) for column in p)
        count, _, m2 = p
        denominator = count - float(ddof)
        shape = tf.concat([tf.shape(count), tf.ones([tf.rank(m2) - 1], tf.int32)], 0)
        denominator = tf.reshape(denominator, shape)
        nan = tf.fill(tf.shape(m2), tf.constant(np.nan, tf.float64))
        variance = tf.where(denominator > 0, m2 / tf.maximum(denominator, 1.0), nan)
        return tf.sqrt(variance) if root else variance

    return attrs.evolve(
        MOMENTS,
        name="std" if root else "variance",
        per_key=SegmentForm(partial=form.partial, merge=form.merge, finalize=finalize),
    )


@overload
def variance_by_key(
    keys: Any,
    values: Any,
    /,
    *,
    ddof: int = 0,
    resident: Literal[False] = False,
    max_bytes: int | None = None,
    **options: Unpack[Options],
) -> KeyedResult: ...
@overload
def variance_by_key(
    keys: Any,
    values: Any,
    /,
    *,
    ddof: int = 0,
    resident: Literal[True],
    max_bytes: int | None = None,
    **options: Unpack[Options],
) -> KeyedSharded: ...
def variance_by_key(
    keys: Any,
    values: Any = None,
    /,
    *,
    ddof: int = 0,
    resident: bool = False,
    max_bytes: int | None = None,
    **options: Unpack[Options],
) -> Any:
    """The variance of each key's values, ``np.var(v, ddof=ddof)`` per key, in float64 (NaN where a key has ≤ ddof rows).

    Each batch computes per-key (count, mean, M2) in two passes, and partials merge with Chan's
    formula: no ``E[x²] − E[x]²`` cancellation.

    Args:
        keys, values, resident, max_bytes, **options: as for [`sum_by_key`][tfmapreduce.sum_by_key].
        ddof: delta degrees of freedom (0: population variance; 1: sample variance).

    Examples:
        >>> tmr.variance_by_key(np.array([1, 1, 2]), np.array([1.0, 3.0, 5.0]), cluster=cluster).to_dict()
        {1: 1.0, 2: 0.0}
    """
    return _spread("variance_by_key", keys, values, ddof, resident, max_bytes, options)


var_by_key = variance_by_key
"""The same as :func:`variance_by_key` (numpy's short name, as ``tmr.var`` is ``tmr.variance``)."""


@overload
def std_by_key(
    keys: Any,
    values: Any,
    /,
    *,
    ddof: int = 0,
    resident: Literal[False] = False,
    max_bytes: int | None = None,
    **options: Unpack[Options],
) -> KeyedResult: ...
@overload
def std_by_key(
    keys: Any,
    values: Any,
    /,
    *,
    ddof: int = 0,
    resident: Literal[True],
    max_bytes: int | None = None,
    **options: Unpack[Options],
) -> KeyedSharded: ...
def std_by_key(
    keys: Any,
    values: Any = None,
    /,
    *,
    ddof: int = 0,
    resident: bool = False,
    max_bytes: int | None = None,
    **options: Unpack[Options],
) -> Any:
    """The standard deviation of each key's values, ``np.std(v, ddof=ddof)`` per key (the root of [`variance_by_key`][tfmapreduce.variance_by_key]).

    Examples:
        >>> tmr.std_by_key(np.array([1, 1, 2]), np.array([1.0, 3.0, 5.0]), cluster=cluster).to_dict()
        {1: 1.0, 2: 0.0}
    """
    return _spread("std_by_key", keys, values, ddof, resident, max_bytes, options)


def _spread(name: str, keys: Any, values: Any, ddof: object, resident: bool, max_bytes: object, options: Options) -> Any:
    if isinstance(ddof, bool) or not isinstance(ddof, (int, np.integer)) or ddof < 0:
        raise ValueError(f"ddof must be an int ≥ 0 (0: population variance, 1: sample variance), got {ddof!r}")
    x = keyed_input(name, keys, values, options)
    ddof, root = int(ddof), name == "std_by_key"
    return keyed_run((name, ddof), lambda: (pair, _variance_combiner(ddof, root=root)), x, resident, max_bytes, options)
