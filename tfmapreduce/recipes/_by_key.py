"""By-key recipes: count, sum, mean, min and max per key, and word count — each one keyed run.

Every recipe takes the data positionally (``keys``, then ``values``, each an array or resident
``Sharded`` data, co-partitioned on axis 0) and the keywords of ``MapReduce.run``:
``cluster=``, ``sizes=``, ``devices=``, ``fallback=``, ``timeout=``, and the keyed ones
``reducers=``, ``batch_rows=``, ``partitioner=``, ``resident=``, and ``max_bytes=``, each reducer's budget, as
``MapReduce(..., by_key=True, max_bytes=)``'s (None: a quarter of its host's available memory; over it, a fetched run
spills to the workers' disks, ``tmr.plan_by_key`` says so before it runs).  It returns a :class:`KeyedResult` (or a
``KeyedSharded`` with ``resident=True``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, cast, overload

import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._base.errors import InputError
from .._io.files.files import Files
from .._io.source import Input
from .._kinds.mapreduce import MapReduce
from .._kinds.shuffle.result import KeyedResult
from .._kinds.shuffle.sharded import KeyedSharded
from .._ops.combine import COUNT, MAX, MEAN, MIN, SUM
from .._ops.per_group import check_max_bytes
from .._options import Options, RunOptions
from .._table.table import Table
from ._keyed_input import is_columns, keyed_input, pair
from ._recipe import recipe

Keyed = KeyedResult | KeyedSharded
"""A keyed recipe's result: a :class:`KeyedResult`, or a :class:`KeyedSharded` when ``resident=True``."""


