"""Partitions: every accepted spelling of a split of the rows becomes one tuple of sizes."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Literal

import attrs

from .errors import PartitionError


@attrs.frozen
class Weights:
    """Shard sizes proportional to some weights, e.g. ``weights(1, 3)`` for a 1:3 split.

    Rounded by largest remainder, so the sizes always sum to the rows.
    """

    values: tuple[float, ...]
    """The relative weights, each ≥ 0, not all 0."""


def weights(*values: float) -> Weights:
    """Ask for shard sizes proportional to ``values``; pass the result as ``sizes=``.

    Examples:
        >>> job = tmr.MapReduce(tf.reduce_sum, tmr.combiners.sum)
        >>> tasks = ["/job:local/task:0", "/job:local/task:1"]
        >>> job.plan(np.zeros(10), cluster=cluster, sizes=tmr.weights(1, 3), devices=tasks).sizes
        (3, 7)
    """
    if len(values) == 1 and isinstance(values[0], Sequence):
        values = tuple(values[0])
    problems = [v for v in values if isinstance(v, bool) or not isinstance(v, numbers.Real) or not v >= 0 or v == float("inf")]
    if not values or problems or not any(values):
        raise PartitionError(f"weights must be finite numbers ≥ 0, at least one of them > 0, e.g. weights(1, 3); got {values!r}")
    largest = max(float(v) for v in values)
    return Weights(tuple(float(v) / largest for v in values))  # scaled to ≤ 1: their sum cannot overflow


SizesLike = None | int | Sequence[int] | Weights | Literal["auto"]
"""What ``sizes=`` accepts: None (even over the devices), a shard count, row counts, :func:`weights`, or ``"auto"``
(sized to the devices' measured speeds, for runs of jobs, whole-input or keyed, over host arrays)."""

AUTO = "auto"
"""``sizes="auto"``: one shard per device, sized to the devices' measured speeds for the job."""


def even_sizes(rows: int, shards: int) -> tuple[int, ...]:
    """``rows`` split into ``shards`` sizes that differ by at most one, larger first.

    Example:
        >>> even_sizes(10, 3)
        (4, 3, 3)
    """
    base, extra = divmod(rows, shards)
    return tuple(base + 1 if i < extra else base for i in range(shards))


def check_count(count: int, *, rows: int, devices: int, argument: str = "sizes", what: str = "devices") -> int:
    """``count`` if it is a shard count a partition of ``rows`` over ``devices`` may have: from 1 to
    ``max(rows, devices)`` (a row a shard, or a shard a device when there are more devices than rows).

    Checked before anything of that length is built: ``sizes=10**12`` is refused at once.

    Raises:
        PartitionError: ``count`` is below 1 or above the rows and the devices.

    Example:
        >>> check_count(4, rows=2, devices=4)
        4
        >>> check_count(1000, rows=100, devices=4)
        Traceback (most recent call last):
        ...
        tfmapreduce._base.errors.PartitionError: sizes=1000 asks for 1000 shards of 100 rows on 4 devices; ...= 100; pass sizes=100 or fewer...
    """
    if count < 1:
        raise PartitionError(f"{argument}={count} asks for {count} shards; pass a shard count of at least 1")
    most = max(rows, devices)
    if count > most:
        raise PartitionError(
            f"{argument}={count} asks for {count} shards of {rows} rows on {devices} {what}; a shard count may be at most "
            f"max(rows, {what}) = {most}; pass {argument}={most} or fewer, or a list of row counts (which may hold empty shards)"
        )
    return count


def canonical_sizes(sizes: SizesLike, *, rows: int, default_shards: int) -> tuple[int, ...]:
    """The one canonical form of a partition: a tuple of row counts ≥ 0 summing to ``rows``.

    Args:
        sizes: None (``default_shards`` even shards), an int (that many even
            shards, at most ``max(rows, default_shards)``: see :func:`check_count`),
            a sequence of row counts, or ``weights(...)``.
        rows: the rows of the input (its length on axis 0).
        default_shards: the shard count used for ``sizes=None`` (the devices the shards go to).

    Raises:
        PartitionError: the partition is invalid; the message says how to fix it.
        TypeError: ``sizes`` is of no accepted type.

    Example:
        >>> canonical_sizes(None, rows=5, default_shards=2)
        (3, 2)
        >>> canonical_sizes([30, 0, 70], rows=100, default_shards=2)
        (30, 0, 70)
    """
    if sizes is None:
        return even_sizes(rows, default_shards)
    if isinstance(sizes, Weights):
        total = sum(sizes.values)
        exact = [rows * w / total for w in sizes.values]
        result = [int(e) for e in exact]
        by_remainder = sorted(range(len(exact)), key=lambda i: (result[i] - exact[i], i))
        for i in by_remainder[: rows - sum(result)]:
            result[i] += 1
        return tuple(result)
    if isinstance(sizes, numbers.Integral) and not isinstance(sizes, bool):
        return even_sizes(rows, check_count(int(sizes), rows=rows, devices=default_shards))
    if isinstance(sizes, str) and sizes == AUTO:
        raise TypeError(
            "sizes='auto' sizes the shards of a run by the devices' measured speeds; it applies to MapReduce.run, "
            "MapReduce.plan and the one-pass recipes over host arrays (keyed ones too), not here (resident data, files, "
            "iterative recipes): pass None, a shard count, a list of row counts or weights(...)"
        )
    if isinstance(sizes, (str, bytes)) or (not isinstance(sizes, Sequence) and not hasattr(sizes, "__array__")):
        raise TypeError(
            f"sizes must be None, a shard count, a list of row counts or weights(...), or 'auto' (sized to the devices' "
            f"measured speeds), got {type(sizes).__name__} {sizes!r}"
        )
    values = list(sizes.tolist() if hasattr(sizes, "tolist") else sizes)  # type: ignore[arg-type,union-attr]  # Sequence or array, checked above
    if not values:
        raise PartitionError("sizes=[] gives no shard; pass at least one row count, e.g. sizes=[rows]")
    bad = [f"sizes[{i}]={v!r}" for i, v in enumerate(values) if isinstance(v, bool) or not isinstance(v, numbers.Integral)]
    if bad:
        raise PartitionError(
            f"sizes must be whole row counts; {', '.join(bad)} is not an integer (use weights(...) for proportions)"
        )
    negative = [f"sizes[{i}]={v}" for i, v in enumerate(values) if v < 0]
    if negative:
        raise PartitionError(f"sizes must be ≥ 0; got {', '.join(negative)}")
    total = sum(values)
    if total != rows:
        fix = f"add the missing {rows - total} rows to a shard" if total < rows else f"remove {total - rows} rows from the shards"
        raise PartitionError(f"sizes must sum to the {rows} rows of the input (got {values}, sum {total}); {fix}")
    return tuple(int(v) for v in values)
