"""The 22 TPC-H queries timed side by side: tfmapreduce's lazy tables (the 8 tables scanned once into client-held
tables, then warm: the programs compiled by a first, checked call), DuckDB (the SQL over tables loaded in memory),
polars (the same SQL text through ``polars.SQLContext``, lazy, over frames read in memory, decimals as float64) and,
with ``--spark``, Spark local[2] SQL over cached views (decimals as float64 too); 2 threads each (2 tfmapreduce workers). Every answer is checked
against DuckDB's before it is timed; a peer whose SQL support fails a query, or answers it differently, is marked so.
"""

from __future__ import annotations

import math
import os
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import tfmapreduce as tmr

from . import _tpch_data
from ._timing import repeat
from ._tpch_queries2 import QUERIES
from ._tpch_sql import SQL, TABLES


def _median(fn: Callable[[], Any], repeats: int) -> float:
    """The median seconds of ``repeats`` calls (each query was run once already, to check its answer)."""
    return statistics.median(repeat(fn, repeats, warmup=0)[0])


def _peer(name: str, answer: Callable[[int], Any], want: Any, number: int, repeats: int) -> float | str:
    """The median seconds of ``answer(number)`` once it equals DuckDB's ``want``; else why not (a short note)."""
    try:
        _tpch_data.check(answer(number), want, f"{name} Q{number}")
    except AssertionError as e:
        print(f"  {name} Q{number}: differs: {str(e)[:200]}", flush=True)
        return "differs"
    except Exception as e:  # a peer's SQL that does not run is a result, reported as such
        print(f"  {name} Q{number}: fails: {type(e).__name__}: {str(e)[:200]}", flush=True)
        return "unsupported"
    return _median(lambda: answer(number), repeats)


def _polars(folder: str) -> Callable[[int], Any]:
    os.environ.setdefault("POLARS_MAX_THREADS", "2")  # read when polars is first imported
    import polars as pl

    frames = {}
    for n in TABLES:
        frame = pl.read_parquet(os.path.join(folder, f"{n}.parquet"))
        decimals = [c for c, t in frame.schema.items() if isinstance(t, pl.Decimal)]
        frames[n] = frame.with_columns(pl.col(decimals).cast(pl.Float64)).lazy()
    context = pl.SQLContext(frames=frames)
    return lambda number: context.execute(SQL[number], eager=False).collect().to_pandas()


def _spark(session: Any, folder: str) -> Callable[[int], Any]:
    from pyspark.sql.types import DecimalType

    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")  # its note on pandas 3, each toPandas

    for n in TABLES:
        frame = session.read.parquet(os.path.join(folder, f"{n}.parquet"))
        decimals = {f.name: frame[f.name].cast("double") for f in frame.schema.fields if isinstance(f.dataType, DecimalType)}
        frame = frame.withColumns(decimals).cache()  # decimals as float64, as polars': Spark rounds a decimal mean to 6 places
        frame.count()
        frame.createOrReplaceTempView(n)
    return lambda number: session.sql(SQL[number]).toPandas()


def measure(
    folder: str, queries: Sequence[int], repeats: int, polars: bool, spark: Any, files: bool = False
) -> list[dict[str, Any]]:
    """Each query's row: its number, tfmapreduce's seconds, runs and compiles (of the last timed call), and each
    engine's seconds (or why not); ``files``: tfmapreduce's lazy tables read the Parquet files in each query (its
    scans timed with it, its filters skipping row groups) instead of the tables scanned once."""
    import duckdb

    duck = duckdb.connect()
    duck.execute("SET threads TO 2")
    for n in TABLES:
        path = os.path.join(folder, f"{n}.parquet").replace("'", "''")
        duck.execute(f"CREATE TABLE {n} AS SELECT * FROM read_parquet('{path}')")
    rows: list[dict[str, Any]] = []
    with tmr.LocalCluster(workers=2) as cluster:
        started = time.perf_counter()
        if files:
            tables = _tpch_data.files(folder)
        else:
            tables = _tpch_data.tables(_tpch_data.scan(folder, cluster=cluster, timeout=1800))
            print(f"tpch: the 8 tables scanned into tables in {time.perf_counter() - started:.1f} s", flush=True)
        run = {"cluster": cluster, "timeout": 1800}
        for number in queries:
            want = duck.execute(SQL[number]).df()
            _tpch_data.check(QUERIES[number](tables, run).to_pandas(**run), want, f"tfmapreduce Q{number}")
            seen: list[Any] = []

            def ours(number: int = number, seen: list[Any] = seen) -> Any:
                with tmr.stats() as stats:
                    out = QUERIES[number](tables, run).to_pandas(**run)
                seen[:] = list(stats.runs)
                return out

            row = {"query": number, "tfmapreduce": _median(ours, repeats)}
            row |= {"runs": len(seen), "compiled": sum(bool(r.compiled) for r in seen)}
            row["DuckDB"] = _median(lambda number=number: duck.execute(SQL[number]).df(), repeats)
            rows.append(row)
            print(
                f"  Q{number}: tfmapreduce {row['tfmapreduce']:.2f} s in {row['runs']} runs, DuckDB {row['DuckDB']:.3f} s",
                flush=True,
            )
        tables.clear()  # the client's copy freed before the peers load theirs
    answer_polars = _polars(folder) if polars else None
    answer_spark = None
    try:
        answer_spark = _spark(spark, folder) if spark is not None else None
    except Exception as e:  # Spark out of memory while caching: the other engines' table still stands
        print(f"  Spark: the tables could not be loaded: {type(e).__name__}: {str(e)[:300]}", flush=True)
    for row in rows:
        want = duck.execute(SQL[row["query"]]).df()
        if answer_polars is not None:
            row["polars"] = _peer("polars", answer_polars, want, row["query"], repeats)
        if answer_spark is not None:
            row["Spark"] = _peer("Spark", answer_spark, want, row["query"], repeats)
    duck.close()
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    """The Markdown table: per query each engine's seconds, tfmapreduce's runs and compiles, the ratio to DuckDB; then
    the sums and the geometric mean of the ratios (over the queries every engine of the column answered)."""
    engines = [e for e in ("tfmapreduce", "DuckDB", "polars", "Spark") if e in rows[0]]
    lines = ["| query | " + " | ".join(f"{e} s" for e in engines) + " | runs (compiled) | tfmapreduce / DuckDB |"]
    lines.append("|---" * (len(engines) + 3) + "|")
    for row in rows:
        cells = [f"{row[e]:.3f}" if isinstance(row[e], float) else row[e] for e in engines]
        ratio = row["tfmapreduce"] / row["DuckDB"]
        lines.append(f"| Q{row['query']} | " + " | ".join(cells) + f" | {row['runs']} ({row['compiled']}) | {ratio:.1f}× |")
    sums = [sum(r[e] for r in rows if isinstance(r[e], float)) for e in engines]
    runs = sum(r["runs"] for r in rows)
    lines.append("| sum | " + " | ".join(f"{s:.2f}" for s in sums) + f" | {runs} | {sums[0] / sums[1]:.1f}× |")
    geo = math.exp(statistics.mean(math.log(r["tfmapreduce"] / r["DuckDB"]) for r in rows))
    lines.append(f"\ngeometric mean of tfmapreduce / DuckDB: {geo:.1f}× over {len(rows)} queries")
    for e in engines[2:]:
        missing = [f"Q{r['query']} ({r[e]})" for r in rows if not isinstance(r[e], float)]
        if missing:
            lines.append(f"{e} does not answer: {', '.join(missing)}")
    return "\n".join(lines)
