"""TPC-H: the 22 queries on lazy tables vs DuckDB, polars' SQL and (``--spark``) Spark SQL; and Q1 on eager tables.

``python -m benchmarks tpch --scale 1`` generates the 8 tables with ``tpchgen-cli`` into a temporary folder (or reads
``--data FOLDER``), then times the 22 queries (``--queries 1,6,14`` some of them) by each engine, 2 threads each,
every answer checked against DuckDB's (``_tpch_suite.py``), and prints per query the seconds, tfmapreduce's runs and
compiles, the ratio to DuckDB and the geometric mean.

Q1 on eager tables: ``python -m benchmarks tpch --lineitem lineitem.parquet`` (a file from ``tpchgen-cli parquet -s
1 --tables=lineitem``), or with ``--quick`` a lineitem-like table of ``--rows`` random rows, as below.

Every peer gets the data already in memory — pandas a DataFrame (decimals as float64, strings as ``str``, dates
as ``datetime64``), polars the same frame converted once, DuckDB a table made from it once, tfmapreduce a
``tmr.table`` of it — and times only the query:

    SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice),
           sum(l_extendedprice * (1 - l_discount)), sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)),
           avg(l_quantity), avg(l_extendedprice), avg(l_discount), count(*)
    FROM lineitem WHERE l_shipdate <= date '1998-09-02' GROUP BY l_returnflag, l_linestatus ORDER BY 1, 2

tfmapreduce runs it as three jobs on a 2-worker LocalCluster: ``filter`` (map-only), ``with_columns`` (the two
products, map-only) and ``group_by([...]).agg(...)`` (one keyed run). Each result is checked against DuckDB's (or,
without DuckDB, pandas') before it is timed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

import tfmapreduce as tmr

from . import _peers
from ._registry import Size, benchmark, flag
from ._table import Rows

CUTOFF = "1998-09-02"
SUMS = ("sum_qty", "sum_base_price", "sum_disc_price", "sum_charge")
MEANS = ("avg_qty", "avg_price", "avg_disc")
OUT = ("l_returnflag", "l_linestatus", *SUMS, *MEANS, "count_order")

SQL = f"""
SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
       avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc, count(*) AS count_order
FROM lineitem WHERE l_shipdate <= DATE '{CUTOFF}' GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus
"""


def load(path: str) -> Any:
    """The columns Q1 reads from a lineitem Parquet file, as a pandas DataFrame (decimals as float64)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = ["l_returnflag", "l_linestatus", "l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_shipdate"]
    table = pq.read_table(path, columns=columns)
    cast = [
        table[c].cast(pa.float64()) if pa.types.is_decimal(table[c].type) else table[c].cast(pa.string())
        if c in ("l_returnflag", "l_linestatus") else table[c]
        for c in columns
    ]  # fmt: skip
    frame = pa.table(cast, names=columns).to_pandas()
    frame["l_shipdate"] = frame["l_shipdate"].astype("datetime64[s]")
    return frame


def synthetic(rows: int) -> Any:
    """A lineitem-like frame of ``rows`` random rows (the smoke run's)."""
    import pandas as pd

    rng = np.random.default_rng(1)
    return pd.DataFrame(
        {
            "l_returnflag": rng.choice(np.array(["A", "N", "R"], object), rows),
            "l_linestatus": rng.choice(np.array(["F", "O"], object), rows),
            "l_quantity": rng.integers(1, 51, rows).astype(np.float64),
            "l_extendedprice": np.round(rng.uniform(900, 105000, rows), 2),
            "l_discount": rng.integers(0, 11, rows) / 100,
            "l_tax": rng.integers(0, 9, rows) / 100,
            "l_shipdate": (np.datetime64("1992-01-02") + rng.integers(0, 2526, rows)).astype("datetime64[s]"),
        }
    )


