"""Aggregates by key in one keyed job: each aggregated column travels once as a column of the job's values (a
tuple). Where every aggregate has a partial, each key's partials merge with each aggregate's own merge (a
per-column combiner); where one has none (a median, a top-k, ...), every aggregate runs in one group reducer
(``groups``). Equal specs (column types, keys, aggregates) share one job, so its graphs are traced once.

A ``Prelude`` runs row-wise steps (a query's filters and new columns) in the same map, before the keys and values
are taken: the rows it drops and the columns it computes never leave the workers (one run, no round trip)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from .._io.resident import delete_all
from .._kinds.mapreduce import MapReduce
from .._ops.combine import (
    GroupForm,
)
from .._ops.per_group import group_reducer
from .aggregate_combiner import Inputs, combiner, summed_natively
from .column import Column, ResidentColumn, made
from .dictionary import PACKED, packed, sorted_codes
from .groups import GroupOp, finished, per_group
from .keys import KeyCodec
from .ops import INT64, OPS, PARAMETRIC, holistic, type_of
from .resident_list_keys import list_keyed
from .schema import ColumnType, check_name


@attrs.frozen
class Aggregate:
    """One output column of an aggregation: ``output = op(column)`` (``column`` is ``"*"`` for a row count);
    ``param`` is a quantile's ``q`` or a top-k's ``k`` (None for the other ops)."""

    output: str
    column: str
    op: str
    param: float | int | None = None

    @classmethod
    def parse(cls, output: str, spec: Any, names: tuple[str, ...]) -> Aggregate:
        """``output=(column, op)`` as ``agg`` takes it; ``op`` is a name, or ``("quantile", q)`` / ``("top_k", k)``.

        Raises:
            TypeError: not a pair of a column name and an op; ValueError: an unknown op, a bad ``q`` or ``k``, or
            ``"*"`` with another op than ``"count"``; KeyError: an unknown column.
        """
        if not (isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str)):
            raise TypeError(
                f"agg: {output}= expected a pair (column, op), e.g. {output}=('price', 'sum'), got {type(spec).__name__} {spec!r}"
            )
        column, op = spec
        param = None
        if isinstance(op, tuple) and len(op) == 2 and op[0] in PARAMETRIC:
            op, param = op[0], _param(output, column, op[0], op[1])
        elif isinstance(op, str) and op in PARAMETRIC:
            example = "('quantile', 0.9)" if op == "quantile" else "('top_k', 3)"
            raise ValueError(f"agg: {output}=({column!r}, {op!r}): {op} takes a parameter; pass ({column!r}, {example})")
        op = "count_distinct" if op == "n_unique" else op
        if not isinstance(op, str) or op not in OPS | PARAMETRIC:
            raise ValueError(
                f"agg: {output}=({column!r}, {op!r}): unknown op {op!r}; expected one of {sorted(OPS)}, "
                "('quantile', q) or ('top_k', k)"
            )
        if column == "*":
            if op not in ("count", "size"):
                raise ValueError(f"agg: {output}=('*', {op!r}): '*' (every row) takes only 'count'; did you mean ('*', 'count')?")
            return cls(output, column, "size")
        return cls(output, check_name(column, names, f"agg: {output}="), op, param)


def _param(output: str, column: str, op: str, value: object) -> float | int:
    """A quantile's ``q`` (a number in [0, 1]) or a top-k's ``k`` (an int ≥ 1)."""
    number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if op == "quantile":
        if not number or not 0 <= float(value) <= 1:  # type: ignore[arg-type]
            raise ValueError(f"agg: {output}=({column!r}, ('quantile', q)): q must be a number in [0, 1], got {value!r}")
        return float(value)  # type: ignore[arg-type]
    if not number or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"agg: {output}=({column!r}, ('top_k', k)): k must be an int ≥ 1, got {value!r}")
    return int(value)


@attrs.frozen
class Prelude:
    """Row-wise steps run in an aggregation's map before its keys and values are taken.

    ``keep(columns, literals)`` takes the shipped columns ``{name: (values, valid or None)}`` (those of ``reads``: each
    name and whether it holds nulls) and the run's literal tensors, and returns a bool mask of the rows kept (``keep``
    None: every row); ``fn(columns, literals)`` takes those columns, of every row or of the kept rows alone (gathered
    first, so what it computes is computed for them alone), and returns each column the aggregation reads,
    ``{name: (values, valid or None)}`` of its input's length; ``types`` are those columns' ``(name, type, holds
    nulls)``. Preludes compare by the functions' identity: the same function objects (kept by the steps' shape) share
    one job and its compiled programs.

    Example:
        >>> int64 = ColumnType.of(np.dtype(np.int64))
        >>> over = Prelude(lambda cols, lits: cols, (("x", False),), (("x", int64, False),), lambda cols, lits: cols["x"][0] > lits[0])
        >>> columns = {"x": Column(int64, np.array([1, 5, 7]))}
        >>> out = aggregate(columns, [], [Aggregate("n", "*", "size")], {"cluster": cluster}, over, [np.int64(4)])
        >>> out["n"].values.tolist()
        [2]
    """

    fn: Callable[..., Any]
    reads: tuple[tuple[str, bool], ...]
    types: tuple[tuple[str, ColumnType, bool], ...]
    keep: Callable[..., Any] | None = None


@attrs.frozen
class Spec:
    """What an aggregation's graphs depend on — the key and input columns' types and nulls, and the aggregates —
    so that equal specs share one job (and its traced, compiled graphs)."""

    keys: KeyCodec
    key_names: tuple[str, ...]
    inputs: Inputs
    """Each aggregated column once: its name, type and whether it holds nulls."""
    aggregates: tuple[Aggregate, ...]
    """The aggregates, their output names left out (they change no graph)."""
    prelude: Prelude | None = None
    """Row-wise steps run first in the map (None: the columns are shipped as the aggregation reads them)."""
    padded: bool = False
    """Whether a top-k's lists come padded (``GroupOp.padded``): its result stays on the workers."""

    @property
    def ops(self) -> tuple[GroupOp, ...]:
        """Each aggregate's op, input type (None: a row count), input position among ``inputs`` and parameter."""
        at = {name: i for i, (name, _, _) in enumerate(self.inputs)}
        return tuple(
            GroupOp(a.op, None, None, None)
            if a.column == "*"
            else GroupOp(a.op, self.inputs[at[a.column]][1], at[a.column], a.param, self.padded)
            for a in self.aggregates
        )

    @property
    def layout(self) -> tuple[tuple[str, bool], ...]:
        """The columns the map receives, in order, each once (the keys', then the aggregated ones), and whether each
        holds nulls (then its validity follows its values)."""
        named = dict(zip(self.key_names, self.keys.nullable, strict=True))
        for name, _, nullable in self.inputs:
            named.setdefault(name, nullable)
        return tuple(named.items())

    @property
    def grouped(self) -> bool:
        """Whether an aggregate needs every value of a group (a group reducer runs them all), or only partials."""
        return any(holistic(o.op, o.source) for o in self.ops)


