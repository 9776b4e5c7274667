"""The result of a keyed job: distinct keys, sorted, and their values aligned with them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from ..._io import concat as _concat
from ..._io.strings import Encoding, decode_keys


def _leaves(values: Any) -> list[np.ndarray[Any, Any]]:
    leaves: list[np.ndarray[Any, Any]] = tf.nest.flatten(values)
    return leaves


@attrs.frozen(eq=False)
class KeyedResult:
    """Distinct keys in ascending order (byte order for strings) and, aligned with them, the combiner's
    per-key values (one numpy array, or the combiner's structure of arrays, keys first).

    String keys are ``str`` when the job's string input was text (``str`` arrays, ``read_text``,
    ``read_csv``), ``bytes`` when it was bytes; ``result[key]`` and ``key in result`` take either
    spelling of a string key (``"the"`` or ``b"the"``, UTF-8).

    Examples:
        >>> r = tmr.recipes.word_count(np.array(["a b a", "b a"]), cluster=cluster)
        >>> r.keys, r.values, int(r["a"]), r.to_dict()
        (array(['a', 'b'], dtype=object), array([3, 2]), 3, {'a': 3, 'b': 2})
    """

    keys: np.ndarray
    """The distinct keys, sorted ascending."""
    values: Any
    """The per-key values: ``values[i]`` (leaf by leaf) belongs to ``keys[i]``."""

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    def _index(self, key: Any) -> int | None:
        if not len(self):
            return None
        if self.keys.dtype == object:  # str or bytes keys: a key of the other spelling is its UTF-8 encoding
            key = _spelled_as(key, self.keys[0])
            if key is None:
                return None
        elif isinstance(key, bool) or not isinstance(key, (int, np.integer)):
            return None
        i = int(np.searchsorted(self.keys, key))
        return i if i < len(self) and self.keys[i] == key else None

    def __contains__(self, key: object) -> bool:
        return self._index(key) is not None

    def __getitem__(self, key: Any) -> Any:
        """The value of ``key``; KeyError if the input had no such key."""
        i = self._index(key)
        if i is None:
            raise KeyError(key)
        return self.value_at(i)

    def value_at(self, i: int) -> Any:
        """The value of the ``i``-th key (a numpy scalar or array, or the combiner's structure of them)."""
        return tf.nest.map_structure(lambda a: a[i], self.values)

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        """``(key, value)`` pairs in key order."""
        keys = self.keys.tolist()
        for i, key in enumerate(keys):
            yield key, self.value_at(i)

    def items(self) -> Iterator[tuple[Any, Any]]:
        """``(key, value)`` pairs in key order (as iterating the result)."""
        return iter(self)

    def to_dict(self) -> dict[Any, Any]:
        """``{key: value}`` with Python keys (int, str or bytes) and Python values where the combiner's
        value is a scalar (int or float)."""
        leaves = _leaves(self.values)
        if len(leaves) == 1 and leaves[0].ndim == 1:
            return dict(zip(self.keys.tolist(), leaves[0].tolist(), strict=True))
        return dict(iter(self))

    def to_pandas(self) -> Any:
        """The result as a ``pandas.DataFrame``: one row per key (the index, named ``key``), one column per value leaf.

        A scalar value per key gives the column ``value``; 2-D values one column per value column
        (``value_0``, ``value_1``, ...); a combiner's structure of leaves one column per leaf (``value_0``, ...);
        a group result's ragged rows one column of numpy arrays.  Needs pandas (``pip install pandas``).

        Examples:
            >>> frame = tmr.sum_by_key(np.array(["a", "b", "a"]), np.array([1, 2, 3]), cluster=cluster).to_pandas()
            >>> frame.index.name, frame["value"].to_dict()
            ('key', {'a': 4, 'b': 2})
        """
        try:
            import pandas as pd  # type: ignore[import-untyped]  # optional; no stubs installed
        except ImportError:
            raise ImportError(
                "KeyedResult.to_pandas() needs pandas, which is not installed: pip install pandas "
                "(or use result.to_dict(), or result.keys and result.values as numpy arrays)"
            ) from None
        leaves = _leaves(self.values)
        columns: dict[str, Any] = {}
        for j, leaf in enumerate(leaves):
            name = "value" if len(leaves) == 1 else f"value_{j}"
            if leaf.ndim == 2 and leaf.dtype != object:
                for c in range(leaf.shape[1]):
                    columns[f"{name}_{c}" if leaf.shape[1] > 1 else name] = leaf[:, c]
            elif leaf.ndim <= 1:
                columns[name] = leaf
            else:
                columns[name] = list(leaf)  # rows of more dimensions: one array per key
        return pd.DataFrame(columns, index=pd.Index(self.keys, name="key"))

    def __repr__(self) -> str:
        head = ", ".join(
            f"{k!r}: {v!r}"
            for k, v in list(zip(self.keys[:3].tolist(), (self.value_at(i) for i in range(min(3, len(self)))), strict=True))
        )
        more = ", …" if len(self) > 3 else ""
        return f"KeyedResult({len(self)} keys: {{{head}{more}}})"


def _spelled_as(key: Any, like: Any) -> Any:
    """``key`` as the type of the result's keys (``like``): a ``str`` key encoded as UTF-8 for bytes keys, a ``bytes``
    key decoded for ``str`` keys; None where it cannot be such a key."""
    try:
        if isinstance(like, str):
            return str(key) if isinstance(key, str) else bytes(key).decode("utf-8") if isinstance(key, bytes) else None
        if isinstance(like, bytes):
            return bytes(key) if isinstance(key, bytes) else key.encode("utf-8") if isinstance(key, str) else None
    except UnicodeError:
        return None
    return None


def concatenated(fetched: Any) -> tuple[np.ndarray, Any]:
    """The keys and values of every reducer, as fetched (a list of (keys, values) per reducer), concatenated."""
    keys = _concat.concatenated([np.asarray(k) for k, _ in fetched])
    values = tf.nest.map_structure(
        lambda *leaves: _concat.concatenated([np.asarray(v) for v in leaves]), *[v for _, v in fetched]
    )
    return keys, values


def sorted_result(keys: np.ndarray, values: Any, *, decode: Encoding, ordered: bool = False) -> KeyedResult:
    """A :class:`KeyedResult` from the reducers' (unsorted, distinct) keys and values; ``ordered``: they come in key
    order already (a range partition's reducers, concatenated), and are not sorted again.

    String keys (bytes from TensorFlow) sort in byte order, then decode as UTF-8 when ``decode``
    (UTF-8 byte order is code point order, so the order stays ascending), unless one of them is not
    UTF-8 (a ``bytes`` input mixed with ``str``): then they all stay ``bytes`` (see :func:`decode_keys`).
    """
    if not ordered:
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        values = tf.nest.map_structure(lambda a: np.asarray(a)[order], values)
    if keys.dtype == object or keys.dtype.kind == "S":
        keys = decode_keys(keys.tolist(), decode)
    return KeyedResult(keys, values)


def rows(flat: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Ragged rows from their flat values and row lengths: an object array of one numpy array per row.

    Example:
        >>> [r.tolist() for r in rows(np.array([1, 2, 3]), np.array([2, 0, 1]))]
        [[1, 2], [], [3]]
    """
    splits = np.concatenate([[0], np.cumsum(lengths)])
    out = np.empty(len(lengths), dtype=object)
    for i in range(len(out)):
        out[i] = flat[splits[i] : splits[i + 1]]
    return out
