"""Part-file formats: a shard's rows as the bytes of one ``.npy``, text or CSV file, made in the graph on its device.

Each format checks on the client that it can hold the data (:meth:`Format.check`, naming the dtype it cannot),
then encodes a shard's tensors into one string scalar (:meth:`Format.encode`) that the writer stores with
``tf.io.write_file``.  Numbers in text are written losslessly: integers as they are, floats with the
significant digits that give the same float back (9 for float32, 17 for float64).
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import attrs
import numpy as np
import tensorflow as tf

from ..._base.errors import OutputError

SUCCESS = "_SUCCESS"
"""The marker a committed write leaves in its directory, beside its parts (as Hadoop's committer does)."""

PARTS = "part-*"
"""The pattern of the part files in a committed directory."""


def part_name(index: int, parts: int, ext: str) -> str:
    """The file name of part ``index`` of ``parts``: ``part-00000-of-00004.npy`` (names sort in shard order).

    Example:
        >>> part_name(3, 4, ".csv")
        'part-00003-of-00004.csv'
    """
    return f"part-{index:05d}-of-{parts:05d}{ext}"


LINE_BREAK = "tfmapreduce-write: a string with a line break"
"""The message of the in-run check that text rows hold no line break (recognised in a failed run's error)."""

PART_BYTES = 2**31 - 1
"""The most bytes of one ``.npy`` part (a tensor is serialized as a protocol buffer, at most 2 GiB)."""

_DIGITS = {tf.float16: 5, tf.bfloat16: 4, tf.float32: 9, tf.float64: 17}
"""Significant digits that give a float of each type back from its text."""


def as_text(values: tf.Tensor) -> tf.Tensor:
    """``values`` as strings: strings as they are, booleans as 1 and 0, numbers losslessly.

    Example:
        >>> as_text(tf.constant([0.1, 1.0, 1e-30, 1 / 3], tf.float32)).numpy().tolist()
        [b'0.1', b'1', b'1e-30', b'0.33333334']
        >>> as_text(tf.constant([0.39, 2 / 3, float("nan")], tf.float64)).numpy().tolist()
        [b'0.39', b'0.6666666666666666', b'nan']
        >>> as_text(tf.constant([True, False])).numpy().tolist()
        [b'1', b'0']
    """
    dtype = values.dtype
    if dtype == tf.string:
        return values
    if dtype == tf.bool:
        return tf.strings.as_string(tf.cast(values, tf.int8))
    if dtype in (tf.float32, tf.float64):  # the fewest digits that read back as the same value (0.39, not 0.39000000000000001)
        text = tf.strings.as_string(values, precision=_DIGITS[dtype], shortest=True)
        for digits in range(_DIGITS[dtype] - 1, _DIGITS[dtype] - 4, -1):
            shorter = tf.strings.as_string(values, precision=digits, shortest=True)
            same = tf.strings.to_number(shorter, dtype) == values
            text = tf.where(same, shorter, text)
        return text
    if dtype in _DIGITS:
        return tf.strings.as_string(tf.cast(values, tf.float32), precision=_DIGITS[dtype], shortest=True)
    if dtype in (tf.uint16, tf.uint32):
        return tf.strings.as_string(tf.cast(values, tf.int64))
    return tf.strings.as_string(values)


def fields_of(shapes: Sequence[tuple[int, ...]]) -> int:
    """The fields per row of inputs of these shapes: one per 1-D input, ``k`` per ``(rows, k)`` input."""
    return sum(1 if len(s) == 1 else s[1] for s in shapes)


def _columns(tensors: Sequence[tf.Tensor]) -> list[tf.Tensor]:
    """Each row's fields, as text: one 1-D string tensor per field."""
    result: list[tf.Tensor] = []
    for t in tensors:
        text = as_text(t)
        result += [text] if t.shape.rank == 1 else tf.unstack(text, num=t.shape[1], axis=1)
    return result


class Format(Protocol):
    """How a writer turns a shard's rows into one part file."""

    name: ClassVar[str]
    """The writer, for messages (``write_npy``)."""
    reader: ClassVar[str]
    """The reader that reads the parts back (``read_npy``)."""
    ext: ClassVar[str]

    def check(self, dtypes: Sequence[np.dtype[Any]], shapes: Sequence[tuple[int, ...]]) -> None:
        """On the client: TypeError (naming the dtype or shape and the fix) unless the format holds such inputs."""

    def encode(self, tensors: Sequence[tf.Tensor], rows: int) -> tf.Tensor:
        """In the graph, on the shard's task: the part's contents for the shard's ``rows`` rows (a file's bytes, or records)."""

    def write(self, contents: tf.Tensor, path: str | tf.Tensor) -> tf.Operation:
        """In the graph, on the shard's task: the op that writes ``contents`` (what :meth:`encode` made) to ``path``."""


class WholeFile:
    """A format whose part is one string scalar, the file's bytes, written at once."""

    def write(self, contents: tf.Tensor, path: str | tf.Tensor) -> tf.Operation:
        return tf.io.write_file(path, contents)


@attrs.frozen
class NpyWriter(WholeFile):
    """One ``.npy`` file per part: numpy's header, then the rows' bytes."""

    name: ClassVar[str] = "write_npy"
    reader: ClassVar[str] = "read_npy"
    ext: ClassVar[str] = ".npy"

    def check(self, dtypes: Sequence[np.dtype[Any]], shapes: Sequence[tuple[int, ...]]) -> None:
        if len(dtypes) != 1:
            raise TypeError(
                f"write_npy writes one array, got {len(dtypes)} co-partitioned ones; write each to its own directory "
                "(e.g. write_npy(r.keys, a) and write_npy(r.values, b)), or write them together with write_csv or write_text"
            )
        if dtypes[0].kind not in "biuf":
            raise TypeError(
                f"write_npy cannot hold dtype {dtypes[0]} (.npy files of strings need pickles, which read_npy does not read); "
                "use write_text or write_csv for strings"
            )

    def encode(self, tensors: Sequence[tf.Tensor], rows: int) -> tf.Tensor:
        (values,) = tensors
        dtype = np.dtype(values.dtype.as_numpy_dtype)
        shape = (rows, *values.shape[1:])
        header = npy_header(dtype, shape)
        size = math.prod(shape) * dtype.itemsize
        if size + len(header) > PART_BYTES:
            raise OutputError(
                f"write_npy: a part of {rows} rows holds {size} bytes, over the 2 GiB one part can hold; "
                "write data of more, smaller shards (e.g. scatter it with a larger sizes=)"
            )
        if size == 0:
            return tf.constant(header)
        # A tensor's serialized proto ends with its bytes (tensor_content, the last field written): keep those.
        proto = tf.io.serialize_tensor(values)
        return tf.strings.join([tf.constant(header), tf.strings.substr(proto, tf.strings.length(proto) - size, size)])


def npy_bytes(values: tf.Tensor, header: tf.Tensor, width: int) -> tf.Tensor:
    """The bytes of a ``.npy`` file of ``values`` after its ``header`` (a tensor: fed, where one graph writes parts of
    any rows, as the spilled sort's rounds do): numbers as they are in memory, 1-D strings as numpy's ``S{width}``,
    each padded with NUL bytes to ``width``, which ``np.load`` drops again (so a string that ends in NUL bytes comes
    back without them, as in any numpy ``S`` array).

    Example:
        >>> import io
        >>> header = tf.constant(npy_header(np.dtype("S3"), (3,)))
        >>> np.load(io.BytesIO(npy_bytes(tf.constant([b"b", b"", b"abc"]), header, 3).numpy())).tolist()
        [b'b', b'', b'abc']
        >>> npy_bytes(tf.constant([1, 2], tf.int8), tf.constant(b"h"), 0).numpy()
        b'h\\x01\\x02'
    """
    if values.dtype == tf.string:
        width = max(1, width)
        pad = width - tf.strings.length(values)
        pads = tf.strings.substr(tf.fill(tf.shape(values), "\0" * width), tf.zeros_like(pad), pad)
        return tf.strings.join([header, tf.strings.reduce_join(tf.strings.join([values, pads]))])
    # A tensor's serialized proto ends with its bytes (tensor_content, the last field written): keep those.
    size = tf.size(values, tf.int32) * values.dtype.size
    proto = tf.io.serialize_tensor(values)
    return tf.strings.join([header, tf.strings.substr(proto, tf.strings.length(proto) - size, size)])


def npy_header(dtype: np.dtype[Any], shape: tuple[int, ...]) -> bytes:
    """The header ``write_npy`` gives a part of this dtype and shape (numpy's format 1.0): ``read_npy`` knows a part's
    layout from it without seeing the file.

    Example:
        >>> len(npy_header(np.dtype(np.float32), (3, 2)))
        128
    """
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    )
    return header.getvalue()


