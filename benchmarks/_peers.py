"""The peers every benchmark compares tfmapreduce with, in one place: what each needs, and how each does each job.

A benchmark declares the peers it compares with (``@benchmark(peers=...)``); ``args.peers`` holds those asked for
(none with ``--quick``), and :func:`on` says whether one of them can run here.  The peers, by name (:data:`MODULES`):

- ``pandas``, ``polars``, ``duckdb``: one process (polars and DuckDB with their own threads);
- ``spark``: Spark local[2] (:func:`spark`; needs pyspark and Java), timed warm, over cached data where it has some;
- ``scipy``: a scipy.sparse power iteration (PageRank);
- ``dask-threads``, ``dask-bag``: Dask in this process's threads, ``dask.bag`` in 2 processes;
- ``dask-distributed``, ``ray``: :class:`DaskDistributed` and :class:`Ray`, 2 worker processes or CPUs each; every
  peer of the layouts suite does the same arithmetic as the framework, chunk by chunk, with the numpy functions of
  ``_work``: per-chunk partials, then the size-weighted combine on the client;
- ``one-process``: ``np.save`` and a ``tf.io.TFRecordWriter`` loop, the writers of one process.

``collections.Counter`` (:func:`counter`) is the word count's one-process reference: always timed, never skipped.
The functions that take a ``table`` time each peer's call into it (``_table.Rows``), one peer after the other, each
one's data freed before the next is made.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import itertools
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ._table import Rows

MODULES: dict[str, tuple[str, ...]] = {
    "pandas": ("pandas",),
    "polars": ("polars",),
    "duckdb": ("duckdb", "pandas"),
    "spark": ("pyspark",),
    "scipy": ("scipy",),
    "dask-threads": ("dask", "dask.array"),
    "dask-bag": ("dask", "dask.bag"),
    "dask-distributed": ("dask", "distributed"),
    "ray": ("ray",),
    "one-process": (),
}
"""Every peer, and the modules it needs."""

PEERS = ("dask-threads", "dask-distributed", "ray")
"""The layouts suite's peers."""

_noted: set[str] = set()


def missing(peer: str) -> str | None:
    """Why ``peer`` cannot run here (a note for the report), or None when it can."""
    absent = sorted({m.split(".")[0] for m in MODULES[peer] if importlib.util.find_spec(m.split(".")[0]) is None})
    if absent:
        return f"{peer} skipped: {', '.join(absent)} not installed (pip install -e '.[bench]')"
    if peer == "spark" and shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "spark skipped: no Java (java on the PATH, or JAVA_HOME)"
    return None


def installed(module: str) -> bool:
    """Whether ``module`` imports here."""
    return importlib.util.find_spec(module.split(".")[0]) is not None


def on(peers: Collection[str], peer: str) -> bool:
    """Whether ``peer`` was asked for and can run here; where it was asked for and cannot, stderr says why, once."""
    if peer not in peers:
        return False
    why = missing(peer)
    if why is not None and why not in _noted:
        _noted.add(why)
        print(f"note: {why}", file=sys.stderr, flush=True)
    return why is None


@contextlib.contextmanager
def spark(peers: Collection[str]) -> Iterator[Any]:
    """A local[2] SparkSession where ``spark`` was asked for and can run, else None; stopped on exit."""
    if not on(peers, "spark"):
        yield None
        return
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("tfmapreduce-bench").config("spark.ui.enabled", "false")
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    session = builder.config("spark.sql.shuffle.partitions", "4").config("spark.driver.memory", "6g").getOrCreate()
    try:
        yield session
    finally:
        session.stop()


# --- word count and group-by mean (benchmarks.keyed) ------------------------------------------------------------


def counter(paths: Sequence[str]) -> collections.Counter[bytes]:
    """The word count's one-process reference: ``collections.Counter`` over each file's words."""
    counts: collections.Counter[bytes] = collections.Counter()
    for path in paths:
        with open(path, "rb") as f:
            counts.update(f.read().split())
    return counts


