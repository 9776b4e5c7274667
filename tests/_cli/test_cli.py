"""The ``tfmapreduce`` command and the package import: quick, quiet, and without TensorFlow where none is needed."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import tfmapreduce
from tests import environ


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tfmapreduce", *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("args", [["--help"], ["worker", "--help"], ["demo", "--help"], ["--version"]])
def test_help_and_version_answer_quietly(args: list[str]) -> None:
    """At once, too: without TensorFlow (see the test below); how fast is the benchmarks' business, not a timed test's."""
    result = _run(*args)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_version_is_the_package_version() -> None:
    result = _run("--version")
    assert result.stdout.strip() == f"tfmapreduce {tfmapreduce.__version__}"


@pytest.mark.parametrize("args", [["--help"], ["worker", "--help"], ["--version"], ["worker", "--cluster", "{"]])
def test_the_command_line_imports_no_tensorflow_for_help_or_bad_arguments(args: list[str]) -> None:
    code = (
        "import sys\n"
        "from tfmapreduce._cli.cli import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
        "print('tensorflow' in sys.modules, file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert result.stderr.strip().splitlines()[-1] == "False", result.stderr


def test_import_and_first_use_print_nothing_to_stderr_and_load_keras_only_when_it_is_used() -> None:
    code = (
        "import sys\nimport tfmapreduce as tmr\nassert callable(tmr.mean) and tmr.recipes.kmeans and tmr.combiners.sum\n"
        "assert 'tensorflow' in sys.modules and 'keras' not in sys.modules, sorted(sys.modules)\n"
        "import tensorflow as tf\nassert float(tf.keras.optimizers.SGD(0.5).learning_rate) == 0.5\n"
    )
    env = environ.users()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_the_demo_runs_the_lesson_and_prints_nothing_to_stderr() -> None:
    """The README's first command (TF_CPP_MIN_LOG_LEVEL unset): the lesson's means equal numpy's, and none of
    TensorFlow's start-up lines reach the terminal (the demo imported TensorFlow itself, unsilenced, before)."""
    env = environ.users()
    result = subprocess.run(
        [sys.executable, "-m", "tfmapreduce", "demo"], capture_output=True, text=True, timeout=300, check=False, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    means = re.findall(r"mean +tfmapreduce: (\S+) +numpy: (\S+)", result.stdout)
    assert means, result.stdout
    assert all(ours == numpy for ours, numpy in means), result.stdout
    assert "The workers have stopped." in result.stdout


TENSORFLOW_FIRST = """
import numpy as np, tensorflow as tf
import tfmapreduce as tmr

def wait(v):  # runs on a worker for 2.5 s of its clock, so the client watches the run (probes its tasks) meanwhile
    start = tf.timestamp()
    (steps,) = tf.while_loop(lambda i: tf.timestamp() - start < 2.5, lambda i: (i + 1,), (tf.constant(0),))
    return tf.reduce_sum(v) + tf.cast(tf.minimum(steps, 0), tf.float32)

with tmr.LocalCluster(2) as cluster:
    print("sum", float(tmr.MapReduce(wait, tf.add).run(np.ones(10, np.float32), cluster=cluster)))
"""


def test_tensorflow_imported_first_logs_no_warning_for_the_sessions_of_a_run() -> None:
    """The README's order (TensorFlow, then tfmapreduce), TF_CPP_MIN_LOG_LEVEL unset: a run watched for seconds writes
    none of TensorFlow's ``GrpcSession::ListDevices will initialize the session`` warnings (two a second, before)."""
    env = environ.users()
    result = subprocess.run(
        [sys.executable, "-c", TENSORFLOW_FIRST], capture_output=True, text=True, timeout=300, check=False, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["sum", "10.0"]
    assert "ListDevices will initialize" not in result.stderr, result.stderr
