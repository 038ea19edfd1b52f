"""HFM distances on Spark: range-partitioned window scans with halos, exact searches.

Everything here takes a *points* DataFrame with the columns

``key`` (string), ``y`` (double, the label), ``yp`` (double, the prediction),
``x`` (array<double>, the scaled features), ``c0 .. c{A-1}`` (int group codes, one per
audited attribute/view)

and never collects raw rows: the driver only receives per-partition counts, capped
batches of candidate rows (certification) and small aggregates. The pandas UDFs run the
numpy kernels of :mod:`fairspark.hfm._kernels`.

Target ``tgt`` 0 is the label (D), 1 the prediction (D_f).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, Window
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
from fairspark.hfm._kernels import nn_other_group, window_scan

__all__ = [
    "CertifiedResult",
    "approx_scan",
    "block_nn",
    "certify",
    "exact_all",
    "points_schema_check",
    "pointwise_rows",
    "summarise_approx",
    "summarise_pointwise",
]

TARGETS = ("label", "prediction")


def _pin_threads() -> None:
    # one BLAS thread per task: Spark already runs one task per core
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        pass


def _code_cols(n_attr: int) -> list[str]:
    return [f"c{a}" for a in range(n_attr)]


def points_schema_check(pts: DataFrame, n_attr: int) -> None:
    """Raise ``ValueError`` naming the missing columns of a points DataFrame."""
    need = ["key", "y", "yp", "x", *_code_cols(n_attr)]
    missing = [c for c in need if c not in pts.columns]
    if missing:
        raise ValueError(f"points DataFrame lacks columns {missing}; has {pts.columns}")


def _stack(col: pd.Series, dim_x: int) -> np.ndarray:
    if len(col) == 0:
        return np.zeros((0, dim_x))
    return np.vstack(col.to_numpy()).astype(np.float64, copy=False).reshape(len(col), dim_x)


def _keys_at(keys: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Keys at indices; ``None`` where the index is -1 (no neighbour)."""
    out = np.full(idx.shape[0], None, dtype=object)
    ok = idx >= 0
    out[ok] = np.asarray(keys, dtype=object)[idx[ok]]
    return out


def _sort_order(g: np.ndarray, keys: np.ndarray) -> np.ndarray:
    return np.lexsort((np.asarray(keys, dtype=str), g))


def _g_expr() -> F.Column:
    # t*w0 + (((0 + x1 w1) + x2 w2) + ...): the summation order of kernels.project
    tail = F.expr(
        "aggregate(zip_with(x, slice(w, 2, size(w) - 1), (a, b) -> a * b), 0D, (acc, v) -> acc + v)"
    )
    return F.col("t") * F.col("w")[0] + tail


# --------------------------------------------------------------------------- approx
def _exploded(pts: DataFrame, projections: dict[int, np.ndarray], n_attr: int) -> DataFrame:
    spark = pts.sparkSession
    rows = [
        (int(tgt), int(j), [float(v) for v in w])
        for tgt, W in projections.items()
        for j, w in enumerate(W)
    ]
    proj_df = spark.createDataFrame(rows, "tgt int, proj int, w array<double>")
    return (
        pts.select("key", "y", "yp", "x", *_code_cols(n_attr))
        .crossJoin(F.broadcast(proj_df))
        .withColumn("t", F.when(F.col("tgt") == 0, F.col("y")).otherwise(F.col("yp")))
        .withColumn("g", _g_expr())
        .select("tgt", "proj", "key", "t", "x", "g", *_code_cols(n_attr))
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
            *[StructField(c, IntegerType()) for c in _code_cols(n_attr)],
            StructField("attr", IntegerType()),
            StructField("code", IntegerType()),
            StructField("side", StringType()),
            StructField("rnk", IntegerType()),
            StructField("cnt", IntegerType()),
        ]
    )


def _make_summary_fn(n_attr: int, m2: int):
    cols = _code_cols(n_attr)

    def summary(pdf: pd.DataFrame) -> pd.DataFrame:
        """First and last m2 rows of each (attribute, code) of one sorted partition."""
        order = _sort_order(pdf["g"].to_numpy(), pdf["key"].to_numpy())
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


_SCAN_SCHEMA = "tgt int, proj int, attr int, key string, d double, nb_key string"


