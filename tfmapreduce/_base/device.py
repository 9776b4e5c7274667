"""Device names: parse every accepted spelling once, print the full form."""

from __future__ import annotations

import re

import attrs

from .errors import PlacementError
from .task import Task

_PART = re.compile(
    r"/(?:job:(?P<job>[A-Za-z]\w*)"
    r"|replica:(?P<replica>\d+)"
    r"|task:(?P<task>\d+)"
    r"|device:(?P<dtype>[A-Za-z]+):(?P<dindex>\d+)"
    r"|(?P<short>cpu|gpu|CPU|GPU):(?P<sindex>\d+))"
)


@attrs.frozen(order=True)
class Device:
    """One device of a cluster, such as ``/job:local/replica:0/task:1/device:CPU:0``.

    ``str(device)`` is the full name TensorFlow uses.

    Examples:
        >>> d = Device.parse("/job:local/task:0/gpu:0")
        >>> str(d)
        '/job:local/replica:0/task:0/device:GPU:0'
        >>> d.task
        Task(job='local', index=0)
    """

    task: Task
    """The task that holds the device."""
    type: str = "CPU"
    """``CPU`` or ``GPU`` (upper case)."""
    index: int = 0
    """The device index within its task and type."""
    replica: int = 0
    """The replica index (always 0 for a plain cluster)."""

    def __str__(self) -> str:
        return f"/job:{self.task.job}/replica:{self.replica}/task:{self.task.index}/device:{self.type}:{self.index}"

    @property
    def job(self) -> str:
        """The TensorFlow job name of the device's task, e.g. ``local``."""
        return self.task.job

    @classmethod
    def parse(cls, name: object, *, argument: str = "device") -> Device:
        """Parse a device string; a task without a device means its ``CPU:0``.

        Accepts the lesson's short forms (``/job:local/task:1``,
        ``/job:local/task:0/gpu:0``) and TensorFlow's full names.

        Raises:
            TypeError: ``name`` is not a string.
            PlacementError: the string is not a device name with a job and a task.
        """
        if isinstance(name, Device):
            return name
        if not isinstance(name, str):
            raise TypeError(f"{argument} must be a device string such as '/job:local/task:1', got {type(name).__name__} {name!r}")
        known = _parsed.get(name)
        if known is not None:
            return known
        fields: dict[str, str] = {}
        pos = 0
        for m in _PART.finditer(name):
            if m.start() != pos:
                break
            for key, value in m.groupdict().items():
                if value is not None:
                    if key in fields:
                        pos = -1
                    fields[key] = value
            if pos == -1:
                break
            pos = m.end()
        if pos != len(name) or "job" not in fields or "task" not in fields or ("dtype" in fields and "short" in fields):
            raise PlacementError(
                f"{argument} {name!r} is not a device name; expected '/job:NAME/task:I' optionally followed "
                "by '/cpu:K', '/gpu:K' or '/device:GPU:K', e.g. '/job:local/task:0/gpu:0'"
            )
        dtype, dindex = fields.get("dtype") or fields.get("short") or "CPU", fields.get("dindex") or fields.get("sindex") or "0"
        device = cls(
            task=Task(fields["job"], int(fields["task"])),
            type=dtype.upper(),
            index=int(dindex),
            replica=int(fields.get("replica", "0")),
        )
        if len(_parsed) < 4096:  # every run parses its cluster's device names again
            _parsed[name] = device
        return device


_parsed: dict[str, Device] = {}
"""Device strings parsed so far (a bounded cache: parsing is a regex walk, repeated on every run)."""
