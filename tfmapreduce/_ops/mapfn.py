"""The user's map function inside a graph: called on a shard's tensors, its output checked and named in errors."""

from __future__ import annotations

import contextlib
import inspect
import io
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import tensorflow as tf

from .._base.errors import MapFunctionError
from .._base.plan import Shard
from .models import call_with_variables, holds_state

T = TypeVar("T")


def traced(build: Callable[[], T]) -> T:
    """``build()`` with AutoGraph off: what it traces (map functions, and every ``tf.data`` function made inside) is
    traced as written, one rule for every path (the map-function guide: TensorFlow ops, ``tf.cond`` for branches).

    AutoGraph rewrote each ``tf.data`` function otherwise: seconds for one keyed program in ``batch_rows`` batches.

    Example:
        >>> traced(lambda: 1 + 1)
        2
    """
    plain: Callable[[], T] = tf.autograph.experimental.do_not_convert(build)
    return plain()


def callable_name(fn: object) -> str:
    """A readable name of a user's function, for messages.

    Example:
        >>> callable_name(tf.reduce_sum)
        'reduce_sum'
    """
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


def where(shard: Shard) -> str:
    """How messages name a shard: its index, rows and device."""
    return f"shard {shard.index} (rows {shard.start}:{shard.stop} on {shard.device})"


_WHERE = re.compile(r"shard (\d+) \(rows \d+:\d+ on [^)]*\)")
_ROWS = re.compile(r"(shard \d+ \(rows )\d+:\d+(?= on [^)]*\))")


def restamp(text: str, shards: Sequence[Shard]) -> str:
    """``text`` with each shard :func:`where` names named as in ``shards``, the failed run's own.  A message checked in
    the graph names the rows of the run that built the program, and a later run of other sizes reuses that program.

    Example:
        >>> old = where(Shard(1, 0, 5, "/job:local/task:1/device:CPU:0"))
        >>> restamp(f"failed on {old}", [Shard(1, 0, 8, "/job:local/task:1/device:CPU:0")])
        'failed on shard 1 (rows 0:8 on /job:local/task:1/device:CPU:0)'
    """
    now = {s.index: where(s) for s in shards}
    return _WHERE.sub(lambda m: now.get(int(m[1]), m[0]), text)


def unstamped(text: str) -> str:
    """``text`` with the rows of each shard :func:`where` names left out: what two builds of one program for shards of
    other rows, at the same places, differ by (their in-graph messages, named anew by :func:`restamp` on failure).

    Example:
        >>> unstamped(f"failed on {where(Shard(1, 0, 5, '/job:local/task:1/device:CPU:0'))}")
        'failed on shard 1 (rows ? on /job:local/task:1/device:CPU:0)'
    """
    return _ROWS.sub(r"\1?", text)


def describe(output: Any) -> str:
    """A map output's structure of dtypes and shapes, for messages."""
    try:
        return repr(
            tf.nest.map_structure(lambda t: f"{tf.convert_to_tensor(t).dtype.name}{tf.convert_to_tensor(t).shape}", output)
        )
    except (TypeError, ValueError):
        return repr(output)


def first_line(error: BaseException) -> str:
    """The first line of an error's message (TensorFlow's run on for pages)."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


TRACED = (
    "it is called once on symbolic tensors as the graph is built: use TensorFlow ops "
    "(no .numpy(), no Python if/for on a tensor's value; tf.where, tf.cond, tf.map_fn instead)"
)
"""The hint of an error raised while tracing a user's function."""


GUIDE = "see the map-functions guide (docs/map-functions.md, 'It is traced once into a graph')"
"""Where a map function's tracing error points."""

_SYMBOLIC = re.compile(r"\b(Symbolic)?Tensor\(\"")
"""What ``print`` shows of a tensor while a graph is built (no value)."""


def traced_hint(e: BaseException) -> tuple[str, str]:
    """The cause of a map function's tracing error, short, and one sentence of what to write instead."""
    text = str(e)
    if isinstance(e, AttributeError) and "numpy" in text:
        return text, (
            "a map function runs once on symbolic tensors as the graph is built, where .numpy() has no value to give: "
            "compute with TensorFlow ops on the tensor itself (tf.reduce_sum(x), tf.where(x > 0, x, 0.0), ...)"
        )
    if isinstance(e, tf.errors.OperatorNotAllowedInGraphError):
        cause = text.split(" You can attempt")[0]  # TensorFlow's advice (@tf.function, eager) does not apply here
        if "Iterating over" in text:
            return cause, (
                "a Python for over a tensor cannot run as the graph is built: write the loop as whole-tensor ops, "
                "or as tf.map_fn(fn, x) or tf.while_loop"
            )
        return cause, (
            "a Python if (or and/or/not, or while) on a tensor's value cannot run as the graph is built: write "
            "tf.where(condition, a, b) to choose element by element, or tf.cond(predicate, true_fn, false_fn) for one scalar condition"
        )
    return text, TRACED


