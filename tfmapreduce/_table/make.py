"""``tmr.table``: a :class:`Table` from a dict of arrays, a pandas or polars ``DataFrame`` or an Arrow table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .arrow import arrow_of, from_arrow
from .convert import from_numpy, from_series
from .table import Table


def table(data: Any, /) -> Table:
    """A [`Table`][tfmapreduce.Table] from a dict of 1-D numpy arrays (or lists), a pandas or polars ``DataFrame``
    or a ``pyarrow.Table`` / ``RecordBatch`` (its types kept: ``date32`` a date, ``timestamp`` with its unit, nulls).

    Column types: bool, signed and unsigned ints, float16/32/64, strings (``str`` arrays, or ``object`` arrays of
    ``str``), dates (``datetime64[D]``, or ``datetime.date`` objects), timestamps (``datetime64[s|ms|us|ns]``), lists
    of one of those (Arrow's ``list``/``large_list``; cells that are lists, tuples or 1-D arrays; no null inside).
    Nulls: None, NaT and ``np.ma`` masks in arrays; in a DataFrame also NaN (in float columns too) and ``pd.NA``, as
    ``pyarrow.Table.from_pandas`` reads them. A NaN in a numpy float array is a value, not a null.

    Examples:
        >>> t = tmr.table({"d": np.array(["2024-01-02", "NaT"], "datetime64[D]"), "s": np.array(["é", None], object)})
        >>> print(t.schema)
        d: date (nullable)
        s: string (nullable)

    Raises:
        TypeError: not a dict, DataFrame or pyarrow table, a column of a type no column stores (the message names the column).
        ValueError: columns of different lengths, a null inside a list (the message names the column and row).
    """
    arrow = arrow_of(data)  # a pyarrow table, or a polars DataFrame's
    if arrow is not None or (type(data).__name__ == "DataFrame" and hasattr(data, "columns")):
        names = [str(c) for c in (data.columns if arrow is None else arrow.column_names)]
        if len(set(names)) != len(names):
            raise ValueError(f"table: the {type(data).__name__}'s column names repeat ({names}); rename them first")
    if arrow is not None:
        return Table({name: from_arrow(name, arrow.column(i)) for i, name in enumerate(names)})
    if type(data).__name__ == "DataFrame" and hasattr(data, "columns"):
        return Table({str(c): from_series(str(c), data[c]) for c in data.columns})
    if not isinstance(data, Mapping):
        raise TypeError(
            f"table: expected a dict of 1-D arrays, a pandas DataFrame or a pyarrow Table, got {type(data).__name__}; e.g. tmr.table({{'x': np.arange(3)}})"
        )
    for name in data:
        if not isinstance(name, str):
            raise TypeError(f"table: column names must be str, got {type(name).__name__} {name!r}")
    return Table({name: from_numpy(name, values) for name, values in data.items()})
