"""A Griffe extension for the API reference (mkdocs.yml): the ``__init__`` that ``attrs`` writes, read statically.

Griffe re-creates the ``__init__`` of a ``dataclasses.dataclass`` but not of an ``attrs`` class, so
``tmr.Plan``, ``tmr.RunStats``, ``tmr.Cluster``... would render with no signature.  This extension
gives each class decorated with ``attrs.frozen`` / ``attrs.define`` / ``attrs.mutable`` (or
``attr.s``, ``attr.attrs``) the ``__init__`` attrs generates: one parameter per annotated field,
in order, with its default (``attrs.field(default=...)``, ``factory=...`` shown as a call),
keyword-only where ``kw_only=True``; fields with ``init=False`` and ClassVars are left out, and so
are private fields (a leading underscore: attrs accepts them, but they are not part of the API).
Nothing is imported: the build does not load TensorFlow.
"""

from __future__ import annotations

from typing import Any

from griffe import (
    Attribute,
    Class,
    Expr,
    ExprCall,
    Extension,
    Function,
    Module,
    Parameter,
    ParameterKind,
    Parameters,
)

DECORATORS = {"attrs.frozen", "attrs.define", "attrs.mutable", "attr.s", "attr.attrs", "attr.frozen", "attr.define"}
FIELDS = {"attrs.field", "attr.ib", "attr.attrib", "attr.field"}


def _call_arguments(expr: Any) -> dict[str, Any]:
    if not isinstance(expr, ExprCall):
        return {}
    return {a.name: a.value for a in expr.arguments if hasattr(a, "name")}


def _decorator(class_: Class) -> Any:
    for decorator in class_.decorators:
        value = decorator.value
        path = value.canonical_path if isinstance(value, Expr) else str(value)
        if isinstance(value, ExprCall):
            path = value.function.canonical_path if isinstance(value.function, Expr) else str(value.function)
        if path in DECORATORS:
            return value
    return None


def _parameters(class_: Class) -> list[Parameter]:
    options = _call_arguments(_decorator(class_))
    if str(options.get("init")) == "False":
        return []
    kw_only_class = str(options.get("kw_only")) == "True"
    parameters = []
    for member in class_.members.values():
        if member.is_alias or not isinstance(member, Attribute) or member.annotation is None:
            continue
        if "property" in member.labels or ("class-attribute" in member.labels and "instance-attribute" not in member.labels):
            continue
        value = member.value
        field: dict[str, Any] = {}
        if isinstance(value, ExprCall) and isinstance(value.function, Expr) and value.function.canonical_path in FIELDS:
            field = _call_arguments(value)
        if str(field.get("init")) == "False" or member.name.startswith("_"):
            continue
        if "factory" in field:
            default: Any = ExprCall(function=field["factory"], arguments=[])
        elif field:
            default = field.get("default")
        else:
            default = value
        kind = (
            ParameterKind.keyword_only
            if kw_only_class or str(field.get("kw_only")) == "True"
            else ParameterKind.positional_or_keyword
        )
        parameters.append(
            Parameter(member.name, annotation=member.annotation, kind=kind, default=default, docstring=member.docstring)
        )
    return parameters


def _apply(obj: Module | Class, seen: set[str]) -> None:
    if obj.path in seen:
        return
    seen.add(obj.path)
    if isinstance(obj, Class) and "__init__" not in obj.members and _decorator(obj) is not None:
        parameters = _parameters(obj)
        positional = [p for p in parameters if p.kind is not ParameterKind.keyword_only]
        keyword = [p for p in parameters if p.kind is ParameterKind.keyword_only]
        self = Parameter("self", kind=ParameterKind.positional_or_keyword)
        init = Function(
            "__init__", lineno=0, endlineno=0, parent=obj, parameters=Parameters(self, *positional, *keyword), returns="None"
        )
        obj.set_member("__init__", init)
        obj.labels.add("attrs")
    for member in obj.members.values():
        if not member.is_alias and (member.is_module or member.is_class):
            _apply(member, seen)  # type: ignore[arg-type]


class AttrsInit(Extension):
    """Give every attrs class of a loaded package the ``__init__`` attrs generates for it."""

    def on_package(self, *, pkg: Module, **kwargs: Any) -> None:
        _apply(pkg, set())
