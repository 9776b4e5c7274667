"""The 22 TPC-H queries on lazy tables (``tmr.lazy``, ``tmr.col``), written from the specification: each
``q<N>(t, run)`` takes the 8 tables as lazy tables (``t["lineitem"]``, ...) and the run options ``run`` (``cluster=``,
...) and returns the query as a lazy table whose columns are the SQL answer's, in its order (``_tpch_sql.SQL[N]``).

A scalar subquery (Q11's total, Q15's maximum, Q22's average) is ``query.scalar()``, an expression of the outer
query computed in its ``collect()`` (what both read runs once) that enters the query as a literal;
``EXISTS`` and ``IN`` are semi joins, ``NOT EXISTS`` and ``NOT IN`` anti joins, and a correlated aggregate (Q2, Q17,
Q20) a group-by joined back on its keys. Q21's two ``EXISTS`` over other suppliers of the order are counts of distinct
suppliers per order (any other supplier: more than one; no other late one: exactly one late).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any

import tfmapreduce as tmr
from tfmapreduce import col, when

Tables = Mapping[str, tmr.LazyTable]
Run = Mapping[str, Any]

REVENUE = col("l_extendedprice") * (1 - col("l_discount"))
Q1_AGGREGATES: dict[str, tuple[str, str]] = {
    "sum_qty": ("l_quantity", "sum"),
    "sum_base_price": ("l_extendedprice", "sum"),
    "sum_disc_price": ("disc_price", "sum"),
    "sum_charge": ("charge", "sum"),
    "avg_qty": ("l_quantity", "mean"),
    "avg_price": ("l_extendedprice", "mean"),
    "avg_disc": ("l_discount", "mean"),
    "count_order": ("*", "count"),
}
"""Q1's eight aggregates over its shipped, priced lines (the lazy query here and the eager one of ``tpch.py``)."""


def q1(t: Tables, run: Run) -> tmr.LazyTable:
    return (
        t["lineitem"]
        .filter(col("l_shipdate") <= date(1998, 9, 2))
        .with_columns(disc_price=REVENUE, charge=REVENUE * (1 + col("l_tax")))
        .group_by(["l_returnflag", "l_linestatus"])
        .agg(**Q1_AGGREGATES)
        .sort(["l_returnflag", "l_linestatus"])
    )


def _suppliers_in(t: Tables, region: str) -> tmr.LazyTable:
    nations = t["region"].filter(col("r_name") == region).join(t["nation"], left_on="r_regionkey", right_on="n_regionkey")
    return t["supplier"].join(nations, left_on="s_nationkey", right_on="n_nationkey")


def q2(t: Tables, run: Run) -> tmr.LazyTable:
    offers = t["partsupp"].join(_suppliers_in(t, "EUROPE"), left_on="ps_suppkey", right_on="s_suppkey")
    cheapest = offers.group_by("ps_partkey").agg(min_cost=("ps_supplycost", "min"))
    parts = t["part"].filter((col("p_size") == 15) & col("p_type").like("%BRASS"))
    return (
        parts.join(offers, left_on="p_partkey", right_on="ps_partkey")
        .join(cheapest, left_on=["p_partkey", "ps_supplycost"], right_on=["ps_partkey", "min_cost"])
        .select("s_acctbal", "s_name", "n_name", "p_partkey", "p_mfgr", "s_address", "s_phone", "s_comment")
        .sort(["s_acctbal", "n_name", "s_name", "p_partkey"], descending=[True, False, False, False], limit=100)
    )


