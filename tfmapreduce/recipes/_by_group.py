"""Group recipes by key: median, quantiles, top-k, distinct counts and collected values per key — each one group run.

They take the keywords of the keyed recipes (``cluster=``, ``sizes=``, ``devices=``, ``fallback=``,
``timeout=``, ``reducers=``, ``batch_rows=``, ``partitioner=``, ``resident=``) and ``max_bytes=`` (see ``tmr.per_group``).
``median_by_key``, ``quantile_by_key`` and ``collect_by_key`` send every (key, value) row to its
reducer; ``top_k_by_key`` (each batch's and task's top k per key) and ``count_distinct_by_key``
(each batch's and task's distinct pairs) pre-combine on the map side and send only those.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable
from typing import Any

import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._base.errors import InputError
from .._io.files.csv import CsvTable
from .._io.source import Input
from .._native.loader import has
from .._ops.combine import GroupForm
from .._ops.group import group
from .._ops.grouping import grouped, row_ids, ungrouped
from .._ops.per_group import check_max_bytes, group_reducer
from .._options import Options, RunOptions
from ._keyed_input import is_table, keyed_input, pair
from ._ranks import interpolated, quantile_ranks, top_k_ranks, with_nan
from ._recipe import recipe

METHODS = ("linear", "lower", "higher", "nearest", "midpoint")
"""The ``method=`` of :func:`quantile_by_key`, as numpy's ``np.quantile`` defines them."""


def _check_values(values: Any, what: str, *, kinds: str = "iuf") -> None:
    """InputError unless ``values`` is a 1-D array of the dtype kinds ``kinds``."""
    if isinstance(values, Input):
        source = values.as_source()
        dtype, shape = source.dtype, source.shape
    else:
        array = values.numpy() if isinstance(values, (tf.Tensor, tf.Variable)) else np.asarray(values)
        dtype, shape = array.dtype, array.shape
    if len(shape) != 1 or dtype.kind not in kinds:
        expected = "integers or floats" if kinds == "iuf" else "numbers or strings"
        raise InputError(
            f"values of {what} must be a 1-D array of {expected} (one value per key), got dtype {dtype} and shape {shape}; "
            "for several columns, run once per column"
        )


def _input(name: str, keys: Any, values: Any, options: Any, *, kinds: str = "iuf") -> Any:
    """What a group recipe runs over, as for the keyed recipes (:func:`keyed_input`): ``(keys, values)``, the values
    checked (``kinds``; "" for any), or a CSV table's columns named by ``keys=`` and ``values=``."""
    x = keyed_input(name, keys, values, options, columns=False)
    if is_table(x) and kinds and not (isinstance(x.reader, CsvTable) and x.reader.flat):
        raise InputError(f"{name}: values= must name one column of the CSV table (one value per key), got several")
    if not is_table(x) and kinds:
        _check_values(x[1], name, kinds=kinds)
    return x


def _run(key: tuple[Hashable, ...], form: GroupForm, x: Any, resident: bool, options: Options) -> Any:
    job = recipe((*key, form.max_bytes), lambda: (pair, group_reducer(form, str(key[0]))), by_key=True)
    return job.execute(x, RunOptions.of(**options), resident=resident)


# --------------------------------------------------------------------------- quantiles


def _quantiles(keys: tf.Tensor, values: tf.RaggedTensor, q: tuple[float, ...], method: str, scalar: bool) -> tf.Tensor:
    """Each row's quantiles ``q`` as ``np.quantile(row, q, method=method)`` computes them; rows sorted ascending, NaN last."""
    flat, splits = values.flat_values, values.row_splits
    last = values.row_lengths() - 1
    h = tf.cast(last, tf.float64)[:, None] * tf.constant(q, tf.float64)[None, :]  # numpy's virtual index (n - 1)·q
    below = tf.cast(tf.math.floor(h), tf.int64)
    a = tf.gather(flat, splits[:-1, None] + below)
    b = tf.gather(flat, splits[:-1, None] + tf.minimum(below + 1, last[:, None]))
    result = with_nan(interpolated(h, a, b, method), tf.gather(flat, tf.maximum(splits[1:] - 1, 0)))
    return result[:, 0] if scalar else result


