"""One run of a kind of job as the driver starts it: its inputs, broadcast values, cluster, options and kernels."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from .._cluster.cluster import Cluster
from .._io.source import Sources
from .._options import RunOptions


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
    native: Any | None = None
    """The native kernels where every task has them, else None: resolved once as the run starts (``driver.start``)."""
