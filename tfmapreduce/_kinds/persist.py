"""File inputs read into resident data on the workers first, for the kinds that read their input more than once.

Example:
    >>> with persisted(np.arange(3), {"cluster": cluster}) as (x, options):
    ...     x.tolist()
    [0, 1, 2]
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .._io.files.files import Files

PLACING = ("sizes", "devices", "fallback")
"""The options that place the input: where it is read from files, they place the resident copy (see :func:`persisted`)."""


@contextlib.contextmanager
def persisted(x: Any, options: dict[str, Any]) -> Iterator[tuple[Any, dict[str, Any]]]:
    """``x`` (one input or a tuple) with its file sources read into resident data on the workers first, and the
    options for the run over it; the resident copies are freed after.  A sort or a select reads its input more than
    once in its run (to sample or count, then to move or select), which a stream of batches cannot give.

    Example:
        >>> with persisted(np.arange(3), {"cluster": cluster}) as (x, options):
        ...     x.tolist(), sorted(options)
        ([0, 1, 2], ['cluster'])
    """
    items = x if isinstance(x, tuple) else (x,)
    if not any(isinstance(item, Files) for item in items):
        yield x, options
        return
    place = {k: options[k] for k in (*PLACING, "timeout") if k in options}
    made: list[Any] = []
    try:
        for item in items:
            made.append(item.persist(cluster=options.get("cluster"), **place) if isinstance(item, Files) else item)
        rest = {k: v for k, v in options.items() if k not in PLACING}
        yield (tuple(made) if isinstance(x, tuple) else made[0]), rest
    finally:
        for copy, item in zip(made, items, strict=False):
            if copy is not item:
                copy.delete()
