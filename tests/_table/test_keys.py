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


def test_keys_decoded_in_a_graph_equal_the_client_decode() -> None:
    # every fixed-width type (uint64 too, which decode_raw does not read), strings with NULs, nulls; and lone keys
    names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32"]
    rng = np.random.default_rng(7)
    columns, types, nullable = [], [], []
    for name in names:
        dtype = np.dtype(name)
        info = np.iinfo(dtype) if dtype.kind in "iu" else None
        values = (
            rng.integers(int(info.min), int(info.max), 5, dtype=dtype, endpoint=True)
            if info is not None
            else (rng.random(5) < 0.5 if dtype.kind == "b" else rng.normal(size=5).astype(dtype))
        )
        columns.append((tf.constant(values), tf.constant(rng.random(5) < 0.7) if name.startswith("u") else None))
        types.append(ColumnType.of(dtype))
        nullable.append(name.startswith("u"))
    columns.append((tf.constant(["é", "", "a\x00b", "日本", "x"]), tf.constant([True, True, True, False, True])))
    types.append(STRING)
    nullable.append(True)
    for codec, chosen in [
        (KeyCodec(tuple(types), tuple(nullable)), columns),
        (KeyCodec((ColumnType.of(np.dtype(np.uint16)),), (False,)), [(columns[6][0], None)]),
        (KeyCodec((STRING,), (False,)), [(columns[-1][0], None)]),
    ]:
        keys = codec.encode(chosen)
        client = codec.decode(keys.numpy())
        for (values, valid), want in zip(codec.columns(keys), client, strict=True):
            mask = np.ones(len(want), bool) if valid is None else valid.numpy()
            assert mask.tolist() == (np.ones(len(want), bool) if want.valid is None else want.valid).tolist()
            got = values.numpy()
            got = np.array([v.decode() for v in got.tolist()], object) if want.type == STRING else got
            assert got.dtype == want.values.dtype
            assert got[mask].tolist() == want.values[mask].tolist()
