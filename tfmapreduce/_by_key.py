"""By-key recipes: count, sum, mean, min, max and variance per key, and word count — each one keyed run.

Every recipe takes the data positionally (``keys``, then ``values``, each an array or resident
``Sharded`` data, co-partitioned on axis 0) and the keywords of ``MapReduce.run``:
``cluster=``, ``sizes=``, ``devices=``, ``fallback=``, ``timeout=``, ``return_stats=``, and the
keyed ones ``reducers=``, ``batch_rows=``, ``resident=``.  It returns a :class:`KeyedResult`
(or a ``KeyedSharded`` with ``resident=True``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from ._cluster import Cluster
from ._combine import COUNT, MAX, MEAN, MIN, MOMENTS, SUM, Combiner, SegmentForm
from ._errors import InputError
from ._job import MapReduce
from ._partition import SizesLike

_jobs: dict[Any, MapReduce[Any]] = {}


def _job(key: Any, make: Callable[[], tuple[Callable[..., Any], Combiner]]) -> MapReduce[Any]:
    """The recipe's keyed job for ``key``, built once so repeated calls reuse its compiled graphs."""
    if key not in _jobs:
        map_fn, combiner = make()
        _jobs[key] = MapReduce(map_fn, combiner, name=str(key[0]), by_key=True)
    return _jobs[key]


def _check_keys(keys: Any) -> None:
    """InputError for keys that are not a 1-D array of int32/int64 or strings."""
    if hasattr(keys, "as_source"):
        dtype, shape = np.dtype(keys.dtype), tuple(keys.shape)
    else:
        try:
            array = keys.numpy() if isinstance(keys, (tf.Tensor, tf.Variable)) else np.asarray(keys)
        except ValueError as e:
            raise InputError(f"keys must be a rectangular 1-D array, got a ragged {type(keys).__name__} ({e})") from None
        dtype, shape = array.dtype, array.shape
    if len(shape) != 1:
        raise InputError(
            f"keys must be 1-D (one key per row), got shape {shape}; flatten them, e.g. keys.ravel(), and the values to match"
        )
    if not (dtype.kind in "USO" or dtype in (np.dtype(np.int32), np.dtype(np.int64))):
        raise InputError(
            f"keys have dtype {dtype}; keys must be int32, int64 or strings (str or bytes): float, bool and complex keys "
            "have no exact equality to group by; convert them, e.g. keys.astype(np.int64)"
        )


