"""Row-wise steps of expressions (filters, new columns, selects), however many, in ONE map-only run.

The steps are composed on the client into one predicate and one expression per output column (a later step's
column replaced by the expression that made it); columns passed through unchanged do not travel: the run ships only
the columns the expressions read, returns which rows stay and the computed columns, and the client takes the rest.
The traced function is kept by the steps' shape and the input's types, and the literals are the run's broadcast
inputs, so the same query over new data or with new numbers compiles nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from .._io.resident import delete_all, gather_all
from .._io.strings import texts
from .._kinds.map_api import map as map_rows
from .._table.column import Column, made
from .._table.schema import STRING, ColumnType, check_name
from .._table.table import Table
from .coded import coded
from .compile import Compiler, lifted, shape
from .expr import Col, Expr, Op, substituted, used


@attrs.frozen
class Composed:
    """Steps composed over a table's columns: the predicate (None: every row) and each output's expression."""

    where: Expr | None
    outputs: tuple[tuple[str, Expr], ...]

    @property
    def computed(self) -> tuple[tuple[str, Expr], ...]:
        """The outputs that are not a column passed through."""
        return tuple((n, e) for n, e in self.outputs if not isinstance(e, Col))

    @property
    def runs(self) -> bool:
        """Whether a run is needed (a filter or a computed column), or the client alone selects and renames."""
        return self.where is not None or bool(self.computed)


def composed(steps: Sequence[tuple[str, Any]], columns: Sequence[str]) -> Composed:
    """``steps`` (``("where", expr)``, ``("assign", ((name, expr), ...))``, ``("keep", names)``) over ``columns``."""
    env: dict[str, Expr] = {n: Col(n) for n in columns}
    where: Expr | None = None
    for verb, arg in steps:
        if verb == "where":
            _check(used(arg), env, "filter")
            part = substituted(arg, env)
            where = part if where is None else Op("and", (where, part))
        elif verb == "assign":
            for _, e in arg:
                _check(used(e), env, "with_columns")
            env.update({n: substituted(e, env) for n, e in arg})
        else:
            env = {n: env[check_name(n, tuple(env), "select")] for n in arg}
    return Composed(where, tuple(env.items()))


def _check(names: frozenset[str], env: Mapping[str, Expr], where: str) -> None:
    for n in sorted(names):
        check_name(n, tuple(env), where)


@attrs.define
class _Traced:
    """A traced step kept by its shape: the map function, what its trace learned (each output's type and whether it
    holds nulls), and its ``tf.function`` for small tables on the client (traced at its first such call: one call of
    a graph where eager ops would dispatch one by one)."""

    fn: Any
    on_client: Any = None
    types: list[ColumnType] = attrs.field(factory=list)
    nullable: list[bool] = attrs.field(factory=list)


_TRACED: dict[tuple[Any, ...], _Traced] = {}
"""Traced steps by shape (the same function object, so the cluster's program cache finds its compiled program); the
oldest is dropped past ``_KEPT``."""

_KEPT = 256


def rowwise(table: Table, steps: Sequence[tuple[str, Any]], options: Mapping[str, Any], client: bool = False) -> Table:
    """``table`` through ``steps`` in one map-only run (none where the steps only select or rename columns; none
    where ``client``: the map function called on the client as one ``tf.function``, for a small table)."""
    plan = composed(steps, table.columns)
    if not plan.runs:
        return Table({n: table.column(e.name) for n, e in plan.outputs})  # type: ignore[attr-defined]
    exprs = ([] if plan.where is None else [plan.where]) + [e for _, e in plan.computed]
    reads = sorted(frozenset().union(*(used(e) for e in exprs))) or list(table.columns[:1])
    rewrite, inputs = coded(exprs, {n: table.column(n) for n in reads})  # strings compared with literals: codes
    where = None if plan.where is None else rewrite(plan.where)
    computed = [rewrite(e) for _, e in plan.computed]
    exprs = ([] if where is None else [where]) + computed
    signature = tuple((n, c.type.name, c.nullable) for n, c in inputs.items())
    key = (
        signature,
        None if where is None else shape(where),
        tuple((n, shape(e)) for (n, _), e in zip(plan.computed, computed, strict=True)),
    )
    arrays = [a for c in inputs.values() for a in ((c.values,) if c.valid is None else (c.values, c.valid))]
    literals = [v for e in exprs for v in lifted(e)]
    traced = _TRACED.get(key)
    if traced is None:  # traced once eagerly over no rows first: a type error is raised here, not inside a run
        traced = _trace(inputs, where, computed)
        _run(traced.fn, [a[:0] for a in arrays], literals, options)
        _TRACED[key] = traced
        if len(_TRACED) > _KEPT:
            del _TRACED[next(iter(_TRACED))]
    if client and traced.on_client is None:
        specs = [tf.TensorSpec([None] * a.ndim, tf.string if a.dtype == object else a.dtype) for a in arrays + literals]
        # a partial: TensorFlow counts traces by code object, and every step's function shares one
        traced.on_client = tf.function(functools.partial(traced.fn), input_signature=specs, autograph=False)
    fetched = _run(traced.on_client if client else traced.fn, arrays, literals, options, client)
    mask: Any = np.flatnonzero(fetched.pop(0)) if plan.where is not None else slice(None)  # row numbers, made once
    made_columns: dict[str, Column] = {}
    for (name, _), kind, nullable in zip(plan.computed, traced.types, traced.nullable, strict=True):
        values = fetched.pop(0)
        valid = fetched.pop(0) if nullable else None
        made_columns[name] = _column(kind, values, valid).take(mask)
    return Table({n: made_columns[n] if n in made_columns else table.column(e.name).take(mask) for n, e in plan.outputs})  # type: ignore[attr-defined]


def _trace(inputs: Mapping[str, Column], where: Expr | None, computed: list[Expr]) -> _Traced:
    """The map function of one shape: its rows, then the literals; it returns the kept rows' mask and the columns."""
    types = {n: c.type for n, c in inputs.items()}
    traced = _Traced(None)

    def mapped(*tensors: tf.Tensor) -> tuple[tf.Tensor, ...]:
        values: dict[str, tf.Tensor] = {}
        valid: dict[str, tf.Tensor | None] = {}
        i = 0
        for name, c in inputs.items():
            values[name], i = tensors[i], i + 1
            valid[name] = None
            if c.valid is not None:
                valid[name], i = tensors[i], i + 1
        rows = tf.shape(tensors[0])
        compile_ = Compiler(values, valid, types, iter(tensors[i:]))
        out: list[tf.Tensor] = []
        if where is not None:
            value, ok, _ = compile_(where)
            out.append(tf.broadcast_to(value if ok is None else value & ok, rows))
        traced.types.clear()
        traced.nullable.clear()
        for e in computed:
            value, ok, kind = compile_(e)
            out.append(tf.broadcast_to(value, rows))
            if ok is not None:
                out.append(tf.broadcast_to(ok, rows))
            traced.types.append(kind)
            traced.nullable.append(ok is not None)
        return tuple(out)

    traced.fn = mapped
    return traced


def _run(
    fn: Any,
    arrays: list[np.ndarray[Any, Any]],
    literals: list[np.ndarray[Any, Any]],
    options: Mapping[str, Any],
    client: bool = False,
) -> list[Any]:
    """``fn``'s outputs of every row, in row order: one map-only run, its outputs fetched in one more (a call on the
    client, no run, on no rows or where ``client``)."""
    if client or not len(arrays[0]):
        return [t.numpy() for t in fn(*(tf.constant(a) for a in arrays), *(tf.constant(v) for v in literals))]
    out = map_rows(fn, tuple(arrays), broadcast=literals, **options)
    parts = list(out) if isinstance(out, tuple) else [out]
    try:
        return gather_all(parts, timeout=options.get("timeout"), texts=True)
    finally:
        delete_all(parts, timeout=options.get("timeout"))


def _column(kind: ColumnType, values: np.ndarray[Any, Any], valid: np.ndarray[Any, Any] | None) -> Column:
    if kind == STRING:
        values = texts(values)
    return made(kind, values, valid)
