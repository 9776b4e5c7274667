"""The plumbing every recipe shares: its MapReduce, its options, its stats, argument checks and multi-round data.

A recipe is a few lines: check its own arguments, pick (or build once) its
MapReduce with :func:`recipe`, run it with :func:`run`, and finish the numbers
on the client.  Multi-round recipes hold host data resident for the call with
:func:`held_resident` and report progress with :func:`progress_bar` (tqdm).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, ParamSpec, TypeVar

import attrs
import numpy as np
import tensorflow as tf

from .._base.checks import flag
from .._base.errors import InputError, TfMapReduceError
from .._engine.planner import plan_of, resolve_cluster
from .._engine.stats import RunStats, stats
from .._io.resident import Sharded, scatter
from .._io.source import sources
from .._kinds.mapreduce import MapReduce
from .._ops.combine import Combiner
from .._options import RunOptions

P = ParamSpec("P")
R = TypeVar("R")

_jobs: dict[Hashable, MapReduce[Any]] = {}


def recipe(
    key: tuple[Hashable, ...],
    make: Callable[[], tuple[Callable[..., Any], Combiner]],
    *,
    by_key: bool = False,
    max_bytes: int | None = None,
) -> MapReduce[Any]:
    """The recipe's MapReduce for ``key`` (its name first) and ``max_bytes`` (a keyed combine's budget, as
    ``MapReduce``'s), built once so repeated calls reuse its compiled graphs."""
    if (key, max_bytes) not in _jobs:
        map_fn, combiner = make()
        _jobs[key, max_bytes] = MapReduce(map_fn, combiner, name=str(key[0]), by_key=by_key, max_bytes=max_bytes)
    return _jobs[key, max_bytes]


def run(mapreduce: MapReduce[Any], x: Any, settings: RunOptions, broadcast: Sequence[Any] = ()) -> Any:
    """Run a recipe's MapReduce: its result (the stats go to any open ``tmr.stats()`` block)."""
    return mapreduce.execute(x, attrs.evolve(settings, return_stats=False), broadcast=broadcast)


def run_with_stats(
    mapreduce: MapReduce[Any], x: Any, settings: RunOptions, broadcast: Sequence[Any] = ()
) -> tuple[Any, RunStats]:
    """:func:`run`, and its stats (what a multi-round recipe records of each round)."""
    with stats() as collected:
        value = run(mapreduce, x, settings, broadcast)
    return value, collected.last


def finish(value: Any, dtype: Any) -> np.generic | np.ndarray[Any, Any]:
    """``value`` as ``dtype`` (a numpy scalar for 0-d)."""
    array = np.asarray(value).astype(dtype)
    return array[()] if array.ndim == 0 else array


def returns_stats(fn: Callable[P, R]) -> Callable[P, R]:
    """A recipe that also takes ``return_stats=True`` and then returns ``(result, stats of its last run)``.

    ``return_stats=`` is the older spelling of ``with tmr.stats() as s:`` (typed code uses the block);
    the recipe itself never sees it.
    """

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        if not flag(kwargs.pop("return_stats", False), "return_stats", "also return the stats of its last run"):
            return fn(*args, **kwargs)
        with stats() as collected:
            result = fn(*args, **kwargs)
        return (result, collected.last)  # type: ignore[return-value]  # the older, untyped spelling

    return call


def check_axis(axis: object, ndim: int) -> int | None:
    """``axis`` of ``ndim``-d data as None (every element) or 0 (down the rows), numpy's way: ``-ndim`` is 0 too.

    For 1-d data ``axis=-1`` is the rows' axis, so it means 0; for 2-d data it is the columns'
    axis (one result per row), which a distributed reduction over row shards does not compute.

    Example:
        >>> check_axis(-1, 1), check_axis(-2, 2), check_axis(None, 2)
        (0, 0, None)
    """
    if axis is None:
        return None
    ndim = max(ndim, 1)
    if isinstance(axis, (int, np.integer)) and not isinstance(axis, (bool, np.bool_)):
        if not -ndim <= int(axis) < ndim:
            raise ValueError(f"axis {int(axis)} is out of bounds for {ndim}-d data; pass axis=0 (or {-ndim}) or None")
        if int(axis) % ndim == 0:
            return 0
        raise ValueError(
            f"axis={int(axis)} is axis {int(axis) % ndim} of {ndim}-d data (one result per row), which tfmapreduce does not "
            f"compute: the rows are spread over the shards; pass axis=0 (or {-ndim}: one result per column) or None (every element)"
        )
    raise ValueError(
        f"axis must be None (every element) or an int: 0 or {-ndim} (down the rows, one result per column); got {axis!r}"
    )


def keep_dims(value: Any, ndim: int, axis: int | None, keepdims: object) -> Any:
    """``value`` with the reduced axes kept as length 1 when ``keepdims`` (numpy's ``keepdims=True``).

    Example:
        >>> keep_dims(np.float64(2.0), 2, None, True), keep_dims(np.array([1.0, 2.0]), 2, 0, True)
        (array([[2.]]), array([[1., 2.]]))
    """
    if not isinstance(keepdims, (bool, np.bool_)):
        raise TypeError(f"keepdims must be True or False, got {type(keepdims).__name__} {keepdims!r}")
    if not keepdims:
        return value
    value = np.asarray(value)
    return value.reshape((1,) * max(ndim, 1)) if axis is None else np.expand_dims(value, 0)


