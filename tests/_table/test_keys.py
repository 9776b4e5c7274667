"""The key codec of group-bys: several key columns (nulls too) as one exact string key in the graph, and back."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfmapreduce._table.keys import KeyCodec
from tfmapreduce._table.schema import DATE, STRING, ColumnType


def test_keys_are_flag_then_bytes_per_column_and_decode_to_the_columns() -> None:
    text = np.array(["é", "", "a\x00b", ""], object)
    ints = np.array([7, 0, -(2**40), 0], np.int64)
    floats = np.array([-0.0, np.nan, 1.5, 0.0])
    small = np.array([-3, 0, 127, 0], np.int8)
    flags = np.array([True, False, True, False])
    days = np.array([19000, 0, -1, 0], np.int32)
    types = (STRING, ColumnType.of(np.dtype(np.int64)), ColumnType.of(np.dtype(np.float64)))
    types += (ColumnType.of(np.dtype(np.int8)), ColumnType.of(np.dtype(bool)), DATE)
    valid = np.array([True, False, True, True])
    codec = KeyCodec(types, (True, False, False, False, False, True))
    columns = [(tf.constant(text.astype(str)), tf.constant(valid)), (tf.constant(ints), None), (tf.constant(floats), None)]
    columns += [(tf.constant(small), None), (tf.constant(flags), None), (tf.constant(days), tf.constant(valid))]
    keys = codec.encode(columns).numpy()
    first = b"\x01" + np.int32(2).tobytes() + "é".encode() + b"\x01" + np.int64(7).tobytes()
    first += b"\x01" + np.float64(0.0).tobytes() + b"\x01\xfd" + b"\x01\x01" + b"\x01" + np.int32(19000).tobytes()
    assert keys[0] == first  # -0.0 as 0.0: equal numbers, one group
    assert keys[1].startswith(b"\x00" + np.int32(0).tobytes() + b"\x01")  # a null string: flag 0, no bytes
    assert keys[1] != keys[3]  # a null is not the empty string
    decoded = codec.decode(keys)
    assert decoded[0].to_numpy().tolist() == ["é", None, "a\x00b", ""]
    assert decoded[1].values.tolist() == ints.tolist()
    assert np.isnan(decoded[2].values[1])
    assert decoded[2].values[[0, 2, 3]].tolist() == [0.0, 1.5, 0.0]
    assert decoded[3].values.tolist() == small.tolist()
    assert decoded[4].values.tolist() == flags.tolist()
    assert decoded[5].values[decoded[5].valid].tolist() == [19000, -1, 0]
