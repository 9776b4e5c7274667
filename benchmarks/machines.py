"""Scaling across "machines": word count, group-by mean, sort and join on 2, 4 and 8 workers, each a machine of its own.

``python -m benchmarks machines`` starts one rack (``tests/machines.py``) of as many machines as the
largest count asked: each worker in its own network, mount and pid namespaces, on a Linux bridge of veth pairs, every
link shaped (``tc``) to each ``--rates`` in turn.  For each rate and machine count it scatters the inputs onto the
first machines (resident: only the job's own shuffle crosses the links), checks each job once against numpy or
``collections.Counter``, then times ``--repeats`` runs:

- ``word_count``: ``tmr.recipes.word_count`` of ``--tokens`` Zipf words (8 a line) over a vocabulary of tokens/40;
- ``mean_by_key``: ``tmr.mean_by_key`` of ``--rows`` float32 values over ``--keys`` int64 keys;
- ``sort``: ``tmr.sort`` of ``--sort-rows`` int64 (kept resident, range-partitioned);
- ``join``: ``tmr.join(strategy="hash", resident=True)`` of ``--join-left`` rows against ``--join-right`` unique keys;
- ``predict``: ``tmr.predict`` of the models guide's Keras model, Dense(64, relu) → Dense(1), over ``--predict-rows``
  × 16 float32 in ``.npy`` files on the machines' own disks (one a machine, written there with ``shared=False``), the
  predictions kept resident and written as one part a machine (``write_npy(shared=False)``); the weights go to each
  machine on the checked warm-up run, none on the timed ones (``weight bytes`` says so).

Per run: the wall time, the bytes through each machine's link (the kernel's counters of its veth, both ways), and
``wire`` = the busiest direction of the busiest link ÷ the link rate ÷ the wall time: the share of the run a link
spent sending at least.  ``--json`` keeps every number; ``--plot`` draws wall time and bytes per machine against
machines; the model of the deploy guide is fitted by ``--fit`` (from a saved ``--json`` too).

Every machine shares this host's cores: the compute part is measured with all machines on the same CPUs.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ._registry import PLOT, Size, benchmark, flag

ROOT = Path(__file__).resolve().parent.parent
JOBS = ("word_count", "mean_by_key", "sort", "join", "predict")
ISSUE_SIZES = {"word_count": 16e6, "mean_by_key": 2e7, "sort": 2e7, "join": 1.1e7, "predict": 1e6}
"""The sizes the rehearsal's issue names (tokens, rows, int64, left + right rows), for the model's predictions."""


def _lines(tokens: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i:x}" for i in range(max(100, tokens // 40))])
    p = 1.0 / np.arange(1, len(vocabulary) + 1)
    words = vocabulary[rng.choice(len(vocabulary), tokens, p=p / p.sum())]
    return np.array([" ".join(words[i : i + 8]) for i in range(0, tokens, 8)])


class Inputs:
    """One job's host inputs, its reference, and its run over inputs resident on the given devices."""

    def __init__(self, job: str, args: argparse.Namespace) -> None:
        rng = np.random.default_rng(1)
        self.job = job
        self.folder: str | None = None
        if job == "word_count":
            self.host: tuple[np.ndarray, ...] = (_lines(int(args.tokens)),)
            self.rows = int(args.tokens)
            # Text files where every machine reads them (its /tmp is its own): a shared file system, as in a real cluster
            self.folder = tempfile.mkdtemp(prefix="tmr-bench-machines-", dir="/var/tmp")
            self.paths = []
            for i, part in enumerate(np.array_split(self.host[0], 16)):
                self.paths.append(os.path.join(self.folder, f"part-{i:02d}.txt"))
                Path(self.paths[-1]).write_text("".join(f"{line}\n" for line in part))
        elif job == "mean_by_key":
            n = int(args.rows)
            self.host = (rng.integers(0, int(args.keys), n, dtype=np.int64), rng.random(n, dtype=np.float32))
            self.rows = n
        elif job == "sort":
            self.host = (rng.integers(-(2**62), 2**62, int(args.sort_rows), dtype=np.int64),)
            self.rows = int(args.sort_rows)
        elif job == "predict":
            import keras

            keras.utils.set_random_seed(0)
            layers = [keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)]
            self.model = keras.Sequential(layers)
            self.host = (rng.random((int(args.predict_rows), 16), dtype=np.float32),)
            self.rows = int(args.predict_rows)
            self.folder = f"/tmp/tmr-bench-predict-{os.getpid()}"  # on each machine's own /tmp (removed with the rack)
            self.written = 0
        else:
            left, right = int(args.join_left), int(args.join_right)
            keys = rng.permutation(right).astype(np.int64)
            self.host = (
                rng.integers(0, right, left, dtype=np.int64),
                rng.random(left, dtype=np.float32),
                keys,
                rng.random(right, dtype=np.float32),
            )
            self.rows = left + right

    def place(self, tmr: Any, cluster: Any, devices: list[str], timeout: float) -> list[Any]:
        """The job's inputs where its run reads them: scattered onto ``devices``, or files the workers read."""
        if self.job == "word_count":
            return [tmr.read_text(self.paths)]
        if self.job == "predict":  # one .npy file on each machine's own disk
            self.tmr, self.cluster, self.timeout = tmr, cluster, timeout
            written = tmr.write_npy(self.host[0], self._next(), shared=False, cluster=cluster, devices=devices, timeout=timeout)
            return [tmr.read_npy(written)]
        return [tmr.scatter(a, cluster=cluster, devices=devices, timeout=timeout) for a in self.host]

    def _next(self) -> str:
        self.written += 1
        return f"{self.folder}/{self.written}"

    def close(self) -> None:
        if self.folder is not None and self.job != "predict":
            shutil.rmtree(self.folder, ignore_errors=True)

    def run(self, resident: list[Any], tmr: Any, cluster: Any, devices: list[str], timeout: float) -> tuple[Any, Any]:
        """One timed call: (its result, RunStats); resident results are freed by :meth:`free`."""
        options = dict(cluster=cluster, timeout=timeout, return_stats=True)  # resident inputs: where they live
        if self.job == "word_count":
            return tmr.recipes.word_count(resident[0], devices=devices, **options)
        if self.job == "mean_by_key":
            return tmr.mean_by_key(resident[0], resident[1], **options)
        if self.job == "sort":
            return tmr.sort(resident[0], **options)
        if self.job == "predict":  # predictions made on each machine and written there
            with tmr.stats() as s:
                kept = tmr.predict(self.model, resident[0], cluster=cluster, timeout=timeout, resident=True)
            with kept:
                return tmr.write_npy(kept, self._next(), shared=False, cluster=cluster, timeout=timeout), s.last
        return tmr.join((resident[0], resident[1]), (resident[2], resident[3]), strategy="hash", resident=True, **options)

    def check(self, result: Any) -> None:
        """Assert ``result`` equals the single-process reference."""
        if self.job == "word_count":
            counts = collections.Counter(w for line in self.host[0] for w in line.split())
            got = {k.decode() if isinstance(k, bytes) else k: v for k, v in result.to_dict().items()}
            assert got == dict(counts)
        elif self.job == "mean_by_key":
            keys, values = self.host
            sums, counts = np.bincount(keys, values.astype(np.float64)), np.bincount(keys)
            present = np.flatnonzero(counts)
            np.testing.assert_array_equal(result.keys, present)
            np.testing.assert_allclose(result.values, sums[present] / counts[present], rtol=1e-5)
        elif self.job == "sort":
            np.testing.assert_array_equal(result.gather(), np.sort(self.host[0]))
        elif self.job == "predict":  # read back where each machine wrote its part
            assert len(result.by_task()) == len(result.parts), result.by_task()
            with self.tmr.read_npy(result).persist(cluster=self.cluster, timeout=self.timeout) as back:
                want = self.model.predict(self.host[0], verbose=0, batch_size=65536)
                np.testing.assert_allclose(back.gather(), want, rtol=1e-5, atol=1e-6)
        else:
            gathered = result.gather()  # every left key has its one match on the right
            assert len(gathered) == len(self.host[0]), (len(gathered), len(self.host[0]))
            by_key = dict(zip(self.host[2].tolist(), self.host[3].tolist(), strict=True))
            order = np.argsort(gathered.keys, kind="stable")
            np.testing.assert_array_equal(
                gathered.right[order], np.array([by_key[k] for k in gathered.keys[order].tolist()], np.float32)
            )

    @staticmethod
    def free(result: Any) -> None:
        if hasattr(result, "delete"):
            result.delete()


