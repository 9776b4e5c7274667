"""Import TensorFlow without its start-up chatter on the user's terminal."""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import re
import sys
from collections.abc import Iterator

LEVEL_VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
"""TensorFlow's C++ log level: read once, as TensorFlow's libraries load; setting it later changes nothing."""

_SET_MIN_LOG_LEVEL = re.compile(rb"_ZN4absl(?:\d+lts_\d+)?14SetMinLogLevelENS(?:0_|_)18LogSeverityAtLeastE(?=\0)")
"""The mangled name of ``absl::SetMinLogLevel(absl::LogSeverityAtLeast)``, whatever absl's release namespace."""

_ERROR = 2
"""``absl::LogSeverityAtLeast::kError``: what ``TF_CPP_MIN_LOG_LEVEL=2`` selects (errors and fatal lines only)."""

_quieted = False

KERAS_EAGER = "keras.src.optimizers"
"""What ``import tensorflow`` imports of Keras eagerly, to register its optimizers, unless that import fails."""


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


def set_cpp_log_level(level: int) -> bool:
    """Set the C++ log level of the TensorFlow this process loaded, as ``TF_CPP_MIN_LOG_LEVEL=level`` at its load would.

    TensorFlow 2.21 logs through absl and reads the variable only as its libraries load; this calls
    ``absl::SetMinLogLevel`` of its ``libtensorflow_framework`` instead (Linux).  Returns whether it could.
    """
    import tensorflow as tf

    path = os.path.join(tf.sysconfig.get_lib(), "libtensorflow_framework.so.2")
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as image:
            found = _SET_MIN_LOG_LEVEL.search(image)
            symbol = found.group().decode() if found else None
        if symbol is None:
            return False
        library = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0))  # the copy already loaded, never a second
        getattr(library, symbol)(ctypes.c_int(level))
    except (OSError, ValueError, AttributeError):
        return False
    return True


def import_tensorflow() -> None:
    """Import TensorFlow once, with its absl/oneDNN/CUDA start-up lines silenced, and its C++ warnings hidden.

    Unless the user set ``TF_CPP_MIN_LOG_LEVEL``, TensorFlow's C++ log lines below ERROR are hidden whatever
    the import order: set to 2 before TensorFlow loads when tfmapreduce imports it, or with
    :func:`set_cpp_log_level` when the user imported it first (the variable, read only at load, would do
    nothing then).  Without this the sessions of every run watched for over a second log
    ``GrpcSession::ListDevices will initialize the session with an empty graph`` about twice a second.
    A few start-up lines are written whatever the level, so the import itself (and the devices' first listing) runs with
    stderr pointed at /dev/null.  An import error is still raised (and printed by Python) as usual.
    """
    global _quieted
    if "tensorflow" in sys.modules:
        if not _quieted and LEVEL_VARIABLE not in os.environ:
            set_cpp_log_level(_ERROR)
        _quieted = True
        return
    os.environ.setdefault(LEVEL_VARIABLE, str(_ERROR))
    _quieted = True
    with _stderr_silenced():
        import_tensorflow_without_keras()
        import tensorflow

        # The first use of a device platform logs an ERROR line where TensorFlow's CUDA build finds no GPU driver
        # ("failed call to cuInit"), at the client's first eager op: listing the devices here (under a millisecond)
        # writes it to /dev/null.
        tensorflow.config.list_physical_devices()


def import_tensorflow_without_keras() -> None:
    """Import TensorFlow without the Keras optimizers its import loads eagerly (TensorFlow allows that import to fail):
    Keras, and the pandas and matplotlib it loads, were 3 s of an 8.6 s ``import tensorflow`` on a 2-core machine.
    Keras loads whole at its first use (``import keras``, ``tf.keras``), as in a TensorFlow without it. A process that
    imported TensorFlow or Keras already is left as it is.
    """
    if "tensorflow" in sys.modules or KERAS_EAGER in sys.modules:
        return
    sys.modules[KERAS_EAGER] = None  # type: ignore[assignment]  # the import system's "this module is absent"
    try:
        import tensorflow  # noqa: F401
    finally:
        del sys.modules[KERAS_EAGER]