def word_count(
    table: Rows, paths: Sequence[str], reference: collections.Counter[bytes], peers: Collection[str], spark: Any
) -> None:
    """Word count of the files: Spark RDD ``reduceByKey`` and DataFrame ``groupBy().count()``, ``dask.bag`` frequencies."""
    tokens = sum(reference.values())
    if spark is not None:
        from operator import add

        from pyspark.sql import functions as F

        def rdd() -> Any:
            text = spark.sparkContext.textFile(",".join(paths))
            return text.flatMap(lambda line: line.split()).map(lambda w: (w, 1)).reduceByKey(add).collect()

        def df() -> Any:
            words = spark.read.text(list(paths)).select(F.explode(F.split(F.trim("value"), r"\s+")).alias("w"))
            return words.groupBy("w").count().collect()

        assert dict(rdd()) == {k.decode(): v for k, v in reference.items()}, "Spark's word count != Counter"
        table.add("Spark local[2] RDD reduceByKey (warm)", rdd, tokens)
        table.add("Spark local[2] DataFrame groupBy().count() (warm)", df, tokens)
    if on(peers, "dask-bag"):
        import dask.bag as db

        def bag() -> Any:
            words = db.read_text(list(paths), blocksize=None).str.split().flatten()
            return dict(words.frequencies().compute(scheduler="processes", num_workers=2))

        table.add("dask.bag frequencies, 2 processes", bag, tokens, table.few)


def mean_by_key(table: Rows, keys: np.ndarray, values: np.ndarray, distinct: int, peers: Collection[str], spark: Any) -> None:
    """Group-by mean: pandas ``groupby().mean()``, polars ``group_by().agg(mean)``, DuckDB ``GROUP BY`` over a table in
    its own storage, Spark ``groupBy().avg()`` over cached data of its own (the same shape)."""
    n, k = len(keys), f"{distinct:.0e} keys"
    if on(peers, "pandas"):
        import pandas as pd

        frame = pd.DataFrame({"k": keys, "v": values})
        table.add(f"pandas groupby().mean(), {k}", lambda: frame.groupby("k")["v"].mean(), n)
        del frame
    if on(peers, "polars"):
        import polars as pl

        plf = pl.DataFrame({"k": keys, "v": values})
        table.add(f"polars group_by().agg(mean), {k}", lambda: plf.group_by("k").agg(pl.col("v").mean()), n)
        del plf
    if on(peers, "duckdb"):
        import duckdb
        import pandas as pd

        con = duckdb.connect()
        con.register("t", pd.DataFrame({"k": keys, "v": values}))
        con.execute("CREATE TABLE g AS SELECT * FROM t")  # DuckDB's own storage: not a scan of the numpy arrays
        table.add(f"DuckDB GROUP BY avg, {k}", lambda: con.execute("SELECT k, avg(v) FROM g GROUP BY k").fetchnumpy(), n)
        con.close()
    if spark is not None:
        from pyspark.sql import functions as F

        cached = spark.range(n).select((F.xxhash64("id") % distinct).alias("k"), F.rand(seed=0).cast("float").alias("v")).cache()
        cached.count()
        avg = lambda: cached.groupBy("k").avg("v").collect()  # noqa: E731
        table.add(f"Spark local[2] DataFrame groupBy().avg(), cached, {k}", avg, n, table.few)
        cached.unpersist()


# --- median and top 3 per key (benchmarks.groups) ---------------------------------------------------------------


