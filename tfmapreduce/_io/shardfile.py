"""Shard files: an array written as one file per shard with a manifest, and loaded back as resident data.

Each worker reads only its own files, with TensorFlow's file ops, and trusts nothing in them: the
manifest is checked on the client, and each file's header is checked against the manifest and the
file's size inside the worker's graph before a byte of the tensor is allocated.
"""

from __future__ import annotations

import json
import numbers
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from typing_extensions import Unpack

from .._base.device import Device
from .._base.errors import InputError, JobError
from .._base.partition import SizesLike, canonical_sizes, check_count
from .._base.plan import Shard, make_plan
from .._options import PlaceOptions, RunOptions
from .resident import Sharded, build_sharded, check_cluster
from .source import host_array

_MANIFEST = "shards.json"

SHARDS = 2
"""The files :func:`save_shards` writes by default (and the most beyond a row a file a shard count may ask for)."""


def _file(index: int, count: int) -> str:
    return f"shard-{index:05d}-of-{count:05d}.tensor"


def save_shards(x: Any, directory: str | os.PathLike[str], /, *, sizes: SizesLike = None, shards: int = SHARDS) -> list[str]:
    """Write ``x`` as one file per shard (a serialized TensorProto each) plus a ``shards.json`` manifest.

    ``sizes`` takes every spelling of ``MapReduce.run``; None means ``shards``
    even shards.  A shard count (``sizes`` or ``shards``) is at most ``max(rows, 2)``: a row a
    file, or the two files of the default.  Returns the file names, in shard order.

    Raises:
        PartitionError: ``sizes`` or ``shards`` is not a partition of the rows (checked before anything is written).

    Examples:
        >>> import tempfile
        >>> directory = tempfile.mkdtemp()
        >>> tmr.save_shards(np.arange(10.0), directory, sizes=[3, 7])
        ['shard-00000-of-00002.tensor', 'shard-00001-of-00002.tensor']
        >>> with tmr.load_shards(directory, cluster=cluster) as data:
        ...     float(tmr.sum(data))
        45.0
    """
    array = host_array(x)
    if sizes is None:
        if isinstance(shards, bool) or not isinstance(shards, numbers.Integral):
            raise TypeError(f"shards must be a number of files (an int), got {type(shards).__name__} {shards!r}")
        sizes = check_count(int(shards), rows=len(array), devices=SHARDS, argument="shards", what="default files")
    canonical = canonical_sizes(sizes, rows=len(array), default_shards=SHARDS)
    os.makedirs(directory, exist_ok=True)
    names, start = [], 0
    for i, size in enumerate(canonical):
        names.append(_file(i, len(canonical)))
        data = tf.io.serialize_tensor(tf.constant(array[start : start + size])).numpy()
        with open(os.path.join(directory, names[-1]), "wb") as f:
            f.write(data)
        start += size
    manifest = {"dtype": array.dtype.str, "shape": list(array.shape), "sizes": list(canonical), "files": names}
    with open(os.path.join(directory, _MANIFEST), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    return names


def load_shards(directory: str | os.PathLike[str], /, **options: Unpack[PlaceOptions]) -> Sharded:
    """Load files written by [`save_shards`][tfmapreduce.save_shards] as a Sharded: each worker reads only its own files,
    with TensorFlow's file ops, from the same path (a shared or copied directory).

    Args:
        directory: the folder [`save_shards`][tfmapreduce.save_shards] wrote.
        **options: ``cluster`` (required), ``devices``, ``fallback``, ``timeout`` (see ``RunOptions``); the sizes
            are the saved ones.

    Raises:
        InputError: the manifest is missing or malformed, or a shard file is missing or corrupt
            (the message names the file and the task that read it).
    """
    settings = RunOptions.placing("load_shards", dict(options), without=("sizes",))
    cluster = check_cluster(settings.cluster)
    directory = os.path.abspath(os.fspath(directory))
    dtype, shape, sizes, files = _manifest(directory)
    available = [Device.parse(d) for d in cluster.devices]
    plan = make_plan(shape[0], sizes, settings.devices, available, fallback=settings.fallback)
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize

    def read(shard: Shard) -> tf.Tensor:
        # The path passes a stateful identity: TensorFlow's classic constant folding would otherwise read
        # and parse the file of a constant path while it optimizes the graph, ahead of every check below.
        path = tf.raw_ops.Print(input=os.path.join(directory, files[shard.index]), data=[], message="", first_n=0)
        raw = tf.io.read_file(path)
        # A TensorProto holds at least its elements' bytes: a file claiming more rows than it holds
        # fails here, and a header that claims another type or shape than the manifest's fails in
        # check_header, in that order, before parse_tensor would allocate what the header claims.
        short = tf.debugging.assert_greater_equal(
            tf.cast(tf.strings.length(raw), tf.int64),
            tf.constant(shard.rows * row_bytes, tf.int64),
            message="shard file too short",
        )
        with tf.control_dependencies([short]):
            checked = check_header(raw, dtype, (shard.rows, *shape[1:]))
        with tf.control_dependencies([checked]):
            value = tf.io.parse_tensor(raw, out_type=tf.as_dtype(dtype))
        return tf.ensure_shape(value, (shard.rows, *shape[1:]))

    try:
        return build_sharded(cluster, plan, dtype, shape, [read] * len(plan.shards), settings.timeout)
    except JobError as e:
        found = re.search(r"shard(\d+)/", e.details) or re.search(r"shard-(\d+)-of", e.details)
        if not found:
            raise
        shard = plan.shards[int(found.group(1))]
        raise InputError(
            f"shard file {os.path.join(directory, files[shard.index])} could not be loaded by task {shard.task}: "
            f"{_load_failure(e.details, shard.rows)}; write it again with save_shards()"
        ) from None


def check_header(raw: tf.Tensor, dtype: np.dtype[Any], shape: Sequence[int]) -> tf.Operation | None:
    """Inside a graph, on the reading device: an assertion that the serialized TensorProto ``raw`` claims ``dtype``
    (checked first) and ``shape``, read from its header alone (``tf.io.decode_proto``): nothing of the size it
    claims is allocated.  None when run eagerly (it has checked already).

    Example:
        >>> raw = tf.io.serialize_tensor(tf.zeros([3, 2], tf.float64))
        >>> check_header(raw, np.dtype(np.float64), (3, 2))  # eager: checked, nothing to wait for
        >>> check_header(raw, np.dtype(np.float64), (300_000_000,))
        Traceback (most recent call last):
        ...
        tensorflow.python.framework.errors_impl.InvalidArgumentError: ...shard file header: its shape is not the manifest's...
    """
    _, (type_enum, shape_proto) = tf.io.decode_proto(
        tf.reshape(raw, [1]), "tensorflow.TensorProto", ["dtype", "tensor_shape"], [tf.int32, tf.string]
    )
    _, (dims,) = tf.io.decode_proto(
        tf.strings.reduce_join(shape_proto, axis=1), "tensorflow.TensorShapeProto", ["dim"], [tf.string]
    )
    _, (sizes,) = tf.io.decode_proto(tf.reshape(dims, [-1]), "tensorflow.TensorShapeProto.Dim", ["size"], [tf.int64])
    claimed = tf.strings.reduce_join(tf.strings.as_string(tf.reduce_sum(sizes, axis=1)), separator=",")  # absent: size 0
    same_type = tf.equal(tf.reduce_sum(type_enum), tf.as_dtype(dtype).as_datatype_enum)
    type_checked = tf.debugging.Assert(same_type, ["shard file header: its element type is not the manifest's"])
    with tf.control_dependencies([type_checked]):
        same_shape = tf.equal(claimed, ",".join(str(n) for n in shape))
        return tf.debugging.Assert(same_shape, ["shard file header: its shape is not the manifest's"])


def _load_failure(details: str, rows: int) -> str:
    """What went wrong reading a shard file, in words that never quote the file's content."""
    if "shard file too short" in details:
        return f"it is shorter than the {rows} rows the manifest gives it (truncated, or not this manifest's file)"
    if "shard file header: its element type" in details:
        return "its header claims another element type than the manifest's (not this manifest's file)"
    if "shard file header: its shape" in details:
        return f"its header claims another shape than the manifest's {rows} rows (not this manifest's file)"
    if "NotFound" in details or "No such file" in details:
        return "it does not exist on that task (a shared or copied directory must hold the same files on every machine)"
    if "Could not parse" in details or "parse" in details.lower():
        return "it is not a tensor file written by save_shards()"
    if "shape" in details.lower():
        return f"it does not hold {rows} rows of the manifest's shape"
    return "it is unreadable"


def _manifest(directory: str) -> tuple[np.dtype[Any], tuple[int, ...], list[int], list[str]]:
    """The validated manifest of a save_shards() directory: dtype, shape, sizes and shard file names.

    Raises:
        InputError: the manifest is missing, malformed, or names a file outside ``directory``.
    """
    where = os.path.join(directory, _MANIFEST)
    try:
        with open(where, encoding="utf-8") as f:
            manifest = json.load(f)
        dtype, shape, sizes, files = np.dtype(manifest["dtype"]), manifest["shape"], manifest["sizes"], manifest["files"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(
            f"{where} is not a readable shard manifest ({type(e).__name__}: {e}); write the data with save_shards()"
        ) from None
    problems = []
    if dtype.kind not in "biuf" or dtype.itemsize > 8:
        problems.append(f"dtype {dtype} is not a numeric type TensorFlow holds")
    if not (isinstance(shape, list) and shape and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)):
        problems.append(f"shape must be a list of ints ≥ 0, got {shape!r}")
    if not (isinstance(sizes, list) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in sizes)):
        problems.append(f"sizes must be a list of row counts ≥ 0, got {sizes!r}")
    elif not problems and sum(sizes) != shape[0]:
        problems.append(f"sizes {sizes} sum to {sum(sizes)}, not the {shape[0]} rows of shape {shape}")
    if not (isinstance(files, list) and isinstance(sizes, list) and len(files) == len(sizes)):
        problems.append(
            f"files must list one file name per shard ({len(sizes) if isinstance(sizes, list) else '?'}), got {files!r}"
        )
    else:
        for name in files:
            inside = isinstance(name, str) and name and os.path.basename(name) == name and name not in (".", "..")
            real = os.path.realpath(os.path.join(directory, name)) if inside else ""
            if not inside or os.path.dirname(real) != os.path.realpath(directory):
                problems.append(
                    f"file {name!r} is not a plain file name inside the directory (paths, '..' and symlinks out are refused)"
                )
    if problems:
        raise InputError(f"{where} is not a valid shard manifest: " + "; ".join(problems) + "; write the data with save_shards()")
    return dtype, tuple(shape), sizes, files