def q3(t: Tables, run: Run) -> tmr.LazyTable:
    customers = t["customer"].filter(col("c_mktsegment") == "BUILDING")
    orders = (
        t["orders"]
        .filter(col("o_orderdate") < date(1995, 3, 15))
        .join(customers, left_on="o_custkey", right_on="c_custkey", how="semi")
    )
    return (
        t["lineitem"]
        .filter(col("l_shipdate") > date(1995, 3, 15))
        .join(orders, left_on="l_orderkey", right_on="o_orderkey")
        .with_columns(volume=REVENUE)
        .group_by(["l_orderkey", "o_orderdate", "o_shippriority"])
        .agg(revenue=("volume", "sum"))
        .select("l_orderkey", "revenue", "o_orderdate", "o_shippriority")
        .sort(["revenue", "o_orderdate"], descending=[True, False], limit=10)
    )


def q4(t: Tables, run: Run) -> tmr.LazyTable:
    late = t["lineitem"].filter(col("l_commitdate") < col("l_receiptdate"))
    return (
        t["orders"]
        .filter((col("o_orderdate") >= date(1993, 7, 1)) & (col("o_orderdate") < date(1993, 10, 1)))
        .join(late, left_on="o_orderkey", right_on="l_orderkey", how="semi")
        .group_by("o_orderpriority")
        .agg(order_count=("*", "count"))
        .sort("o_orderpriority")
    )


def q5(t: Tables, run: Run) -> tmr.LazyTable:
    orders = t["orders"].filter((col("o_orderdate") >= date(1994, 1, 1)) & (col("o_orderdate") < date(1995, 1, 1)))
    buyers = orders.join(t["customer"], left_on="o_custkey", right_on="c_custkey")
    return (
        t["lineitem"]
        .join(buyers, left_on="l_orderkey", right_on="o_orderkey")
        .join(_suppliers_in(t, "ASIA"), left_on=["l_suppkey", "c_nationkey"], right_on=["s_suppkey", "s_nationkey"])
        .with_columns(volume=REVENUE)
        .group_by("n_name")
        .agg(revenue=("volume", "sum"))
        .sort("revenue", descending=True)
    )


def q6(t: Tables, run: Run) -> tmr.LazyTable:
    return (
        t["lineitem"]
        .filter(
            (col("l_shipdate") >= date(1994, 1, 1))
            & (col("l_shipdate") < date(1995, 1, 1))
            & col("l_discount").between(0.05, 0.07)
            & (col("l_quantity") < 24)
        )
        .with_columns(volume=col("l_extendedprice") * col("l_discount"))
        .agg(revenue=("volume", "sum"))
    )


def _nation_as(t: Tables, key: str, name: str, names: list[str]) -> tmr.LazyTable:
    return t["nation"].filter(col("n_name").isin(names)).select(col("n_nationkey").alias(key), col("n_name").alias(name))


def q7(t: Tables, run: Run) -> tmr.LazyTable:
    pair = ["FRANCE", "GERMANY"]
    suppliers = t["supplier"].join(_nation_as(t, "n1_key", "supp_nation", pair), left_on="s_nationkey", right_on="n1_key")
    customers = t["customer"].join(_nation_as(t, "n2_key", "cust_nation", pair), left_on="c_nationkey", right_on="n2_key")
    return (
        t["lineitem"]
        .filter(col("l_shipdate").between(date(1995, 1, 1), date(1996, 12, 31)))
        .join(suppliers, left_on="l_suppkey", right_on="s_suppkey")
        .join(t["orders"], left_on="l_orderkey", right_on="o_orderkey")
        .join(customers, left_on="o_custkey", right_on="c_custkey")
        .filter(col("supp_nation") != col("cust_nation"))
        .with_columns(l_year=col("l_shipdate").year(), volume=REVENUE)
        .group_by(["supp_nation", "cust_nation", "l_year"])
        .agg(revenue=("volume", "sum"))
        .sort(["supp_nation", "cust_nation", "l_year"])
    )


