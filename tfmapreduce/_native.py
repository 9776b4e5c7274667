"""Native kernels: TensorFlow custom ops that tfmapreduce compiles on the machine that runs it, where it can.

One kernel so far, ``TmrWordCounts`` (``_native.cc``): it splits strings on ASCII whitespace
and counts each distinct word in one pass, the map-side combine of ``word_count`` without a
TensorFlow string per word (an 8 MiB block of words: 38 ms, against 146 ms for
``tf.strings.split`` and the grouping of ``_group``).

The C++ source ships with the package.  The first process that needs the kernels compiles it
with the machine's C++ compiler (``$CXX``, else ``g++`` or ``c++``) against the installed
TensorFlow's headers, in about 7 s, into ``$XDG_CACHE_HOME/tfmapreduce`` (``~/.cache/tfmapreduce``)
under a name made of the source's and TensorFlow's digest; later processes load that file.
Workers load the kernels as they start, and a ``LocalCluster`` builds them before it starts
its workers.  A job uses a kernel only where the client and every task of the cluster have it
(asked once per cluster); elsewhere it runs the same job with stock ops: the same result, slower.
Without a compiler, when the build fails (logged once), or with ``TFMAPREDUCE_NATIVE=0`` in the
environment, nothing is built or loaded.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.resources
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import tensorflow as tf

from ._log import ROOT

ENV = "TFMAPREDUCE_NATIVE"
"""Set to ``0`` to build and load no native kernel (every job uses stock TensorFlow ops)."""

BUILD_TIMEOUT = 300.0
"""Seconds the compiler may take."""

log = ROOT.getChild("native")


def cache_dir() -> Path:
    """Where built kernels are kept: ``$XDG_CACHE_HOME/tfmapreduce``, else ``~/.cache/tfmapreduce``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tfmapreduce"


def build() -> str | None:
    """The path of the kernels' shared library for this source and TensorFlow, compiled now if absent; None if it
    cannot be (no compiler, an unusable cache folder, or the build failed: logged)."""
    source = importlib.resources.files("tfmapreduce").joinpath("_native.cc").read_bytes()
    flags = [*tf.sysconfig.get_compile_flags(), *tf.sysconfig.get_link_flags()]
    digest = hashlib.sha256(b"\0".join([source, tf.__version__.encode(), *(f.encode() for f in flags)])).hexdigest()[:16]
    try:
        target = cache_dir() / f"native-{digest}.so"
    except RuntimeError as e:  # no HOME, and no home directory for this user
        log.warning("no folder to keep the native kernels in (%s; set XDG_CACHE_HOME): jobs use stock TensorFlow ops", e)
        return None
    if target.exists():
        return str(target)
    compiler = next(filter(None, map(shutil.which, [os.environ.get("CXX") or "", "g++", "c++"])), None)
    if compiler is None:
        log.info("no C++ compiler (set CXX, or install g++): jobs use stock TensorFlow ops instead of native kernels")
        return None
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with importlib.resources.as_file(importlib.resources.files("tfmapreduce").joinpath("_native.cc")) as path:
            command = [compiler, "-O2", "-shared", "-fPIC", str(path), "-o", str(partial), *flags]
            done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
        if done.returncode != 0:
            tail = " | ".join(done.stderr.strip().splitlines()[-3:])
            raise OSError(f"{compiler} exited {done.returncode}: {tail}")
        os.replace(partial, target)  # whole or absent: another process may be loading it
    except (OSError, subprocess.TimeoutExpired) as e:  # no compiler that works, a read-only cache, a build too slow
        log.warning("building the native kernels in %s failed (%s): jobs use stock TensorFlow ops", target.parent, e)
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        return None
    return str(target)


@functools.cache
def kernels() -> Any | None:
    """The native kernels' op module (``kernels().tmr_word_counts(text)``), loaded in this process; None where
    they cannot be built or loaded, or ``TFMAPREDUCE_NATIVE=0``.

    Example:
        >>> ops = kernels()  # None where no C++ compiler is found
        >>> counts = ops.tmr_word_counts(["to be or", "not to be"])[1] if ops else tf.constant([2, 2, 1, 1])
        >>> counts.numpy().tolist()  # to, be, or, not
        [2, 2, 1, 1]
    """
    if os.environ.get(ENV, "1") == "0":
        return None
    path = build()
    if path is None:
        return None
    try:
        return tf.load_op_library(path)
    except (tf.errors.OpError, OSError) as e:
        log.warning("loading the native kernels from %s failed (%s): jobs use stock TensorFlow ops", path, e)
        return None