def median_and_top3(table: Rows, keys: np.ndarray, values: np.ndarray, distinct: int, peers: Collection[str], spark: Any) -> None:
    """Median and top 3 per key: pandas, polars, and Spark ``F.median`` and a ``row_number()`` window over cached data."""
    n, k = len(keys), f"{distinct:.0e} keys"
    if on(peers, "pandas"):
        import pandas as pd

        frame = pd.DataFrame({"k": keys, "v": values})
        table.add(f"pandas groupby().median(), {k}", lambda: frame.groupby("k")["v"].median(), n)
        table.add(f"pandas groupby().nlargest(3), {k}", lambda: frame.groupby("k")["v"].nlargest(3), n)
        del frame
    if on(peers, "polars"):
        import polars as pl

        plf = pl.DataFrame({"k": keys, "v": values})
        table.add(f"polars group_by().agg(median), {k}", lambda: plf.group_by("k").agg(pl.col("v").median()), n)
        table.add(f"polars group_by().agg(top_k(3)), {k}", lambda: plf.group_by("k").agg(pl.col("v").top_k(3)), n)
        del plf
    if spark is not None:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        cached = spark.range(n).select((F.xxhash64("id") % distinct).alias("k"), F.rand(seed=0).cast("float").alias("v")).cache()
        cached.count()
        median = lambda: cached.groupBy("k").agg(F.median("v")).collect()  # noqa: E731
        table.add(f"Spark local[2] DataFrame F.median, cached, {k}", median, n, table.few)
        ranked = F.row_number().over(Window.partitionBy("k").orderBy(F.desc("v")))
        top3 = lambda: cached.withColumn("r", ranked).where("r <= 3").collect()  # noqa: E731
        table.add(f"Spark local[2] DataFrame top 3 by row_number(), cached, {k}", top3, n, table.few)
        cached.unpersist()


# --- joins and PageRank (benchmarks.joins) ----------------------------------------------------------------------


def join(table: Rows, left: Any, right: Any, name: str, peers: Collection[str], spark: Any) -> None:
    """The inner join of ``left`` and ``right`` ((keys, values) each) on their keys: ``pandas.merge``, polars ``join``,
    DuckDB ``JOIN`` over pandas frames, Spark DataFrame ``join`` over cached data (counted, nothing collected)."""
    items = len(left[0]) + len(right[0])
    if on(peers, "pandas"):
        import pandas as pd

        frames = _frames(left, right)
        table.add(f"pandas.merge, {name}", lambda: pd.merge(*frames, on="key"), items)
        del frames
    if on(peers, "polars"):
        import polars as pl

        pl_left, pl_right = pl.DataFrame({"key": left[0], "a": left[1]}), pl.DataFrame({"key": right[0], "b": right[1]})
        table.add(f"polars join, {name}", lambda: pl_left.join(pl_right, on="key"), items)
        del pl_left, pl_right
    if on(peers, "duckdb"):
        import duckdb

        con, frames = duckdb.connect(), _frames(left, right)
        con.register("l", frames[0])
        con.register("r", frames[1])
        sql = "SELECT * FROM l JOIN r USING (key)"
        table.add(f"DuckDB JOIN (fetched as numpy), {name}", lambda: con.execute(sql).fetchnumpy(), items)
        con.close()
    if spark is not None:
        sl, sr = (spark.createDataFrame(f).cache() for f in _frames(left, right))
        sl.count(), sr.count()
        count = lambda: sl.join(sr, "key").count()  # noqa: E731
        table.add(f"Spark local[2] DataFrame join, cached, count(), {name}", count, items, table.few)
        sl.unpersist(), sr.unpersist()


def _frames(left: Any, right: Any) -> tuple[Any, Any]:
    """The two sides of a join as pandas frames: columns key and a, key and b."""
    import pandas as pd

    return pd.DataFrame({"key": left[0], "a": left[1]}), pd.DataFrame({"key": right[0], "b": right[1]})


def scipy_pagerank(src: np.ndarray, dst: np.ndarray, iters: int, damping: float = 0.85) -> tuple[np.ndarray, np.ndarray]:
    """PageRank by a scipy.sparse power iteration (dangling nodes' rank spread over all): the node ids and their ranks."""
    import scipy.sparse as sp

    nodes, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    n, s, d = len(nodes), inverse[: len(src)], inverse[len(src) :]
    out = np.bincount(s, minlength=n).astype(np.float64)
    share = np.divide(1.0, out, out=np.zeros(n), where=out > 0)
    matrix = sp.csr_matrix((share[s], (d, s)), shape=(n, n))
    rank, dangling = np.full(n, 1.0 / n), out == 0
    for _ in range(iters):
        rank = (1 - damping) / n + damping * (matrix @ rank + rank[dangling].sum() / n)
    return nodes, rank