SELECTABLE = {tf.int32: tf.int32, tf.int64: tf.int64, tf.float32: tf.float32, tf.float64: tf.float64, tf.int8: tf.int32,
              tf.int16: tf.int32, tf.uint8: tf.int32, tf.uint16: tf.int32, tf.uint32: tf.int64, tf.float16: tf.float32,
              tf.bfloat16: tf.float32}  # fmt: skip
"""The value dtypes ``TmrSelectByKey`` selects in, by the dtype each is widened to (exactly)."""


def _selectable(keys: tf.Tensor, values: Any) -> tf.DType | None:
    """The dtype the native by-key kernels take ``values`` in (``SELECTABLE``), or None where they do not apply:
    integer keys and one 1-D numeric column only."""
    if keys.dtype not in (tf.int32, tf.int64) or not isinstance(values, tf.Tensor) or values.shape.rank != 1:
        return None
    return SELECTABLE.get(values.dtype)


def _selected(
    keys: tf.Tensor, values: Any, native: Any, q: tuple[float, ...], method: str, scalar: bool
) -> tuple[tf.Tensor, tf.Tensor] | None:
    """:func:`_quantiles` of a reducer's rows without sorting them: each key's ranks selected in place by the native
    kernel (``TmrSelectByKey``); None where it does not apply."""
    wide = _selectable(keys, values)
    if wide is None or not has(native, "tmr_select_by_key"):
        return None
    fractions = tf.constant(q, tf.float64)
    distinct, counts, low, high, top = native.tmr_select_by_key(keys, tf.cast(values, wide), fractions)
    h = tf.cast(counts - 1, tf.float64)[:, None] * fractions[None, :]
    low, high = tf.cast(low, values.dtype), tf.cast(high, values.dtype)
    result = with_nan(interpolated(h, low, high, method), top)
    return distinct, result[:, 0] if scalar else result


def _check_q(q: object) -> tuple[tuple[float, ...], bool]:
    array = np.asarray(q)
    if array.ndim > 1 or array.size == 0 or array.dtype.kind not in "iuf" or not np.all((array >= 0) & (array <= 1)):
        raise ValueError(
            f"q must be a number or a 1-D sequence of numbers in [0, 1] (0.5 for the median, [0.25, 0.75] for the quartiles), "
            f"got {q!r}"
        )
    return tuple(float(x) for x in array.ravel()), array.ndim == 0


def quantile_by_key(
    keys: Any,
    values: Any = None,
    /,
    q: Any = None,
    *,
    method: str = "linear",
    resident: bool = False,
    max_bytes: int | None = None,
    **options: Unpack[Options],
) -> Any:
    """Each key's quantiles ``q`` of its values, ``np.quantile(values_of_key, q, method=method)`` per key.

    Every value of a key is sorted on its reducer (NaN last; a key with a NaN has NaN quantiles, as
    in numpy).  ``linear`` and ``midpoint`` give float64; ``lower``, ``higher`` and ``nearest`` give
    values of the input (in its dtype).  A scalar ``q`` gives one value per key, a 1-D ``q`` a row.

    Args:
        keys: 1-D int32, int64 or string keys (or resident ``Sharded``); or a CSV table (``tmr.read_csv(paths)``)
            or a [`Table`][tfmapreduce.Table], its columns named by ``keys=`` and ``values=``, as for the keyed recipes.
        values: a 1-D array of integers or floats (or resident ``Sharded``) with the same rows as ``keys``.
        q: a number in [0, 1], or a 1-D sequence of them.
        method: ``"linear"`` (numpy's default), ``"lower"``, ``"higher"``, ``"nearest"`` or ``"midpoint"``.
        resident: keep the result on the reducers as a ``KeyedSharded`` instead of fetching it.
        max_bytes: the most bytes of keys and values one reducer may receive (see ``tmr.per_group``).
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout``, ``reducers``, ``batch_rows``,
            ``partitioner``.

    Raises:
        ValueError: ``q`` outside [0, 1], or an unknown ``method``.
        InputError: keys or values of the wrong shape or dtype.
        ReducerMemoryError: with ``resident=True``, one key's values alone are larger than a reducer's budget (a larger
            partition spills; fetched, such a hot key's ranks are selected from the workers' disks in passes).

    Examples:
        >>> keys, values = np.array([1, 1, 1, 2]), np.array([3.0, 1.0, 2.0, 5.0])
        >>> tmr.quantile_by_key(keys, values, [0.0, 0.5], cluster=cluster).to_dict()
        {1: array([1., 2.]), 2: array([5., 5.])}
    """
    if q is None:
        raise TypeError("quantile_by_key: q is missing: pass it after the values, or as q= with a CSV table (q=0.9)")
    qs, scalar = _check_q(q)
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(repr(m) for m in METHODS)} (as np.quantile), got {method!r}")
    x = _input("quantile_by_key", keys, values, options)
    return _quantile_run("quantile_by_key", x, qs, scalar, method, resident, max_bytes, options)


