"""Expressions compiled into TensorFlow ops over a batch of rows ``{name: tensor}`` with their validity, with SQL's
nulls: arithmetic and comparisons with a null are null, ``&`` and ``|`` follow three-valued logic (``False & null``
is False, ``True | null`` is True), ``is_null()`` is never null.

Literal numbers, bools and dates are *lifted*: they enter the graph as run inputs (the map's broadcast values, in the
order ``lifted`` lists them), so a step traced once serves every value; ``shape`` is an expression's structure
without those values, the key under which its traced step is kept. Strings stay graph constants (a run's broadcast
values hold numbers only), so their values are part of the shape.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from .._table.schema import DATE, STRING, ColumnType
from .expr import ARITHMETIC, COMPARISONS, MATCHES, Alias, Col, Expr, Lit, Op

BOOL = ColumnType("bool", np.dtype(np.bool_))
_EPOCH = datetime.date(1970, 1, 1)
LOOKUPS = ("found_in", "lookup")
"""The lookups of a small table's rows (``lookups.py``): their table's inputs are lifted whole."""
BUCKETS = (1 << 63) - 1
"""A string key's fingerprint in a lookup: ``tf.strings.to_hash_bucket_fast`` into this many buckets (Fingerprint64
of its UTF-8 bytes, the same on the client, ``lookup_table.fingerprints``)."""

Compiled = tuple[tf.Tensor, "tf.Tensor | None", ColumnType]
"""An expression's values, validity (None: never null) and type."""


def _liftable(value: Any) -> bool:
    items = value if isinstance(value, tuple) else (value,)
    return not any(isinstance(v, str) for v in items)


def _array(value: Any) -> np.ndarray[Any, Any]:
    """A literal as the run input that feeds it: int64, float64, bool, or int32 days for a date."""
    items = list(value) if isinstance(value, tuple) else value
    if isinstance(value, datetime.date) or (isinstance(value, tuple) and isinstance(value[0], datetime.date)):
        days = [(d - _EPOCH).days for d in (items if isinstance(items, list) else [items])]
        return np.array(days if isinstance(items, list) else days[0], np.int32)
    array = np.asarray(items)
    if array.dtype.kind in "iu":
        return array.astype(np.int64)
    return array.astype(np.float64) if array.dtype.kind == "f" else array


def shape(expr: Expr) -> tuple[Any, ...]:
    """``expr``'s structure with its lifted literals' values left out (their types and lengths kept)."""
    if isinstance(expr, Lit):
        if _liftable(expr.value):
            array = _array(expr.value)
            return ("slot", array.dtype.str, array.shape)
        return expr.key
    if isinstance(expr, Op) and expr.op in LOOKUPS:
        return (expr.op, shape(expr.args[0]), _table(expr).shape(_looked(expr)))
    if isinstance(expr, Op):
        return (expr.op, *(shape(a) for a in expr.args))
    if isinstance(expr, Alias):
        return ("alias", expr.name, shape(expr.arg))
    return expr.key


def _table(expr: Op) -> Any:
    """A lookup's table (``lookup_table.LookupTable``: its ``table(i)`` resolved, ``scalars.resolved``)."""
    table = expr.args[1]
    if not isinstance(table, Lit):
        raise TypeError(f"{expr!r}: its table is read once the plan runs, not before")
    return table.value


def _looked(expr: Op) -> str | None:
    """The column a ``lookup`` takes; None for ``found_in``."""
    return expr.args[2].value if expr.op == "lookup" else None  # type: ignore[attr-defined]


def lifted(expr: Expr) -> list[np.ndarray[Any, Any]]:
    """The values of ``expr``'s lifted literals, in the order its compiled ops read them."""
    if isinstance(expr, Lit):
        return [_array(expr.value)] if _liftable(expr.value) else []
    if isinstance(expr, Op) and expr.op in LOOKUPS:
        return [*lifted(expr.args[0]), *_table(expr).inputs(_looked(expr))]
    if isinstance(expr, Op):
        return [v for a in expr.args for v in lifted(a)]
    if isinstance(expr, Alias):
        return lifted(expr.arg)
    return []


def _type_of_literal(value: Any) -> ColumnType:
    first = value[0] if isinstance(value, tuple) else value
    if isinstance(first, str):
        return STRING
    if isinstance(first, datetime.date):
        return DATE
    return ColumnType.of(_array(value).dtype)


def _both(a: tf.Tensor | None, b: tf.Tensor | None) -> tf.Tensor | None:
    if a is None:
        return b
    return a if b is None else tf.logical_and(a, b)


def _common(a: ColumnType, b: ColumnType, op: str) -> ColumnType:
    """The type two operands meet as (numbers by numpy's promotion; other types only with their own type)."""
    if a.is_numeric and b.is_numeric:
        return ColumnType.of(np.result_type(a.storage, b.storage))
    if a == b and (a != STRING or op in ("eq", "ne", "isin")):
        return a
    if a == STRING and b == STRING:
        raise TypeError(f"{op}: strings compare with == and != (and isin) only; order them with sort(), not {op}")
    raise TypeError(
        f"{op}: cannot combine a {a.name} with a {b.name}; compare a date column with datetime.date(...), "
        "numbers with numbers, strings with strings"
    )