def _spark_pagerank(spark: Any, src: np.ndarray, dst: np.ndarray, iters: int) -> None:
    """Spark's examples/src/main/python/pagerank.py over the same edges (its own definition: no dangling redistribution)."""
    sc = spark.sparkContext
    links = sc.parallelize(list(zip(src.tolist(), dst.tolist(), strict=True)), 4).distinct().groupByKey().cache()
    ranks = links.map(lambda u: (u[0], 1.0))
    for _ in range(iters):
        contribs = links.join(ranks).flatMap(lambda u: [(v, u[1][1] / len(u[1][0])) for v in u[1][0]])
        ranks = contribs.reduceByKey(lambda a, b: a + b).mapValues(lambda r: r * 0.85 + 0.15)
    ranks.count()


def pagerank(table: Rows, src: np.ndarray, dst: np.ndarray, iters: int, peers: Collection[str], spark: Any) -> None:
    """PageRank over the edges: :func:`scipy_pagerank` (the CSR matrix built inside the timing), and Spark's example
    (one call: minutes at 1e7 edges) where ``spark`` is a session."""
    if on(peers, "scipy"):
        scipy = lambda: scipy_pagerank(src, dst, iters)  # noqa: E731
        table.add("scipy.sparse power iteration, one process (CSR built included)", scipy, len(src))
    if spark is not None:
        table.add("Spark local[2] RDD PageRank (Spark's example)", lambda: _spark_pagerank(spark, src, dst, iters), len(src), 1)


# --- the Scan and the writers (benchmarks.outputs) --------------------------------------------------------------


def pandas_scan(paths: Sequence[str], out: str) -> None:
    """The Scan in pandas: ``read_csv`` of columns c0-c2, the rows where c0 > 0.5, their c1 and c2 saved to ``out``
    (``.npy``); also the Scan's reference."""
    import pandas as pd

    frame = pd.concat([pd.read_csv(p, usecols=["c0", "c1", "c2"], dtype=np.float32) for p in paths])
    np.save(out, frame.loc[frame.c0 > 0.5, ["c1", "c2"]].to_numpy())


def scan(
    table: Rows, paths: Sequence[str], columns: Sequence[str], rows: int, folder: str, peers: Collection[str], spark: Any
) -> None:
    """The Scan over the CSV files (``rows`` rows of ``columns``): pandas, polars ``scan_csv`` (each saving ``.npy``),
    and Spark ``read.csv`` → ``write.parquet`` (Spark writes no ``.npy``), each into ``folder``."""
    if on(peers, "pandas"):
        table.add(
            "pandas.read_csv (usecols) → filter → np.save", lambda: pandas_scan(paths, os.path.join(folder, "pandas.npy")), rows
        )
    if on(peers, "polars"):
        import polars as pl

        def polars_scan() -> None:
            frame = pl.scan_csv(list(paths), schema=dict.fromkeys(columns, pl.Float32)).filter(pl.col("c0") > 0.5)
            np.save(os.path.join(folder, "polars.npy"), frame.select("c1", "c2").collect().to_numpy())

        table.add("polars scan_csv → filter → select → np.save", polars_scan, rows)
    if spark is not None:
        schema = ", ".join(f"{c} FLOAT" for c in columns)

        def spark_scan() -> None:
            frame = spark.read.csv(list(paths), header=True, schema=schema)
            frame.filter(frame.c0 > 0.5).select("c1", "c2").write.mode("overwrite").parquet(os.path.join(folder, "spark"))

        table.add("Spark local[2] read.csv → filter → select → write.parquet", spark_scan, rows, table.few)


