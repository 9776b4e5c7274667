"""``python -m benchmarks``: layouts side by side with hand-written TensorFlow and peers (see --help)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

from ._config import FULL, JOBS, KMEANS_DIM, KMEANS_K, LAYOUTS, QUICK, Config

DEFAULT_OUT = os.path.join("benchmarks", "results")
DOCS_IMG = os.path.join("docs", "img")  # the figures of docs/layouts.md: python -m benchmarks --plots docs/img

EPILOG = f"""\
layouts (--layouts, comma-separated; default: all in full mode):
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
The exit status is 1 when a framework, hand-written or numpy result was wrong or failed.

other benchmarks (each with --help): python -m benchmarks.shipping (shared memory vs feeds vs Ray, tiny job),
benchmarks.autosize (sizes="auto"), benchmarks.keyed (word count, group-by), benchmarks.groups (median and top-3 per
key), benchmarks.joins (joins and PageRank), benchmarks.selection (top_k and unique), benchmarks.quantiles (exact and
approximate quantiles), benchmarks.sort (sorts and TeraSort), benchmarks.files,
benchmarks.resident, benchmarks.client_master, benchmarks.faults, benchmarks.soak,
benchmarks.isolation (isolated vs exposed LocalCluster).
"""


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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Benchmark tfmapreduce's device layouts side by side with the same jobs written by hand in plain "
        "TensorFlow, numpy, and (when installed) Dask and Ray.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="smoke run: small sizes, few repeats, a subset of layouts")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"results folder (default {DEFAULT_OUT})")
    p.add_argument(
        "--plots",
        metavar="DIR",
        help=f"folder for the PNG plots (default: --out); {DOCS_IMG} is where the docs site includes them",
    )
    p.add_argument(
        "--replot",
        metavar="RESULTS_JSON",
        help="run nothing: draw the plots of a saved results.json again, into --plots (default: its folder)",
    )
    p.add_argument("--layouts", type=lambda t: _list(t, tuple(LAYOUTS), "layout"), help="only these layouts (comma-separated)")
    p.add_argument("--jobs", type=lambda t: _list(t, JOBS, "job"), help="only these jobs (comma-separated)")
    p.add_argument("--sizes", type=_sizes, help="float32 element counts, e.g. 1e2,1e6")
    p.add_argument(
        "--sweep-shards",
        type=lambda t: tuple(sorted({_positive(v) for v in t.split(",")})),
        metavar="N,N,...",
        help="shard counts of the sweep (full default 2,8,32,64)",
    )
    p.add_argument("--repeats", type=_positive, help="timed rounds per figure for sizes above 1e6")
    p.add_argument("--small-repeats", type=_positive, help="timed rounds per figure for sizes up to 1e6")
    p.add_argument("--warmup", type=_positive, help="untimed calls per implementation before timing (>= 1: the first is checked)")
    p.add_argument("--startup-repeats", type=int, help="extra LocalCluster(2) starts to time (0: use the run's own start)")
    peers = p.add_mutually_exclusive_group()
    peers.add_argument("--peers", dest="peers", action="store_true", default=None, help="run Dask and Ray when installed")
    peers.add_argument("--no-peers", dest="peers", action="store_false", help="skip Dask and Ray")
    return p


def config_from(args: argparse.Namespace) -> Config:
    config = QUICK if args.quick else FULL
    changes = {
        name: getattr(args, name)
        for name in ("layouts", "jobs", "sizes", "sweep_shards", "repeats", "small_repeats", "warmup", "startup_repeats", "peers")
        if getattr(args, name) is not None
    }
    if args.layouts is not None:  # keep the order of --help
        changes["layouts"] = tuple(name for name in LAYOUTS if name in args.layouts)
    return dataclasses.replace(config, **changes)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
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
    sys.exit(main())
