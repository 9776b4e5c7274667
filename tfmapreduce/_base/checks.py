"""Checks of arguments every layer shares: a flag must be a bool, not any object Python would call true."""

from __future__ import annotations

import numpy as np


def flag(value: object, name: str, meaning: str) -> bool:
    """``value`` as a bool where it is one (Python's or numpy's); TypeError naming ``name`` otherwise.

    ``meaning`` says what True does, for the message: ``"no"`` or ``1`` would otherwise pass as true.

    Example:
        >>> flag(np.True_, "resident", "keep the result on the workers")
        True
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(
            f"{name} must be True ({meaning}) or False, got {type(value).__name__} {value!r}; pass a bool, e.g. {name}=True"
        )
    return bool(value)
