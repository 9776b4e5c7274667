"""Column expressions the planner can read: ``tmr.col("x")``, literals, arithmetic, comparisons, SQL's three-valued
logic, ``is_null()``, ``isin([...])``, ``between``, string matches (``like``, ``startswith``, ``endswith``,
``contains``), ``substr``, a date's ``year()``, ``tmr.when(...).then(...).otherwise(...)`` and ``alias(name)``.

An expression is a frozen tree: the planner reads the columns it uses (``used``), rewrites it (``substituted``) and
compares two by their structure (``key``), since ``==`` on an expression builds a comparison.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import attrs

ARITHMETIC = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
COMPARISONS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
LOGIC = {"and": "&", "or": "|"}
MATCHES = ("like", "startswith", "endswith", "contains")
"""The string matches, each of a string column and one string literal."""


class Expr:
    """A column expression: ``tmr.col("price") * 2 > 10``. Combine with ``+ - * /``, ``== != < <= > >=``, ``& | ~``
    (SQL's three-valued logic: a comparison with a null is null, and a filter keeps the rows where it is true).

    Examples:
        >>> print((tmr.col("price") * 2 > 10) & tmr.col("city").isin(["Oslo", "Rome"]))
        (((col('price') * 2) > 10) & col('city').isin(['Oslo', 'Rome']))
    """

    def _op(self, op: str, other: object, swap: bool = False) -> Op:
        args = (self, wrap(other, op)) if not swap else (wrap(other, op), self)
        return Op(op, args)

    def __add__(self, other: object) -> Op:
        return self._op("add", other)

    def __radd__(self, other: object) -> Op:
        return self._op("add", other, swap=True)

    def __sub__(self, other: object) -> Op:
        return self._op("sub", other)

    def __rsub__(self, other: object) -> Op:
        return self._op("sub", other, swap=True)

    def __mul__(self, other: object) -> Op:
        return self._op("mul", other)

    def __rmul__(self, other: object) -> Op:
        return self._op("mul", other, swap=True)

    def __truediv__(self, other: object) -> Op:
        return self._op("div", other)

    def __rtruediv__(self, other: object) -> Op:
        return self._op("div", other, swap=True)

    def __eq__(self, other: object) -> Op:  # type: ignore[override]  # builds a comparison, as numpy and polars do
        return self._op("eq", other)

    def __ne__(self, other: object) -> Op:  # type: ignore[override]
        return self._op("ne", other)

    def __lt__(self, other: object) -> Op:
        return self._op("lt", other)

    def __le__(self, other: object) -> Op:
        return self._op("le", other)

    def __gt__(self, other: object) -> Op:
        return self._op("gt", other)

    def __ge__(self, other: object) -> Op:
        return self._op("ge", other)

    def __and__(self, other: object) -> Op:
        return self._op("and", other)

    def __rand__(self, other: object) -> Op:
        return self._op("and", other, swap=True)

    def __or__(self, other: object) -> Op:
        return self._op("or", other)

    def __ror__(self, other: object) -> Op:
        return self._op("or", other, swap=True)

    def __invert__(self) -> Op:
        return Op("not", (self,))

    def __neg__(self) -> Op:
        return Op("sub", (Lit(0), self))

    def __hash__(self) -> int:
        return hash(self.key)

    def __bool__(self) -> bool:
        raise TypeError(
            f"an expression has no truth value ({self}); combine conditions with & | ~ (not and/or/not), "
            "and compare expressions inside a plan with their .key"
        )

    def is_null(self) -> Op:
        """True where the value is null (never null itself)."""
        return Op("is_null", (self,))

    def isin(self, values: Any) -> Op:
        """True where the value is one of ``values`` (literals of one kind, no None); null where the value is null."""
        items = tuple(values)
        if not items or any(v is None for v in items):
            raise ValueError(f"isin: expected a non-empty list of values without None, got {values!r}")
        return Op("isin", (self, Lit(tuple(wrap(v, "isin").value for v in items))))  # type: ignore[attr-defined]

    def between(self, low: object, high: object) -> Op:
        """SQL's ``BETWEEN``: ``low <= value <= high``, both ends included."""
        return (self >= low) & (self <= high)

    def _match(self, op: str, text: object) -> Op:
        if not isinstance(text, str):
            raise TypeError(f"{op}: expected a str, got {type(text).__name__} {text!r}")
        return Op(op, (self, Lit(text)))

    def like(self, pattern: str) -> Op:
        """SQL's ``LIKE`` on a string column: ``%`` any run of characters, ``_`` one character, the whole string
        matched (``col("p_type").like("%BRASS")``); null where the value is null."""
        return self._match("like", pattern)

    def startswith(self, prefix: str) -> Op:
        """True where the string starts with ``prefix``; null where the value is null."""
        return self._match("startswith", prefix)

    def endswith(self, suffix: str) -> Op:
        """True where the string ends with ``suffix``; null where the value is null."""
        return self._match("endswith", suffix)

    def contains(self, text: str) -> Op:
        """True where the string contains ``text``; null where the value is null."""
        return self._match("contains", text)

    def substr(self, start: int, length: int) -> Op:
        """SQL's ``SUBSTRING(s, start, length)``: ``length`` characters from the ``start``-th (1 the first)."""
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, length)) or start < 1 or length < 0:
            raise ValueError(f"substr: expected start ≥ 1 and length ≥ 0 (ints), got {start!r} and {length!r}")
        return Op("substr", (self, Lit(start), Lit(length)))

    def year(self) -> Op:
        """The year of a date column (int64), as SQL's ``EXTRACT(YEAR FROM d)``."""
        return Op("year", (self,))

    def alias(self, name: str) -> Alias:
        """The expression under the column name ``name`` (in ``with_columns`` and ``select``)."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"alias: expected a column name (a non-empty str), got {name!r}")
        return Alias(self, name)

    @property
    def key(self) -> tuple[Any, ...]:
        """The structure as plain values: two expressions are the same iff their keys are equal."""
        raise NotImplementedError


@attrs.frozen(eq=False, repr=False)
class Col(Expr):
    """The column ``name``."""

    name: str

    @property
    def key(self) -> tuple[Any, ...]:
        return ("col", self.name)

    def __repr__(self) -> str:
        return f"col({self.name!r})"


@attrs.frozen(eq=False, repr=False)
class Lit(Expr):
    """A literal value (a tuple of them for ``isin``)."""

    value: Any

    @property
    def key(self) -> tuple[Any, ...]:
        return ("lit", type(self.value).__name__, self.value)

    def __repr__(self) -> str:
        return repr(list(self.value)) if isinstance(self.value, tuple) else repr(self.value)


@attrs.frozen(eq=False, repr=False)
class Op(Expr):
    """An operation (``"add"``, ``"lt"``, ``"and"``, ``"not"``, ``"is_null"``, ``"isin"``, ...) of its arguments."""

    op: str
    args: tuple[Expr, ...]

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.op, *(a.key for a in self.args))

    def __repr__(self) -> str:
        if self.op == "not":
            return f"~{self.args[0]!r}"
        if self.op == "keys":
            return "keys(" + ", ".join(repr(a) for a in self.args) + ")"
        if self.op == "if":
            return f"when({self.args[0]!r}).then({self.args[1]!r}).otherwise({self.args[2]!r})"
        if self.op in ("is_null", "isin", "year", "substr", "found_in", "lookup", *MATCHES):
            inside = ", ".join(repr(a) for a in self.args[1:])
            return f"{self.args[0]!r}.{self.op}({inside})"
        sign = {**ARITHMETIC, **COMPARISONS, **LOGIC}[self.op]
        return f"({self.args[0]!r} {sign} {self.args[1]!r})"


@attrs.frozen(eq=False, repr=False)
class Alias(Expr):
    """An expression named ``name``."""

    arg: Expr
    name: str

    @property
    def key(self) -> tuple[Any, ...]:
        return ("alias", self.name, self.arg.key)

    def __repr__(self) -> str:
        return f"{self.arg!r}.alias({self.name!r})"


def col(name: str) -> Col:
    """The column ``name`` of a lazy table, as an expression: ``tmr.col("price") > 10``.

    Examples:
        >>> t = tmr.lazy(tmr.table({"x": np.array([1, 5, 9])}))
        >>> t.filter(tmr.col("x") > 2).with_columns((tmr.col("x") * 10).alias("y")).collect(cluster=cluster).to_dict()["y"]
        array([50, 90])
    """
    if not isinstance(name, str):
        raise TypeError(f"col: expected a column name (a str), got {type(name).__name__} {name!r}")
    return Col(name)


@attrs.frozen
class When:
    """``tmr.when(condition)``: give its value with `then(value)`."""

    condition: Expr

    def then(self, value: object) -> Then:
        """The value where the condition is true."""
        return Then(self.condition, wrap(value, "then"))


@attrs.frozen
class Then:
    """``tmr.when(condition).then(value)``: finish it with `otherwise(value)`."""

    condition: Expr
    value: Expr

    def otherwise(self, value: object) -> Op:
        """The value where the condition is false or null: the whole expression."""
        return Op("if", (self.condition, self.value, wrap(value, "otherwise")))


def when(condition: Expr) -> When:
    """SQL's ``CASE WHEN condition THEN a ELSE b END``: ``tmr.when(cond).then(a).otherwise(b)`` is ``a`` where
    ``cond`` is true and ``b`` where it is false or null (nest another ``when`` in ``otherwise`` for more branches).

    Examples:
        >>> t = tmr.lazy({"x": np.array([1, 5, 9])})
        >>> big = tmr.when(tmr.col("x") > 4).then(tmr.col("x")).otherwise(0)
        >>> t.with_columns(y=big).collect(cluster=cluster).to_dict()["y"].tolist()
        [0, 5, 9]
    """
    if not isinstance(condition, Expr):
        raise TypeError(f"when: expected a condition expression (tmr.col('x') > 0), got {condition!r}")
    return When(condition)


@attrs.frozen(eq=False, repr=False)
class Subquery(Expr):
    """The one value of a one-row, one-column query, as written (``LazyTable.scalar()``): ``plan`` is its plan's root
    node; the optimizer lifts it into a ``Param`` of the plan's ``Bound`` root (``scalars.lifted``)."""

    plan: Any

    @property
    def key(self) -> tuple[Any, ...]:
        return ("subquery", id(self.plan))

    def __repr__(self) -> str:
        return "scalar(subquery)"


