"""``tmr.predict``: a model's outputs for every row, made on the devices that hold the rows, in input row order.

A map-only run (:class:`~tfmapreduce._kinds.maponly.MapOnly`) of ``model`` itself: its variables are copied once to
each device that maps a shard and kept there for later runs (``_io/models.py``), files are read batch by batch on
their workers, and the predictions stay where they were made (``resident=True``) or are gathered.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._cluster.cluster import Cluster
from .._engine import driver as _engine
from .._io import models as _models
from .._io.files.files import Files
from .._io.resident import Sharded, _arrays, delete_all
from .._options import Options, RunOptions
from .maponly import MapOnly


@attrs.frozen
class Forward:
    """A model called on a batch of rows (one input: the tensor; several: their list, as Keras takes them), in
    ``batch_rows`` batches where given (a shard in memory is otherwise one batch).  Equal for one model and batch size:
    the run driver keeps its program for the next call."""

    model: Any
    batch_rows: int | None

    def __repr__(self) -> str:  # how messages name it (equal for one model: later runs find its program)
        name = getattr(self.model, "name", None)
        return f"predict({type(self.model).__name__}{f' {name!r}' if isinstance(name, str) else ''})"

    def __call__(self, *rows: tf.Tensor) -> Any:
        if self.batch_rows is None or len(rows) != 1:
            return self.model(rows[0] if len(rows) == 1 else list(rows))
        x = rows[0]
        n, size = tf.shape(x, out_type=tf.int64)[0], tf.constant(self.batch_rows, tf.int64)
        batches = tf.data.Dataset.range(0, n, size).map(lambda start: self.model(x[start : start + size]))  # slices
        first = self.model(x[:0])
        arrays = tf.nest.map_structure(
            lambda t: tf.TensorArray(
                t.dtype, size=0, dynamic_size=True, infer_shape=False, element_shape=tf.TensorShape([None, *t.shape[1:]])
            ),
            first,
        )

        def step(state: Any, out: Any) -> Any:
            i, acc = state
            return i + 1, tf.nest.map_structure(lambda a, t: a.write(i, t), acc, out)

        _, acc = batches.reduce((tf.constant(0), arrays), step)
        return tf.nest.map_structure(lambda a, t: tf.ensure_shape(a.concat(), [None, *t.shape[1:]]), acc, first)


def predict(model: Any, x: Any, /, *, resident: bool = False, **options: Unpack[Options]) -> Any:
    """The outputs of ``model`` for every row of ``x``, in row order, computed where the rows are.

    ``model`` is a Keras model, a ``tf.Module`` or any callable of a batch of rows that reads variables (a SavedModel
    loaded with ``tf.saved_model.load``).  Its variables are copied once to each device that maps a shard and kept
    there: a later run with the same model sends none, and a run after its weights changed sends the changed ones
    ([`RunStats.weight_bytes`][tfmapreduce.RunStats.weight_bytes] counts them; the models guide says how changes are found).  One input array gives
    the model a tensor; a tuple of co-partitioned arrays, their list (a Keras model with several inputs).

    Args:
        model: the model to call on each batch of rows.
        x: an array, a tuple of co-partitioned arrays, resident ``Sharded`` data, files (``tmr.read_npy`` ...), or a
            ``tmr.Table`` whose columns are the Keras model's named inputs (``keras.Input(shape, name=column)``).
        resident: keep the predictions on the devices that made them (a ``Sharded``, or the model's structure of
            them) for a later job or a writer; False: gather them to the client as numpy arrays.
        **options: as every job (``cluster``, ``sizes``, ``devices``, ``timeout`` ...); ``batch_rows``: the rows the
            model gets at once (files are read in such batches; a shard in memory is otherwise one batch).

    Returns:
        The predictions as a numpy array (or the model's structure of them), one row per input row; with
        ``resident=True`` as ``Sharded`` data (free it with ``delete()`` or ``with``).

    Raises:
        TypeError: ``model`` is not callable; over a table, a named input has no column or its column has nulls.
        MapFunctionError: the model does not take the rows (its message names the shapes), or it assigns a variable.
        PlacementError: the model's copies for a task's devices exceed its host's available memory, or those for a
            GPU its memory limit (named; nothing was sent).

    Examples:
        >>> import keras
        >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, kernel_initializer="ones")])
        >>> tmr.predict(model, np.ones((4, 3), np.float32), cluster=cluster).ravel().tolist()
        [3.0, 3.0, 3.0, 3.0]
    """
    if not callable(model):
        raise TypeError(
            f"model must be a callable of a batch of rows: a Keras model, a tf.Module with __call__, or a function; "
            f"got {type(model).__name__} {model!r}"
        )
    if not isinstance(resident, bool):
        raise TypeError(
            f"resident must be True (keep the predictions on the devices) or False (gather them), "
            f"got {type(resident).__name__} {resident!r}"
        )
    settings = RunOptions.of(**options)
    if all(hasattr(x, a) for a in ("columns", "column", "schema")):  # a tmr.Table (a layer above this one)
        x = _named_inputs(model, x)
    inner = None if isinstance(x, Files) else settings.batch_rows  # files come in batches of batch_rows already
    kept = _engine.run(MapOnly(Forward(model, inner), "fn"), x, settings, resident=True)
    if resident:
        return kept
    try:
        return _gathered(kept)
    finally:
        delete_all(_arrays(kept))


def release(model: Any = None, /, *, cluster: Cluster) -> int:
    """Free the copies of ``model``'s variables that ``cluster``'s devices keep (None: of every model): how many copies
    were freed.  A later run with the model sends its variables again.

    A model's copies otherwise stay until the cluster closes, or until the model is garbage collected on the client.

    Args:
        model: a Keras model or layer, a ``tf.Module`` (a SavedModel loaded with ``tf.saved_model.load``) or a
            ``tf.Variable``; None frees every model's copies.
        cluster: the cluster whose devices hold the copies.

    Raises:
        TypeError: ``model`` holds no variables, or ``cluster`` is not a ``tmr.Cluster``.

    Examples:
        >>> import keras
        >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        >>> _ = tmr.predict(model, np.ones((4, 3), np.float32), cluster=cluster, sizes=[4])
        >>> tmr.release(model, cluster=cluster)  # its kernel and bias, on the one device that mapped the shard
        2
    """
    if not isinstance(cluster, Cluster):
        raise TypeError(
            f"cluster must be the tmr.Cluster whose devices hold the model's copies (cluster=...), "
            f"got {type(cluster).__name__} {cluster!r}"
        )
    return _models.release(cluster, model)


def _named_inputs(model: Any, table: Any) -> Any:
    """The columns of ``table`` a Keras model's named inputs take, in its inputs' order, each cast to its input's dtype
    and shaped as its rows (a column for an input of shape ``(1,)`` becomes one value a row).

    Raises:
        TypeError: the model's inputs are not named Keras inputs, a column is missing, or it has nulls.
    """
    inputs = getattr(model, "inputs", None)
    if not inputs:
        raise TypeError(
            f"predict over a table takes the model's inputs from the columns of their names, and {type(model).__name__} "
            "has no named inputs: build it with keras.Input(shape, name=column) for each column it takes, or pass the "
            "columns as a tuple of arrays, tmr.predict(model, (t.column('a').to_numpy(), ...))"
        )
    arrays = []
    for spec in inputs:
        name = str(spec.name)
        if name not in table.columns:
            raise TypeError(
                f"the model's input {name!r} has no column of that name in the table (its columns: {list(table.columns)}); "
                "name the model's inputs after the columns (keras.Input(shape, name=column)), or select and rename them"
            )
        column = table.column(name)
        if column.nullable:
            raise TypeError(
                f"column {name!r} has nulls, which a model cannot take: filter them out first "
                f"(t.filter(lambda rows: rows.valid[{name!r}], cluster=...)) or fill them in a new column"
            )
        rows = tuple(d for d in spec.shape[1:])
        arrays.append(np.asarray(column.values, dtype=str(spec.dtype)).reshape((-1, *rows)))
    return arrays[0] if len(arrays) == 1 else tuple(arrays)


def _gathered(value: Any) -> Any:
    """The numpy arrays of a structure of ``Sharded`` (a model's outputs: one, a tuple, a list or a dict)."""
    if isinstance(value, Sharded):
        return value.gather()
    if isinstance(value, dict):
        return {k: _gathered(v) for k, v in value.items()}
    return type(value)(_gathered(v) for v in value) if isinstance(value, list) else tuple(_gathered(v) for v in value)