def info(x: Any, name: str) -> tuple[np.dtype[Any], tuple[int, ...], int]:
    """The dtype, full shape and rows of the (first) input, after canonicalization."""
    src = sources(x, argument=name)[0]
    return src.dtype, src.shape, src.rows


def require_rows(rows: int, what: str) -> None:
    """Raise InputError when a statistic of 0 rows is asked for."""
    if rows == 0:
        raise InputError(f"{what} of an input with 0 rows is undefined; pass at least one row")


def check_int(value: object, name: str, minimum: int) -> int:
    """``value`` as an int ≥ ``minimum`` (numpy integers accepted)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an int ≥ {minimum}, got {value!r}")
    return int(value)


def check_float(value: object, name: str, *, positive: bool = False) -> float:
    """``value`` as a finite float ≥ 0 (> 0 when ``positive``)."""
    ok = (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, (bool, np.bool_))
        and math.isfinite(value)
    )
    if not ok or value < 0 or (positive and value == 0):  # type: ignore[operator]
        raise ValueError(f"{name} must be a finite number {'> 0' if positive else '≥ 0'}, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def check_callback(callback: object) -> None:
    """Raise TypeError unless ``callback`` is None or callable."""
    if callback is not None and not callable(callback):
        raise TypeError(
            f"callback must be a callable taking one step record, or None; got {type(callback).__name__} {callback!r}"
        )


def feature_count(shape: tuple[int, ...], name: str) -> int:
    """Features per row of a 1-d (one feature) or 2-d input."""
    if len(shape) == 1:
        return 1
    if len(shape) != 2:
        raise InputError(f"{name} must be 1-d (one feature) or 2-d (rows × features), got shape {shape}")
    return shape[1]


def as_matrix(x: tf.Tensor) -> tf.Tensor:
    """A shard as a float64 (rows, features) matrix; a 1-d shard is one feature."""
    x = tf.cast(x, tf.float64)
    return tf.reshape(x, [-1, 1]) if x.shape.rank == 1 else x


_MINMAX = Combiner(
    partial=lambda v, n: v,
    merge=lambda a, b: (tf.minimum(a[0], b[0]), tf.maximum(a[1], b[1])),
    name="minmax",
)


def _minmax_map(t: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return tf.reduce_min(t), tf.reduce_max(t)


def value_range(x: Any, settings: RunOptions) -> tuple[Any, Any]:
    """(min, max) over every element of ``x`` in one run, in ``x``'s dtype."""
    mapreduce = recipe(("minmax",), lambda: (_minmax_map, _MINMAX))
    lo, hi = run(mapreduce, x, settings)
    return lo, hi


def progress_bar(label: str, total: int, progress: bool | None) -> Any:
    """A ``tqdm.auto`` bar (a widget in Jupyter) for a multi-round recipe, on stderr (its runs then draw none).

    ``progress=None`` (the run option) shows it only when stderr is a terminal (or in Jupyter), ``True``
    always, ``False`` never.  Each round calls ``bar.set_postfix_str(text, refresh=False)``
    and ``bar.update()``; the recipe closes it.
    """
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=label, unit="round", disable=None if progress is None else not progress, leave=True)


def _free(made: Sequence[Sharded], timeout: float | None, *, quiet: bool) -> None:
    for data in made:
        try:
            data.delete(timeout=timeout)
        except TfMapReduceError:
            if not quiet:
                raise


@contextlib.contextmanager
def held_resident(data: Any, rounds: int, settings: RunOptions) -> Iterator[tuple[Any, RunOptions]]:
    """The data of a multi-round recipe as resident shards, and the options to run over them.

    Resident inputs are used as they are.  Host inputs are scattered once (with
    ``sizes``/``devices``, or the plan of the resident inputs they are
    co-partitioned with) and deleted when the recipe returns, so each round
    after the first ships nothing.  A single round ships directly.
    """
    srcs = sources(data)
    items = data if isinstance(data, tuple) else (data,)
    resident = [item for item in items if isinstance(item, Sharded)]
    if rounds <= 1 or len(resident) == len(items):
        yield data, settings
        return
    cluster = resolve_cluster(settings.cluster, srcs)  # a resident input's own; ClusterError for another
    if resident:  # the host inputs follow the resident ones' plan (checked as for any run)
        shards = plan_of(srcs, cluster, settings).shards
        place: dict[str, Any] = {"sizes": [s.rows for s in shards], "devices": [s.device for s in shards], "fallback": None}
    else:
        place = {"sizes": settings.sizes, "devices": settings.devices, "fallback": settings.fallback}
    made: list[Sharded] = []
    try:
        held = []
        for item in items:
            if isinstance(item, Sharded):
                held.append(item)
                continue
            made.append(scatter(item, cluster=cluster, timeout=settings.timeout, **place))
            held.append(made[-1])
            if not resident:  # the others follow the first one's plan
                first = made[0].plan.shards
                place = {"sizes": [s.rows for s in first], "devices": [s.device for s in first], "fallback": None}
        yield (
            (tuple(held) if isinstance(data, tuple) else held[0]),
            attrs.evolve(settings, cluster=cluster, sizes=None, devices=None),
        )
    except BaseException:
        _free(made, settings.timeout, quiet=True)
        raise
    _free(made, settings.timeout, quiet=False)
