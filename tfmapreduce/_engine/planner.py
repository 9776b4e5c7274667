"""The shards of a run: where resident inputs live, or a new partition and placement; and the cluster a run goes to."""

from __future__ import annotations

from collections.abc import Hashable

from .._base.device import Device
from .._base.errors import ClusterError, InputError
from .._base.partition import AUTO
from .._base.plan import Plan, make_plan
from .._cluster.cluster import DEVICES_TIMEOUT, Cluster
from .._io.source import Source, streamed
from .._options import RunOptions
from . import autosize as _autosize


def plan_of(srcs: tuple[Source, ...], cluster: Cluster, settings: RunOptions, *, job: Hashable | None = None) -> Plan:
    """The plan of a run over ``srcs``: where resident inputs live, or a new partition and placement.

    ``job`` (a job's identity) lets ``sizes="auto"`` size the shards by the speeds measured for it.

    Raises:
        InputError: co-partitioned resident inputs live on different plans.
        TypeError: ``sizes``/``devices`` given for resident inputs; ``sizes="auto"`` without ``job`` or over files.
    """
    plans = [s.home_plan for s in srcs if s.home_plan is not None]
    if any(p != plans[0] for p in plans):
        raise InputError(
            "co-partitioned resident inputs must share one plan (the same rows on the same devices); scatter them with the same sizes= and devices="
        )
    if plans:  # resident data: its plan is where it lives
        if settings.sizes is not None or settings.devices is not None:
            raise TypeError("sizes= and devices= do not apply to resident Sharded data: it stays where scatter() put it")
        return plans[0]
    available = [Device.parse(d) for d in cluster.list_devices(min(DEVICES_TIMEOUT, settings.seconds()))]
    devices = settings.devices
    if devices is not None and cluster.lost:  # shards asked of a lost task go to the survivors, round-robin
        devices = [d for d in devices if Device.parse(d).task not in cluster.lost] or None
    if isinstance(settings.sizes, str) and settings.sizes == AUTO and job is not None and streamed(srcs) is None:
        return _autosize.auto_plan(job, cluster, srcs[0].rows, devices, available, fallback=settings.fallback)
    return make_plan(srcs[0].rows, settings.sizes, devices, available, fallback=settings.fallback)


def resolve_cluster(cluster: Cluster | None, srcs: tuple[Source, ...]) -> Cluster:
    """The cluster a run goes to: ``cluster=``, or the one resident inputs live on (which must agree).

    Raises:
        TypeError: no cluster at all.
        ClusterError: inputs on different clusters, or a closed cluster.
    """
    homes = {id(c): c for c in (s.home for s in srcs) if c is not None}
    if cluster is None:
        if not homes:
            raise TypeError(
                "cluster= is required: pass a Cluster, e.g. cluster=tmr.LocalCluster(2) or tmr.Cluster.from_spec({...})"
            )
        if len(homes) > 1:
            raise ClusterError("the resident inputs live on different clusters; scatter them onto one cluster")
        cluster = next(iter(homes.values()))
    if any(home is not cluster for home in homes.values()):
        raise ClusterError(f"the resident input lives on another cluster than cluster={cluster!r}; omit cluster= or pass its own")
    cluster.check_open()
    return cluster
