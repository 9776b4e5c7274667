"""String columns that travel as their dictionary codes: a row-wise step (a fused map run, or a group-by's prelude)
that reads a client-held string column without nulls only to compare it with string literals (``==``, ``!=``,
``isin``) ships each row's code in the column's sorted distinct values (int8 to int32, the narrowest that holds
them; computed once per column, ``_table/dictionary.py``) instead of its text, and compares codes with the
literals' codes (a literal the column never holds: -1, which no row has). The codes are the run's numbers, not
graph constants: a new string value compiles nothing.

Example: ``col("l_shipmode").isin(["MAIL", "SHIP"])`` over 6e6 rows of 7 distinct modes ships one byte a row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .._table.column import Column
from .._table.dictionary import coded_column
from .._table.schema import STRING
from .expr import Alias, Col, Expr, Lit, Op

_COMPARED = ("eq", "ne", "isin")


def coded(exprs: list[Expr], inputs: Mapping[str, Column]) -> tuple[Callable[[Expr], Expr], dict[str, Column]]:
    """The rewrite of ``exprs`` and their ``inputs`` where each codable string column is its codes (the same name),
    each literal compared with it the literal's code; the identity and ``inputs`` where no column is codable."""
    strings = {n for n, c in inputs.items() if c.type == STRING and c.valid is None}
    codable = strings - frozenset().union(*(_plain_uses(e) for e in exprs))
    if not codable:
        return (lambda e: e), dict(inputs)
    dictionaries: dict[str, np.ndarray[Any, Any]] = {}
    columns = dict(inputs)
    for name in sorted(codable):
        columns[name], dictionaries[name] = coded_column(inputs[name])

    def rewrite(expr: Expr) -> Expr:
        if isinstance(expr, Alias):
            return Alias(rewrite(expr.arg), expr.name)
        if not isinstance(expr, Op):
            return expr
        compared = _compared(expr)
        if compared is not None and compared[0] in dictionaries:
            name, at = compared
            literal = expr.args[at]
            assert isinstance(literal, Lit)
            code = _codes(dictionaries[name], literal.value)
            args = list(expr.args)
            args[at] = Lit(code)
            return Op(expr.op, tuple(args))
        return Op(expr.op, tuple(rewrite(a) for a in expr.args))

    return rewrite, columns


def _compared(expr: Op) -> tuple[str, int] | None:
    """``(column, position of the literal)`` where ``expr`` compares a column with string literals; else None."""
    if expr.op not in _COMPARED or len(expr.args) != 2:
        return None
    a, b = expr.args
    for column, literal, at in ((a, b, 1), (b, a, 0)):
        if isinstance(column, Col) and isinstance(literal, Lit) and _texts(literal.value):
            return (column.name, at) if expr.op != "isin" or at == 1 else None
    return None


def _texts(value: Any) -> bool:
    items = value if isinstance(value, tuple) else (value,)
    return bool(items) and all(isinstance(v, str) for v in items)


def _plain_uses(expr: Expr) -> frozenset[str]:
    """The columns ``expr`` reads otherwise than compared with string literals."""
    if isinstance(expr, Col):
        return frozenset([expr.name])
    if isinstance(expr, Alias):
        return _plain_uses(expr.arg)
    if isinstance(expr, Op):
        if _compared(expr) is not None:
            return frozenset()
        return frozenset().union(*(_plain_uses(a) for a in expr.args))
    return frozenset()


def _codes(dictionary: np.ndarray[Any, Any], value: Any) -> Any:
    """Each string's code in the sorted ``dictionary`` (-1 where it is absent): an int, or a tuple for ``isin``."""
    items = value if isinstance(value, tuple) else (value,)
    at = np.searchsorted(dictionary, np.array(items, dtype=object)) if len(dictionary) else np.zeros(len(items), np.int64)
    found = [int(i) if i < len(dictionary) and dictionary[i] == v else -1 for i, v in zip(at, items, strict=True)]
    return tuple(found) if isinstance(value, tuple) else found[0]
