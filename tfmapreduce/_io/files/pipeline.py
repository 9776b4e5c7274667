"""Your own ``tf.data`` pipeline as a source: ``make_dataset(split, num_splits)`` built on the task that reads the split.

The plan's units are the splits: shard ``i`` reads splits ``start:stop`` of its range, each one's dataset traced into
the run's graph under the shard's device, so the pipeline (its file reads, parsing, generation) runs on that task and
its batches stream through the map like a file's (``_stream``, ``_maponly``, ``_keyed_map``); the client only traces
it (once in a scratch graph, for its element type) and never iterates it.  The weights are the rows actually read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import tensorflow as tf

from ..._base.errors import InputError, JobError
from ..._base.plan import Plan, Shard
from ..._base.task import Task
from ..._ops.mapfn import callable_name
from ..source import Batches, Input, ShardTensor
from .readers import BATCH_BYTES

if TYPE_CHECKING:
    from ..._cluster.cluster import Cluster

_SHARD = re.compile(r"\bshard(\d+)/")
_PIECE = re.compile(r"\bshard\d+/piece(\d+)/")
_OURS = "tfmapreduce-"
"""The prefix of the framework's own in-graph checks (a map's, a keyed job's): their errors are the kind's to read."""

STRING_BATCH = 4096
"""Rows per batch of a pipeline of string rows when ``batch_rows`` is not given (their size is unknown)."""


@attrs.frozen
class Element:
    """What every split's dataset yields: its dtype, the shape of one row, and whether each element is a batch of rows.

    An element of several tensors (a tuple, or a dict such as parsed features) has ``dtype`` and ``row_shape`` of its
    first (``tf.nest.flatten``) tensor, and each tensor's in ``fields``.
    """

    dtype: tf.DType
    row_shape: tuple[int, ...]
    batched: bool
    fields: tuple[tuple[str | None, tf.DType, tuple[int, ...]], ...] = ()
    """Several tensors: (its key, or None in a tuple; dtype; row shape) each, in ``tf.nest.flatten`` order; () for one."""
    keyed: bool = False
    """Whether the tensors are a dict (passed to the map function as one argument) or a tuple (one argument each)."""

    def empty(self) -> tuple[Any, ...]:
        """The map function's arguments for a batch of no rows."""
        if not self.fields:
            return (tf.zeros((0, *self.row_shape), self.dtype),)
        zeros = [tf.zeros((0, *shape), dtype) for _, dtype, shape in self.fields]
        return ({name: z for (name, _, _), z in zip(self.fields, zeros, strict=True)},) if self.keyed else tuple(zeros)

    def row_bytes(self) -> int:
        """Bytes of one row (0 where a tensor holds strings: their size is unknown)."""
        leaves = [(d, s) for _, d, s in self.fields] or [(self.dtype, self.row_shape)]
        if any(d == tf.string for d, _ in leaves):
            return 0
        return sum(d.size * math.prod(s) for d, s in leaves)


def _element(spec: Any, batched: bool | None, where: str) -> Element:
    """The element of a dataset whose ``element_spec`` is ``spec``: one tensor, or a flat tuple or dict of them.

    Raises:
        InputError: naming ``where``, for other elements (nested, sparse, ragged) and rows without a static shape.
    """
    flat = isinstance(spec, tuple) and spec and all(isinstance(s, tf.TensorSpec) for s in spec)
    keyed = isinstance(spec, dict) and spec and all(isinstance(k, str) and isinstance(s, tf.TensorSpec) for k, s in spec.items())
    if flat or keyed:
        names: list[str | None] = sorted(spec) if keyed else [None] * len(spec)
        leaves = [
            _element(s, batched, f"{where}[{n!r}]" if keyed else f"{where}[{i}]")
            for i, (n, s) in enumerate(zip(names, tf.nest.flatten(spec), strict=True))
        ]
        if len({e.batched for e in leaves}) > 1:
            raise InputError(f"read_dataset: {where} yields {spec!r}, some tensors batches and some rows; batch them alike")
        fields = tuple((n, e.dtype, e.row_shape) for n, e in zip(names, leaves, strict=True))
        return Element(leaves[0].dtype, leaves[0].row_shape, leaves[0].batched, fields, bool(keyed))
    if not isinstance(spec, tf.TensorSpec):
        raise InputError(
            f"read_dataset: {where} yields {spec!r}; it must yield a tensor per element (a row, or a batch of rows), or a "
            "flat tuple or dict of them (the map function gets a tuple's tensors as its arguments, a dict as one). "
            "Flatten it first, e.g. dataset.map(lambda d: {'x': d['x'], 'y': d['sub']['y']})"
        )
    shape = spec.shape
    if shape.rank is None:
        raise InputError(f"read_dataset: {where} yields tensors of unknown rank; give them a static shape (tf.ensure_shape)")
    if batched is None:
        batched = shape.rank > 0 and shape[0] is None  # .batch(n) leaves the rows unknown; rows have a static shape
    row = shape[1:] if batched else shape
    if batched and shape.rank == 0:
        raise InputError(f"read_dataset: {where} yields scalars, not batches of rows, but batched=True; pass batched=False")
    if not row.is_fully_defined():
        raise InputError(
            f"read_dataset: {where} yields {'batches of rows' if batched else 'rows'} of shape {row} (unknown sizes); every "
            "row must have one static shape: pad or reshape it in the pipeline"
            + ("" if batched else ", or pass batched=True if each element is a batch of rows")
        )
    return Element(spec.dtype, tuple(int(d) for d in row), batched)


