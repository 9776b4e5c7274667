"""The oracle: a result of the engine equals numpy on the whole input, and a plan covers its rows
exactly once, in order (in the spirit of dask's ``assert_eq``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import tfmapreduce as tmr

RTOL = 1e-6
"""Relative tolerance for float results (the issue's bound for float32 input against a float64 reference)."""


def reference(x: Any) -> np.ndarray:
    """The whole input as numpy, widened (float64, int64) so the reference itself neither rounds nor overflows."""
    x = np.asarray(x)
    return x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)


def scale(x: Any, power: int = 1) -> float:
    """An absolute tolerance for results that cancel to near 0: ``1e-9 · max|x|**power · max(1, size)``.

    Summing in a different order than numpy moves a float64 result by about
    ``size · 1e-16 · max|x|``; that is far below this, and far above nothing.
    """
    x = reference(x).astype(np.float64)
    if x.size == 0:
        return 0.0
    return 1e-9 * float(np.max(np.abs(x))) ** power * x.size


def assert_eq(
    actual: Any,
    expected: Any,
    *,
    rtol: float = RTOL,
    atol: float = 0.0,
    plan: tmr.Plan | None = None,
    rows: int | None = None,
    sizes: Sequence[int] | None = None,
    devices: Sequence[str] | None = None,
) -> None:
    """Assert a result equals numpy's, and (given ``plan``) that the plan is sound.

    ``expected`` is numpy's answer on the whole input (compute it with
    :func:`reference`); structures (tuples, lists, dicts) are compared leaf by
    leaf.  Integer expectations must match exactly, with an integer result;
    float ones within ``rtol`` (plus ``atol`` for results near 0).  Shapes
    must match.

    With ``plan``: it covers ``rows`` rows exactly once, in order; with
    ``sizes`` its sizes are exactly those; with ``devices`` every shard runs
    on one of them.
    """
    if plan is not None:
        assert rows is not None, "pass rows= with plan="
        assert_covers(plan, rows, sizes=sizes, devices=devices)
    _compare(actual, expected, rtol=rtol, atol=atol, path="result")


def _compare(actual: Any, expected: Any, *, rtol: float, atol: float, path: str) -> None:
    if isinstance(expected, Mapping):
        assert isinstance(actual, Mapping), f"{path}: expected a mapping, got {type(actual).__name__} {actual!r}"
        assert set(actual) == set(expected), f"{path}: keys {sorted(actual)} != {sorted(expected)}"
        for key in expected:
            _compare(actual[key], expected[key], rtol=rtol, atol=atol, path=f"{path}[{key!r}]")
        return
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)), (
            f"{path}: expected a {type(expected).__name__}, got {type(actual).__name__} {actual!r}"
        )
        assert len(actual) == len(expected), f"{path}: {len(actual)} items, expected {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            _compare(a, e, rtol=rtol, atol=atol, path=f"{path}[{i}]")
        return
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.shape == e.shape, f"{path}: shape {a.shape}, expected {e.shape} (value {a!r})"
    assert a.dtype.kind in "biuf", f"{path}: non-numeric dtype {a.dtype}"
    if e.dtype.kind in "biu":
        assert a.dtype.kind in "biu", f"{path}: expected an exact integer result, got dtype {a.dtype} ({a!r} vs {e!r})"
        np.testing.assert_array_equal(a, e, err_msg=path)
    else:
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, err_msg=path)


def assert_covers(plan: tmr.Plan, rows: int, *, sizes: Sequence[int] | None = None, devices: Sequence[str] | None = None) -> None:
    """Every row of ``range(rows)`` is in exactly one shard; shards are numbered and ordered by row."""
    assert plan.rows == rows, f"plan for {plan.rows} rows, input has {rows}"
    assert plan.shards, "a plan needs at least one shard"
    hits = np.zeros(rows, np.int64)
    expected_start = 0
    for i, shard in enumerate(plan.shards):
        assert shard.index == i, f"shard {i} is numbered {shard.index}"
        assert shard.start == expected_start, f"shard {i} starts at {shard.start}, previous one stopped at {expected_start}"
        assert shard.stop >= shard.start, f"shard {i} runs backwards ({shard.start}:{shard.stop})"
        assert shard.rows == shard.stop - shard.start
        hits[shard.start : shard.stop] += 1
        expected_start = shard.stop
    assert expected_start == rows, f"shards end at row {expected_start}, input has {rows}"
    assert (hits == 1).all(), f"rows covered {hits.tolist()} times"
    assert plan.sizes == tuple(s.rows for s in plan.shards)
    assert sum(plan.sizes) == rows
    if sizes is not None:
        assert plan.sizes == tuple(sizes), f"plan sizes {plan.sizes}, asked for {tuple(sizes)}"
    if devices is not None:
        stray = [s.device for s in plan.shards if s.device not in devices]
        assert not stray, f"shards on devices the cluster lacks: {stray}"
