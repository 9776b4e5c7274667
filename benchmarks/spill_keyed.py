"""Keyed combines and group reducers over their budget: a keyed sum (or median) in memory against spilled, fetched,
resident and range-partitioned.

``python -m benchmarks spill_keyed``:

- ``--rows`` (default 2e6) int64 keys with about half as many distinct values and float64 values, resident on a
  2-worker LocalCluster, summed per key over two reducers (``tmr.sum_by_key``; ``--recipe median_by_key``: their
  median per key, a group reducer, every row sent to its key's reducer; ``--hot N``: N more rows of the key 0, a hot
  key whose values alone exceed the budget, its median selected from the disks in passes: hash, fetched only);
- each run without a budget (in memory) and with ``max_bytes=`` ``--budget`` (default 4e6 bytes, an eighth of a
  reducer's share of partials at the default size: spilled through the workers' disks), fetched
  and ``resident=True`` (the result kept on the reducers, then freed), by hash and with ``partitioner="range"``;
- DuckDB (``--peers duckdb``) over the same keys and values (a pandas frame), ``GROUP BY k`` with ``sum(v)`` or
  ``median(v)``, its ``memory_limit`` the two reducers' budgets together and its ``temp_directory`` a temporary
  folder (DuckDB spills too), then without a limit; its answer checked as ours;
- ``tmr.plan_by_key`` of the same keys and values held on the client, without ``recipe=`` (every row counted) and with
  ``recipe=tmr.sum_by_key`` (per-key partials, each task's distinct keys counted on the client: one pass over the keys).

Every result is checked against numpy (``np.unique`` and ``np.bincount``; a median against pandas) before it is timed; each row is the median
of ``--repeats`` calls after one warm-up.  Then one more call of each run: the largest growth of a worker's resident
memory over it (``VmHWM``, reset through ``/proc/PID/clear_refs`` just before, less ``VmRSS`` before).
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
from typing import Any

import numpy as np

import tfmapreduce as tmr

from . import _peers
from ._registry import Size, benchmark, flag
from ._table import Rows
from .spill import _memory, _reset_peaks


def _growth(pids: tuple[int, ...], fn: Any) -> int:
    """The largest growth of a worker's resident memory over one call of ``fn`` (its ``VmHWM`` after, reset just
    before, less its ``VmRSS`` before), bytes; 0 where /proc does not tell."""
    before = [_memory((pid,), "VmRSS") for pid in pids]
    if not _reset_peaks(pids):
        return 0
    fn()
    return max(_memory((pid,), "VmHWM") - b for pid, b in zip(pids, before, strict=True))


def _run(recipe: Any, keys: Any, values: Any, resident: bool, **options: Any) -> Any:
    """One call of ``recipe``; a resident result's length taken, then freed."""
    out = recipe(keys, values, resident=resident, reducers=2, **options)
    if not resident:
        return out
    with out:
        return len(out)