def generated(scale: float, folder: str) -> str:
    """lineitem at ``scale`` from ``tpchgen-cli`` into ``folder``: the Parquet file's path."""
    tool = shutil.which("tpchgen-cli") or os.path.join(os.path.dirname(sys.executable), "tpchgen-cli")
    if not os.path.exists(tool):
        raise SystemExit("tpch: pass --lineitem PATH, or install tpchgen-cli (pip install tpchgen-cli) to generate it")
    subprocess.run([tool, "parquet", "-s", str(scale), "--tables=lineitem", f"--output-dir={folder}"], check=True)
    return os.path.join(folder, "lineitem.parquet")


def ours(t: tmr.Table, cluster: tmr.LocalCluster) -> Any:
    """Q1 on the workers: a filter, the two products as new columns, one group-by; a pandas frame."""
    import tensorflow as tf

    unit = t.schema["l_shipdate"].type.unit  # a timestamp column (pandas' datetime64): int64 counts of its unit
    cutoff = int(np.datetime64(CUTOFF, unit).astype(np.int64))
    shipped = t.filter(lambda rows: rows["l_shipdate"] <= tf.constant(cutoff, tf.int64), cluster=cluster, timeout=900)

    def products(rows: Any) -> dict[str, tf.Tensor]:
        disc_price = rows["l_extendedprice"] * (1 - rows["l_discount"])
        return {"disc_price": disc_price, "charge": disc_price * (1 + rows["l_tax"])}

    priced = shipped.with_columns(products, cluster=cluster, timeout=900)
    from ._tpch_queries import Q1_AGGREGATES  # here, not at the top: its tfmapreduce imports would slow --help

    result = priced.group_by(["l_returnflag", "l_linestatus"]).agg(
        **Q1_AGGREGATES,
        cluster=cluster,
        timeout=900,
    )
    return result.to_pandas()


def by_pandas(frame: Any) -> Any:
    f = frame[frame["l_shipdate"] <= np.datetime64(CUTOFF)]
    disc_price = f["l_extendedprice"] * (1 - f["l_discount"])
    f = f.assign(disc_price=disc_price, charge=disc_price * (1 + f["l_tax"]))
    g = f.groupby(["l_returnflag", "l_linestatus"], sort=True)
    return g.agg(
        sum_qty=("l_quantity", "sum"),
        sum_base_price=("l_extendedprice", "sum"),
        sum_disc_price=("disc_price", "sum"),
        sum_charge=("charge", "sum"),
        avg_qty=("l_quantity", "mean"),
        avg_price=("l_extendedprice", "mean"),
        avg_disc=("l_discount", "mean"),
        count_order=("l_quantity", "size"),
    ).reset_index()


def by_polars(frame: Any) -> Any:
    import datetime

    import polars as pl

    disc_price = pl.col("l_extendedprice") * (1 - pl.col("l_discount"))
    return (
        frame.lazy()
        .filter(pl.col("l_shipdate") <= datetime.datetime.fromisoformat(CUTOFF))
        .group_by(["l_returnflag", "l_linestatus"])
        .agg(
            pl.col("l_quantity").sum().alias("sum_qty"),
            pl.col("l_extendedprice").sum().alias("sum_base_price"),
            disc_price.sum().alias("sum_disc_price"),
            (disc_price * (1 + pl.col("l_tax"))).sum().alias("sum_charge"),
            pl.col("l_quantity").mean().alias("avg_qty"),
            pl.col("l_extendedprice").mean().alias("avg_price"),
            pl.col("l_discount").mean().alias("avg_disc"),
            pl.len().alias("count_order"),
        )
        .sort(["l_returnflag", "l_linestatus"])
        .collect()
    )


def check(got: Any, want: Any, who: str) -> None:
    """``got`` (a pandas frame) equals ``want`` column by column (floats to 1e-9 relative)."""
    for name in OUT:
        g, w = np.asarray(got[name]), np.asarray(want[name])
        if g.dtype.kind in "fi" and w.dtype.kind in "fi":
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-9, err_msg=f"{who}: {name}")
        else:
            assert [str(x) for x in g] == [str(x) for x in w], (who, name, g, w)


