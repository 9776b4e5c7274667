"""Deadlines: ``timeout=`` bounds one call, every step of it (planning, compiling, the run, naming a lost task,
freeing what a failed run stored); :func:`deadline` bounds a block of calls, nests (the earliest deadline wins) and
restores the previous one on exit; :func:`set_timeout` changes the default of a call with neither."""

from __future__ import annotations

import contextlib
import contextvars
import math
import time
from collections.abc import Iterator

import numpy as np

from .errors import WorkerTimeoutError

DEFAULT_TIMEOUT = 60.0
"""Seconds a run may take when neither ``timeout=``, :func:`deadline` nor :func:`set_timeout` says otherwise."""

_default_timeout = DEFAULT_TIMEOUT  # process-wide, like attrs' set_run_validators
_scope_end = contextvars.ContextVar[float | None]("tfmapreduce_deadline", default=None)


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
    seconds = _default_timeout if timeout is None else timeout
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


def set_timeout(seconds: float) -> None:
    """Set the deadline (in seconds) of every run that passes no ``timeout=``; the default is 60.

    Examples:
        >>> tmr.set_timeout(30)
        >>> tmr.get_timeout()
        30.0
        >>> tmr.set_timeout(60)
    """
    global _default_timeout
    _default_timeout = check_timeout(seconds, argument="seconds")


def get_timeout() -> float:
    """The deadline in seconds of a run that passes no ``timeout=`` (outside any [`deadline`][tfmapreduce.deadline] scope)."""
    return _default_timeout


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
