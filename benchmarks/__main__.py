"""``python -m benchmarks [NAME ...] [flags]``: the benchmarks' one command line (``_runner``; see ``--help``)."""

import sys

from ._runner import main

sys.exit(main())
