"""The inputs of a keyed job: as for every job, and arrays of strings too (travelling as bytes)."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from .files.files import Files
from .resident import Sharded
from .source import Input, Shipped, Source, Sources, co_partitioned, sources
from .strings import as_bytes_array


def keyed_sources(x: Any) -> tuple[Sources, str | None]:
    """The job's sources, where arrays of strings are allowed too (as bytes); and how its strings decode.

    The encoding is UTF-8 where an array of strings was unicode, a text file source's ``encoding``
    (``read_text``, ``read_csv``) or a resident array's, or None where strings stay ``bytes``.  Numeric and resident
    inputs canonicalize as for every job (:func:`sources`).
    """
    items = x if isinstance(x, tuple) else (x,)
    unicode: str | None = None
    converted = []
    for item in items:
        if isinstance(item, (Files, Sharded)) and item.encoding is not None:
            unicode = unicode or item.encoding  # text files, resident strings given as str: decode with their codec
        strings = _as_strings(item)
        if strings is None:
            converted.append(item)
        else:
            converted.append(_STRING_MARK)
            unicode = unicode or ("utf-8" if strings[1] else None)
    numeric = [c for c in converted if c is not _STRING_MARK]
    numeric_srcs = iter(sources(tuple(numeric)) if numeric else ())
    result: list[Source] = []
    for item, c in zip(items, converted, strict=True):
        if c is _STRING_MARK:
            strings = _as_strings(item)
            assert strings is not None
            result.append(Shipped(strings[0]))
        else:
            result.append(next(numeric_srcs))
    return co_partitioned(result), unicode


_STRING_MARK = object()


def _as_strings(item: Any) -> tuple[np.ndarray, bool] | None:
    """An array of strings as an object array of bytes (and whether it was unicode); None for anything else."""
    if isinstance(item, Input) or (isinstance(item, (tf.Tensor, tf.Variable)) and item.dtype != tf.string):
        return None
    if isinstance(item, (tf.Tensor, tf.Variable)):
        item = item.numpy()
    return as_bytes_array(item)
