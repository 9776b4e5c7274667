"""Scalar subqueries in the plan of their query: ``query.scalar()`` (a ``Subquery`` expression) stands for the one
value of a one-row, one-column query. ``lifted`` (``optimize`` applies it before its rules) replaces each by
``Param(i)`` and roots the plan in a ``Bound`` node whose ``queries[i]`` computes it, so the rules see one plan
(``share`` merges what the query and its subquery both compute, ``prune`` asks of a shared node what both use) and
``execute`` runs it in one ``collect()``, each node once; the value enters the nodes that read it as a literal
(``resolved``): a run's input, not a constant of its graph.

Example (TPC-H Q11): ``parts.filter(col("value") > stock.agg(total=("value", "sum")).scalar() * 0.0001)``, where
``parts`` is ``stock``'s group-by: the joins ``stock`` is made of run once, for both.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from .._table.table import Table
from .expr import Alias, Expr, Lit, Op, Param, Subquery
from .plan import Aggregated, Assign, Bound, Fused, Node, Where, key, rebuilt


def lifted(plan: Node) -> Node:
    """``plan`` with each ``Subquery`` of its filters and new columns (and of theirs) a ``Param`` of a ``Bound`` root
    (equal subqueries one query); ``plan`` itself where it has none."""
    queries: list[Node] = []
    index: dict[tuple[Any, ...], int] = {}

    def param(expr: Expr) -> Expr:
        if isinstance(expr, Subquery):
            query = rebuilt(expr.plan, step)  # its own subqueries first: a query runs after those it reads
            at = index.setdefault(key(query), len(queries))
            if at == len(queries):
                queries.append(query)
            return Param(at)
        if isinstance(expr, Op):
            return Op(expr.op, tuple(param(a) for a in expr.args))
        if isinstance(expr, Alias):
            return Alias(param(expr.arg), expr.name)
        return expr

    def step(node: Node) -> Node:
        if isinstance(node, Where) and _reads(node.predicate, Subquery):
            return Where(node.input, param(node.predicate))
        if isinstance(node, Assign) and any(_reads(e, Subquery) for _, e in node.columns):
            return Assign(node.input, tuple((n, param(e)) for n, e in node.columns))
        return node

    root = rebuilt(plan, step)
    return Bound(root, tuple(queries)) if queries else root


def resolved(node: Node, values: dict[int, Any]) -> Node:
    """``node`` with each ``Param`` of its expressions the literal of its value in ``values`` (the same node where it
    reads none)."""
    if isinstance(node, Where) and _reads(node.predicate, Param):
        return Where(node.input, _literal(node.predicate, values))
    if isinstance(node, Assign) and any(_reads(e, Param) for _, e in node.columns):
        return Assign(node.input, tuple((n, _literal(e, values)) for n, e in node.columns))
    if isinstance(node, (Fused, Aggregated)) and any(_reads(e, Param) for e in _expressions(node.steps)):
        return attrs.evolve(node, steps=_steps(node.steps, values))
    return node


def params(node: Node) -> list[int]:
    """The indexes of the ``Param`` (and ``Rows``) that ``node``'s expressions read, each once, in order."""
    if isinstance(node, Where):
        exprs = [node.predicate]
    elif isinstance(node, Assign):
        exprs = [e for _, e in node.columns]
    elif isinstance(node, (Fused, Aggregated)):
        exprs = _expressions(node.steps)
    else:
        return []
    found: list[int] = []
    for e in exprs:
        _collect(e, found)
    return list(dict.fromkeys(found))


def _collect(expr: Expr, found: list[int]) -> None:
    if isinstance(expr, Param):
        found.append(expr.index)
    elif isinstance(expr, Op):
        for a in expr.args:
            _collect(a, found)
    elif isinstance(expr, Alias):
        _collect(expr.arg, found)


def value_of(table: Table, index: int) -> Any:
    """The one value of ``table``, the result of the query of ``scalar(index)``, as a Python literal.

    Raises:
        ValueError: not one row of one column, or a null (SQL's null scalar is not supported here).
    """
    if len(table) != 1 or len(table.columns) != 1:
        raise ValueError(
            f"scalar({index}): a scalar subquery must give one row of one column, got {len(table)} rows of "
            f"{list(table.columns)}; aggregate it, e.g. .agg(total=('x', 'sum')), and select one column"
        )
    values = table.to_dict()[table.columns[0]]
    value = values[0]
    if np.ma.is_masked(value) or value is None or (isinstance(value, np.datetime64) and np.isnat(value)):
        raise ValueError(
            f"scalar({index}): the subquery's value is null; a null scalar is not supported: filter the null "
            "out of its input, or collect it first and branch on it"
        )
    return value.item() if isinstance(value, np.generic) else value


def _reads(expr: Expr, kind: type) -> bool:
    if isinstance(expr, kind):
        return True
    if isinstance(expr, Op):
        return any(_reads(a, kind) for a in expr.args)
    return isinstance(expr, Alias) and _reads(expr.arg, kind)


def _literal(expr: Expr, values: dict[int, Any]) -> Expr:
    if isinstance(expr, Param):
        return Lit(values[expr.index])
    if isinstance(expr, Op):
        return Op(expr.op, tuple(_literal(a, values) for a in expr.args))
    if isinstance(expr, Alias):
        return Alias(_literal(expr.arg, values), expr.name)
    return expr


def _expressions(steps: tuple[tuple[str, Any], ...]) -> list[Expr]:
    out: list[Expr] = []
    for verb, arg in steps:
        out += [arg] if verb == "where" else [e for _, e in arg] if verb == "assign" else []
    return out


def _steps(steps: tuple[tuple[str, Any], ...], values: dict[int, Any]) -> tuple[tuple[str, Any], ...]:
    out: list[tuple[str, Any]] = []
    for verb, arg in steps:
        if verb == "where":
            out.append((verb, _literal(arg, values)))
        elif verb == "assign":
            out.append((verb, tuple((n, _literal(e, values)) for n, e in arg)))
        else:
            out.append((verb, arg))
    return tuple(out)