def _traffic(rack: Any, tasks: list[int]) -> list[tuple[int, int]]:
    return [rack.traffic(t) for t in tasks]


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Start the rack, run every (rate, machines, job), and return the results (also printed as they come)."""
    sys.path.insert(0, str(ROOT / "tests"))  # the harness lives with the tests: one copy of it
    from _pytest.outcomes import Skipped
    from machines import Rack

    import tfmapreduce as tmr

    counts = sorted(args.machines)
    inputs: dict[str, Inputs] = {}
    try:
        for job in args.jobs:
            inputs[job] = Inputs(job, args)
        return _measure(args, inputs, counts, Rack, Skipped, tmr)
    finally:
        for data in inputs.values():
            data.close()


def _measure(
    args: argparse.Namespace, inputs: dict[str, Inputs], counts: list[int], Rack: Any, Skipped: Any, tmr: Any
) -> dict[str, Any]:
    meta = {"argv": sys.argv[1:], "delay_ms": args.delay_ms, "cores": os.cpu_count(), "load": os.getloadavg()}
    results: dict[str, Any] = {"meta": meta, "runs": []}
    started = time.monotonic()
    try:
        rack = Rack(counts[-1])
    except Skipped as e:
        raise SystemExit(f"benchmarks machines: {e.msg}") from None
    with rack, rack.cluster() as cluster:
        print(f"{rack}: {counts[-1]} workers ready in {time.monotonic() - started:.0f} s", flush=True)
        for rate in args.rates:
            shaping = {rack.shape(m.task, rate_bps=rate, delay_ms=args.delay_ms) for m in rack.remote}
            results["meta"].setdefault("shaping", {})[f"{rate:g}"] = sorted(shaping)
            print(f"links: {', '.join(sorted(shaping))}", flush=True)
            for k in counts:
                tasks = list(range(k))
                devices = [rack.machines[t].device for t in tasks]
                for job, data in inputs.items():
                    resident = data.place(tmr, cluster, devices, args.timeout)
                    try:
                        result, first = data.run(resident, tmr, cluster, devices, args.timeout)  # warm-up: compiled, checked
                        data.check(result)
                        data.free(result)
                        walls, moved, shipped, weights = [], [], [], [first.weight_bytes]
                        for _ in range(args.repeats):
                            before = _traffic(rack, tasks)
                            began = time.monotonic()
                            result, stats = data.run(resident, tmr, cluster, devices, args.timeout)
                            walls.append(time.monotonic() - began)
                            after = _traffic(rack, tasks)
                            data.free(result)
                            moved.append([(a[0] - b[0], a[1] - b[1]) for a, b in zip(after, before, strict=True)])
                            shipped.append(stats.bytes_sent)
                            weights.append(stats.weight_bytes)
                    finally:
                        for r in resident:
                            data.free(r)
                    run = _summary(job, k, rate, data.rows, walls, moved, shipped)
                    run["weight_bytes"] = weights  # model variables sent: the warm-up run's, then each timed run's
                    results["runs"].append(run)
                    print(
                        f"  {job:<12} {k} machines {rate / 1e9:g} Gbit/s: {run['wall']:.3f} s "
                        f"[{run['wall_min']:.3f}-{run['wall_max']:.3f}], {run['bytes_per_machine'] / 1e6:.1f} MB per machine "
                        f"(busiest direction {run['busiest'] / 1e6:.1f} MB), wire {run['wire']:.0%}"
                        + (f", weight bytes {weights}" if any(weights) else ""),
                        flush=True,
                    )
    results["meta"]["seconds"] = time.monotonic() - started
    return results


def _summary(
    job: str, k: int, rate: float, rows: int, walls: list[float], moved: list[list[tuple[int, int]]], shipped: list[int]
) -> dict[str, Any]:
    last = moved[walls.index(statistics.median_low(walls))]  # the median run's traffic
    per_machine = [i + o for i, o in last]
    busiest = max(max(i, o) for i, o in last)
    wall = statistics.median(walls)
    return {
        "job": job,
        "machines": k,
        "rate_bps": rate,
        "rows": rows,
        "wall": wall,
        "wall_min": min(walls),
        "wall_max": max(walls),
        "walls": walls,
        "bytes_per_machine": statistics.mean(per_machine),
        "bytes_in_out": last,
        "busiest": busiest,
        "wire": busiest * 8 / rate / wall,
        "client_bytes_sent": statistics.median(shipped),
    }


def fit(runs: list[dict[str, Any]], cores: int) -> dict[str, Any]:
    """Per job: time ≈ a × rows per machine + b × busiest bytes ÷ link rate + c0 + c1 × machines, least squares with
    every constant ≥ 0; with R², the largest relative error, and the bytes per row for the predictions.

    The machines here share ``cores`` cores, so the rows a machine computes at a time are the rows per core in use:
    total rows ÷ min(machines, cores).  Runs of two input sizes tell ``a`` from ``c0``.
    """
    from scipy.optimize import nnls

    model: dict[str, Any] = {}
    for job in dict.fromkeys(r["job"] for r in runs):
        points = [r for r in runs if r["job"] == job]
        a = np.array(
            [[r["rows"] / min(r["machines"], cores), r["busiest"] * 8 / r["rate_bps"], 1.0, r["machines"]] for r in points]
        )
        t = np.array([r["wall"] for r in points])
        constants, _ = nnls(a, t)
        predicted = a @ constants
        r2 = 1 - float(np.sum((t - predicted) ** 2) / max(np.sum((t - t.mean()) ** 2), 1e-30))
        # bytes through the busiest direction of a link per row a machine holds, over (k - 1) / k (the share that leaves)
        beta = statistics.median(
            r["busiest"] / (r["rows"] / r["machines"]) / ((r["machines"] - 1) / r["machines"]) for r in points
        )
        per_row, per_wire, fixed, per_machine = (float(c) for c in constants)
        model[job] = {
            "per_row_s": per_row,
            "per_wire": per_wire,
            "fixed_s": fixed,
            "per_machine_s": per_machine,
            "r2": r2,
            "max_rel_err": float(np.max(np.abs(predicted - t) / t)),
            "bytes_per_row": beta,
            "points": len(points),
        }
    return model


def predict(model: dict[str, Any], job: str, rows: float, machines: int, rate_bps: float) -> float:
    """The model's time for ``rows`` on ``machines`` machines of one core each, with links of ``rate_bps``."""
    m = model[job]
    per_machine = rows / machines
    wire = m["bytes_per_row"] * per_machine * (machines - 1) / machines * 8 / rate_bps
    return float(m["per_row_s"] * per_machine + m["per_wire"] * wire + m["fixed_s"] + m["per_machine_s"] * machines)


