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
