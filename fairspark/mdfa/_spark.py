"""Spark side of mdfa: grouped statistics, the stratified capped sample, parallel splits.

Design (METHODS §2, design card)
--------------------------------
1. One ``groupBy(s, y).agg(...)`` over the prepared table gives the counts per s x y
   cell (rows and weights) and the sums and sums of squares of every description
   column, from which the driver derives the population means and standard deviations
   per group (paper Table 2, "Population") and the aggregate DI.
2. The sample is stratified by s x y with proportional allocation, capped at
   ``sample_rows``, drawn by fairspark's one sampler
   (:func:`fairspark.sampling.stratified_sample`): rows are ranked inside their cell
   by a seeded ``xxhash64`` of the row key (not ``rand``/``sampleBy``), so the sample
   does not depend on partitioning. Only the capped sample is collected.
3. The splits are independent: every split is one row of ``spark.range``; a
   ``mapInPandas`` with an explicit schema runs :func:`~.certify.run_split` on the
   broadcast sample with the split's own seed and one BLAS/torch thread. The result of
   a split depends on its seed only, so any partitioning gives the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from fairspark._shipping import Shipped as _Shipped
from fairspark._threads import single_thread
from fairspark.mdfa.certify import MDFASample, run_split
from fairspark.mdfa.params import MDFAParams
from fairspark.mdfa.results import GroupedStats, split_frame, split_schema
from fairspark.sampling import stratified_sample

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "S_COL",
    "Y_COL",
    "collect_sample",
    "grouped_stats",
    "run_splits",
    "run_splits_local",
    "with_mdfa_columns",
]

S_COL = "_mdfa_s"
Y_COL = "_mdfa_y"


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


def collect_sample(
    df: DataFrame,
    *,
    columns: Sequence[Column],
    key_col: str,
    counts: Mapping[tuple[int, int], int],
    cap: int,
    seed: int,
    s_col: str = S_COL,
    y_col: str = Y_COL,
) -> pd.DataFrame:
    """The sample stratified by s x y, proportional, at most ``cap`` rows, collected.

    The rows are drawn by :func:`fairspark.sampling.stratified_sample` (rank
    ``xxhash64(key, seed)`` inside each cell, largest-remainder quotas), so the sample
    is the same for any partitioning.

    Parameters
    ----------
    df:
        A table with the s and y columns and ``key_col``.
    columns:
        Column expressions to collect; ``_s``, ``_y``, ``_k`` (the key) and ``_h``
        (the rank) are added.
    key_col:
        The row key.
    counts:
        Rows per (s, y) cell (:meth:`~fairspark.mdfa.results.GroupedStats.cell_counts`).
    cap:
        Maximum rows collected.
    seed:
        Seed of the hash ranking.

    Returns
    -------
    pandas.DataFrame
        The sampled rows ordered by (s, y, rank, key).
    """
    from pyspark.sql import functions as F

    base = df.select(
        F.col(s_col).alias("_s"), F.col(y_col).alias("_y"), F.col(key_col).alias("_k"), *columns
    )
    picked = stratified_sample(
        base, strata=["_s", "_y"], key_col="_k", cap=cap, seed=seed, counts=counts,
        rank_col="_h",
    )
    pdf = picked.toPandas()
    return pdf.sort_values(["_s", "_y", "_h", "_k"], kind="mergesort").reset_index(drop=True)


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
        One row per split with the fields of
        :class:`~fairspark.mdfa.results.SplitResult` as columns, ordered by split.
    """
    n = len(seeds)
    parts = partitions or params.partitions or spark.sparkContext.defaultParallelism
    parts = max(1, min(int(parts), n))
    shipped = _Shipped(spark, (sample, params.model_dump(), [int(s) for s in seeds]))

    def task(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        from fairspark._testing import maybe_fail_first_attempt

        maybe_fail_first_attempt("mdfa")
        smp, pdict, sds = shipped.value
        p = MDFAParams(**pdict)
        # BLAS/OpenMP pools may already exist in a reused worker: limit them here
        with single_thread():
            for batch in batches:
                yield split_frame([run_split(smp, split=int(i), seed=sds[int(i)], params=p)
                                   for i in batch["id"]])

    try:
        out = (
            spark.range(0, n, 1, numPartitions=parts)
            .mapInPandas(task, schema=split_schema())
            .toPandas()
        )
    finally:
        shipped.release()
    return out.sort_values("split").reset_index(drop=True)


def run_splits_local(
    sample: MDFASample, *, seeds: Sequence[int], params: MDFAParams
) -> pd.DataFrame:
    """The same splits in a plain sequential loop on the driver (reference, benchmark)."""
    return split_frame(
        [run_split(sample, split=i, seed=int(sd), params=params) for i, sd in enumerate(seeds)]
    )