def _cast(t: tf.Tensor, to: ColumnType) -> tf.Tensor:
    return t if to == STRING or t.dtype == tf.as_dtype(to.storage) else tf.cast(t, tf.as_dtype(to.storage))


class Compiler:
    """Compiles expressions over one batch: ``values`` and ``valid`` of each column, their ``types``, and the lifted
    literals' tensors in order (``slots``)."""

    def __init__(
        self,
        values: Mapping[str, tf.Tensor],
        valid: Mapping[str, tf.Tensor | None],
        types: Mapping[str, ColumnType],
        slots: Iterator[tf.Tensor],
    ) -> None:
        self.values, self.valid, self.types, self.slots = values, valid, types, slots

    def __call__(self, expr: Expr) -> Compiled:
        if isinstance(expr, Col):
            return self.values[expr.name], self.valid[expr.name], self.types[expr.name]
        if isinstance(expr, Alias):
            return self(expr.arg)
        if isinstance(expr, Lit):
            kind = _type_of_literal(expr.value)
            value = next(self.slots) if _liftable(expr.value) else tf.constant(expr.value, tf.string)
            return value, None, kind
        assert isinstance(expr, Op)
        return self._op(expr)

    def _op(self, expr: Op) -> Compiled:
        op = expr.op
        if op in LOOKUPS:
            return self._lookup(expr)
        parts = [self(a) for a in expr.args]
        if op == "is_null":
            ok = parts[0][1]
            return (tf.zeros_like(parts[0][0], tf.bool) if ok is None else tf.logical_not(ok)), None, BOOL
        if op in ("and", "or", "not"):
            return self._logic(op, parts)
        if op in MATCHES or op in ("substr", "year", "if"):
            return _function(op, parts, expr)
        (a, a_ok, a_type), (b, b_ok, b_type) = parts[0], parts[-1]
        common = _common(a_type, b_type, op)
        a, b = _cast(a, common), _cast(b, common)
        if op == "isin":
            hits = tf.equal(tf.expand_dims(a, -1), tf.expand_dims(b, 0))
            return tf.reduce_any(hits, axis=-1), a_ok, BOOL
        if op in COMPARISONS:
            fn = {"eq": tf.equal, "ne": tf.not_equal, "lt": tf.less, "le": tf.less_equal, "gt": tf.greater}
            return fn.get(op, tf.greater_equal)(a, b), _both(a_ok, b_ok), BOOL
        if op not in ARITHMETIC or not common.is_numeric or common == BOOL:
            raise TypeError(f"{op}: arithmetic needs number columns, got {a_type.name} and {b_type.name}; cast them first")
        if op == "div":
            return tf.math.truediv(tf.cast(a, tf.float64), tf.cast(b, tf.float64)), _both(a_ok, b_ok), _type_of_literal(0.0)
        fn = {"add": tf.add, "sub": tf.subtract}.get(op, tf.multiply)
        return fn(a, b), _both(a_ok, b_ok), common

    def _lookup(self, expr: Op) -> Compiled:
        """``found_in`` or ``lookup``: the key's row in the table's sorted keys by a binary search (its inputs:
        ``LookupTable.inputs``, in that order after the key's own). A string key or several keys are coded first,
        each column's value ranked among the table's (``lookup_table.KeyPart``) and the ranks combined by the strides."""
        held = expr.args[0]
        parts = [self(a) for a in held.args] if isinstance(held, Op) and held.op == "keys" else [self(held)]
        for _, _, kind in parts:
            if not (kind in (DATE, STRING) or (kind.is_numeric and kind.storage.kind in "iu")):
                raise TypeError(f"{expr!r}: a lookup's key must be an integer, date or string column, got a {kind.name}")
        ok: tf.Tensor | None = None
        for _, part_ok, _ in parts:
            ok = _both(ok, part_ok)
        if len(parts) == 1 and parts[0][2] != STRING:
            key = tf.cast(parts[0][0], tf.int64)
        else:
            ranks = []
            for value, _, kind in parts:
                rank, found = self._rank(value, kind)
                ranks.append(rank)
                ok = _both(ok, found)
            strides = next(self.slots)
            key = tf.add_n([rank * strides[i] for i, rank in enumerate(ranks)])
        keys, count = next(self.slots), next(self.slots)
        at = tf.searchsorted(keys, key, side="left", out_type=tf.int64)
        near = tf.minimum(at, count)  # the keys are padded past count: a valid index
        hit = tf.logical_and(at < count, tf.equal(tf.gather(keys, near), key))
        hit = hit if ok is None else tf.logical_and(hit, ok)
        if expr.op == "found_in":
            return hit, None, BOOL
        column = _looked(expr)
        assert column is not None
        looked, nullable = _table(expr).kind(column)
        if looked == STRING:  # code points and lengths: the table's strings, made once, then gathered
            points = next(self.slots)
            texts = tf.RaggedTensor.from_tensor(points, lengths=next(self.slots))
            value = tf.gather(tf.strings.unicode_encode(texts, "UTF-8"), near)
        else:
            value = tf.gather(next(self.slots), near)
        valid = tf.logical_and(hit, tf.gather(next(self.slots), near)) if nullable else hit
        return value, valid, looked

    def _rank(self, value: tf.Tensor, kind: ColumnType) -> tuple[tf.Tensor, tf.Tensor]:
        """A key column's rank among a lookup table's distinct values of it (``lookup_table.KeyPart``'s inputs), and
        whether it is there: an integer by a binary search, a string by its fingerprint's, then compared whole."""
        values, count = next(self.slots), next(self.slots)
        code = tf.strings.to_hash_bucket_fast(value, BUCKETS) if kind == STRING else tf.cast(value, tf.int64)
        at = tf.searchsorted(values, code, side="left", out_type=tf.int64)
        near = tf.minimum(at, count)
        found = tf.logical_and(at < count, tf.equal(tf.gather(values, near), code))
        if kind == STRING:
            points = next(self.slots)
            texts = tf.strings.unicode_encode(tf.RaggedTensor.from_tensor(points, lengths=next(self.slots)), "UTF-8")
            found = tf.logical_and(found, tf.equal(tf.gather(texts, near), value))
        return near, found

    def _logic(self, op: str, parts: list[Compiled]) -> Compiled:
        for _, _, kind in parts:
            if kind != BOOL:
                raise TypeError(f"{op}: & | ~ combine conditions (bool), got a {kind.name}; compare it first, e.g. col('x') > 0")
        (a, a_ok, _), (b, b_ok, _) = parts[0], parts[-1]
        if op == "not":
            return tf.logical_not(a), a_ok, BOOL
        if a_ok is None and b_ok is None:
            return (tf.logical_and if op == "and" else tf.logical_or)(a, b), None, BOOL
        a_ok = tf.ones_like(a) if a_ok is None else a_ok
        b_ok = tf.ones_like(b) if b_ok is None else b_ok
        if op == "and":  # a null counts as True unless the other side is False
            value = tf.logical_and(tf.logical_or(a, ~a_ok), tf.logical_or(b, ~b_ok))
            known = (a_ok & b_ok) | (a_ok & ~a) | (b_ok & ~b)
        else:  # a null counts as False unless the other side is True
            value = tf.logical_or(a & a_ok, b & b_ok)
            known = (a_ok & b_ok) | (a_ok & a) | (b_ok & b)
        return value, known, BOOL


