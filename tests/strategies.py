"""Hypothesis strategies for the engine's tests, in one place.

Shapes (1-D and 2-D, 0 rows included), dtypes (float32, float64, int32, int64),
arrays of those, uneven size lists with empty shards, every spelling of
``sizes=``, and placements over a cluster's real devices in short and full form.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tfmapreduce as tmr
from tfmapreduce._base.device import Device

DTYPES = tuple(np.dtype(d) for d in (np.float32, np.float64, np.int32, np.int64))
"""The dtypes every recipe must handle."""

MAX_ROWS = 40
"""Rows of a drawn input: enough for uneven shards on 4 devices, small enough to stay fast."""

MAX_SHARDS = 6
"""More shards than the test cluster has devices, so placements wrap around."""

CI_EXAMPLES = 30
"""``max_examples`` of the ``ci`` hypothesis profile (see conftest.py)."""


def examples(ci: int) -> int:
    """``max_examples`` for a test that runs ``ci`` examples under the ``ci`` profile, scaled up in
    proportion under a larger one (``HYPOTHESIS_PROFILE=thorough``): each distributed example
    compiles a graph, so the fast profile keeps the counts modest."""
    return max(ci, settings.default.max_examples * ci // CI_EXAMPLES)


def dtypes() -> st.SearchStrategy[np.dtype]:
    """One of :data:`DTYPES`."""
    return st.sampled_from(DTYPES)


def shapes(*, min_rows: int = 0, max_rows: int = MAX_ROWS, max_cols: int = 4) -> st.SearchStrategy[tuple[int, ...]]:
    """``(rows,)`` or ``(rows, cols)``; 0 rows included unless ``min_rows`` > 0."""
    rows = st.integers(min_rows, max_rows)
    return st.one_of(st.tuples(rows), st.tuples(rows, st.integers(1, max_cols)))


def elements(dtype: np.dtype) -> st.SearchStrategy[Any]:
    """Values of ``dtype``.

    Floats are finite, within ±1e3 and never subnormal: TensorFlow's CPU kernels
    flush subnormals to zero, which is TensorFlow's arithmetic, not the engine's.
    Integers span all of int32 (so int32 sums overflow int32) and ±2**40 for
    int64 (so 40 rows cannot overflow int64).
    """
    if dtype.kind == "f":
        return st.floats(-1e3, 1e3, width=dtype.itemsize * 8, allow_subnormal=False)
    if dtype == np.int32:
        return st.integers(-(2**31), 2**31 - 1)
    return st.integers(-(2**40), 2**40)


@st.composite
def arrays(
    draw: st.DrawFn,
    *,
    dtype: np.dtype | None = None,
    shape: tuple[int, ...] | None = None,
    min_rows: int = 0,
    max_rows: int = MAX_ROWS,
) -> np.ndarray:
    """A numpy array of a drawn (or given) dtype and shape."""
    dtype = draw(dtypes()) if dtype is None else np.dtype(dtype)
    shape = draw(shapes(min_rows=min_rows, max_rows=max_rows)) if shape is None else shape
    return draw(hnp.arrays(dtype, shape, elements=elements(dtype)))


@st.composite
def size_lists(draw: st.DrawFn, rows: int, *, max_shards: int = MAX_SHARDS) -> list[int]:
    """Row counts ≥ 0 that sum to ``rows``: uneven, and often with empty shards (first, last, inside)."""
    shards = draw(st.integers(1, max_shards))
    cuts = sorted(draw(st.lists(st.integers(0, rows), min_size=shards - 1, max_size=shards - 1)))
    bounds = [0, *cuts, rows]
    sizes = [b - a for a, b in itertools.pairwise(bounds)]
    for position in draw(st.lists(st.integers(0, len(sizes)), max_size=2)):
        sizes.insert(position, 0)
    return sizes


def weight_values(*, max_shards: int = MAX_SHARDS) -> st.SearchStrategy[list[float]]:
    """Relative shard weights for ``tmr.weights``: ≥ 0, not all 0 (zeros make empty shards)."""
    value = st.one_of(st.just(0.0), st.floats(0.01, 100.0), st.integers(0, 9).map(float))
    return st.lists(value, min_size=1, max_size=max_shards).filter(any)


def sizes_specs(rows: int) -> st.SearchStrategy[Any]:
    """Every spelling ``sizes=`` accepts: None, a shard count, a size list, ``tmr.weights(...)``."""
    return st.one_of(
        st.none(),
        st.integers(1, max(1, min(MAX_SHARDS, rows))),  # a count may not pass the rows (nor the devices: ≥ 1)
        size_lists(rows),
        weight_values().map(lambda w: tmr.weights(*w)),
    )


def spellings(device: str) -> list[str]:
    """Every way a user may name ``device`` (a full name): full, ``/device:CPU:K``, ``/cpu:K``, and the
    bare task for ``CPU:0``, as in the lesson's ``/job:local/task:1``."""
    d = Device.parse(device)
    task = str(d.task)
    names = [str(d), f"{task}/device:{d.type}:{d.index}", f"{task}/{d.type.lower()}:{d.index}"]
    if d.type == "CPU" and d.index == 0:
        names.append(task)
    return names