def q8(t: Tables, run: Run) -> tmr.LazyTable:
    america = t["region"].filter(col("r_name") == "AMERICA").join(t["nation"], left_on="r_regionkey", right_on="n_regionkey")
    customers = t["customer"].join(america, left_on="c_nationkey", right_on="n_nationkey", how="semi")
    orders = t["orders"].filter(col("o_orderdate").between(date(1995, 1, 1), date(1996, 12, 31)))
    orders = orders.join(customers, left_on="o_custkey", right_on="c_custkey", how="semi")
    nations = t["nation"].select(col("n_nationkey").alias("n2_key"), col("n_name").alias("nation"))
    return (
        t["lineitem"]
        .join(t["part"].filter(col("p_type") == "ECONOMY ANODIZED STEEL"), left_on="l_partkey", right_on="p_partkey", how="semi")
        .join(orders, left_on="l_orderkey", right_on="o_orderkey")
        .join(t["supplier"], left_on="l_suppkey", right_on="s_suppkey")
        .join(nations, left_on="s_nationkey", right_on="n2_key")
        .with_columns(o_year=col("o_orderdate").year(), volume=REVENUE)
        .with_columns(brazil=when(col("nation") == "BRAZIL").then(col("volume")).otherwise(0.0))
        .group_by("o_year")
        .agg(brazil=("brazil", "sum"), volume=("volume", "sum"))
        .select("o_year", (col("brazil") / col("volume")).alias("mkt_share"))
        .sort("o_year")
    )


def q9(t: Tables, run: Run) -> tmr.LazyTable:
    green = t["part"].filter(col("p_name").contains("green"))
    return (
        t["lineitem"]
        .join(green, left_on="l_partkey", right_on="p_partkey", how="semi")
        .join(t["partsupp"], left_on=["l_suppkey", "l_partkey"], right_on=["ps_suppkey", "ps_partkey"])
        .join(t["supplier"], left_on="l_suppkey", right_on="s_suppkey")
        .join(t["nation"], left_on="s_nationkey", right_on="n_nationkey")
        .join(t["orders"], left_on="l_orderkey", right_on="o_orderkey")
        .with_columns(o_year=col("o_orderdate").year(), amount=REVENUE - col("ps_supplycost") * col("l_quantity"))
        .group_by(["n_name", "o_year"])
        .agg(sum_profit=("amount", "sum"))
        .sort(["n_name", "o_year"], descending=[False, True])
    )


def q10(t: Tables, run: Run) -> tmr.LazyTable:
    orders = t["orders"].filter((col("o_orderdate") >= date(1993, 10, 1)) & (col("o_orderdate") < date(1994, 1, 1)))
    keys = ["c_custkey", "c_name", "c_acctbal", "c_phone", "n_name", "c_address", "c_comment"]
    return (
        t["lineitem"]
        .filter(col("l_returnflag") == "R")
        .join(orders, left_on="l_orderkey", right_on="o_orderkey")
        .join(t["customer"], left_on="o_custkey", right_on="c_custkey")
        .join(t["nation"], left_on="c_nationkey", right_on="n_nationkey")
        .with_columns(volume=REVENUE)
        .select(col("o_custkey").alias("c_custkey"), *keys[1:], "volume")
        .group_by(keys)
        .agg(revenue=("volume", "sum"))
        .select("c_custkey", "c_name", "revenue", "c_acctbal", "n_name", "c_address", "c_phone", "c_comment")
        .sort("revenue", descending=True, limit=20)
    )


def q11(t: Tables, run: Run) -> tmr.LazyTable:
    germany = t["nation"].filter(col("n_name") == "GERMANY")
    suppliers = t["supplier"].join(germany, left_on="s_nationkey", right_on="n_nationkey", how="semi")
    stock = (
        t["partsupp"]
        .join(suppliers, left_on="ps_suppkey", right_on="s_suppkey", how="semi")
        .with_columns(value=col("ps_supplycost") * col("ps_availqty"))
    )
    threshold = stock.agg(total=("value", "sum")).scalar() * 0.0001  # its joins are the outer query's: run once
    return (
        stock.group_by("ps_partkey").agg(value=("value", "sum")).filter(col("value") > threshold).sort("value", descending=True)
    )
