"""Run options: the one home of the keywords every job and recipe takes.

Every public call that runs on a cluster takes the same keywords (``cluster=``,
``sizes=``, ``devices=``, ``fallback=``, ``timeout=``); they are typed once here
(:class:`Options`, for ``**options: Unpack[Options]``) and validated once into a
frozen :class:`RunOptions`.  A new option is one field here plus its docs.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from typing import Any, TypedDict

import attrs
import numpy as np

from ._base.checks import flag
from ._base.deadline import check_timeout, effective_timeout
from ._base.partition import SizesLike
from ._base.place import FALLBACKS
from ._cluster.cluster import Cluster

PARTITIONERS = ("hash", "range")
"""The ``partitioner=`` of a keyed job: keys to reducers by a stable hash, or by contiguous ranges of a sample."""


class PlanOptions(TypedDict, total=False):
    """The keywords that decide where a job's shards run (see :class:`RunOptions`)."""

    cluster: Cluster | None
    sizes: SizesLike
    devices: Sequence[str] | None
    fallback: str | None


class PlaceOptions(PlanOptions, total=False):
    """The keywords of a call that places data on a cluster without a job (``scatter``, ``generate``,
    ``load_shards``, ``Files.persist``): where (:class:`PlanOptions`), and how long."""

    timeout: float | None


class Options(PlaceOptions, total=False):
    """The keywords every run takes: where and how long (:class:`PlaceOptions`), and how keyed or streamed work runs."""

    reducers: int | Sequence[str] | None
    batch_rows: int | None
    retries: int
    partitioner: str
    transfer: str | None
    trace: str | os.PathLike[str] | None
    speculate: bool
    progress: bool | None


def unknown_keywords(what: str, unknown: Sequence[str], options: dict[str, Any], accepted: Sequence[str]) -> str:
    """``what`` and each unknown keyword as given, with the nearest accepted keyword where one is near (difflib).

    Example:
        >>> unknown_keywords("unknown run option", ["sise"], {"sise": 3}, ["sizes", "devices"])
        'unknown run option sise=3 (did you mean sizes?)'
    """
    parts = []
    for name in unknown:
        near = difflib.get_close_matches(name, accepted, n=1, cutoff=0.6)
        parts.append(f"{name}={options[name]!r}" + (f" (did you mean {near[0]}?)" if near else ""))
    return f"{what} {', '.join(parts)}"


