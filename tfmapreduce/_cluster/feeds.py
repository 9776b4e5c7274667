"""What a run feeds: its bytes, and the limit of one gRPC message that a feed must stay under."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._base.errors import InputError

FEED_LIMIT = 2**31 - 2**26
"""Bytes of host data one run may feed: TensorFlow's gRPC request to the master must stay under 2 GiB
(a larger one aborts the whole client process in protobuf, beyond any exception handler)."""


def feed_bytes(feed_dict: dict[Any, Any]) -> int:
    """Bytes of the numpy arrays and ``bytes`` (one string: a shard's packed strings) in a feed dict: strings (object
    arrays) at their own bytes and two bytes of framing each, as TensorFlow sends them, not at the 8 bytes of their
    pointers (a ``str`` at its characters, exactly its UTF-8 bytes only where the feed could approach :data:`FEED_LIMIT`).

    Example:
        >>> feed_bytes({"x": np.zeros(4), "words": np.array([b"to", b"be" * 100], object), "packed": b"abc"})
        241
    """
    arrays = [v for v in feed_dict.values() if isinstance(v, np.ndarray)]
    plain = sum(a.nbytes if a.dtype != object else 2 * a.size for a in arrays)
    plain += sum(len(v) for v in feed_dict.values() if isinstance(v, bytes))
    text = sum(_string_bytes(a, exact=False) for a in arrays if a.dtype == object)
    if plain + 4 * text > FEED_LIMIT:  # a character takes up to 4 bytes in UTF-8: count them where the limit may be near
        text = sum(_string_bytes(a, exact=True) for a in arrays if a.dtype == object)
    return plain + text


def _string_bytes(array: np.ndarray[Any, Any], *, exact: bool) -> int:
    """An object array's string bytes (a ``str``'s characters unless ``exact``); its pointers' where they are not strings."""
    try:
        if exact:
            return sum(len(s.encode("utf-8")) if isinstance(s, str) else len(s) for s in array.flat)
        return sum(map(len, array.flat))
    except (TypeError, AttributeError):  # objects that are not strings: TensorFlow refuses them when fed
        return array.nbytes - 2 * array.size


def check_feed_size(feed_dict: dict[Any, Any]) -> int:
    """Refuse, before anything is sent, a run that would feed more than :data:`FEED_LIMIT` bytes; the bytes fed.

    Raises:
        InputError: the feed is too large for one gRPC request.
    """
    total = feed_bytes(feed_dict)
    if total > FEED_LIMIT:
        raise InputError(
            f"this run would send {total / 2**30:.2f} GiB of host data through gRPC in one request; TensorFlow's limit is 2 GiB. "
            "Read it on the workers (tmr.read_npy on a saved copy), scatter it first (tmr.scatter sends large data in several runs), "
            "or run the client on the workers' machine, where transfer='auto' uses shared memory"
        )
    return total
