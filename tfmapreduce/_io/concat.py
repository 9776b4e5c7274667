"""Concatenation of arrays that may already lie one after the other in one buffer: the parts of a result the
workers wrote into one file (``_shm.read_returned``), joined without a copy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def concatenated(arrays: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    """``np.concatenate(arrays)``, without a copy where one alone holds rows, or where they are consecutive rows of one
    1-D buffer (the parts of one file ``_shm.read_returned`` gives): a view of them all.

    Example:
        >>> flat = np.arange(6)
        >>> concatenated([flat[:2], flat[2:5], flat[5:]]).base is flat, concatenated([flat[:2], flat[3:]]).tolist()
        (True, [0, 1, 3, 4, 5])
    """
    full = [a for a in arrays if a.size]  # (an empty view's address is not its place)
    if len(arrays) > 1 and len(full) == 1 and all(a.dtype == full[0].dtype and a.shape[1:] == full[0].shape[1:] for a in arrays):
        return full[0]
    if len(arrays) < 2 or len(full) < 2:
        return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
    first, base = full[0], full[0].base
    if isinstance(base, np.ndarray) and base.ndim == 1 and base.dtype == first.dtype:
        end = first.ctypes.data
        for a in full:
            if a.base is not base or not a.flags.c_contiguous or a.shape[1:] != first.shape[1:] or a.ctypes.data != end:
                break
            end += a.nbytes
        else:
            at = (first.ctypes.data - base.ctypes.data) // base.itemsize
            return base[at : at + (end - first.ctypes.data) // base.itemsize].reshape(-1, *first.shape[1:])
    return np.concatenate(arrays)
