"""Benchmarks for tfmapreduce: device layouts side by side with hand-written TensorFlow and peers.

Run ``python -m benchmarks --help`` for the layouts, jobs and sizes; ``python -m
benchmarks --quick`` is the smoke run the test suite executes.
"""

import os as _os

_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's C++ start-up chatter out of the report