def _quantile_run(
    name: str,
    x: Any,
    qs: tuple[float, ...],
    scalar: bool,
    method: str,
    resident: bool,
    max_bytes: Any,
    options: Options,
) -> Any:
    fn = functools.partial(_quantiles, q=qs, method=method, scalar=scalar)
    select = functools.partial(_selected, q=qs, method=method, scalar=scalar)
    ranked = quantile_ranks(qs, method, scalar)
    form = GroupForm(fn, sort_values=True, max_bytes=check_max_bytes(max_bytes), select=select, ranked=ranked)
    return _run((name, qs, method, scalar), form, x, resident, options)


def median_by_key(
    keys: Any, values: Any = None, /, *, resident: bool = False, max_bytes: int | None = None, **options: Unpack[Options]
) -> Any:
    """Each key's median, ``np.median(values_of_key)`` per key, in float64: the middle value, or the mean of the middle
    two (so ``[1.0, inf]`` gives inf, where ``np.quantile`` and [`quantile_by_key`][tfmapreduce.quantile_by_key] at 0.5
    give nan).

    Examples:
        >>> tmr.median_by_key(np.array(["a", "b", "a"]), np.array([4, 7, 1]), cluster=cluster).to_dict()
        {'a': 2.5, 'b': 7.0}
    """
    x = _input("median_by_key", keys, values, options)
    return _quantile_run("median_by_key", x, (0.5,), True, "median", resident, max_bytes, options)


# --------------------------------------------------------------------------- top k


def _top_k(keys: tf.Tensor, values: tf.RaggedTensor, k: int, largest: bool) -> tf.RaggedTensor:
    """Each row's ``k`` largest (or smallest) values, largest first (smallest first); rows sorted ascending."""
    splits = values.row_splits
    take = tf.minimum(values.row_lengths(), k)
    top_splits = tf.concat([tf.zeros([1], tf.int64), tf.cumsum(take)], 0)
    row = row_ids(top_splits)
    j = tf.range(top_splits[-1]) - tf.gather(top_splits, row)  # 0..take-1 within each row
    offsets = tf.gather(splits[1:] - 1, row) - j if largest else tf.gather(splits[:-1], row) + j
    return tf.RaggedTensor.from_row_splits(tf.gather(values.flat_values, offsets), top_splits, validate=False)


def _top_k_selected(keys: tf.Tensor, values: Any, native: Any, k: int, largest: bool) -> tuple[tf.Tensor, tf.RaggedTensor] | None:
    """:func:`_top_k` of the rows grouped by key, by the native ``TmrTopKByKey`` (a selection of each key's ``k``, then a
    sort of only them); None where it does not apply."""
    wide = _selectable(keys, values)
    if wide is None or not has(native, "tmr_top_k_by_key"):
        return None
    distinct, splits, top = native.tmr_top_k_by_key(keys, tf.cast(values, wide), k=k, largest=largest)
    return distinct, tf.RaggedTensor.from_row_splits(tf.cast(top, values.dtype), splits, validate=False)


