"""PNG plots of the benchmarks (matplotlib, the ``bench`` extra): the suite's figures and the shared bar chart."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ._targets import size_name

# The suite's figures are drawn 6.4 in wide at 110 dpi (704 px), about the width the docs page shows them
# (690 px): fonts keep their size on the page.  Each figure answers one question, with at most 4 series;
# a series differs from the others by its marker and line style as well as its colour.
WIDTH, HEIGHT, DPI = 6.4, 3.7, 110
STYLES = [
    {"color": "tab:blue", "marker": "o", "ls": "-"},
    {"color": "tab:orange", "marker": "s", "ls": "--"},
    {"color": "tab:green", "marker": "^", "ls": "-."},
    {"color": "black", "marker": "D", "ls": ":"},
]
SHIPPED = {"marker": "s", "ls": "--", "mfc": "white"}  # hollow squares, dashed
RESIDENT = {"marker": "o", "ls": "-"}  # filled circles, solid


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "legend.fontsize": 8.5, "lines.markersize": 5})
    return plt


def _find(cases: list[dict[str, Any]], **where: Any) -> list[dict[str, Any]]:
    return sorted((c for c in cases if all(c.get(k) == v for k, v in where.items())), key=lambda c: c["size"])


def _line(ax: Any, pts: list[tuple[float, dict[str, Any]]], scale: float, label: str, style: dict[str, Any]) -> None:
    """Medians joined by a line, with min-max bars."""
    if not pts:
        return
    xs = [x for x, _ in pts]
    ys = [s["median"] * scale for _, s in pts]
    low = [y - s["min"] * scale for y, (_, s) in zip(ys, pts, strict=True)]
    high = [s["max"] * scale - y for y, (_, s) in zip(ys, pts, strict=True)]
    ax.errorbar(xs, ys, yerr=[low, high], capsize=2, lw=1.4, elinewidth=0.8, label=label, **style)


def _size_axis(ax: Any, sizes: list[int]) -> None:
    ax.set_xscale("log")
    ax.set_xticks(sizes, [size_name(s) for s in sizes])
    ax.minorticks_off()
    ax.set_xlabel("input size (float32 elements)")
    ax.grid(True, which="major", alpha=0.3)


def _ms_axis(ax: Any) -> None:
    import matplotlib.ticker

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))  # 1, 2, 5, 10, 20, ...
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_ylabel("median latency (ms)")


def _save(fig: Any, plt: Any, out: str, name: str, title: str) -> str:
    fig.axes[0].set_title(title, loc="left")
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return name


def _cluster_layout(layouts: list[str]) -> str | None:
    return next((name for name in ("2w-even", "1w", "2w-2cpu", "2w-uneven") if name in layouts), None)


def _mean_lines(plt: Any, fig: Any, ax: Any, cases: list[dict[str, Any]], lines: list[tuple[Any, ...]]) -> bool:
    """Draw the mean's milliseconds per size, one line per ``(layout, input, impl, label, style)``; False (the figure
    closed) when no case has any of them."""
    sizes: set[int] = set()
    for layout, input_, impl, label, style in lines:
        found = [c for c in _find(cases, job="mean", layout=layout, input=input_) if impl in c["timings"]]
        sizes.update(c["size"] for c in found)
        _line(ax, [(c["size"], c["timings"][impl]) for c in found], 1e3, label, style)
    if not sizes:
        plt.close(fig)
        return False
    _size_axis(ax, sorted(sizes))
    _ms_axis(ax)
    return True


def _layouts_plot(plt: Any, cases: list[dict[str, Any]], out: str) -> list[str]:
    """Which layout for a statistic: the mean of resident data, per layout, with numpy in the client's process."""
    series = [("local", "numpy", "numpy, in the client's process")]
    series += [(name, "tmr", LAYOUT_LABELS[name]) for name in ("1w", "2w-even", "2w-2cpu")]
    fig, ax = plt.subplots(figsize=(WIDTH, HEIGHT))
    lines = [(layout, "resident", impl, label, style) for (layout, impl, label), style in zip(series, STYLES, strict=True)]
    if not _mean_lines(plt, fig, ax, cases, lines):
        return []
    ax.legend(loc="lower right")
    return [_save(fig, plt, out, "layouts.png", "The mean of resident data: one process, 1 or 2 workers")]