@attrs.frozen(eq=False, repr=False)
class Param(Expr):
    """The value of the ``index``-th query of the plan's ``Bound`` root: a literal once that query has run."""

    index: int

    @property
    def key(self) -> tuple[Any, ...]:
        return ("param", self.index)

    def __repr__(self) -> str:
        return f"scalar({self.index})"


@attrs.frozen(eq=False, repr=False)
class Rows(Param):
    """The rows of the ``index``-th query of the plan's ``Bound`` root, read whole by a lookup
    (``lookups.lookup_joins``): ``col(k).found_in(table(i))``, ``col(k).lookup(table(i), 'c')``."""

    @property
    def key(self) -> tuple[Any, ...]:
        return ("rows", self.index)

    def __repr__(self) -> str:
        return f"table({self.index})"


def wrap(value: object, where: str) -> Expr:
    """``value`` as an expression: an expression itself, or a literal number, bool, string or ``datetime.date``."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, int, float, str, datetime.date)) and not isinstance(value, datetime.datetime):
        return Lit(value)
    raise TypeError(
        f"{where}: expected an expression (tmr.col(...)) or a literal number, bool, str or datetime.date, "
        f"got {type(value).__name__} {value!r}"
    )


def named(expr: Expr, where: str) -> tuple[str, Expr]:
    """The output name of ``expr`` (an alias or a column) and the expression it computes."""
    if isinstance(expr, Alias):
        return expr.name, expr.arg
    if isinstance(expr, Col):
        return expr.name, expr
    raise ValueError(f"{where}: name the computed column {expr} with .alias('name'), e.g. (col('x') * 2).alias('x2')")


def used(expr: Expr) -> frozenset[str]:
    """The names of the columns ``expr`` reads."""
    if isinstance(expr, Col):
        return frozenset({expr.name})
    if isinstance(expr, Op):
        return frozenset().union(*(used(a) for a in expr.args))
    if isinstance(expr, Alias):
        return used(expr.arg)
    return frozenset()


def substituted(expr: Expr, env: Mapping[str, Expr]) -> Expr:
    """``expr`` with each column named in ``env`` replaced by its expression there."""
    if isinstance(expr, Col):
        return env.get(expr.name, expr)
    if isinstance(expr, Op):
        return Op(expr.op, tuple(substituted(a, env) for a in expr.args))
    if isinstance(expr, Alias):
        return Alias(substituted(expr.arg, env), expr.name)
    return expr


def conjuncts(expr: Expr) -> list[Expr]:
    """The parts of ``a & b & ...``, each a filter of its own (a row is kept iff every part is true)."""
    if isinstance(expr, Op) and expr.op == "and":
        return [*conjuncts(expr.args[0]), *conjuncts(expr.args[1])]
    return [expr]
