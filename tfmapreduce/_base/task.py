"""Tasks: one process of a cluster, named ``/job:NAME/task:I`` — parsed once, a value everywhere after."""

from __future__ import annotations

import re

import attrs

_NAME = re.compile(r"/job:([A-Za-z]\w*)(?:/replica:\d+)?/task:(\d+)")


@attrs.frozen(order=True, cache_hash=True)
class Task:
    """One task of a cluster: a TensorFlow job name and an index in that job's address list.

    ``str(task)`` is the device-string prefix TensorFlow uses.

    Examples:
        >>> t = Task.parse("/job:local/task:1")
        >>> t.job, t.index, str(t)
        ('local', 1, '/job:local/task:1')
        >>> Task.find("... failed on /job:local/replica:0/task:0/device:CPU:0 ...")
        Task(job='local', index=0)
    """

    job: str
    """The TensorFlow job name, e.g. ``local``."""
    index: int
    """The task's index within its job."""

    def __str__(self) -> str:
        return f"/job:{self.job}/task:{self.index}"

    @classmethod
    def parse(cls, name: str) -> Task:
        """``/job:NAME/task:I`` (a replica part is allowed) as a Task.

        Raises:
            ValueError: ``name`` is not a task name.
        """
        found = _NAME.fullmatch(name)
        if found is None:
            raise ValueError(f"{name!r} is not a task name; expected '/job:NAME/task:I', e.g. '/job:local/task:0'")
        return cls(found.group(1), int(found.group(2)))

    @classmethod
    def of(cls, task: Task | str) -> Task:
        """``task`` itself, or the Task a ``/job:NAME/task:I`` string names."""
        return task if isinstance(task, Task) else cls.parse(task)

    @classmethod
    def find(cls, text: str) -> Task | None:
        """The first task named anywhere in ``text`` (e.g. a TensorFlow error message), or None."""
        found = _NAME.search(text)
        return cls(found.group(1), int(found.group(2))) if found else None
