"""The targets of ``benchmarks/targets.json``, each evaluated against one run's results.

Example::

    rows = evaluate(results)  # one row per target of targets.json, in its order
    print(text(rows))
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

PATH = Path(__file__).with_name("targets.json")
"""The targets file the report reads."""

AXES = ("layout", "job", "size", "input")
"""Case keys a target may give as a list: one target per combination, in this order."""

UNITS = {"ms", "GB/s", "×", "s"}


def load(path: Path | str = PATH) -> list[dict[str, Any]]:
    """The targets of ``path``, lists under ``AXES`` expanded to one target each.

    Raises:
        ValueError: a target lacks its figure, goal, case keys or unit; names the target and the key.
    """
    with open(path, encoding="utf-8") as f:
        entries = json.load(f)["targets"]
    targets = []
    for i, entry in enumerate(entries):
        where = f"{path}: target {i} ({entry.get('metric', 'no metric')!r})"
        if sum(k in entry for k in ("timing", "ratio", "startup")) != 1:
            raise ValueError(f"{where} needs exactly one figure: timing, ratio or startup; got keys {sorted(entry)}")
        if sum(k in entry for k in ("at_most", "at_least")) != 1:
            raise ValueError(f"{where} needs exactly one goal: at_most or at_least; got keys {sorted(entry)}")
        if "startup" not in entry and (absent := [a for a in AXES if a not in entry]):
            raise ValueError(f"{where} needs the keys of its case: {', '.join(absent)} missing")
        if entry.get("unit") not in UNITS:
            raise ValueError(f"{where} needs a unit among {sorted(UNITS)}; got {entry.get('unit')!r}")
        axes = [a for a in AXES if a in entry]
        values = [entry[a] if isinstance(entry[a], list) else [entry[a]] for a in axes]
        targets += [{**entry, **dict(zip(axes, combo, strict=True))} for combo in itertools.product(*values)]
    return targets


def find(results: dict[str, Any], layout: str, job: str, size: int, input_: str) -> dict[str, Any] | None:
    """The case of ``results`` with these keys, or None."""
    for case in results["cases"]:
        if (case["layout"], case["job"], case["size"], case["input"]) == (layout, job, size, input_):
            return case
    return None


def size_name(n: int) -> str:
    """``100`` -> ``'1e2'``, ``50_000_000`` -> ``'5e7'``."""
    exponent = math.floor(math.log10(n)) if n > 0 else 0
    mantissa = n / 10**exponent
    return f"1e{exponent}" if mantissa == 1 else f"{mantissa:g}e{exponent}"


def ms(seconds: float) -> str:
    """Seconds as milliseconds with 3 significant digits (whole milliseconds from 1 s)."""
    value = seconds * 1e3
    return f"{value:.3g}" if value < 1000 else f"{value:.0f}"


def fmt(value: float | None, unit: str) -> str:
    """A measured value with its unit; ``—`` for none."""
    if value is None:
        return "—"
    return f"×{value:.2f}" if unit == "×" else f"{value:.3g} {unit}"


def goal(target: dict[str, Any]) -> str:
    """``≤ 3.5 ms``, ``≥ 15 GB/s``, ``≤ 1.1×``."""
    bound = target.get("at_most", target.get("at_least"))
    space = "" if target["unit"] == "×" else " "
    return f"{'≤' if 'at_most' in target else '≥'} {bound:g}{space}{target['unit']}"


def _summary(results: dict[str, Any], target: dict[str, Any], spec: dict[str, Any]) -> tuple[dict[str, Any] | None, Any]:
    """The summary a figure spec (``timing`` or ``ratio``) names, and its case."""
    case = find(results, spec.get("layout", target["layout"]), target["job"], target["size"], target["input"])
    if case is None:
        return None, None
    return (case["timings"].get(spec["timing"]) if "timing" in spec else case["ratios"].get(spec["ratio"])), case


def _value(summary: dict[str, Any], unit: str) -> float:
    return float(summary["gbps"] if unit == "GB/s" else summary["median"] * (1e3 if unit == "ms" else 1.0))


def _absent(results: dict[str, Any], target: dict[str, Any], case: dict[str, Any] | None) -> str:
    """Why a target's figure is not in this run."""
    config = results["meta"]["config"]
    for key, allowed in (("layout", config["layouts"]), ("size", config["sizes"])):
        if target[key] not in allowed:
            shown = ", ".join(size_name(s) for s in allowed) if key == "size" else ", ".join(allowed)
            return f"not in this run (its {key}s: {shown})"
    if case is None:
        return "not in this run"
    kind = "timings" if "timing" in target else "ratios"
    return f"no {target.get('timing') or target['ratio']} in this run (its {kind}: {', '.join(case[kind]) or 'none'})"