TRACES = [0]
"""How many times an aggregation's map function was traced (how many graphs were built), for the benchmarks."""

_jobs: dict[Spec, MapReduce[Any]] = {}


def job_of(spec: Spec) -> MapReduce[Any]:
    """The keyed job of ``spec``, made once: a second aggregation of the same spec reuses its compiled graphs."""
    if spec not in _jobs:
        reducer = group_reducer(GroupForm(functools.partial(per_group, spec.ops)), "table_aggregates")
        _jobs[spec] = MapReduce(
            functools.partial(_map, spec), reducer if spec.grouped else combiner(spec.ops, spec.inputs), by_key=True
        )
    return _jobs[spec]


def _map(spec: Spec, *tensors: tf.Tensor) -> tuple[tf.Tensor, Any]:
    """A batch's keys (the key columns encoded as one) and, as values, each aggregated column's (values, [valid]);
    the prelude's rows and columns where the spec has one (its literals follow the columns)."""
    TRACES[0] += 1
    columns, at = {}, 0
    for name, nullable in spec.layout if spec.prelude is None else spec.prelude.reads:
        columns[name] = (tensors[at], tensors[at + 1] if nullable else None)
        at += 2 if nullable else 1
    first = tensors[0]
    if spec.prelude is not None:
        literals = tensors[at:]
        keep = None if spec.prelude.keep is None else spec.prelude.keep(columns, literals)
        if keep is not None and summed_natively(spec.ops, spec.inputs) and _dropped(spec) is not None:
            return _masked(spec, keep, columns, literals)
        if keep is not None:  # the kept rows' positions found once, every column gathered at them, then computed
            first = tf.reshape(tf.where(keep), [-1])
            columns = _gathered(columns, first)
        columns = spec.prelude.fn(columns, literals)
    rows = tf.shape(first)[:1]
    key = spec.keys.encode([columns[k] for k in spec.key_names]) if spec.key_names else tf.zeros(rows, tf.int64)
    values = tuple((columns[name][0],) if not nullable else columns[name] for name, _, nullable in spec.inputs)
    return key, values or ((tf.zeros(rows, tf.int8),),)