def _top_k_pre(keys: tf.Tensor, values: tf.Tensor, native: Any, k: int, largest: bool) -> tuple[tf.Tensor, tf.Tensor]:
    selected = _top_k_selected(keys, values, native, k, largest)
    if selected is not None:
        return ungrouped(*selected)
    distinct, rows = grouped(keys, values, sort_values=True, native=native)
    return ungrouped(distinct, _top_k(distinct, rows, k, largest))


def top_k_by_key(
    keys: Any,
    values: Any = None,
    /,
    k: int | None = None,
    *,
    largest: bool = True,
    resident: bool = False,
    max_bytes: int | None = None,
    **options: Unpack[Options],
) -> Any:
    """Each key's ``k`` largest values (or smallest, ``largest=False``), sorted: largest (smallest) first, fewer when a key has fewer.

    The result holds one numpy array per key (``result[key]``); NaN sorts above every number, as
    in ``np.sort``.  Each batch and task keeps only its top ``k`` per key before the shuffle, so at
    most ``k`` values per key and task travel.  With ``resident=True`` the values stay on the reducers
    as a [`RaggedSharded`][tfmapreduce.RaggedSharded].

    Args:
        keys, values, resident, max_bytes, **options: as for [`quantile_by_key`][tfmapreduce.quantile_by_key].
        k: how many values per key, an int ≥ 1.
        largest: the largest values (True) or the smallest (False).

    Raises:
        ValueError: ``k`` < 1.

    Examples:
        >>> r = tmr.top_k_by_key(np.array([1, 1, 1, 2]), np.array([3, 9, 5, 4]), 2, cluster=cluster)
        >>> r[1], r[2]
        (array([9, 5]), array([4]))
    """
    if k is None:
        raise TypeError("top_k_by_key: k is missing: pass it after the values, or as k= with a CSV table (k=3)")
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be an int ≥ 1 (how many values to keep per key), got {k!r}")
    if not isinstance(largest, (bool, np.bool_)):
        raise TypeError(f"largest must be True or False, got {type(largest).__name__} {largest!r}")
    x = _input("top_k_by_key", keys, values, options)
    k, largest = int(k), bool(largest)
    fn = functools.partial(_top_k, k=k, largest=largest)
    pre = functools.partial(_top_k_pre, k=k, largest=largest)
    select = functools.partial(_top_k_selected, k=k, largest=largest)
    ranked = top_k_ranks(k, largest)
    form = GroupForm(fn, sort_values=True, max_bytes=check_max_bytes(max_bytes), precombine=pre, select=select, ranked=ranked)
    return _run(("top_k_by_key", k, largest), form, x, resident, options)


# --------------------------------------------------------------------------- distinct values and collections


def _codes(values: tf.Tensor) -> tf.Tensor:
    """Values as exact group keys: integers as int64, floats by their bits (one -0.0/0.0, one NaN), strings as they are."""
    if values.dtype == tf.string:
        return values
    if values.dtype.is_floating:
        wide = tf.float64 if values.dtype == tf.float64 else tf.float32
        x = tf.cast(values, wide)
        x = tf.where(tf.math.is_nan(x), tf.constant(np.nan, wide), tf.where(tf.equal(x, 0), tf.zeros_like(x), x))
        return tf.cast(tf.bitcast(x, tf.int64 if wide == tf.float64 else tf.int32), tf.int64)
    return tf.cast(values, tf.int64)


