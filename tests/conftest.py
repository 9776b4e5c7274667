"""The hypothesis profiles (the session cluster fixture lives in the repository's root conftest.py).

Hypothesis profiles: ``ci`` (fast, derandomized; the default, and what CI uses) and
``thorough`` (many more examples), chosen with ``HYPOTHESIS_PROFILE=thorough``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Distributed runs take milliseconds to seconds, so no per-example deadline in either profile.
settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "ci")
