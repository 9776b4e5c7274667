"""What every family of the suite shares: the data, the numpy references, and checking, timing and recording a case."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _timing
from ._config import Config
from ._work import agrees, initial_centroids, job_input, make_data, reference

CORE = ("tmr", "tmr-job", "hand", "numpy", "tf.function")
"""Implementations whose failure fails the run (a peer's failure is only noted)."""

Impls = dict[str, Callable[[], Any]]
Raw = dict[str, list[float]]


class Bench:
    """One run's inputs and results; ``log`` receives a line per measured case.

    Example::

        bench = Bench(config, print)
        bench.measure(bench.case("local", "mean", 100, "resident", shards=1), {"numpy": ...}, [])
        bench.results["cases"]  # one entry, with checks, timings and ratios
    """

    def __init__(self, config: Config, log: Callable[[str], None]):
        self.config, self.log = config, log
        self.centroids = initial_centroids()
        self.data = {size: make_data(size) for size in config.sizes}
        self.references = {
            (job, size): reference(job, self.input(job, size), self.centroids)
            for size in config.sizes
            for job in {*config.jobs, *config.sweep_jobs}
        }
        self.results: dict[str, Any] = {"meta": {}, "notes": [], "clusters": [], "startup": None, "cases": [], "errors": []}
        self._cases: dict[tuple[str, str, int, str], dict[str, Any]] = {}

    def input(self, job: str, size: int) -> np.ndarray:
        """The array ``job`` maps at ``size`` (k-means: points of the same memory)."""
        return job_input(job, self.data[size], size)

    def note(self, text: str) -> None:
        """A note for the report, once."""
        if text not in self.results["notes"]:
            self.results["notes"].append(text)
            self.log(f"note: {text}")

    def error(self, where: str, impl: str, exc: BaseException) -> None:
        """Record a failure; one of a ``CORE`` implementation fails the run."""
        core = impl in CORE
        entry = {"where": where, "impl": impl, "core": core, "error": f"{type(exc).__name__}: {exc}"}
        self.results["errors"].append({**entry, "traceback": traceback.format_exc(limit=6)})
        self.log(f"{'ERROR' if core else 'peer error'} in {where} [{impl}]: {entry['error']}")

    def attempt(self, where: str, impl: str, build: Callable[..., Any], *args: Any) -> Any:
        """``build(*args)``, or None with the error recorded."""
        try:
            return build(*args)
        except Exception as e:
            self.error(where, impl, e)
            return None

    def case(self, layout: str, job: str, size: int, input_: str, **extra: Any) -> dict[str, Any]:
        """A new case record (not yet measured)."""
        x = self.input(job, size)
        return {
            "layout": layout,
            "job": job,
            "size": size,
            "elements": int(x.size),
            "bytes": int(x.nbytes),
            "input": input_,
            **extra,
        }

    def find(self, layout: str, job: str, size: int, input_: str) -> dict[str, Any] | None:
        """A measured case, or None."""
        return self._cases.get((layout, job, size, input_))

    @staticmethod
    def where(case: dict[str, Any]) -> str:
        return f"{case['layout']} {case['job']} {case['size']:.0e} {case['input']}"

    def _check_and_time(self, case: dict[str, Any], impls: Impls, where: str) -> tuple[dict[str, Any], Raw, dict[str, Any]]:
        """Check each implementation against numpy in float64, then time those that ran, interleaved.

        Returns:
            The checks, the seconds of every round per implementation, and their summaries (with GB/s).
        """
        expected = self.references[(case["job"], case["size"])]
        checks, working = {}, {}
        for name, fn in impls.items():
            try:
                value = fn()
            except Exception as e:
                self.error(where, name, e)
                continue
            ok, err = agrees(case["job"], value, expected)
            checks[name] = {"ok": ok, "max_rel_err": err}
            if not ok:
                got, want = np.asarray(value).ravel()[:4], np.asarray(expected).ravel()[:4]
                self.error(where, name, AssertionError(f"result {got} disagrees with numpy's {want} (relative error {err:.2e})"))
            working[name] = fn
        raw: Raw = {}
        if working:
            try:
                _, raw = _timing.interleaved(
                    working, warmup=self.config.warmup - 1, repeats=self.config.repeats_for(case["size"])
                )
            except Exception as e:
                self.error(where, "timing", e)
        summaries = {name: _timing.summary(samples) for name, samples in raw.items()}
        for s in summaries.values():
            s["gbps"] = case["bytes"] / s["median"] / 1e9
        return checks, raw, summaries

    def measure(self, case: dict[str, Any], impls: Impls, ratios: list[tuple[str, str]]) -> None:
        """Check and time ``impls`` for one case, and add it to the results with the ``a/b`` ratios round by round."""
        case["checks"], raw, case["timings"] = self._check_and_time(case, impls, self.where(case))
        case["ratios"] = {f"{a}/{b}": r for a, b in ratios if (r := _timing.ratios(raw, a, b)) is not None}
        self.results["cases"].append(case)
        self._cases[(case["layout"], case["job"], case["size"], case["input"])] = case
        self._log(self.where(case), case["timings"], case["ratios"])

    def measure_peers(self, case: dict[str, Any], anchor: str, impls: Impls) -> None:
        """A second pass over a measured case: peers interleaved with ``anchor`` only; ratios ``peer/anchor`` of this pass.

        The anchor's figures of this pass go to ``case["peer_pass"]``; the case's own stay.
        """
        if len(impls) < 2:
            return
        checks, raw, summaries = self._check_and_time(case, impls, f"{self.where(case)} (peers)")
        case["checks"].update({k: v for k, v in checks.items() if k != anchor})
        case["timings"].update({k: v for k, v in summaries.items() if k != anchor})
        if anchor in summaries:
            case["peer_pass"] = {"anchor": anchor, "timing": summaries[anchor]}
        ratios = {f"{name}/{anchor}": r for name in impls if name != anchor and (r := _timing.ratios(raw, name, anchor))}
        case["ratios"].update(ratios)
        if summaries:
            self._log(f"{self.where(case)} peers", summaries, ratios)

    def _log(self, where: str, timings: dict[str, Any], ratios: dict[str, Any]) -> None:
        parts = [f"{n} {s['median'] * 1e3:.3g} ms" for n, s in timings.items()]
        self.log(f"{where}: " + ", ".join(parts + [f"{k} ×{v['median']:.2f}" for k, v in ratios.items()]))