def _pair(keys: tf.Tensor, values: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return keys, values


def _keys_only(keys: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return keys, keys


def _run(recipe: MapReduce[Any], x: Any, settings: dict[str, Any]) -> Any:
    return recipe.run(x, **settings)


def _settings(
    cluster: Cluster | None,
    sizes: SizesLike,
    devices: Sequence[str] | None,
    fallback: str | None,
    timeout: float | None,
    return_stats: bool,
    reducers: int | Sequence[str] | None,
    batch_rows: int | None,
    resident: bool,
) -> dict[str, Any]:
    return {"cluster": cluster, "sizes": sizes, "devices": devices, "fallback": fallback, "timeout": timeout, "return_stats": return_stats,
            "reducers": reducers, "batch_rows": batch_rows, "resident": resident}  # fmt: skip


def count_by_key(
    keys: Any,
    /,
    *,
    cluster: Cluster | None = None,
    sizes: SizesLike = None,
    devices: Sequence[str] | None = None,
    fallback: str | None = None,
    timeout: float | None = None,
    return_stats: bool = False,
    reducers: int | Sequence[str] | None = None,
    batch_rows: int | None = None,
    resident: bool = False,
) -> Any:
    """How many times each key occurs: ``collections.Counter(keys)``, as a :class:`KeyedResult` of int64 counts.

    Args:
        keys: a 1-D array of int32, int64 or strings (str or bytes), or resident ``Sharded`` keys.
        cluster, sizes, devices, fallback, timeout, return_stats, reducers, batch_rows, resident:
            as for ``MapReduce.run``.

    Raises:
        InputError: keys not 1-D, or of a dtype that is not a key (float, bool, complex).

    Example:
        >>> tmr.count_by_key(np.array([3, 1, 3]), cluster=c).to_dict()  # doctest: +SKIP
        {1: 1, 3: 2}
    """
    _check_keys(keys)
    recipe = _job(("count_by_key",), lambda: (_keys_only, COUNT))
    return _run(recipe, keys, _settings(cluster, sizes, devices, fallback, timeout, return_stats, reducers, batch_rows, resident))


def _values_recipe(name: str, combiner: Combiner, doc: str) -> Callable[..., Any]:
    def recipe(
        keys: Any,
        values: Any,
        /,
        *,
        cluster: Cluster | None = None,
        sizes: SizesLike = None,
        devices: Sequence[str] | None = None,
        fallback: str | None = None,
        timeout: float | None = None,
        return_stats: bool = False,
        reducers: int | Sequence[str] | None = None,
        batch_rows: int | None = None,
        resident: bool = False,
    ) -> Any:
        _check_keys(keys)
        the_job = _job((name,), lambda: (_pair, combiner))
        return _run(
            the_job,
            (keys, values),
            _settings(cluster, sizes, devices, fallback, timeout, return_stats, reducers, batch_rows, resident),
        )

    recipe.__name__ = recipe.__qualname__ = name
    recipe.__doc__ = doc
    return recipe


_ARGS = """
    Args:
        keys: a 1-D array of int32, int64 or strings (str or bytes), or resident ``Sharded`` keys.
        values: an array (or resident ``Sharded``) with the same rows as ``keys``; 2-D values give
            one result per column.
        cluster, sizes, devices, fallback, timeout, return_stats, reducers, batch_rows, resident:
            as for ``MapReduce.run``.

    Raises:
        InputError: keys not 1-D or not a key dtype, or values of other rows than keys.
"""

sum_by_key = _values_recipe(
    "sum_by_key",
    SUM,
    f"""The sum of each key's values (integers in int64, floats in float64), as a :class:`KeyedResult`.
{_ARGS}
    Example:
        >>> tmr.sum_by_key(np.array(["a", "b", "a"]), np.array([1, 2, 3]), cluster=c).to_dict()  # doctest: +SKIP
        {{'a': 4, 'b': 2}}
""",
)

mean_by_key = _values_recipe(
    "mean_by_key",
    MEAN,
    f"""The mean of each key's values, in float64: every row weighs 1, whatever the partition.
{_ARGS}
    Example:
        >>> tmr.mean_by_key(np.array([1, 2, 1]), np.array([1.0, 5.0, 3.0]), cluster=c).to_dict()  # doctest: +SKIP
        {{1: 2.0, 2: 5.0}}
""",
)

min_by_key = _values_recipe(
    "min_by_key",
    MIN,
    f"""The minimum of each key's values, in the values' dtype.
{_ARGS}
    Example:
        >>> tmr.min_by_key(np.array([1, 2, 1]), np.array([4, 5, 3]), cluster=c).to_dict()  # doctest: +SKIP
        {{1: 3, 2: 5}}
""",
)

max_by_key = _values_recipe(
    "max_by_key",
    MAX,
    f"""The maximum of each key's values, in the values' dtype.
{_ARGS}
    Example:
        >>> tmr.max_by_key(np.array([1, 2, 1]), np.array([4, 5, 3]), cluster=c).to_dict()  # doctest: +SKIP
        {{1: 4, 2: 5}}
""",
)


def _variance_combiner(ddof: int) -> Combiner:
    """:data:`MOMENTS` whose per-key result is ``M2 / (count - ddof)`` (NaN where ``count ≤ ddof``, as numpy)."""
    form = MOMENTS.per_key
    assert form is not None

    def finalize(p: tuple[tf.Tensor, tf.Tensor, tf.Tensor]) -> tf.Tensor:
        count, _, m2 = p
        denominator = count - float(ddof)
        shape = tf.concat([tf.shape(count), tf.ones([tf.rank(m2) - 1], tf.int32)], 0)
        denominator = tf.reshape(denominator, shape)
        nan = tf.fill(tf.shape(m2), tf.constant(np.nan, tf.float64))
        return tf.where(denominator > 0, m2 / tf.maximum(denominator, 1.0), nan)

    return attrs.evolve(MOMENTS, name="variance", per_key=SegmentForm(partial=form.partial, merge=form.merge, finalize=finalize))


def variance_by_key(
    keys: Any,
    values: Any,
    /,
    *,
    ddof: int = 0,
    cluster: Cluster | None = None,
    sizes: SizesLike = None,
    devices: Sequence[str] | None = None,
    fallback: str | None = None,
    timeout: float | None = None,
    return_stats: bool = False,
    reducers: int | Sequence[str] | None = None,
    batch_rows: int | None = None,
    resident: bool = False,
) -> Any:
    """The variance of each key's values, ``np.var(v, ddof=ddof)`` per key, in float64 (NaN where a key has ≤ ddof rows).

    Each batch computes per-key (count, mean, M2) in two passes, and partials merge with Chan's
    formula: no ``E[x²] − E[x]²`` cancellation.

    Args:
        keys, values, cluster, sizes, devices, fallback, timeout, return_stats, reducers, batch_rows,
            resident: as for :func:`sum_by_key`.
        ddof: delta degrees of freedom (0: population variance; 1: sample variance).

    Example:
        >>> tmr.variance_by_key(np.array([1, 1, 2]), np.array([1.0, 3.0, 5.0]), cluster=c).to_dict()  # doctest: +SKIP
        {1: 1.0, 2: 0.0}
    """
    if isinstance(ddof, bool) or not isinstance(ddof, (int, np.integer)) or ddof < 0:
        raise ValueError(f"ddof must be an int ≥ 0 (0: population variance, 1: sample variance), got {ddof!r}")
    _check_keys(keys)
    recipe = _job(("variance_by_key", int(ddof)), lambda: (_pair, _variance_combiner(int(ddof))))
    return _run(
        recipe,
        (keys, values),
        _settings(cluster, sizes, devices, fallback, timeout, return_stats, reducers, batch_rows, resident),
    )


def _split_words(lines: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    words = tf.strings.split(lines).flat_values
    return words, words


def word_count(
    lines: Any,
    /,
    *,
    cluster: Cluster | None = None,
    sizes: SizesLike = None,
    devices: Sequence[str] | None = None,
    fallback: str | None = None,
    timeout: float | None = None,
    return_stats: bool = False,
    reducers: int | Sequence[str] | None = None,
    batch_rows: int | None = None,
    resident: bool = False,
) -> Any:
    """How many times each word occurs in ``lines``: a :class:`KeyedResult` of int64 counts.

    Words are split on ASCII whitespace (space, ``\\t``, ``\\n``, ``\\v``, ``\\f``, ``\\r``), as
    ``bytes.split()`` does: the result equals ``collections.Counter(w for line in lines for w in
    line.encode().split())`` with the words decoded.  Words are ``str`` when ``lines`` are ``str``,
    ``bytes`` when they are bytes.  Each shard is tokenized and counted on its worker, batch by
    batch (``batch_rows`` lines), then the counts shuffle to the reducers by word hash.

    Args:
        lines: a 1-D array (or list) of strings, str or bytes.
        cluster, sizes, devices, fallback, timeout, return_stats, reducers, batch_rows, resident:
            as for ``MapReduce.run``.

    Raises:
        InputError: ``lines`` is not a 1-D array of strings.

    Example:
        >>> tmr.recipes.word_count(["the cat", "the hat"], cluster=c).to_dict()  # doctest: +SKIP
        {'cat': 1, 'hat': 1, 'the': 2}
    """
    if not hasattr(lines, "as_source"):
        array = np.asarray(lines, dtype=object) if isinstance(lines, list) else np.asarray(lines)
        if array.ndim != 1 or not (
            array.dtype.kind in "US" or (array.dtype == object and all(isinstance(s, (str, bytes)) for s in array.tolist()))
        ):
            raise InputError(
                f"lines must be a 1-D array of strings (str or bytes), got {type(lines).__name__} of dtype {array.dtype} and shape {array.shape}; "
                "pass e.g. np.array(text.splitlines())"
            )
        lines = array if array.size else np.array([], dtype="U1")
    recipe = _job(("word_count",), lambda: (_split_words, COUNT))
    return _run(
        recipe, lines, _settings(cluster, sizes, devices, fallback, timeout, return_stats, reducers, batch_rows, resident)
    )
