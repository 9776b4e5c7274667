"""Placement: which device of the cluster each shard runs on, decided here and never by TF's soft placement."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from .device import Device
from .errors import PlacementError
from .task import Task

FALLBACKS = (None, "cpu")


@attrs.frozen
class Placement:
    """Where one shard runs."""

    device: Device
    """The device that runs the shard."""
    requested: Device | None = None
    """The device asked for, when it was missing and ``fallback="cpu"`` chose ``device`` instead."""


def default_devices(available: Sequence[Device]) -> tuple[Device, ...]:
    """The devices shards go to by default: each task's GPUs if it has any, else its CPUs,
    interleaved over the tasks so consecutive shards land on different tasks.

    Example:
        >>> devs = [Device.parse(f"/job:local/task:{t}/cpu:{i}") for t in (0, 1) for i in (0, 1)]
        >>> [f"{d.task.index}:{d.index}" for d in default_devices(devs)]
        ['0:0', '1:0', '0:1', '1:1']
    """
    by_task: dict[Task, list[Device]] = {}
    for d in available:
        by_task.setdefault(d.task, []).append(d)
    chosen = []
    for devs in by_task.values():
        gpus = [d for d in devs if d.type == "GPU"]
        chosen.extend(gpus or [d for d in devs if d.type == "CPU"])
    order = {key: i for i, key in enumerate(by_task)}
    return tuple(sorted(chosen, key=lambda d: (d.index, order[d.task])))


def place(
    shards: int, devices: Sequence[object] | None, available: Sequence[Device], *, fallback: str | None = None
) -> tuple[Placement, ...]:
    """Assign ``shards`` shards to devices: shard ``i`` goes to ``devices[i % len(devices)]``.

    Args:
        shards: how many shards.
        devices: device strings (short ``/job:local/task:1`` or full names), or
            None for :func:`default_devices` of the cluster.
        available: the devices the cluster really has.
        fallback: None (a missing GPU is an error) or ``"cpu"`` (a missing GPU
            becomes its task's ``CPU:0``, recorded in the placement).

    Raises:
        PlacementError: a device is malformed or absent; the message lists the available ones.
    """
    if fallback not in FALLBACKS:
        raise ValueError(f"fallback must be None or 'cpu', got {fallback!r}")
    if devices is None:
        targets = [Placement(d) for d in default_devices(available)]
    else:
        if isinstance(devices, (str, Device)) or not isinstance(devices, Sequence):
            raise TypeError(
                f"devices must be a list of device strings such as ['/job:local/task:0'], got {type(devices).__name__} {devices!r}"
            )
        if not devices:
            raise PlacementError("devices=[] names no device; pass at least one, or None to use every device of the cluster")
        known = set(available)
        listing = "\n  ".join(str(d) for d in available)
        targets = []
        for i, name in enumerate(devices):
            wanted = Device.parse(name, argument=f"devices[{i}]")
            if wanted in known:
                targets.append(Placement(wanted))
                continue
            cpu = Device(wanted.task, "CPU", 0, wanted.replica)
            if cpu not in known:
                raise PlacementError(
                    f"devices[{i}]={name!r}: the cluster has no task {wanted.task}; its devices are:\n  {listing}"
                )
            if wanted.type == "GPU" and fallback == "cpu":
                targets.append(Placement(cpu, requested=wanted))
                continue
            hint = "; pass fallback='cpu' to run that shard on the task's CPU instead" if wanted.type == "GPU" else ""
            raise PlacementError(
                f"devices[{i}]={name!r}: task {wanted.task} has no {wanted.type}:{wanted.index}{hint}; the cluster's devices are:\n  {listing}"
            )
    return tuple(targets[i % len(targets)] for i in range(shards))
