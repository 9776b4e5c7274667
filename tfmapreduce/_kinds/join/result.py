"""The result of a join: its rows' keys, and each side's values on those rows, aligned."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from ..._io.resident import Sharded
from ..._io.strings import Encoding, decode_keys


@attrs.frozen(eq=False)
class JoinResult:
    """The rows of a join, one per matching (left row, right row) pair, and the unmatched rows an outer join keeps.

    ``left`` and ``right`` hold each side's values on those rows, in the structure the side was given (one array,
    or a tuple of arrays).  A row without a match on one side has that side's ``*_matched`` False and its values
    filled: NaN for floats, 0 for integers, False for booleans, the empty string for strings.  Rows come grouped
    by key, their order otherwise unspecified (as in Spark); sort them if order matters.

    Examples:
        >>> left = (np.array([1, 2, 2]), np.array([10.0, 20.0, 21.0]))
        >>> right = (np.array([2, 3]), np.array(["b", "c"]))
        >>> r = tmr.join(left, right, how="outer", cluster=cluster)
        >>> sorted(zip(r.keys.tolist(), r.left.tolist(), r.right.tolist()))
        [(1, 10.0, ''), (2, 20.0, 'b'), (2, 21.0, 'b'), (3, nan, 'c')]
        >>> len(r), int(r.left_matched.sum()), int(r.right_matched.sum())
        (4, 3, 3)
    """

    keys: np.ndarray
    """The key of each row."""
    left: Any
    """The left side's values on each row: an array, or a tuple of arrays (as given)."""
    right: Any
    """The right side's values on each row."""
    left_matched: np.ndarray
    """Per row: whether it has a left row (False only in right and outer joins; in the others a read-only view of True)."""
    right_matched: np.ndarray
    """Per row: whether it has a right row (False only in left and outer joins; in the others a read-only view of True)."""
    strategy: str
    """How it ran: ``"hash"``, ``"broadcast"`` or ``"co-partitioned"``."""
    parts: tuple[tuple[str, int], ...]
    """The rows each device produced (the reducers', or the tasks' for a broadcast join), in the order of the rows."""

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    def __repr__(self) -> str:
        return f"JoinResult({len(self)} rows, {self.strategy})"

    def to_pandas(self, *, key: str = "key", left: str = "left", right: str = "right") -> Any:
        """The rows as a ``pandas.DataFrame`` shaped as ``pandas.merge`` shapes it: a ``key`` column, then each side's
        columns (``left``/``right``, or ``left_0``, ``left_1``, … for a tuple of columns); a column with unmatched
        rows holds NaN there (so integers become floats, as in pandas).

        Raises:
            ImportError: pandas is not installed (``pip install pandas``).
        """
        try:
            import pandas as pd  # type: ignore[import-untyped]
        except ImportError as e:
            raise ImportError("JoinResult.to_pandas() needs pandas: pip install pandas") from e
        columns: dict[str, Any] = {key: self.keys}
        for name, values, matched in ((left, self.left, self.left_matched), (right, self.right, self.right_matched)):
            many = isinstance(values, tuple)
            for j, column in enumerate(values if many else (values,)):
                columns[f"{name}_{j}" if many else name] = _with_missing(column, matched)
        return pd.DataFrame(columns)


def _with_missing(column: np.ndarray, matched: np.ndarray) -> Any:
    """``column`` with NaN where a row is unmatched (integers and booleans as float64; strings as objects)."""
    if matched.all() or column.ndim != 1:
        return column
    if column.dtype == object:
        out = column.copy()
        out[~matched] = np.nan
        return out
    out = column.astype(np.float64) if column.dtype.kind in "biu" else column.copy()
    out[~matched] = np.nan
    return out


@attrs.define(eq=False)
class JoinSharded:
    """A join's rows kept where they were made (``tmr.join(..., resident=True)``): co-partitioned ``Sharded`` columns.

    ``keys``, each side's values (one ``Sharded``, or a tuple as given) and the two masks share one plan (part
    *p* on the device that made it), so later jobs read them in place:
    ``tmr.sum_by_key(r.keys, r.left)`` ships nothing.

    Examples:
        >>> left, right = (np.array([1, 2, 2]), np.array([1.0, 2.0, 3.0])), (np.array([2, 5]), np.array([10, 50]))
        >>> with tmr.join(left, right, cluster=cluster, resident=True) as r:
        ...     float(tmr.sum(r.left)), len(r), sorted(r.gather().right.tolist())
        (5.0, 2, [10, 10])
    """

    keys: Sharded
    left: Any
    right: Any
    left_matched: Sharded
    right_matched: Sharded
    strategy: str
    encoding: tuple[Encoding, Encoding]

    def __len__(self) -> int:
        return self.keys.plan.rows

    def __repr__(self) -> str:
        return f"JoinSharded({len(self)} rows on {len(self.keys.plan.shards)} parts, {self.strategy})"

    def _each(self, fn: Any) -> tuple[Any, Any, Any, Any, Any]:
        """``fn`` of each column, in the structure of (keys, left, right, left matched, right matched)."""

        def side(values: Any) -> Any:
            return tuple(fn(c) for c in values) if isinstance(values, tuple) else fn(values)

        return fn(self.keys), side(self.left), side(self.right), fn(self.left_matched), fn(self.right_matched)

    def gather(self, *, timeout: float | None = None) -> JoinResult:
        """The rows, fetched from the workers."""
        rows = tuple((s.device, s.rows) for s in self.keys.plan.shards)
        return _decoded(*self._each(lambda c: c.gather(timeout=timeout)), self.strategy, rows, self.encoding)

    def delete(self, *, timeout: float | None = None) -> None:
        """Free the rows' memory on the workers.  Safe to call twice."""
        self._each(lambda c: c.delete(timeout=timeout))

    def __enter__(self) -> JoinSharded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()


def _unpacked(parts: Sequence[np.ndarray], dtypes: Sequence[np.dtype[Any]]) -> list[np.ndarray]:
    """The columns of packed parts (each a matrix of int32 words, see :func:`_rows`), each column one array."""
    columns, at = [], 0
    for dtype in dtypes:
        width = dtype.itemsize // 4
        columns.append(np.concatenate([p[:, at : at + width].view(dtype)[:, 0] for p in parts]))
        at += width
    return columns


def _decoded(
    keys: np.ndarray,
    left: Any,
    right: Any,
    left_matched: np.ndarray,
    right_matched: np.ndarray,
    strategy: str,
    rows: tuple[tuple[str, int], ...],
    encoding: tuple[Encoding, Encoding],
) -> JoinResult:
    """A :class:`JoinResult` of fetched columns, string keys and values decoded as each side was given."""
    if keys.dtype == object:
        keys = decode_keys(keys.tolist(), encoding[0] or encoding[1])
    left, right = (
        tf.nest.map_structure(lambda leaf, e=e: _text(leaf, e), side) for side, e in ((left, encoding[0]), (right, encoding[1]))
    )
    return JoinResult(keys, left, right, left_matched, right_matched, strategy, rows)


def _text(leaf: np.ndarray, unicode: Encoding) -> np.ndarray:
    if leaf.dtype != object:
        return leaf
    return decode_keys(leaf.ravel().tolist(), unicode).reshape(leaf.shape)