def floor(model: dict[str, Any], job: str, rows: float, machines: int, rate_bps: float) -> float:
    """The compute and wire terms alone: ``a`` × rows per machine + the busiest bytes at the link's rate (b = 1) + c0,
    without the per-machine term, which on this host is mostly the machines' contention for its cores."""
    m = model[job]
    per_machine = rows / machines
    wire = m["bytes_per_row"] * per_machine * (machines - 1) / machines * 8 / rate_bps
    return float(m["per_row_s"] * per_machine + wire + m["fixed_s"])


def report(results: dict[str, Any]) -> None:
    """The measured table and the fitted model, in Markdown."""
    print(
        "\n| job | input | machines | link | wall s [min–max] | MB per machine (in + out) | busiest direction MB | wire share |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results["runs"]:
        print(
            f"| {r['job']} | {r['rows']:.3g} | {r['machines']} | {r['rate_bps'] / 1e9:g} Gbit/s | {r['wall']:.2f} "
            f"[{r['wall_min']:.2f}–{r['wall_max']:.2f}] | {r['bytes_per_machine'] / 1e6:.1f} | {r['busiest'] / 1e6:.1f} | "
            f"{r['wire']:.0%} |"
        )
    if len({(r["machines"], r["rate_bps"]) for r in results["runs"]}) < 3:
        print("\n(fewer than 3 points per job: no model fitted)")
        return
    model = fit(results["runs"], int(results["meta"].get("cores", 2)))
    results["model"] = model
    print(
        "\n| job | a: µs per row | b | c0: s | c1: ms per machine | bytes per row | R² | max error | 16 machines | "
        "100 machines | 16, compute + wire | 100, compute + wire |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for job, m in model.items():
        at = [predict(model, job, ISSUE_SIZES[job], k, 10e9) for k in (16, 100)]
        low = [floor(model, job, ISSUE_SIZES[job], k, 10e9) for k in (16, 100)]
        print(
            f"| {job} | {m['per_row_s'] * 1e6:.3g} | {m['per_wire']:.2f} | {m['fixed_s']:.3f} | {m['per_machine_s'] * 1e3:.1f} | "
            f"{m['bytes_per_row']:.1f} | {m['r2']:.2f} | {m['max_rel_err']:.0%} | {at[0]:.2f} s | {at[1]:.2f} s | "
            f"{low[0]:.2f} s | {low[1]:.2f} s |"
        )
    print(f"(predictions at 10 Gbit/s for the issue's sizes: {', '.join(f'{j} {n:.3g}' for j, n in ISSUE_SIZES.items())})")


def plot(results: dict[str, Any], path: str) -> None:
    """Wall time and bytes per machine against machines, one line per job and link rate."""
    from ._plots import DPI, HEIGHT, STYLES, WIDTH, _pyplot

    plt = _pyplot()
    largest = {r["job"]: max(q["rows"] for q in results["runs"] if q["job"] == r["job"]) for r in results["runs"]}
    runs = [r for r in results["runs"] if r["rows"] == largest[r["job"]]]  # one input size per job
    fig, (time_ax, bytes_ax) = plt.subplots(1, 2, figsize=(WIDTH, HEIGHT))
    rates = sorted({r["rate_bps"] for r in runs})
    for j, job in enumerate(dict.fromkeys(r["job"] for r in runs)):
        for rate in rates:
            pts = sorted((r["machines"], r) for r in runs if r["job"] == job and r["rate_bps"] == rate)
            ks = [k for k, _ in pts]
            style = dict(STYLES[j % len(STYLES)])
            if rate != rates[-1]:
                style.update(ls=":", mfc="white")
            label = f"{job}, {rate / 1e9:g} Gbit/s"
            time_ax.plot(ks, [r["wall"] for _, r in pts], label=label, **style)
            bytes_ax.plot(ks, [r["bytes_per_machine"] / 1e6 for _, r in pts], **style)
    for ax in (time_ax, bytes_ax):
        ax.set_xscale("log", base=2)
        ks = sorted({r["machines"] for r in runs})
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.minorticks_off()
        ax.set_xlabel("machines")
        ax.grid(True, alpha=0.3)
    time_ax.set_ylabel("median wall time (s)")
    bytes_ax.set_ylabel("MB through each machine's link")
    time_ax.set_title("time (dotted: the slower link)", loc="left")
    bytes_ax.set_title("bytes per machine", loc="left")
    fig.legend(*time_ax.get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=7)
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _jobs(text: str) -> list[str]:
    jobs = text.split(",")
    unknown = set(jobs) - set(JOBS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown job(s) {sorted(unknown)}; choose from {','.join(JOBS)}")
    return jobs


@benchmark(
    "machines",
    sizes={
        "machines": Size((2,), (2, 4, 8), "machine counts"),
        "rates": Size((1e9,), (1e9, 1e10), "link rates in bit/s"),
        "tokens": Size(2e4, 2e6, "word count tokens (the issue's: 16e6)"),
        "rows": Size(2e4, 2e6, "group-by rows (the issue's: 2e7)"),
        "keys": Size(1e3, 1e5, "group-by keys (the issue's: 1e6)"),
        "sort_rows": Size(2e4, 2e6, "int64 to sort (the issue's: 2e7)"),
        "join_left": Size(2e4, 1e6, "the join's left rows (the issue's: 1e7)"),
        "join_right": Size(2e3, 1e5, "the join's right rows, unique keys (the issue's: 1e6)"),
        "predict_rows": Size(2e4, 1e6, "rows × 16 float32 the Keras model predicts (the models issue's: 1e6)"),
        "repeats": Size(1, 2, "timed runs per point after one checked warm-up (median)"),
    },
    flags=(
        flag("--delay-ms", type=float, default=0.2, help="added latency per link direction (needs netem; default 0.2)"),
        flag("--jobs", type=_jobs, default=list(JOBS), help=f"default {','.join(JOBS)}"),
        flag("--timeout", type=float, default=300.0, help="each run's deadline, seconds (default 300)"),
        flag("--json", metavar="PATH", help="save every number here"),
        flag("--from", dest="source", nargs="+", metavar="PATH", help="run nothing: report and plot saved --json files"),
        PLOT,
    ),
)
def run(args: argparse.Namespace) -> None:
    """Measure (or read ``--from``), print the table and the model, save and plot."""
    if args.source:
        saved = [json.loads(Path(path).read_text()) for path in args.source]
        results = {"meta": saved[0]["meta"], "runs": [r for one in saved for r in one["runs"]]}
    else:
        results = measure(args)
        if args.json:  # saved before the report: a report that fails loses no measurement
            Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    report(results)
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["machines", *sys.argv[1:]]))