def one_process_writes(table: Rows, x: np.ndarray, folder: str, peers: Collection[str]) -> None:
    """The rows ``x`` (float32, 2-d) written by one process into ``folder``: ``np.save``, and a ``tf.io.TFRecordWriter``
    loop of one ``tf.train.Example`` per row (timed once, without a warm-up: minutes per call at 1 GB)."""
    if not on(peers, "one-process"):
        return
    import tensorflow as tf

    table.add("np.save, one process", lambda: np.save(os.path.join(folder, "one.npy"), x), x.nbytes)

    def tfrecord_loop() -> None:
        with tf.io.TFRecordWriter(os.path.join(folder, "one.tfrecord")) as w:
            for row in x:
                feature = tf.train.Feature(float_list=tf.train.FloatList(value=row))
                w.write(tf.train.Example(features=tf.train.Features(feature={"x": feature})).SerializeToString())

    table.once("tf.io.TFRecordWriter loop of tf.train.Example, one process (one call)", tfrecord_loop, x.nbytes)


# --- sorts and TeraSort (benchmarks.sort) -----------------------------------------------------------------------


def sort(table: Rows, x: np.ndarray, name: str, peers: Collection[str], spark: Any) -> None:
    """Sort of ``x`` (``name``: its dtype): polars ``Series.sort`` and Spark ``orderBy`` over cached data of its own
    (the same dtype), written to the ``noop`` sink."""
    if on(peers, "polars"):
        import polars as pl

        series = pl.Series(x)
        table.add(f"polars Series.sort, {name}", series.sort, len(x))
        del series
    if spark is not None:
        from pyspark.sql import functions as F

        column = F.randn(seed=0).cast("float") if name == "float32" else F.xxhash64("id")
        cached = spark.range(len(x)).select(column.alias("v")).cache()
        cached.count()
        order = lambda: cached.orderBy("v").write.format("noop").mode("overwrite").save()  # noqa: E731
        table.add(f"Spark local[2] DataFrame orderBy, cached, {name}", order, len(x), table.few)
        cached.unpersist()


def terasort(table: Rows, keys: Any, payload: Any, spark: Any) -> None:
    """TeraSort in Spark of the records resident on the workers (``keys``: 10-byte strings, ``payload``: uint8 rows):
    ``orderBy("key")`` over the records gathered and written to Parquet once (by polars), read and cached before timing."""
    if spark is None or not installed("polars"):
        return
    import polars as pl

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "records.parquet")
        frame = pl.DataFrame({"key": keys.gather(), "payload": [r.tobytes() for r in payload.gather()]})
        frame.write_parquet(path)
        records = frame.height
        del frame
        cached = spark.read.parquet(path).cache()
        cached.count()
        order = lambda: cached.orderBy("key").write.format("noop").mode("overwrite").save()  # noqa: E731
        table.add("TeraSort: Spark local[2] DataFrame orderBy(key), cached", order, records, table.few)
        cached.unpersist()


# --- files (benchmarks.files) -----------------------------------------------------------------------------------


def dask_mean(arrays: Sequence[np.ndarray]) -> Callable[[], float]:
    """The mean of the arrays (memmaps) as one Dask array, by the threaded scheduler."""
    import dask.array as da

    darr = da.concatenate([da.from_array(a, chunks=1 << 22) for a in arrays])
    return lambda: float(darr.mean().compute(scheduler="threads"))


def csv_means(peer: str, path: str) -> Callable[[], np.ndarray]:
    """The column means of a CSV file with a header: ``pandas.read_csv().mean()`` or ``polars.read_csv().mean()``."""
    if peer == "pandas":
        import pandas as pd

        return lambda: pd.read_csv(path).mean().to_numpy()
    import polars as pl

    return lambda: pl.read_csv(path).mean().to_numpy()[0]


# --- the layouts suite's distributed peers (benchmarks.layouts, benchmarks.shipping) ---------------------------


