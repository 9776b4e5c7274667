"""Each task's distinct keys, counted on the client where the keys are a host array: what a keyed combine's tasks send.

A keyed combine's task sends one partial per distinct key it holds (``partials``).  Where the keys are a 1-D array on
the client (``Shipped``), the plan counts them exactly, per task, over the rows of the task's shards (float keys are
what no keyed run takes: their plans are refused before, ``partials.traced_output``):

- integers: a mask over the task's ``max - min + 1`` where that range is at most ``SPAN`` times its rows, else
  ``np.unique`` (a sort);
- strings: a Python ``set`` of the task's keys, built in C (hashing, no sort), and the bytes of its distinct keys
  joined once (``"".join``), as the budget checks count them: 32 per string beside its UTF-8 bytes.

The cost is one pass over the keys: about 0.5 s per million strings (``scripts/plan_cost.py``: 2e6 strings of 5e5
distinct, 1.08 s a plan against 0.13 s before, on a shared 2-core host), 0.2 s per million sparse integers (a sort);
a dense integer range costs a mask's pass.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import attrs
import numpy as np

from ..._base.plan import Plan
from ..._base.task import Task

STRING_BYTES = 32
"""What a string costs beside its bytes, as the budget checks count it (``grouping.nbytes``)."""

SPAN = 4
"""Integer keys whose range is at most this many times the task's rows are counted through a mask, not a sort."""


@attrs.frozen
class DistinctKeys:
    """A task's distinct keys and their bytes as the budget checks count them (an int64 key 8, a string 32 and its
    UTF-8 bytes).

    Example:
        >>> DistinctKeys.of(np.array(["a", "bc", "a"], object))
        DistinctKeys(keys=2, bytes=67)
    """

    keys: int
    bytes: int

    @classmethod
    def of(cls, keys: np.ndarray[Any, Any]) -> DistinctKeys:
        """The distinct keys of the 1-D array ``keys``, and their bytes."""
        if keys.dtype.kind in "OSU":
            unique = set(keys.tolist())
            return cls(len(unique), len(unique) * STRING_BYTES + _utf8_bytes(unique))
        if keys.size and keys.dtype.kind in "iu" and int(keys.max()) - int(keys.min()) < SPAN * keys.size:
            low = int(keys.min())
            seen = np.zeros(int(keys.max()) - low + 1, bool)
            seen[keys - low] = True
            count = int(np.count_nonzero(seen))
        else:
            count = int(np.unique(keys).size)
        return cls(count, count * keys.dtype.itemsize)


def per_task(plan: Plan, keys: np.ndarray[Any, Any]) -> dict[Task, DistinctKeys] | None:
    """Each task's :class:`DistinctKeys` over the rows of its shards of ``plan``, in the plan's task order; None
    where ``keys`` is not 1-D (its rows' keys are not one value each).

    Example:
        >>> from tfmapreduce._base.plan import make_plan
        >>> from tfmapreduce._base.device import Device
        >>> cpu = Device.parse("/job:w/task:0/device:CPU:0")
        >>> list(per_task(make_plan(6, [6], [cpu], [cpu]), np.array([5, 10**12, 5, 7, 7, 5])).values())
        [DistinctKeys(keys=3, bytes=24)]
    """
    if keys.ndim != 1:
        return None
    slices: dict[Task, list[np.ndarray[Any, Any]]] = {}
    for shard in plan.shards:
        slices.setdefault(shard.task, []).append(keys[shard.start : shard.start + shard.rows])
    return {task: DistinctKeys.of(parts[0] if len(parts) == 1 else np.concatenate(parts)) for task, parts in slices.items()}


def _utf8_bytes(strings: Collection[Any]) -> int:
    """The UTF-8 bytes of ``strings`` (``str`` or ``bytes``), joined once where they are all of one type."""
    try:
        return len("".join(strings).encode("utf-8", "surrogatepass"))
    except TypeError:  # bytes, or str and bytes mixed
        pass
    try:
        return len(b"".join(strings))
    except TypeError:
        return sum(len(s.encode("utf-8", "surrogatepass") if isinstance(s, str) else bytes(s)) for s in strings)
