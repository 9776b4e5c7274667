"""Fixtures shared by the tests and the docstring examples: one local cluster for the whole session.

Docstring examples (``pytest --doctest-modules tfmapreduce``) run with ``np``,
``tf``, ``tmr`` and ``cluster`` (this session's cluster) in their namespace,
so every example in the API docs is executed against real workers.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

# Before TensorFlow loads, here and in every worker and command the tests start (they inherit it): oneDNN's graph pass
# looks up every node's registered kernels as each graph is placed and partitioned, 9% of the suite's CPU time (perf),
# and oneDNN speeds up no kernel of the library's own jobs. The tests of what a user sees run without it
# (tests/environ.py), as a user's shell would.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np
import pytest
import tensorflow as tf
from _pytest.doctest import DoctestItem  # pytest exports no public name for the item type

import tfmapreduce

collect_ignore = ["tfmapreduce/__main__.py"]  # running it is the CLI, not a module to import


PARTS = ("all", "shared", "alone")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--part",
        choices=PARTS,
        default="all",
        help="which tests to run: all (default), shared (those that may share the machine with other tests: "
        "scripts/test runs them over two processes) or alone (those marked alone, which measure time or speed)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    part = config.getoption("--part")
    if part == "all":
        return
    keep, drop = [], []
    for item in items:
        (keep if (item.get_closest_marker("alone") is not None) == (part == "alone") else drop).append(item)
    config.hook.pytest_deselected(items=drop)
    items[:] = keep


@pytest.fixture(scope="session")
def cluster() -> Iterator[tfmapreduce.LocalCluster]:
    """Two worker processes (job ``local``) with two CPU devices each, started once per session."""
    with tfmapreduce.LocalCluster(workers=2, cpu_devices=2) as local:
        yield local


@pytest.fixture(autouse=True)
def _docstring_namespace(request: pytest.FixtureRequest, doctest_namespace: dict[str, object]) -> None:
    if isinstance(request.node, DoctestItem):
        doctest_namespace.update(np=np, tf=tf, tmr=tfmapreduce, cluster=request.getfixturevalue("cluster"))
        # The examples' tempfile.mkdtemp() folders go under pytest's own temporary folder, which pytest prunes.
        request.getfixturevalue("monkeypatch").setattr(tempfile, "tempdir", str(request.getfixturevalue("tmp_path")))
