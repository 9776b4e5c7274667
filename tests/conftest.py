"""Shared fixtures: one local cluster for the whole session, and the hypothesis profiles.

Hypothesis profiles: ``ci`` (fast, derandomized; the default, and what CI uses) and
``thorough`` (many more examples), chosen with ``HYPOTHESIS_PROFILE=thorough``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

import tfmapreduce

# Distributed runs take milliseconds to seconds, so no per-example deadline in either profile.
settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "ci")


@pytest.fixture(scope="session")
def cluster() -> Iterator[tfmapreduce.LocalCluster]:
    """Two worker processes (job ``local``) with two CPU devices each, started once per session."""
    with tfmapreduce.LocalCluster(workers=2, cpu_devices=2) as local:
        yield local
