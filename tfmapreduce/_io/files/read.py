"""The readers' public functions: ``read_npy``, ``read_raw``, ``read_text``, ``read_csv`` and ``read_tfrecord``.

Each checks its arguments and describes the files as a :class:`~.files.Files` (nothing is read until a run); given
a writer's ``Written``, the parts are named exactly (no pattern) and, where not shared, pinned to their tasks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..._base.errors import InputError
from ..strings import text_encoding
from .csv import Csv
from .encode import npy_header
from .files import Files
from .readers import Layout, Text, TfRecord, tfrecord_features
from .rows import Npy, Raw
from .source import paths_of
from .written import PathsLike, Written


def read_npy(paths: PathsLike, /) -> Files:
    """``.npy`` files, one array split along axis 0: each file's header is read on the client, its rows on the workers.

    Big files are split into several shards by row range; every file must hold
    the same dtype and row shape.  Given a ``Written`` of ``write_npy(..., shared=False)``, each part is read by the
    task that wrote it, and the client needs no look at it (the write recorded its rows and dtype).

    Examples:
        >>> import tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> for i in range(3):
        ...     np.save(os.path.join(folder, f"part{i}.npy"), np.full((4, 2), i, np.float32))
        >>> tmr.mean(tmr.read_npy(os.path.join(folder, "*.npy")), axis=0, cluster=cluster)
        array([1., 1.])
    """
    unpinned, pinned = paths_of(paths, "read_npy")
    described: tuple[tuple[str, int, Layout], ...] = ()
    if isinstance(paths, Written) and not paths.shared and paths.row is not None:  # parts the client may not see
        dtype, row_shape = np.dtype(paths.row[0]), paths.row[1]
        row_bytes = dtype.itemsize * math.prod(row_shape)
        for path, rows in zip(paths.parts, paths.rows, strict=True):
            offset = len(npy_header(dtype, (rows, *row_shape)))
            described += ((path, offset + rows * row_bytes, Layout(rows, offset, dtype, row_shape)),)
    return Files(Npy(), unpinned, pinned, described=described, literal=isinstance(paths, Written))


def read_raw(paths: PathsLike, /, *, dtype: Any, shape: Sequence[int] = ()) -> Files:
    """Headerless binary files of rows of ``dtype`` and row shape ``shape`` (e.g. written by ``ndarray.tofile``).

    Examples:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.f64")
        >>> np.arange(12.0).tofile(path)
        >>> tmr.sum(tmr.read_raw(path, dtype=np.float64, shape=(3,)), axis=0, cluster=cluster)
        array([18., 22., 26.])
    """
    unpinned, pinned = paths_of(paths, "read_raw")
    np_dtype = np.dtype(dtype)
    row_shape = tuple(int(d) for d in shape)
    if np_dtype.itemsize == 0 or any(d < 1 for d in row_shape):
        raise InputError(
            f"read_raw: dtype={np_dtype} and shape={row_shape} describe empty rows; give a numeric dtype and a row shape of sizes ≥ 1"
        )
    return Files(Raw(np_dtype.str, row_shape), unpinned, pinned, literal=isinstance(paths, Written))


def read_text(paths: PathsLike, /, *, encoding: str = "utf-8") -> Files:
    """Text files, one string row per line (without its line ending); whole files are the input splits.

    Args:
        paths: a path, a glob, a list of them, ``{task: [paths]}``, or a writer's ``Written`` (where its parts stay
            on the tasks' own disks, ``shared=False``, each is read by the task that wrote it).
        encoding: what the keys (and strings) of a keyed or group job over the lines come back as:
            ``str`` decoded with this codec (UTF-8 by default), or ``"bytes"`` to keep them as bytes.
            A result with a key that does not decode keeps all its keys as bytes.  Map functions
            always see the lines as bytes (``tf.string``).

    Examples:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.txt")
        >>> _ = open(path, "w").write("to be\\nor not\\nto be\\n")
        >>> int(tmr.count(tmr.read_text(path), cluster=cluster))
        3
    """
    unpinned, pinned = paths_of(paths, "read_text")
    return Files(Text(), unpinned, pinned, text_encoding(encoding, "read_text"), literal=isinstance(paths, Written))


def read_csv(
    paths: PathsLike,
    /,
    *,
    columns: Sequence[str | int] | None = None,
    dtypes: Any = None,
    header: bool = True,
    delimiter: str = ",",
    encoding: str = "utf-8",
) -> Files:
    """CSV files of numbers as one (rows, columns) matrix; whole files are the input splits.

    Args:
        paths: a path, a glob, a list of them, ``{task: [paths]}``, or a writer's ``Written`` (where its parts stay
            on the tasks' own disks, ``shared=False``, each is read by the task that wrote it).
        columns: the columns to read, by header name or index (None: all), in that order.
        dtypes: one dtype for every field (None: float32), a list with one per field of the file, or a dict by
            header name (``{"url": str, "revenue": float}``; each column it leaves out is read as its field in the
            first data line reads: int64 for an integer, float64 for another number, text otherwise); ``str`` for a
            column of text (a by-key recipe's key column, or one left out with ``columns=``).
        header: whether each file's first line names the columns (it is skipped).
        delimiter: the field separator.
        encoding: what string keys of a by-key recipe over the table come back as (see [`read_text`][tfmapreduce.read_text]).

    The by-key recipes take a CSV table whole, with its columns named:
    ``tmr.mean_by_key(tmr.read_csv(paths), keys="city", values="price")``.

    The client reads each file's first line (the header) to learn the columns, nothing else.

    Examples:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.csv")
        >>> _ = open(path, "w").write("a,b\\n1,10\\n2,20\\n3,30\\n")
        >>> tmr.mean(tmr.read_csv(path, columns=["b"]), axis=0, cluster=cluster)
        array([20.])
    """
    unpinned, pinned = paths_of(paths, "read_csv")
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise TypeError(f"read_csv: delimiter must be one character, got {delimiter!r}")
    chosen = None if columns is None else tuple(c if isinstance(c, str) else int(c) for c in columns)
    kinds: Any = "float32" if dtypes is None else dtypes

    def dtype(d: Any) -> np.dtype[Any]:
        try:
            result: np.dtype[Any] = np.dtype(d)
        except TypeError:
            raise TypeError(
                f"read_csv: dtypes= must hold dtypes (float32, float64, int32, int64, or str for text), got {d!r}; "
                "e.g. dtypes='int64', dtypes=['int64', str] or dtypes={'price': 'float64'}"
            ) from None
        return result

    if isinstance(kinds, Mapping):
        if not kinds or not all(isinstance(n, str) for n in kinds):
            raise TypeError(f"read_csv: dtypes as a dict must map column names to dtypes, e.g. {{'url': str}}, got {kinds!r}")
        kinds = tuple((n, dtype(d).name) for n, d in kinds.items())
        listed = [d for _, d in kinds]
    else:
        kinds = dtype(kinds).name if isinstance(kinds, (str, type, np.dtype)) else tuple(dtype(d).name for d in kinds)
        listed = [kinds] if isinstance(kinds, str) else list(kinds)
    for kind in listed:
        if np.dtype(kind).kind not in "iufU" or (isinstance(kinds, str) and np.dtype(kind).kind == "U"):
            raise TypeError(
                f"read_csv: dtypes must be numeric (float32, float64, int32, int64), or str for a column of text in a list "
                f"with one dtype per field, got {kind}"
            )
    encoded = text_encoding(encoding, "read_csv")
    return Files(Csv(chosen, kinds, bool(header), delimiter), unpinned, pinned, encoded, literal=isinstance(paths, Written))


def read_tfrecord(paths: PathsLike, /, *, features: Mapping[str, Any]) -> Files:
    """TFRecord files of ``tf.train.Example`` records; whole files are the input splits.

    ``features`` maps names to ``tf.io.FixedLenFeature(shape, dtype)``: one
    feature gives rows of its shape; several are flattened and concatenated
    into one row (cast to their common dtype).

    Examples:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.tfrecord")
        >>> with tf.io.TFRecordWriter(path) as w:
        ...     for v in [1.0, 2.0, 6.0]:
        ...         w.write(tf.train.Example(features=tf.train.Features(feature={
        ...             "v": tf.train.Feature(float_list=tf.train.FloatList(value=[v]))})).SerializeToString())
        >>> float(tmr.mean(tmr.read_tfrecord(path, features={"v": tf.io.FixedLenFeature([], tf.float32)}), cluster=cluster))
        3.0
    """
    unpinned, pinned = paths_of(paths, "read_tfrecord")
    return Files(TfRecord(tfrecord_features(features)), unpinned, pinned, literal=isinstance(paths, Written))