def _chunks(x: np.ndarray, n: int) -> list[np.ndarray]:
    bounds = np.linspace(0, x.shape[0], n + 1).astype(int)
    return [x[a:b] for a, b in itertools.pairwise(bounds) if b > a]


class DaskThreads:
    """Dask's threaded scheduler in this process, 2 threads, 2 chunks."""

    name = "dask-threads"

    def __init__(self, threads: int = 2):
        self.threads = threads

    def prepare(self, x: np.ndarray) -> Any:
        import dask.array as da

        return da.from_array(x, chunks=(-(-x.shape[0] // self.threads), *x.shape[1:]))

    def job(self, job: str, data: Any, centroids: np.ndarray) -> Callable[[], Any]:
        import dask

        from ._work import np_combine, np_partial

        if job == "mean":
            return lambda: data.mean().compute(scheduler="threads", num_workers=self.threads)
        if job == "variance":
            return lambda: data.var().compute(scheduler="threads", num_workers=self.threads)

        def kmeans() -> Any:
            parts = [dask.delayed(np_partial)(job, block, centroids) for block in data.to_delayed().ravel()]
            return np_combine(job, list(dask.compute(*parts, scheduler="threads", num_workers=self.threads)), centroids)

        return kmeans


class DaskDistributed:
    """A 2-process ``distributed.LocalCluster``; chunk i lives on worker i."""

    name = "dask-distributed"

    def __init__(self, client: Any):
        self.client = client
        self.workers = sorted(client.scheduler_info()["workers"])

    @classmethod
    @contextlib.contextmanager
    def start(cls, workers: int = 2) -> Iterator[DaskDistributed]:
        from distributed import Client, LocalCluster

        for name in ("distributed", "distributed.worker", "distributed.scheduler", "distributed.nanny", "distributed.core"):
            logging.getLogger(name).setLevel(logging.ERROR)
        with (
            LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, memory_limit=0
            ) as cluster,
            Client(cluster) as client,
        ):
            client.wait_for_workers(workers)
            yield cls(client)

    def scatter(self, x: np.ndarray) -> list[Any]:
        # hash=False: a fresh key every time, so shipped input really travels on every call (the same bytes
        # would otherwise hash to the key of the last call's data, which is being released concurrently)
        return [
            self.client.scatter(c, workers=[w], direct=True, hash=False)
            for c, w in zip(_chunks(x, len(self.workers)), self.workers, strict=False)
        ]

    def job(self, job: str, x: np.ndarray, resident: Sequence[Any] | None, centroids: np.ndarray) -> Callable[[], Any]:
        from ._work import np_combine, np_partial

        def run() -> Any:
            chunks = resident if resident is not None else self.scatter(x)
            futures = [
                self.client.submit(np_partial, job, c, centroids, pure=False, workers=[w])
                for c, w in zip(chunks, self.workers, strict=False)
            ]
            return np_combine(job, self.client.gather(futures), centroids)

        return run


class Ray:
    """Ray on this machine with 2 CPUs; one remote task per chunk."""

    name = "ray"

    def __init__(self, ray: Any):
        from ._work import np_partial

        self.ray = ray
        self.remote_partial = ray.remote(np_partial)

    @classmethod
    @contextlib.contextmanager
    def start(cls, cpus: int = 2) -> Iterator[Ray]:
        import ray

        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        ray.init(
            num_cpus=cpus,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.ERROR,
            object_store_memory=2 * 1024**3,
            configure_logging=False,
        )
        try:
            yield cls(ray)
        finally:
            ray.shutdown()

    def scatter(self, x: np.ndarray) -> list[Any]:
        return [self.ray.put(c) for c in _chunks(x, 2)]

    def job(self, job: str, x: np.ndarray, resident: Sequence[Any] | None, centroids: np.ndarray) -> Callable[[], Any]:
        from ._work import np_combine

        def run() -> Any:
            chunks = resident if resident is not None else self.scatter(x)
            return np_combine(job, self.ray.get([self.remote_partial.remote(job, c, centroids) for c in chunks]), centroids)

        return run
