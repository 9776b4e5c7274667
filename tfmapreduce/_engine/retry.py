"""Re-execution on the survivors: a run that loses a task is repeated without it, within its deadline.

Every attempt is a whole run (one distributed execution over every shard), so
each row is counted exactly once whatever failed where.  A lost task is left
out of the cluster's later plans and never used as the master again (until
``cluster.mark_live()``); resident inputs move the shards it held to the
survivors and rebuild them from their lineage first.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import attrs

from .._base.errors import ShardLostError, WorkerTimeoutError, WorkerUnavailableError
from .._base.plan import Plan
from .._base.task import Task
from .._cluster.cluster import Cluster
from .._io.source import Source
from .._options import RunOptions

T = TypeVar("T")

log = logging.getLogger("tfmapreduce.run")


@attrs.frozen
class Recovery:
    """What re-execution did for one run."""

    attempts: int
    """Runs made: 1 when nothing was lost."""
    lost: tuple[Task, ...]
    """Tasks lost during this run, in the order they were found."""


def moved_shards(first: Plan, last: Plan) -> tuple[int, ...]:
    """The shards whose device changed between two plans of the same run."""
    return tuple(a.index for a, b in zip(first.shards, last.shards, strict=False) if a.device != b.device)


def can_retry(settings: RunOptions, cluster: Cluster) -> bool:
    """Whether a lost task could be retried around: retries asked for, and another task to run on."""
    return settings.retries > 0 and len(cluster.live_tasks) > 1


def with_retries(
    settings: RunOptions, srcs: Sequence[Source], cluster: Cluster, attempt: Callable[[RunOptions], T]
) -> tuple[T, Recovery]:
    """``attempt(settings)``, repeated on the surviving tasks after a task is lost, at most ``settings.retries`` times.

    Each attempt gets what is left of the run's deadline as its timeout.  An error
    that names no task (a job slower than its deadline, a failing op) is raised
    at once: repeating it elsewhere would not help.

    Raises:
        WorkerUnavailableError, WorkerTimeoutError: the last loss, when no retry is left (or no time).
        ShardLostError: an input cannot be read without the lost task.
    """
    end = time.monotonic() + settings.seconds()
    lost: list[Task] = []
    for number in itertools.count(1):
        left = end - time.monotonic()
        try:
            if left <= 0:
                raise WorkerTimeoutError(f"no time is left of the run's deadline after losing {', '.join(map(str, lost))}")
            current = settings if number == 1 else attrs.evolve(settings, timeout=left)  # the first has all its time
            return attempt(current), Recovery(number, tuple(lost))
        except ShardLostError as e:  # resident shards vanished with a restarted worker: rebuild them, run again
            if e.task is None or number > settings.retries:
                raise
            for src in srcs:
                src.survive(frozenset({e.task}))
            log.warning("shards %s on %s were lost; rebuilt them, repeating the run", list(e.shards), e.task)
        except (WorkerUnavailableError, WorkerTimeoutError) as e:
            if not recoverable(e, cluster, number - 1, settings):
                raise
            if end - time.monotonic() <= 0:  # no time is left for another attempt: the loss itself, named
                raise
            lost.append(leave_out(e, cluster, srcs, "repeating the run"))
    raise AssertionError("unreachable")  # itertools.count never ends


def recoverable(error: WorkerUnavailableError | WorkerTimeoutError, cluster: Cluster, retried: int, settings: RunOptions) -> bool:
    """Whether the work that lost ``error.task`` may run again without it: a retry left after ``retried``, the task
    live until now, and another task to run on."""
    task = error.task
    return task is not None and retried < settings.retries and task in cluster.live_tasks and len(cluster.live_tasks) > 1


def leave_out(error: WorkerUnavailableError | WorkerTimeoutError, cluster: Cluster, srcs: Sequence[Source], what: str) -> Task:
    """``error.task`` marked lost and left out of ``srcs``' later plans (its resident shards rebuilt on the survivors),
    logged with ``what`` is done next; the task."""
    task = error.task
    assert task is not None  # (recoverable)
    cluster.mark_lost(task)
    for src in srcs:
        src.survive(cluster.lost)
    log.warning("lost %s (%s); %s on %s", task, type(error).__name__, what, ", ".join(map(str, cluster.live_tasks)))
    return task
