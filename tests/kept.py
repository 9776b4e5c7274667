"""What a keyed result kept on its reducers (``tmr.KeyedSharded``) holds where: the checks the spilling tests share."""

from __future__ import annotations

import numpy as np

import tfmapreduce as tmr


def per_reducer(kept: tmr.KeyedSharded) -> list[np.ndarray]:
    """Each reducer's keys of a resident result, in shard order."""
    ends = np.cumsum([s.rows for s in kept.plan.shards])
    return np.split(kept.keys.gather(), ends[:-1])


def in_key_order(kept: tmr.KeyedSharded, keys: list[object]) -> tmr.KeyedResult:
    """``kept`` fetched, once each of its two reducers is seen to hold a non-empty range of ``keys`` below the next's and
    its keys come back as ``keys`` (each shard sorted: in key order without a sort on the client)."""
    shards = per_reducer(kept)
    assert all(s.size for s in shards)
    assert shards[0].max() < shards[1].min()
    assert kept.keys.gather().tolist() == keys
    return kept.gather()


def placed_as_in_memory(kept: tmr.KeyedSharded, memory: tmr.KeyedSharded, keys: int) -> None:
    """``kept`` (a spilled run's result) holds each key on the reducer the in-memory run ``memory`` holds it on, so the
    two join where they are (co-partitioned), ``keys`` rows."""
    assert [s.device for s in kept.plan.shards] == [s.device for s in memory.plan.shards]
    for spilled, in_memory in zip(per_reducer(kept), per_reducer(memory), strict=True):
        np.testing.assert_array_equal(np.sort(spilled), np.sort(in_memory))
    joined = tmr.join(kept, memory)
    assert joined.strategy == "co-partitioned"
    assert len(joined) == keys
