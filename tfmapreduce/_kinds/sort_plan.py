"""``tmr.plan_sort``: the plan a sort would follow, in memory or spilled, without running it."""

from __future__ import annotations

from typing import Any

from typing_extensions import Unpack

from .._engine import driver as _engine
from .._ops.per_group import check_max_bytes
from .._options import Options, RunOptions
from .persist import persisted
from .sort import Sort, SortPlan, descending_of
from .spill import SpillPlan
from .spilled_sort import spill_kind


def plan_sort(
    x: Any,
    /,
    *values: Any,
    descending: bool = False,
    max_bytes: int | None = None,
    directory: Any = None,
    spill_dir: Any = None,
    **options: Unpack[Options],
) -> SortPlan | SpillPlan:
    """The plan [`sort`][tfmapreduce.sort] (or, given ``values``, [`sort_by_key`][tfmapreduce.sort_by_key]) would
    follow with these arguments (nothing runs; ``print`` it): the shards and ranges, and with ``directory`` what each
    task spills, where, and in how many buckets each reducer sorts its range within the budget.

    Examples:
        >>> plan = tmr.plan_sort(np.arange(100_000.0), directory="out", max_bytes=100_000, cluster=cluster, sizes=2)
        >>> plan.buckets, "spills 800,000 bytes to /tmp/tfmapreduce-spill-" in str(plan)  # 2 ranges of 40 buckets
        (40, True)
    """
    kind = Sort(descending_of(descending), check_max_bytes(max_bytes), "keys" if values else "x")
    with persisted((x, *values) if values else x, dict(options)) as (inputs, given):
        if directory is None:
            plan: SortPlan = _engine.plan(kind, inputs, RunOptions.of(**given))
            return plan
        spilled: SpillPlan = _engine.plan(spill_kind(kind, spill_dir), inputs, RunOptions.of(**given))
        return spilled
