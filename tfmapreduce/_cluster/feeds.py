"""What a run feeds: its bytes, and the limit of one gRPC message that a feed must stay under."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._base.errors import InputError

FEED_LIMIT = 2**31 - 2**26
"""Bytes of host data one run may feed: TensorFlow's gRPC request to the master must stay under 2 GiB
(a larger one aborts the whole client process in protobuf, beyond any exception handler)."""


def feed_bytes(feed_dict: dict[Any, Any]) -> int:
    """Bytes of the numpy arrays in a feed dict: strings (object arrays) at their own bytes and two bytes of framing
    each, as TensorFlow sends them, not at the 8 bytes of their pointers.

    Example:
        >>> feed_bytes({"x": np.zeros(4), "words": np.array([b"to", b"be" * 100], object)})
        238
    """
    return sum(_array_bytes(v) for v in feed_dict.values() if isinstance(v, np.ndarray))


def _array_bytes(array: np.ndarray[Any, Any]) -> int:
    if array.dtype != object:
        return array.nbytes
    try:
        return sum(map(len, array.flat)) + 2 * array.size
    except TypeError:  # objects that are not strings: TensorFlow refuses them when fed
        return array.nbytes


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