def _pairs(key_ids: tf.Tensor, values: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Each (key id, value) row's id among the distinct pairs, and how many there are."""
    distinct, value_ids = group(_codes(values))
    pair = tf.cast(key_ids, tf.int64) * tf.cast(tf.size(distinct), tf.int64) + tf.cast(value_ids, tf.int64)
    unique, ids = tf.unique(pair)
    return ids, tf.size(unique)


def _distinct_pre(keys: tf.Tensor, values: tf.Tensor, native: Any) -> tuple[tf.Tensor, tf.Tensor]:
    """The distinct (key, value) pairs of the rows (each pair's first row)."""
    _, key_ids = group(keys)
    ids, n = _pairs(key_ids, values)
    first = tf.math.unsorted_segment_min(tf.range(tf.size(ids)), ids, n)
    return tf.gather(keys, first), tf.gather(values, first)


def _count_distinct(keys: tf.Tensor, values: tf.RaggedTensor) -> tf.Tensor:
    rows = row_ids(values.row_splits)
    ids, n = _pairs(rows, values.flat_values)
    owner = tf.math.unsorted_segment_max(rows, ids, n)  # each distinct pair's key (row)
    return tf.math.bincount(tf.cast(owner, tf.int32), minlength=tf.size(keys), maxlength=tf.size(keys), dtype=tf.int64)


def count_distinct_by_key(
    keys: Any, values: Any = None, /, *, resident: bool = False, max_bytes: int | None = None, **options: Unpack[Options]
) -> Any:
    """How many distinct values each key has, exactly (``len(np.unique(values_of_key))`` per key), as int64 counts.

    Floats are equal as numpy's ``np.unique`` compares them (-0.0 is 0.0; every NaN is one value).
    Each batch and task sends only its distinct (key, value) pairs.

    Args:
        keys, resident, max_bytes, **options: as for [`quantile_by_key`][tfmapreduce.quantile_by_key].
        values: a 1-D array of integers, floats or strings, with the same rows as ``keys``.

    Examples:
        >>> tmr.count_distinct_by_key(np.array([1, 1, 1, 2]), np.array(["x", "y", "x", "x"]), cluster=cluster).to_dict()
        {1: 2, 2: 1}
    """
    x = _input("count_distinct_by_key", keys, values, options, kinds="iufUSO")
    form = GroupForm(_count_distinct, max_bytes=check_max_bytes(max_bytes), precombine=_distinct_pre, distinct=_codes)
    return _run(("count_distinct_by_key",), form, x, resident, options)


def _collect(keys: tf.Tensor, values: Any) -> Any:
    return values


def collect_by_key(
    keys: Any,
    values: Any = None,
    /,
    *,
    sort_values: bool = False,
    resident: bool = False,
    max_bytes: int | None = None,
    **options: Unpack[Options],
) -> Any:
    """Every value of each key (Spark's ``groupByKey``): a [`KeyedResult`][tfmapreduce.KeyedResult] with one numpy array per key.

    Without ``sort_values`` a key's values come in no guaranteed order; with it, ascending (NaN last).
    ``result.values`` is an object array of those arrays; their concatenation, ``np.concatenate(result.values)``,
    and their lengths, ``np.fromiter(map(len, result.values), np.int64, len(result))``, are the flat values
    and row lengths.  With ``resident=True`` the values stay on the reducers as a
    [`RaggedSharded`][tfmapreduce.RaggedSharded] (flat values and row lengths).

    Args:
        keys, max_bytes, **options: as for [`quantile_by_key`][tfmapreduce.quantile_by_key].
        values: an array (or resident ``Sharded``) with the same rows as ``keys``; rows of 2-D values stay rows.
        sort_values: sort each key's values ascending (numbers; strings in byte order).

    Examples:
        >>> r = tmr.collect_by_key(np.array([2, 1, 2]), np.array([5, 6, 4]), sort_values=True, cluster=cluster)
        >>> r[2], r[1]
        (array([4, 5]), array([6]))
    """
    if not isinstance(sort_values, (bool, np.bool_)):
        raise TypeError(f"sort_values must be True or False, got {type(sort_values).__name__} {sort_values!r}")
    x = _input("collect_by_key", keys, values, options, kinds="")
    form = GroupForm(_collect, sort_values=bool(sort_values), max_bytes=check_max_bytes(max_bytes), whole=True)
    return _run(("collect_by_key", bool(sort_values)), form, x, resident, options)
