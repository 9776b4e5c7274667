"""One run of a kind of job as the driver starts it: its inputs, broadcast values, cluster, options and kernels."""

from __future__ import annotations

import functools
from typing import Any

import attrs
import numpy as np

from .._cluster.cluster import Cluster
from .._io.source import Sources
from .._native.loader import kernels
from .._options import RunOptions
from .kernels import available


@attrs.frozen(eq=False)
class Call:
    """One run of a kind: its inputs, broadcast values, cluster and options (and whether its result stays resident)."""

    srcs: Sources
    note: Any
    """What the kind noted of the inputs as it took them (see :meth:`Kind.sources`)."""
    values: tuple[np.ndarray[Any, Any], ...]
    cluster: Cluster
    settings: RunOptions
    resident: bool = False

    @functools.cached_property
    def native(self) -> Any | None:
        """The native kernels where every task has them, else None: resolved once per run, when its graph first asks
        (a run that builds nothing asks nothing; a cluster asks its tasks once, see ``kernels.available``)."""
        return kernels() if available(self.cluster, self.settings.seconds()) else None
