"""The ``tfmapreduce`` logger hierarchy: compiles at DEBUG on ``tfmapreduce.compile``, nothing printed."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import tensorflow as tf

import tfmapreduce as tmr


def test_a_compile_is_logged_once_at_debug_and_a_cached_run_is_not(
    cluster: tmr.LocalCluster, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmr.MapReduce(lambda t: tf.reduce_sum(t) + 0.0, tmr.combiners.sum)  # a new job: its first run compiles
    x = np.arange(12.0)
    with caplog.at_level(logging.DEBUG, logger="tfmapreduce"):
        assert float(job.run(x, cluster=cluster)) == 66.0
        assert float(job.run(x, cluster=cluster)) == 66.0
    compiles = [r for r in caplog.records if r.name == "tfmapreduce.compile"]
    assert len(compiles) == 1
    assert compiles[0].levelno == logging.DEBUG
    assert compiles[0].getMessage().startswith("compiled a graph of ")
    assert capsys.readouterr() == ("", "")


def test_the_loggers_form_one_hierarchy_with_no_handler_of_their_own() -> None:
    root = logging.getLogger("tfmapreduce")
    for name in ("cluster", "compile", "run", "worker"):
        assert logging.getLogger(f"tfmapreduce.{name}").parent is root
    assert root.handlers == []  # the application decides; WARNING reaches stderr through Python's last resort
