"""A host column's takes: deferred until the values are read, composed when taken again, equal to numpy's eager
indexing whatever the chain (masks, row numbers, repeats, slices, nulls), and read safely by many threads at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tfmapreduce._table.column import Column, made
from tfmapreduce._table.schema import STRING, ColumnType


@st.composite
def chains(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, list[object]]:
    """Strings with nulls (a null's slot holds ``""``), and up to 4 takes of whatever rows are left each time."""
    n = draw(st.integers(0, 30))
    values = np.array([draw(st.text(max_size=3)) for _ in range(n)], object)
    valid = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    takes: list[object] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["mask", "rows", "slice"]))
        if kind == "mask":
            takes.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool))
        elif kind == "rows":
            takes.append(np.array(draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=40 if n else 0)), np.int64))
        else:
            takes.append(slice(draw(st.integers(0, n)), None))
        n = len(np.arange(n)[takes[-1]])  # type: ignore[index]
    return values, valid, takes


@settings(max_examples=200, deadline=None)
@given(chains())
def test_a_chain_of_takes_equals_numpy_indexing_nulls_included(chain: tuple[np.ndarray, np.ndarray, list[object]]) -> None:
    values, valid, takes = chain
    column = made(STRING, values, valid)
    want_values, want_valid = np.where(valid, values, ""), valid
    for rows in takes:
        column = column.take(rows)  # type: ignore[arg-type]
        want_values, want_valid = want_values[rows], want_valid[rows]  # type: ignore[index]
        assert len(column) == len(want_values)
    assert column.values.tolist() == want_values.tolist()
    got_valid = np.ones(len(column), bool) if column.valid is None else column.valid
    assert got_valid.tolist() == want_valid.tolist()
    assert column.valid is None or not column.valid.all()  # no mask where nothing is null


def test_a_deferred_take_is_made_once_however_many_threads_read_it() -> None:
    source = Column(ColumnType.of(np.dtype(np.int64)), np.arange(100_000, dtype=np.int64))
    for _ in range(20):
        rows = np.random.default_rng().permutation(100_000)[:50_000]
        taken = source.take(rows).take(np.arange(0, 50_000, 2))
        with ThreadPoolExecutor(8) as pool:
            seen = list(pool.map(lambda c: c.values, [taken] * 32))
        assert all(s is seen[0] for s in seen)  # one array: every reader got the one take
        np.testing.assert_array_equal(seen[0], rows[::2])
