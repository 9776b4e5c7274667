"""The ``tfmapreduce`` command: ``worker``, ``demo`` and ``bench``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from .._base.errors import TfMapReduceError
from .._version import __version__

_WORKER_HELP = """\
Start one TensorFlow worker (a tf.distribute.Server) for one task of a cluster
and serve until SIGTERM or Ctrl-C; then exit 0.  This is the lesson's
create_worker.py: start one per task, each with the same cluster spec.

example, two workers of job "local" in two terminals:
  tfmapreduce worker --cluster '{"local": ["localhost:2222", "localhost:2223"]}' --job local --task 0
  tfmapreduce worker --cluster '{"local": ["localhost:2222", "localhost:2223"]}' --job local --task 1
then, from Python:
  cluster = tfmapreduce.Cluster.from_spec({"local": ["localhost:2222", "localhost:2223"]})

SECURITY: TensorFlow's gRPC server has no authentication and listens on ALL
network interfaces, whatever host the spec names.  Anyone who can reach the
port can run any operation as this user (file writes included).  So where an
interface other than loopback is up and can deliver to an address of this
machine (any but 127.0.0.0/8 and ::1, even one on lo: the interface needs no
address of its own) the worker refuses to start unless --allow-network is
given: pass it once a firewall, a private network or a tunnel admits only the
client and the other tasks (docs/security.md).
"""


def _worker(args: argparse.Namespace) -> int:
    from .._cluster.spec import load_spec, load_tf_config, validate_spec
    from .._cluster.worker import serve

    if args.cluster is None:
        config = load_tf_config(unset="pass --cluster SPEC, or set TF_CONFIG")
        spec = config.cluster
        job = args.job if args.job is not None else config.job
        index = args.task if args.task is not None else config.index
    else:
        spec, job, index = validate_spec(load_spec(args.cluster)), args.job, args.task
    if job is None:
        if len(spec) != 1:
            raise TfMapReduceError(f"--job is required: the spec has the jobs {sorted(spec)}")
        job = next(iter(spec))
    if index is None:
        raise TfMapReduceError("--task is required (the index of this worker's address in the job's list)")
    handler = logging.StreamHandler(sys.stderr)  # the tfmapreduce loggers only: TensorFlow's own keep their settings
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    logging.getLogger("tfmapreduce").addHandler(handler)
    logging.getLogger("tfmapreduce").setLevel(args.log_level.upper())
    serve(spec, job, int(index), cpu_devices=args.cpu_devices, allow_network=args.allow_network)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .._base.quiet import import_tensorflow

    import_tensorflow()  # before the demo's own import of it: TensorFlow's start-up lines silenced
    from .demo import main

    return main(workers=args.workers)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfmapreduce",
        description="Map/reduce over the tasks and devices of a TensorFlow cluster.",
        epilog="Run 'tfmapreduce COMMAND --help' for the options of each command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    worker = commands.add_parser(
        "worker",
        help="serve one task of a cluster",
        description=_WORKER_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    worker.add_argument(
        "--cluster",
        metavar="SPEC",
        help='the cluster spec: a JSON string such as \'{"local": ["localhost:2222", "localhost:2223"]}\' '
        "or the path of a JSON file; omitted: the 'cluster' entry of TF_CONFIG",
    )
    worker.add_argument(
        "--job", metavar="NAME", help="this worker's job, e.g. local (default: TF_CONFIG's task type, or the only job)"
    )
    worker.add_argument(
        "--task",
        metavar="I",
        type=int,
        help="this worker's index in the job's address list, e.g. 1 (default: TF_CONFIG's task index)",
    )
    worker.add_argument(
        "--cpu-devices",
        metavar="N",
        type=int,
        default=1,
        help="expose N CPU devices (/job:J/task:I/device:CPU:0..N-1) to test placement over several devices per task without GPUs (default 1)",
    )
    worker.add_argument(
        "--allow-network",
        action="store_true",
        help="start even though an interface other than loopback can reach this machine, through which the port is then "
        "open to anyone (needed for workers on several machines; see SECURITY below)",
    )
    worker.add_argument(
        "--log-level",
        metavar="LEVEL",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="what the tfmapreduce loggers write to stderr: debug, info, warning (default) or error",
    )
    worker.set_defaults(handler=_worker)
    demo = commands.add_parser(
        "demo",
        help="run the lesson on a local cluster the library starts itself",
        description="Start a local cluster and run the lesson's examples, printing each result beside numpy's.",
    )
    demo.add_argument("--workers", type=int, default=2, metavar="N", help="worker processes to start (default 2)")
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tfmapreduce`` console script and ``python -m tfmapreduce``."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except TfMapReduceError as e:
        print(f"tfmapreduce {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
