"""Sources: the contract every kind of input implements, host arrays, and the canonicalization of a job's data."""

from __future__ import annotations

import abc
import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol, cast, runtime_checkable

import attrs
import numpy as np
import tensorflow as tf

from .._base.errors import InputError, JobError, TfMapReduceError
from .._base.plan import Plan, Shard
from .._base.task import Task
from .._cluster.cluster import Cluster
from .shm import STAGED, MappedBuffer, can_stage, read_tensor
from .strings import packed, unpacked


@attrs.frozen
class ShardTensor:
    """A shard's data inside a job's graph: the tensor the map reads, and the placeholder to feed (or None)."""

    value: tf.Tensor
    """What ``map_fn`` receives for this shard."""
    placeholder: tf.Tensor | MappedBuffer | None = None
    """The placeholder the run feeds with :meth:`Source.feed` (or the mapped buffer it fills), or None when the data is
    already on the device."""
    staged: bool = False
    """True when :meth:`Source.feed`'s bytes go through same-host shared memory: into the mapped buffer, or a file whose
    path the placeholder takes."""
    mapped: tf.Tensor | None = None
    """The data as mapped from the program's shared-memory buffer (what :func:`~tfmapreduce._io.shm.guard` reads), or None."""


class Source(Protocol):
    """One input of a job, as the engine sees it: every kind of data implements exactly this.

    Host arrays (:class:`Shipped`), resident shards (``Sharded``) and file
    sources each implement it; the engine asks nothing else of an input.
    """

    @property
    def rows(self) -> int:
        """Rows on axis 0 (what a partition splits)."""
        ...

    @property
    def dtype(self) -> np.dtype[Any]:
        """The element type."""
        ...

    @property
    def shape(self) -> tuple[int, ...]:
        """The whole input's shape (rows first)."""
        ...

    @property
    def home(self) -> Cluster | None:
        """The cluster the data lives on, or None when any cluster can receive it."""
        ...

    @property
    def home_plan(self) -> Plan | None:
        """Where the data lives (fixed shards and devices), or None when the run's plan decides."""
        ...

    def signature(self, plan: Plan) -> Hashable:
        """What the graph compiled for ``plan`` depends on (never the values)."""
        ...

    def tensor(self, shard: Shard) -> ShardTensor:
        """Inside the job's graph and the shard's device scope: the shard's tensor."""
        ...

    def feed(self, shard: Shard) -> np.ndarray[Any, Any] | bytes | None:
        """The value fed to the shard's placeholder in this run (None when there is none)."""
        ...

    def bytes_sent(self, shard: Shard) -> int:
        """Input bytes the client sends for ``shard`` in one run."""
        ...

    def input_error(self, error: JobError, plan: Plan, cluster: Cluster) -> TfMapReduceError | None:
        """What a failed run over ``plan`` means for this input (a bad file, lost resident shards), naming
        the file or shard and the task; None when the failure is not the input's."""
        ...

    def survive(self, lost: frozenset[Task]) -> None:
        """Make the data readable without the ``lost`` tasks before a run is repeated on the others: host data needs
        nothing; resident data moves its lost shards to surviving tasks and rebuilds them from how they were made.

        Raises:
            ShardLostError: the data cannot be read again without those tasks.
        """
        ...


@runtime_checkable
class RowsFree(Protocol):
    """A source whose graph may leave its shards' rows unknown: host arrays (:class:`Shipped`), and what wraps them
    shard by shard (a join's side)."""

    def fed_only(self, plan: Plan) -> bool:
        """Whether every shard of ``plan`` with rows may enter as a placeholder of unknown rows (``tensor`` with
        ``rows_free``): then a program kept by the plan's shape serves data of any rows."""
        ...

    def tensor(self, shard: Shard, *, rows_free: bool = False) -> ShardTensor:
        """The shard's tensor; with ``rows_free`` (where :meth:`fed_only`), of unknown rows."""
        ...


_implements: dict[tuple[type, type], bool] = {}


def implements(obj: object, protocol: Any) -> bool:
    """``isinstance(obj, protocol)`` for a runtime-checkable protocol, remembered per type (the check walks every member).

    Example:
        >>> implements(Shipped(np.zeros(3)), Streamed), implements(np.zeros(3), Streamed)
        (False, False)
    """
    key = (type(obj), protocol)
    found = _implements.get(key)
    if found is None:
        found = _implements[key] = isinstance(obj, protocol)
    return found


