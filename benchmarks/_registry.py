"""The registry of the benchmarks: each is one function, registered with ``@benchmark`` with its sizes, peers and flags.

Example::

    @benchmark("selection", sizes={"rows": Size(1e4, 5e7, "rows")})
    def run(args: argparse.Namespace) -> None:
        ...  # args.rows: 1e4 with --quick, 5e7 without, or what --rows says; args.quick; args.peers

``python -m benchmarks NAME`` (``_runner``) makes the flags from these declarations and calls the function.  The
module's docstring is the benchmark's ``--help``; its first line is the benchmark's line in the list.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._peers import MODULES

Run = Callable[[argparse.Namespace], "int | None"]
"""A benchmark: measures and prints, given its arguments; returns its exit status (None: 0)."""


def ints(text: str) -> tuple[int, ...]:
    """Comma-separated integers: ``2,4,8``."""
    return tuple(int(float(v)) for v in text.split(","))


def floats(text: str) -> tuple[float, ...]:
    """Comma-separated numbers: ``1e9,1e10``."""
    return tuple(float(v) for v in text.split(","))


@dataclasses.dataclass(frozen=True)
class Size:
    """A knob whose default depends on the mode: ``quick`` with ``--quick``, else ``full``; ``--NAME`` sets it in both.

    ``parse`` reads the flag's text; by default the type of ``full`` (int, float; a tuple of ints or floats from
    comma-separated values).
    """

    quick: Any
    full: Any
    help: str
    parse: Callable[[str], Any] | None = None

    def parser(self) -> Callable[[str], Any]:
        if self.parse is not None:
            return self.parse
        if isinstance(self.full, tuple):
            return ints if all(isinstance(v, int) for v in self.full) else floats
        return type(self.full)


@dataclasses.dataclass(frozen=True)
class Flag:
    """A flag of its own: the arguments of ``argparse.ArgumentParser.add_argument``."""

    names: tuple[str, ...]
    options: dict[str, Any]

    @property
    def dest(self) -> str:
        """The name of its value in the arguments, as argparse makes it."""
        if "dest" in self.options:
            return str(self.options["dest"])
        name = next((n for n in self.names if n.startswith("--")), self.names[0])
        return name.lstrip("-").replace("-", "_")


def flag(*names: str, **options: Any) -> Flag:
    """``flag("--plot", metavar="PNG", help=...)``: a flag, declared as ``add_argument`` takes it."""
    return Flag(names, options)


PLOT = flag("--plot", metavar="PNG", help="also draw the results into this PNG file (needs matplotlib)")
"""The ``--plot PNG`` flag of the benchmarks that draw a figure."""


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """A registered benchmark: its function, its sizes per mode, the peers it compares with and its own flags."""

    name: str
    run: Run
    sizes: Mapping[str, Size]
    peers: tuple[str, ...]
    flags: tuple[Flag, ...]
    epilog: str
    """More ``--help`` text, after the flags."""
    alone: bool
    """Runs only by itself: it leaves the process in a state later benchmarks would not run in."""

    @property
    def description(self) -> str:
        return (sys.modules[self.run.__module__].__doc__ or self.name).strip()

    @property
    def summary(self) -> str:
        return self.description.splitlines()[0]


REGISTRY: dict[str, Benchmark] = {}
"""Every benchmark by name, in the order registered."""


def benchmark(
    name: str,
    *,
    sizes: Mapping[str, Size],
    peers: Sequence[str] = (),
    flags: Sequence[Flag] = (),
    epilog: str = "",
    alone: bool = False,
) -> Callable[[Run], Run]:
    """Register the decorated function as benchmark ``name``.

    Args:
        sizes: the knobs whose value differs between ``--quick`` and the full run (inputs, repeats), by name.
        peers: the peers it compares with when asked (names of ``_peers.MODULES``); ``args.peers`` holds those asked.
        flags: flags of its own (``flag(...)``), apart from the sizes.
        epilog: more ``--help`` text.
        alone: the runner runs it only by itself (it leaves the process unfit for the next benchmark).
    """
    unknown = set(peers) - set(MODULES)
    if unknown:
        raise ValueError(f"benchmark {name!r}: unknown peers {sorted(unknown)}; known: {', '.join(MODULES)}")

    def register(run: Run) -> Run:
        if run.__module__ == "__main__":  # python -m benchmarks.NAME: its guard calls the runner, which imports it again
            return run
        if name in REGISTRY:
            raise ValueError(f"two benchmarks named {name!r}")
        REGISTRY[name] = Benchmark(name, run, dict(sizes), tuple(peers), tuple(flags), epilog, alone)
        return run

    return register