def _lines(fields: Sequence[tf.Tensor], delimiter: str) -> tf.Tensor:
    """The rows' lines, each ending with a line feed, as one string."""
    line = fields[0] if len(fields) == 1 else tf.strings.reduce_join(tf.stack(fields, axis=1), axis=1, separator=delimiter)
    return tf.strings.reduce_join(line + "\n")


def _check_rank(name: str, shapes: Sequence[tuple[int, ...]]) -> None:
    for shape in shapes:
        if len(shape) > 2:
            raise TypeError(
                f"{name} writes rows of fields: inputs of shape (rows,) or (rows, k), got rows of shape {shape[1:]}; "
                "reshape them to (rows, k) first, e.g. with tmr.map(lambda x: tf.reshape(x, [tf.shape(x)[0], -1]), data)"
            )


@attrs.frozen
class TextWriter(WholeFile):
    """One text file per part: a line per row, its fields separated by ``delimiter``."""

    delimiter: str = "\t"
    name: ClassVar[str] = "write_text"
    reader: ClassVar[str] = "read_text"
    ext: ClassVar[str] = ".txt"

    def check(self, dtypes: Sequence[np.dtype[Any]], shapes: Sequence[tuple[int, ...]]) -> None:
        _check_rank(self.name, shapes)

    def encode(self, tensors: Sequence[tf.Tensor], rows: int) -> tf.Tensor:
        fields = _columns(tensors)
        checks = [
            tf.debugging.assert_equal(tf.reduce_any(tf.strings.regex_full_match(f, r"(?s).*[\r\n].*")), False, message=LINE_BREAK)
            for f, t in zip(fields, _each_field(tensors), strict=True)
            if t == tf.string
        ]
        with tf.control_dependencies(checks):
            return _lines(fields, self.delimiter)


