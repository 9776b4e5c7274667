"""The benchmarks (``python -m benchmarks NAME ...``): their quick modes run end to end, so the scripts never rot."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # benchmarks/ is a folder of the repository, not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks import _runner, _targets, _timing  # noqa: E402 - importable only once the repository root is on the path


def _bench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m benchmarks ARGS``, each import it makes listed on its stderr (``-X importtime``)."""
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "benchmarks", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def _loaded_tensorflow(proc: subprocess.CompletedProcess[str]) -> bool:
    """Whether the run of :func:`_bench` imported TensorFlow (a run that needs none answers in a fraction of a second;
    TensorFlow's import takes seconds)."""
    return any(
        line.startswith("import time:") and line.rpartition("|")[2].strip() == "tensorflow" for line in proc.stderr.splitlines()
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


QUICK = ("groups", "selection", "keyed", "quantiles", "joins", "outputs", "sort", "queries", "csv")
"""The benchmarks whose ``--quick`` smoke runs are checked below, run one after the other in one process."""

_QUICK_RUNS = """
import contextlib, io, json, sys
import tfmapreduce as tmr
from benchmarks._runner import main
made, shared = tmr.LocalCluster, tmr.LocalCluster(workers=2)
def cluster(*args, **kwargs):  # a benchmark's LocalCluster(workers=2): the one started here; any other: its own
    return contextlib.nullcontext(shared) if (args, kwargs) in (((), {"workers": 2}), ((2,), {})) else made(*args, **kwargs)
tmr.LocalCluster = cluster
runs = {}
for name in sys.argv[2:]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([name, "--quick"])
    runs[name] = {"stdout": out.getvalue(), "error": err.getvalue() if status else ""}
shared.close()
with open(sys.argv[1], "w") as f:
    json.dump(runs, f)
"""


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Each of :data:`QUICK` run by the runner as ``python -m benchmarks NAME --quick`` runs it, all in one child
    process, TensorFlow imported once for all (30 s less of the suite than a process each) and every benchmark's
    ``LocalCluster(workers=2)`` the one cluster the process started (a start each cost about 75% of their time; the
    benchmarks still run and check every row): its stdout and, where it failed, its stderr with the traceback
    (``error``)."""
    path = tmp_path_factory.mktemp("quick") / "runs.json"
    proc = subprocess.run(
        [sys.executable, "-c", _QUICK_RUNS, str(path), *QUICK],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    runs: dict[str, dict[str, str]] = json.loads(path.read_text())
    return runs


def _stdout(quick: dict[str, dict[str, str]], name: str) -> str:
    """What ``python -m benchmarks NAME --quick`` printed; the test fails with its traceback where it raised."""
    assert not quick[name]["error"], f"benchmarks {name} --quick failed:\n{quick[name]['error']}"
    return quick[name]["stdout"]


def test_help_explains_layouts_jobs_and_sizes_without_importing_tensorflow() -> None:
    proc = _bench("--help", timeout=60)
    assert proc.returncode == 0, proc.stderr
    for word in ("2w-uneven", "2w-2cpu", "sweep", "resident", "shipped", "kmeans", "5e7", "hand-written", "--quick", "--out"):
        assert word in proc.stdout
    for name in (*QUICK, "layouts", "resident", "shipping", "autosize", "machines", "trace"):
        assert f"\n  {name} " in proc.stdout  # every benchmark listed
    assert not _loaded_tensorflow(proc)  # --help answers before TensorFlow loads


@pytest.mark.parametrize(
    ("args", "message"), [(("--layouts", "4w"), "unknown layout 4w"), (("--sizes", "lots"), "sizes must be numbers")]
)
def test_bad_arguments_name_what_is_accepted(args: tuple[str, ...], message: str) -> None:
    proc = _bench(*args, timeout=60)
    assert proc.returncode == 2
    assert message in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nosuch", "--quick"], "unknown benchmark nosuch"),
        (["keyed", "--peers", "ray"], "unknown peer ray; choose from dask-bag, duckdb, pandas, polars, spark"),
        (["keyed", "--layouts", "1w"], "unrecognized arguments: --layouts 1w"),
        (["layouts", "machines"], "layouts and machines both take --jobs, differently"),
        (["resident", "client_master"], "client_master runs only by itself"),
    ],
)
def test_the_runner_refuses_what_it_cannot_run(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        _runner.main(args)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_the_runner_gives_each_benchmark_its_sizes_peers_and_flags() -> None:
    benchmarks = _runner.registered()
    keyed, groups = benchmarks["keyed"], benchmarks["groups"]
    args = _runner.parser([keyed, groups], benchmarks).parse_args(["--quick", "--rows", "3e4", "--peers", "polars,spark"])
    mine = _runner.arguments(keyed, args)
    assert (mine.quick, mine.rows, mine.tokens, mine.repeats, mine.only) == (True, 3e4, 2e5, 1, None)
    assert mine.peers == {"polars", "spark"}
    assert _runner.arguments(groups, args).hot is True
    full = _runner.arguments(keyed, _runner.parser([keyed], benchmarks).parse_args([]))
    assert (full.tokens, full.repeats, full.peers) == (16e6, 3, set(keyed.peers))


def test_replot_draws_the_layouts_figures_from_a_saved_run_at_the_page_width(tmp_path: Path) -> None:
    """``--replot results.json`` runs nothing and draws docs/layouts.md's four figures, each about as wide as the
    page shows it (so their fonts keep their size)."""
    pytest.importorskip("matplotlib")

    def timing(ms: float) -> dict[str, float]:
        return {"median": ms / 1e3, "min": ms / 1e3 * 0.9, "max": ms / 1e3 * 1.2, "n": 5, "gbps": 1.0}

    ratio = {"median": 1.05, "min": 0.9, "max": 1.3, "n": 5}
    cases: list[dict[str, Any]] = []
    for size in (100, 10**6, 10**7):
        for input_ in ("shipped", "resident"):
            base = {"size": size, "input": input_}
            cases.append({**base, "layout": "local", "job": "mean", "timings": {"numpy": timing(0.1)}, "ratios": {}})
            for layout in ("1w", "2w-even", "2w-2cpu"):
                for job in ("mean", "variance", "kmeans"):
                    timings = {"tmr": timing(3), "tmr-job": timing(3), "hand": timing(3)}
                    cases.append(
                        {
                            **base,
                            "layout": layout,
                            "job": job,
                            "timings": timings,
                            "ratios": {"tmr/hand": ratio, "tmr-job/hand": ratio},
                        }
                    )
            sweep = {f"tmr@{n}": timing(3 + n / 8) for n in (2, 8, 32, 64)}
            cases.append({**base, "layout": "sweep", "job": "mean", "timings": sweep, "ratios": {}})
    layouts = ["local", "1w", "2w-even", "2w-2cpu", "sweep"]
    config = {"layouts": layouts, "inputs": ["shipped", "resident"], "sweep_shards": [2, 8, 32, 64], "sweep_cpu_devices": 2}
    saved = tmp_path / "results.json"
    saved.write_text(json.dumps({"meta": {"config": config}, "notes": [], "cases": cases}))
    proc = _bench("--replot", str(saved), "--plots", str(tmp_path / "img"), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("layouts.png", "resident.png", "overhead.png", "sweep.png"):
        header = (tmp_path / "img" / name).read_bytes()[:24]
        width = int.from_bytes(header[16:20], "big")  # the PNG's IHDR: width, then height
        assert 600 <= width <= 720, (name, width)  # docs/layouts.md shows a figure about 690 px wide
    assert not _loaded_tensorflow(proc)  # redrawing does not load TensorFlow


@pytest.mark.slow
def test_quick_mode_measures_every_layout_and_writes_json_and_markdown(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = _bench("--quick", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert "LocalCluster(2) ready" in proc.stdout  # the targets table is printed

    results = json.loads((out / "results.json").read_text())
    assert results["meta"]["mode"] == "quick"
    assert results["errors"] == []
    cases = results["cases"]
    assert {c["layout"] for c in cases} == {"local", "2w-even", "2w-uneven", "sweep"}
    assert {c["size"] for c in cases} == {100, 100_000}
    for case in cases:
        assert case["timings"], case
        for timing in case["timings"].values():
            assert len(timing["raw"]) == timing["n"] >= 3
            assert timing["min"] <= timing["median"] <= timing["max"]
        assert all(check["ok"] for check in case["checks"].values()), case["checks"]

    cluster_cases = [c for c in cases if c["layout"] in ("2w-even", "2w-uneven")]
    assert {c["input"] for c in cluster_cases} == {"shipped", "resident"}
    for case in cluster_cases:
        assert {"tmr", "hand"} <= set(case["timings"])
        assert "tmr/hand" in case["ratios"]
    uneven = next(c for c in cases if c["layout"] == "2w-uneven")
    assert uneven["shard_rows"][1] == 3 * uneven["shard_rows"][0]
    sweep = next(c for c in cases if c["layout"] == "sweep")
    assert {"tmr@2", "tmr@8", "hand@2", "hand@8"} <= set(sweep["timings"])

    for cluster in results["clusters"]:  # no worker outlives its cluster
        assert cluster["leftover_pids"] == []
        assert not any(_alive(pid) for pid in cluster["pids"])

    markdown = (out / "results.md").read_text()
    _assert_every_target_of_the_file_is_reported(results, markdown, proc.stdout)
    for heading in ("## Targets", "## Layouts at a glance", "## mean", "## variance", "## Shard-count sweep"):
        assert heading in markdown
    assert str(ROOT) not in markdown  # no path of the machine in the report


def test_interleaved_timing_keeps_every_round_and_pairs_ratios() -> None:
    calls: list[str] = []
    impls = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    values, raw = _timing.interleaved(impls, warmup=1, repeats=4)
    assert set(values) == {"a", "b"}
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b", "b", "a"]  # warm-up, then rotating rounds
    assert all(len(v) == 4 for v in raw.values())
    ratio = _timing.ratios({"a": [2.0, 4.0, 9.0], "b": [1.0, 1.0, 3.0]}, "a", "b")
    assert ratio is not None
    assert (ratio["median"], ratio["min"], ratio["max"]) == (3.0, 2.0, 4.0)
    assert _timing.ratios(raw, "a", "missing") is None


def _case(layout: str, job: str, size: int, input_: str, timings: dict[str, float], ratios: dict[str, float]) -> dict[str, Any]:
    return {
        "layout": layout,
        "job": job,
        "size": size,
        "input": input_,
        "bytes": size * 4,
        "shards": 2,
        "timings": {k: {**_timing.summary([v, v]), "gbps": size * 4 / v / 1e9} for k, v in timings.items()},
        "ratios": {k: _timing.summary([v]) for k, v in ratios.items()},
    }


def _assert_every_target_of_the_file_is_reported(results: dict[str, Any], markdown: str, stdout: str) -> None:
    """Each entry of benchmarks/targets.json, one row per combination of its listed keys, with its goal, in order."""
    entries = json.loads((ROOT / "benchmarks" / "targets.json").read_text())["targets"]
    expected = []
    for entry in entries:
        combinations = 1
        for key in ("layout", "job", "size", "input"):
            combinations *= len(entry[key]) if isinstance(entry.get(key), list) else 1
        bound = entry.get("at_most", entry.get("at_least"))
        expected += [(entry["metric"].split("{")[0], "≤" if "at_most" in entry else "≥", bound)] * combinations
    rows = results["targets"]
    assert len(rows) == len(expected)
    for row, (prefix, op, bound) in zip(rows, expected, strict=True):
        assert row["metric"].startswith(prefix)
        assert row["target"].startswith(f"{op} {bound:g}")
        assert row["status"] in ("met", "missed", "not measured")
        assert f"| {row['metric']} | {row['target']} |" in markdown
        assert row["metric"] in stdout


def _rows(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["metric"]: row for row in _targets.evaluate(results)}


def test_targets_are_computed_from_the_run() -> None:
    big = 50_000_000
    results = {
        "meta": {
            "config": {
                "sizes": [100, big],
                "layouts": ["local", "2w-even", "sweep"],
                "sweep_shards": [2, 8, 32, 64],
                "sweep_cpu_devices": 2,
            }
        },
        "cases": [
            _case("2w-even", "mean", 100, "resident", {"tmr": 0.002, "hand": 0.0019}, {"tmr/hand": 1.05}),
            _case("2w-even", "mean", big, "resident", {"tmr": 0.010, "hand": 0.010}, {"tmr/hand": 1.0}),
            _case("2w-even", "variance", big, "resident", {"tmr": 0.100, "hand": 0.05}, {"tmr/hand": 2.0}),
            _case("local", "variance", big, "resident", {"numpy": 0.08}, {}),
            _case("sweep", "mean", 100, "resident", {"tmr@2": 0.002, "tmr@64": 0.003}, {"tmr@64/tmr@2": 1.5}),
        ],
        "startup": {**_timing.summary([6.0]), "source": "test", "first_job": None},
    }
    rows = _rows(results)
    latency = rows["tmr.mean, 100 elements, resident, 2 workers: median latency"]
    assert (latency["status"], latency["target"]) == ("met", "≤ 3.5 ms")
    assert "hand-written TF 1.9 ms" in latency["detail"]
    assert rows["overhead tmr.mean / hand-written TF, 1e2, resident, 2 workers"]["status"] == "met"
    assert rows["overhead tmr.variance / hand-written TF, 5e7, resident, 2 workers"]["status"] == "missed"
    shipped = rows["overhead tmr.mean / hand-written TF, 1e2, shipped, 2 workers"]
    assert (shipped["status"], shipped["detail"]) == ("not measured", "not in this run")
    assert rows["tmr.mean over 5e7 float32, resident, 2 workers: throughput"]["measured"] == pytest.approx(20.0)
    variance = rows["tmr.variance over 5e7 float32, resident, 2 workers: throughput"]
    assert variance["status"] == "missed"
    assert "numpy np.var in one process 2.5 GB/s" in variance["detail"]
    assert rows["tmr.mean latency, 64 shards / 2 shards, 1e2, 2 workers × 2 CPUs"]["measured"] == pytest.approx(1.5)
    assert rows["tmr.mean latency, 64 shards / 2 shards, 5e7, 2 workers × 2 CPUs"]["detail"] == "not in this run"
    assert rows["LocalCluster(2) ready (constructor returns)"]["status"] == "missed"
    assert "| metric | target | measured | status | detail |" in _targets.markdown(list(rows.values()))

    results["meta"]["config"]["sizes"] = [100]
    big_row = _rows(results)["overhead tmr.mean / hand-written TF, 5e7, shipped, 2 workers"]
    assert (big_row["status"], big_row["detail"]) == ("not measured", "not in this run (its sizes: 1e2)")


def test_the_report_reads_its_targets_from_the_targets_file(tmp_path: Path) -> None:
    path = tmp_path / "targets.json"
    target = {"metric": "tmr.mean {size} {input}", "layout": "2w-even", "job": "mean", "size": 100, "timing": "tmr"}
    target |= {"input": ["resident", "shipped"], "unit": "ms", "at_least": 2.5}
    path.write_text(json.dumps({"targets": [target, {"metric": "start", "startup": "ready", "unit": "s", "at_most": 9}]}))
    results = {
        "meta": {"config": {"sizes": [100], "layouts": ["2w-even"]}},
        "cases": [_case("2w-even", "mean", 100, "resident", {"tmr": 0.003}, {})],
        "startup": {**_timing.summary([6.0]), "source": "test", "first_job": None},
    }
    rows = _targets.evaluate(results, _targets.load(path))
    assert [(r["metric"], r["target"], r["status"]) for r in rows] == [
        ("tmr.mean 1e2 resident", "≥ 2.5 ms", "met"),
        ("tmr.mean 1e2 shipped", "≥ 2.5 ms", "not measured"),
        ("start", "≤ 9 s", "met"),
    ]
    path.write_text(json.dumps({"targets": [{"metric": "no goal", "startup": "ready", "unit": "s"}]}))
    with pytest.raises(ValueError, match=r"'no goal'.* needs exactly one goal: at_most or at_least"):
        _targets.load(path)
    path.write_text(json.dumps({"targets": [{"metric": "no case", "timing": "tmr", "layout": "1w", "unit": "ms", "at_most": 1}]}))
    with pytest.raises(ValueError, match="needs the keys of its case: job, size, input missing"):
        _targets.load(path)


def test_resident_benchmark_help_prints_help_instead_of_running() -> None:
    proc = _bench("resident", "--help", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m benchmarks resident [flags]")
    assert "Resident vs shipped" in proc.stdout
    assert "--elements ELEMENTS float32 elements of the mean; default 5e7, --quick 1e5" in " ".join(proc.stdout.split())
    assert "centroid difference" not in proc.stdout  # nothing was measured
    assert not _loaded_tensorflow(proc)  # no TensorFlow, no cluster


@pytest.mark.slow
def test_groups_benchmark_quick_mode_checks_and_times_every_row(quick: dict[str, dict[str, str]]) -> None:
    stdout = _stdout(quick, "groups")
    for row in (
        "tmr.median_by_key, resident, 2-worker LocalCluster, 1e+03 keys",
        "tmr.top_k_by_key(k=3), resident, 2-worker LocalCluster, 1e+05 keys",
    ):
        assert f"| {row} |" in stdout
    assert "| 90% of the rows on one key |" in stdout  # the hot-key run and its peak memory


@pytest.mark.slow
def test_selection_benchmark_quick_mode_checks_and_times_every_row(quick: dict[str, dict[str, str]]) -> None:
    stdout = _stdout(quick, "selection")
    for row in (
        "tmr.top_k(x, 100), resident, 2-worker LocalCluster, 1e+04 int64, 1e+03 distinct",
        "tmr.unique(x), resident, 2-worker LocalCluster, 1e+04 int64, 1e+03 distinct",
        "numpy argpartition + sort of the 100, one process, 1e+04 int64, 1e+03 distinct",
        "np.unique(x), one process, 1e+04 int64, 1e+03 distinct",
    ):
        assert f"| {row} |" in stdout


@pytest.mark.slow
def test_keyed_benchmark_quick_mode_checks_and_times_every_row(quick: dict[str, dict[str, str]]) -> None:
    stdout = _stdout(quick, "keyed")
    for row in (
        "tmr.recipes.word_count(tmr.read_text(...)), 2-worker LocalCluster (files read on the workers)",
        "user-written word count: tf.strings.split map + combiners.sum over tmr.read_text(...), 2-worker LocalCluster",
        "collections.Counter, one process (reads the files)",
        "tmr.mean_by_key, resident, 2-worker LocalCluster, 1e+06 keys",
    ):
        assert f"| {row} |" in stdout


@pytest.mark.slow
def test_quantiles_benchmark_quick_mode_checks_and_times_every_row(quick: dict[str, dict[str, str]]) -> None:
    stdout = _stdout(quick, "quantiles")
    for row in (
        "tmr.median, exact, resident, 2-worker LocalCluster",
        "tmr.quantile(q=0.01, 0.5, 0.99), epsilon=0.001, resident, 2-worker LocalCluster",
        "np.quantile(q=0.01, 0.5, 0.99), one process",
    ):
        assert f"| {row} |" in stdout


@pytest.mark.slow
def test_joins_benchmark_quick_mode_checks_and_times_every_row(quick: dict[str, dict[str, str]]) -> None:
    stdout = _stdout(quick, "joins")
    for row in (
        "tmr.join strategy=hash, 2-worker LocalCluster, with a dimension table",
        "tmr.join strategy=broadcast, 2-worker LocalCluster, many-to-many",
        "tmr.recipes.pagerank, 2-worker LocalCluster (sort of the edges included)",
        "tmr.recipes.pagerank over resident edges (numbered and sorted on the workers, included)",
    ):
        assert f"| {row} |" in stdout


def test_machines_benchmark_reports_fits_and_plots_a_saved_run_without_starting_machines(tmp_path: Path) -> None:
    """``--from`` runs nothing (its quick mode starts a rack: about a minute, too slow for here)."""
    pytest.importorskip("matplotlib")
    pytest.importorskip("scipy")
    runs = []
    for k in (2, 4, 8):
        for rate in (1e9, 1e10):
            busiest = 12e6 / k * (k - 1) / k  # 12 bytes a row leave for the other machines
            wall = 2e-6 * 1e6 / k + busiest * 8 / rate + 0.1
            run = {"job": "sort", "machines": k, "rate_bps": rate, "rows": 10**6, "wall": wall, "wall_min": wall}
            run.update(wall_max=wall, bytes_per_machine=2 * busiest, busiest=busiest, wire=busiest * 8 / rate / wall)
            runs.append(run)
    saved, png = tmp_path / "machines.json", tmp_path / "machines.png"
    saved.write_text(json.dumps({"meta": {"cores": 8}, "runs": runs}))  # a core per machine: rows per machine = rows / k
    proc = _bench("machines", "--from", str(saved), "--plot", str(png), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| sort | 1e+06 | 8 | 1 Gbit/s | 0.36 [0.36–0.36] | 2.6 | 1.3 | 3% |" in proc.stdout, proc.stdout
    model = next(line for line in proc.stdout.splitlines() if line.startswith("| sort | 2 |"))
    assert model.startswith("| sort | 2 | 1.00 | 0.100 | 0.0 | 12.0 | 1.00 | 0% |"), model  # the synthetic constants, recovered
    assert png.stat().st_size > 10_000


@pytest.mark.slow
def test_outputs_benchmark_quick_mode_checks_and_times_every_row(quick: dict[str, dict[str, str]]) -> None:
    stdout = _stdout(quick, "outputs")
    for row in (
        "tmr.map(read_csv) → tmr.write_npy, 2-worker LocalCluster",
        "tmr.write_npy, resident, 2-worker LocalCluster",
        "tmr.write_tfrecord, resident, 2-worker LocalCluster",
    ):
        assert f"| {row} |" in stdout


def test_queries_benchmark_quick_mode_checks_and_times_every_row(quick: dict[str, dict[str, str]]) -> None:
    stdout = _stdout(quick, "queries")
    assert "eager table, one run a step: 3 runs" in stdout
    assert (
        "lazy plan, fused: 1 run, compiled [False]" in stdout
    )  # the filters in the group-by's run; a new literal compiles nothing
    for row in ("eager table, one run a step, 2-worker LocalCluster", "lazy plan, fused, 2-worker LocalCluster"):
        assert f"| {row} |" in stdout


@pytest.mark.slow
def test_sort_benchmark_quick_mode_checks_and_times_every_row(quick: dict[str, dict[str, str]]) -> None:
    stdout = _stdout(quick, "sort")
    for row in (
        "tmr.sort, resident, 2-worker LocalCluster, int64",
        "tmr.sort, resident, 2-worker LocalCluster, float32",
        "TeraSort: tmr.sort_by_key, generated on the workers, 2-worker LocalCluster",
    ):
        assert f"| {row} |" in stdout
    assert "GB/s per core" in stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "row"),
    [
        ("tables", "tfmapreduce group_by.agg, one keyed run, 2-worker LocalCluster"),
        ("tpch", "tfmapreduce tables: filter, with_columns, group_by.agg; 2-worker LocalCluster"),
    ],
)
def test_table_benchmarks_quick_mode_check_and_time_our_row(name: str, row: str) -> None:
    proc = _bench(name, "--quick")
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert f"| {row} |" in proc.stdout
    if name == "tables":  # a second identical group-by traces nothing
        assert "an identical second" in proc.stdout
        assert proc.stdout.split("an identical second", 1)[1].split("\n", 1)[0].endswith("(0)")


def test_csv_benchmark_quick_mode_checks_and_times_every_reader(quick: dict[str, dict[str, str]]) -> None:
    stdout = _stdout(quick, "csv")
    for reader in ("tmr.scan_csv (2 workers)", "pandas.read_csv", "pyarrow.csv.read_csv"):
        assert reader in stdout
    assert ("polars.read_csv" in stdout) == (importlib.util.find_spec("polars") is not None)
