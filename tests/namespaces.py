"""Linux namespaces for tests that need a process alone in one (its own pids, its own network)."""

from __future__ import annotations

import subprocess


def unshare_works(*flags: str) -> bool:
    """Whether ``unshare FLAGS true`` runs here (e.g. ``--pid --fork`` for a pid namespace, ``-rn`` for a network one)."""
    try:
        return subprocess.run(["unshare", *flags, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