def _make_scan_fn(n_attr: int, m2: int, dim_x: int):
    cols = _code_cols(n_attr)

    def scan(pdf: pd.DataFrame) -> pd.DataFrame:
        """AcceleDist on one range partition (its rows plus its halo rows)."""
        _pin_threads()
        maybe_fail_first_attempt("hfm")
        order = _sort_order(pdf["g"].to_numpy(), pdf["key"].to_numpy())
        pdf = pdf.iloc[order].reset_index(drop=True)
        pts = np.column_stack([pdf["t"].to_numpy(np.float64), _stack(pdf["x"], dim_x)])
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
                        "nb_key": _keys_at(keys, nb[sel]),
                    }
                )
            )
        return pd.concat(outs, ignore_index=True)

    return scan


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
        Points DataFrame (see module docstring).
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
    cols = _code_cols(n_attr)
    ex = _with_pid(_exploded(pts, projections, n_attr), num_partitions)
    summary = ex.groupBy("tgt", "proj", "pid").applyInPandas(
        _make_summary_fn(n_attr, m2), _summary_schema(n_attr)
    )
    if num_partitions > 1:
        summary = summary.persist()
        if persisted is not None:
            persisted.append(summary)
        counts = (
            summary.select("tgt", "proj", "pid", "attr", "code", "cnt").distinct().toPandas()
        )
        assign = _halo_assignments(counts, m2)
    else:
        assign = []
    base_cols = ["tgt", "proj", "pid", "key", "t", "x", "g", *cols]
    main = ex.select(*base_cols).withColumn("halo", F.lit(False))
    if assign:
        spark = pts.sparkSession
        assign_df = spark.createDataFrame(
            assign,
            "tgt int, proj int, attr int, code int, src int, side string, take int, dst int",
        )
        halo = (
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


def summarise_pointwise(rows_df: DataFrame, value_col: str = "ub") -> pd.DataFrame:
    """Max and row-weighted mean of a per-row distance, with the witness of the max.

    Returns ``tgt, attr, D, D_avg, key, nb_key``.
    """
    return (
        rows_df.groupBy("tgt", "attr")
        .agg(
            F.max(value_col).alias("D"),
            (F.sum(F.col(value_col) * F.col("mult")) / F.sum("mult")).alias("D_avg"),
            F.min(F.struct((-F.col(value_col)).alias("nd"), "key", "nb_key")).alias("w"),
        )
        .select("tgt", "attr", "D", "D_avg", "w.key", "w.nb_key")
        .toPandas()
    )


# --------------------------------------------------------------------------- exact
def _points_of(pdf: pd.DataFrame, tgt: int, dim_x: int) -> np.ndarray:
    t = pdf["y"] if tgt == 0 else pdf["yp"]
    return np.column_stack([t.to_numpy(np.float64), _stack(pdf["x"], dim_x)])


_EXACT_SCHEMA = "tgt int, attr int, key string, d double, nb_key string"


def _nn_frame(tgt: int, attr: int, keys, d: np.ndarray, nb: np.ndarray) -> pd.DataFrame:
    n = len(keys)
    return pd.DataFrame({
        "tgt": np.full(n, tgt, dtype=np.int32), "attr": np.full(n, attr, dtype=np.int32),
        "key": pd.Series(np.asarray(keys, dtype=object), dtype=object),
        "d": np.asarray(d, dtype=np.float64),
        "nb_key": pd.Series(np.asarray(nb, dtype=object), dtype=object),
    })


def block_nn(
    queries: DataFrame,
    refs: DataFrame,
    *,
    n_attr: int,
    dim_x: int,
    n_qblocks: int,
    n_rblocks: int,
    targets: tuple[int, ...] = (0, 1),
) -> DataFrame:
    """Exact nn-other-group of query rows among reference rows: block nested loop.

    Rows are hashed into blocks by key; each (query block, reference block) pair is one
    cogroup task holding two blocks (memory per task ~ two blocks of rows). When the
    queries carry ``q_tgt`` and ``q_attr``, each query row is searched only for that
    (target, attribute); otherwise for every target and attribute.

    Returns
    -------
    DataFrame
        ``tgt, attr, key, d, nb_key`` per query row and reference block (not collected;
        take the minimum per query).
    """
    cols = _code_cols(n_attr)
    per_query = "q_tgt" in queries.columns
    qcols = ["key", "y", "yp", "x", *cols, *(["q_tgt", "q_attr"] if per_query else [])]
    rseq = F.explode(F.sequence(F.lit(0), F.lit(n_rblocks - 1)))
    qseq = F.explode(F.sequence(F.lit(0), F.lit(n_qblocks - 1)))
    # fresh column ids on both sides: queries are often derived from refs (a self-join
    # otherwise, which the analyzer may reject or resolve to the wrong side)
    left = (
        queries.select(*[F.col(c).alias(c) for c in qcols])
        .withColumn("qb", F.pmod(F.xxhash64("key"), F.lit(n_qblocks)).cast("int"))
        .withColumn("rb", rseq)
    )
    right = (
        refs.select(*[F.col(c).alias(c) for c in ("key", "y", "yp", "x", *cols)])
        .withColumn("rb", F.pmod(F.xxhash64("key"), F.lit(n_rblocks)).cast("int"))
        .withColumn("qb", qseq)
    )

    def block_pair(qdf: pd.DataFrame, rdf: pd.DataFrame) -> pd.DataFrame:
        _pin_threads()
        maybe_fail_first_attempt("hfm")
        if len(qdf) == 0:
            return _nn_frame(0, 0, [], np.zeros(0), np.zeros(0, dtype=object))
        if len(rdf) == 0:  # an empty reference block: queries still count once per block
            rdf = qdf.iloc[:0]
        rdf = rdf.iloc[np.argsort(rdf["key"].to_numpy(dtype=str), kind="stable")]
        rkeys = rdf["key"].to_numpy()
        outs = []
        for tgt in targets:
            R = _points_of(rdf, tgt, dim_x)
            for a, c in enumerate(cols):
                sub = qdf
                if per_query:
                    sub = qdf[(qdf["q_tgt"] == tgt) & (qdf["q_attr"] == a)]
                    if len(sub) == 0:
                        continue
                Q = _points_of(sub, tgt, dim_x)
                d, idx = nn_other_group(Q, sub[c].to_numpy(), R, rdf[c].to_numpy())
                outs.append(_nn_frame(tgt, a, sub["key"].to_numpy(), d, _keys_at(rkeys, idx)))
        if not outs:
            return _nn_frame(0, 0, [], np.zeros(0), np.zeros(0, dtype=object))
        return pd.concat(outs, ignore_index=True)

    return (
        left.groupBy("qb", "rb")
        .cogroup(right.groupBy("qb", "rb"))
        .applyInPandas(block_pair, _EXACT_SCHEMA)
    )


def exact_all(
    pts: DataFrame,
    *,
    n_attr: int,
    dim_x: int,
    n_blocks: int,
    targets: tuple[int, ...] = (0, 1),
) -> DataFrame:
    """Exact nn-other-group of every row (:func:`block_nn` of the table with itself).

    Returns
    -------
    DataFrame
        ``tgt, attr, key, d, nb_key, mult`` per distinct key (not collected); ``mult`` is
        the number of rows sharing the key.
    """
    points_schema_check(pts, n_attr)
    per_pair = block_nn(pts, pts, n_attr=n_attr, dim_x=dim_x, n_qblocks=n_blocks,
                        n_rblocks=n_blocks, targets=targets)
    return (
        per_pair.groupBy("tgt", "attr", "key")
        .agg(F.min(F.struct("d", "nb_key")).alias("m"), F.count(F.lit(1)).alias("n"))
        .select(
            "tgt", "attr", "key", F.col("m.d").alias("d"), F.col("m.nb_key").alias("nb_key"),
            (F.col("n") / F.lit(n_blocks)).alias("mult"),
        )
    )


# --------------------------------------------------------------------------- certified
@dataclass
class CertifiedResult:
    """Outcome of certification for one (target, attribute)."""

    lower: float
    upper: float
    certified: bool
    n_searched: int
    key: str | None = None
    nb_key: str | None = None
    steps: list[tuple[int, float, float]] = field(default_factory=list)
    n_above: int | None = None


def certify(
    pts: DataFrame,
    ub_rows: DataFrame,
    *,
    n_attr: int,
    dim_x: int,
    n_rows: int,
    pairs: list[tuple[int, int]],
    max_candidates: int,
    block_rows: int = 20_000,
    first_batch: int = 1024,
    on_step: Callable[[dict[tuple[int, int], CertifiedResult]], None] | None = None,
) -> dict[tuple[int, int], CertifiedResult]:
    """Exact D from per-row upper bounds plus exact searches for few rows (METHODS §1).

    Rows are taken in decreasing upper bound; each exact ``nn`` raises the lower bound;
    rows whose upper bound is at most the lower bound can be discarded. The loop stops
    when no row left has ``ub > lower`` (certified: lower = upper = D) or when the next
    batch would exceed ``max_candidates`` exact searches (not certified; the interval is
    ``[lower, upper]``). Candidates never travel to the driver: each step selects them
    with a window rank and searches them with :func:`block_nn`; the driver receives a
    few numbers per (target, attribute).

    Parameters
    ----------
    pts : DataFrame
        Points DataFrame.
    ub_rows : DataFrame
        From :func:`pointwise_rows` (``tgt, attr, key, ub``); persisted by the caller.
    n_attr, dim_x, n_rows : int
        Number of code columns, feature length, rows of ``pts``.
    pairs : list of (tgt, attr)
        What to certify.
    max_candidates : int
        Cap on exact searches per (tgt, attr).
    block_rows : int
        Rows per block of the exact search.
    first_batch : int
        Rows planned for the first step; each later step plans four times more. When
        the rows left with ``ub`` above the lower bound are at most twice the planned
        batch, the step searches all of them (within ``max_candidates``), which saves
        the step that would otherwise search the rest.
    on_step : callable, optional
        Called after every step with the current ``(tgt, attr) -> CertifiedResult``
        (the interval so far; ``certified`` only where it has collapsed), so a caller
        can keep the best interval when a time budget cuts the loop.

    Returns
    -------
    dict
        ``(tgt, attr) -> CertifiedResult``; ``steps`` lists ``(n_searched, lower, upper)``.
    """
    n_rblocks = max(1, math.ceil(n_rows / block_rows))
    state: dict[tuple[int, int], dict] = {
        p: {"lb": -math.inf, "cursor": None, "n": 0, "batch": first_batch, "done": False,
            "certified": False, "ub_rem": math.inf, "best": (None, None), "steps": []}
        for p in pairs
    }
    by_pair = Window.partitionBy("tgt", "attr")
    rank = F.row_number().over(by_pair.orderBy(F.col("ub").desc(), F.col("key").asc()))
    while True:
        for st in state.values():
            if not st["done"] and st["n"] >= max_candidates:
                st["done"] = True
        active = [p for p, st in state.items() if not st["done"]]
        if not active:
            break
        cond = F.lit(False)
        plan_col = F.lit(0)
        cap_col = F.lit(0)
        for p in active:
            st, (tgt, attr) = state[p], p
            c = (F.col("tgt") == tgt) & (F.col("attr") == attr)
            if math.isfinite(st["lb"]):
                c &= F.col("ub") > F.lit(st["lb"])
            if st["cursor"] is not None:
                cu, ck = st["cursor"]
                after = (F.col("ub") == F.lit(cu)) & (F.col("key") > F.lit(ck))
                c &= (F.col("ub") < F.lit(cu)) | after
            cond |= c
            is_p = (F.col("tgt") == tgt) & (F.col("attr") == attr)
            left = max_candidates - st["n"]
            plan_col = F.when(is_p, F.lit(min(st["batch"], left))).otherwise(plan_col)
            cap_col = F.when(is_p, F.lit(left)).otherwise(cap_col)
        # rows still above the lower bound ("rest"): when they are at most twice the
        # planned batch, search them all now (one step instead of two)
        rest = F.count(F.lit(1)).over(by_pair)
        size_col = F.least(
            F.col("cap"), F.when(F.col("rest") <= 2 * F.col("plan"), F.col("rest"))
            .otherwise(F.col("plan"))
        )
        ranked = (
            ub_rows.where(cond)
            .select("tgt", "attr", "key", "ub")
            .withColumn("rn", rank)
            .withColumn("rest", rest)
            .withColumn("plan", plan_col)
            .withColumn("cap", cap_col)
            .withColumn("size", size_col)
            .where(F.col("rn") <= F.col("size") + 1)
            .persist()
        )
        try:
            info = (
                ranked.groupBy("tgt", "attr")
                .agg(
                    F.sum(F.when(F.col("rn") <= F.col("size"), 1).otherwise(0)).alias("n"),
                    F.max_by(F.struct("ub", "key"),
                             F.when(F.col("rn") <= F.col("size"), F.col("rn"))).alias("last"),
                    F.max(F.when(F.col("rn") == F.col("size") + 1, F.col("ub"))).alias("rem"),
                )
                .toPandas()
            )
            got = {(int(r.tgt), int(r.attr)): r for r in info.itertuples()}
            searching = []
            for p in active:
                st = state[p]
                r = got.get(p)
                if r is None or int(r.n) == 0:
                    st["done"], st["certified"], st["ub_rem"] = True, True, -math.inf
                    continue
                st["ub_rem"] = -math.inf if pd.isna(r.rem) else float(r.rem)
                st["cursor"] = (float(r.last["ub"]), str(r.last["key"]))
                st["n"] += int(r.n)
                st["batch"] *= 4
                searching.append(p)
            if not searching:
                break
            n_q = sum(int(got[p].n) for p in searching)
            queries = (
                ranked.where(F.col("rn") <= F.col("size"))
                .select(F.col("tgt").alias("q_tgt"), F.col("attr").alias("q_attr"), "key")
                # join first, then drop duplicated keys among the few joined rows: a
                # dropDuplicates of pts would aggregate the whole table every step
                .join(pts.select("key", "y", "yp", "x", *_code_cols(n_attr)), on="key",
                      how="inner")
                .dropDuplicates(["q_tgt", "q_attr", "key"])
            )
            found = (
                block_nn(queries, pts, n_attr=n_attr, dim_x=dim_x,
                         n_qblocks=max(1, math.ceil(n_q / block_rows)), n_rblocks=n_rblocks,
                         targets=tuple(sorted({p[0] for p in searching})))
                .groupBy("tgt", "attr", "key")
                .agg(F.min(F.struct("d", "nb_key")).alias("m"))
                .groupBy("tgt", "attr")
                .agg(F.min(F.struct((-F.col("m.d")).alias("nd"), F.col("key"),
                                    F.col("m.nb_key").alias("nb_key"))).alias("w"))
                .select("tgt", "attr", (-F.col("w.nd")).alias("d"), "w.key", "w.nb_key")
                .toPandas()
            )
        finally:
            ranked.unpersist()
        for r in found.itertuples():
            st = state[(int(r.tgt), int(r.attr))]
            d = float(r.d)
            if d > st["lb"] or (d == st["lb"] and r.key < (st["best"][0] or "\uffff")):
                st["lb"] = d
                st["best"] = (r.key, r.nb_key)
        for p in searching:
            st = state[p]
            st["steps"].append((st["n"], st["lb"], max(st["lb"], st["ub_rem"])))
            if st["ub_rem"] <= st["lb"]:
                st["done"], st["certified"] = True, True
        if on_step is not None:
            on_step({p: _certified_result(st) for p, st in state.items()})
    # rows whose upper bound exceeds the final lower bound: those that truly needed an
    # exact search (the batches may have searched more)
    above = F.lit(False)
    for (tgt, attr), st in state.items():
        if math.isfinite(st["lb"]):
            above |= (F.col("tgt") == tgt) & (F.col("attr") == attr) & (F.col("ub") > st["lb"])
    n_above = {
        (int(r["tgt"]), int(r["attr"])): int(r["n"])
        for r in ub_rows.where(above).groupBy("tgt", "attr").count()
        .withColumnRenamed("count", "n").collect()
    }
    return {p: _certified_result(st, n_above=n_above.get(p, 0)) for p, st in state.items()}


def _certified_result(st: dict, *, n_above: int | None = None) -> CertifiedResult:
    upper = st["lb"] if st["certified"] else max(st["lb"], st["ub_rem"])
    return CertifiedResult(
        lower=st["lb"], upper=upper, certified=st["certified"], n_searched=st["n"],
        key=st["best"][0], nb_key=st["best"][1], steps=list(st["steps"]), n_above=n_above,
    )