def _startup(results: dict[str, Any]) -> tuple[float | None, str]:
    s = results.get("startup")
    if not s:
        return None, "not measured"
    detail = f"min–max {s['min']:.2f}–{s['max']:.2f} s over {s['n']} ({s['source']})"
    if s.get("first_job"):
        detail += f"; first tmr.mean after ready {s['first_job']['median'] * 1e3:.0f} ms"
    return s["median"], detail


def _case_figure(results: dict[str, Any], target: dict[str, Any]) -> tuple[float | None, str]:
    unit = target["unit"]
    summary, case = _summary(results, target, target)
    if summary is None:
        return None, _absent(results, target, case)
    if "ratio" in target:
        parts = [f"round by round min–max {summary['min']:.2f}–{summary['max']:.2f}"]
    elif unit == "ms":
        parts = [f"min–max {ms(summary['min'])}–{ms(summary['max'])} ms"]
    else:
        parts = [f"median {ms(summary['median'])} ms for {case['bytes'] / 1e6:.0f} MB"]
    for spec in target.get("beside", ()):
        other, _ = _summary(results, target, spec)
        other_unit = "×" if "ratio" in spec else unit
        if other is not None:
            parts.append(f"{spec['label']} {fmt(_value(other, other_unit), other_unit)}")
    return _value(summary, unit), "; ".join(parts)


def evaluate(results: dict[str, Any], targets: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per target (default: ``load()``): metric, target, measured, unit, status, detail, meaning.

    ``status`` is ``met``, ``missed`` or ``not measured`` (the detail says why).
    """
    rows = []
    config = results["meta"]["config"]
    for target in load() if targets is None else targets:
        value, detail = _startup(results) if "startup" in target else _case_figure(results, target)
        ok = value is not None and (value <= target["at_most"] if "at_most" in target else value >= target["at_least"])
        names = {k: size_name(target[k]) if k == "size" else target[k] for k in AXES if k in target}
        rows.append(
            {
                "metric": target["metric"].format(**config, **names),
                "target": goal(target),
                "measured": value,
                "unit": target["unit"],
                "status": "not measured" if value is None else "met" if ok else "missed",
                "detail": detail,
                "meaning": target.get("meaning", ""),
            }
        )
    return rows


def markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The rows as a Markdown table."""
    marks = {"met": "✅ met", "missed": "❌ missed", "not measured": "— not measured"}
    lines = ["| metric | target | measured | status | detail |", "|---|---|---|---|---|"]
    lines += [
        f"| {r['metric']} | {r['target']} | {fmt(r['measured'], r['unit'])} | {marks[r['status']]} | {r['detail']} |"
        for r in rows
    ]
    return lines


def text(rows: list[dict[str, Any]]) -> str:
    """The rows as a plain-text table for the terminal."""
    width = max(len(r["metric"]) for r in rows)
    out = [f"{'metric':<{width}}  {'target':<10} {'measured':<12} status"]
    out += [f"{r['metric']:<{width}}  {r['target']:<10} {fmt(r['measured'], r['unit']):<12} {r['status']}" for r in rows]
    return "\n".join(out)