def _pattern(op: str, text: str) -> str:
    """The RE2 pattern (whole string) of a string match: SQL's ``%`` and ``_`` for ``like``, ``text`` literally else."""
    if op == "like":
        return "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in text)
    return {"startswith": "{}.*", "endswith": ".*{}", "contains": ".*{}.*"}[op].format(re.escape(text))


def _year(days: tf.Tensor) -> tf.Tensor:
    """The proleptic Gregorian year of days since 1970-01-01 (H. Hinnant's ``civil_from_days``), int64."""
    z = tf.cast(days, tf.int64) + 719468
    era = tf.math.floordiv(z, 146097)
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    month_from_march = (5 * doy + 2) // 153
    return yoe + era * 400 + tf.cast(month_from_march >= 10, tf.int64)


def _function(op: str, parts: list[Compiled], expr: Op) -> Compiled:
    """String matches, ``substr``, ``year`` and ``when/then/otherwise``."""
    (a, a_ok, a_type) = parts[0]
    if op in MATCHES or op == "substr":
        if a_type != STRING:
            raise TypeError(f"{op}: expected a string column, got a {a_type.name} ({expr}); it applies to strings only")
        if op == "substr":
            chars = tf.cast(tf.strings.length(a, unit="UTF8_CHAR"), tf.int64)
            start = tf.minimum(parts[1][0] - 1, chars)  # past the end (a null's empty string too): empty, as SQL
            length = tf.broadcast_to(parts[2][0], tf.shape(start))
            return tf.strings.substr(a, start, length, unit="UTF8_CHAR"), a_ok, STRING
        text = expr.args[1].value  # type: ignore[attr-defined]
        return tf.strings.regex_full_match(a, "(?s)" + _pattern(op, text)), a_ok, BOOL
    if op == "year":
        if a_type != DATE:
            raise TypeError(f"year: expected a date column, got a {a_type.name} ({expr})")
        return _year(a), a_ok, ColumnType.of(np.dtype(np.int64))
    (b, b_ok, b_type), (c, c_ok, c_type) = parts[1], parts[2]
    if a_type != BOOL:
        raise TypeError(f"when: expected a condition (bool), got a {a_type.name}; compare it first, e.g. col('x') > 0")
    common = _common(b_type, c_type, "when")
    b, c = _cast(b, common), _cast(c, common)
    chosen = a if a_ok is None else a & a_ok  # a null condition takes otherwise's value, as SQL's CASE
    value = tf.where(chosen, b, c)
    if b_ok is None and c_ok is None:
        return value, None, common
    ones = tf.ones_like(chosen)
    return value, tf.where(chosen, ones if b_ok is None else b_ok, ones if c_ok is None else c_ok), common