def _gathered(columns: Mapping[str, Any], rows: tf.Tensor) -> dict[str, Any]:
    """Each column's ``(values, valid or None)`` at ``rows`` (a column that nothing reads is never gathered: its op is
    not run)."""
    return {n: (tf.gather(v, rows), None if ok is None else tf.gather(ok, rows)) for n, (v, ok) in columns.items()}


def _dropped(spec: Spec) -> int | None:
    """The key that no row of ``spec`` has, which ``_masked`` gives the rows a filter drops: 1 where there are no
    keys (every row's is 0), one past the largest value of a key column of 8- or 16-bit ints (string codes); else None."""
    if not spec.key_names:
        return 1
    storage = np.dtype(spec.keys.types[0].storage)
    if spec.keys.raw and storage.kind in "iu" and storage.itemsize <= 2:  # one past it keeps the keys dense
        return int(np.iinfo(storage).max) + 1
    return None


def _masked(spec: Spec, keep: tf.Tensor, columns: Mapping[str, Any], literals: Sequence[tf.Tensor]) -> tuple[tf.Tensor, Any]:
    """The map's keys and values where a prelude's filter keeps ``keep`` and every aggregate is a sum, a mean or a
    count (``aggregate_combiner.summed_natively``). Where the filter keeps at least half of the rows, every row is passed, a dropped
    row with the key ``_dropped(spec)``, which no row has (one select of the keys, where a gather would copy each
    kept row of every column), and ``aggregate`` drops that key's partials; else the kept rows are gathered and the
    prelude computes its columns for them alone.

    Example: keys ``[3, 5, 3]`` (int8 codes), values ``[1.0, 2.0, inf]``, ``keep`` ``[True, False, False]``: keys
    ``[3, 128, 128]``; summed by key ``3: 1.0 (1 row)`` and ``128: inf (2 rows)``, dropped on the client.
    """
    assert spec.prelude is not None
    prelude, dropped = spec.prelude, _dropped(spec)
    names = [name for name, _, _ in spec.inputs]

    def keyed(out: Mapping[str, Any], rows: tf.Tensor) -> tf.Tensor:
        return spec.keys.encode([out[k] for k in spec.key_names]) if spec.key_names else tf.zeros(rows, tf.int64)

    def selected() -> tuple[tf.Tensor, list[tf.Tensor]]:
        out = prelude.fn(columns, literals)
        return tf.where(keep, keyed(out, tf.shape(keep)), tf.constant(dropped, tf.int64)), [out[n][0] for n in names]

    def gathered() -> tuple[tf.Tensor, list[tf.Tensor]]:
        rows_kept = tf.reshape(tf.where(keep), [-1])
        out = prelude.fn(_gathered(columns, rows_kept), literals)
        return keyed(out, tf.shape(rows_kept)), [out[n][0] for n in names]

    most = 2 * tf.math.count_nonzero(keep, dtype=tf.int64) >= tf.size(keep, out_type=tf.int64)
    key, values = tf.cond(most, selected, gathered)
    return key, tuple((v,) for v in values)


