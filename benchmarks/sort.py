"""Sorting side by side: tmr.sort vs np.sort, polars and Spark; TeraSort vs Spark.

``python -m benchmarks sort``:

- ``tmr.sort`` of ``--rows`` (default 5e7) int64 and float32, resident on a 2-worker LocalCluster (the sorted
  result kept resident, then freed), vs ``np.sort`` in one process, polars ``Series.sort`` (2 threads) and Spark
  local[2] DataFrame ``orderBy`` over cached data, written to the ``noop`` sink (when pyspark and Java are present);
- TeraSort: ``--records`` (default 1e7) records of 100 bytes, TeraGen's shape (a random 10-byte key, a 90-byte
  payload), generated on the workers; ``tmr.sort_by_key(keys, payload)``, then validated on the workers as
  TeraValidate does (each range sorted, range boundaries ordered, the record count and an order-free checksum equal
  to the input's: only a summary row per range reaches the client); vs Spark ``orderBy("key")`` over the same records
  (gathered and written to Parquet once, read and cached before timing).

Every tfmapreduce result is checked before it is timed.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from typing import Any

import numpy as np

import tfmapreduce as tmr

from . import _peers
from ._registry import PLOT, Size, benchmark, flag
from ._table import Rows

KEY, PAYLOAD = 10, 90
"""TeraGen's record: a 10-byte key and a 90-byte payload."""

ROOM = 8 << 30
"""The memory a TeraSort range may take (``max_bytes``).  A range of 1 GB on 2 reducers counts about 1.9 GB (three
copies); the default budget, a quarter of ``MemAvailable`` as the run starts, was 1.6 GB beside Spark's JVM on the
24 GiB development machine, and refused it."""


def sorts(table: Rows, cluster: tmr.LocalCluster, n: int, peers: frozenset[str], spark: Any) -> None:
    """Sort ``n`` random int64 and float32 values: tfmapreduce (resident in, resident out) and peers."""
    rng = np.random.default_rng(0)
    for name, x in (
        ("int64", rng.integers(-(2**62), 2**62, n, dtype=np.int64)),
        ("float32", rng.standard_normal(n, dtype=np.float32)),
    ):
        print(f"sort: {n:.3g} {name}", flush=True)
        with tmr.scatter(x, cluster=cluster) as xd:
            with tmr.sort(xd) as ordered:
                np.testing.assert_array_equal(ordered.gather(), np.sort(x))

            def sort() -> None:
                tmr.sort(xd).delete()

            table.add(f"tmr.sort, resident, 2-worker LocalCluster, {name}", sort, n)
        table.add(f"np.sort, one process, {name}", lambda x=x: np.sort(x), n)
        _peers.sort(table, x, name, peers, spark)


def teragen(start: int, stop: int) -> tuple[Any, Any]:
    """Records ``start:stop``: 10-byte random keys (strings) and 90-byte random payloads (uint8 rows)."""
    import tensorflow as tf

    n = stop - start
    packed = tf.io.serialize_tensor(_random_bytes([n * KEY], [start, 1]))  # the bytes, after a short header:
    at = tf.strings.length(packed) - n * KEY + tf.range(n) * KEY  # every key is cut out of them
    keys = tf.strings.substr(packed, at, tf.fill([n], KEY))
    return keys, _random_bytes([n, PAYLOAD], [start, 2])