def _resident_plot(plt: Any, cases: list[dict[str, Any]], layouts: list[str], out: str) -> list[str]:
    """Shipped or resident: the mean on one cluster layout, resident, shipped by tmr (shared memory on the client's
    host) and shipped by the hand-written job (gRPC feeds, the path to a worker on another machine)."""
    layout = _cluster_layout(layouts)
    if layout is None:
        return []
    series = [
        ("resident", "tmr", "resident (tmr.scatter once)", {"color": "tab:blue", **RESIDENT}),
        ("shipped", "tmr", "shipped by tmr (same host: shared memory)", {"color": "tab:orange", **SHIPPED}),
        (
            "shipped",
            "hand",
            "shipped, gRPC feeds (hand-written TF)",
            {"color": "black", "marker": "D", "ls": ":", "mfc": "white"},
        ),
    ]
    fig, ax = plt.subplots(figsize=(WIDTH, HEIGHT))
    if not _mean_lines(plt, fig, ax, cases, [(layout, *line) for line in series]):
        return []
    ax.legend(loc="upper left")
    return [_save(fig, plt, out, "resident.png", f"The mean, shipped on every call or resident ({LAYOUT_LABELS[layout]})")]


def _overhead_plot(plt: Any, cases: list[dict[str, Any]], layouts: list[str], out: str, target: float | None) -> list[str]:
    """tmr / hand-written TF on one cluster layout, resident input: the engine alone, and each recipe."""
    import matplotlib.ticker

    layout = _cluster_layout(layouts)
    if layout is None:
        return []
    series = [
        ("mean", "tmr-job/hand", "MapReduce engine (mean)"),
        ("mean", "tmr/hand", "tmr.mean (float64)"),
        ("variance", "tmr/hand", "tmr.variance (float64, two-pass)"),
        ("kmeans", "tmr/hand", "tmr.recipes.kmeans"),
    ]
    fig, ax = plt.subplots(figsize=(WIDTH, HEIGHT))
    sizes: set[int] = set()
    for (job, ratio, label), style in zip(series, [STYLES[3], *STYLES[:3]], strict=True):
        found = [c for c in _find(cases, job=job, layout=layout, input="resident") if ratio in c["ratios"]]
        sizes.update(c["size"] for c in found)
        _line(ax, [(c["size"], c["ratios"][ratio]) for c in found], 1.0, label, style)
    if not sizes:
        plt.close(fig)
        return []
    ax.axhline(1.0, color="grey", lw=0.8)
    if target is not None:
        ax.axhline(target, color="red", lw=0.8, ls=":", label=f"target: at most ×{target:g}")
    _size_axis(ax, sorted(sizes))
    ax.set_yscale("log")
    ax.set_ylim(0.4, 5.0)  # rare slow rounds fall outside; the legend sits above 2.5
    ax.set_yticks([0.5, 0.75, 1, 1.5, 2, 3, 4], ["0.5", "0.75", "1", "1.5", "2", "3", "4"])
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_ylabel("time / hand-written TF time")
    ax.legend(loc="upper right", ncols=2)
    title = f"Against the same job written by hand in TensorFlow ({LAYOUT_LABELS[layout]}, resident)"
    return [_save(fig, plt, out, "overhead.png", title)]


def _sweep_plot(plt: Any, sweep: list[dict[str, Any]], counts: list[int], devices: int, out: str) -> list[str]:
    """Latency against the shard count for the smallest and largest size, shipped and resident."""
    if not sweep:
        return []
    sizes = sorted({c["size"] for c in sweep})
    sizes = sorted({sizes[0], sizes[-1]})
    fig, ax = plt.subplots(figsize=(WIDTH, HEIGHT))
    for size, color in zip(sizes, ("tab:blue", "tab:orange"), strict=False):
        for input_, style in (("shipped", SHIPPED), ("resident", RESIDENT)):
            for c in _find(sweep, size=size, input=input_):
                pts = [(n, c["timings"][f"tmr@{n}"]) for n in counts if f"tmr@{n}" in c["timings"]]
                _line(ax, pts, 1e3, f"{c['job']} of {size_name(size)}, {input_}", {"color": color, **style})
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(n) for n in counts])
    ax.minorticks_off()
    ax.set_xlabel(f"shards (over 2 workers × {devices} CPU device{'s' if devices > 1 else ''})")
    ax.grid(True, which="major", alpha=0.3)
    _ms_axis(ax)
    ax.legend(loc="upper left")
    return [_save(fig, plt, out, "sweep.png", f"How many shards: the same data in {counts[0]} to {counts[-1]} shards")]


LAYOUT_LABELS = {
    "1w": "1 worker",
    "2w-even": "2 workers",
    "2w-uneven": "2 workers, shards 1:3",
    "2w-2cpu": "2 workers × 2 CPU devices",
}


