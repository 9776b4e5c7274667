"""The inputs of a keyed job: as for every job, and arrays of strings too (travelling as UTF-8 bytes)."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from .files.files import Files
from .resident import Sharded
from .source import Input, Shipped, Source, Sources, co_partitioned, sources
from .strings import as_bytes_array


def keyed_sources(x: Any) -> tuple[Sources, str | None]:
    """The job's sources, where arrays of strings are allowed too (fed as UTF-8 bytes); and how its strings decode.

    The encoding is UTF-8 where an array of strings was unicode, a text file source's ``encoding``
    (``read_text``, ``read_csv``) or a resident array's, or None where strings stay ``bytes``.  Numeric and resident
    inputs canonicalize as for every job (:func:`sources`).
    """
    items = x if isinstance(x, tuple) else (x,)
    unicode: str | None = None
    strings = []  # each item's strings (array, unicode), or None: read once
    for item in items:
        if isinstance(item, (Files, Sharded)) and item.encoding is not None:
            unicode = unicode or item.encoding  # text files, resident strings given as str: decode with their codec
        strings.append(_as_strings(item))
        if strings[-1] is not None:
            unicode = unicode or ("utf-8" if strings[-1][1] else None)
    numeric = [item for item, s in zip(items, strings, strict=True) if s is None]
    numeric_srcs = iter(sources(tuple(numeric)) if numeric else ())
    result: list[Source] = [next(numeric_srcs) if s is None else Shipped(s[0]) for s in strings]
    return co_partitioned(result), unicode


def _as_strings(item: Any) -> tuple[np.ndarray, bool] | None:
    """An array of strings as an object array the feed takes (and whether it was unicode); None for anything else.

    An object array of ``str`` alone travels as it is: TensorFlow encodes each as UTF-8 as its shard is fed, so the
    client makes no copy of it (2e6 strings: no Python pass but one over their types). Others become ``bytes``.
    """
    if isinstance(item, Input) or (isinstance(item, (tf.Tensor, tf.Variable)) and item.dtype != tf.string):
        return None
    if isinstance(item, (tf.Tensor, tf.Variable)):
        item = item.numpy()
    if type(item) is np.ndarray and item.dtype == object and item.size and set(map(type, item.ravel().tolist())) == {str}:
        return item, True
    return as_bytes_array(item)
