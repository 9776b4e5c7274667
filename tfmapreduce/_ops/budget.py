"""Memory budgets: a reducer's rows checked against what its host can hold, in the graph, before any row travels.

A kind adds ``check_budget`` per reducer; a run that fails it raises ``tag (part r on device)`` with the rows, bytes and
budget, and the kind turns that into a ``ReducerMemoryError`` with :func:`over_budget`.
"""

from __future__ import annotations

import os
import re

import attrs
import tensorflow as tf

from .._base.device import Device
from .._base.errors import JobError

MEMORY_SHARE = 4
"""Without ``max_bytes``, a reducer may hold a quarter of the memory its host has available (``MemAvailable``)."""

_FOUND = r" \(part (\d+) on ([^)]*)\)\] \[(-?\d+)\] \[(-?\d+)\] \[(-?\d+)\]"


def budget_of(max_bytes: int | None) -> int:
    """``max_bytes``, else a ``MEMORY_SHARE`` of this host's available memory (what a plan made on the client assumes of
    its reducers' hosts)."""
    if max_bytes is not None:
        return max_bytes
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) // MEMORY_SHARE


def available_memory() -> tf.Tensor:
    """The bytes of memory available on the current device's host (``MemAvailable`` of ``/proc/meminfo``), int64."""
    text = tf.io.read_file("/proc/meminfo")
    kb = tf.strings.regex_replace(text, r"(?s)^.*MemAvailable:\s*([0-9]+) kB.*$", r"\1")
    return tf.strings.to_number(kb, tf.int64) * 1024


def within_budget(part: int, device: str, rows: tf.Tensor, size: tf.Tensor, limit: int | None, tag: str) -> tf.Operation:
    """An assertion that ``size`` bytes (of ``rows`` rows) fit part ``part``'s budget: ``limit``, or a ``MEMORY_SHARE``
    of the available memory of the host it runs on."""
    budget = tf.constant(limit, tf.int64) if limit is not None else available_memory() // MEMORY_SHARE
    message = tf.constant(f"{tag} (part {part} on {device})")
    return tf.raw_ops.Assert(condition=size <= budget, data=[message, rows, size, budget], summarize=3)


def check_budget(part: int, device: str, rows: list[tf.Tensor], size: list[tf.Tensor], limit: int | None, tag: str) -> tf.Tensor:
    """On ``device``'s task CPU: the ``rows`` and bytes (``size``) bound for part ``part`` summed and checked
    (:func:`within_budget`); 0 once it holds.  Each piece is sent sliced from that 0 (a data dependency no graph
    rewrite removes): nothing travels before the check."""
    with tf.device(f"{Device.parse(device).task}/device:CPU:0"), tf.name_scope(f"budget{part}"):
        total = tf.add_n(size)
        with tf.control_dependencies([within_budget(part, device, tf.add_n(rows), total, limit, tag)]):
            return tf.cast(total < 0, tf.int32)


@attrs.frozen
class Overrun:
    """A failed budget check: part ``part`` on ``device`` would hold ``size`` bytes (``rows`` rows) over ``budget``."""

    part: int
    device: str
    rows: int
    size: int
    budget: int
    limit: str
    """Where the budget came from, for the message: ``max_bytes=N`` or the host's memory."""


def over_budget(error: JobError, tag: str, max_bytes: int | None) -> Overrun | None:
    """The budget check named ``tag`` that failed the run of ``error`` (limited by ``max_bytes``), or None.

    Example:
        >>> over_budget(JobError("x [t (part 1 on /job:w/task:0)] [5] [40] [8]"), "t", 8).limit
        'max_bytes=8'
    """
    found = re.search(re.escape(tag) + _FOUND, f"{error}\n{error.details}")
    if found is None:
        return None
    part, device, rows, size, budget = found.groups()
    limit = f"max_bytes={max_bytes}" if max_bytes is not None else "a quarter of its host's available memory"
    return Overrun(int(part), device, int(rows), int(size), int(budget), limit)