def aggregate(
    columns: Mapping[str, Column | ResidentColumn],
    keys: Sequence[str],
    aggregates: Sequence[Aggregate],
    options: Mapping[str, Any],
    prelude: Prelude | None = None,
    literals: Sequence[np.ndarray[Any, Any]] = (),
) -> dict[str, Column]:
    """The aggregated columns (the key columns, then the aggregates), one row per group, sorted by the keys (nulls
    last); with no keys, one row for the whole table. The columns are on the client (shipped for the run) or on the
    workers (read where they are): the same job either way. With a ``prelude``, ``columns`` are what it reads and the
    aggregation reads its output (``literals`` its run inputs), all in the one keyed run."""
    named = [] if prelude is not None else [n for n in dict.fromkeys([*keys, *(a.column for a in aggregates)]) if n != "*"]
    listed = [n for n in named if columns[n].type.inner is not None]
    if listed:  # a list key or value: one value a row, each list's code (``resident_list_keys``)
        keyed, lists, made_here = list_keyed(columns, listed, options)
        try:
            out = aggregate(keyed, keys, aggregates, options)
        finally:
            delete_all(made_here)
        coded = {k: k for k in keys} | {a.output: a.column for a in aggregates if a.op in ("min", "max")}  # not counts
        return out | {n: lists[c](out[n]) for n, c in coded.items() if c in lists}
    counted = distinct_column(keys, aggregates)
    pack = packed([columns[k] for k in (*keys, counted)]) if prelude is None and counted else None
    if pack is not None:  # (keys, counted) distinct as one packed key, then counted per key on the client
        out = aggregate({**columns, PACKED: pack.column}, [PACKED], [Aggregate("", "*", "size")], options)
        return counted_runs(keys, pack.unpacked(out[PACKED])[:-1], aggregates)
    pack = packed([columns[k] for k in keys]) if prelude is None and keys else None
    if pack is not None:  # string keys as one integer key (``dictionary``), strings again once grouped
        out = aggregate({**columns, PACKED: pack.column}, [PACKED], aggregates, options)
        return {**dict(zip(keys, pack.unpacked(out.pop(PACKED)), strict=True)), **out}
    schema = (
        {n: (c.type, c.nullable) for n, c in columns.items()} if prelude is None else {n: (t, o) for n, t, o in prelude.types}
    )
    types = {n: t for n, (t, _) in schema.items()}
    for a in aggregates:
        if a.column != "*":
            type_of(a.op, types[a.column], a.output)  # refuse what does not apply before any run
    rows = len(next(iter(columns.values()))) if columns else 0
    if rows == 0:
        return _empty(types, keys, aggregates)
    codec = KeyCodec(tuple(types[k] for k in keys), tuple(schema[k][1] for k in keys))
    read = dict.fromkeys(a.column for a in aggregates if a.column != "*") or dict.fromkeys(
        list(schema)[:1]
    )  # '*' alone: a column's rows
    inputs = tuple((name, *schema[name]) for name in read)
    spec = Spec(codec, tuple(keys), inputs, tuple(attrs.evolve(a, output="") for a in aggregates), prelude)
    arrays: list[Any] = []  # numpy arrays, or Sharded on the workers
    for name, _ in spec.layout if prelude is None else prelude.reads:
        c = columns[name]
        arrays.extend([c.values] if c.valid is None else [c.values, c.valid])
    result = job_of(spec).run(tuple(arrays), broadcast=list(literals), **options)
    found, partials = np.asarray(result.keys), [[np.asarray(p) for p in partial] for partial in result.values]
    if (
        prelude is not None and summed_natively(spec.ops, spec.inputs) and _dropped(spec) is not None
    ):  # ``_masked``'s dropped rows
        present = found != _dropped(spec)
        found, partials = found[present], [[p[present] for p in partial] for partial in partials]
    if prelude is not None and len(found) == 0:  # the prelude kept no row
        return _empty(types, keys, aggregates)
    out = dict(zip(keys, codec.decode(found), strict=True)) if keys else {}
    for a, op, partial in zip(aggregates, spec.ops, partials, strict=True):
        done = finished if holistic(op.op, op.source) else _finish
        out[a.output] = done(op.op, op.source, partial, a.output)
    if keys:
        order = sort_order([out[k] for k in keys])
        out = {name: c.take(order) for name, c in out.items()}
    return out