_EAGER = "Attempting to capture an EagerTensor"
"""TensorFlow's words where a graph function uses a tensor made eagerly, outside it."""


def _eager(value: object) -> bool:
    """Whether ``value`` holds TensorFlow state made eagerly: a tensor with a value, a variable, a module, a Keras
    model or layer."""
    if isinstance(value, tf.Tensor):
        return not tf.is_symbolic_tensor(value)
    return isinstance(value, (tf.Variable, tf.Module)) or (callable(value) and hasattr(value, "weights"))


def captured(map_fn: Any, at: str, argument: str) -> MapFunctionError:
    """The error of a map function that uses eager tensors made outside it: what it uses (its names that hold
    them, where they can be read) and how to pass their values instead."""
    try:
        found = inspect.getclosurevars(map_fn)
        names = {**found.globals, **found.nonlocals}
    except (TypeError, ValueError):
        names = {}
    held = [f"{name} (a {type(v).__name__})" for name, v in names.items() if _eager(v)]
    what = ", ".join(held) if held else "a tensor, variable or Keras model made outside it"
    return MapFunctionError(
        f"{argument} {callable_name(map_fn)} uses {what} on {at}, reached through an object it holds: its tensors were "
        f"made eagerly, on the client, and a map function runs as a graph on the workers, which cannot capture them. "
        f"A map function may read a Keras model, a tf.Module or variables it closes over (or that it is) directly: "
        f"take them out of the object first, e.g. model = holder.model; {argument} = lambda x: model(x) (see the models "
        f"guide, docs/models.md); or make constants inside {argument}"
    )


def call_map(map_fn: Any, tensors: Any, broadcast: tuple[Any, ...], at: str, *, argument: str = "map_fn") -> Any:
    """``map_fn(*tensors, *broadcast)`` as the graph is built; MapFunctionError naming ``argument`` and ``at`` if it raises,
    or if it uses tensors made eagerly outside it (a Keras model's weights: see :func:`captured`).

    What it prints goes on to stdout; a tensor printed (no value while the graph is built) warns once with the fix.
    """
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            stateful = holds_state(map_fn)  # a model, a tf.Module, variables: read from their copies on this device
            output = call_with_variables(map_fn, tensors, broadcast, at, argument) if stateful else map_fn(*tensors, *broadcast)
        graph = tf.compat.v1.get_default_graph()  # a tf.data function's graph captures them; its dataset would fail
        if any(not tf.is_symbolic_tensor(t) for t, _ in getattr(graph, "captures", ())):
            raise captured(map_fn, at, argument)
        return output
    except MapFunctionError:
        raise
    except Exception as e:
        if _EAGER in str(e):
            raise captured(map_fn, at, argument) from None
        cause, hint = traced_hint(e)
        raise MapFunctionError(
            f"{argument} {callable_name(map_fn)} raised {type(e).__name__} on {at}: {cause}; {hint}; {GUIDE}"
        ) from e
    finally:
        shown = printed.getvalue()
        if shown:
            sys.stdout.write(shown)
            if _SYMBOLIC.search(shown):
                warnings.warn(
                    f"{argument} {callable_name(map_fn)} printed a tensor as its graph was built (on {at}), which shows no values: "
                    f"write tf.print(x) instead, which prints on the worker as the run goes; {GUIDE}",
                    stacklevel=2,
                )


def map_shard(map_fn: Any, shard: Shard, tensors: Any, broadcast: tuple[Any, ...]) -> Any:
    """``map_fn`` on one shard's tensors (inside its device scope), its output converted to tensors.

    Raises:
        MapFunctionError: ``map_fn`` raised, or returned something that is not a (nested structure of) tensor(s).
    """
    at = where(shard)
    output = call_map(map_fn, tensors, broadcast, at)
    try:
        return tf.nest.map_structure(tf.convert_to_tensor, output)
    except (TypeError, ValueError) as e:
        raise MapFunctionError(
            f"map_fn {callable_name(map_fn)} must return a tensor or a nested structure of tensors; on {at} it returned {output!r} ({e})"
        ) from None


def check_same_outputs(map_fn: object, first: tuple[Shard, Any], shard: Shard, output: Any) -> None:
    """MapFunctionError unless ``output`` (of ``shard``) has the structure and dtypes of the first shard's."""
    shard0, output0 = first
    try:
        tf.nest.assert_same_structure(output0, output)
        same = all(a.dtype == b.dtype for a, b in zip(tf.nest.flatten(output0), tf.nest.flatten(output), strict=True))
    except (TypeError, ValueError):
        same = False
    if not same:
        raise MapFunctionError(
            f"map_fn {callable_name(map_fn)} returned different structures for shard {shard0.index} and shard {shard.index}: "
            f"{describe(output0)} vs {describe(output)}; it must return the same structure and dtypes for every shard"
        )
