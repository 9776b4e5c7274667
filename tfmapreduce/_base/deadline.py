"""Deadlines: ``timeout=`` bounds one call, every step of it (planning, compiling, the run, naming a lost task,
freeing what a failed run stored); :func:`deadline` bounds a block of calls, nests (the earliest deadline wins) and
restores the previous one on exit; :func:`set_timeout` changes the default of a call with neither.  The built-in
default grows with a run's input (:func:`default_timeout`): a run over many rows is not stopped for being large."""

from __future__ import annotations

import contextlib
import contextvars
import math
import time
from collections.abc import Iterator

import numpy as np

from .errors import WorkerTimeoutError

DEFAULT_TIMEOUT = 60.0
"""Seconds a run may take when neither ``timeout=``, :func:`deadline` nor :func:`set_timeout` says otherwise (at least:
see :data:`ROWS_PER_SECOND`)."""

ROWS_PER_SECOND = 25_000
"""The rows a second the built-in default allows a run, where that exceeds :data:`DEFAULT_TIMEOUT` (above 1.5 million
rows): 2e7 rows get 800 s.  Measured on 2 cores shared with a CI run: a two-string-key table group-by (the tables
benchmark's) took 32.4 s for 2e6 rows from call to result (its first call; 18.7 s the second), about 16 µs a row,
where a flat 60 s stopped 2e7 rows; the rule allows 40 µs a row, 2.5 times that."""

LONGEST_DEFAULT = 900.0
"""The built-in default never exceeds this (a run over text counts bytes, and a stopped task must still end the run
in minutes, not hours): a longer run passes ``timeout=``."""

_default_timeout: float | None = None  # process-wide, like attrs' set_run_validators; None: the built-in rule
_scope_end = contextvars.ContextVar[float | None]("tfmapreduce_deadline", default=None)
_run_rows = contextvars.ContextVar[int]("tfmapreduce_run_rows", default=0)


def default_timeout(rows: int = 0) -> float:
    """Seconds a run over ``rows`` rows may take when it passes no ``timeout=``: what :func:`set_timeout` set, else
    ``rows / ROWS_PER_SECOND`` between :data:`DEFAULT_TIMEOUT` and :data:`LONGEST_DEFAULT` (an input of files counts
    its units: rows, or bytes of text).

    Example:
        >>> default_timeout(1000), default_timeout(20_000_000), default_timeout(10**9)
        (60.0, 800.0, 900.0)
    """
    if _default_timeout is not None:
        return _default_timeout
    return min(max(DEFAULT_TIMEOUT, rows / ROWS_PER_SECOND), LONGEST_DEFAULT)


@contextlib.contextmanager
def sized(rows: int) -> Iterator[None]:
    """Inside the block, a step that passes no ``timeout=`` gets the default of a run over ``rows`` rows
    (:func:`default_timeout`).

    Example:
        >>> with sized(20_000_000):
        ...     time_left(None)
        800.0
    """
    token = _run_rows.set(rows)
    try:
        yield
    finally:
        _run_rows.reset(token)


def effective_timeout(timeout: float | None) -> float:
    """Seconds a call (or a step of one) starting now may take: ``timeout`` (or the default), cut short by an
    enclosing :func:`deadline` or :func:`bounded` block."""
    seconds = time_left(timeout)
    if seconds <= 0:
        raise WorkerTimeoutError(
            "the deadline (the call's timeout=, or its tmr.deadline() scope) expired before this step started; "
            "give the call or the block more time"
        )
    return seconds


def time_left(timeout: float | None) -> float:
    """As :func:`effective_timeout`, but 0 or less once the enclosing deadline has passed (for cleanup that decides
    for itself how long it may still take)."""
    seconds = default_timeout(_run_rows.get()) if timeout is None else timeout
    end = _scope_end.get()
    return seconds if end is None else min(seconds, end - time.monotonic())


def check_timeout(timeout: object, *, argument: str = "timeout") -> float:
    """``timeout`` as a positive, finite number of seconds (numpy scalars accepted).

    Example:
        >>> check_timeout(np.float32(2.5))
        2.5
        >>> check_timeout(0)
        Traceback (most recent call last):
        ...
        ValueError: timeout must be a positive, finite number of seconds (at most a year), got 0
    """
    if isinstance(timeout, (bool, np.bool_)) or not isinstance(timeout, (int, float, np.integer, np.floating)):
        raise TypeError(f"{argument} must be a number of seconds, got {type(timeout).__name__} {timeout!r}")
    value = float(timeout)
    if not (value > 0 and math.isfinite(value) and value <= 365 * 86400):
        raise ValueError(f"{argument} must be a positive, finite number of seconds (at most a year), got {timeout!r}")
    return value


def set_timeout(seconds: float | None) -> None:
    """Set the deadline (in seconds) of every run that passes no ``timeout=``, whatever its size; ``None`` restores the
    built-in default: 60 s, or a second per 25,000 rows where that is more, up to 900 s.

    Examples:
        >>> tmr.set_timeout(30)
        >>> tmr.get_timeout()
        30.0
        >>> tmr.set_timeout(None)
        >>> tmr.get_timeout()
        60.0
    """
    global _default_timeout
    _default_timeout = None if seconds is None else check_timeout(seconds, argument="seconds")


def get_timeout() -> float:
    """The deadline in seconds of a run that passes no ``timeout=`` (outside any [`deadline`][tfmapreduce.deadline] scope;
    a run over more than 1.5 million rows gets more unless [`set_timeout`][tfmapreduce.set_timeout] was called)."""
    return default_timeout()


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Bound every run inside the block by one deadline, ``seconds`` from now.

    Each run inside gets ``min(its timeout, time left in the block)``; scopes
    nest (the earliest deadline wins) and the previous one is restored on exit.
    A call that starts after the deadline passed raises ``WorkerTimeoutError``.

    Examples:
        >>> with tmr.deadline(30):  # every run in the block ends within 30 s from here
        ...     with tmr.deadline(60):  # the outer 30 s still bound this block
        ...         total = tmr.sum(np.arange(10), cluster=cluster)
        >>> int(total)
        45
    """
    with bounded(check_timeout(seconds, argument="seconds")):
        yield


@contextlib.contextmanager
def bounded(seconds: float) -> Iterator[None]:
    """:func:`deadline` for a validated number of seconds: how one call bounds all of its steps by its ``timeout=``.

    Example:
        >>> with bounded(5.0):
        ...     effective_timeout(60) <= 5
        True
    """
    end = time.monotonic() + seconds
    outer = _scope_end.get()
    token = _scope_end.set(end if outer is None else min(outer, end))
    try:
        yield
    finally:
        _scope_end.reset(token)