DATA_OPTIONS = tf.data.Options()
"""The options of every pipeline a run reads or folds: no rewriting (a cost on every run) and no autotuning (its
background thread could leave a worker idle at the end of a run); the figures are in the architecture guide."""
DATA_OPTIONS.experimental_optimization.apply_default_optimizations = False
DATA_OPTIONS.autotune.enabled = False


def _with_data_options(dataset: tf.data.Dataset) -> tf.data.Dataset:
    return dataset.with_options(DATA_OPTIONS)


@attrs.frozen(eq=False)
class Batches:
    """One piece of a streamed shard (a file, a row range of one, or small files read together): its batches, read on the shard's task."""

    dataset: tf.data.Dataset = attrs.field(converter=_with_data_options)
    """Batches of rows (each a tensor of shape ``(rows, *shape[1:])``), read where the shard runs (with :data:`DATA_OPTIONS`)."""
    rows: int | None
    """The rows the piece must yield (checked in the run), or None when only reading tells."""
    mismatch: str = ""
    """The message of the failed check when the piece yields other than ``rows`` rows."""
    counts: str = "rows"
    """What a batch is counted in as the run goes (``_progress``): its ``"rows"``, or its ``"bytes"`` where a batch is
    a block of many lines (one string for all of them)."""
    count: Callable[[Any], list[tf.Operation]] = attrs.field(default=lambda batch: [], eq=False)
    """The ops that count one batch where the run counts (``Builder.batches``): a job calls it in its own per-batch
    function and runs them with it (:meth:`counted`)."""
    windows: tuple[Callable[[], tf.Tensor], ...] = ()
    """The same batches as plain graph ops, where the source has them (``Reader.windows``): each call makes the next
    batch in the current device scope.  A job that folds the batches one after another may take these instead of
    ``dataset`` and skip its pipeline, whose functions cost milliseconds each run (``_stream``)."""

    def counted(self, batch: Any, value: Any) -> Any:
        """``value``, made from ``batch`` inside a job's per-batch function, once ``batch`` is counted: the count waits
        for ``value`` (the batch mapped), so progress never runs ahead of the map."""
        made = [t for t in tf.nest.flatten(value, expand_composites=True) if isinstance(t, tf.Tensor | tf.Operation)]
        with tf.control_dependencies(made):
            ops = self.count(batch)
        if not ops:
            return value
        with tf.control_dependencies(ops):
            return tf.nest.map_structure(tf.identity, value)


@runtime_checkable
class Streamed(Source, Protocol):
    """A source whose shards are read and mapped batch by batch on their tasks, never whole (file sources): the engine
    folds each batch's ``combiner.partial(map_fn(batch), rows of the batch)`` into the shard's running partial with
    ``combiner.merge``, so a task holds a few batches, not its shard; the weights are the rows actually read."""

    def batches(self, shard: Shard, batch_rows: int | None) -> Sequence[Batches]:
        """Inside the job's graph and the shard's device scope: the shard's pieces, in row order (``batch_rows``: the
        run's ``batch_rows=``; None: the source's own, a few MB)."""
        ...

    def empty_batch(self) -> tuple[tf.Tensor, ...]:
        """Inside the job's graph: a batch of no rows, as the batches are (one tensor, or a table's columns)."""
        ...


def streamed(srcs: Sequence[Source]) -> Streamed | None:
    """The one streamed source of a job's inputs, or None when nothing streams.

    Raises:
        InputError: a streamed source co-partitioned with other inputs.
    """
    found = [cast(Streamed, s) for s in srcs if implements(s, Streamed)]
    if not found:
        return None
    if len(srcs) > 1:
        raise InputError(
            "file sources stream alone: a tuple of co-partitioned inputs cannot include one; "
            "persist() the files first (files.persist(cluster=c)) and pass the resident data"
        )
    return found[0]


class Input(abc.ABC):
    """Data that supplies its own :class:`Source` (resident ``Sharded`` data, file sources)."""

    @abc.abstractmethod
    def as_source(self) -> Source:
        """The source jobs read this data through."""


PLAIN_DTYPES = frozenset(map(np.dtype, "bhilqBHILQefd"))
"""The numpy dtypes of numbers TensorFlow holds as they are (native byte order); booleans go through :func:`as_array`,
whose bytes may be other than 0 and 1."""


