"""What the kinds of a ``MapReduce`` job (whole-input, keyed and group) share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from .._engine.kind import KindBase, P
from .._ops.combine import Combiner


@attrs.define(eq=False, repr=False)
class MapJob(KindBase[P]):
    """What the kinds of a ``MapReduce`` job share: its map function, combiner and name."""

    map_fn: Callable[..., Any]
    combiner: Combiner
    name: str

    def __repr__(self) -> str:
        return f"MapReduce({self.name})"