@attrs.frozen
class RunOptions:
    """How and where a run goes, validated once: the value behind the keywords of every job and recipe.

    Examples:
        >>> RunOptions.of(sizes=[30, 70], timeout=5).timeout
        5.0
        >>> RunOptions.of(partitioner="range").partitioner  # keyed jobs: reducers hold sorted key ranges
        'range'
        >>> RunOptions.of(sise=3)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: unknown run option sise=3 (did you mean sizes?); the options are cluster, sizes, devices, ..., progress
    """

    cluster: Cluster | None = None
    """Where to run; None for resident data, which knows its cluster."""
    sizes: SizesLike = None
    """None (even over the devices), a shard count, row counts such as ``[30, 70]``, ``tmr.weights(1, 3)``, or ``"auto"``
    (one shard per device, sized to the devices' speeds measured in earlier runs of the job)."""
    devices: Sequence[str] | None = None
    """Device strings (``"/job:local/task:1"``, ``"/job:local/task:0/gpu:0"`` or full names); shard i goes to ``devices[i % n]``."""
    fallback: str | None = None
    """``"cpu"`` runs a shard whose GPU is absent on its task's CPU (shown in the plan); None makes that an error."""
    timeout: float | None = None
    """Seconds one run may take; None: the enclosing [`deadline`][tfmapreduce.deadline] or the default ([`get_timeout`][tfmapreduce.get_timeout])."""
    reducers: int | Sequence[str] | None = None
    """Keyed jobs: the number of reducer devices (None: one per task of the plan) or a list of device strings."""
    batch_rows: int | None = None
    """Rows of a shard mapped at once when it is folded batch by batch (keyed jobs, file sources); None: sized to a few MB."""
    retries: int = 2
    """Times a run is repeated on the surviving tasks after a task is lost (dead, or hung past the deadline); 0 raises at once."""
    partitioner: str = "hash"
    """Keyed jobs: how keys go to reducers.  ``"hash"``: by a stable hash of the key (reducers hold keys in no order).
    ``"range"``: by contiguous key ranges chosen from a sample of the keys in the same run (TeraSort's way), so every
    key of reducer r is below every key of reducer r + 1 and each reducer's keys are sorted: a resident result is
    globally ordered, and fetching it concatenates without sorting.  Whole-input jobs, ``tmr.map``/``filter``, writes
    and joins take only ``"hash"`` (``tmr.sort`` is range-partitioned whatever it is given)."""
    transfer: str | None = None
    """How host data travels: None/``"auto"`` (shared memory to tasks on the client's host, else gRPC), ``"shm"``, ``"feed"``."""
    trace: str | None = None
    """A file to write each run's trace to: TensorFlow's step stats of the distributed run as Chrome/Perfetto trace JSON,
    one track per task and device (a call of several runs leaves its last run's).  Not with ``speculate=True``."""
    speculate: bool = False
    """Back up stragglers: each shard runs as its own fetch, and a task that runs out of work re-runs an unfinished shard
    of another task; the first copy to finish counts, exactly once (MapReduce's backup tasks; see ``_speculate``).  Only
    host data (shipped arrays) is backed up; a keyed job refuses it."""
    progress: bool | None = None
    """A progress bar of the run on stderr (tqdm): rows mapped so far, per task, then the phase after the map.  None shows
    it when stderr is a terminal and the run lasts over 2 s; True always, at once; False never (and counts nothing)."""
    return_stats: bool = False
    """Also return a ``RunStats``."""

    @classmethod
    def of(cls, **options: Any) -> RunOptions:
        """Validate keyword options (as a user typed them) into a RunOptions.

        Raises:
            TypeError: an unknown option, or an option of the wrong type.
            ValueError: an option out of range (``fallback``, ``timeout``).
        """
        # Every run validates its keywords: the same keywords again (each value of the same type) give the same
        # value, remembered.  Unhashable ones (a list of sizes) are validated each time.
        key = tuple((name, type(value), value) for name, value in options.items())
        try:
            return _validated[key]
        except KeyError:
            pass
        except TypeError:
            return cls._validate(options)
        settings = cls._validate(options)
        if len(_validated) >= 256:
            _validated.clear()
        _validated[key] = settings
        return settings

    @classmethod
    def checked(cls, call: str, own: Sequence[str], options: dict[str, Any]) -> RunOptions:
        """[`of`][tfmapreduce.RunOptions.of] for the keywords of ``call`` beyond its own ``own``: an unknown one is a TypeError that suggests the
        nearest of every keyword ``call`` accepts (its own and the run options) and lists them all.

        Examples:
            >>> RunOptions.checked("kmeans", ["iters", "init"], {"iter": 5})  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            TypeError: kmeans() got an unknown keyword iter=5 (did you mean iters?); it accepts iters, init, cluster, ..., progress
        """
        names = [f.name for f in attrs.fields(cls) if f.name != "return_stats"]
        unknown = [name for name in options if name not in (*names, "return_stats")]
        if unknown:
            accepted = [*own, *names]
            raise TypeError(
                unknown_keywords(f"{call}() got an unknown keyword", unknown, options, accepted)
                + f"; it accepts {', '.join(accepted)}"
            )
        return cls.of(**options)

    @classmethod
    def placing(cls, call: str, options: dict[str, Any], *, without: tuple[str, ...] = ()) -> RunOptions:
        """Validate the keywords of ``call`` (a call that places data, named in messages): only ``PlaceOptions``'
        keywords apply, less ``without``; ``cluster=`` is required.

        Examples:
            >>> RunOptions.placing("scatter", {"cluster": None, "reducers": 2})
            Traceback (most recent call last):
            ...
            TypeError: scatter() takes cluster, sizes, devices, fallback, timeout; reducers=2 does not apply to it (it places data, it runs no job)
        """
        takes = [name for name in PlaceOptions.__annotations__ if name not in without]
        extra = [name for name in options if name not in takes]
        if extra:
            given = ", ".join(f"{name}={options[name]!r}" for name in extra)
            raise TypeError(
                f"{call}() takes {', '.join(takes)}; {given} {'does' if len(extra) == 1 else 'do'} not apply to it "
                "(it places data, it runs no job)"
            )
        settings = cls.of(**options)
        if settings.cluster is None:
            raise TypeError(f"{call}() needs cluster=: pass a Cluster, e.g. cluster=tmr.LocalCluster(2)")
        return settings

    @classmethod
    def _validate(cls, options: dict[str, Any]) -> RunOptions:
        names = [f.name for f in attrs.fields(cls) if f.name != "return_stats"]
        unknown = sorted(set(options) - {*names, "return_stats"})
        if unknown:
            raise TypeError(
                unknown_keywords("unknown run option", unknown, options, names) + f"; the options are {', '.join(names)}"
            )
        cluster = options.get("cluster")
        if cluster is not None and not isinstance(cluster, Cluster):
            raise TypeError(
                f"cluster must be a tfmapreduce Cluster (e.g. tmr.LocalCluster(2)), got {type(cluster).__name__} {cluster!r}"
            )
        devices = options.get("devices")
        if devices is not None and (isinstance(devices, str) or not isinstance(devices, Sequence)):
            raise TypeError(
                f"devices must be a list of device strings such as ['/job:local/task:0'], got {type(devices).__name__} {devices!r}"
            )
        fallback = options.get("fallback")
        if fallback not in FALLBACKS:
            raise ValueError(f"fallback must be None or 'cpu', got {fallback!r}")
        timeout = options.get("timeout")
        reducers = options.get("reducers")
        if reducers is not None and (isinstance(reducers, (bool, str)) or not isinstance(reducers, (int, np.integer, Sequence))):
            raise TypeError(
                f"reducers must be None, a number of reducer devices, or a list of device strings such as ['/job:local/task:0'], "
                f"got {type(reducers).__name__} {reducers!r}"
            )
        batch_rows = options.get("batch_rows")
        if batch_rows is not None and (
            isinstance(batch_rows, (bool, np.bool_)) or not isinstance(batch_rows, (int, np.integer)) or batch_rows < 1
        ):
            raise ValueError(
                f"batch_rows must be an int ≥ 1 (rows of a shard mapped at once) or None for the default, got {batch_rows!r}"
            )
        retries = options.get("retries", 2)
        if isinstance(retries, (bool, np.bool_)) or not isinstance(retries, (int, np.integer)) or retries < 0:
            raise ValueError(f"retries must be an int ≥ 0 (0: raise at once when a task is lost), got {retries!r}")
        partitioner = options.get("partitioner", "hash")
        if partitioner not in PARTITIONERS:
            raise ValueError(
                f"partitioner must be 'hash' (keys to reducers by a stable hash) or 'range' (contiguous key ranges, a "
                f"globally ordered result), got {partitioner!r}"
            )
        transfer = options.get("transfer")
        if transfer not in (None, "auto", "shm", "feed"):
            raise ValueError(
                f"transfer must be 'auto' (shared memory on the client's host, else gRPC), 'shm' or 'feed', got {transfer!r}"
            )
        speculate = options.get("speculate", False)
        if not isinstance(speculate, (bool, np.bool_)):
            raise TypeError(f"speculate must be True or False, got {type(speculate).__name__} {speculate!r}")
        trace = options.get("trace")
        if trace is not None and not isinstance(trace, (str, os.PathLike)):
            raise TypeError(
                f"trace must be None or a file path to write the run's trace JSON to, got {type(trace).__name__} {trace!r}"
            )
        if trace is not None and speculate:
            raise ValueError("trace= records one distributed run; speculate=True makes a run per shard: pass one of them")
        progress = options.get("progress")
        if progress is not None and not isinstance(progress, (bool, np.bool_)):
            raise TypeError(
                "progress must be None (a bar on stderr when it is a terminal and the run lasts over 2 s), True (a bar "
                f"always) or False (none); got {type(progress).__name__} {progress!r}"
            )
        return cls(
            cluster=cluster,
            sizes=options.get("sizes"),
            devices=devices,
            fallback=fallback,
            timeout=None if timeout is None else check_timeout(timeout),
            reducers=int(reducers) if isinstance(reducers, np.integer) else reducers,
            batch_rows=None if batch_rows is None else int(batch_rows),
            retries=int(retries),
            partitioner=str(partitioner),
            transfer=transfer,
            trace=None if trace is None else os.fspath(trace),
            speculate=bool(speculate),
            progress=None if progress is None else bool(progress),
            return_stats=flag(options.get("return_stats", False), "return_stats", "also return the run's RunStats"),
        )

    def seconds(self) -> float:
        """The deadline of a run starting now: ``timeout`` (or the default), cut short by an enclosing [`deadline`][tfmapreduce.deadline].

        Raises:
            WorkerTimeoutError: the enclosing [`deadline`][tfmapreduce.deadline] has already passed.
        """
        return effective_timeout(self.timeout)


_validated: dict[tuple[Any, ...], RunOptions] = {}