@attrs.frozen(eq=False)
class PipelineSource:
    """The source a run reads a pipeline through: one piece per split, its batches built where the shard runs."""

    make: Callable[[int, int], Any]
    splits: int
    element: Element

    @property
    def rows(self) -> int:
        """The splits: what the plan partitions (their rows are known only once read)."""
        return self.splits

    @property
    def dtype(self) -> np.dtype[Any]:
        return np.dtype(object) if self.element.dtype == tf.string else np.dtype(self.element.dtype.as_numpy_dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.splits, *self.element.row_shape)

    @property
    def home(self) -> None:
        return None

    @property
    def home_plan(self) -> None:
        return None

    def signature(self, plan: Plan) -> Hashable:
        return ("dataset", self.make, self.splits, self.element)

    def tensor(self, shard: Shard) -> ShardTensor:
        raise TypeError("read_dataset data is streamed batch by batch; it has no whole-shard tensor (tmr.map it first)")

    def feed(self, shard: Shard) -> None:
        return None

    def bytes_sent(self, shard: Shard) -> int:
        return 0

    def survive(self, lost: frozenset[Task]) -> None:
        """Nothing to do: a lost task's splits are made again by the survivors (``make_dataset`` is called there)."""

    def empty_batch(self) -> tuple[Any, ...]:
        return self.element.empty()

    def dataset(self, split: int) -> tf.data.Dataset:
        """In the graph being built: split ``split``'s dataset, as ``make_dataset`` traces it (checked against the first)."""
        where = f"make_dataset({split}, {self.splits})"
        dataset = call_make(self.make, split, self.splits)
        found = _element(dataset.element_spec, self.element.batched, where)
        if found != self.element:
            raise InputError(
                f"read_dataset: {where} yields {_describe(found)}, but split 0 yields {_describe(self.element)}; every split "
                "must yield rows of one structure, dtype and shape"
            )
        return dataset

    def batches(self, shard: Shard, batch_rows: int | None) -> list[Batches]:
        """One piece per split of the shard, in split order: rows batched (``batch_rows``, or about 4 MB), batches as made."""
        result = []
        element = self.element
        row_bytes = element.row_bytes()
        for split in range(shard.start, shard.stop):
            dataset = self.dataset(split)
            if not element.batched:
                dataset = dataset.batch(batch_rows or (max(1, BATCH_BYTES // row_bytes) if row_bytes else STRING_BATCH))
            elif batch_rows is not None:
                dataset = dataset.rebatch(batch_rows)
            result.append(Batches(dataset, None))
        return result

    def input_error(self, error: JobError, plan: Plan, cluster: Cluster) -> InputError | None:
        """A failed read of a split: the pipeline's error, the split and the task; None when the run failed elsewhere."""
        details = error.details or str(error)
        found, piece = _SHARD.search(details), _PIECE.search(details)
        if found is None or piece is None or _OURS in details or int(found.group(1)) >= len(plan.shards):
            return None
        shard = plan.shards[int(found.group(1))]
        split = shard.start + int(piece.group(1))
        if split >= shard.stop:
            return None
        cause = str(error).split(": ", 1)[-1]
        return InputError(
            f"read_dataset: split {split} of {self.splits} (make_dataset({split}, {self.splits}), "
            f"{callable_name(self.make)}) failed on task {shard.task}: {cause}; the pipeline is built and read on that "
            "task, so the files it opens must be there (fix the pipeline, or the map function applied to its batches)"
        )


def _describe(element: Element) -> str:
    batches = "batches of " if element.batched else ""
    if not element.fields:
        return f"{element.dtype.name} {batches}rows of shape {element.row_shape}"
    fields = ", ".join(f"{n + ': ' if n else ''}{d.name} {s}" for n, d, s in element.fields)
    return f"{batches}rows of {'{' + fields + '}' if element.keyed else '(' + fields + ')'}"


def call_make(make: Callable[[int, int], Any], split: int, splits: int) -> tf.data.Dataset:
    """``make(split, splits)``, checked to be a ``tf.data.Dataset``; InputError naming the split when it raises."""
    try:
        dataset = make(split, splits)
    except Exception as e:  # any error of the user's function, reported with its split
        raise InputError(
            f"read_dataset: make_dataset {callable_name(make)}({split}, {splits}) raised {type(e).__name__}: {e}"
        ) from e
    if not isinstance(dataset, tf.data.Dataset):
        raise InputError(
            f"read_dataset: make_dataset {callable_name(make)}({split}, {splits}) returned {type(dataset).__name__}, not a "
            "tf.data.Dataset; return the pipeline, e.g. tf.data.TFRecordDataset(files[split::num_splits]).map(parse)"
        )
    return dataset


@attrs.frozen(eq=False)
class Pipeline(Input):
    """A ``tf.data`` pipeline of your own, made on the workers: accepted wherever an array is (see [`read_dataset`][tfmapreduce.read_dataset])."""

    make_dataset: Callable[[int, int], Any]
    """``make_dataset(split, num_splits)``: the dataset of one split."""
    splits: int
    """How many splits there are: the units the plan partitions among the shards."""
    element: Element = attrs.field(repr=False)

    def __repr__(self) -> str:
        return f"read_dataset({callable_name(self.make_dataset)}, splits={self.splits})"

    def as_source(self) -> PipelineSource:
        return PipelineSource(self.make_dataset, self.splits, self.element)


def read_dataset(make_dataset: Callable[[int, int], Any], /, *, splits: int, batched: bool | None = None) -> Pipeline:
    """Your own ``tf.data`` pipeline as the input of a job, built and read on the workers.

    ``make_dataset(split, num_splits)`` returns the ``tf.data.Dataset`` of one split (of ``splits``): rows, or
    batches of rows, each one tensor or a flat tuple or dict of tensors (e.g. parsed features), which the map
    function gets as ``tf.data``'s ``map`` does: a tuple's tensors as its arguments, a dict as one.  A run places
    the splits like rows (``sizes=``, ``devices=``) and each shard's task builds its splits' datasets in the run's
    graph and streams their batches through the map function, as it does a file's: the client traces ``make_dataset`` but never iterates a dataset, and the rows
    actually read are the weights.  For TFRecords with your own parsing, TFDS-style pipelines, generated data.

    Args:
        make_dataset: a function of ``(split, num_splits)`` (Python ints) returning the split's dataset.
        splits: how many splits there are (≥ 1): shard the data by them (e.g. ``files[split::num_splits]``).
        batched: whether each element is a batch of rows (None: when its first axis is unknown, as after
            ``.batch(n)``; pass True for ``.batch(n, drop_remainder=True)``).  Rows are batched by ``batch_rows``.

    Returns:
        A [`Pipeline`][tfmapreduce.Pipeline], accepted by every job where an array is.

    Raises:
        InputError: ``make_dataset`` raises or returns something else than a dataset of one tensor (or a flat
            tuple or dict of them) with a static row shape (traced once on the client for split 0), or a split fails on its task (the
            message names the split, the task and the pipeline's error).
        TypeError: ``splits`` is not a positive int, or ``make_dataset`` not callable.

    Examples:
        >>> def squares(split, num_splits):
        ...     return tf.data.Dataset.range(split, 10, num_splits).map(lambda i: tf.cast(i * i, tf.float64))
        >>> float(tmr.sum(tmr.read_dataset(squares, splits=3), cluster=cluster))
        285.0
    """
    if not callable(make_dataset):
        raise TypeError(
            f"read_dataset: make_dataset must be a function of (split, num_splits) returning a tf.data.Dataset, got "
            f"{type(make_dataset).__name__} {make_dataset!r}"
        )
    if not isinstance(splits, int) or isinstance(splits, bool) or splits < 1:
        raise TypeError(f"read_dataset: splits must be a positive int (how many splits make_dataset makes), got {splits!r}")
    if batched is not None and not isinstance(batched, bool):
        raise TypeError(f"read_dataset: batched must be True, False or None, got {batched!r}")
    with tf.Graph().as_default():  # traced once, for its element; never iterated here
        dataset = call_make(make_dataset, 0, splits)
        element = _element(dataset.element_spec, batched, f"make_dataset(0, {splits})")
    return Pipeline(make_dataset, splits, element)
