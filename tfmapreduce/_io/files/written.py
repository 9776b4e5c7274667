"""A writer's result: the parts it committed, and how the readers take them back."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..._base.task import Task


@attrs.frozen
class Written:
    """What a writer committed: one part file per shard, in shard order, each written by the task that held the shard.

    Read it back with the matching reader, given the directory (``tmr.read_npy(w.directory)``) or the ``Written``
    itself (``tmr.read_npy(w)``), which pins each part to the task that holds it where the parts stay on the tasks'
    own disks (``shared=False``).
    """

    directory: str
    """The absolute path of the directory (it holds the parts and ``_SUCCESS``; on each writing task where not shared)."""
    parts: tuple[str, ...]
    """The part files' paths, in shard order."""
    tasks: tuple[Task, ...]
    """The task that wrote each part."""
    rows: tuple[int, ...]
    """The rows of each part."""
    shared: bool = True
    """Whether the directory is on a file system the client and every writing task share; False: each part is on the
    disk of the task that wrote it (and that task's ``directory`` holds its parts and a ``_SUCCESS`` of its own)."""
    reader: str = ""
    """The reader that reads the parts back (``"read_npy"``)."""
    row: tuple[str, tuple[int, ...]] | None = None
    """``write_npy``: the parts' dtype (numpy's ``dtype.str``) and row shape, so ``read_npy`` knows each part's layout
    without seeing its file."""

    def by_task(self) -> dict[str, list[str]]:
        """``{task: [paths]}``: which task wrote which parts (what the readers take to pin files to their tasks)."""
        result: dict[str, list[str]] = {}
        for task, path in zip(self.tasks, self.parts, strict=True):
            result.setdefault(str(task), []).append(path)
        return result


PathsLike = str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | Mapping[Any, Any] | Written
"""A path, a glob, a list of them, ``{task: [paths]}`` pinning files to the task that can see them, or a writer's
:class:`Written` (its parts, each pinned to its task where they are not on a shared file system)."""
