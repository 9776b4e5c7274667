"""``tmr.plan_by_key``: the plan of a by-key recipe, and what its budget expects (in memory or spilled), before any run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, overload

from typing_extensions import Unpack

from .._io.files.files import Files
from .._kinds.shuffle.plan import KeyedPlan
from .._ops.combine import COUNT, MAX, MEAN, MIN, SUM, Combiner
from .._ops.moments import MOMENTS
from .._options import Options, RunOptions
from .._table.table import Table
from ._by_group import collect_by_key, count_distinct_by_key, median_by_key, quantile_by_key, top_k_by_key
from ._by_key import _keys_only, count_by_key, job_of, max_by_key, mean_by_key, min_by_key, sum_by_key
from ._keyed_input import keyed_input, pair
from ._spread_by_key import std_by_key, variance_by_key


@overload
def plan_by_key(
    keys: Any,
    values: Any = None,
    /,
    *,
    recipe: Callable[..., Any] | None = None,
    max_bytes: int | None = None,
    **options: Unpack[Options],
) -> KeyedPlan: ...
@overload
def plan_by_key(
    table: Files | Table,
    /,
    *,
    keys: str | int,
    values: str | int | Sequence[str | int] | None = None,
    recipe: Callable[..., Any] | None = None,
    max_bytes: int | None = None,
    **options: Unpack[Options],
) -> KeyedPlan: ...
def plan_by_key(
    keys: Any, values: Any = None, /, *, recipe: Callable[..., Any] | None = None, max_bytes: int | None = None, **options: Any
) -> KeyedPlan:
    """The plan a by-key recipe (``sum_by_key``, ``median_by_key``, ...) would follow over ``keys`` and ``values`` with
    the same keywords: its shards, its reducers, and whether each reducer's share fits its budget or spills.  Nothing runs.

    The plan ends with one line (``plan.spill``): ``in memory: ...`` where each reducer's share fits ``max_bytes`` (None:
    a quarter of this host's available memory), or ``spills: ...`` with the sub-partitions per reducer (one round each)
    and what each task writes to its spill folder.  Without ``recipe=``, the share is estimated from the input's rows,
    each sent whole to one reducer: what a group recipe (``median_by_key``, ``quantile_by_key``, ``collect_by_key``)
    sends.  With a combining ``recipe=`` (``tmr.count_by_key``, ``sum_by_key``, ``mean_by_key``, ``min_by_key``,
    ``max_by_key``, ``variance_by_key``, ``std_by_key``) it is counted in that recipe's per-key partials: each task
    sends one per distinct key it holds, counted on the client where the keys are a host array, on the workers in one
    small run where they are resident ``Sharded`` data (else bounded by its rows), each of its key's bytes and the partial's (a mean's: a sum and a count).

    Args:
        keys, values: as for [`sum_by_key`][tfmapreduce.sum_by_key] (``values`` left out: the keys alone, as for
            ``count_by_key``); a CSV table or a ``Table`` with its columns named by ``keys=`` and ``values=``.
        recipe: the by-key recipe planned (the function itself, e.g. ``tmr.mean_by_key``); None: the most any sends.
        max_bytes: the bytes one reducer may receive, as the recipe's ``max_bytes=``.
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``reducers``, ``batch_rows``, ``partitioner``.

    Raises:
        TypeError: ``recipe`` is not a by-key recipe.

    Examples:
        >>> keys = np.arange(40_000) % 1_500  # 320,000 bytes of keys and values per reducer of two
        >>> plan = tmr.plan_by_key(keys, np.ones(keys.size), max_bytes=200_000, reducers=2, cluster=cluster)
        >>> plan.spill.spills, plan.spill.parts
        (True, 4)
        >>> str(plan).splitlines()[-3][:40]
        "spills: each reducer's share of (key, va"
        >>> tmr.plan_by_key(keys, np.ones(keys.size), recipe=tmr.sum_by_key, max_bytes=200_000, reducers=2, cluster=cluster).spill.spills
        False
    """
    combiner = _combined_by(recipe)
    with_values = values is not None or "values" in options
    x = keyed_input("plan_by_key", keys, values, options, with_values=with_values)
    name = ("plan_by_key", with_values, combiner.name if combiner is not None else None)
    job, x = job_of(name, lambda: (pair if with_values else _keys_only, combiner or COUNT), x, max_bytes)
    plan: KeyedPlan = job.planned(x, RunOptions.of(**options), partials=combiner is not None)
    return plan


def _combined_by(recipe: Callable[..., Any] | None) -> Combiner | None:
    """The combiner whose partials a combining by-key ``recipe`` sends; None for a group recipe (its rows are sent)."""
    combining: dict[Any, Combiner] = {
        count_by_key: COUNT,
        sum_by_key: SUM,
        mean_by_key: MEAN,
        min_by_key: MIN,
        max_by_key: MAX,
        variance_by_key: MOMENTS,
        std_by_key: MOMENTS,
    }
    grouping = (
        median_by_key,
        quantile_by_key,
        top_k_by_key,
        collect_by_key,
        count_distinct_by_key,
    )
    if recipe is None or any(recipe is g for g in grouping):
        return None
    for function, combiner in combining.items():
        if recipe is function:
            return combiner
    raise TypeError(
        f"recipe= names the by-key recipe planned, e.g. recipe=tmr.sum_by_key (a combining one: count, sum, mean, min, max, "
        f"variance, std _by_key; or a group one: median, quantile, top_k, collect, count_distinct _by_key); got {recipe!r}"
    )
