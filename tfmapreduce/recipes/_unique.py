"""Unique: the distinct values of the whole input (and how often each occurs), as ``np.unique`` gives them, in one run.

One keyed run counts the rows of each distinct value (the keyed path's hash shuffle, as ``tmr.count_by_key``): each
shard maps its values to ordered integer keys where it lives (``_splitters.order_key``: every NaN one key, -0.0 the key
of 0.0; strings stay strings), counts them per key, and the reducers merge the counts of their keys.  The client
sorts the distinct keys (few, next to the rows) and turns them back into values of the input's dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._base.errors import InputError
from .._io.source import Input
from .._io.strings import as_bytes_array
from .._kinds.shuffle.result import KeyedResult
from .._ops.combine import COUNT
from .._ops.splitters import FLOAT_DTYPES, INT_DTYPES, order_key
from .._options import Options, RunOptions
from ._recipe import recipe


def _keys(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """A batch's keys, twice (a count needs no values): strings as they are, numbers as ordered integers."""
    key = x if x.dtype == tf.string else order_key(x)
    return key, key


def _values(keys: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """Ordered integer keys (``order_key``'s) back as values of ``dtype``: floats from their bits (NaN one NaN, 0.0)."""
    if dtype.kind != "f":
        return keys.astype(dtype)
    ints, floats = (np.int64, np.float64) if dtype == np.float64 else (np.int32, np.float32)
    keys = keys.astype(ints)
    bits = np.where(keys < 0, keys ^ ints(np.iinfo(ints).max), keys)
    return bits.view(floats).astype(dtype)


def _strings(keys: np.ndarray, x: Any, dtype: np.dtype[Any]) -> np.ndarray:
    """String keys (``str`` or ``bytes``) as a numpy array: of ``x``'s dtype for a numpy ``x``, else as numpy makes them."""
    if isinstance(x, np.ndarray):
        return np.array(keys.tolist(), dtype)
    return np.array(keys.tolist()) if len(keys) else np.array([], str)


def _checked(x: Any) -> np.dtype[Any]:
    """``x``'s dtype, after checking it is 1-D numbers of a sortable dtype or strings (an object dtype for strings
    given as a list or object array, or read from files).

    Raises:
        InputError: ``x`` is not 1-D.
        TypeError: ``x`` holds other than integers, floats or strings.
    """
    if isinstance(x, Input):
        source = x.as_source()
        dtype, shape = source.dtype, tuple(source.shape)
    else:
        value = x.numpy() if isinstance(x, (tf.Tensor, tf.Variable)) else x
        strings = as_bytes_array(value)
        try:
            array = strings[0] if strings is not None else np.asarray(value)
        except ValueError as e:
            raise InputError(f"x must be a rectangular 1-D array, got a ragged {type(x).__name__} ({e})") from None
        dtype = value.dtype if isinstance(value, np.ndarray) and strings is not None else array.dtype
        shape = array.shape
    if len(shape) != 1:
        raise InputError(
            f"x must be 1-D (one value per row), got shape {shape}; pick one column, e.g. x[:, 0], or flatten it with "
            "x.reshape(-1)"
        )
    if dtype not in INT_DTYPES + FLOAT_DTYPES and dtype.kind not in "OSU":
        raise TypeError(
            f"x must hold integers (int8 to int64, uint8 to uint32), floats (float16 to float64) or strings, got dtype "
            f"{dtype}; convert it, e.g. x.astype(np.int64)"
        )
    return np.dtype(dtype)


def unique(x: Any, /, *, return_counts: bool = False, **options: Unpack[Options]) -> Any:
    """The sorted distinct values of all of ``x``: equal to ``np.unique(x)`` (``np.unique(x, return_counts=True)``).

    Numbers in numpy's order: every NaN is one value, last (as numpy ≥ 1.21), and ``-0.0`` and ``0.0`` are one value,
    returned as ``0.0``.  Strings in byte order (UTF-8 byte order is code point order, as numpy sorts ``str``); a
    numpy array of strings comes back with its own dtype, other strings (a list, text files) as a ``str`` array (bytes:
    a ``bytes`` array).  One keyed run counts each distinct value on the reducers (as
    [`count_by_key`][tfmapreduce.count_by_key]); the client sorts the distinct values.

    Args:
        x: a 1-D array of integers (int8 to int64, uint8 to uint32), floats or strings, resident ``Sharded`` data,
            or a file source (``tmr.read_npy``, ``tmr.read_text``, ...).
        return_counts: also return how many times each distinct value occurs (int64).
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout``, ``retries``, ``transfer``,
            ``reducers``, ``batch_rows``, ``return_stats``: see [`RunOptions`][tfmapreduce.RunOptions].

    Returns:
        The distinct values; ``(values, counts)`` with ``return_counts=True``; and the run's stats after them with
        ``return_stats=True`` (``(values, stats)`` or ``((values, counts), stats)``).

    Raises:
        InputError: ``x`` is not 1-D.
        TypeError: ``x`` holds other than integers, floats or strings, or ``return_counts`` is not a bool.

    Examples:
        >>> tmr.unique(np.array([3.0, np.nan, -0.0, 3.0, 0.0, np.nan]), cluster=cluster).tolist()
        [0.0, 3.0, nan]
        >>> values, counts = tmr.unique(np.array(["b", "a", "b"]), return_counts=True, cluster=cluster)
        >>> values.tolist(), counts.tolist()
        (['a', 'b'], [1, 2])
    """
    if not isinstance(return_counts, (bool, np.bool_)):
        raise TypeError(f"return_counts must be True or False, got {type(return_counts).__name__} {return_counts!r}")
    dtype = _checked(x)
    settings = RunOptions.of(**options)
    out = recipe(("unique",), lambda: (_keys, COUNT), by_key=True).execute(x, settings)
    result: KeyedResult = out[0] if settings.return_stats else out
    values = _strings(result.keys, x, dtype) if dtype.kind in "OSU" else _values(result.keys, dtype)
    answer = (values, np.asarray(result.values, np.int64)) if return_counts else values
    return (answer, out[1]) if settings.return_stats else answer
