"""The report of a run: ``results.json`` (every raw repeat), ``results.md`` (targets and tables) and the plots."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from . import _plots, _targets
from ._config import JOBS
from ._targets import find, fmt, ms, size_name

IMPL_ORDER = ("tmr", "tmr-job", "hand", "tf.function", "numpy", "dask-threads", "dask-distributed", "ray")
PEER_RATIOS = ("dask-threads/numpy", "dask-distributed/tmr", "ray/tmr")
IMPL_TITLES = {
    "tmr": "tmr (recipe)",
    "tmr-job": "tmr MapReduce (hand's arithmetic)",
    "hand": "hand-written TF",
    "tf.function": "local tf.function",
    "numpy": "numpy",
    "dask-threads": "Dask threads",
    "dask-distributed": "Dask distributed",
    "ray": "Ray",
}


def _cell(summary: dict[str, Any] | None) -> str:
    return "—" if summary is None else f"{ms(summary['median'])} [{ms(summary['min'])}–{ms(summary['max'])}]"


def _median(summary: dict[str, Any] | None) -> float | None:
    return None if summary is None else summary["median"]


def _figure(results: dict[str, Any], key: tuple[str, str, int, str], name: str, kind: str = "timings") -> Any:
    """``timings[name]`` (or ``ratios[name]``) of the case with this (layout, job, size, input), or None."""
    case = find(results, *key)
    return None if case is None else case[kind].get(name)


def _table(header: list[str], rows: Iterable[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows), ""]


def _impls(cases: Iterable[dict[str, Any]]) -> list[str]:
    present = {name for case in cases for name in case["timings"]}
    return [name for name in IMPL_ORDER if name in present] + sorted(present - set(IMPL_ORDER))


def layout_summary(results: dict[str, Any]) -> list[str]:
    """One row per layout and input: tiny latency, large throughput, tmr/hand (the table docs/layouts.md quotes)."""
    config = results["meta"]["config"]
    small, large = min(config["sizes"]), max(config["sizes"])
    lookups = (("mean", small), ("mean", large), ("variance", large))
    rows = []
    for layout in (name for name in config["layouts"] if name != "sweep"):
        impl = "tf.function" if layout == "local" else "tmr"
        for input_ in config["inputs"]:
            tiny, mean, var = (_figure(results, (layout, job, n, input_), impl) for job, n in lookups)
            ratios = (_median(_figure(results, (layout, "mean", n, input_), "tmr/hand", "ratios")) for n in (small, large))
            rows.append(
                [
                    f"{layout} (tf.function)" if layout == "local" else layout,
                    input_,
                    ms(tiny["median"]) if tiny else "—",
                    f"{mean['gbps']:.3g}" if mean else "—",
                    f"{var['gbps']:.3g}" if var else "—",
                    *(fmt(r, "×") for r in ratios),
                ]
            )
    s, big = size_name(small), size_name(large)
    header = ["layout", "input", f"mean {s} latency (ms)", f"mean {big} (GB/s)", f"variance {big} (GB/s)"]
    return _table([*header, f"tmr/hand {s}", f"tmr/hand {big}"], rows)


def job_tables(results: dict[str, Any]) -> list[str]:
    """Per job: every layout, input and size with each implementation's latency and the ratios."""
    lines: list[str] = []
    for job in JOBS:
        cases = [c for c in results["cases"] if c["job"] == job and c["layout"] != "sweep"]
        if not cases:
            continue
        impls = _impls(cases)
        lines += [f"## {job}", "", "Latency in ms, median [min–max]; GB/s of the recipe (or of the local tf.function).", ""]
        if job == "kmeans":
            lines += ["`tmr` here is tmr.recipes.kmeans(iters=1); `tmr-job` one MapReduce run with broadcast centroids.", ""]
        peer_ratios = [r for r in PEER_RATIOS if any(r in c["ratios"] for c in cases)]
        if peer_ratios:
            lines += ["Dask and Ray ran in a second pass, interleaved with the recipe (or numpy, locally) only.", ""]
        ratios = ["tmr/hand", "tmr-job/hand", *peer_ratios]
        header = ["layout", "input", "size", "shards", *(IMPL_TITLES.get(i, i) for i in impls), *ratios, "GB/s"]
        rows = []
        for c in cases:
            main = c["timings"].get("tmr") or c["timings"].get("tf.function")
            rows.append(
                [c["layout"], c["input"], size_name(c["size"]), str(c["shards"])]
                + [_cell(c["timings"].get(i)) for i in impls]
                + [fmt(_median(c["ratios"].get(r)), "×") for r in ratios]
                + [f"{main['gbps']:.3g}" if main else "—"]
            )
        lines += _table(header, rows)
    return lines


