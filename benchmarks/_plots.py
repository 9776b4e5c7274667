"""PNG plots of the benchmarks (matplotlib, the ``bench`` extra): the suite's figures and the shared bar chart."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ._config import JOBS
from ._targets import size_name

COLORS = {"local": "black", "1w": "tab:purple", "2w-even": "tab:blue", "2w-uneven": "tab:orange", "2w-2cpu": "tab:green"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _errorbars(ax: Any, xs: list[float], summaries: list[dict[str, Any]], scale: float, style: str, **kw: Any) -> None:
    """Medians with min-max bars."""
    ys = [s["median"] * scale for s in summaries]
    spans = [[y - s["min"] * scale for y, s in zip(ys, summaries, strict=True)]]
    spans.append([s["max"] * scale - y for y, s in zip(ys, summaries, strict=True)])
    ax.errorbar(xs, ys, yerr=spans, fmt=style, marker="o", ms=3, capsize=2, **kw)


def _save(fig: Any, plt: Any, out: str, name: str, title: str) -> str:
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)
    return name


def _size_plots(plt: Any, cases: list[dict[str, Any]], inputs: list[str], job: str, out: str) -> list[str]:
    """Latency and throughput against size, per layout, one panel per input."""
    written = []
    for kind in ("latency", "throughput"):
        fig, axes = plt.subplots(1, len(inputs), figsize=(6 * len(inputs), 4.5), squeeze=False, sharey=True)
        for ax, input_ in zip(axes[0], inputs, strict=True):
            for layout in dict.fromkeys(c["layout"] for c in cases):
                impls = ("tf.function", "numpy") if layout == "local" else ("tmr", "hand")
                for impl, style in zip(impls, ("-", "--"), strict=True):
                    pts = sorted(
                        (c["size"], c["timings"][impl])
                        for c in cases
                        if c["layout"] == layout and c["input"] == input_ and impl in c["timings"]
                    )
                    if not pts:
                        continue
                    xs, summaries = [p[0] for p in pts], [p[1] for p in pts]
                    kw = {"color": COLORS.get(layout), "label": f"{layout} {impl}"}
                    if kind == "latency":
                        _errorbars(ax, xs, summaries, 1e3, style, **kw)
                    else:
                        ax.plot(xs, [s["gbps"] for s in summaries], style, marker="o", ms=3, **kw)
            ax.set(xscale="log", yscale="log", xlabel="float32 elements", title=f"{job}, {input_} input")
            ax.grid(True, which="both", alpha=0.3)
        axes[0][0].set_ylabel("median latency (ms), min–max bars" if kind == "latency" else "throughput (GB/s of input)")
        axes[0][-1].legend(fontsize=7, loc="best")
        title = f"{job}: {kind} vs size per layout (solid: tmr / tf.function, dashed: hand-written TF / numpy)"
        written.append(_save(fig, plt, out, f"{kind}_{job}.png", title))
    return written


def _overhead_plot(plt: Any, cases: list[dict[str, Any]], inputs: list[str], out: str, target: float | None) -> list[str]:
    """tmr/hand against size, per job, layout and input."""
    import matplotlib.ticker

    jobs = [j for j in JOBS if any(c["job"] == j and "tmr/hand" in c["ratios"] for c in cases)]
    if not jobs:
        return []
    fig, axes = plt.subplots(1, len(jobs), figsize=(5.5 * len(jobs), 4.2), squeeze=False, sharey=True)
    for ax, job in zip(axes[0], jobs, strict=True):
        for layout in dict.fromkeys(c["layout"] for c in cases if c["job"] == job):
            for input_, style in zip(inputs, ("--", "-"), strict=False):
                pts = sorted(
                    (c["size"], c["ratios"]["tmr/hand"])
                    for c in cases
                    if c["job"] == job and c["layout"] == layout and c["input"] == input_ and "tmr/hand" in c["ratios"]
                )
                shift = 0.94 if input_ == "shipped" else 1.06  # side by side, not on top of each other
                if pts:
                    kw = {"color": COLORS.get(layout), "label": f"{layout} {input_}"}
                    _errorbars(ax, [p[0] * shift for p in pts], [p[1] for p in pts], 1.0, style, **kw)
        if target is not None:
            ax.axhline(target, color="red", lw=0.8, ls=":", label=f"target ×{target:.2f}")
        ax.axhline(1.0, color="grey", lw=0.6)
        ax.set(yscale="log", ylim=(0.4, 4.0), xscale="log", xlabel="float32 elements", title=job)  # ylim: rare slow rounds
        ax.set_yticks([0.5, 0.75, 1, 1.1, 1.5, 2, 3, 4], ["0.5", "0.75", "1", "1.1", "1.5", "2", "3", "4"])
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("tmr / hand-written TF (round by round, median, min–max)")
    axes[0][-1].legend(fontsize=7)
    return [_save(fig, plt, out, "overhead.png", "Framework overhead vs the same job written by hand in plain TensorFlow")]


def _sweep_plot(plt: Any, sweep: list[dict[str, Any]], counts: list[int], out: str) -> list[str]:
    """Latency against the shard count, per size and input."""
    if not sweep:
        return []
    fig, ax = plt.subplots(figsize=(6, 4.2))
    palette = {size: f"C{i}" for i, size in enumerate(sorted({c["size"] for c in sweep}))}
    for c in sweep:
        pts = [(n, c["timings"][f"tmr@{n}"]["median"] * 1e3) for n in counts if f"tmr@{n}" in c["timings"]]
        style = "-" if c["input"] == "resident" else "--"
        label = f"{c['job']} {size_name(c['size'])} {c['input']}"
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", ms=3, color=palette[c["size"]], label=label)
    ax.set_xscale("log", base=2)
    ax.set(yscale="log", xlabel="shards", ylabel="median latency (ms)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return [_save(fig, plt, out, "sweep.png", "Shard-count sweep (solid: resident, dashed: shipped)")]


def write_plots(results: dict[str, Any], out: str, *, overhead_target: float | None = None) -> list[str]:
    """The suite's PNGs in ``out`` (their names); without matplotlib, a note in ``results`` and none.

    ``overhead_target`` draws the overhead target as a line on ``overhead.png``.
    """
    try:
        plt = _pyplot()
    except ImportError:
        note = "plots skipped: matplotlib is not installed (pip install -e '.[bench]')"
        if note not in results["notes"]:
            results["notes"].append(note)
        return []
    config = results["meta"]["config"]
    cases = [c for c in results["cases"] if c["layout"] != "sweep"]
    written = []
    for job in JOBS:
        if job_cases := [c for c in cases if c["job"] == job]:
            written += _size_plots(plt, job_cases, config["inputs"], job, out)
    written += _overhead_plot(plt, cases, config["inputs"], out, overhead_target)
    written += _sweep_plot(plt, [c for c in results["cases"] if c["layout"] == "sweep"], config["sweep_shards"], out)
    return written


def bar_chart(panels: list[tuple[str, list[tuple[str, list[float]]]]], path: str, *, unit: str) -> None:
    """Horizontal bars of the median of each ``(label, samples)``, with min-max whiskers, one panel per
    ``(title, rows)`` (on a log scale where the medians span more than 10×); tfmapreduce's rows (labels
    with "tmr") in blue.  Needs matplotlib.

    Example (``python -m benchmarks.shipping --plot docs/img/shipping.png``)::

        bar_chart([("tiny job", [("tmr", [2.1, 2.3]), ("hand", [1.9, 2.0])])], "out.png", unit="ms")
    """
    plt = _pyplot()
    rows = sum(len(part) for _, part in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 1.2 + 0.45 * rows), squeeze=False)
    for ax, (title, part) in zip(axes[:, 0], panels, strict=True):
        part = part[::-1]
        labels = [label for label, _ in part]
        medians = [float(np.median(v)) for _, v in part]
        spans = [[m - min(v) for m, (_, v) in zip(medians, part, strict=True)]]
        spans.append([max(v) - m for m, (_, v) in zip(medians, part, strict=True)])
        ax.barh(labels, medians, xerr=spans, color=["C0" if "tmr" in lab else "C7" for lab in labels], capsize=3)
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="y", labelsize=8)
        if max(medians) > 10 * min(medians):
            ax.set_xscale("log")
    axes[-1, 0].set_xlabel(f"median {unit} [min-max] on the 2-core machine, 2 workers (lower is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
