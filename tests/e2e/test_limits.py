"""docs/limits.md stays honest: every row that says a call is refused is checked to be refused still, and every row of
the page is accounted for here (a row added, changed or dropped changes this file too)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr

PAGE = Path(__file__).resolve().parents[2] / "docs" / "limits.md"


def _csv_with_an_empty_number(tmp_path: Path, read: bool = True) -> object:
    path = tmp_path / "a.csv"
    path.write_text("a,b\n1,\n2,3\n")
    return tmr.read_csv(str(path), columns=["a", "b"]) if read else path


def _assigning(cluster: tmr.LocalCluster) -> object:
    seen = tf.Variable(0.0, tf.float64)

    def counting(x: tf.Tensor) -> tf.Tensor:
        seen.assign_add(1.0)
        return x

    return tmr.map(counting, np.arange(4.0), cluster=cluster)


class _Holder:
    """An object that holds a model's weight: a map function reaching it through the object is not read from copies."""

    weight = tf.constant(2.0, tf.float64)


def _parquet_with_a_list(tmp_path: Path) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = str(tmp_path / "nested.parquet")
    pq.write_table(pa.table({"tags": [[1, 2], [3]]}), path)
    return path


REFUSED: dict[str, tuple[type[Exception], Callable[[tmr.LocalCluster, Path], object]]] = {
    "Group by float, bool or complex keys": (
        tmr.InputError,
        lambda c, _: tmr.sum_by_key(np.array([1.5, 2.5]), np.ones(2), cluster=c),
    ),
    "Join on several columns of arrays": (
        tmr.InputError,
        lambda c, _: tmr.join((np.array([[1, 2], [3, 4]]), np.ones(2)), (np.array([1, 2]), np.ones(2)), cluster=c),
    ),
    "More of tables": (
        TypeError,
        lambda c, _: tmr.table({"d": np.array(["2024-01-02"], "datetime64[D]")}).agg(mid=("d", "median"), cluster=c),
    ),
    "Arbitrary Python in a map function": (
        tmr.MapFunctionError,
        lambda c, _: tmr.MapReduce(lambda x: x.numpy().sum(), tmr.combiners.sum).run(np.arange(4.0), cluster=c),
    ),
    "Training, or a map function that changes a variable": (tmr.MapFunctionError, lambda c, _: _assigning(c)),
    "A model reached through another object inside a map function": (
        tmr.MapFunctionError,
        lambda c, _: tmr.map(lambda x: x * _Holder.weight, np.arange(4.0), cluster=c),
    ),
    "More of Parquet": (TypeError, lambda c, tmp: tmr.scan_parquet(_parquet_with_a_list(tmp), cluster=c)),
    "More of CSV": (
        TypeError,
        lambda c, tmp: tmr.scan_csv(_csv_with_an_empty_number(tmp, read=False), dtypes={"b": "timestamp[us, UTC]"}),
    ),
    "JSON, Avro, or a matrix from CSV with missing numbers": (
        tmr.InputError,
        lambda c, tmp: tmr.mean(_csv_with_an_empty_number(tmp), cluster=c),
    ),
    "One join key's rows over a device's memory, and resident joins over it": (
        tmr.ReducerMemoryError,
        lambda c, _: tmr.join(
            (np.arange(1000), np.ones(1000)), (np.arange(1000), np.ones(1000)), max_bytes=100, resident=True, cluster=c
        ),
    ),
    "A `tf.data.Dataset` as input": (TypeError, lambda c, _: tmr.mean(tf.data.Dataset.range(4), cluster=c)),
}
"""Each row that documents a refusal: the error, and a call that must still raise it."""

ABSENT = {
    "Streaming or unbounded input": "every input has a size before the run: no call to refuse",
    "SQL": "there is no query call",
    "Window functions, running totals, lags": "no window call exists",
    "A whole query in one run": "a lazy table runs each step that is not fused as the eager table's (tests/_query)",
    "Joins on anything but equal keys": "tmr.join and Table.join take no condition",
    "A keyed result too large for the client": "a limit of the client's memory, not a refusal",
    "Workers that check who calls them": "a property of TensorFlow's servers (tests/_cluster/test_worker.py, tests/e2e/test_isolation.py)",
    "Machines with different TensorFlow releases": "refused by the version check (tests/_cluster/test_versions.py)",
    "Windows or macOS": "the platform the tests run on",
    "More of models": "no free-memory probe of a GPU exists (tests/_kinds/test_predict.py checks the memory limits and table refusals)",
}
"""Rows that describe something absent rather than a call refused, and where it is checked instead."""


def test_every_row_of_the_page_is_accounted_for() -> None:
    rows = re.findall(r"^\| \*\*(.+?)\*\*", PAGE.read_text(), flags=re.M)
    assert sorted(rows) == sorted([*REFUSED, *ABSENT])


def test_no_reader_of_json_or_avro_exists_yet() -> None:
    assert not [name for name in dir(tmr) if re.search("json|avro", name, flags=re.I)]


@pytest.mark.parametrize("row", sorted(REFUSED))
def test_each_documented_refusal_is_still_refused(cluster: tmr.LocalCluster, tmp_path: Path, row: str) -> None:
    error, call = REFUSED[row]
    with pytest.raises(error):
        call(cluster, tmp_path)
