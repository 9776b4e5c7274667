"""The ``tfmapreduce`` logger hierarchy (the standard :mod:`logging` module; nothing here prints).

- ``tfmapreduce.cluster``: LocalCluster workers started and stopped (INFO), that they are
  reachable from the network (WARNING, once per process), the TensorFlow version check (WARNING).
- ``tfmapreduce.compile``: every program compiled into a graph, with its size and time (DEBUG).
- ``tfmapreduce.run``: runs retried or given up on (for the run paths' retries).
- ``tfmapreduce.worker``: the ``tfmapreduce worker`` process (the command sends it to stderr).

No handler is attached: an application that configures nothing sees WARNING and above on
stderr (Python's last-resort handler) and nothing else; ``logging.basicConfig(level="INFO")``
or a handler on ``logging.getLogger("tfmapreduce")`` shows the rest.

Example:
    >>> import logging
    >>> CLUSTER.name, CLUSTER.parent is logging.getLogger("tfmapreduce")
    ('tfmapreduce.cluster', True)
"""

from __future__ import annotations

import logging

ROOT = logging.getLogger("tfmapreduce")
CLUSTER = logging.getLogger("tfmapreduce.cluster")
COMPILE = logging.getLogger("tfmapreduce.compile")
RUN = logging.getLogger("tfmapreduce.run")
WORKER = logging.getLogger("tfmapreduce.worker")
