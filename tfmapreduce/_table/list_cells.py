"""List columns from Python cells: a pandas ``object`` column (or a numpy ``object`` array) whose cells are lists,
tuples or 1-D numpy arrays, read through Arrow as ``pyarrow.Table.from_pandas`` reads it: the elements' common type
(ints with floats: float64; ``datetime.date``: dates; ``datetime64`` arrays: timestamps of their unit).

A None, NaN or ``pd.NA`` cell is a null list; inside a list, a NaN is a float value and a None a null element, which a
list column does not hold (refused, naming the row)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrow import from_arrow, pyarrow_module
from .column import Column

LISTS = (list, tuple, np.ndarray)
"""The cells that make a list column."""


def from_cells(name: str, cells: list[Any]) -> Column:
    """A list column of ``cells``: each a list, tuple or 1-D numpy array of one element type, or None (a null list).

    Example:
        >>> from_cells("x", [[1, 2], (), None, np.array([3])]).to_numpy().tolist()
        [array([1, 2]), array([], dtype=int64), None, array([3])]

    Raises:
        TypeError: a cell not a list, or elements of types that do not mix (a str with an int, a list in a list); the
            message names the column and the first row that does not fit the rows before it.
        ValueError: a null inside a list (None, ``pd.NA``, NaT), naming the first row holding one.
    """
    pa = pyarrow_module()
    try:
        array = pa.array(cells)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError) as e:
        raise _refusal(name, cells, e) from None
    return from_arrow(name, array)


def _refusal(name: str, cells: list[Any], error: Exception) -> Exception:
    """Why ``cells`` make no Arrow array: the first row whose cell does not convert with the rows before it (found by
    halving; a prefix that converts stays convertible without its last rows)."""
    pa = pyarrow_module()
    good, bad = 0, len(cells)  # cells[:good] convert, cells[:bad] do not
    while bad - good > 1:
        mid = (good + bad) // 2
        try:
            pa.array(cells[:mid])
            good = mid
        except Exception as e:  # any failure of the prefix marks it
            bad, error = mid, e
    row, cell = bad - 1, cells[bad - 1]
    if not isinstance(cell, LISTS):
        return TypeError(
            f"table: column {name!r} mixes lists with a {type(cell).__name__} (row {row}: {cell!r}); expected every cell "
            "a list, tuple or 1-D numpy array, None for a null list: convert the column first"
        )
    if isinstance(cell, np.ndarray) and cell.ndim != 1:
        return TypeError(
            f"table: column {name!r} holds a {cell.ndim}-D array (row {row}, shape {cell.shape}); a list column's cells "
            "are 1-D: flatten each first, e.g. df[name].map(np.ravel)"
        )
    if any(v is None or type(v).__name__ in ("NAType", "NaTType") for v in list(cell)):
        return ValueError(
            f"table: column {name!r} holds a null inside a list (row {row}: {cell!r}); a list's elements hold no null "
            "(a null list is fine): drop or fill them first, e.g. [v for v in cell if v is not None] for each cell"
        )
    return TypeError(
        f"table: column {name!r}: the list of row {row} ({cell!r}) does not mix with the rows before it ({error}); "
        "expected the elements of every list of one type (numbers, bool, str, dates or timestamps): convert them first"
    )
