"""A group-by with the row-wise steps below it run in its own map: ONE keyed run filters, computes the new columns
and aggregates, and ships only the columns the steps and the aggregates read.

The steps are composed as ``rowwise`` composes them (one predicate, one expression per column the group-by reads)
into a ``Prelude`` of the group-by's keyed job. The prelude is kept by the steps' shape and the input's types (the
same function object, so the job and its compiled program are found again), and the literals are the run's broadcast
inputs: the same query over new data or with new numbers compiles nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from .._table.aggregate import Aggregate, Prelude, aggregate, counted_runs, distinct_column
from .._table.column import Column, ResidentColumn
from .._table.dictionary import PACKED, packed
from .._table.resident import ResidentTable
from .._table.schema import STRING, check_name
from .._table.table import Table
from .coded import coded
from .compile import Compiler, lifted, shape
from .expr import Col, Expr, used
from .rowwise import composed

_PRELUDES: dict[tuple[Any, ...], Prelude] = {}
"""Preludes by shape; the oldest is dropped past ``_KEPT``."""

_KEPT = 256


def grouped(
    table: Table | ResidentTable,
    steps: Sequence[tuple[str, Any]],
    keys: Sequence[str],
    aggs: Sequence[tuple[str, str, str]],
    options: Mapping[str, Any],
) -> Table:
    """``table`` through ``steps``, grouped by ``keys`` with ``aggs`` (``(output, column, op)``), in one keyed run:
    the table ``Table.group_by(keys).agg(...)`` gives over the steps' output. String keys that the steps pass
    through are packed into one integer key on the client (``_table/dictionary.py``); a count of the distinct values
    of one column passed through counts the distinct packed (keys, column) pairs (``counted_runs``)."""
    plan = composed(steps, table.columns)
    env = dict(plan.outputs)
    names = tuple(env)
    parsed = [Aggregate.parse(out, (column, op), names) for out, column, op in aggs]
    keys = [check_name(k, names, "group_by") for k in keys]
    sources = [env[k] for k in keys]
    counted = distinct_column(keys, parsed)
    client = isinstance(table, Table)  # (packed keys: client columns only)
    if client and counted is not None and all(isinstance(e, Col) for e in (*sources, env[counted])):
        columns = [table.column(e.name) for e in (*sources, env[counted])]  # type: ignore[attr-defined]
        pack = packed(columns)
        if pack is not None:  # (keys, counted) distinct as one packed key, then counted per key on the client
            table = Table({**{n: table.column(n) for n in table.columns}, PACKED: pack.column})  # type: ignore[misc]
            size = [Aggregate("", "*", "size")]
            out = _aggregated(table, plan.where, {**env, PACKED: Col(PACKED)}, [PACKED], size, options)
            return Table(counted_runs(keys, pack.unpacked(out[PACKED])[:-1], parsed))
    plain = client and keys and all(isinstance(e, Col) for e in sources)
    pack = packed([table.column(e.name) for e in sources]) if plain else None  # type: ignore[attr-defined]
    if pack is None:
        return Table(_aggregated(table, plan.where, env, keys, parsed, options))
    table = Table({**{n: table.column(n) for n in table.columns}, PACKED: pack.column})  # type: ignore[misc]
    out = _aggregated(table, plan.where, {**env, PACKED: Col(PACKED)}, [PACKED], parsed, options)
    return Table({**dict(zip(keys, pack.unpacked(out.pop(PACKED)), strict=True)), **out})


def _aggregated(
    table: Table | ResidentTable,
    where: Expr | None,
    env: Mapping[str, Expr],
    keys: Sequence[str],
    parsed: Sequence[Aggregate],
    options: Mapping[str, Any],
) -> dict[str, Column]:
    """The aggregated columns of ``env``'s columns (each an expression of ``table``'s) where ``where`` holds."""
    wanted = list(dict.fromkeys([*keys, *(a.column for a in parsed if a.column != "*")]))
    outputs = [(n, env[n]) for n in wanted]
    exprs = ([] if where is None else [where]) + [e for _, e in outputs]
    reads = sorted(frozenset().union(*(used(e) for e in exprs))) or list(table.columns[:1])
    columns = {n: table.column(n) for n in reads}
    # a client's strings compared with literals: their codes
    rewrite, inputs = coded(exprs, columns) if isinstance(table, Table) else ((lambda e: e), columns)  # type: ignore[arg-type]
    where = None if where is None else rewrite(where)
    outputs = [(n, rewrite(e)) for n, e in outputs]
    exprs = ([] if where is None else [where]) + [e for _, e in outputs]
    signature = tuple((n, c.type.name, c.nullable) for n, c in inputs.items())
    key = (signature, None if where is None else shape(where), tuple((n, shape(e)) for n, e in outputs))
    literals = [v for e in exprs for v in lifted(e)]
    prelude = _PRELUDES.get(key)
    if prelude is None:
        prelude = _prelude(inputs, where, outputs, literals)
        _PRELUDES[key] = prelude
        if len(_PRELUDES) > _KEPT:
            del _PRELUDES[next(iter(_PRELUDES))]
    return aggregate(inputs, list(keys), parsed, options, prelude, literals)


def _prelude(
    inputs: Mapping[str, Column | ResidentColumn],
    where: Expr | None,
    outputs: Sequence[tuple[str, Expr]],
    literals: Sequence[Any],
) -> Prelude:
    """The prelude of one shape, its output types learned by calling it eagerly on no rows (a type error is raised
    here, before any run)."""
    types = {n: c.type for n, c in inputs.items()}

    first = 0 if where is None else len(lifted(where))  # the filter's literals come first, then the new columns'

    def compiler(columns: Mapping[str, tuple[tf.Tensor, tf.Tensor | None]], slots: Sequence[tf.Tensor]) -> Compiler:
        return Compiler({n: v for n, (v, _) in columns.items()}, {n: ok for n, (_, ok) in columns.items()}, types, iter(slots))

    def keep(columns: Mapping[str, tuple[tf.Tensor, tf.Tensor | None]], slots: Sequence[tf.Tensor]) -> tf.Tensor:
        assert where is not None
        value, ok, _ = compiler(columns, slots[:first])(where)
        return tf.broadcast_to(value if ok is None else value & ok, tf.shape(next(iter(columns.values()))[0]))

    def fn(columns: Mapping[str, tuple[tf.Tensor, tf.Tensor | None]], slots: Sequence[tf.Tensor]) -> Any:
        compile_, rows = compiler(columns, slots[first:]), tf.shape(next(iter(columns.values()))[0])
        out = {}
        for name, e in outputs:
            value, ok, _ = compile_(e)
            out[name] = (tf.broadcast_to(value, rows), None if ok is None else tf.broadcast_to(ok, rows))
        return out

    empty = {  # (a column on the client or on the workers: its type's storage)
        n: (tf.zeros([0], tf.string if c.type == STRING else c.type.storage), tf.zeros([0], tf.bool) if c.nullable else None)
        for n, c in inputs.items()
    }
    learned = []
    slots = iter([tf.constant(v) for v in literals])
    probe = Compiler({n: v for n, (v, _) in empty.items()}, {n: ok for n, (_, ok) in empty.items()}, types, slots)
    if where is not None:
        probe(where)
    for name, e in outputs:
        _, ok, kind = probe(e)
        learned.append((name, kind, ok is not None))
    reads = tuple((n, c.nullable) for n, c in inputs.items())
    return Prelude(fn, reads, tuple(learned), None if where is None else keep)
