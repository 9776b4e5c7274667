"""A small table's aggregation made on the client (``aggregate_client``) equals the keyed run's: keys of several
types with nulls, unicode and empty strings, every type's counts, sums, means, minima and maxima, no keys, no rows."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pytest

import tfmapreduce as tmr
from tfmapreduce._table.aggregate import Aggregate
from tfmapreduce._table.aggregate_client import aggregated, can_aggregate

AGGS = {
    "n": ("*", "count"),
    "c": ("x", "count"),
    "sx": ("x", "sum"),
    "mx": ("x", "mean"),
    "mf": ("f", "mean"),
    "sf": ("f", "sum"),
    "lo": ("t", "min"),
    "hi": ("t", "max"),
    "dlo": ("d", "min"),
    "dhi": ("d", "max"),
    "sb": ("b", "sum"),
    "hb": ("b", "max"),
    "i8": ("i8", "min"),
    "su": ("u", "sum"),
    "ff": ("f", "max"),
}


def _frame(seed: int, rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)

    def nulls(values: pd.api.extensions.ExtensionArray) -> pd.api.extensions.ExtensionArray:
        values[rng.random(rows) < 0.2] = pd.NA
        return values

    words = np.array(["äpfel ✓", "", "三", "kiwi", None], dtype=object)
    days = [datetime.date(2024, 1, 1) + datetime.timedelta(days=int(d)) for d in rng.integers(0, 40, rows)]
    return pd.DataFrame(
        {
            "s": words[rng.integers(0, 5, rows)],
            "k": nulls(pd.array(rng.integers(-2, 1, rows), dtype="Int32")),  # a null beside 0, its filler
            "t": words[rng.integers(0, 5, rows)],
            "d": [None if rng.random() < 0.2 else d for d in days],
            "x": nulls(pd.array(rng.integers(-(10**12), 10**12, rows), dtype="Int64")),
            "f": np.where(rng.random(rows) < 0.2, np.nan, rng.normal(size=rows) * 1e3),
            "b": nulls(pd.array(rng.random(rows) < 0.5, dtype="boolean")),
            "i8": rng.integers(-128, 128, rows).astype(np.int8),
            "u": rng.integers(0, 2**40, rows).astype(np.uint64),
        }
    )


@pytest.mark.parametrize(("seed", "rows", "keys"), [(0, 200, ["s", "k"]), (1, 7, ["k", "d"]), (2, 60, []), (3, 0, ["s"])])
def test_the_client_aggregates_equal_the_keyed_runs(cluster: tmr.LocalCluster, seed: int, rows: int, keys: list[str]) -> None:
    t = tmr.table(_frame(seed, rows))
    parsed = [Aggregate.parse(out, spec, tuple(t.columns)) for out, spec in AGGS.items()]
    assert can_aggregate(t, keys, parsed)
    got = aggregated(t, keys, parsed).to_pandas()
    want = (t.group_by(keys) if keys else t).agg(**AGGS, cluster=cluster).to_pandas()
    assert list(got.columns) == list(want.columns) == [*keys, *AGGS]
    assert len(got) == len(want) == (1 if not keys else len(t.to_pandas()[keys].drop_duplicates()))
    for name in got.columns:
        assert got[name].dtype == want[name].dtype, name
        if got[name].dtype.kind == "f":
            np.testing.assert_allclose(got[name].to_numpy(), want[name].to_numpy(), rtol=1e-12, err_msg=name)
        else:
            assert got[name].isna().tolist() == want[name].isna().tolist(), name
            assert got[name].dropna().tolist() == want[name].dropna().tolist(), name


def test_what_the_client_does_not_aggregate_is_said_and_a_wrong_type_raises_as_in_the_run() -> None:
    t = tmr.table({"k": np.array([1, 1, 2]), "s": np.array(["a", "b", "c"], dtype=object)})
    assert not can_aggregate(t, ["k"], [Aggregate.parse("m", ("s", "count_distinct"), tuple(t.columns))])
    with pytest.raises(TypeError, match=r"agg: total=\(..., 'sum'\): sum needs a number or bool column, got a string"):
        aggregated(t, ["k"], [Aggregate.parse("total", ("s", "sum"), tuple(t.columns))])
