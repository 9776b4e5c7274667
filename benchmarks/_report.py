"""Reports: the targets table, the markdown tables, the JSON with every raw repeat, and the plots."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from ._config import JOBS

TARGET_TINY_MS = 3.5
TARGET_OVERHEAD = 1.10
TARGET_MEAN_GBPS = 15.0
TARGET_VARIANCE_GBPS = 4.0
TARGET_SWEEP = 2.0
TARGET_READY_S = 5.0
BIG = 50_000_000
TINY = 100

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


def find(results: dict[str, Any], layout: str, job: str, size: int, input_: str) -> dict[str, Any] | None:
    for case in results["cases"]:
        if (case["layout"], case["job"], case["size"], case["input"]) == (layout, job, size, input_):
            return case
    return None


def _timing(case: dict[str, Any] | None, impl: str) -> dict[str, Any] | None:
    return None if case is None else case["timings"].get(impl)


def _ratio(case: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    return None if case is None else case["ratios"].get(name)


def _size(n: int) -> str:
    exponent = math.floor(math.log10(n)) if n > 0 else 0
    mantissa = n / 10**exponent
    return f"1e{exponent}" if mantissa == 1 else f"{mantissa:g}e{exponent}"


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.3g}" if ms < 1000 else f"{ms:.0f}"


def _cell(summary: dict[str, Any] | None, *, scale: float = 1e3, unit: str = "") -> str:
    if summary is None:
        return "—"
    f = (lambda v: _ms(v)) if scale == 1e3 else (lambda v: f"{v:.3g}")
    return f"{f(summary['median'])}{unit} [{f(summary['min'])}–{f(summary['max'])}]"


def _row(target: str, metric: str, value: float | None, ok: bool | None, detail: str, unit: str) -> dict[str, Any]:
    status = "not measured" if value is None else ("met" if ok else "missed")
    return {"metric": metric, "target": target, "measured": value, "unit": unit, "status": status, "detail": detail}


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, each computed from this run's figures (or 'not measured' with why)."""
    rows = []
    sizes = results["meta"]["config"]["sizes"]
    big_note = "" if BIG in sizes else f" (this run's sizes: {', '.join(_size(s) for s in sizes)})"

    case = find(results, "2w-even", "mean", TINY, "resident")
    t = _timing(case, "tmr")
    hand = _timing(case, "hand")
    rows.append(
        _row(
            f"≤ {TARGET_TINY_MS} ms",
            "tmr.mean, 100 elements, resident, 2 workers: median latency",
            t and t["median"] * 1e3,
            t is not None and t["median"] * 1e3 <= TARGET_TINY_MS,
            (
                f"min–max {_ms(t['min'])}–{_ms(t['max'])} ms; hand-written TF {_ms(hand['median'])} ms"
                if t and hand
                else "needs tmr.scatter and the 2w-even layout"
            ),
            "ms",
        )
    )

    for job in ("mean", "variance"):
        for size in (TINY, BIG):
            for input_ in ("resident", "shipped"):
                case = find(results, "2w-even", job, size, input_)
                r = _ratio(case, "tmr/hand")
                engine = _ratio(case, "tmr-job/hand")
                detail = (
                    f"round by round min–max {r['min']:.2f}–{r['max']:.2f}; engine with the hand's arithmetic "
                    f"(tmr-job/hand) ×{engine['median']:.2f}"
                    if r and engine
                    else f"round by round min–max {r['min']:.2f}–{r['max']:.2f}"
                    if r
                    else f"not in this run{big_note}"
                    if size not in sizes
                    else "needs tmr.scatter"
                    if input_ == "resident"
                    else "not in this run"
                )
                rows.append(
                    _row(
                        f"≤ {TARGET_OVERHEAD:.2f}×",
                        f"overhead tmr.{job} / hand-written TF, {_size(size)}, {input_}, 2 workers",
                        r and r["median"],
                        r is not None and r["median"] <= TARGET_OVERHEAD,
                        detail,
                        "×",
                    )
                )

    for job, goal in (("mean", TARGET_MEAN_GBPS), ("variance", TARGET_VARIANCE_GBPS)):
        case = find(results, "2w-even", job, BIG, "resident")
        t = _timing(case, "tmr")
        detail = f"median {_ms(t['median'])} ms for {case['bytes'] / 1e6:.0f} MB" if t and case else f"not in this run{big_note}"
        hand = _timing(case, "hand")
        if hand:
            detail += f"; hand-written TF {hand['gbps']:.3g} GB/s"
        local = find(results, "local", job, BIG, "resident")
        numpy = _timing(local, "numpy")
        if numpy:
            detail += f"; numpy np.{'var' if job == 'variance' else 'mean'} in one process {numpy['gbps']:.3g} GB/s"
        rows.append(
            _row(
                f"≥ {goal:g} GB/s",
                f"tmr.{job} over 5e7 float32, resident, 2 workers: throughput",
                t and t["gbps"],
                t is not None and t["gbps"] >= goal,
                detail,
                "GB/s",
            )
        )

    counts = results["meta"]["config"]["sweep_shards"]
    lo, hi = min(counts), max(counts)
    for size in (TINY, BIG):
        case = find(results, "sweep", "mean", size, "resident") or find(results, "sweep", "mean", size, "shipped")
        r = _ratio(case, f"tmr@{hi}/tmr@{lo}")
        if hi != 64 or lo != 2:
            value, detail = (
                None,
                (f"this run sweeps {lo}..{hi} shards: tmr@{hi}/tmr@{lo} ×{r['median']:.2f}" if r else "not in this run"),
            )
        else:
            value = r and r["median"]
            hand = _ratio(case, f"hand@{hi}/hand@{lo}")
            detail = (
                f"{case['input']}; min–max {r['min']:.2f}–{r['max']:.2f}"
                + (f"; hand-written 64/2 ×{hand['median']:.2f}" if hand else "")
                if r and case
                else f"not in this run{big_note if size == BIG else ''}"
            )
        rows.append(
            _row(
                f"≤ {TARGET_SWEEP:g}×",
                f"tmr.mean latency, 64 shards / 2 shards, {_size(size)}, 2 workers × {results['meta']['config']['sweep_cpu_devices']} CPUs",
                value,
                value is not None and value <= TARGET_SWEEP,
                detail,
                "×",
            )
        )

    startup = results.get("startup")
    rows.append(
        _row(
            f"≤ {TARGET_READY_S:g} s",
            "LocalCluster(2) ready (constructor returns)",
            startup and startup["median"],
            startup is not None and startup["median"] <= TARGET_READY_S,
            (
                f"min–max {startup['min']:.2f}–{startup['max']:.2f} s over {startup['n']} ({startup['source']})"
                + (
                    f"; first tmr.mean after ready {startup['first_job']['median'] * 1e3:.0f} ms"
                    if startup.get("first_job")
                    else ""
                )
                if startup
                else "not measured"
            ),
            "s",
        )
    )
    return rows


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    return f"{value:.3g} {unit}" if unit != "×" else f"×{value:.2f}"


