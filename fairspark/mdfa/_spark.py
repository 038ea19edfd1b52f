"""Spark side of mdfa: grouped statistics, the stratified capped sample, parallel splits.

Design (METHODS §2, design card)
--------------------------------
1. One ``groupBy(s, y).agg(...)`` over the prepared table gives the counts per s x y
   cell (rows and weights) and the sums and sums of squares of every description
   column, from which the driver derives the population means and standard deviations
   per group (paper Table 2, "Population") and the aggregate DI.
2. The sample is stratified by s x y with proportional allocation, capped at
   ``sample_rows``. Rows are ranked inside their cell by a seeded ``xxhash64`` of the
   row key (not ``rand``/``sampleBy``), so the sample does not depend on partitioning.
   A first filter keeps about 1.2 x the quota per cell; the exact quota is then taken
   by rank. Only the capped sample is collected.
3. The splits are independent: every split is one row of ``spark.range``; a
   ``mapInPandas`` with an explicit schema runs :func:`~.certify.run_split` on the
   broadcast sample with the split's own seed and one BLAS/torch thread. The result of
   a split depends on its seed only, so any partitioning gives the same numbers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fairspark._shipping import Shipped as _Shipped
from fairspark.mdfa.certify import MDFASample, run_split
from fairspark.mdfa.params import MDFAParams

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "SPLIT_COLUMNS",
    "GroupedStats",
    "grouped_stats",
    "run_splits",
    "stratified_sample",
]

S_COL = "_mdfa_s"
Y_COL = "_mdfa_y"

#: columns (and Spark types) of one split's result
SPLIT_COLUMNS: list[tuple[str, str]] = [
    ("split", "int"),
    ("gamma_pos", "double"),
    ("gamma_neg", "double"),
    ("gamma_max", "double"),
    ("l2", "double"),
    ("mmd", "double"),
    ("y_wv", "int"),
    ("delta", "double"),
    ("delta_unweighted", "double"),
    ("dt_g", "double"),
    ("mass", "double"),
    ("t", "int"),
    ("trace", "string"),
    ("description", "string"),
    ("rules", "string"),
    ("rule_fidelity", "double"),
]


@dataclass
class GroupedStats:
    """Aggregates of one attribute over the whole audited table.

    Attributes
    ----------
    cells:
        One row per (s, y) with ``n`` (rows), ``w`` (weight sum) and, per description
        column ``j``, ``sum_j`` and ``sq_j``.
    desc_names:
        Names of the description columns.
    """

    cells: pd.DataFrame
    desc_names: list[str]

    def count(self, *, s: int | None = None, y: int | None = None, weighted: bool = False) -> float:
        """Rows (or weight) in the cells matching s and y (None: any)."""
        m = np.ones(len(self.cells), dtype=bool)
        if s is not None:
            m &= self.cells["s"].to_numpy() == s
        if y is not None:
            m &= self.cells["y"].to_numpy() == y
        return float(self.cells.loc[m, "w" if weighted else "n"].sum())

    def group_description(self, s: int) -> dict[str, Any]:
        """Means and standard deviations (population) of the description columns in group s."""
        c = self.cells[self.cells["s"] == s]
        n = float(c["n"].sum())
        if n == 0:
            return {"n": 0, "mean": None, "sd": None}
        means, sds = [], []
        for j in range(len(self.desc_names)):
            m = float(c[f"sum_{j}"].sum()) / n
            var = max(float(c[f"sq_{j}"].sum()) / n - m * m, 0.0)
            means.append(m)
            sds.append(var**0.5)
        return {"n": int(n), "mean": means, "sd": sds}

    def rate(self, *, s: int, y: int) -> float:
        """Weighted Pr[Y = y | S = s] (NaN for an empty group)."""
        den = self.count(s=s, weighted=True)
        return self.count(s=s, y=y, weighted=True) / den if den > 0 else float("nan")


def with_mdfa_columns(
    df: DataFrame, *, priv_col: str, prediction_col: str, target_group: str
) -> DataFrame:
    """Add ``_mdfa_s`` (+1 = target group) and ``_mdfa_y`` (+1 = favourable decision)."""
    from pyspark.sql import functions as F

    target = ~F.col(priv_col) if target_group == "unprivileged" else F.col(priv_col)
    return df.select(
        "*",
        F.when(target, F.lit(1)).otherwise(F.lit(-1)).alias(S_COL),
        F.when(F.col(prediction_col) >= F.lit(0.5), F.lit(1)).otherwise(F.lit(-1)).alias(Y_COL),
    )


def grouped_stats(
    df: DataFrame,
    *,
    desc_cols: Sequence[Column],
    desc_names: Sequence[str],
    weight_col: str | None = None,
    s_col: str = S_COL,
    y_col: str = Y_COL,
) -> GroupedStats:
    """One aggregation pass: counts, weights, sums and squares per s x y cell.

    Parameters
    ----------
    df:
        A table with the s and y columns (see :func:`with_mdfa_columns`).
    desc_cols, desc_names:
        Numeric column expressions to describe and their names.
    weight_col:
        Row-weight column, or None for weight 1.
    """
    from pyspark.sql import functions as F

    w = F.col(weight_col).cast("double") if weight_col else F.lit(1.0)
    aggs = [F.count(F.lit(1)).alias("n"), F.sum(w).alias("w")]
    for j, c in enumerate(desc_cols):
        v = c.cast("double")
        aggs += [F.sum(v).alias(f"sum_{j}"), F.sum(v * v).alias(f"sq_{j}")]
    rows = df.groupBy(F.col(s_col).alias("s"), F.col(y_col).alias("y")).agg(*aggs).collect()
    cells = pd.DataFrame([r.asDict() for r in rows])
    if cells.empty:
        cells = pd.DataFrame(columns=["s", "y", "n", "w"])
    cells = cells.fillna(0.0)
    return GroupedStats(cells=cells, desc_names=list(desc_names))


def _quotas(counts: dict[tuple[int, int], int], cap: int) -> dict[tuple[int, int], int]:
    """Proportional allocation of ``cap`` rows over the cells (largest remainder)."""
    total = sum(counts.values())
    if total <= cap:
        return dict(counts)
    raw = {k: cap * v / total for k, v in counts.items()}
    q = {k: int(np.floor(v)) for k, v in raw.items()}
    left = cap - sum(q.values())
    for k in sorted(raw, key=lambda k: (-(raw[k] - q[k]), k))[:left]:
        q[k] += 1
    return q


def stratified_sample(
    df: DataFrame,
    *,
    columns: Sequence[Column],
    key_col: str,
    cell_counts: dict[tuple[int, int], int],
    cap: int,
    seed: int,
    s_col: str = S_COL,
    y_col: str = Y_COL,
) -> pd.DataFrame:
    """The sample stratified by s x y, proportional, at most ``cap`` rows, collected.

    Rows are ranked inside their cell by ``xxhash64(key, seed)``; a cell's quota takes
    the lowest ranks, so the sample is the same for any partitioning.

    Parameters
    ----------
    df:
        A table with the s and y columns and ``key_col``.
    columns:
        Column expressions to collect (s and y are added).
    cell_counts:
        Rows per (s, y) cell (from :func:`grouped_stats`).
    cap:
        Maximum rows collected.
    seed:
        Seed of the hash ranking.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    quotas = _quotas(cell_counts, cap)
    h = F.pmod(F.xxhash64(F.col(key_col), F.lit(int(seed))), F.lit(1 << 30)) / F.lit(
        float(1 << 30)
    )
    base = df.select(
        F.col(s_col).alias("_s"),
        F.col(y_col).alias("_y"),
        h.alias("_h"),
        F.col(key_col).alias("_k"),
        *columns,
    )
    factor = 1.2
    while True:
        frac = F.lit(0.0)
        for (s, y), q in quotas.items():
            n = cell_counts[(s, y)]
            f = 1.0 if q >= n else min(1.0, factor * q / n + 50.0 / n)
            frac = F.when((F.col("_s") == s) & (F.col("_y") == y), F.lit(f)).otherwise(frac)
        kept = base.where(F.col("_h") < frac)
        got = {
            (int(r["_s"]), int(r["_y"])): int(r["count"])
            for r in kept.groupBy("_s", "_y").count().collect()
        }
        if all(got.get(k, 0) >= q for k, q in quotas.items()) or factor > 1e6:
            break
        factor *= 4
    win = Window.partitionBy("_s", "_y").orderBy("_h", "_k")
    limit = F.lit(0)
    for (s, y), q in quotas.items():
        limit = F.when((F.col("_s") == s) & (F.col("_y") == y), F.lit(q)).otherwise(limit)
    picked = (
        kept.select("*", F.row_number().over(win).alias("_rank"))
        .where(F.col("_rank") <= limit)
        .drop("_rank")
    )
    pdf = picked.toPandas()
    return pdf.sort_values(["_s", "_y", "_h", "_k"], kind="mergesort").reset_index(drop=True)