def _keys_only(keys: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return keys, keys


def _columns(keys: tf.Tensor, *values: tf.Tensor) -> tuple[tf.Tensor, tuple[tf.Tensor, ...]]:
    return keys, values


def job_of(name: tuple[Any, ...], make: Any, x: Any, max_bytes: object) -> tuple[MapReduce[Any], Any]:
    """The recipe's ``MapReduce`` over ``x`` within ``max_bytes``, and what it runs over: values that are a tuple of
    columns (:func:`is_columns`) in the same run, each a result, as a job whose map returns ``(keys, (a, b, ...))``."""
    budget = check_max_bytes(max_bytes)
    if isinstance(x, tuple) and is_columns(x[1]):
        return recipe((*name, len(x[1])), lambda: (_columns, make()[1]), by_key=True, max_bytes=budget), (x[0], *x[1])
    return recipe(name, make, by_key=True, max_bytes=budget), x


def keyed_run(name: tuple[Any, ...], make: Any, x: Any, resident: bool, max_bytes: object, options: Options) -> Any:
    """Run the recipe over ``x`` (:func:`job_of`)."""
    job, x = job_of(name, make, x, max_bytes)
    return job.execute(x, RunOptions.of(**options), resident=resident)


class KeysRecipe(Protocol):
    """A keyed recipe over the keys alone (``count_by_key``, ``word_count``)."""

    @overload
    def __call__(
        self, keys: Any, /, *, resident: Literal[False] = False, max_bytes: int | None = None, **options: Unpack[Options]
    ) -> KeyedResult: ...
    @overload
    def __call__(
        self, keys: Any, /, *, resident: Literal[True], max_bytes: int | None = None, **options: Unpack[Options]
    ) -> KeyedSharded: ...
    @overload
    def __call__(
        self,
        table: Files | Table,
        /,
        *,
        keys: str | int,
        resident: Literal[False] = False,
        max_bytes: int | None = None,
        **options: Unpack[Options],
    ) -> KeyedResult: ...


class ValuesRecipe(Protocol):
    """A keyed recipe over keys and their values (``sum_by_key``, ``mean_by_key``, ...)."""

    @overload
    def __call__(
        self,
        keys: Any,
        values: Any,
        /,
        *,
        resident: Literal[False] = False,
        max_bytes: int | None = None,
        **options: Unpack[Options],
    ) -> KeyedResult: ...
    @overload
    def __call__(
        self, keys: Any, values: Any, /, *, resident: Literal[True], max_bytes: int | None = None, **options: Unpack[Options]
    ) -> KeyedSharded: ...
    @overload
    def __call__(
        self,
        table: Files | Table,
        /,
        *,
        keys: str | int,
        values: str | int | Sequence[str | int],
        resident: Literal[False] = False,
        max_bytes: int | None = None,
        **options: Unpack[Options],
    ) -> KeyedResult: ...


def _keys_recipe(function: Callable[..., Any]) -> KeysRecipe:
    """``function`` typed as a ``KeysRecipe``: its result's type follows ``resident``."""
    return cast(KeysRecipe, function)


def _values_recipe(function: Callable[..., Any]) -> ValuesRecipe:
    """``function`` typed as a ``ValuesRecipe``: its result's type follows ``resident``."""
    return cast(ValuesRecipe, function)


@_keys_recipe
def count_by_key(keys: Any, /, *, resident: bool = False, max_bytes: int | None = None, **options: Unpack[Options]) -> Any:
    """How many times each key occurs: ``collections.Counter(keys)``, as a [`KeyedResult`][tfmapreduce.KeyedResult] of int64 counts.

    Args:
        keys: a 1-D array of int32, int64 or strings (str or bytes), or resident ``Sharded`` keys.
        resident: keep the result on the reducers as a ``KeyedSharded`` instead of fetching it.
        max_bytes: the bytes of keys and partials one reducer may receive (None: a quarter of its host's available
            memory); over it, the run spills to the workers' disks with the same result
            (see [`plan_by_key`][tfmapreduce.plan_by_key]; a resident one is kept on the reducers as in memory).
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout``, ``reducers``,
            ``batch_rows``, ``partitioner`` (see ``RunOptions``).

    Raises:
        InputError: keys not 1-D, or of a dtype that is not a key (float, bool, complex).

    Examples:
        >>> tmr.count_by_key(np.array([3, 1, 3]), cluster=cluster).to_dict()
        {1: 1, 3: 2}
    """
    x = keyed_input("count_by_key", keys, None, options, with_values=False)
    return keyed_run(("count_by_key",), lambda: (_keys_only, COUNT), x, resident, max_bytes, options)


@_values_recipe
def sum_by_key(
    keys: Any, values: Any = None, /, *, resident: bool = False, max_bytes: int | None = None, **options: Unpack[Options]
) -> Any:
    """The sum of each key's values (integers in int64, floats in float64), as a [`KeyedResult`][tfmapreduce.KeyedResult].

    Args:
        keys: a 1-D array of int32, int64 or strings (str or bytes), or resident ``Sharded`` keys.
        values: an array (or resident ``Sharded``) with the same rows as ``keys``; 2-D values give
            one result per column.  A tuple of such arrays ``(a, b)`` gives a result whose values are
            a tuple in that order, all in one run (as pandas' ``df.groupby(k)[["a", "b"]]``).  Left
            out (``None``) when ``keys`` is a ``read_csv`` table or a [`Table`][tfmapreduce.Table]: then the
            keywords ``keys=`` and ``values=`` name its columns (a Table's rows whose value is null are left out;
            its key column may hold no null).
        resident: keep the result on the reducers as a ``KeyedSharded`` instead of fetching it.
        max_bytes: the bytes of keys and partials one reducer may receive (None: a quarter of its host's available
            memory); over it, the run spills to the workers' disks with the same result
            (see [`plan_by_key`][tfmapreduce.plan_by_key]; a resident one is kept on the reducers as in memory).
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout``, ``reducers``,
            ``batch_rows``, ``partitioner`` (see ``RunOptions``).

    Raises:
        InputError: keys not 1-D or not a key dtype, or values of other rows than keys.

    Examples:
        >>> tmr.sum_by_key(np.array(["a", "b", "a"]), np.array([1, 2, 3]), cluster=cluster).to_dict()
        {'a': 4, 'b': 2}
        >>> tmr.sum_by_key(np.array([7, 7]), (np.array([1, 2]), np.array([0.5, 0.25])), cluster=cluster).to_dict()
        {7: (np.int64(3), np.float64(0.75))}
        >>> t = tmr.table({"k": np.array(["a", "b", "a"]), "v": np.ma.MaskedArray([1, 2, 3], mask=[0, 0, 1])})
        >>> tmr.sum_by_key(t, keys="k", values="v", cluster=cluster).to_dict()
        {'a': 1, 'b': 2}
    """
    x = keyed_input("sum_by_key", keys, values, options)
    return keyed_run(("sum_by_key",), lambda: (pair, SUM), x, resident, max_bytes, options)


@_values_recipe
def mean_by_key(
    keys: Any, values: Any = None, /, *, resident: bool = False, max_bytes: int | None = None, **options: Unpack[Options]
) -> Any:
    """The mean of each key's values, in float64: every row weighs 1, whatever the partition.

    Args:
        keys, values, resident, max_bytes, **options: as for [`sum_by_key`][tfmapreduce.sum_by_key].

    Raises:
        InputError: keys not 1-D or not a key dtype, or values of other rows than keys.

    Examples:
        >>> tmr.mean_by_key(np.array([1, 2, 1]), np.array([1.0, 5.0, 3.0]), cluster=cluster).to_dict()
        {1: 2.0, 2: 5.0}
    """
    x = keyed_input("mean_by_key", keys, values, options)
    return keyed_run(("mean_by_key",), lambda: (pair, MEAN), x, resident, max_bytes, options)


@_values_recipe
def min_by_key(
    keys: Any, values: Any = None, /, *, resident: bool = False, max_bytes: int | None = None, **options: Unpack[Options]
) -> Any:
    """The minimum of each key's values, in the values' dtype.

    Args:
        keys, values, resident, max_bytes, **options: as for [`sum_by_key`][tfmapreduce.sum_by_key].

    Raises:
        InputError: keys not 1-D or not a key dtype, or values of other rows than keys.

    Examples:
        >>> tmr.min_by_key(np.array([1, 2, 1]), np.array([4, 5, 3]), cluster=cluster).to_dict()
        {1: 3, 2: 5}
    """
    x = keyed_input("min_by_key", keys, values, options)
    return keyed_run(("min_by_key",), lambda: (pair, MIN), x, resident, max_bytes, options)


@_values_recipe
def max_by_key(
    keys: Any, values: Any = None, /, *, resident: bool = False, max_bytes: int | None = None, **options: Unpack[Options]
) -> Any:
    """The maximum of each key's values, in the values' dtype.

    Args:
        keys, values, resident, max_bytes, **options: as for [`sum_by_key`][tfmapreduce.sum_by_key].

    Raises:
        InputError: keys not 1-D or not a key dtype, or values of other rows than keys.

    Examples:
        >>> tmr.max_by_key(np.array([1, 2, 1]), np.array([4, 5, 3]), cluster=cluster).to_dict()
        {1: 4, 2: 5}
    """
    x = keyed_input("max_by_key", keys, values, options)
    return keyed_run(("max_by_key",), lambda: (pair, MAX), x, resident, max_bytes, options)


def _words(lines: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Each word of ``lines`` and a one: a word count as a user writes it, fused as theirs is (``_kinds.fuse``)."""
    words = tf.strings.split(lines).flat_values
    return words, tf.ones_like(words, dtype=tf.int64)


@_keys_recipe
def word_count(lines: Any, /, *, resident: bool = False, max_bytes: int | None = None, **options: Unpack[Options]) -> Any:
    """How many times each word occurs in ``lines``: a [`KeyedResult`][tfmapreduce.KeyedResult] of int64 counts.

    Words are split on ASCII whitespace (space, ``\\t``, ``\\n``, ``\\v``, ``\\f``, ``\\r``), as
    ``bytes.split()`` and Spark's ``\\s+`` do: the result equals ``collections.Counter(w for line in lines for w in
    line.encode().split())`` with the words decoded, for lines and for ``read_text`` files alike (where ``\\r\\n``
    ends a line and a lone ``\\r`` separates words); a Unicode space such as U+00A0 belongs to its word.  Words are ``str`` when ``lines`` are ``str``,
    ``bytes`` when they are bytes.  Each shard is tokenized and counted on its worker, batch by
    batch (``batch_rows`` lines), then the counts shuffle to the reducers by word hash.

    Args:
        lines: a 1-D array (or list) of strings, str or bytes.
        resident, max_bytes, **options: as for [`sum_by_key`][tfmapreduce.sum_by_key].

    Raises:
        InputError: ``lines`` is not a 1-D array of strings.

    Examples:
        >>> tmr.recipes.word_count(["the cat", "the hat"], cluster=cluster).to_dict()
        {'cat': 1, 'hat': 1, 'the': 2}
    """
    if not isinstance(lines, Input):
        array = np.asarray(lines, dtype=object) if isinstance(lines, list) else np.asarray(lines)
        if array.ndim != 1 or not (
            array.dtype.kind in "US" or (array.dtype == object and all(isinstance(s, (str, bytes)) for s in array.tolist()))
        ):
            raise InputError(
                f"lines must be a 1-D array of strings (str or bytes), got {type(lines).__name__} of dtype {array.dtype} and shape {array.shape}; "
                "pass e.g. np.array(text.splitlines())"
            )
        lines = array if array.size else np.array([], dtype="U1")
    job, lines = job_of(("word_count",), lambda: (_words, SUM), lines, max_bytes)  # counted natively where it can be (fuse)
    return job.execute(lines, RunOptions.of(**options), resident=resident)
