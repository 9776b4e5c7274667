"""CSV files as a table scan reads them: on the client the files' headers, each column's type inferred from the first
rows of the first file (``dtypes=`` overriding the columns it names) and the byte ranges that are the input splits,
each starting at a record (a quoted line break counted); on the workers each range is decoded by ``csv_columns``.

Inference (the first ``infer_rows`` records of the first file; only their non-null fields count): a column whose
values are all ``true``/``false`` (any case) is bool; all integers that fit int64, int64; all numbers (``1.5``,
``-2e3``, ``nan``, ``inf``), float64; all ``YYYY-MM-DD``, date; dates and ``YYYY-MM-DD[ T]HH:MM[:SS[.f]]``,
timestamp (``us``; ``ns`` where a fraction has 7 to 9 digits); anything else, or no value at all, string.
"""

from __future__ import annotations

import csv
import difflib
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from .source import table_files

INTEGER = "[+-]?[0-9]+"
NUMBER = "[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?|[+-]?([Nn][Aa][Nn]|[Ii][Nn][Ff]([Ii][Nn][Ii][Tt][Yy])?)"
BOOL = "[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee]"
DATE = "[0-9]{4}-[0-9]{2}-[0-9]{2}"
_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def timestamp_pattern(unit: str) -> str:
    """A timestamp whose fraction of a second ``unit`` holds exactly (a date alone is midnight)."""
    fraction = f"([.][0-9]{{1,{_DIGITS[unit]}}})?" if _DIGITS[unit] else ""
    return f"{DATE}([T ][0-9]{{2}}:[0-9]{{2}}(:[0-9]{{2}}{fraction})?)?"


def pattern(kind: str) -> str | None:
    """The regular expression (Python's and RE2's alike) every non-empty field of a column of ``kind`` matches;
    None for strings (anything) and for ints and floats of other widths (read as int64/float64, then cast)."""
    if kind == "bool":
        return BOOL
    if kind == "date":
        return DATE
    if kind.startswith("timestamp["):
        return timestamp_pattern(kind[len("timestamp[") : -1])
    if kind.startswith(("int", "uint")):
        return INTEGER
    if kind.startswith("float"):
        return NUMBER
    return None


_NUMBERS = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "float16", "float32", "float64")


def kind_of(name: str, dtype: Any) -> str:
    """The column type ``dtypes=`` names for column ``name``: ``"string"`` (or ``str``), ``"date"``,
    ``"timestamp[s|ms|us|ns]"``, a number's dtype (``"int32"``, ``np.float32``, ``int``, ``float``, ``bool``).

    Raises:
        TypeError: anything else, naming the column and the types taken.
    """
    if dtype in (str, "str", "string") or (isinstance(dtype, np.dtype) and dtype.kind in "OU"):
        return "string"
    if dtype in ("date", "datetime64[D]"):
        return "date"
    if isinstance(dtype, str) and (m := re.fullmatch(r"(?:timestamp|datetime64)\[(s|ms|us|ns)\]", dtype)):
        return f"timestamp[{m.group(1)}]"
    try:
        numeric = np.dtype(dtype).name if dtype not in (None, "") else ""
    except TypeError:
        numeric = ""
    if numeric in _NUMBERS:
        return numeric
    raise TypeError(
        f"scan_csv: dtypes={{{name!r}: {dtype!r}}} is not a type a CSV column is read as; give 'string', 'date', "
        f"'timestamp[us]' (or s, ms, ns), 'bool', or a number's dtype ('int64', 'float32', ...; uint64 is not taken)"
    )


def infer(values: Sequence[str]) -> str:
    """The type of a column whose first non-empty fields are ``values`` (see the module's rules).

    Examples:
        >>> [infer(v) for v in (["1", "-2"], ["1", "2.5"], ["2024-01-31"], ["2024-01-31", "2024-02-01 10:00"], ["x"], [])]
        ['int64', 'float64', 'date', 'timestamp[us]', 'string', 'string']
    """
    if not values:
        return "string"
    if all(re.fullmatch(BOOL, v) for v in values):
        return "bool"
    if all(re.fullmatch(INTEGER, v) and abs(float(v)) < 2.0**63 for v in values):
        return "int64"
    if all(re.fullmatch(NUMBER, v) for v in values):
        return "float64"
    if all(re.fullmatch(DATE, v) for v in values):
        return "date"
    for unit in ("us", "ns"):
        if all(re.fullmatch(timestamp_pattern(unit), v) for v in values):
            return f"timestamp[{unit}]"
    return "string"