def _split_schema() -> str:
    return ", ".join(f"{n} {t}" for n, t in SPLIT_COLUMNS)


def _frame(rows: list[dict]) -> pd.DataFrame:
    cols = [n for n, _ in SPLIT_COLUMNS]
    pdf = pd.DataFrame(rows, columns=cols)
    for n, t in SPLIT_COLUMNS:
        if t == "double":
            pdf[n] = pd.to_numeric(pdf[n], errors="coerce").astype("float64")
        elif t == "int":
            pdf[n] = pd.array(pdf[n], dtype="Int32")
        else:
            pdf[n] = pdf[n].astype("object")
    return pdf


def run_splits(
    spark: SparkSession,
    sample: MDFASample,
    *,
    seeds: Sequence[int],
    params: MDFAParams,
    partitions: int | None = None,
) -> pd.DataFrame:
    """Run every split as a Spark task over the broadcast sample.

    Parameters
    ----------
    spark:
        The session.
    sample:
        The collected sample.
    seeds:
        One seed per split (split i uses ``seeds[i]``).
    params:
        Audit parameters.
    partitions:
        Number of tasks (default: the session's default parallelism).

    Returns
    -------
    pandas.DataFrame
        One row per split with the columns of :data:`SPLIT_COLUMNS`, ordered by split.
    """
    n = len(seeds)
    parts = partitions or params.partitions or spark.sparkContext.defaultParallelism
    parts = max(1, min(int(parts), n))
    shipped = _Shipped(spark, (sample, params.model_dump(), [int(s) for s in seeds]))

    def task(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(v, "1")
        from threadpoolctl import threadpool_limits

        from fairspark._testing import maybe_fail_first_attempt

        maybe_fail_first_attempt("mdfa")
        smp, pdict, sds = shipped.value
        p = MDFAParams(**pdict)
        # BLAS/OpenMP pools may already exist in a reused worker: limit them here
        with threadpool_limits(limits=1):
            for batch in batches:
                rows = [run_split(smp, split=int(i), seed=sds[int(i)], params=p)
                        for i in batch["id"]]
                yield _frame(rows)

    try:
        out = (
            spark.range(0, n, 1, numPartitions=parts)
            .mapInPandas(task, schema=_split_schema())
            .toPandas()
        )
    finally:
        shipped.release()
    return out.sort_values("split").reset_index(drop=True)


def run_splits_local(
    sample: MDFASample, *, seeds: Sequence[int], params: MDFAParams
) -> pd.DataFrame:
    """The same splits in a plain sequential loop on the driver (reference, benchmark)."""
    return _frame(
        [run_split(sample, split=i, seed=int(sd), params=params) for i, sd in enumerate(seeds)]
    )
