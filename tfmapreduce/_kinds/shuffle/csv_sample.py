"""What a CSV table's first records say before the run: a text column's bytes per string, a record's bytes on file.

A plan cannot read a CSV table's rows before the run, but it can read its first records cheaply on the client: the
first ``RECORDS`` records of the table's files (the header skipped, files in order until the sample is full, each
field as ``csv`` parses it: quotes removed).  The rules:

- a text column's bytes per string: the mean UTF-8 bytes of its fields over the sample, rounded up (beside
  ``STRING_BYTES``, as the budget checks count a string);
- a record's bytes on file: the mean of its fields' UTF-8 bytes, a delimiter between two and a newline, rounded
  down (so the rows estimated from the files' bytes are not fewer for it).

They are estimates, not bounds: records far longer or shorter than the first ones are not seen (the run's budget
checks count the real bytes).  A file the client cannot open or decode is passed over; with no record read, the plan
keeps its defaults (``UNKNOWN_STRING``, 16 bytes a string; a row's bytes in memory for a record's).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence

import attrs

from ..._io.files.csv import Csv
from ..._io.files.source import FileSource

RECORDS = 10_000
"""The records sampled."""


@attrs.frozen
class CsvSample:
    """The first records' mean bytes: of a field of the columns asked (rounded up), and of a whole record on file.

    Example:
        >>> CsvSample.of([["ab", "1"], ["ñaña", "2"]], [0])  # keys of 2 and 6 bytes; records of 5 and 9
        CsvSample(field=4, record=7)
    """

    field: int
    record: int

    @classmethod
    def of(cls, records: Sequence[Sequence[str]], columns: Sequence[int]) -> CsvSample:
        """The sample of ``records`` (each a list of fields), its text fields ``columns``."""
        fields = [len(r[i].encode()) if i < len(r) else 0 for r in records for i in columns]
        lines = [sum(len(f.encode()) for f in r) + max(0, len(r) - 1) + 1 for r in records]
        return cls(math.ceil(sum(fields) / max(1, len(fields))), max(1, sum(lines) // max(1, len(lines))))


def sample(src: FileSource, columns: Sequence[int]) -> CsvSample | None:
    """The :class:`CsvSample` of ``src``'s first :data:`RECORDS` records, its text fields ``columns`` (indices in a
    line); None where ``src`` is not CSV or no record could be read.

    Example (a header, then keys of 2 and 6 bytes: ``"ñ"`` is 2 bytes):
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
        >>> _ = path.write_text("key,n\\nab,1\\nñaña,2\\n", encoding="utf-8")
        >>> sample(tmr.read_csv(str(path)).as_source(), [0])
        CsvSample(field=4, record=7)
    """
    if not isinstance(src.reader, Csv):
        return None
    records: list[list[str]] = []
    for entry in src.entries:
        try:
            with open(entry.path, encoding="utf-8-sig", newline="") as f:
                rows = csv.reader(f, delimiter=src.reader.delimiter)
                if src.reader.header:
                    next(rows, None)
                records += (row for _, row in zip(range(RECORDS - len(records)), rows, strict=False))
        except (OSError, UnicodeDecodeError, csv.Error):
            continue  # a file the client cannot read: the others' records, else the defaults
        if len(records) >= RECORDS:
            break
    return CsvSample.of(records, columns) if records else None