@attrs.frozen
class CsvScan:
    """What a CSV scan reads (see [`plan_csv`][tfmapreduce.plan_csv]): the files, the columns and their types, and the
    byte ranges that are its splits; a frozen value."""

    files: tuple[str, ...]
    """Every file, in the order their rows come."""
    sizes: tuple[int, ...]
    """Each file's bytes."""
    columns: tuple[str, ...]
    """The columns, in order."""
    kinds: tuple[str, ...]
    """Each column's type (``"int64"``, ``"string"``, ``"date"``, ``"timestamp[us]"``, ...)."""
    inferred: tuple[bool, ...]
    """Whether each column's type was inferred (False: ``dtypes=`` named it)."""
    ranges: tuple[tuple[int, int, int], ...]
    """Each split: (file index, first byte, end byte), each range starting at a record; the first of a file at 0."""
    delimiter: str = ","
    infer_rows: int = 1000
    header: bool = True
    """Whether each file's first record is its header (skipped), or already data."""
    null_values: tuple[str, ...] = ()
    """The spellings read as null besides the empty field."""


def header(path: str, delimiter: str, has_header: bool = True) -> list[str]:
    """The column names of a CSV file: its first record; without a header, ``column_1``, ``column_2``, ... (as polars
    names them), as many as the first record has fields.

    Raises:
        ValueError: an empty file, or duplicate names (named).
    """
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:  # -sig: a BOM is not part of the first name
            names: list[str] | None = next(csv.reader(f, delimiter=delimiter, strict=True), None)
    except (UnicodeDecodeError, csv.Error) as e:
        what = "header" if has_header else "record"
        raise ValueError(f"scan_csv: {path} does not start with a CSV {what} in UTF-8 ({e})") from None
    if not names:
        what = "a header line naming its columns" if has_header else "a record (has_header=False)"
        raise ValueError(f"scan_csv: {path} is empty; every file of a scan starts with {what}")
    if not has_header:
        return [f"column_{i + 1}" for i in range(len(names))]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"scan_csv: {path} names column(s) {twice} more than once; a table's column names are unique")
    return names


def renamed(names: list[str], new_columns: Sequence[str] | None) -> list[str]:
    """``names`` with the first ``len(new_columns)`` replaced by ``new_columns`` (polars' rule: the rest keep theirs).

    Raises:
        TypeError: ``new_columns`` is not a list of strings. ValueError: more names than columns, or a name twice.

    Example:
        >>> renamed(["column_1", "column_2", "column_3"], ["id", "price"])
        ['id', 'price', 'column_3']
    """
    if new_columns is None:
        return names
    if isinstance(new_columns, str) or not all(isinstance(n, str) for n in new_columns):
        raise TypeError(f"scan_csv: new_columns= is a list of column names, e.g. ['id', 'price'], got {new_columns!r}")
    if len(new_columns) > len(names):
        raise ValueError(
            f"scan_csv: new_columns= gives {len(new_columns)} names, the files have {len(names)} columns ({names}); "
            "give at most one name a column"
        )
    out = [*new_columns, *names[len(new_columns) :]]
    twice = sorted({n for n in out if out.count(n) > 1})
    if twice:
        raise ValueError(f"scan_csv: new_columns= makes the columns {out}, with {twice} more than once; give unique names")
    return out


def spellings(null_values: str | Sequence[str] | None) -> tuple[str, ...]:
    """The null spellings ``null_values=`` gives (a string, or a list of strings), in order, each once.

    Raises:
        TypeError: anything else.

    Example:
        >>> spellings("NA"), spellings(["NA", "null", "NA"])
        (('NA',), ('NA', 'null'))
    """
    given = [null_values] if isinstance(null_values, str) else () if null_values is None else null_values
    if not isinstance(given, Sequence) or not all(isinstance(v, str) for v in given):
        raise TypeError(
            "scan_csv: null_values= is a string or a list of strings read as null (besides the empty field), e.g. "
            f"['NA', 'null']; got {null_values!r}"
        )
    return tuple(dict.fromkeys(given))