def sweep_table(results: dict[str, Any]) -> list[str]:
    """The shard-count sweep: latency at each shard count, by hand at the ends, and the end-to-end ratios."""
    sweep = [c for c in results["cases"] if c["layout"] == "sweep"]
    if not sweep:
        return []
    config = results["meta"]["config"]
    counts = config["sweep_shards"]
    lo, hi = min(counts), max(counts)
    impls = [f"tmr@{n}" for n in counts] + [f"hand@{lo}", f"hand@{hi}"]
    intro = (
        f"The same data split into {', '.join(map(str, counts))} shards (`sizes=n`) over 2 workers × "
        f"{config['sweep_cpu_devices']} CPU devices; latency in ms, median [min–max]."
    )
    rows = [
        [c["job"], c["input"], size_name(c["size"])]
        + [_cell(c["timings"].get(i)) for i in impls]
        + [fmt(_median(c["ratios"].get(f"{k}@{hi}/{k}@{lo}")), "×") for k in ("tmr", "hand")]
        for c in sweep
    ]
    return [
        "## Shard-count sweep",
        "",
        intro,
        "",
        *_table(["job", "input", "size", *impls, f"tmr {hi}/{lo}", f"hand {hi}/{lo}"], rows),
    ]


def markdown(results: dict[str, Any], rows: list[dict[str, Any]], plots: list[str]) -> str:
    """``results.md``: the run, its targets, the layout summary, one table per job, the sweep, start-up, notes."""
    meta, config = results["meta"], results["meta"]["config"]
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items() if v)
    lines = [
        f"# tfmapreduce benchmarks ({meta['mode']} mode)",
        "",
        f"Command: `{meta['command'].strip()}` · commit {meta['commit'] or '?'} · started {meta['started']} · "
        f"took {meta.get('seconds', 0):.0f} s · load average before {meta.get('load_before')} after {meta.get('load_after')}",
        "",
        f"{versions}; Python {meta['python']} on {meta['platform']}, {meta['cpus']} CPUs.",
        "",
        f"Each figure is the median [min–max] of {config['repeats']} timed rounds ({config['small_repeats']} for sizes up to "
        f"1e6 elements) after {config['warmup']} warm-up calls; within a round every implementation runs once, in rotating "
        "order, and ratios are taken round by round. Compare ratios, not absolute times across runs.",
        "",
        "## Targets",
        "",
        *_targets.markdown(rows),
        "",
        *(f"- {meaning}" for meaning in dict.fromkeys(r["meaning"] for r in rows if r["meaning"])),
        "",
        "## Layouts at a glance",
        "",
        "The framework's recipe (`tmr.mean`, `tmr.variance`); for `local`, a plain `tf.function` in this process.",
        "",
        *layout_summary(results),
        *job_tables(results),
        *sweep_table(results),
        "## LocalCluster start-up",
        "",
    ]
    lines += [
        f"- LocalCluster({c['workers']}, cpu_devices={c['cpu_devices']}): ready in {c['ready_s']:.2f} s; "
        f"workers left after close: {c.get('leftover_pids') or 'none'}"
        for c in results["clusters"]
    ]
    if s := results.get("startup"):
        lines.append(
            f"- LocalCluster(2) ready, {s['source']}: median {s['median']:.2f} s [{s['min']:.2f}–{s['max']:.2f}] over {s['n']}"
        )
    lines.append("")
    if results["notes"]:
        lines += ["## Notes", "", *[f"- {n}" for n in results["notes"]], ""]
    if results["errors"]:
        lines += ["## Errors", "", *[f"- {e['where']} [{e['impl']}]: {e['error']}" for e in results["errors"]], ""]
    if plots:
        lines += ["## Plots", "", *[f"![{p}]({p})" for p in plots], ""]
    return "\n".join(lines)


def _overhead_target() -> float | None:
    return next((t["at_most"] for t in _targets.load() if t.get("ratio") == "tmr/hand" and "at_most" in t), None)


def replot(path: str, plots_dir: str) -> list[str]:
    """Draw the plots of a saved ``results.json`` again into ``plots_dir`` (no benchmark runs); their names."""
    with open(path, encoding="utf-8") as f:
        results = json.load(f)
    os.makedirs(plots_dir, exist_ok=True)
    return _plots.write_plots(results, plots_dir, overhead_target=_overhead_target())


def write(results: dict[str, Any], out: str, plots_dir: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Write results.json and results.md into ``out`` and the plots into ``plots_dir`` (default ``out``).

    Returns the target rows (also stored as ``results["targets"]``) and the written files, relative to ``out``.
    """
    plots_dir = out if plots_dir is None else plots_dir
    os.makedirs(out, exist_ok=True)
    os.makedirs(plots_dir, exist_ok=True)
    targets = _targets.load()
    rows = results["targets"] = _targets.evaluate(results, targets)
    written = _plots.write_plots(results, plots_dir, overhead_target=_overhead_target())
    plots = [os.path.relpath(os.path.join(plots_dir, p), out).replace(os.sep, "/") for p in written]
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, default=str)
    with open(os.path.join(out, "results.md"), "w", encoding="utf-8") as f:
        f.write(markdown(results, rows, plots))
    return rows, ["results.json", "results.md", *plots]