def as_array(value: Any, *, argument: str) -> np.ndarray:
    """``value`` (numpy array, tf.Tensor, nested list, scalar) as a numeric numpy array (booleans as bytes 0 and 1:
    a copy where some byte is neither).

    Raises:
        TypeError: strings, objects or other non-numeric data.
        InputError: a ragged nested list.
    """
    if isinstance(value, tf.data.Dataset):
        raise TypeError(
            f"{argument} is a tf.data.Dataset, which tfmapreduce does not read: its rows would have to pass through the "
            "client. Give the files the dataset reads to a reader that runs on the workers (tmr.read_npy, tmr.read_text, "
            "tmr.read_csv, tmr.read_tfrecord, tmr.read_raw), or, for data that fits the client's memory, an array: "
            "np.concatenate(list(dataset.as_numpy_iterator()))"
        )
    if isinstance(value, (tf.Tensor, tf.Variable)):
        value = value.numpy()
    try:
        array = np.asarray(value)
    except ValueError as e:
        raise InputError(f"{argument} must be a rectangular array, got a ragged {type(value).__name__} ({e})") from None
    if array.dtype.kind in "mM":
        raise TypeError(
            f"{argument} has dtype {array.dtype} (dates or durations), which TensorFlow cannot hold; "
            f"convert it to numbers first, e.g. x.astype(np.int64) (counts of its unit) or x / np.timedelta64(1, 's')"
        )
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise TypeError(
            f"{argument} must hold numbers or booleans, got dtype {array.dtype}; convert it, e.g. np.asarray(x, dtype=np.float32)"
        )
    if np.iscomplexobj(array):
        raise TypeError(f"{argument} has complex dtype {array.dtype}; tfmapreduce maps real numbers")
    if array.dtype.kind == "f" and array.dtype.itemsize > 8:
        raise TypeError(
            f"{argument} has dtype {array.dtype}, wider than TensorFlow's float64; convert it with x.astype(np.float64) "
            "(which rounds to float64's 53-bit mantissa)"
        )
    if array.dtype == np.bool_ and array.size and array.view(np.uint8).max() > 1:
        array = array.view(np.uint8) != 0  # numpy's True is any nonzero byte; TensorFlow's is the byte 1
    return array


@attrs.frozen(eq=False)
class Shipped:
    """Host data sliced on the client: each task receives only its shards' bytes, fed per run."""

    array: np.ndarray

    @property
    def rows(self) -> int:
        return int(self.array.shape[0])

    @property
    def dtype(self) -> np.dtype:
        return self.array.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    home = home_plan = property(lambda self: None)
    """None: host data lives on no cluster, in no plan (the run places it)."""

    def signature(self, plan: Plan) -> Hashable:
        return ("shipped", self.array.dtype.str, self.array.shape[1:], tuple(s.path for s in plan.shards))

    def stageable(self, shard: Shard, min_bytes: int) -> bool:
        """Whether ``shard`` may travel through a shared-memory file (a decodable type or strings, ``min_bytes`` or more)."""
        return can_stage(self.array.dtype, self.bytes_sent(shard), min_bytes)

    def tensor(self, shard: Shard, *, rows_free: bool = False) -> ShardTensor:
        """The shard's tensor: mapped from shared memory, read from a staged file, or a fed placeholder of the shard's
        rows; with ``rows_free``, a fed shard's placeholder leaves its rows unknown (``None``), so a program keyed on
        the plan's shape serves host arrays of any rows (a staged or mapped shard keeps its rows: its buffer is sized)."""
        staged = shard.path in ("shm", STAGED) and self.stageable(shard, 1)
        shape = (None if rows_free and not staged else shard.rows, *self.array.shape[1:])
        mapped = staged and shard.path == "shm" and not self._strings  # (strings: bytes of their own each run)
        buffer = MappedBuffer.reserve(self.bytes_sent(shard)) if mapped else None  # the program's own
        placeholder: tf.Tensor | MappedBuffer
        if buffer is not None:  # mapped
            placeholder, value = buffer, buffer.tensor(self.array.dtype, shape)
        elif staged:  # the path of a file on the worker's host, fed per run
            placeholder = tf.compat.v1.placeholder(tf.string, (), name="x_path")
            value = read_tensor(placeholder, self.array.dtype, shape)
        elif self._strings:  # one fed string a shard (strings.packed)
            placeholder = tf.compat.v1.placeholder(tf.string, (), name="x_packed")
            value = unpacked(placeholder, shape[0])
        else:
            placeholder = value = tf.compat.v1.placeholder(tf.as_dtype(self.array.dtype), shape, name="x")
        return ShardTensor(value, placeholder, staged=staged, mapped=value if buffer is not None else None)

    def feed(self, shard: Shard) -> np.ndarray[Any, Any] | bytes:
        rows = self.array[shard.start : shard.stop]
        return packed(rows) if self._strings else rows

    @property
    def _strings(self) -> bool:
        """Whether the array is 1-D strings, which travel packed (``strings.packed``)."""
        return self.array.dtype == object and self.array.ndim == 1

    def fed_only(self, plan: Plan) -> bool:
        """Whether every shard of ``plan`` travels by feed (``shard.path == "feed"``): its placeholders may then leave
        their rows unknown (:meth:`tensor` with ``rows_free``), none of its bytes in a buffer or file sized per shard."""
        return all(s.path == "feed" for s in plan.shards)

    def bytes_sent(self, shard: Shard) -> int:
        return shard.rows * math.prod(self.array.shape[1:]) * self.array.dtype.itemsize

    def input_error(self, error: JobError, plan: Plan, cluster: Cluster) -> None:
        return None  # host data cannot fail in a run

    def survive(self, lost: frozenset[Task]) -> None:
        """Nothing to do: the client still holds the data and sends it again."""