def plan(
    paths: Any,
    dtypes: Mapping[str, Any] | None,
    delimiter: str,
    infer_rows: int,
    split_bytes: int,
    has_header: bool = True,
    new_columns: Sequence[str] | None = None,
    null_values: str | Sequence[str] | None = None,
) -> CsvScan:
    """The scan of ``paths``: headers checked against the first file's (without a header: only the first file's
    fields counted), columns renamed by ``new_columns``, types inferred, byte ranges cut.

    Raises:
        FileNotFoundError, ValueError (headers that differ, a bad ``dtypes=`` or ``new_columns=``), KeyError
        (``dtypes=`` naming no column, with "did you mean"), TypeError (a type ``dtypes=`` cannot name, a bad
        ``null_values=``, ``has_header=`` not a bool).
    """
    if not isinstance(has_header, bool):
        raise TypeError(f"scan_csv: has_header= is True (each file's first line names the columns) or False, got {has_header!r}")
    nulls = spellings(null_values)
    if dtypes is not None and not isinstance(dtypes, Mapping):
        raise TypeError(
            f"scan_csv: dtypes= maps column names to types, e.g. {{'price': 'float32', 'day': 'date'}}; got "
            f"{type(dtypes).__name__} {dtypes!r}"
        )
    if not isinstance(infer_rows, int) or infer_rows < 1:
        raise ValueError(
            f"scan_csv: infer_rows must be a positive int (the rows whose values give the types), got {infer_rows!r}"
        )
    if not isinstance(split_bytes, int) or split_bytes < 1:
        raise ValueError(f"scan_csv: split_bytes must be a positive int (bytes of file per split), got {split_bytes!r}")
    files = table_files(paths, ".csv", "scan_csv", "CSV")
    names = header(files[0], delimiter, has_header)
    for f in files[1:] if has_header else ():
        if (other := header(f, delimiter)) != names:
            raise ValueError(
                f"scan_csv: {f} has the columns {other}, {files[0]} has {names}; every file of a scan has the first one's header"
            )
    names = renamed(names, new_columns)
    given = dict(dtypes or {})
    for name in given:
        if name not in names:
            close = difflib.get_close_matches(str(name), names, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise KeyError(f"scan_csv: dtypes= names column {name!r}, which the files do not have; {hint}they have {names}")
    samples = _sample(files[0], len(names), delimiter, infer_rows, has_header, nulls)
    kinds = tuple(kind_of(n, given[n]) if n in given else infer(s) for n, s in zip(names, samples, strict=True))
    sizes = tuple(os.path.getsize(f) for f in files)
    ranges = tuple((i, a, b) for i, f in enumerate(files) for a, b in cuts(f, sizes[i], split_bytes))
    inferred = tuple(n not in given for n in names)
    return CsvScan(tuple(files), sizes, tuple(names), kinds, inferred, ranges, delimiter, infer_rows, has_header, nulls)


def _sample(path: str, count: int, delimiter: str, infer_rows: int, has_header: bool, nulls: tuple[str, ...]) -> list[list[str]]:
    """Each column's non-null fields (not empty, not one of ``nulls``) among the first ``infer_rows`` records after
    the header (if any)."""
    samples: list[list[str]] = [[] for _ in range(count)]
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = csv.reader(f, delimiter=delimiter, strict=True)
        try:
            if has_header:
                next(rows)
            for n, row in enumerate(rows):
                if n >= infer_rows:
                    break
                for column, value in zip(samples, row, strict=False):
                    if value and value not in nulls:
                        column.append(value)
        except (UnicodeDecodeError, csv.Error):
            pass  # a bad record: the workers' read of it names it
    return samples


QUOTE, NEWLINE = 34, 10


def cuts(path: str, size: int, split_bytes: int) -> list[tuple[int, int]]:
    """The byte ranges of a file of ``size`` bytes, each about ``split_bytes`` long and starting at a record: after
    a line break preceded by an even number of quotes (a quoted field's line break, or ``""`` inside it, keeps the
    count odd, then even).  Files up to ``split_bytes`` are one range; larger ones are scanned for quotes here (a
    count of bytes, no field parsed).

    Example:
        a file ``a\\n"x\\ny"\\nb\\n`` cut every 3 bytes gives ``[(0, 8), (8, 10)]``: the line break at byte 4 is
        inside quotes, the next one (byte 7) ends a record.
    """
    if size <= split_bytes:
        return [(0, size)]
    data = np.memmap(path, np.uint8, "r", shape=(size,))
    try:
        bounds, parity = [0], 0
        while bounds[-1] + split_bytes < size:
            start, target = bounds[-1], bounds[-1] + split_bytes
            parity = (parity + int(np.count_nonzero(data[start:target] == QUOTE))) % 2
            end = _record_start(data, target, parity)
            if end >= size:
                break
            parity = (parity + int(np.count_nonzero(data[target:end] == QUOTE))) % 2
            bounds.append(end)
    finally:
        del data
    return list(zip(bounds, [*bounds[1:], size], strict=True))


def _record_start(data: np.ndarray[Any, Any], at: int, parity: int) -> int:
    """The first byte after ``at`` that starts a record (``len(data)`` if none), ``parity`` the quotes before ``at``."""
    window = 1 << 16
    while True:
        piece = data[at : at + window]
        quotes = np.cumsum(piece == QUOTE) + parity
        lines = np.flatnonzero((piece == NEWLINE) & (quotes % 2 == 0))
        if lines.size:
            return at + int(lines[0]) + 1
        if at + window >= len(data):
            return len(data)
        window *= 4
