"""A table's schema: each column's name, logical type (how its values are stored on the host and in graphs) and
whether it holds nulls."""

from __future__ import annotations

import difflib

import attrs
import numpy as np

TIME_UNITS = ("s", "ms", "us", "ns")
"""The units a timestamp column may have (numpy's ``datetime64[unit]``)."""

_NUMBERS = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64")


@attrs.frozen
class ColumnType:
    """A column's logical type: ``name`` (``"int64"``, ``"string"``, ``"date"``, ``"timestamp[ms]"``, ...) and
    ``storage``, the numpy dtype of its values on the host and (as the matching TF dtype) in graphs.

    Numbers and bool are stored as themselves; strings as an ``object`` array of ``str`` (``tf.string``, UTF-8);
    dates as int32 days since 1970-01-01; timestamps as int64 counts of their ``unit`` since the epoch.

    Examples:
        >>> ColumnType.of(np.dtype("datetime64[D]"))
        ColumnType(name='date', storage=dtype('int32'))
    """

    name: str
    storage: np.dtype

    @classmethod
    def of(cls, dtype: np.dtype) -> ColumnType:
        """The type of a numpy column of ``dtype``; ``object`` and ``<U`` arrays are strings.

        Raises:
            TypeError: a dtype no column type stores (complex, structured, ``timedelta64``, ``datetime64`` of another unit).
        """
        if dtype.kind in "OU":
            return STRING
        if dtype.kind == "M":
            unit = np.datetime_data(dtype)[0]
            if unit == "D":
                return DATE
            if unit in TIME_UNITS:
                return timestamp(unit)
        elif dtype.name in _NUMBERS:
            return cls(dtype.name, dtype)
        raise TypeError(
            f"a column of dtype {dtype} cannot be stored: expected bool, a signed or unsigned int, float16/32/64, str, "
            f"datetime64[D] (a date) or datetime64[{'|'.join(TIME_UNITS)}] (a timestamp); convert it first, e.g. "
            "column.astype(np.float64)"
        )

    @property
    def unit(self) -> str | None:
        """A timestamp's unit (``"ms"``, ...); None for the other types."""
        return self.name[len("timestamp[") : -1] if self.name.startswith("timestamp[") else None

    @property
    def inner(self) -> ColumnType | None:
        """A list column's type of values (``list<date>``: the date type); None for the other types."""
        if not self.name.startswith("list<"):
            return None
        name = self.name[len("list<") : -1]
        if name == "string":
            return STRING
        if name == "date":
            return DATE
        return timestamp(name[len("timestamp[") : -1]) if name.startswith("timestamp[") else ColumnType(name, np.dtype(name))

    @property
    def host(self) -> np.dtype:
        """The numpy dtype of the column's values as the user sees them (``datetime64[D]`` for a date)."""
        if self.name == "date":
            return np.dtype("datetime64[D]")
        if self.unit is not None:
            return np.dtype(f"datetime64[{self.unit}]")
        return self.storage

    @property
    def is_numeric(self) -> bool:
        """Whether sums and means apply (numbers and bool; not strings, dates or timestamps)."""
        return self.name in _NUMBERS

    def __repr__(self) -> str:
        return f"ColumnType(name={self.name!r}, storage=dtype({str(self.storage)!r}))"


STRING = ColumnType("string", np.dtype(object))
DATE = ColumnType("date", np.dtype(np.int32))


def list_of(inner: ColumnType) -> ColumnType:
    """The type of a column whose every value is a list of ``inner`` values (``top_k``'s result), stored as an
    ``object`` array of 1-D numpy arrays of ``inner.storage``."""
    return ColumnType(f"list<{inner.name}>", np.dtype(object))


def timestamp(unit: str) -> ColumnType:
    """The timestamp type of ``unit`` (one of ``TIME_UNITS``), stored as int64."""
    return ColumnType(f"timestamp[{unit}]", np.dtype(np.int64))


@attrs.frozen
class Field:
    """One column of a schema: its name, type and whether it may hold nulls (it has a validity mask)."""

    name: str
    type: ColumnType
    nullable: bool = False

    def __str__(self) -> str:
        return f"{self.name}: {self.type.name}" + (" (nullable)" if self.nullable else "")


@attrs.frozen
class Schema:
    """The ordered fields of a table (a frozen value: equal schemas compare equal).

    Examples:
        >>> print(tmr.table({"city": np.array(["Oslo", "Rome"]), "n": np.array([1, 2])}).schema)
        city: string
        n: int64
    """

    fields: tuple[Field, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The column names, in order."""
        return tuple(f.name for f in self.fields)

    def __getitem__(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def __len__(self) -> int:
        return len(self.fields)

    def __str__(self) -> str:
        return "\n".join(str(f) for f in self.fields)


def check_name(name: object, names: tuple[str, ...], argument: str) -> str:
    """``name`` if it is one of the table's ``names``.

    Raises:
        KeyError: another name (the message says which are there, and the closest as "did you mean").
        TypeError: not a str.
    """
    if not isinstance(name, str):
        raise TypeError(f"{argument}: expected a column name (a str), got {type(name).__name__} {name!r}")
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise KeyError(f"{argument}: no column {name!r} in the table; {hint}its columns are {list(names)}")
    return name