@benchmark(
    "spill_keyed",
    sizes={
        "rows": Size(2e5, 2e6, "rows"),
        "budget": Size(4e5, 4e6, "bytes one reducer may receive in the spilled runs (max_bytes=)"),
        "repeats": Size(1, 5, "timed calls per row after one warm-up (median reported)"),
    },
    flags=[
        flag(
            "--recipe",
            choices=("sum_by_key", "median_by_key"),
            default="sum_by_key",
            help="the by-key recipe timed: a keyed combine (sum_by_key, the default) or a group reducer (median_by_key)",
        ),
        flag("--hot", type=int, default=0, help="this many more rows of the key 0 (a hot key; hash, fetched runs only)"),
    ],
    peers=("duckdb",),
)
def run(args: argparse.Namespace) -> None:
    """Measure and print the table."""
    n, budget = int(args.rows), int(args.budget)
    rng = np.random.default_rng(0)
    keys = rng.integers(0, n // 2, n, dtype=np.int64)
    keys = rng.permutation(np.concatenate([keys, np.zeros(args.hot, np.int64)]))
    values = rng.random(keys.size)
    recipe = getattr(tmr, args.recipe)
    distinct, ids = np.unique(keys, return_inverse=True)
    if args.recipe == "median_by_key":
        import pandas as pd

        expected = pd.Series(values).groupby(keys).median().to_numpy()
    else:
        expected = np.bincount(ids, weights=values)
    table = Rows(args.repeats)
    growth: list[tuple[str, int]] = []
    with (
        tmr.LocalCluster(workers=2) as cluster,
        tmr.scatter(keys, cluster=cluster) as kd,
        tmr.scatter(values, cluster=cluster) as vd,
    ):
        for partitioner in ("hash",) if args.hot else ("hash", "range"):
            for limit in (None, budget):
                got = recipe(kd, vd, max_bytes=limit, reducers=2, partitioner=partitioner)
                np.testing.assert_array_equal(got.keys, distinct)
                np.testing.assert_allclose(got.values, expected, rtol=1e-9)
                for resident in (False,) if args.hot else (False, True):
                    how = "in memory" if limit is None else f"max_bytes={limit:,}: spilled"
                    name = f"{args.recipe}, {partitioner}, {'resident' if resident else 'fetched'}, {how}"
                    call = functools.partial(_run, recipe, kd, vd, resident, max_bytes=limit, partitioner=partitioner)
                    table.add(name, call, keys.size)
                    growth.append((name, _growth(cluster.pids, call)))
        for planned in (None, recipe):  # the plan of host arrays: rows, or each task's distinct keys' partials
            plan = tmr.plan_by_key(keys, values, recipe=planned, max_bytes=budget, reducers=2, cluster=cluster)
            print(f"  plan_by_key(recipe={getattr(planned, '__name__', None)}): {plan.spill.explain().splitlines()[0][:160]}")
            table.add(
                f"plan_by_key, recipe={getattr(planned, '__name__', None)}",
                lambda r=planned: tmr.plan_by_key(keys, values, recipe=r, max_bytes=budget, reducers=2, cluster=cluster),
                n,
            )
    if _peers.on(args.peers, "duckdb"):
        _duckdb(table, args.recipe, keys, values, distinct, expected, 2 * budget)
    table.print("rows")
    print("\n| run | largest worker's memory growth (MB) |\n|---|---:|")
    for name, grew in growth:
        print(f"| {name} | {grew / 1e6:.0f} |")


def _duckdb(
    table: Rows, recipe: str, keys: np.ndarray, values: np.ndarray, distinct: np.ndarray, expected: np.ndarray, limit: int
) -> None:
    """DuckDB's ``GROUP BY`` of the same rows with ``memory_limit`` ``limit`` (spilling to a temporary folder), then
    without one; its answer checked first. A limit DuckDB cannot work within is printed and its row left out."""
    import duckdb
    import pandas as pd

    sql = f"SELECT k, {'median' if recipe == 'median_by_key' else 'sum'}(v) AS v FROM t GROUP BY k ORDER BY k"
    with tempfile.TemporaryDirectory() as spill:
        for bound in (limit, None):
            con = duckdb.connect(config={"threads": 2, "temp_directory": spill})
            con.register("t", pd.DataFrame({"k": keys, "v": values}))
            if bound is not None:
                con.execute(f"SET memory_limit = '{bound}B'")
            name = f"DuckDB GROUP BY, {'memory_limit=' + format(bound, ',') + ' B' if bound else 'no memory limit'}"
            try:
                got = con.execute(sql).fetchnumpy()
            except duckdb.Error as e:
                print(f"  {name}: refused ({str(e).splitlines()[0][:160]})")
                con.close()
                continue
            np.testing.assert_array_equal(got["k"], distinct)
            np.testing.assert_allclose(got["v"], expected, rtol=1e-9)
            table.add(name, lambda con=con: con.execute(sql).fetchnumpy(), keys.size)
            con.close()


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["spill_keyed", *sys.argv[1:]]))
