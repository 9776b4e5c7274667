"""Device layouts side by side with the same jobs written by hand in plain TensorFlow, numpy, Dask and Ray.

``python -m benchmarks`` (this benchmark: the default) runs every layout of tfmapreduce beside the same jobs written by
hand in plain TensorFlow, numpy and a local ``tf.function``, and (when installed) Dask and Ray; ``--quick`` is the smoke
run the test suite executes.  The layouts, jobs, sizes and implementations are below the flags.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

from ._config import FULL, JOBS, KMEANS_DIM, KMEANS_K, LAYOUTS, QUICK, Config
from ._peers import PEERS
from ._registry import Size, benchmark, flag

DEFAULT_OUT = os.path.join("benchmarks", "results")
DOCS_IMG = os.path.join("docs", "img")  # the figures of docs/layouts.md: python -m benchmarks --plots docs/img

EPILOG = f"""\
layouts (--layouts, comma-separated; default: all in the full run):
{chr(10).join(f"  {name:<10} {layout.description}" for name, layout in LAYOUTS.items())}

inputs (both, for every cluster layout):
  shipped    host numpy data sliced on the client and fed on every call (each task receives only its shard)
  resident   scattered once with tmr.scatter and kept on the devices; a call moves only the small partials

jobs (--jobs):
  mean       tmr.mean (float64 accumulation per shard)
  variance   tmr.variance (per-shard count/mean/M2, Chan's merge)
  kmeans     one Lloyd iteration over N/{KMEANS_DIM} points (at least {2 * KMEANS_K}) of {KMEANS_DIM} float32, k={KMEANS_K}: tmr.recipes.kmeans(iters=1)

sizes (--sizes): float32 elements, e.g. 1e2,1e6,1e7,5e7 (5e7 = 200 MB; k-means uses the same elements as points)

implementations, side by side in the same run and layout:
  tmr        the framework's one-call recipe
  tmr-job    the framework's MapReduce engine doing exactly the hand-written arithmetic (float32 per slice),
             which separates the engine's overhead from the recipes' float64 work
  hand       the same job written by hand in plain TensorFlow, the lesson's way: a tf.compat.v1 Graph with
             tf.device per slice (the framework plan's devices), client-side slicing through placeholders
             (or resource variables for resident input), a size-weighted combine on task 0, one
             tf.compat.v1.Session(cluster.target) with an operation timeout and device filters
  numpy, tf.function   in this process, no cluster (layout 'local')
  dask-threads, dask-distributed (2 worker processes), ray (2 CPUs)   when installed (pip install -e '.[bench]')

figures: median [min-max] of {FULL.repeats} timed rounds ({FULL.small_repeats} for sizes <= 1e6) after {FULL.warmup} warm-up calls;
within a round every implementation runs once in rotating order and ratios (tmr/hand, 64/2 shards, ...) are
taken round by round.  Every result is checked against numpy in float64 first.

quick mode: sizes 1e2,1e5; mean and variance; layouts local, 2w-even, 2w-uneven and a 2/8-shard sweep on
one LocalCluster(2); {QUICK.repeats} rounds ({QUICK.small_repeats} small); no peers.  Runs in well under a minute.

output (--out, default {DEFAULT_OUT}/): results.json (every raw repeat), results.md (tables; the targets of benchmarks/targets.json),
and PNG plots when matplotlib is installed (layouts.png: the mean per layout; resident.png: shipped vs resident;
overhead.png: vs hand-written TF; sweep.png: the shard sweep); --plots {DOCS_IMG} writes the plots where the docs site
(docs/layouts.md) shows them, and --replot results.json draws them again from a saved run.
The exit status is 1 when a framework, hand-written or numpy result was wrong or failed."""


def _list(text: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    items = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [t for t in items if t not in allowed]
    if bad or not items:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(bad) or '(none given)'}; choose from {', '.join(allowed)}")
    return items


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(float(t)) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be numbers of elements such as 1e2,1e6; got {text!r}") from None
    if not sizes or any(s < 2 * KMEANS_DIM for s in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be at least {2 * KMEANS_DIM} elements each; got {text!r}")
    return tuple(sorted(set(sizes)))


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _layouts(text: str) -> tuple[str, ...]:
    return _list(text, tuple(LAYOUTS), "layout")


def _jobs(text: str) -> tuple[str, ...]:
    return _list(text, JOBS, "job")


def _shards(text: str) -> tuple[int, ...]:
    return tuple(sorted({_positive(v) for v in text.split(",")}))


SIZES = {
    "sizes": Size(QUICK.sizes, FULL.sizes, "float32 element counts", _sizes),
    "layouts": Size(QUICK.layouts, FULL.layouts, "only these layouts (comma-separated)", _layouts),
    "jobs": Size(QUICK.jobs, FULL.jobs, "only these jobs (comma-separated)", _jobs),
    "sweep_shards": Size(QUICK.sweep_shards, FULL.sweep_shards, "shard counts of the sweep", _shards),
    "repeats": Size(QUICK.repeats, FULL.repeats, "timed rounds per figure for sizes above 1e6"),
    "small_repeats": Size(QUICK.small_repeats, FULL.small_repeats, "timed rounds per figure for sizes up to 1e6", _positive),
    "warmup": Size(QUICK.warmup, FULL.warmup, "untimed calls per implementation before timing (the first is checked)", _positive),
    "startup_repeats": Size(
        QUICK.startup_repeats, FULL.startup_repeats, "extra LocalCluster(2) starts to time (0: the run's own)"
    ),
}
"""The knobs of the quick and full modes (``_config.QUICK`` and ``FULL``)."""

FLAGS = (
    flag("--out", default=DEFAULT_OUT, metavar="DIR", help=f"results folder (default {DEFAULT_OUT})"),
    flag(
        "--plots",
        metavar="DIR",
        help=f"folder for the PNG plots (default: --out); {DOCS_IMG} is where the docs site includes them",
    ),
    flag(
        "--replot",
        metavar="RESULTS_JSON",
        help="run nothing: draw the plots of a saved results.json again, into --plots (default: its folder)",
    ),
)


def config_from(args: argparse.Namespace) -> Config:
    """The run's coverage: the mode's, with the knobs and peers of ``args``."""
    knobs = {name: getattr(args, name) for name in SIZES}
    knobs["layouts"] = tuple(name for name in LAYOUTS if name in args.layouts)  # the order of --help
    peers = tuple(peer for peer in PEERS if peer in args.peers)
    return dataclasses.replace(QUICK if args.quick else FULL, **knobs, peers=peers)


@benchmark("layouts", sizes=SIZES, peers=PEERS, flags=FLAGS, epilog=EPILOG)
def run(args: argparse.Namespace) -> int:
    """Measure every case of the run, write the report (or redraw a saved run's plots); 1 where a core result was wrong."""
    if args.replot:
        from . import _report

        plots = args.plots or os.path.dirname(args.replot) or "."
        print(f"wrote {', '.join(_report.replot(args.replot, plots))} to {plots}")
        return 0
    config = config_from(args)
    if config.mode == "full" and min(config.repeats, config.small_repeats) < 5:
        print("note: fewer than 5 timed rounds per figure: the issue's figures need at least 5", file=sys.stderr)

    def log(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)

    from . import _report, _suite, _targets  # imports TensorFlow: after --help and argument errors

    log(
        f"{config.mode} mode: layouts {', '.join(config.layouts)}; jobs {', '.join(config.jobs)}; "
        f"sizes {', '.join(f'{s:.0e}' for s in config.sizes)}"
    )
    results = _suite.run(config, log)
    rows, files = _report.write(results, args.out, args.plots)
    print(_targets.text(rows))
    print(f"\nwrote {', '.join(files)} to {args.out}")
    for note in results["notes"]:
        print(f"note: {note}")
    core = [e for e in results["errors"] if e["core"]]
    if core:
        print(f"\n{len(core)} error(s) in the framework, hand-written or reference implementations:", file=sys.stderr)
        for e in core:
            print(f"  {e['where']} [{e['impl']}]: {e['error']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["layouts", *sys.argv[1:]]))
