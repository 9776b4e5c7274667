"""The environment a user's shell gives a command: without the settings the suite itself runs under (conftest.py)."""

from __future__ import annotations

import os

SUITE_ONLY = ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS")


def users() -> dict[str, str]:
    """This process's environment less the suite's TensorFlow settings: what a test of what a user sees runs under."""
    return {k: v for k, v in os.environ.items() if k not in SUITE_ONLY}
