"""Map functions that read variables (a Keras model, a ``tf.Module``, ``tf.Variable``s): traced as a function whose
variables are read, on each device, from a copy kept there (placed by ``_io/models.py``).

A map function that holds such state is traced once per input signature by ``tf.function`` (its variables then
are the function's captured inputs), and called in the run's graph with each captured variable replaced by a
handle to its copy on the current device: the variable named :func:`name_of` it in the container
:data:`CONTAINER`.  What each build reads is recorded (:func:`recording`) as :class:`Use` entries, so that the
run places the weights on those devices before it goes.  Reading is the contract: a map function that assigns
to a variable is refused, naming it.

Example:
    >>> scale = tf.Variable(2.0)
    >>> holds_state(lambda x: x * scale), holds_state(lambda x: x * 2.0)
    (True, False)
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import itertools
import re
import secrets
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import tensorflow as tf
from tensorflow.core.framework import function_pb2

from .._base.errors import MapFunctionError

CONTAINER = f"tfmapreduce_models_{secrets.token_hex(6)}"
"""The container of this client's model variables on every device (one client's apart from another's)."""

WRITES = frozenset(
    {"AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp", "DestroyResourceOp"}
    | {f"ResourceScatter{op}" for op in ("Add", "Sub", "Mul", "Div", "Min", "Max", "Update", "NdAdd", "NdSub", "NdUpdate")}
)
"""The ops that change a variable (``ResourceApply*`` optimizer steps too, by prefix)."""


@attrs.frozen(eq=False)
class Use:
    """A variable a program reads on a device: the run places its current value there first."""

    variable: tf.Variable
    device: str
    name: str
    """Its name in :data:`CONTAINER` (:func:`name_of`)."""


_names: dict[int, tuple[weakref.ref[Any], str]] = {}
_count = itertools.count()
_lock = threading.Lock()


def name_of(variable: tf.Variable) -> str:
    """The name ``variable``'s copies have on the devices: one per variable object in this process, kept for its life.

    Example:
        >>> v = tf.Variable(1.0)
        >>> name_of(v) == name_of(v) != name_of(tf.Variable(1.0))
        True
    """
    with _lock:
        held = _names.get(id(variable))
        if held is not None and held[0]() is variable:
            return held[1]
        name = f"v{next(_count)}"
        _names[id(variable)] = (weakref.ref(variable), name)
        return name


_used: contextvars.ContextVar[list[Use] | None] = contextvars.ContextVar("tfmapreduce_models_used", default=None)


@contextlib.contextmanager
def recording() -> Iterator[list[Use]]:
    """Collect the variables map functions read while a program is built inside the block (one entry a variable and
    device)."""
    uses: list[Use] = []
    token = _used.set(uses)
    try:
        yield uses
    finally:
        _used.reset(token)


def _stateful(value: Any) -> bool:
    if isinstance(value, tf.Variable | tf.Module | tf.__internal__.tracking.AutoTrackable):
        return True  # (AutoTrackable: a Keras model or layer, a SavedModel loaded with tf.saved_model.load)
    if isinstance(value, tf.Tensor):
        return not tf.is_symbolic_tensor(value)
    return False


def holds_state(fn: Any) -> bool:
    """Whether ``fn`` uses TensorFlow state made eagerly on the client: it is, or closes over (through its globals,
    closure, bound object, partial arguments or attributes), a variable, a ``tf.Module``, a Keras layer or model, a loaded
    SavedModel, or a tensor with a value; containers of them one level deep."""
    values: list[Any] = [fn]
    if isinstance(fn, functools.partial):
        values += [fn.func, *fn.args, *fn.keywords.values()]
    target = getattr(fn, "__func__", fn)
    values.append(getattr(fn, "__self__", None))
    try:
        found = inspect.getclosurevars(target)
        values += [*found.globals.values(), *found.nonlocals.values()]
    except (TypeError, ValueError):  # a callable object: its attributes
        values += list(getattr(fn, "__dict__", {}).values())
        values += [getattr(fn, name, None) for name in getattr(type(fn), "__slots__", ())]
    for value in values:
        inner = list(value.values()) if isinstance(value, dict) else list(value) if isinstance(value, list | tuple) else []
        if _stateful(value) or any(_stateful(v) for v in inner):
            return True
    return False


_functions: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _function(fn: Any) -> Any:
    """``fn`` as one ``tf.function`` (AutoGraph off, as every map function), made once per function object."""
    try:
        made = _functions.get(fn)
    except TypeError:  # not weakly referable: traced per call
        return tf.function(fn, autograph=False)
    if made is None:
        made = tf.function(fn, autograph=False)
        _functions[fn] = made
    return made


def _spec(t: Any, rows: bool) -> tf.TensorSpec:
    t = tf.convert_to_tensor(t)
    shape = [None, *t.shape[1:]] if rows and t.shape.rank else t.shape
    return tf.TensorSpec(shape, t.dtype)


def _outermost() -> tf.Graph:
    graph = tf.compat.v1.get_default_graph()
    while getattr(graph, "outer_graph", None) is not None:
        graph = graph.outer_graph
    return graph


