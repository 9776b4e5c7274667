"""String keys: str and bytes inputs, mixed, and the type of the keys that come back."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import tfmapreduce as tmr
from tfmapreduce._cluster import feeds
from tfmapreduce._io.keyed_input import keyed_sources
from tfmapreduce._io.source import Shipped
from tfmapreduce._io.strings import as_bytes_array, decode_keys, packed, unpacked


def test_mixed_str_and_non_utf8_bytes_come_back_as_bytes_not_an_error(cluster: tmr.LocalCluster) -> None:
    lines = np.array(["a b", b"\xff c", "b"], dtype=object)
    for reducers in (1, 3):
        counts = tmr.recipes.word_count(lines, cluster=cluster, reducers=reducers)
        assert counts.to_dict() == {b"a": 1, b"b": 2, b"c": 1, b"\xff": 1}
        assert counts.keys.tolist() == sorted(counts.keys.tolist())  # byte order
    keys = np.array(["x", b"\xfe", "x", b"y"], dtype=object)
    assert tmr.sum_by_key(keys, np.array([1, 2, 3, 4]), cluster=cluster).to_dict() == {b"x": 4, b"y": 4, b"\xfe": 2}
    utf8 = np.array(["é", "é".encode(), "b"], dtype=object)  # every key decodes: str, the bytes key grouped with its str
    assert tmr.count_by_key(utf8, cluster=cluster).to_dict() == {"b": 1, "é": 2}


def test_as_bytes_array_and_decode_keys() -> None:
    found = as_bytes_array(np.array([["a", "ü"]]))
    assert found is not None
    array, unicode = found
    assert array.shape == (1, 2)
    assert array.tolist() == [[b"a", "ü".encode()]]
    assert unicode
    found = as_bytes_array(np.array([b"a"]))
    assert found is not None
    assert not found[1]
    assert as_bytes_array([1, "a"]) is None
    assert as_bytes_array(np.zeros(2)) is None
    assert decode_keys([b"\xff"], False).tolist() == [b"\xff"]
    assert decode_keys([], True).tolist() == []


def test_an_object_array_of_str_travels_as_it_is_and_groups_as_its_utf8_bytes(cluster: tmr.LocalCluster) -> None:
    keys = np.array(["é", "b", "é", "a\x00b"], dtype=object)
    srcs, encoding = keyed_sources((keys, np.arange(4)))
    assert isinstance(srcs[0], Shipped)
    assert srcs[0].array is keys  # no copy, no bytes
    assert encoding == "utf-8"
    assert tmr.sum_by_key(keys, np.array([1, 2, 3, 4]), cluster=cluster).to_dict() == {"a\x00b": 4, "b": 2, "é": 4}
    mixed = np.array(["é", "é".encode()], dtype=object)  # str and bytes: bytes, as before
    assert keyed_sources(mixed)[0][0].array.tolist() == ["é".encode()] * 2  # type: ignore[attr-defined]
    assert tmr.count_by_key(mixed, cluster=cluster).to_dict() == {"é": 2}


def test_feed_bytes_count_a_str_in_utf8_bytes_where_the_limit_is_near(monkeypatch: pytest.MonkeyPatch) -> None:
    text = np.array(["é" * 100] * 10, dtype=object)  # 1,000 characters, 2,000 bytes in UTF-8
    assert feeds.feed_bytes({"t": text}) == 1_000 + 20  # far from the limit: characters
    monkeypatch.setattr(feeds, "FEED_LIMIT", 3_000)
    assert feeds.feed_bytes({"t": text, "x": np.zeros(10)}) == 2_000 + 20 + 80  # 4 bytes a character might pass it
    with pytest.raises(tmr.InputError, match="through gRPC in one request"):
        feeds.check_feed_size({"t": text, "u": text})


def test_keys_read_from_text_files_are_str_and_either_spelling_finds_them(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    text = "the cat sat on the mat\nthé été\n"
    (tmp_path / "a.txt").write_text(text, encoding="utf-8")
    (tmp_path / "b.txt").write_bytes("the été".encode("latin-1"))
    counts = tmr.recipes.word_count(tmr.read_text(str(tmp_path / "a.txt")), cluster=cluster)
    assert counts.to_dict() == collections.Counter(text.split())
    assert counts["the"] == counts[b"the"] == 2
    assert "été" in counts
    assert "été".encode() in counts
    assert "nope" not in counts
    assert b"\xff" not in counts
    latin = tmr.recipes.word_count(tmr.read_text(str(tmp_path / "b.txt"), encoding="latin-1"), cluster=cluster)
    assert latin.to_dict() == {"the": 1, "été": 1}
    raw = tmr.recipes.word_count(tmr.read_text(str(tmp_path / "*.txt"), encoding="bytes"), cluster=cluster)
    assert all(isinstance(k, bytes) for k in raw.keys.tolist())
    assert raw["the"] == raw[b"the"] == 3
    with pytest.raises(TypeError, match="encoding must be the name of a text codec"):
        tmr.read_text(str(tmp_path / "a.txt"), encoding="no-such-codec")


def test_scattered_strings_stay_strings_and_join_with_a_resident_side(cluster: tmr.LocalCluster) -> None:
    with (
        tmr.scatter(np.array(["a", "bé"]), cluster=cluster) as text,
        tmr.scatter(np.array([b"a", b"\xff"]), cluster=cluster) as raw,
    ):
        assert text.gather().tolist() == ["a", "bé"]  # str given, str back
        assert raw.gather().tolist() == [b"a", b"\xff"]  # bytes given, bytes back
    with tmr.scatter(np.array([1, 2, 1]), cluster=cluster) as ids, tmr.scatter(np.array([1.0, 2.0, 3.0]), cluster=cluster) as x:
        r = tmr.join((ids, x), (np.array([1, 2]), np.array(["x", "yé"])), cluster=cluster)  # the host side is scattered
    assert sorted(zip(r.keys.tolist(), r.left.tolist(), r.right.tolist(), strict=True)) == [
        (1, 1.0, "x"),
        (1, 3.0, "x"),
        (2, 2.0, "yé"),
    ]


def test_str_in_str_out_through_resident_results(cluster: tmr.LocalCluster, tmp_path: Path) -> None:
    words = np.array(["b", "é", "b"])
    left, right = (words, np.array([1.0, 2.0, 3.0])), (np.array(["é", "b"]), np.array([10, 20]))
    with tmr.join(left, right, cluster=cluster, resident=True) as joined:
        assert sorted(joined.keys.gather().tolist()) == ["b", "b", "é"]
        assert tmr.count_by_key(joined.keys).to_dict() == {"b": 2, "é": 1}
    (tmp_path / "lines.txt").write_text("b\né\nb\n", encoding="utf-8")
    with tmr.map(lambda s: s, tmr.read_text(str(tmp_path / "lines.txt")), cluster=cluster) as lines:
        assert lines.gather().tolist() == ["b", "é", "b"]
    with tmr.scatter(words, cluster=cluster) as data:
        assert tmr.unique(data).tolist() == ["b", "é"]
        with tmr.sort(data) as ordered:
            assert ordered.gather().tolist() == ["b", "b", "é"]
    with tmr.count_by_key(words, cluster=cluster, resident=True) as counted:
        assert sorted(counted.keys.gather().tolist()) == ["b", "é"]
        assert counted.gather().to_dict() == {"b": 2, "é": 1}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=6), st.binary(max_size=6)), max_size=12))
def test_a_shards_strings_travel_packed_in_one_string_and_come_back_exactly(values: list[str | bytes]) -> None:
    array = np.array([*values, None], dtype=object)[:-1]  # (1-D whatever the values)
    want = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
    assert unpacked(tf.constant(packed(array))).numpy().tolist() == want


@pytest.mark.parametrize("transfer", ["feed", "shm"])
def test_strings_of_every_kind_in_uneven_shards_group_as_python_counts_them(cluster: tmr.LocalCluster, transfer: str) -> None:
    words = ["", "a", "a\x00", "\x00", "é", "日本", "🎉x", "a", "", "é"] * 3  # ASCII, NULs, 2- to 4-byte characters
    for sizes in ([0, 30], [7, 0, 23], [29, 1]):
        got = tmr.count_by_key(np.array(words, dtype=object), cluster=cluster, sizes=sizes, transfer=transfer)
        assert got.to_dict() == dict(collections.Counter(words)), sizes
        ascii_words = [w for w in words if w.isascii()]  # (packed by another path)
        got = tmr.count_by_key(np.array(ascii_words, dtype=object), cluster=cluster, transfer=transfer)
        assert got.to_dict() == dict(collections.Counter(ascii_words))