def distinct_column(keys: Sequence[str], aggregates: Sequence[Aggregate]) -> str | None:
    """The one column every aggregate counts the distinct values of, where each is a ``count_distinct`` of that
    column (not a key) and there are keys; else None."""
    columns = {a.column for a in aggregates}
    if not keys or len(columns) != 1 or any(a.op != "count_distinct" for a in aggregates):
        return None
    column = next(iter(columns))
    return None if column in keys else column


def counted_runs(keys: Sequence[str], pairs: Sequence[Column], aggregates: Sequence[Aggregate]) -> dict[str, Column]:
    """The distinct ``(keys..., value)`` pairs a keyed run gave, sorted (``pairs``: the key columns, no nulls), as
    one row per key with each aggregate the number of its pairs: a count of distinct values without a group
    reducer (a run of integers sums and sorts no values).

    Example:
        >>> k = made(INT64, np.array([1, 1, 2, 5, 5, 5]), None)
        >>> counted_runs(["k"], [k], [Aggregate("n", "v", "count_distinct")])["n"].values.tolist()
        [2, 1, 3]
    """
    rows = len(pairs[0])
    change = np.zeros(rows, bool)
    change[:1] = True
    for c in pairs:
        change[1:] |= c.values[1:] != c.values[:-1]
    starts = np.flatnonzero(change)
    counts = np.diff(np.append(starts, rows)).astype(np.int64)
    out = {k: c.take(starts) for k, c in zip(keys, pairs, strict=True)}
    return out | {a.output: made(INT64, counts, None) for a in aggregates}


def _finish(op: str, type_: ColumnType | None, partial: list[np.ndarray[Any, Any]], output: str) -> Column:
    """The result column of one aggregate from its merged partial: null where a group had no value."""
    result = type_of(op, type_, output)
    if op in ("count", "size"):
        return made(result, partial[0], None)
    value, count = partial
    if op == "mean":
        value = value / np.maximum(count, 1)
    value = np.where(count > 0, value, 0)  # a group with no value: a min's or max's filler would not fit the type
    return made(result, value.astype(result.storage), count > 0)


def _empty(types: Mapping[str, ColumnType], keys: Sequence[str], aggregates: Sequence[Aggregate]) -> dict[str, Column]:
    """The aggregates of no rows: no groups, or (no keys) one row with counts 0 and nulls (as SQL gives)."""
    rows = 0 if keys else 1
    out = {k: made(types[k], np.zeros(0, types[k].storage), None) for k in keys}
    for a in aggregates:
        result = type_of(a.op, None if a.column == "*" else types[a.column], a.output)
        nulls = None if a.op in ("count", "size", "count_distinct", "top_k") else np.zeros(rows, bool)
        values = np.zeros(rows, result.storage)
        if result.inner is not None:  # a top-k of no values: an empty list
            values = np.empty(rows, object)
            values[:] = [np.zeros(0, result.inner.storage) for _ in range(rows)]
        out[a.output] = made(result, values, nulls)
    return out


def sort_order(columns: Sequence[Column]) -> np.ndarray[Any, Any]:
    """The rows' order sorted by ``columns`` (the first first), each ascending with its nulls last."""
    plain = len(columns) > 1 and columns[0].valid is None and columns[0].values.dtype != object
    if plain and len(np.unique(columns[0].values)) == len(columns[0]):  # numbers, each once: no tie for the others to break
        return sort_order(columns[:1])
    if len(columns) == 1 and columns[0].valid is None and columns[0].values.dtype != object:
        values = columns[0].values  # one column of numbers without nulls (a run's keys come sorted): no codes needed
        if len(values) < 2 or bool(np.all(values[1:] >= values[:-1])):
            return np.arange(len(values))
        return np.argsort(values, kind="stable")
    codes = []
    for c in columns:
        valid = np.ones(len(c), bool) if c.valid is None else c.valid
        code = np.full(len(c), len(c), np.int64)
        if valid.any():
            kept = c.values[valid]  # (strings by a hash table, their distinct values sorted alone)
            code[valid] = sorted_codes(kept)[0] if kept.dtype == object else np.unique(kept, return_inverse=True)[1].reshape(-1)
        codes.append(code)
    return np.lexsort(codes[::-1]) if codes else np.arange(0)