_handles: weakref.WeakKeyDictionary[tf.Graph, dict[tuple[str, str], tf.Tensor]] = weakref.WeakKeyDictionary()


def _handle(variable: tf.Variable) -> tf.Tensor:
    """A handle to ``variable``'s copy on the current device, made in the run's graph (a ``tf.data`` function captures
    it), once per graph and device; its use recorded."""
    graph = _outermost()
    name = name_of(variable)
    with graph.as_default():
        probe = tf.no_op(name="device_probe")  # the current device scope of the run's graph
        device = probe.device
        made = _handles.setdefault(graph, {})
        if (device, name) not in made:
            made[(device, name)] = tf.raw_ops.VarHandleOp(
                dtype=variable.dtype, shape=variable.shape, container=CONTAINER, shared_name=name, name=f"model_{name}"
            )
            uses = _used.get()
            if uses is not None:
                uses.append(Use(variable, device, name))
    return made[(device, name)]


def _writes(fdef: function_pb2.FunctionDef, arg: str, library: Callable[[str], Any]) -> bool:
    """Whether the function ``fdef`` changes the resource its input ``arg`` holds (through the functions it calls)."""
    for node in fdef.node_def:
        inputs = [i.split(":")[0] for i in node.input]
        if arg not in inputs:
            continue
        if node.op in WRITES or node.op.startswith("ResourceApply"):
            return True
        if "f" in node.attr and node.attr["f"].func.name:
            callee = library(node.attr["f"].func.name)
            if callee is not None:
                k = inputs.index(arg)
                if k < len(callee.signature.input_arg) and _writes(callee, callee.signature.input_arg[k].name, library):
                    return True
    return False


def _assigned(concrete: Any, inner: tf.Tensor) -> bool:
    """Whether the traced function changes the variable held by its captured input ``inner``."""
    graph = concrete.graph

    def library(name: str) -> function_pb2.FunctionDef | None:
        found = graph._functions.get(name)  # the functions a trace calls (a SavedModel's)
        return found.cached_definition if found is not None else None

    for op in inner.consumers():
        if op.type in WRITES or op.type.startswith("ResourceApply"):
            return True
        if op.type in ("StatefulPartitionedCall", "PartitionedCall"):
            callee = library(op.get_attr("f").name)
            k = list(op.inputs).index(inner)
            if callee is not None and _writes(callee, callee.signature.input_arg[k].name, library):
                return True
    return False


def _name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


def _cause(e: BaseException) -> str:
    """The line of a tracing error that says what was expected (Keras's first line only names the call)."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in str(e).splitlines()]
    lines = [line for line in lines if line]
    said = [line for line in lines if "expected" in line] or lines[:1] or [type(e).__name__]
    return said[0]


def call_with_variables(fn: Any, tensors: Any, broadcast: tuple[Any, ...], at: str, argument: str) -> Any:
    """``fn(*tensors, *broadcast)`` in the current graph, its variables read from their copies on the current device.

    Raises:
        MapFunctionError: ``fn`` assigns to a variable (named), or captures a resource that is not a variable.
    """
    args = (*tensors, *broadcast)
    specs = (*tf.nest.map_structure(lambda t: _spec(t, True), tuple(tensors)), *(_spec(b, False) for b in broadcast))
    try:
        with tf.init_scope():  # traced out of the run's graph: its variables are the trace's captured inputs
            concrete = _function(fn).get_concrete_function(*specs)
    except (ValueError, TypeError) as e:
        if "shape" not in str(e).lower():
            raise  # the map function's own error (named by call_map)
        rows = ", ".join(f"{s.dtype.name}{[None, *s.shape[1:]]}" for s in tf.nest.flatten(specs[: len(tuple(tensors))]))
        raise MapFunctionError(
            f"{argument} {_name(fn)} does not take the rows of {at}: they come as {rows} (a batch of rows: any number on "
            f"axis 0, then the row shape); {_cause(e)}; make the model's input match the rows (reshape or cast them in a "
            f"map function, or build the model for their shape)"
        ) from e
    variables = {id(v.handle): v for v in concrete.graph.variables}
    captured = []
    for outer, inner in concrete.graph.captures:
        variable = variables.get(id(outer))
        if variable is not None:
            if _assigned(concrete, inner):
                raise MapFunctionError(
                    f"{argument} assigns to the variable {variable.name!r} on {at}: map functions read variables (a model's "
                    f"weights) and may not change them; compute the new value as an output instead, or assign on the client"
                )
            captured.append(_handle(variable))
        elif outer.dtype == tf.resource:
            raise MapFunctionError(
                f"{argument} captures a TensorFlow resource that is not a variable ({inner.name}) on {at}: only variables "
                "(a model's weights) and tensors with values travel to the workers; make it inside the map function"
            )
        else:  # a tensor made eagerly: its value travels in the graph
            captured.append(tf.constant(outer.numpy()))
    flat = tf.nest.flatten(args, expand_composites=True)
    return concrete._call_flat([tf.convert_to_tensor(t) for t in flat], captured)  # its captures replaced
