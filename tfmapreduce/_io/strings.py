"""String keys and lines: how str and bytes inputs become TensorFlow strings, and how string keys come back."""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf


def as_bytes_array(item: Any) -> tuple[np.ndarray[Any, Any], bool] | None:
    """An array of strings (``str``, ``bytes`` or both) as an object array of bytes, and whether any was ``str``.

    ``str`` are encoded as UTF-8; ``bytes`` stay as they are, UTF-8 or not (a bytes key is
    grouped by its bytes).  None for anything that is not an array of strings.

    Example:
        >>> array, unicode = as_bytes_array(["a", b"\\xff"])
        >>> array.tolist(), unicode
        ([b'a', b'\\xff'], True)
        >>> as_bytes_array(np.arange(3)) is None
        True
    """
    if isinstance(item, list) and not item:
        return None  # an empty list: no strings to tell it by (an empty object array is strings)
    try:
        array = np.asarray(item, dtype=object) if isinstance(item, list) else np.asarray(item)
    except ValueError:
        return None
    if array.dtype.kind == "U":
        return np.array([s.encode("utf-8") for s in array.ravel().tolist()], dtype=object).reshape(array.shape), True
    if array.dtype.kind == "S":
        return np.array(array.ravel().tolist(), dtype=object).reshape(array.shape), False
    if array.dtype == object and all(isinstance(s, (str, bytes)) for s in array.ravel().tolist()):
        flat = array.ravel().tolist()
        encoded = [s.encode("utf-8") if isinstance(s, str) else s for s in flat]
        return np.array(encoded, dtype=object).reshape(array.shape), any(isinstance(s, str) for s in flat)
    return None


Encoding = str | bool | None
"""How string keys come back: the codec's name (``str``), True for UTF-8, or None/False for ``bytes``."""


def text_encoding(encoding: object, name: str) -> str | None:
    """The ``encoding=`` of a text reader checked: a codec's name, or ``"bytes"`` (returned as None) to keep bytes.

    Example:
        >>> text_encoding("UTF8", "read_text"), text_encoding("bytes", "read_text")
        ('utf-8', None)
    """
    if encoding == "bytes":
        return None
    if isinstance(encoding, str):
        try:
            return codecs.lookup(encoding).name
        except LookupError:
            pass
    raise TypeError(
        f"{name}: encoding must be the name of a text codec (e.g. 'utf-8', 'latin-1') or 'bytes' to keep "
        f"keys and strings as bytes, got {encoding!r}"
    )


def decode_keys(keys: Sequence[bytes], unicode: Encoding) -> np.ndarray[Any, Any]:
    """String keys as they come back to the caller: ``str`` when the input was text and every key decodes, else ``bytes``.

    ``unicode`` is the input's encoding (True: UTF-8; None or False: the input was bytes).  A key
    that does not decode can only have come from a ``bytes`` input (or a file not in its encoding);
    rather than fail on it (or alter it), all keys then stay ``bytes``, so every key of a result has one type.
    Keys that are all ``str`` already (decoded as a resident array was gathered) stay as they are.

    Example:
        >>> decode_keys([b"a", b"b"], True).tolist()
        ['a', 'b']
        >>> decode_keys([b"a", b"\\xff"], True).tolist()
        [b'a', b'\\xff']
        >>> decode_keys([b"\\xe9"], "latin-1").tolist()
        ['é']
    """
    if all(isinstance(k, str) for k in keys) and keys:
        return np.array(list(keys), dtype=object)  # decoded already (a resident array's gather)
    raw = [bytes(k) for k in keys]
    if unicode:
        codec = "utf-8" if unicode is True else str(unicode)
        try:
            return np.array([k.decode(codec) for k in raw], dtype=object)
        except UnicodeDecodeError:
            pass
    return np.array(raw, dtype=object)


def split_joined(parts: Sequence[tuple[bytes, int]]) -> list[np.ndarray[Any, Any]] | None:
    """Each part's ``rows`` strings, joined by NULs in its ``bytes`` (one buffer through gRPC, not a message a string),
    as ``str`` (UTF-8, an invalid byte as U+FFFD); None where a part holds another number of NULs (a NUL in a string).

    Example:
        >>> [p.tolist() for p in split_joined([("a\\0é\\0".encode(), 3), (b"", 0)])], split_joined([(b"a\\0b", 3)])
        ([['a', 'é', ''], []], None)
    """
    out = []
    for blob, rows in parts:
        strings = blob.decode("utf-8", "replace").split("\0") if rows else []
        if len(strings) != rows:
            return None
        out.append(np.array(strings, dtype=object))
    return out


def texts(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A 1-D array of UTF-8 ``bytes`` (TensorFlow's strings) as ``str``, decoded as one buffer (``split_joined``; one
    at a time where a string holds a NUL); an array of ``str`` as it is.

    Example:
        >>> texts(np.array([b"a", "é".encode(), b"b\\0"], object)).tolist()
        ['a', 'é', 'b\\x00']
    """
    if not len(values) or isinstance(values[0], str):
        return values
    whole = split_joined([(b"\0".join(values.tolist()), len(values))])
    return whole[0] if whole else np.array([v.decode("utf-8", "replace") for v in values.tolist()], dtype=object)


def packed(values: np.ndarray[Any, Any]) -> bytes:
    """A 1-D array of ``str`` or ``bytes`` as one buffer, fed as one string (TensorFlow converts and sends an array of
    strings a value at a time): the count and a gap (int64), each value's UTF-8 length (int64), then the values, a NUL
    between two where the gap is 1. :func:`unpacked` reads it inside a graph.

    Example:
        >>> unpacked(tf.constant(packed(np.array(["a", "é", b"\\xff", "b\\0"], object)))).numpy().tolist()
        [b'a', b'\\xc3\\xa9', b'\\xff', b'b\\x00']
    """
    items, n, gap = values.tolist(), len(values), 1
    try:
        text = "\0".join(items)  # (a TypeError where a value is bytes)
        data = text.encode("utf-8")
        if len(data) == len(text):  # ASCII: a character a byte
            lengths = np.fromiter(map(len, items), np.int64, n)
        elif text.count("\0") == max(n - 1, 0):  # no NUL but those joining: each value ends at one
            ends = np.append(np.flatnonzero(np.frombuffer(data, np.uint8) == 0), len(data))
            lengths = ends - np.append(-1, ends[:-1]) - 1
        else:
            raise TypeError("a NUL inside a string")
    except TypeError:
        encoded = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in items]
        lengths, data, gap = np.fromiter(map(len, encoded), np.int64, n), b"".join(encoded), 0
    return b"".join([np.array([n, gap], np.int64).tobytes(), lengths.tobytes(), data])


def unpacked(blob: tf.Tensor, rows: int | None = None) -> tf.Tensor:
    """Inside a graph: the 1-D strings that :func:`packed` made ``blob`` of (``rows`` of them where known)."""
    head = tf.io.decode_raw(tf.strings.substr(blob, 0, 16), tf.int64)
    size = tf.constant(16, tf.int64)
    lengths = tf.io.decode_raw(tf.strings.substr(blob, size, 8 * head[0]), tf.int64)
    starts = tf.cumsum(lengths + head[1], exclusive=True) + size + 8 * head[0]
    values = tf.strings.substr(blob, starts, lengths)
    values.set_shape((rows,))
    return values