def write_plots(results: dict[str, Any], out: str, *, overhead_target: float | None = None) -> list[str]:
    """The suite's PNGs in ``out`` (their names); without matplotlib, a note in ``results`` and none.

    ``layouts.png`` (which layout for a statistic), ``resident.png`` (shipped or resident),
    ``overhead.png`` (against hand-written TensorFlow; ``overhead_target`` draws the target as a
    line) and ``sweep.png`` (how many shards): each needs the layouts and jobs it draws, and is
    left out when a run did not measure them.
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
    layouts = list(config["layouts"])
    written = _layouts_plot(plt, cases, out)
    written += _resident_plot(plt, cases, layouts, out)
    written += _overhead_plot(plt, cases, layouts, out, overhead_target)
    written += _sweep_plot(
        plt, [c for c in results["cases"] if c["layout"] == "sweep"], config["sweep_shards"], config["sweep_cpu_devices"], out
    )
    return written


def bar_chart(panels: list[tuple[str, list[tuple[str, list[float]]]]], path: str, *, unit: str) -> None:
    """Horizontal bars of the median of each ``(label, samples)``, with min-max whiskers, one panel per
    ``(title, rows)`` (on a log scale where the medians span more than 10×); tfmapreduce's rows (labels
    with "tmr") in blue.  Needs matplotlib.

    Example (``python -m benchmarks shipping --plot docs/img/shipping.png``)::

        bar_chart([("tiny job", [("tmr", [2.1, 2.3]), ("hand", [1.9, 2.0])])], "out.png", unit="ms")
    """
    import matplotlib.ticker

    plt = _pyplot()
    rows = sum(len(part) for _, part in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(WIDTH, 1.1 + 0.42 * rows + 0.35 * len(panels)), squeeze=False)
    for ax, (title, part) in zip(axes[:, 0], panels, strict=True):
        part = part[::-1]
        labels = [label for label, _ in part]
        medians = [float(np.median(v)) for _, v in part]
        spans = [[m - min(v) for m, (_, v) in zip(medians, part, strict=True)]]
        spans.append([max(v) - m for m, (_, v) in zip(medians, part, strict=True)])
        ax.barh(labels, medians, xerr=spans, color=["C0" if "tmr" in lab else "C7" for lab in labels], capsize=3)
        ax.set_title(title, loc="left")
        if max(medians) > 10 * min(medians):
            ax.set_xscale("log")
            ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.grid(True, axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel(f"median {unit}, bars min–max (lower is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, bbox_inches="tight")  # nothing cut off: long axis labels, the legend


PHASES = [("map", "tab:blue"), ("shuffle", "tab:orange"), ("reduce", "tab:green"), ("other", "0.6")]
"""The phases a trace's ops are coloured by (see :func:`phase`)."""


def phase(name: str) -> str:
    """The phase of a traced op, from its name scope: ``shard*`` maps, ``bucket*``/``send*``/``RecvTensor`` shuffle,
    ``reducer*`` reduces; the rest (budgets, fetches, the client's ops) is other."""
    scope = name.split("/")[0]
    if scope.startswith("shard"):
        return "map"
    if scope.startswith(("bucket", "send")) or name in ("RecvTensor", "_Recv", "_Send"):
        return "shuffle"
    return "reduce" if scope.startswith("reducer") else "other"


def trace_timeline(trace: dict[str, Any], path: str, title: str) -> None:
    """A trace (``trace=``'s JSON) drawn as a timeline: one row per task and device, each op a bar coloured by its phase."""
    plt = _pyplot()
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    ops = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    start = min(e["ts"] for e in ops)
    rows = sorted({(e["pid"], e["tid"]) for e in ops}, key=lambda r: (r[0], names[r]))
    fig, ax = plt.subplots(figsize=(WIDTH, 1.3 + 0.45 * len(rows)), dpi=DPI)
    for y, row in enumerate(rows):
        for part, colour in PHASES:
            bars = [
                ((e["ts"] - start) / 1e3, e["dur"] / 1e3) for e in ops if (e["pid"], e["tid"]) == row and phase(e["name"]) == part
            ]
            ax.broken_barh(bars, (y - 0.35, 0.7), color=colour, label=part if y == 0 else None)
    ax.set_yticks(range(len(rows)), [f"{names[(pid, None)]} {names[(pid, tid)]}" for pid, tid in rows])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the run's first op")
    ax.set_title(title)
    fig.legend(loc="lower center", ncols=len(PHASES), frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
