"""The ``tfmapreduce`` command line (``worker``, ``demo``, ``bench``) and the demo it runs."""

from .cli import main as main