def targets_markdown(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| metric | target | measured | status | detail |", "|---|---|---|---|---|"]
    for r in rows:
        mark = {"met": "✅ met", "missed": "❌ missed", "not measured": "— not measured"}[r["status"]]
        lines.append(f"| {r['metric']} | {r['target']} | {_fmt(r['measured'], r['unit'])} | {mark} | {r['detail']} |")
    return lines


def targets_text(rows: list[dict[str, Any]]) -> str:
    width = max(len(r["metric"]) for r in rows)
    out = [f"{'metric':<{width}}  {'target':<10} {'measured':<12} status"]
    for r in rows:
        out.append(f"{r['metric']:<{width}}  {r['target']:<10} {_fmt(r['measured'], r['unit']):<12} {r['status']}")
    return "\n".join(out)


def _impls(cases: Iterable[dict[str, Any]]) -> list[str]:
    present = {name for case in cases for name in case["timings"]}
    return [name for name in IMPL_ORDER if name in present] + sorted(present - set(IMPL_ORDER))


def layout_summary(results: dict[str, Any]) -> list[str]:
    """One row per layout and input: tiny latency, large throughput, overhead vs hand-written (the table docs/layouts.md quotes)."""
    sizes = results["meta"]["config"]["sizes"]
    small, large = min(sizes), max(sizes)
    lines = [
        f"| layout | input | mean {_size(small)} latency (ms) | mean {_size(large)} (GB/s) | variance {_size(large)} (GB/s) "
        f"| tmr/hand {_size(small)} | tmr/hand {_size(large)} |",
        "|---|---|---|---|---|---|---|",
    ]
    for layout in results["meta"]["config"]["layouts"]:
        if layout == "sweep":
            continue
        for input_ in results["meta"]["config"]["inputs"]:
            impl = "tf.function" if layout == "local" else "tmr"
            tiny = _timing(find(results, layout, "mean", small, input_), impl)
            mean = _timing(find(results, layout, "mean", large, input_), impl)
            var = _timing(find(results, layout, "variance", large, input_), impl)
            r_small = _ratio(find(results, layout, "mean", small, input_), "tmr/hand")
            r_large = _ratio(find(results, layout, "mean", large, input_), "tmr/hand")
            name = f"{layout} (tf.function)" if layout == "local" else layout
            cells = [
                name,
                input_,
                _ms(tiny["median"]) if tiny else "—",
                f"{mean['gbps']:.3g}" if mean else "—",
                f"{var['gbps']:.3g}" if var else "—",
                _fmt(r_small and r_small["median"], "×"),
                _fmt(r_large and r_large["median"], "×"),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(results: dict[str, Any], target_rows: list[dict[str, Any]], plots: list[str]) -> str:
    meta = results["meta"]
    cfg = meta["config"]
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items() if v)
    lines = [
        f"# tfmapreduce benchmarks ({meta['mode']} mode)",
        "",
        f"Command: `{meta['command'].strip()}` · commit {meta['commit'] or '?'} · started {meta['started']} · "
        f"took {meta.get('seconds', 0):.0f} s · load average before {meta.get('load_before')} after {meta.get('load_after')}",
        "",
        f"{versions}; Python {meta['python']} on {meta['platform']}, {meta['cpus']} CPUs.",
        "",
        f"Each figure is the median [min–max] of {cfg['repeats']} timed rounds ({cfg['small_repeats']} for sizes up to 1e6 "
        f"elements) after {cfg['warmup']} warm-up calls; within a round every implementation runs once, in rotating order, "
        "and ratios are taken round by round, so both sides of a ratio saw the same load. Compare ratios, not absolute "
        "times across runs: the machine is shared and noisy.",
        "",
        "## Targets",
        "",
        *targets_markdown(target_rows),
        "",
        "## Layouts at a glance",
        "",
        "The framework's recipe (`tmr.mean`, `tmr.variance`); for `local`, a plain `tf.function` in this process.",
        "",
        *layout_summary(results),
        "",
    ]
    for job in JOBS:
        cases = [c for c in results["cases"] if c["job"] == job and c["layout"] != "sweep"]
        if not cases:
            continue
        impls = _impls(cases)
        lines += [
            f"## {job}",
            "",
            "Latency in ms, median [min–max]; GB/s of the framework's recipe (or of the local tf.function).",
            "",
        ]
        kmeans_impl = {c.get("tmr_impl") for c in cases if c.get("tmr_impl")}
        if kmeans_impl:
            lines += [f"`tmr` here is {', '.join(sorted(kmeans_impl))}.", ""]
        peer_ratios = [r for r in PEER_RATIOS if any(r in c["ratios"] for c in cases)]
        if peer_ratios:
            lines += [
                "Dask and Ray ran in a second pass, interleaved with the framework's recipe (or numpy, locally) only, "
                "after the framework/hand-written pass; their ratios are against that pass.",
                "",
            ]
        ratio_names = ["tmr/hand", "tmr-job/hand", *peer_ratios]
        header = ["layout", "input", "size", "shards"] + [IMPL_TITLES.get(i, i) for i in impls] + [*ratio_names, "GB/s"]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for c in cases:
            main = c["timings"].get("tmr") or c["timings"].get("tf.function")
            cells = [c["layout"], c["input"], _size(c["size"]), str(c["shards"])]
            cells += [_cell(c["timings"].get(i)) for i in impls]
            cells += [_fmt((c["ratios"].get(r) or {}).get("median"), "×") for r in ratio_names]
            cells += [f"{main['gbps']:.3g}" if main else "—"]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    sweep = [c for c in results["cases"] if c["layout"] == "sweep"]
    if sweep:
        counts = cfg["sweep_shards"]
        lo, hi = min(counts), max(counts)
        impls = [f"tmr@{n}" for n in counts] + [f"hand@{lo}", f"hand@{hi}"]
        lines += [
            "## Shard-count sweep",
            "",
            f"The same data split into {', '.join(map(str, counts))} shards (`sizes=n`) over 2 workers × "
            f"{cfg['sweep_cpu_devices']} CPU devices; latency in ms, median [min–max].",
            "",
        ]
        header = ["job", "input", "size", *impls, f"tmr {hi}/{lo}", f"hand {hi}/{lo}"]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for c in sweep:
            cells = [c["job"], c["input"], _size(c["size"])] + [_cell(c["timings"].get(i)) for i in impls]
            cells += [
                _fmt((c["ratios"].get(f"tmr@{hi}/tmr@{lo}") or {}).get("median"), "×"),
                _fmt((c["ratios"].get(f"hand@{hi}/hand@{lo}") or {}).get("median"), "×"),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## LocalCluster start-up", ""]
    for c in results["clusters"]:
        lines.append(
            f"- LocalCluster({c['workers']}, cpu_devices={c['cpu_devices']}): ready in {c['ready_s']:.2f} s; "
            f"workers left after close: {c.get('leftover_pids') or 'none'}"
        )
    s = results.get("startup")
    if s:
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


def write(results: dict[str, Any], out: str, plots_dir: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Write results.json and results.md into ``out`` and the plots into ``plots_dir`` (default ``out``).

    Returns the targets and the written files, relative to ``out``.  ``plots_dir="docs/img"``
    puts the PNGs where the documentation site includes them (docs/layouts.md).
    """
    os.makedirs(out, exist_ok=True)
    plots_dir = out if plots_dir is None else plots_dir
    os.makedirs(plots_dir, exist_ok=True)
    rows = targets(results)
    results["targets"] = rows
    plots = [os.path.relpath(os.path.join(plots_dir, p), out).replace(os.sep, "/") for p in write_plots(results, plots_dir)]
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, default=str)
    with open(os.path.join(out, "results.md"), "w", encoding="utf-8") as f:
        f.write(markdown(results, rows, plots))
    return rows, ["results.json", "results.md", *plots]


# --- plots ----------------------------------------------------------------------------------------

COLORS = {"local": "black", "1w": "tab:purple", "2w-even": "tab:blue", "2w-uneven": "tab:orange", "2w-2cpu": "tab:green"}


def write_plots(results: dict[str, Any], out: str) -> list[str]:
    """PNG plots via matplotlib when installed; otherwise a note and no plots."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        note = "plots skipped: matplotlib is not installed (pip install -e '.[bench]')"
        if note not in results["notes"]:
            results["notes"].append(note)
        return []
    written = []
    inputs = results["meta"]["config"]["inputs"]
    cases = [c for c in results["cases"] if c["layout"] != "sweep"]
    for job in JOBS:
        job_cases = [c for c in cases if c["job"] == job]
        if not job_cases:
            continue
        for kind in ("latency", "throughput"):
            fig, axes = plt.subplots(1, len(inputs), figsize=(6 * len(inputs), 4.5), squeeze=False, sharey=True)
            for ax, input_ in zip(axes[0], inputs, strict=True):
                for layout in dict.fromkeys(c["layout"] for c in job_cases):
                    impls = ("tf.function", "numpy") if layout == "local" else ("tmr", "hand")
                    for impl, style in zip(impls, ("-", "--"), strict=True):
                        pts = sorted(
                            (c["size"], c["timings"][impl])
                            for c in job_cases
                            if c["layout"] == layout and c["input"] == input_ and impl in c["timings"]
                        )
                        if not pts:
                            continue
                        xs = [p[0] for p in pts]
                        if kind == "latency":
                            ys = [p[1]["median"] * 1e3 for p in pts]
                            lo = [y - p[1]["min"] * 1e3 for y, p in zip(ys, pts, strict=True)]
                            hi = [p[1]["max"] * 1e3 - y for y, p in zip(ys, pts, strict=True)]
                            ax.errorbar(
                                xs,
                                ys,
                                yerr=[lo, hi],
                                fmt=style,
                                marker="o",
                                ms=3,
                                capsize=2,
                                color=COLORS.get(layout),
                                label=f"{layout} {impl}",
                            )
                        else:
                            ax.plot(
                                xs,
                                [p[1]["gbps"] for p in pts],
                                style,
                                marker="o",
                                ms=3,
                                color=COLORS.get(layout),
                                label=f"{layout} {impl}",
                            )
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.set_xlabel("float32 elements")
                ax.set_title(f"{job}, {input_} input")
                ax.grid(True, which="both", alpha=0.3)
            axes[0][0].set_ylabel("median latency (ms), min–max bars" if kind == "latency" else "throughput (GB/s of input)")
            axes[0][-1].legend(fontsize=7, loc="best")
            fig.suptitle(
                f"{job}: {kind} vs size per layout (solid: tmr / tf.function, dashed: hand-written TF / numpy)", fontsize=10
            )
            fig.tight_layout()
            name = f"{kind}_{job}.png"
            fig.savefig(os.path.join(out, name), dpi=110)
            plt.close(fig)
            written.append(name)
    jobs = [j for j in JOBS if any(c["job"] == j and "tmr/hand" in c["ratios"] for c in cases)]
    if jobs:
        fig, axes = plt.subplots(1, len(jobs), figsize=(5.5 * len(jobs), 4.2), squeeze=False, sharey=True)
        for ax, job in zip(axes[0], jobs, strict=True):
            for layout in dict.fromkeys(c["layout"] for c in cases if c["job"] == job):
                for input_, style in zip(inputs, ("--", "-"), strict=False):
                    pts = sorted(
                        (c["size"], c["ratios"]["tmr/hand"])
                        for c in cases
                        if c["job"] == job and c["layout"] == layout and c["input"] == input_ and "tmr/hand" in c["ratios"]
                    )
                    if not pts:
                        continue
                    ys = [p[1]["median"] for p in pts]
                    shift = 0.94 if input_ == "shipped" else 1.06  # side by side, not on top of each other
                    ax.errorbar(
                        [p[0] * shift for p in pts],
                        ys,
                        yerr=[
                            [y - p[1]["min"] for y, p in zip(ys, pts, strict=True)],
                            [p[1]["max"] - y for y, p in zip(ys, pts, strict=True)],
                        ],
                        fmt=style,
                        marker="o",
                        ms=3,
                        capsize=2,
                        color=COLORS.get(layout),
                        label=f"{layout} {input_}",
                    )
            ax.axhline(TARGET_OVERHEAD, color="red", lw=0.8, ls=":", label=f"target ×{TARGET_OVERHEAD:.2f}")
            ax.axhline(1.0, color="grey", lw=0.6)
            ax.set_yscale("log")
            ax.set_ylim(0.4, 4.0)  # a rare slow round would otherwise flatten every median line
            ax.set_yticks([0.5, 0.75, 1, 1.1, 1.5, 2, 3, 4], ["0.5", "0.75", "1", "1.1", "1.5", "2", "3", "4"])
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_xscale("log")
            ax.set_xlabel("float32 elements")
            ax.set_title(job)
            ax.grid(True, which="both", alpha=0.3)
        axes[0][0].set_ylabel("tmr / hand-written TF (round by round, median, min–max)")
        axes[0][-1].legend(fontsize=7)
        fig.suptitle("Framework overhead vs the same job written by hand in plain TensorFlow, same layout", fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "overhead.png"), dpi=110)
        plt.close(fig)
        written.append("overhead.png")
    sweep = [c for c in results["cases"] if c["layout"] == "sweep"]
    if sweep:
        counts = results["meta"]["config"]["sweep_shards"]
        fig, ax = plt.subplots(figsize=(6, 4.2))
        palette = {size: f"C{i}" for i, size in enumerate(sorted({c["size"] for c in sweep}))}
        for c in sweep:
            pts = [(n, c["timings"][f"tmr@{n}"]["median"] * 1e3) for n in counts if f"tmr@{n}" in c["timings"]]
            if pts:
                ax.plot(
                    [p[0] for p in pts],
                    [p[1] for p in pts],
                    "-" if c["input"] == "resident" else "--",
                    marker="o",
                    ms=3,
                    color=palette[c["size"]],
                    label=f"{c['job']} {_size(c['size'])} {c['input']}",
                )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("shards")
        ax.set_ylabel("median latency (ms)")
        ax.set_title("Shard-count sweep (solid: resident, dashed: shipped)", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "sweep.png"), dpi=110)
        plt.close(fig)
        written.append("sweep.png")
    return written


def bar_chart(panels: list[tuple[str, list[tuple[str, list[float]]]]], path: str, *, unit: str) -> None:
    """Horizontal bars of the median of each ``(label, samples)``, with min-max whiskers, one panel per
    ``(title, rows)`` (on a log scale where the medians span more than 10×); tfmapreduce's rows (labels
    with "tmr") in blue.  Needs matplotlib.

    Example (``python -m benchmarks.shipping --plot docs/img/shipping.png``)::

        bar_chart([("tiny job", [("tmr", [2.1, 2.3]), ("hand", [1.9, 2.0])])], "out.png", unit="ms")
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sum(len(part) for _, part in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 1.2 + 0.45 * rows), squeeze=False)
    for ax, (title, part) in zip(axes[:, 0], panels, strict=True):
        labels = [label for label, _ in part][::-1]
        medians = [float(np.median(v)) for _, v in part][::-1]
        spans = [
            [m - min(v) for m, (_, v) in zip(medians, part[::-1], strict=True)],
            [max(v) - m for m, (_, v) in zip(medians, part[::-1], strict=True)],
        ]
        ax.barh(labels, medians, xerr=spans, color=["C0" if "tmr" in lab else "C7" for lab in labels], capsize=3)
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="y", labelsize=8)
        if max(medians) > 10 * min(medians):
            ax.set_xscale("log")
    axes[-1, 0].set_xlabel(f"median {unit} [min-max] on the 2-core machine, 2 workers (lower is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
