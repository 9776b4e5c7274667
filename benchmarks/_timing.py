"""Timing: implementations measured interleaved, so that pairwise ratios share the machine's noise."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any


def summary(raw: list[float]) -> dict[str, Any]:
    """Median, min and max of some samples, with the samples."""
    return {"median": statistics.median(raw), "min": min(raw), "max": max(raw), "n": len(raw), "raw": list(raw)}


def repeat(fn: Callable[[], Any], repeats: int, *, warmup: int = 1) -> tuple[list[float], Any]:
    """Seconds of each of ``repeats`` calls of ``fn`` after ``warmup`` untimed ones, and the last call's value.

    Example:
        >>> seconds, value = repeat(lambda: 6 * 7, 3)
        >>> len(seconds), value
        (3, 42)
    """
    value = None
    for _ in range(warmup):
        value = fn()
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        value = fn()
        seconds.append(time.perf_counter() - started)
    return seconds, value


def interleaved(
    impls: Mapping[str, Callable[[], Any]], *, warmup: int, repeats: int
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """Run every implementation ``warmup`` times, then time ``repeats`` rounds of one call each.

    Within a round each implementation runs once, and the order rotates from
    round to round, so a burst of load on the machine hits every implementation
    alike and the ratio of two of them in one round is meaningful.  The garbage
    collector is paused while timing.

    Returns:
        The value of each implementation's first warm-up call (none without warm-up), and the
        seconds of each timed call, per implementation, round by round.
    """
    names = list(impls)
    values: dict[str, Any] = {}
    for i in range(warmup):
        for name in names:
            value = impls[name]()
            if i == 0:
                values[name] = value
    raw: dict[str, list[float]] = {name: [] for name in names}
    gc.collect()
    gc.disable()
    try:
        for r in range(repeats):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                started = time.perf_counter()
                impls[name]()
                raw[name].append(time.perf_counter() - started)
    finally:
        gc.enable()
    return values, raw


def ratios(raw: Mapping[str, list[float]], numerator: str, denominator: str) -> dict[str, Any] | None:
    """``numerator / denominator`` round by round (same round, same load), summarized; None if either is absent."""
    a, b = raw.get(numerator), raw.get(denominator)
    if not a or not b:
        return None
    return summary([x / y for x, y in zip(a, b, strict=True)])