def _each_field(tensors: Sequence[tf.Tensor]) -> list[tf.DType]:
    return [t.dtype for t in tensors for _ in range(1 if t.shape.rank == 1 else t.shape[1])]


@attrs.frozen
class CsvWriter(WholeFile):
    """One CSV file per part: a header line of ``columns``, then a line per row (strings quoted where they must be)."""

    columns: tuple[str, ...] | None = None
    delimiter: str = ","
    name: ClassVar[str] = "write_csv"
    reader: ClassVar[str] = "read_csv"
    ext: ClassVar[str] = ".csv"

    def check(self, dtypes: Sequence[np.dtype[Any]], shapes: Sequence[tuple[int, ...]]) -> None:
        _check_rank(self.name, shapes)
        fields = fields_of(shapes)
        if self.columns is not None and len(self.columns) != fields:
            raise TypeError(
                f"write_csv: columns= names {len(self.columns)} columns ({list(self.columns)}) but the data has {fields} "
                "fields per row; name each field once"
            )
        bad = [c for c in self.columns or () if re.search(f'[{re.escape(self.delimiter)}"\\r\\n]', c) or not c]
        if bad:
            raise TypeError(
                f"write_csv: column names must be non-empty, without {self.delimiter!r}, quotes or line breaks: {bad}"
            )

    def header(self, fields: int) -> str:
        return self.delimiter.join(self.columns or [f"c{i}" for i in range(fields)])

    def encode(self, tensors: Sequence[tf.Tensor], rows: int) -> tf.Tensor:
        fields = []
        special = f'(?s).*[{re.escape(self.delimiter)}"\\r\\n].*'
        for f, dtype in zip(_columns(tensors), _each_field(tensors), strict=True):
            if dtype == tf.string:  # quoted where a delimiter, quote or line break would break the row
                quoted = '"' + tf.strings.regex_replace(f, '"', '""') + '"'
                f = tf.where(tf.strings.regex_full_match(f, special), quoted, f)
            fields.append(f)
        return tf.strings.join([tf.constant(self.header(len(fields)) + "\n"), _lines(fields, self.delimiter)])


def feature_kind(dtype: np.dtype[Any]) -> str | None:
    """The list of a ``tf.train.Feature`` that holds ``dtype`` losslessly (``float``, ``int64``, ``bytes``), or None.

    Example:
        >>> [feature_kind(np.dtype(d)) for d in ("float32", "int8", "uint32", "bool", "O", "float64", "uint64")]
        ['float', 'int64', 'int64', 'int64', 'bytes', None, None]
    """
    if dtype.kind in "OSU":
        return "bytes"
    if dtype.kind == "f":
        return "float" if dtype.itemsize <= 4 else None  # float16 and float32; float64 would be rounded
    if dtype.kind == "u":
        return "int64" if dtype.itemsize <= 4 else None  # uint64 above 2**63 - 1 does not fit
    if dtype.kind in "ib":
        return "int64"
    return None


