"""The ``tfmapreduce`` command and the package import: quick, quiet, and without TensorFlow where none is needed."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tfmapreduce


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


def test_import_and_first_use_print_nothing_to_stderr() -> None:
    code = "import tfmapreduce as tmr\nassert callable(tmr.mean) and tmr.recipes.kmeans and tmr.combiners.sum\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