class Sources(tuple[Source, ...]):
    """A job's data already canonicalized by :func:`sources` (passed to it again, it is returned as it is)."""


def sources(x: Any, *, argument: str = "x") -> Sources:
    """Canonicalize a job's data: one array, or a tuple of co-partitioned inputs, into sources with equal rows.

    A tuple means several inputs partitioned together on axis 0; anything else
    is one input.  An :class:`Input` (resident ``Sharded`` data, file sources)
    supplies its own source.  A recipe canonicalizes once and hands the result
    on: canonicalizing a :class:`Sources` again costs nothing.
    """
    if isinstance(x, Sources):
        return x
    if type(x) is np.ndarray and x.ndim and x.dtype in PLAIN_DTYPES:  # the common case, as as_array would accept it
        return Sources((Shipped(x),))
    items = x if isinstance(x, tuple) else (x,)
    if not items:
        raise InputError(f"{argument}=() holds no input; pass an array or a tuple of arrays with equal rows")
    result: list[Source] = []
    for i, item in enumerate(items):
        name = f"{argument}[{i}]" if isinstance(x, tuple) else argument
        if isinstance(item, Input):
            result.append(item.as_source())
            continue
        array = as_array(item, argument=name)
        if array.ndim == 0:
            raise InputError(
                f"{name} is a 0-d scalar ({array!r}); the rows to partition are its axis 0, so pass at least a 1-d array"
            )
        result.append(Shipped(array))
    return co_partitioned(result, argument=argument)


def co_partitioned(srcs: Sequence[Source], *, argument: str = "x") -> Sources:
    """``srcs`` as a tuple, after checking that they have the same rows (they are partitioned together).

    Raises:
        InputError: the rows differ; the message lists each input's.
    """
    rows = {s.rows for s in srcs}
    if len(rows) > 1:
        shapes = ", ".join(f"{argument}[{i}]: {s.rows}" for i, s in enumerate(srcs))
        raise InputError(
            f"co-partitioned inputs must have the same rows on axis 0, got {shapes}; slice or pad them to one length"
        )
    return Sources(srcs)


def host_array(x: Any, *, argument: str = "x") -> np.ndarray[Any, Any]:
    """``x`` as one host array of at least one dimension (what ``scatter`` and ``save_shards`` send).

    Raises:
        TypeError: ``x`` is already on the workers, or not numeric.  InputError: a 0-d scalar or ragged list.
    """
    srcs = sources(x, argument=argument)
    if len(srcs) != 1:
        raise InputError(f"{argument} must be one array, got a tuple of {len(srcs)}; send each array on its own")
    src = srcs[0]
    if not isinstance(src, Shipped):
        raise TypeError(f"{argument} is already on the workers ({type(x).__name__}); gather() it first")
    return src.array