@attrs.frozen
class TfRecordWriter:
    """One TFRecord file per part: a ``tf.train.Example`` per row, one feature per input (its row's values, flattened).

    The Examples are serialized in the graph (``tf.io.encode_proto``, from the inside out: the value list, the
    ``Feature``, the map entry, ``Features``, ``Example``) and written by ``tf.data``'s TFRecord writer op on the task.
    """

    features: tuple[str, ...] | None = None
    name: ClassVar[str] = "write_tfrecord"
    reader: ClassVar[str] = "read_tfrecord"
    ext: ClassVar[str] = ".tfrecord"

    def names(self, count: int) -> tuple[str, ...]:
        return self.features if self.features is not None else tuple(f"f{i}" for i in range(count))

    def check(self, dtypes: Sequence[np.dtype[Any]], shapes: Sequence[tuple[int, ...]]) -> None:
        names = self.names(len(dtypes))
        if len(names) != len(dtypes):
            raise TypeError(
                f"write_tfrecord: features= names {len(names)} features ({list(names)}) but the data has {len(dtypes)} "
                "arrays; name each array once (a tuple of co-partitioned arrays, or a keyed result's keys and values)"
            )
        if len(set(names)) != len(names) or not all(names):
            raise TypeError(f"write_tfrecord: feature names must be non-empty and distinct, got {list(names)}")
        for feature, dtype in zip(names, dtypes, strict=True):
            if feature_kind(dtype) is None:
                fix = (
                    "cast it to float32 first (tmr.map(lambda v: tf.cast(v, tf.float32), data)), which rounds it, or write it "
                    "losslessly with write_npy"
                    if dtype.kind == "f"
                    else "write it with write_npy, or cast it to int64 first if every value fits"
                    if dtype.kind == "u"
                    else "write numbers, booleans or strings"
                )
                raise TypeError(
                    f"write_tfrecord cannot hold dtype {dtype} (feature {feature!r}): a tf.train.Feature holds float32, "
                    f"int64 and bytes lists; {fix}"
                )

    def encode(self, tensors: Sequence[tf.Tensor], rows: int) -> tf.Tensor:
        """The part's records: one serialized ``tf.train.Example`` per row (a 1-D string tensor)."""
        names = self.names(len(tensors))
        entries = []
        for feature, t in zip(names, tensors, strict=True):
            width = math.prod(t.shape[1:])
            dtype = np.dtype(t.dtype.as_numpy_dtype) if t.dtype != tf.string else np.dtype(object)
            kind = feature_kind(dtype)
            assert kind is not None  # check() refused the rest
            values = tf.reshape(t, (-1, width))
            if kind != "bytes":
                values = tf.cast(values, tf.float32 if kind == "float" else tf.int64)  # widened losslessly
            ones = tf.ones([tf.shape(values)[0], 1], tf.int32)
            listed = tf.io.encode_proto(ones * width, [values], ["value"], f"tensorflow.{kind.title()}List")
            value = tf.io.encode_proto(ones, [listed[:, None]], [f"{kind}_list"], "tensorflow.Feature")
            key = tf.fill(tf.shape(ones), feature)
            entry = tf.io.encode_proto(
                tf.tile(ones, [1, 2]), [key, value[:, None]], ["key", "value"], "tensorflow.Features.FeatureEntry"
            )
            entries.append(entry)
        ones = tf.ones([tf.shape(entries[0])[0], 1], tf.int32)
        features = tf.io.encode_proto(ones * len(entries), [tf.stack(entries, 1)], ["feature"], "tensorflow.Features")
        return tf.io.encode_proto(ones, [features[:, None]], ["features"], "tensorflow.Example")

    def write(self, contents: tf.Tensor, path: str | tf.Tensor) -> tf.Operation:
        records = tf.data.experimental.to_variant(tf.data.Dataset.from_tensor_slices(contents))
        with tf.control_dependencies([tf.io.write_file(path, "")]):  # makes the folders, which the TFRecord writer does not
            return tf.raw_ops.DatasetToTFRecord(input_dataset=records, filename=path, compression_type="")