def device_lists(devices: Sequence[str], *, max_size: int = 5) -> st.SearchStrategy[list[str]]:
    """Explicit placements: 1..``max_size`` of ``devices`` (repeats allowed), each in a drawn spelling."""
    names = [name for device in devices for name in spellings(device)]
    return st.lists(st.sampled_from(names), min_size=1, max_size=max_size)


def placements(devices: Sequence[str]) -> st.SearchStrategy[list[str] | None]:
    """``devices=``: None (round-robin over the cluster) or an explicit list over ``devices``."""
    return st.one_of(st.none(), device_lists(devices))


def draw_keys(draw: st.DrawFn, kind: str, rows: int, *, strings: int, ints: int, small: int) -> np.ndarray:
    """``rows`` keys of dtype ``kind`` (int32, int64, or str with unicode and ""), drawn from a pool of at most
    ``strings`` (or ``ints``) distinct ones, integers often within ``±small``: keys repeat."""
    if kind == "str":
        choices = draw(st.lists(st.text(max_size=3), min_size=1, max_size=strings, unique=True))
        return np.array([draw(st.sampled_from(choices)) for _ in range(rows)], dtype=object)
    bound = 2**31 - 1 if kind == "int32" else 2**62
    values = st.one_of(st.integers(-small, small), st.integers(-bound, bound))
    choices = draw(st.lists(values, min_size=1, max_size=ints, unique=True))
    return np.array([draw(st.sampled_from(choices)) for _ in range(rows)], dtype=np.dtype(kind))


# The dtypes of the order tests (top_k, unique), and their values: few distinct (many ties), extremes, float specials.
ORDER_DTYPES = tuple(np.dtype(d) for d in ("int8", "uint32", "int32", "int64", "float16", "float32", "float64"))


def order_elements(dtype: np.dtype) -> st.SearchStrategy[Any]:
    """Few distinct values (many ties), the extremes, and for floats NaN, ±inf and -0.0."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        small = st.integers(max(-3, int(info.min)), 3)
        return st.one_of(small, st.sampled_from([int(info.min), int(info.max)]), st.integers(info.min, info.max))
    width = dtype.itemsize * 8
    special = st.sampled_from([np.nan, np.inf, -np.inf, -0.0, 0.0])
    return st.one_of(st.floats(-3, 3, width=width).map(round), special, st.floats(width=width, allow_subnormal=False))


TABLE_WIDTHS = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64")
"""The number types a drawn table's columns take (``table_columns``)."""


