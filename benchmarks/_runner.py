"""The one command line of the benchmarks: ``python -m benchmarks [NAME ...] [flags]``.

Every public module of this package is a benchmark that registers one function (``_registry.benchmark``); none
imports TensorFlow before it runs, so ``--help`` answers at once.  The runner calls the named ones one after the
other (no NAME: ``layouts``), each with its arguments: its sizes for ``--quick`` or the full run unless a flag sets
them, the peers asked for, and its own flags.  A benchmark that raises is reported and the next one runs; the exit
status is the worst of theirs.

Example::

    python -m benchmarks keyed groups --quick       # two smoke runs
    python -m benchmarks keyed --repeats 3 --plot docs/img/keyed.png
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import pkgutil
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from ._registry import REGISTRY, Benchmark

DEFAULT = "layouts"
"""The benchmark of ``python -m benchmarks`` with no NAME."""


def registered() -> dict[str, Benchmark]:
    """Every benchmark, by name: each public module of the package imported (each registers itself)."""
    package = sys.modules[__package__]
    for module in pkgutil.iter_modules(package.__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__package__}.{module.name}")
    return REGISTRY


def show(value: Any) -> str:
    """A default as a flag would spell it: ``5e7``, ``1.6e7``, ``100,1e6``, ``mean,variance``."""
    if isinstance(value, tuple | list):
        return ",".join(show(v) for v in value)
    if isinstance(value, float | int) and not isinstance(value, bool) and abs(value) >= 1e4:
        text = next(t for t in (f"{value:.{d}e}" for d in range(17)) if float(t) == value)
        return text.replace("e+0", "e").replace("e+", "e")
    return f"{value:g}" if isinstance(value, float) else str(value)


def _listing(benchmarks: dict[str, Benchmark]) -> str:
    width = max(len(name) for name in benchmarks)
    lines = [f"  {name:<{width}}  {b.summary}" for name, b in benchmarks.items()]
    return "benchmarks (no NAME: layouts; python -m benchmarks NAME --help: its flags):\n" + "\n".join(lines)


def _sizes_help(chosen: list[Benchmark], name: str) -> str:
    owners = [b for b in chosen if name in b.sizes]
    size = owners[0].sizes[name]
    if len(owners) == 1:
        return f"{size.help}; default {show(size.full)}, --quick {show(size.quick)}".replace("%", "%%")
    defaults = "; ".join(f"{b.name} {show(b.sizes[name].full)}, --quick {show(b.sizes[name].quick)}" for b in owners)
    return f"{size.help}; {defaults}".replace("%", "%%")


def parser(chosen: list[Benchmark], benchmarks: dict[str, Benchmark], named: bool = True) -> argparse.ArgumentParser:
    """The flags of the ``chosen`` benchmarks (``named``: on the command line, not the default): the shared ones, their
    sizes and their own (a flag two of them declare differently is refused: run those apart)."""
    one = chosen[0] if len(chosen) == 1 else None
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        usage=f"python -m benchmarks {' '.join(b.name for b in chosen) if named else '[NAME ...]'} [flags]",
        description=one.description if one else f"Runs {', '.join(b.name for b in chosen)}, one after the other.",
        epilog="\n\n".join(filter(None, [one.epilog if one else "", _listing(benchmarks)])),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    whose = "these benchmarks'" if one is None else "its"
    shared = p.add_argument_group("shared flags")
    shared.add_argument("--quick", action="store_true", help="the smoke run: small sizes, few repeats, no peers")
    peers = shared.add_mutually_exclusive_group()
    peers.add_argument(
        "--peers",
        nargs="?",
        const="all",
        metavar="NAME,...",
        help=f"run these peers (default: all in the full run, none with --quick; bare --peers: all); "
        f"{whose} peers: {', '.join(_declared(chosen)) or 'none'}",
    )
    peers.add_argument("--no-peers", dest="peers", action="store_const", const="none", help="run no peer")
    sizes = p.add_argument_group("sizes (each benchmark's full and --quick defaults)")
    seen: dict[str, tuple[Benchmark, Any]] = {}
    for bench in chosen:
        for name, size in bench.sizes.items():
            option = "--" + name.replace("_", "-")
            if _clash(p, seen, option, bench, size.parser()):
                continue
            sizes.add_argument(option, dest=name, type=size.parser(), metavar=name.upper(), help=_sizes_help(chosen, name))
    for bench in chosen:
        group = p.add_argument_group(f"flags of {bench.name}") if bench.flags else None
        for spec in bench.flags:
            if not _clash(p, seen, spec.names[0], bench, spec) and group is not None:
                group.add_argument(*spec.names, **spec.options)
    return p


def _declared(chosen: list[Benchmark]) -> list[str]:
    return sorted({peer for b in chosen for peer in b.peers})


def _clash(p: argparse.ArgumentParser, seen: dict[str, tuple[Benchmark, Any]], option: str, bench: Benchmark, spec: Any) -> bool:
    """Whether ``option`` is already a flag (the same for both: True; a different one: a usage error)."""
    if option not in seen:
        seen[option] = (bench, spec)
        return False
    other, first = seen[option]
    if first != spec:
        p.error(f"{other.name} and {bench.name} both take {option}, differently: run them one at a time")
    return True


def _peers(bench: Benchmark, args: argparse.Namespace) -> frozenset[str]:
    """The peers of ``bench`` asked for: all but with --quick, unless --peers or --no-peers says which."""
    if args.peers is None:
        return frozenset() if args.quick else frozenset(bench.peers)
    if args.peers == "all":
        return frozenset(bench.peers)
    if args.peers == "none":
        return frozenset()
    return frozenset(bench.peers) & set(args.peers.split(","))


def arguments(bench: Benchmark, args: argparse.Namespace) -> argparse.Namespace:
    """``bench``'s arguments: ``quick``, ``peers`` (a frozenset), each size (its mode's default unless set) and each
    of its own flags."""
    mode = "quick" if args.quick else "full"
    values: dict[str, Any] = {}
    for name, size in bench.sizes.items():
        given = getattr(args, name)
        values[name] = getattr(size, mode) if given is None else given
    for spec in bench.flags:
        values[spec.dest] = getattr(args, spec.dest)
    return argparse.Namespace(quick=args.quick, peers=_peers(bench, args), **values)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks ``argv`` names (default ``sys.argv[1:]``); the worst exit status of theirs."""
    argv = list(sys.argv[1:] if argv is None else argv)
    benchmarks = registered()
    names = list(itertools.takewhile(lambda a: not a.startswith("-"), argv))
    unknown = [n for n in names if n not in benchmarks]
    chosen = [benchmarks[n] for n in names if n in benchmarks] or [benchmarks[DEFAULT]]
    p = parser(chosen, benchmarks, named=bool(names) and not unknown)
    if unknown:
        p.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(benchmarks)}")
    loners = [b.name for b in chosen if b.alone]
    if loners and len(chosen) > 1:
        p.error(f"{loners[0]} runs only by itself (see python -m benchmarks {loners[0]} --help)")
    args = p.parse_args(argv[len(names) :])
    if args.peers not in (None, "all", "none"):
        bad = sorted(set(args.peers.split(",")) - set(_declared(chosen)))
        if bad:
            p.error(f"unknown peer {', '.join(bad)}; choose from {', '.join(_declared(chosen)) or 'none'}")
    status = 0
    for bench in chosen:
        if len(chosen) > 1:
            print(f"\n## {bench.name}\n", flush=True)
        try:
            code = bench.run(arguments(bench, args)) or 0
        except Exception:
            traceback.print_exc()
            print(f"benchmark {bench.name} failed", file=sys.stderr, flush=True)
            code = 1
        status = max(status, code)
    return status
