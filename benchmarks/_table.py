"""A table of timed rows: each row one implementation's median time, printed as it is added, then as Markdown."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from ._timing import repeat


class Rows:
    """The table: ``(implementation, median seconds, items)`` per row, each timed and printed as it is added.

    Example::

        table = Rows(repeats=3)
        table.add("np.sort, one process", lambda: np.sort(x), len(x))
        table.print("rows")  # | implementation | seconds | rows per second |
    """

    def __init__(self, repeats: int):
        self.repeats = repeats
        self.rows: list[tuple[str, float, float]] = []

    @property
    def few(self) -> int:
        """The repeats of the slowest calls (Spark's, dask.bag's): half the table's, at least 1."""
        return max(1, self.repeats // 2)

    def add(self, name: str, fn: Callable[[], Any], items: float, repeats: int | None = None) -> None:
        """Time ``fn``: the median of ``repeats`` (default: the table's) calls after one warm-up call."""
        times, _ = repeat(fn, self.repeats if repeats is None else repeats)
        self.rows.append((name, statistics.median(times), items))
        print(f"  {name}: {statistics.median(times):.2f} s (median of {len(times)})", flush=True)

    def once(self, name: str, fn: Callable[[], Any], items: float) -> None:
        """Time one call of ``fn``, without a warm-up (a call of minutes)."""
        started = time.perf_counter()
        fn()
        seconds = time.perf_counter() - started
        self.rows.append((name, seconds, items))
        print(f"  {name}: {seconds:.2f} s (one call)", flush=True)

    def print(self, items: str) -> None:
        """The table in Markdown: each row's seconds, and ``items`` (what its count counts) per second."""
        print(f"\n| implementation | seconds | {items} per second |\n|---|---|---|")
        for name, seconds, count in self.rows:
            print(f"| {name} | {seconds:.2f} | {count / seconds:.3g} |")