def _random_bytes(shape: list[int], seed: list[int]) -> Any:
    """Random uint8 of ``shape``, four to each random int32 drawn (a quarter of the memory of one int32 per byte)."""
    import tensorflow as tf

    words = -(-shape[-1] // 4)
    ints = tf.random.stateless_uniform([*shape[:-1], words], seed, minval=None, maxval=None, dtype=tf.int32)
    return tf.reshape(tf.bitcast(ints, tf.uint8), [*shape[:-1], words * 4])[..., : shape[-1]]


def summary(keys: Any, payload: Any) -> Any:
    """A range's TeraValidate row (int64): [records, checksum, rows out of order, first key (2 ints), last key (2 ints)].

    A key is two integers in its byte order: its first 8 bytes big-endian (sign bit flipped) and its last 2."""
    import tensorflow as tf

    n = tf.size(keys, tf.int64)
    checksum = tf.reduce_sum(tf.strings.to_hash_bucket_fast(keys, 2**40)) + tf.reduce_sum(
        tf.cast(payload, tf.int64) * tf.range(1, PAYLOAD + 1, dtype=tf.int64)
    )
    raw = tf.cast(tf.reshape(tf.io.decode_raw(keys, tf.uint8), [-1, KEY]), tf.int64)
    high = tf.bitwise.bitwise_xor(
        tf.reduce_sum(tf.bitwise.left_shift(raw[:, :8], tf.range(56, -8, -8, dtype=tf.int64)), axis=1),
        tf.constant(-(2**63), tf.int64),
    )
    low = raw[:, 8] * 256 + raw[:, 9]
    after = tf.logical_or(high[1:] > high[:-1], tf.logical_and(tf.equal(high[1:], high[:-1]), low[1:] >= low[:-1]))
    disorder = tf.reduce_sum(tf.cast(tf.logical_not(after), tf.int64))
    ends = tf.cond(n > 0, lambda: tf.stack([high[0], low[0], high[-1], low[-1]]), lambda: tf.zeros([4], tf.int64))
    return tf.concat([[n, checksum, disorder], ends], 0)[None]


def validate(keys: Any, payload: Any, *, ordered: bool = True) -> tuple[int, int]:
    """TeraValidate on the workers: (records, checksum), after checking each range and the boundaries between them
    where the records are ``ordered``."""
    with tmr.map(summary, (keys, payload)) as rows:
        found = rows.gather()
    if not ordered:
        return int(found[:, 0].sum()), int(found[:, 1].sum())
    assert (found[:, 2] == 0).all(), f"rows out of order within a range: {found[:, 2]}"
    full = found[found[:, 0] > 0]
    for before, after in itertools.pairwise(full):
        assert tuple(before[5:7]) <= tuple(after[3:5]), "range boundaries out of order"
    return int(found[:, 0].sum()), int(found[:, 1].sum())


def terasort(table: Rows, cluster: tmr.LocalCluster, records: int, spark: Any) -> None:
    """TeraSort of ``records`` 100-byte records made on the workers; Spark over the same records."""
    print(f"terasort: {records:.3g} records ({records * 100 / 1e9:.3g} GB)", flush=True)
    keys = tmr.generate(lambda a, b: teragen(a, b)[0], rows=records, cluster=cluster)
    payload = tmr.generate(lambda a, b: teragen(a, b)[1], rows=records, cluster=cluster)
    with keys, payload:
        expected = validate(keys, payload, ordered=False)
        sorted_keys, sorted_payload = tmr.sort_by_key(keys, payload, max_bytes=ROOM)
        with sorted_keys, sorted_payload:
            assert validate(sorted_keys, sorted_payload) == expected, "records or checksum differ after the sort"

        def sort() -> None:
            k, v = tmr.sort_by_key(keys, payload, max_bytes=ROOM)
            k.delete()
            v.delete()

        table.add("TeraSort: tmr.sort_by_key, generated on the workers, 2-worker LocalCluster", sort, records)
        if spark is not None:
            _peers.terasort(table, keys, payload, spark)


def plot(table: Rows, path: str) -> None:
    """One panel per input (int64, float32, TeraSort): each implementation's median seconds."""
    from ._plots import bar_chart

    panels: dict[str, list[tuple[str, list[float]]]] = {}
    for name, seconds, count in table.rows:
        panel = "TeraSort, 100-byte records" if name.startswith("TeraSort") else f"sort of {name.rsplit(', ', 1)[1]}"
        label = name.removeprefix("TeraSort: ").split(",")[0]
        panels.setdefault(f"{panel}: {count:.0e}", []).append((label, [seconds]))
    bar_chart(list(panels.items()), path, unit="seconds")


@benchmark(
    "sort",
    sizes={
        "rows": Size(1e4, 5e7, "values per sort"),
        "records": Size(1e4, 1e7, "TeraSort records of 100 bytes (1e7: 1 GB)"),
        "repeats": Size(1, 3, "timed calls per row after one warm-up (median reported)"),
    },
    peers=("polars", "spark"),
    flags=(flag("--no-terasort", dest="terasort", action="store_false", help="skip TeraSort"), PLOT),
)
def run(args: argparse.Namespace) -> None:
    """Measure and print one table, and TeraSort's GB/s."""
    table = Rows(args.repeats)
    with _peers.spark(args.peers) as spark, tmr.LocalCluster(workers=2) as cluster:
        if args.terasort:
            terasort(table, cluster, int(args.records), spark)
        sorts(table, cluster, int(args.rows), args.peers, spark)
    table.print("rows")
    if args.plot:
        plot(table, args.plot)
    for name, seconds, count in table.rows:
        if name.startswith("TeraSort"):
            print(f"{name}: {count * 100 / seconds / 1e9:.3f} GB/s, {count * 100 / seconds / 1e9 / 2:.3f} GB/s per core")


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["sort", *sys.argv[1:]]))