@st.composite
def table_columns(draw: st.DrawFn, rows: int) -> dict[str, Any]:
    """The columns of a ``tmr.table`` of ``rows`` rows: a string column (unicode, the empty string), a date, a
    timestamp and numbers of three drawn widths, each with drawn nulls (None, NaT or a ``np.ma`` mask)."""

    def nulls() -> np.ndarray:
        return np.array(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)), dtype=bool)

    words = draw(st.lists(st.text(max_size=3), min_size=1, max_size=5, unique=True))
    text = np.array([draw(st.sampled_from(words)) for _ in range(rows)], dtype=object)
    text[nulls()] = None
    days = np.array(draw(st.lists(st.integers(-800, 20000), min_size=rows, max_size=rows)), "datetime64[D]")
    days[nulls()] = np.datetime64("NaT")
    stamps = np.array(draw(st.lists(st.integers(-(2**40), 2**40), min_size=rows, max_size=rows)), "datetime64[ms]")
    stamps[nulls()] = np.datetime64("NaT")
    columns: dict[str, Any] = {"s": text, "d": days, "t": stamps}
    for i, name in enumerate(draw(st.lists(st.sampled_from(TABLE_WIDTHS), min_size=3, max_size=3))):
        dtype = np.dtype(name)
        if dtype.kind == "b":
            values = st.booleans()
        elif dtype.kind == "f":
            values = st.floats(-1e3, 1e3, width=dtype.itemsize * 8, allow_subnormal=False)
        else:
            info = np.iinfo(dtype)
            values = st.integers(max(int(info.min), -(2**40)), min(int(info.max), 2**40))
        data = np.array(draw(st.lists(values, min_size=rows, max_size=rows)), dtype=dtype)
        columns[f"x{i}"] = np.ma.MaskedArray(data, mask=nulls())
    return columns


TABLE_WORDS = np.array(["", "a", "é", "日本", "a b", "ü"], dtype=object)
"""The strings of :func:`generated` tables: empty, unicode and with a space (the keyed ones add ``"ab"``)."""


def generated(seed: int, rows: int, *, keyed: bool = False) -> tmr.Table:
    """A table of ``rows`` random rows, nulls in each nullable column (about one row in five), unicode and empty strings.

    Every column type by default (``s i d b i8 u16 i64 f16 f32 f64 t``); ``keyed=True``: the columns the aggregation
    tests group and reduce (``s k i d u16 i64 f32 f64``: a key ``k`` of three values, ``f64`` with repeats, -0.0 and 0.0).
    """
    rng = np.random.default_rng(seed)

    def nulls() -> np.ndarray[Any, Any]:
        return rng.random(rows) < 0.2

    def masked(values: np.ndarray[Any, Any]) -> np.ma.MaskedArray[Any, Any]:
        return np.ma.MaskedArray(values, mask=nulls())

    words = np.append(TABLE_WORDS, "ab") if keyed else TABLE_WORDS
    strings = words[rng.integers(0, len(words), rows)]
    strings[nulls()] = None
    days = (np.datetime64("2024-02-27") + rng.integers(0, 4, rows)).astype("datetime64[D]")
    days[nulls()] = np.datetime64("NaT")
    columns: dict[str, Any] = {"s": strings}
    if keyed:
        columns["k"] = rng.integers(0, 3, rows).astype(np.int32)
    columns["i"] = masked(rng.integers(-2, 3, rows).astype(np.int32))
    columns["d"] = days
    if not keyed:
        columns["b"] = masked(rng.random(rows) < 0.5)
        columns["i8"] = masked(rng.integers(-128, 128, rows).astype(np.int8))
    columns["u16"] = rng.integers(0, 65536, rows).astype(np.uint16)
    columns["i64"] = masked(rng.integers(-(2**40), 2**40, rows))
    if not keyed:
        columns["f16"] = masked(rng.normal(size=rows).astype(np.float16))
    columns["f32"] = rng.normal(size=rows).astype(np.float32)
    if keyed:
        columns["f64"] = masked(np.round(rng.normal(size=rows), 1) * (rng.random(rows) < 0.5))  # repeats, -0.0 and 0.0
    else:
        columns["f64"] = masked(rng.normal(size=rows) * 1e3)
        columns["t"] = np.datetime64("2024-01-01T00:00:00", "ms") + rng.integers(0, 10**9, rows).astype("timedelta64[ms]")
    return tmr.table(columns)
