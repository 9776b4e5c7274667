"""Fixtures of the spilling tests (sorts, group jobs, joins over their budget)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def spill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder the spilled runs spill under (the client's temporary directory), for a test to check empty."""
    folder = tmp_path / "spill"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def spilled_parts(caplog: pytest.LogCaptureFixture) -> Callable[[], int]:
    """The last spilled run's sub-partitions per reducer, from its log line (capture INFO on ``tfmapreduce.spill``)."""

    def parts() -> int:
        found = [re.search(r"(\d+) sub-partition\(s\) per reducer", r.getMessage()) for r in caplog.records]
        return int(next(f for f in reversed(found) if f is not None).group(1))

    return parts
