"""Benchmarks for tfmapreduce, side by side with hand-written TensorFlow, one process and peers.

``python -m benchmarks --help`` lists them; ``python -m benchmarks NAME --help`` shows one's sizes and flags;
``python -m benchmarks NAME --quick`` is its smoke run (no NAME: the layouts suite).
"""

import os as _os

_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's C++ start-up chatter out of the report
