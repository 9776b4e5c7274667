"""Import TensorFlow without its start-up chatter on the user's terminal."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def _stderr_silenced() -> Iterator[None]:
    """Point file descriptor 2 at /dev/null (C++ logging writes there, not to ``sys.stderr``)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (e.g. some notebook kernels): nothing to silence
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def import_tensorflow() -> None:
    """Import TensorFlow once, with its absl/oneDNN/CUDA start-up lines silenced.

    ``TF_CPP_MIN_LOG_LEVEL=2`` (unless the user set it) hides most of TensorFlow's
    C++ log lines; a few are written before that setting is read, so the
    import itself runs with stderr pointed at /dev/null.  An import error is
    still raised (and printed by Python) as usual.
    """
    if "tensorflow" in sys.modules:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with _stderr_silenced():
        import tensorflow  # noqa: F401
