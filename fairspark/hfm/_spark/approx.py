"""ApproxDist on Spark: one range-partitioned window scan per projection (Bian and Luo, 2024).

Each (target, projection) is range partitioned on the projected value ``g``; every
partition gets, per attribute and code, the ``m2`` nearest rows of its neighbours
(the halo), so the scan gives the same values for any partition boundaries.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from fairspark._testing import maybe_fail_first_attempt
from fairspark._threads import pin_threads
from fairspark.hfm._kernels import FIX_BITS, FIX_LIMIT, part_mean, window_scan
from fairspark.hfm._spark.points import code_cols, keys_at, points_schema_check, sort_order, stack

__all__ = ["approx_scan", "pointwise_rows", "summarise_approx", "summarise_binned",
           "summarise_pointwise"]

_SCAN_SCHEMA = "tgt int, proj int, attr int, key string, d double, nb_key string"
_ASSIGN_SCHEMA = "tgt int, proj int, attr int, code int, src int, side string, take int, dst int"


def _g_expr() -> F.Column:
    # t*w0 + (((0 + x1 w1) + x2 w2) + ...): the summation order of kernels.project
    tail = F.expr(
        "aggregate(zip_with(x, slice(w, 2, size(w) - 1), (a, b) -> a * b), 0D, (acc, v) -> acc + v)"
    )
    return F.col("t") * F.col("w")[0] + tail


def _exploded(pts: DataFrame, projections: dict[int, np.ndarray], n_attr: int) -> DataFrame:
    """One row per point and (target, projection) with its projected value ``g``."""
    spark = pts.sparkSession
    rows = [
        (int(tgt), int(j), [float(v) for v in w])
        for tgt, W in projections.items()
        for j, w in enumerate(W)
    ]
    proj_df = spark.createDataFrame(rows, "tgt int, proj int, w array<double>")
    return (
        pts.select("key", "y", "yp", "x", *code_cols(n_attr))
        .crossJoin(F.broadcast(proj_df))
        .withColumn("t", F.when(F.col("tgt") == 0, F.col("y")).otherwise(F.col("yp")))
        .withColumn("g", _g_expr())
        .select("tgt", "proj", "key", "t", "x", "g", *code_cols(n_attr))
    )


def _with_pid(ex: DataFrame, num_partitions: int) -> DataFrame:
    """Range partition id on g per (tgt, proj), from approximate quantiles.

    The boundaries only decide which task scans which rows; the halos make the result
    the same for any boundaries.
    """
    if num_partitions <= 1:
        return ex.withColumn("pid", F.lit(0))
    fracs = [i / num_partitions for i in range(1, num_partitions)]
    bounds = (
        ex.groupBy("tgt", "proj")
        .agg(F.percentile_approx("g", fracs, 10000).alias("bounds"))
    )
    return (
        ex.join(F.broadcast(bounds), on=["tgt", "proj"], how="inner")
        .withColumn("pid", F.expr("size(filter(bounds, b -> b <= g))"))
        .drop("bounds")
    )


def _summary_schema(n_attr: int) -> StructType:
    return StructType(
        [
            StructField("tgt", IntegerType()),
            StructField("proj", IntegerType()),
            StructField("pid", IntegerType()),
            StructField("pos", IntegerType()),
            StructField("key", StringType()),
            StructField("t", DoubleType()),
            StructField("x", ArrayType(DoubleType())),
            StructField("g", DoubleType()),
            *[StructField(c, IntegerType()) for c in code_cols(n_attr)],
            StructField("attr", IntegerType()),
            StructField("code", IntegerType()),
            StructField("side", StringType()),
            StructField("rnk", IntegerType()),
            StructField("cnt", IntegerType()),
        ]
    )


def _make_summary_fn(n_attr: int, m2: int) -> Callable[[pd.DataFrame], pd.DataFrame]:
    cols = code_cols(n_attr)

    def summary(pdf: pd.DataFrame) -> pd.DataFrame:
        """First and last m2 rows of each (attribute, code) of one sorted partition."""
        order = sort_order(pdf["g"].to_numpy(), pdf["key"].to_numpy())
        pdf = pdf.iloc[order].reset_index(drop=True)
        pdf["pos"] = np.arange(len(pdf), dtype=np.int32)
        parts = []
        for a, c in enumerate(cols):
            codes = pdf[c].to_numpy()
            for code in np.unique(codes):
                idx = np.flatnonzero(codes == code)
                cnt = idx.size
                for side, sel in (("first", idx[:m2]), ("last", idx[::-1][:m2])):
                    sub = pdf.iloc[sel].copy()
                    sub["attr"] = a
                    sub["code"] = int(code)
                    sub["side"] = side
                    sub["rnk"] = np.arange(len(sel), dtype=np.int32)
                    sub["cnt"] = cnt
                    parts.append(sub)
        if not parts:
            return pd.DataFrame({f.name: [] for f in _summary_schema(n_attr).fields})
        out = pd.concat(parts, ignore_index=True)
        return out[[f.name for f in _summary_schema(n_attr).fields]]

    return summary


def _halo_assignments(counts: pd.DataFrame, m2: int) -> list[tuple]:
    """Driver-side prefix scan over per-partition counts.

    For each target partition p, (attribute, code) and side, walk the neighbouring
    partitions outward and take rows until m2 rows of that code are collected.
    Returns rows (tgt, proj, attr, code, src_pid, side, take, dst_pid).
    """
    out: list[tuple] = []
    pids_by_proj = counts.groupby(["tgt", "proj"])["pid"].unique().to_dict()
    for (tgt, proj, attr, code), grp in counts.groupby(["tgt", "proj", "attr", "code"]):
        cnt = dict(zip(grp["pid"].tolist(), grp["cnt"].tolist(), strict=True))
        src = sorted(cnt)
        for p in sorted(int(v) for v in pids_by_proj[(tgt, proj)]):
            need = m2  # left halo: code's last rows of partitions before p
            for q in reversed([s for s in src if s < p]):
                k = min(need, cnt[q])
                out.append((int(tgt), int(proj), int(attr), int(code), int(q), "last", int(k), p))
                need -= k
                if need <= 0:
                    break
            need = m2  # right halo: first rows of partitions after p
            for q in [s for s in src if s > p]:
                k = min(need, cnt[q])
                out.append((int(tgt), int(proj), int(attr), int(code), int(q), "first", int(k), p))
                need -= k
                if need <= 0:
                    break
    return out


def _make_scan_fn(n_attr: int, m2: int, dim_x: int) -> Callable[[pd.DataFrame], pd.DataFrame]:
    cols = code_cols(n_attr)

    def scan(pdf: pd.DataFrame) -> pd.DataFrame:
        """AcceleDist on one range partition (its rows plus its halo rows)."""
        pin_threads()
        maybe_fail_first_attempt("hfm")
        order = sort_order(pdf["g"].to_numpy(), pdf["key"].to_numpy())
        pdf = pdf.iloc[order].reset_index(drop=True)
        pts = np.column_stack([pdf["t"].to_numpy(np.float64), stack(pdf["x"], dim_x)])
        anchor = ~pdf["halo"].to_numpy(bool)
        keys = pdf["key"].to_numpy()
        tgt, proj = int(pdf["tgt"].iloc[0]), int(pdf["proj"].iloc[0])
        outs = []
        for a, c in enumerate(cols):
            d, nb = window_scan(pts, pdf[c].to_numpy(), m2=m2, anchor_mask=anchor)
            sel = np.flatnonzero(anchor)
            outs.append(
                pd.DataFrame(
                    {
                        "tgt": tgt,
                        "proj": proj,
                        "attr": a,
                        "key": keys[sel],
                        "d": d[sel],
                        "nb_key": keys_at(keys, nb[sel]),
                    }
                )
            )
        return pd.concat(outs, ignore_index=True)

    return scan


def _halo_rows(
    summary: DataFrame, *, m2: int, base_cols: list[str], persisted: list[DataFrame] | None
) -> DataFrame | None:
    """The halo rows of every partition (``halo`` true), from the partition summaries.

    Only per-partition counts reach the driver, which plans which summary rows each
    partition takes (:func:`_halo_assignments`); ``None`` when no partition needs any.
    """
    summary = summary.persist()
    if persisted is not None:
        persisted.append(summary)
    counts = summary.select("tgt", "proj", "pid", "attr", "code", "cnt").distinct().toPandas()
    assign = _halo_assignments(counts, m2)
    if not assign:
        return None
    assign_df = summary.sparkSession.createDataFrame(assign, _ASSIGN_SCHEMA)
    return (
        summary.join(
            F.broadcast(assign_df.withColumnRenamed("src", "pid")),
            on=["tgt", "proj", "attr", "code", "pid", "side"],
            how="inner",
        )
        .where(F.col("rnk") < F.col("take"))
        .dropDuplicates(["tgt", "proj", "dst", "pid", "pos"])
        .drop("pid")
        .withColumnRenamed("dst", "pid")
        .select(*base_cols)
        .withColumn("halo", F.lit(True))
    )


def approx_scan(
    pts: DataFrame,
    *,
    n_attr: int,
    dim_x: int,
    projections: dict[int, np.ndarray],
    m2: int,
    num_partitions: int,
    persisted: list[DataFrame] | None = None,
) -> DataFrame:
    """Per-anchor AcceleDist values for every target, projection and attribute.

    Parameters
    ----------
    pts : DataFrame
        Points DataFrame (see :mod:`fairspark.hfm._spark`).
    n_attr : int
        Number of code columns ``c0 ..``.
    dim_x : int
        Length of ``x``.
    projections : dict
        Target (0 label, 1 prediction) -> array ``(m1, 1 + dim_x)``.
    m2 : int
        Window per side.
    num_partitions : int
        Range partitions per projection.
    persisted : list, optional
        Intermediate DataFrames this function persists are appended here, for the
        caller to unpersist once the result is materialised.

    Returns
    -------
    DataFrame
        ``tgt, proj, attr, key, d, nb_key``: one row per point, projection and attribute
        (not collected).
    """
    points_schema_check(pts, n_attr)
    ex = _with_pid(_exploded(pts, projections, n_attr), num_partitions)
    base_cols = ["tgt", "proj", "pid", "key", "t", "x", "g", *code_cols(n_attr)]
    main = ex.select(*base_cols).withColumn("halo", F.lit(False))
    if num_partitions > 1:
        summary = ex.groupBy("tgt", "proj", "pid").applyInPandas(
            _make_summary_fn(n_attr, m2), _summary_schema(n_attr)
        )
        halo = _halo_rows(summary, m2=m2, base_cols=base_cols, persisted=persisted)
        if halo is not None:
            main = main.unionByName(halo)
    return main.groupBy("tgt", "proj", "pid").applyInPandas(
        _make_scan_fn(n_attr, m2, dim_x), _SCAN_SCHEMA
    )


def summarise_approx(scan_df: DataFrame) -> pd.DataFrame:
    """ApproxDist per (tgt, attr): min over projections of the max (Alg. 1 line 5).

    Returns a small pandas frame with columns ``tgt, attr, D, D_avg, proj, key, nb_key``
    (the witness pair of the chosen projection).
    """
    per = (
        scan_df.groupBy("tgt", "attr", "proj")
        .agg(
            F.max("d").alias("dmax"),
            F.avg("d").alias("davg"),
            F.min(F.struct((-F.col("d")).alias("nd"), "key", "nb_key")).alias("w"),
        )
        .select("tgt", "attr", "proj", "dmax", "davg", "w.key", "w.nb_key")
        .toPandas()
    )
    rows = []
    for (tgt, attr), grp in per.groupby(["tgt", "attr"]):
        grp = grp.sort_values(["dmax", "proj"], kind="mergesort")
        best = grp.iloc[0]
        rows.append(
            {
                "tgt": int(tgt),
                "attr": int(attr),
                "D": float(best["dmax"]),
                "D_avg": float(grp["davg"].min()),
                "proj": int(best["proj"]),
                "key": best["key"],
                "nb_key": best["nb_key"],
            }
        )
    return pd.DataFrame(rows)


def pointwise_rows(scan_df: DataFrame, *, m1_by_tgt: dict[int, int]) -> DataFrame:
    """Per-row pointwise upper bounds ``ub = min_j d^(j)`` (not collected).

    Columns ``tgt, attr, key, ub, nb_key, mult`` (``mult``: rows sharing the key).
    """
    m1 = F.lit(0)
    for tgt, m in m1_by_tgt.items():
        m1 = F.when(F.col("tgt") == tgt, F.lit(m)).otherwise(m1)
    return (
        scan_df.groupBy("tgt", "attr", "key")
        .agg(F.min(F.struct("d", "nb_key")).alias("m"), F.count(F.lit(1)).alias("n"))
        .select(
            "tgt", "attr", "key",
            F.col("m.d").alias("ub"), F.col("m.nb_key").alias("nb_key"),
            (F.col("n") / m1).alias("mult"),
        )
    )


def _summary_aggs(value_col: str) -> list[F.Column]:
    """The aggregates of :func:`summarise_pointwise`: max, float mean, the fixed-point
    parts of the exact sum, the weight, a flag for values out of fixed-point range and
    the witness of the max (the smallest ``(-v, key, nb_key)``)."""
    v = F.col(value_col)
    small = F.abs(v) < F.lit(FIX_LIMIT)  # false for inf and NaN
    s = v * F.lit(float(1 << FIX_BITS))
    hi = F.floor(s)
    lo = F.floor((s - hi) * F.lit(float(1 << FIX_BITS)))
    mult = F.col("mult").cast("long")
    return [F.max(value_col).alias("D"),
            F.sum(v * mult).alias("vs"),
            F.sum(F.when(small, hi * mult).otherwise(F.lit(0))).alias("hs"),
            F.sum(F.when(small, lo * mult).otherwise(F.lit(0))).alias("ls"),
            F.sum(mult).alias("ws"),
            F.max(~small).alias("any_big"),
            F.min(F.struct((-v).alias("nd"), "key", "nb_key")).alias("w")]


def _finish_summary(out: pd.DataFrame) -> pd.DataFrame:
    """``tgt, attr, D, D_avg, key, nb_key`` from one row of :func:`_summary_aggs` per
    pair (``key``, ``nb_key``: the witness's)."""
    avg = [part_mean({"D": float(r.D), "any_big": bool(r.any_big), "hs": int(r.hs),
                      "ls": int(r.ls), "ws": int(r.ws), "vs": float(r.vs)})
           for r in out.itertuples()]
    out = out.assign(D_avg=np.asarray(avg, dtype=float))
    return out[["tgt", "attr", "D", "D_avg", "key", "nb_key"]].reset_index(drop=True)


def summarise_pointwise(rows_df: DataFrame, value_col: str = "ub") -> pd.DataFrame:
    """Max and row-weighted mean of a per-row distance, with the witness of the max.

    The mean is summed in fixed point (:func:`~fairspark.hfm._kernels.fixed_mean`), so
    it has the bits of the driver path's numpy mean whatever the partitioning.

    Returns ``tgt, attr, D, D_avg, key, nb_key``.
    """
    out = (rows_df.groupBy("tgt", "attr").agg(*_summary_aggs(value_col))
           .select("tgt", "attr", "D", "vs", "hs", "ls", "ws", "any_big", "w.key", "w.nb_key")
           .toPandas())
    return _finish_summary(out)


def summarise_binned(rows_df: DataFrame, *, value_col: str, tops: dict[int, float],
                     bins: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`summarise_pointwise` and the histogram of the values in one aggregation.

    The histogram's range per attribute, ``[0, tops[attr]]`` in ``bins`` bins (the last
    one closed), must be known beforehand (the certified engine knows the largest bound
    from pass A). One ``groupBy(tgt, attr, bin)`` gives every bin's count and the
    summary's parts, folded per pair on the driver: the maximum and the weights are
    exact in any order, the fixed-point sums are integers, and the witness of the
    maximum lies in the highest non-empty bin, so the result is
    :func:`summarise_pointwise`'s to the bit, at one scan instead of two.

    Returns
    -------
    (summary, counts)
        ``tgt, attr, D, D_avg, key, nb_key`` and ``tgt, attr, bin, n``.
    """
    top_col = F.lit(1.0)
    for attr, top in tops.items():
        top_col = F.when(F.col("attr") == attr,
                         F.lit(top if top > 0 else 1.0)).otherwise(top_col)
    b = F.least(F.floor(F.col(value_col) / top_col * bins), F.lit(bins - 1)).cast("int")
    per_bin = (rows_df.groupBy("tgt", "attr", b.alias("bin")).agg(*_summary_aggs(value_col))
               .select("tgt", "attr", "bin", "D", "vs", "hs", "ls", "ws", "any_big",
                       F.col("w.nd").alias("nd"), "w.key", "w.nb_key")
               .toPandas())
    rows = []
    for (tgt, attr), g in per_bin.groupby(["tgt", "attr"], sort=True):
        top = g.loc[g["bin"].idxmax()]  # the witness: the highest bin's smallest struct
        rows.append({"tgt": tgt, "attr": attr, "D": float(g["D"].max()),
                     "vs": float(g["vs"].sum()), "hs": sum(int(x) for x in g["hs"]),
                     "ls": sum(int(x) for x in g["ls"]), "ws": sum(int(x) for x in g["ws"]),
                     "any_big": bool(g["any_big"].any()), "key": top["key"],
                     "nb_key": top["nb_key"]})
    cols = ["tgt", "attr", "D", "vs", "hs", "ls", "ws", "any_big", "key", "nb_key"]
    summary = _finish_summary(pd.DataFrame(rows, columns=cols))
    counts = per_bin[["tgt", "attr", "bin", "ws"]].rename(columns={"ws": "n"})
    return summary, counts