def measure(frame: Any, repeats: int, peers: frozenset[str]) -> Rows:
    """Time Q1 by tfmapreduce and each peer asked for, over ``frame`` (already in memory)."""
    rows = len(frame)
    table = Rows(repeats)
    reference = by_pandas(frame)
    duck = None
    if _peers.on(peers, "duckdb"):
        import duckdb

        duck = duckdb.connect()
        duck.execute("CREATE TABLE lineitem AS SELECT * FROM frame")
        reference = duck.execute(SQL).df()
    t = tmr.table(frame)
    with tmr.LocalCluster(workers=2) as cluster:
        check(ours(t, cluster), reference, "tfmapreduce")
        table.add("tfmapreduce tables: filter, with_columns, group_by.agg; 2-worker LocalCluster", lambda: ours(t, cluster), rows)
    if duck is not None:
        table.add("DuckDB (its threads)", lambda: duck.execute(SQL).df(), rows)
        duck.close()
    if _peers.on(peers, "polars"):
        import polars as pl

        pframe = pl.from_pandas(frame)
        check(by_polars(pframe).to_pandas(), reference, "polars")
        table.add("polars (lazy, its threads)", lambda: by_polars(pframe), rows)
    if _peers.on(peers, "pandas"):
        check(by_pandas(frame), reference, "pandas")
        table.add("pandas", lambda: by_pandas(frame), rows)
    return table


@benchmark(
    "tpch",
    sizes={
        "rows": Size(10_000, 0, "rows of the synthetic lineitem of --quick (0: read or generate the real one)"),
        "repeats": Size(1, 3, "timed calls per row after one warm-up (median reported)"),
    },
    peers=("duckdb", "polars", "pandas", "spark"),
    flags=(
        flag("--lineitem", metavar="PARQUET", help="lineitem as tpchgen-cli writes it (parquet); default: generate it"),
        flag("--scale", type=float, default=1.0, help="the scale factor tpchgen-cli generates (default 1)"),
        flag("--data", metavar="FOLDER", help="the 22 queries over the tables tpchgen-cli wrote into FOLDER"),
        flag("--queries", type=str, default="", help="the queries timed, e.g. 1,6,14 (default: all 22)"),
        flag("--spark", action="store_true", help="time Spark local[2] SQL too (slow to start; needs pyspark and Java)"),
        flag("--files", action="store_true", help="each query reads the Parquet files itself (lazy scans), not tables read once"),
    ),
)
def run(args: argparse.Namespace) -> None:
    """The 22 queries (or, with --quick or --lineitem, Q1 on eager tables) by each engine; print the table."""
    if not args.rows and not args.lineitem:
        return _all(args)
    if args.rows:
        frame = synthetic(int(args.rows))
    elif args.lineitem:
        frame = load(args.lineitem)
    else:
        with tempfile.TemporaryDirectory(prefix="tpch-") as folder:
            frame = load(generated(args.scale, folder))
    print(f"tpch q1: {len(frame):,} lineitem rows in memory", flush=True)
    measure(frame, args.repeats, args.peers).print("rows")


def _all(args: argparse.Namespace) -> None:
    from . import _tpch_data, _tpch_suite

    queries = [int(q) for q in args.queries.split(",") if q] or list(range(1, 23))
    with tempfile.TemporaryDirectory(prefix="tpch-") as scratch, _peers.spark(args.peers if args.spark else ()) as spark:
        folder = args.data or _tpch_data.generate(args.scale, scratch)
        print(f"tpch: {len(queries)} queries at scale {args.scale if not args.data else folder}", flush=True)
        rows = _tpch_suite.measure(folder, queries, args.repeats, _peers.on(args.peers, "polars"), spark, args.files)
    print("\n" + _tpch_suite.report(rows))


if __name__ == "__main__":
    from ._runner import main

    sys.exit(main(["tpch", *sys.argv[1:]]))
