"""TPC-H Q12 to Q22 on lazy tables (Q1 to Q11 and the conventions are in ``_tpch_queries.py``); ``QUERIES`` maps each
query's number to its function."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

import tfmapreduce as tmr
from tfmapreduce import col, when

from . import _tpch_queries as first
from ._tpch_queries import REVENUE, Run, Tables


def q12(t: Tables, run: Run) -> tmr.LazyTable:
    urgent = col("o_orderpriority").isin(["1-URGENT", "2-HIGH"])
    return (
        t["lineitem"]
        .filter(
            col("l_shipmode").isin(["MAIL", "SHIP"])
            & (col("l_commitdate") < col("l_receiptdate"))
            & (col("l_shipdate") < col("l_commitdate"))
            & (col("l_receiptdate") >= date(1994, 1, 1))
            & (col("l_receiptdate") < date(1995, 1, 1))
        )
        .join(t["orders"], left_on="l_orderkey", right_on="o_orderkey")
        .with_columns(high=when(urgent).then(1).otherwise(0), low=when(urgent).then(0).otherwise(1))
        .group_by("l_shipmode")
        .agg(high_line_count=("high", "sum"), low_line_count=("low", "sum"))
        .sort("l_shipmode")
    )


def q13(t: Tables, run: Run) -> tmr.LazyTable:
    orders = t["orders"].filter(~col("o_comment").like("%special%requests%"))
    return (
        t["customer"]
        .join(orders, left_on="c_custkey", right_on="o_custkey", how="left")
        .group_by("c_custkey")
        .agg(c_count=("o_orderkey", "count"))
        .group_by("c_count")
        .agg(custdist=("*", "count"))
        .sort(["custdist", "c_count"], descending=True)
    )


def q14(t: Tables, run: Run) -> tmr.LazyTable:
    return (
        t["lineitem"]
        .filter((col("l_shipdate") >= date(1995, 9, 1)) & (col("l_shipdate") < date(1995, 10, 1)))
        .join(t["part"], left_on="l_partkey", right_on="p_partkey")
        .with_columns(volume=REVENUE, promo=when(col("p_type").startswith("PROMO")).then(REVENUE).otherwise(0.0))
        .agg(promo=("promo", "sum"), volume=("volume", "sum"))
        .select((100.0 * col("promo") / col("volume")).alias("promo_revenue"))
    )


def q15(t: Tables, run: Run) -> tmr.LazyTable:
    revenue = (
        t["lineitem"]
        .filter((col("l_shipdate") >= date(1996, 1, 1)) & (col("l_shipdate") < date(1996, 4, 1)))
        .with_columns(volume=REVENUE)
        .group_by("l_suppkey")
        .agg(total_revenue=("volume", "sum"))
    )  # the view, one node of the plan: its maximum and the join both read it, computed once
    top = revenue.agg(top=("total_revenue", "max")).scalar()
    return (
        t["supplier"]
        .join(revenue.filter(col("total_revenue") == top), left_on="s_suppkey", right_on="l_suppkey")
        .select("s_suppkey", "s_name", "s_address", "s_phone", "total_revenue")
        .sort("s_suppkey")
    )


def q16(t: Tables, run: Run) -> tmr.LazyTable:
    complaints = t["supplier"].filter(col("s_comment").like("%Customer%Complaints%"))
    parts = t["part"].filter(
        (col("p_brand") != "Brand#45")
        & ~col("p_type").startswith("MEDIUM POLISHED")
        & col("p_size").isin([49, 14, 23, 45, 19, 3, 36, 9])
    )
    return (
        t["partsupp"]
        .join(parts, left_on="ps_partkey", right_on="p_partkey")
        .join(complaints, left_on="ps_suppkey", right_on="s_suppkey", how="anti")
        .group_by(["p_brand", "p_type", "p_size"])
        .agg(supplier_cnt=("ps_suppkey", "count_distinct"))
        .sort(["supplier_cnt", "p_brand", "p_type", "p_size"], descending=[True, False, False, False])
    )


def q17(t: Tables, run: Run) -> tmr.LazyTable:
    parts = t["part"].filter((col("p_brand") == "Brand#23") & (col("p_container") == "MED BOX"))
    lines = t["lineitem"].join(parts, left_on="l_partkey", right_on="p_partkey", how="semi")
    average = lines.group_by("l_partkey").agg(avg_quantity=("l_quantity", "mean"))
    return (
        lines.join(average, on="l_partkey")
        .filter(col("l_quantity") < 0.2 * col("avg_quantity"))
        .agg(total=("l_extendedprice", "sum"))
        .select((col("total") / 7.0).alias("avg_yearly"))
    )


def q18(t: Tables, run: Run) -> tmr.LazyTable:
    large = t["lineitem"].group_by("l_orderkey").agg(quantity=("l_quantity", "sum")).filter(col("quantity") > 300)
    return (
        t["orders"]
        .join(large, left_on="o_orderkey", right_on="l_orderkey", how="semi")
        .join(t["customer"], left_on="o_custkey", right_on="c_custkey")
        .join(t["lineitem"], left_on="o_orderkey", right_on="l_orderkey")
        .select("c_name", col("o_custkey").alias("c_custkey"), "o_orderkey", "o_orderdate", "o_totalprice", "l_quantity")
        .group_by(["c_name", "c_custkey", "o_orderkey", "o_orderdate", "o_totalprice"])
        .agg(sum_qty=("l_quantity", "sum"))
        .sort(["o_totalprice", "o_orderdate"], descending=[True, False], limit=100)
    )


def q19(t: Tables, run: Run) -> tmr.LazyTable:
    kinds = (("Brand#12", "SM", 1, 11, 5), ("Brand#23", "MED", 10, 20, 10), ("Brand#34", "LG", 20, 30, 15))

    def containers(size: str) -> list[str]:
        return [f"{size} {c}" for c in (("CASE", "BOX", "PACK", "PKG") if size != "MED" else ("BAG", "BOX", "PKG", "PACK"))]

    def kind(brand: str, size: str, low: int, high: int, largest: int) -> Any:
        return (
            (col("p_brand") == brand)
            & col("p_container").isin(containers(size))
            & col("l_quantity").between(low, high)
            & col("p_size").between(1, largest)
            & col("l_shipmode").isin(["AIR", "AIR REG"])
            & (col("l_shipinstruct") == "DELIVER IN PERSON")
        )

    # what every branch implies, on each side alone (as DuckDB derives it): few parts, and no string column of
    # lineitem read before the join has kept the rows of those parts
    parts = t["part"].filter(
        col("p_brand").isin([k[0] for k in kinds])
        & col("p_container").isin([c for k in kinds for c in containers(k[1])])
        & col("p_size").between(1, 15)
    )
    return (
        t["lineitem"]
        .filter(col("l_quantity").between(1, 30))
        .join(parts, left_on="l_partkey", right_on="p_partkey")
        .filter(kind(*kinds[0]) | kind(*kinds[1]) | kind(*kinds[2]))
        .with_columns(volume=REVENUE)
        .agg(revenue=("volume", "sum"))
    )


def q20(t: Tables, run: Run) -> tmr.LazyTable:
    forest = t["part"].filter(col("p_name").startswith("forest"))
    shipped = (
        t["lineitem"]
        .filter((col("l_shipdate") >= date(1994, 1, 1)) & (col("l_shipdate") < date(1995, 1, 1)))
        .group_by(["l_partkey", "l_suppkey"])
        .agg(quantity=("l_quantity", "sum"))
    )
    stock = (
        t["partsupp"]
        .join(forest, left_on="ps_partkey", right_on="p_partkey", how="semi")
        .join(shipped, left_on=["ps_partkey", "ps_suppkey"], right_on=["l_partkey", "l_suppkey"])
        .filter(col("ps_availqty") > 0.5 * col("quantity"))
    )
    canada = t["nation"].filter(col("n_name") == "CANADA")
    return (
        t["supplier"]
        .join(canada, left_on="s_nationkey", right_on="n_nationkey", how="semi")
        .join(stock, left_on="s_suppkey", right_on="ps_suppkey", how="semi")
        .select("s_name", "s_address")
        .sort("s_name")
    )


def q21(t: Tables, run: Run) -> tmr.LazyTable:
    late = t["lineitem"].filter(col("l_receiptdate") > col("l_commitdate"))
    suppliers = t["lineitem"].group_by("l_orderkey").agg(suppliers=("l_suppkey", "count_distinct"))
    late_suppliers = late.group_by("l_orderkey").agg(late_suppliers=("l_suppkey", "count_distinct"))
    saudi = t["nation"].filter(col("n_name") == "SAUDI ARABIA")
    return (
        late.join(
            t["supplier"].join(saudi, left_on="s_nationkey", right_on="n_nationkey", how="semi"),
            left_on="l_suppkey",
            right_on="s_suppkey",
        )
        .join(t["orders"].filter(col("o_orderstatus") == "F"), left_on="l_orderkey", right_on="o_orderkey", how="semi")
        .join(suppliers, on="l_orderkey")
        .join(late_suppliers, on="l_orderkey")
        .filter((col("suppliers") > 1) & (col("late_suppliers") == 1))
        .group_by("s_name")
        .agg(numwait=("*", "count"))
        .sort(["numwait", "s_name"], descending=[True, False], limit=100)
    )


def q22(t: Tables, run: Run) -> tmr.LazyTable:
    codes = ["13", "31", "23", "29", "30", "18", "17"]
    customers = t["customer"].with_columns(cntrycode=col("c_phone").substr(1, 2)).filter(col("cntrycode").isin(codes))
    average = customers.filter(col("c_acctbal") > 0.0).agg(average=("c_acctbal", "mean")).scalar()
    return (
        customers.filter(col("c_acctbal") > average)
        .join(t["orders"], left_on="c_custkey", right_on="o_custkey", how="anti")
        .group_by("cntrycode")
        .agg(numcust=("*", "count"), totacctbal=("c_acctbal", "sum"))
        .sort("cntrycode")
    )


QUERIES: dict[int, Callable[[Tables, Run], tmr.LazyTable]] = {
    **{n: getattr(first, f"q{n}") for n in range(1, 12)},
    12: q12, 13: q13, 14: q14, 15: q15, 16: q16, 17: q17, 18: q18, 19: q19, 20: q20, 21: q21, 22: q22,
}  # fmt: skip
