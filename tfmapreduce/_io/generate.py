"""``tmr.generate``: resident data made on the workers by a function of each shard's row range (nothing shipped)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf
from typing_extensions import Unpack

from .._base.device import Device
from .._base.errors import InputError, MapFunctionError
from .._base.plan import Shard, make_plan
from .._options import PlaceOptions, RunOptions
from .resident import Sharded, build_sharded, check_cluster


def generate(
    fn: Callable[[int, int], Any],
    /,
    *,
    rows: int,
    **options: Unpack[PlaceOptions],
) -> Sharded:
    """Build each shard ON its worker: ``fn(start, stop)`` returns the rows ``start:stop`` as a tensor.

    The client ships nothing.  The data equals ``fn(0, rows)`` made in one
    process whenever each row depends only on its index (e.g. built from
    ``tf.range(start, stop)``).

    Args:
        fn: ``fn(start, stop)`` → the tensor of rows ``start:stop``, built on the shard's device.
        rows: how many rows in all.
        **options: ``cluster`` (required), ``sizes``, ``devices``, ``fallback``, ``timeout`` (see ``RunOptions``).

    Raises:
        MapFunctionError: ``fn`` raised, or returned a shard of the wrong length or a varying dtype.

    Examples:
        >>> data = tmr.generate(lambda a, b: tf.range(a, b, dtype=tf.float64), rows=10**6, cluster=cluster)
        >>> float(tmr.sum(data)) == sum(range(10**6))
        True
        >>> data.delete()
    """
    settings = RunOptions.placing("generate", dict(options))
    cluster = check_cluster(settings.cluster)
    if not callable(fn):
        raise TypeError(f"fn must be a callable fn(start, stop) -> tensor of rows start:stop, got {type(fn).__name__} {fn!r}")
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise InputError(f"rows must be an int ≥ 0, got {rows!r}")
    plan = make_plan(
        rows, settings.sizes, settings.devices, [Device.parse(d) for d in cluster.devices], fallback=settings.fallback
    )
    with tf.Graph().as_default():  # learn the dtype and row shape from a 1-row (or empty) trace
        probe = _call(fn, 0, min(rows, 1))
    dtype, inner = probe.dtype, tuple(probe.shape[1:])

    def built(shard: Shard) -> tf.Tensor:
        value = _call(fn, shard.start, shard.stop)
        if value.dtype != dtype or tuple(value.shape) != (shard.rows, *inner):
            raise MapFunctionError(
                f"fn({shard.start}, {shard.stop}) must return {shard.rows} rows of shape {inner} and dtype {dtype.name}, "
                f"got shape {tuple(value.shape)} and dtype {value.dtype.name}"
            )
        return value

    return build_sharded(cluster, plan, dtype.as_numpy_dtype, (rows, *inner), [built] * len(plan.shards), settings.timeout)


def _call(fn: Callable[[int, int], Any], start: int, stop: int) -> tf.Tensor:
    name = getattr(fn, "__qualname__", repr(fn))
    try:
        value = tf.convert_to_tensor(fn(start, stop))
    except Exception as e:
        raise MapFunctionError(f"fn {name}({start}, {stop}) raised {type(e).__name__}: {e}") from e
    if value.shape.rank is None or value.shape.rank == 0 or not value.shape.is_fully_defined():
        raise MapFunctionError(
            f"fn {name}({start}, {stop}) must return a tensor of static shape with the rows on axis 0, got shape {value.shape}"
        )
    return value
