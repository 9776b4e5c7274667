"""The writers' public functions: ``write_npy``, ``write_text``, ``write_csv`` and ``write_tfrecord``.

Each checks its arguments, claims the directory (see ``commit``), runs one :class:`~.write.Write` and returns its
``Written``; a write that fails leaves no part and no ``_temporary`` behind.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from typing_extensions import Unpack

from .._engine import driver as _engine
from .._engine.kind import refuse
from .._io.files.encode import CsvWriter, Format, NpyWriter, TextWriter, TfRecordWriter, fields_of
from .._io.files.written import Written as Written
from .._options import Options, RunOptions
from .commit import absolute, claim, discard
from .shuffle.sharded import KeyedSharded
from .write import Write


def _write(format: Format, data: Any, directory: Any, overwrite: bool, shared: bool, options: dict[str, Any]) -> Written:
    if not isinstance(shared, bool):
        raise TypeError(f"{format.name}: shared must be True or False, got {type(shared).__name__} {shared!r}")
    if overwrite is True and not shared:
        raise TypeError(
            f"{format.name}: overwrite=True needs shared=True: a task cannot remove its old parts (TensorFlow's graph has no "
            "op that removes a file), so they could stay beside the new ones; write to a new directory instead"
        )
    settings = RunOptions.of(**options)
    refuse(Write.refused, settings)  # before the directory is claimed
    if isinstance(data, KeyedSharded):
        data = (data.keys, *data.dense(f"tmr.{format.name}"))
    if shared:
        path, made = claim(format.name, directory, overwrite)
    else:  # each task's own disk: the client neither makes nor checks it (each task checks its own in the run)
        path, made = absolute(format.name, directory, overwrite), False
    try:
        written: Written = _engine.run(Write(format, path, overwrite, shared), data, settings)
        return written
    except BaseException:
        discard(path, made, settle=0.0)  # the run's clean-up waited for every part (shared=False: the client's disk only)
        raise


def _key_columns(data: Any) -> tuple[str, ...] | None:
    """The default CSV columns of a keyed result: key, then value (value0, value1, ... for several fields)."""
    if not isinstance(data, KeyedSharded):
        return None
    fields = fields_of([leaf.shape for leaf in data.dense("tmr.write_csv")])
    return ("key", *(["value"] if fields == 1 else [f"value{i}" for i in range(fields)]))


def write_npy(
    data: Any,
    directory: str | os.PathLike[str],
    /,
    *,
    overwrite: bool = False,
    shared: bool = True,
    **options: Unpack[Options],
) -> Written:
    """Write ``data`` as ``.npy`` part files, each shard's by the task that holds it: nothing crosses the client.

    ``directory`` gets ``part-00000-of-0000N.npy``, ... (one per shard, in row order) and ``_SUCCESS`` once every
    part is written; ``tmr.read_npy(directory)`` reads the same array back.  Each attempt writes under
    ``directory/_temporary/`` first, and only the attempt that succeeds is moved into place: a failed or retried
    attempt leaves no visible part.

    Args:
        data: resident ``Sharded`` data (e.g. a ``tmr.map`` output) or a host array (partitioned as for any job).
        directory: where the parts go, on a file system the client and the writing tasks share (or, with
            ``shared=False``, the same path on each writing task's own disk).
        overwrite: replace what the directory holds once the write succeeds (False: a non-empty directory is refused).
        shared: False where the tasks have no file system in common with the client (each machine's local disk):
            each task checks that its directory is empty, writes and commits its own parts there (``_SUCCESS``
            per task), and the returned ``Written`` pins each part to its task: ``tmr.read_npy(written)``.
        **options: ``cluster`` (for host arrays), ``sizes``, ``devices``, ``timeout``, ``retries``, ``transfer``.

    Returns:
        A [`Written`][tfmapreduce.Written]: the directory, each part's path, task and rows.

    Raises:
        OutputError: the directory is a file or not empty, or a task cannot write its part (named).
        TypeError: the data is not numeric (strings need ``write_text`` or ``write_csv``), or several arrays;
            ``overwrite=True`` with ``shared=False``.

    Examples:
        >>> import tempfile, os
        >>> folder = os.path.join(tempfile.mkdtemp(), "out")
        >>> with tmr.scatter(np.arange(10.0), cluster=cluster) as data:
        ...     written = tmr.write_npy(data, folder)
        >>> [os.path.basename(p) for p in written.parts][:2], written.rows
        (['part-00000-of-00004.npy', 'part-00001-of-00004.npy'], (3, 3, 2, 2))
        >>> float(tmr.sum(tmr.read_npy(folder), cluster=cluster))
        45.0
    """
    return _write(NpyWriter(), data, directory, overwrite, shared, dict(options))


def write_text(
    data: Any,
    directory: str | os.PathLike[str],
    /,
    *,
    delimiter: str = "\t",
    overwrite: bool = False,
    shared: bool = True,
    **options: Unpack[Options],
) -> Written:
    """Write ``data`` as text part files, one line per row, each shard's by the task that holds it.

    Strings are written as they are (a line break in one is an error), booleans as 1 and 0, numbers losslessly
    (floats with the digits that read back the same value).  Rows of several fields (a ``(rows, k)`` array, a tuple of
    co-partitioned arrays, a ``KeyedSharded``'s key and values) are joined with ``delimiter``.  ``tmr.read_text``
    reads the lines back in order.  Directory, commit protocol, ``shared=`` and options as for [`write_npy`][tfmapreduce.write_npy].

    Examples:
        >>> import tempfile, os
        >>> folder = os.path.join(tempfile.mkdtemp(), "words")
        >>> with tmr.map(lambda s: tf.strings.split(s).flat_values, np.array(["to be", "or not"]), cluster=cluster) as words:
        ...     _ = tmr.write_text(words, folder)
        >>> with tmr.read_text(folder).persist(cluster=cluster) as lines:
        ...     lines.gather().tolist()
        ['to', 'be', 'or', 'not']
    """
    if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in "\r\n":
        raise TypeError(f"write_text: delimiter must be one character other than a line break, got {delimiter!r}")
    return _write(TextWriter(delimiter), data, directory, overwrite, shared, dict(options))


def write_csv(
    data: Any,
    directory: str | os.PathLike[str],
    /,
    *,
    columns: Sequence[str] | None = None,
    delimiter: str = ",",
    overwrite: bool = False,
    shared: bool = True,
    **options: Unpack[Options],
) -> Written:
    """Write ``data`` as CSV part files with a header line, each shard's by the task that holds it.

    Fields as in [`write_text`][tfmapreduce.write_text] (strings quoted where they hold the delimiter, a quote or a line break); a
    ``(rows, k)`` array gives ``k`` columns, a tuple of arrays or a ``KeyedSharded`` one or more each.  ``columns``
    names them (default ``c0, c1, ...``; ``key, value`` for a keyed result).  ``tmr.read_csv`` reads the numbers
    back.  Directory, commit protocol, ``shared=`` and options as for [`write_npy`][tfmapreduce.write_npy].

    Examples:
        >>> import tempfile, os
        >>> folder = os.path.join(tempfile.mkdtemp(), "sums")
        >>> with tmr.sum_by_key(np.array([1, 2, 1]), np.array([1.5, 2.0, 3.0]), cluster=cluster, resident=True) as r:
        ...     written = tmr.write_csv(r, folder)
        >>> open(written.parts[0]).readline().strip()
        'key,value'
        >>> with tmr.read_csv(folder).persist(cluster=cluster) as table:
        ...     sorted(map(tuple, table.gather().tolist()))
        [(1.0, 4.5), (2.0, 2.0)]
    """
    if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '\r\n"':
        raise TypeError(f"write_csv: delimiter must be one character other than a quote or line break, got {delimiter!r}")
    if columns is not None and (isinstance(columns, str) or not all(isinstance(c, str) for c in columns)):
        raise TypeError(f"write_csv: columns must be a list of names, one per field, got {columns!r}")
    names = tuple(columns) if columns is not None else _key_columns(data)
    return _write(CsvWriter(names, delimiter), data, directory, overwrite, shared, dict(options))


def write_tfrecord(
    data: Any,
    directory: str | os.PathLike[str],
    /,
    *,
    features: Sequence[str] | None = None,
    overwrite: bool = False,
    shared: bool = True,
    **options: Unpack[Options],
) -> Written:
    """Write ``data`` as TFRecord part files of one ``tf.train.Example`` per row, each shard's by the task that holds it.

    Each array of ``data`` (one, a tuple of co-partitioned arrays, or a ``KeyedSharded``'s keys and values) is one
    feature of every Example, named by ``features`` (default ``f0, f1, ...``; ``key, value`` for a keyed result),
    holding its row's values flattened: floats (float16, float32) in a ``float_list``, integers and booleans in
    an ``int64_list``, strings in a ``bytes_list``.  ``tmr.read_tfrecord(directory, features={name:
    tf.io.FixedLenFeature(row_shape, dtype)})`` reads them back.  The records are serialized and written on the
    workers.  Directory, commit protocol, ``shared=`` and options as for [`write_npy`][tfmapreduce.write_npy].

    Raises:
        TypeError: a dtype a ``tf.train.Feature`` cannot hold exactly (float64, uint64: the message says what to do),
            or ``features`` does not name each array once.

    Examples:
        >>> import tempfile, os
        >>> folder = os.path.join(tempfile.mkdtemp(), "records")
        >>> x, y = np.arange(6, dtype=np.float32).reshape(3, 2), np.array([7, 8, 9])
        >>> _ = tmr.write_tfrecord((x, y), folder, features=["x", "y"], cluster=cluster)
        >>> spec = {"x": tf.io.FixedLenFeature([2], tf.float32), "y": tf.io.FixedLenFeature([], tf.int64)}
        >>> with tmr.read_tfrecord(folder, features=spec).persist(cluster=cluster) as back:
        ...     back.gather().tolist()
        [[0.0, 1.0, 7.0], [2.0, 3.0, 8.0], [4.0, 5.0, 9.0]]
    """
    if features is not None and (isinstance(features, str) or not all(isinstance(f, str) for f in features)):
        raise TypeError(f"write_tfrecord: features must be a list of names, one per array, got {features!r}")
    names = tuple(features) if features is not None else _key_features(data)
    return _write(TfRecordWriter(names), data, directory, overwrite, shared, dict(options))


def _key_features(data: Any) -> tuple[str, ...] | None:
    """The default features of a keyed result: key, then value (value0, value1, ... for several leaves)."""
    if not isinstance(data, KeyedSharded):
        return None
    n = len(data.leaves)
    return ("key", *(["value"] if n == 1 else [f"value{i}" for i in range(n)]))
