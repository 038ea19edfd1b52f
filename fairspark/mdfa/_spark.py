"""Spark side of mdfa: grouped statistics, the stratified capped sample, parallel splits.

Design (after Gitiaux and Rangwala, 2019)
-----------------------------------------
1. One ``groupBy(s, y).agg(...)`` over the prepared table gives the counts per s x y
   cell (rows and weights) and the sums and sums of squares of every description
   column, from which the driver derives the population means and standard deviations
   per group (paper Table 2, "Population") and the aggregate DI.
2. The sample is stratified by s x y with proportional allocation, capped at
   ``sample_rows``, drawn by fairspark's one sampler
   (:func:`fairspark.sampling.stratified_sample`): rows are ranked inside their cell
   by a seeded ``xxhash64`` of the row key (not ``rand``/``sampleBy``), so the sample
   does not depend on partitioning. Only the capped sample is collected.
   With several attribute views (:func:`view_stats`, :func:`view_samples`) the
   statistics of every view come from one ``groupBy`` over all the views' s columns
   and y (each view's cells are margins of it), and the samples of every view from one
   pre-filtered collect: a row is kept when it ranks below its cell's pre-filter in
   any view, and the driver takes each view's exact lowest-ranked quota from the kept
   rows. The rows are those :func:`collect_sample` draws view by view.
3. The splits are independent: they are dealt round-robin to a fixed number of
   chunks (split ``i`` to chunk ``i mod C``, one split per chunk by default, so that a
   core slowed down by another tenant does not hold up the end and the status tracker
   counts finished splits) by the one task fan-out (:func:`fairspark._fanout.fan_out`,
   shared with the correlation audit's rounds), each chunk one row and
   one partition of ``spark.range(C)``; a ``mapInPandas`` with an explicit schema runs
   :func:`~.certify.run_split` on the chunk's splits over the broadcast sample (read
   once per Python worker), with the split's own seed and one BLAS/OpenMP/torch
   thread. The result of a split depends on its seed only, so any number of chunks
   gives the same numbers.

References
----------
.. [1] X. Gitiaux and H. Rangwala, "Multi-Differential Fairness Auditor for Black Box
   Classifiers", arXiv:1903.07609, 2019.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fairspark._fanout import chunk_ids, fan_out, n_chunks
from fairspark._shipping import Shipped as _Shipped
from fairspark.mdfa.certify import MDFASample, run_split
from fairspark.mdfa.params import MDFAParams
from fairspark.mdfa.results import GroupedStats, split_frame, split_schema
from fairspark.sampling import (
    BUCKETS,
    hash_bucket,
    per_stratum,
    prefilter_fractions,
    stratified_sample,
    stratum_quotas,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "S_COL",
    "YB_COL",
    "Y_COL",
    "chunk_splits",
    "collect_sample",
    "grouped_stats",
    "run_splits",
    "run_splits_local",
    "s_column",
    "view_samples",
    "view_stats",
    "with_mdfa_columns",
    "y_column",
]

#: about the most rows one pass of :func:`view_samples` collects: the views of a
#: nightly (three samples of the default 50,000 rows) share one pass, and more views
#: take more passes rather than more driver memory
GATHER_ROWS = 200_000

S_COL = "_mdfa_s"
Y_COL = "_mdfa_y"
#: the baseline decision (``columns.baseline``) as ``+1``/``-1``, beside ``_mdfa_y``
YB_COL = "_mdfa_yb"


def with_mdfa_columns(
    df: DataFrame, *, priv_col: str, prediction_col: str, target_group: str
) -> DataFrame:
    """Add ``_mdfa_s`` (+1 = target group) and ``_mdfa_y`` (+1 = favourable decision)."""

    return df.select(
        "*",
        s_column(priv_col=priv_col, target_group=target_group).alias(S_COL),
        y_column(prediction_col).alias(Y_COL),
    )


def y_column(prediction_col: str) -> Column:
    """``+1`` on the rows with a favourable decision (the prepared 0/1 column), else
    ``-1``."""
    from pyspark.sql import functions as F

    return F.when(F.col(prediction_col) >= F.lit(0.5), F.lit(1)).otherwise(F.lit(-1))


def s_column(*, priv_col: str, target_group: str) -> Column:
    """``+1`` on the rows of the target group, ``-1`` elsewhere (a null privilege
    flag counts as the other group)."""
    from pyspark.sql import functions as F

    target = ~F.col(priv_col) if target_group == "unprivileged" else F.col(priv_col)
    return F.when(target, F.lit(1)).otherwise(F.lit(-1))


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

    aggs = _cell_aggs(desc_cols, weight_col)
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


def _cell_aggs(desc_cols: Sequence[Column], weight_col: str | None) -> list[Column]:
    """The aggregates of one (s, y) cell: rows ``n``, weight ``w``, and per description
    column ``j`` its sum ``sum_j`` and sum of squares ``sq_j``."""
    from pyspark.sql import functions as F

    w = F.col(weight_col).cast("double") if weight_col else F.lit(1.0)
    aggs = [F.count(F.lit(1)).alias("n"), F.sum(w).alias("w")]
    for j, c in enumerate(desc_cols):
        v = c.cast("double")
        aggs += [F.sum(v).alias(f"sum_{j}"), F.sum(v * v).alias(f"sq_{j}")]
    return aggs


def view_stats(
    df: DataFrame,
    *,
    views: Mapping[str, Column],
    desc_cols: Sequence[Column],
    desc_names: Sequence[str],
    weight_col: str | None = None,
    y_col: str = Y_COL,
    base_col: str | None = None,
) -> dict[str, GroupedStats]:
    """:func:`grouped_stats` of every view from one aggregation pass.

    One ``groupBy`` over every view's s column and y gives at most
    ``2^len(views) x 2`` cells; each view's (s, y) cells are sums of them. With
    ``base_col`` (the baseline decision, ``+1``/``-1``) the same ``groupBy`` also keeps
    it, and each view's :attr:`~fairspark.mdfa.results.GroupedStats.baseline` holds the
    (s, baseline decision) cells: still one pass.

    Parameters
    ----------
    df:
        A table with the y column.
    views:
        View name to its s column (``+1``/``-1``, :func:`s_column`); at most 12 views.
    desc_cols, desc_names, weight_col:
        As in :func:`grouped_stats`.
    y_col, base_col:
        The audited decision's y column and the baseline decision's (None: none).

    Returns
    -------
    dict
        View name to its :class:`~fairspark.mdfa.results.GroupedStats`.
    """
    from pyspark.sql import functions as F

    names = list(views)
    if len(names) > 12:
        raise ValueError(f"view_stats takes at most 12 views at a time, got {len(names)}")
    keys = [c.alias(f"_s{i}") for i, c in enumerate(views.values())]
    keys.append(F.col(y_col).alias("y"))
    if base_col is not None:
        keys.append(F.col(base_col).alias("_yb"))
    aggs = _cell_aggs(desc_cols, weight_col)
    rows = df.groupBy(*keys).agg(*aggs).collect()
    cells = pd.DataFrame([r.asDict() for r in rows])
    value_cols = ["n", "w"] + [f"{p}_{j}" for j in range(len(desc_cols)) for p in ("sum", "sq")]

    def margin(i: int, y: str) -> GroupedStats:
        if cells.empty:
            part = pd.DataFrame(columns=["s", "y", "n", "w"])
        else:
            part = (cells.fillna({c: 0.0 for c in value_cols[1:]})
                    .groupby([f"_s{i}", y], sort=True)[value_cols].sum()
                    .reset_index().rename(columns={f"_s{i}": "s", y: "y"}))
        return GroupedStats(cells=part.fillna(0.0), desc_names=list(desc_names))

    out = {}
    for i, name in enumerate(names):
        out[name] = margin(i, "y")
        if base_col is not None:
            out[name].baseline = margin(i, "_yb")
    return out


def view_samples(
    df: DataFrame,
    *,
    views: Mapping[str, tuple[Column, int, Mapping[tuple[int, int], int]]],
    columns: Sequence[Column],
    key_col: str,
    cap: int,
    y_col: str = Y_COL,
) -> dict[str, pd.DataFrame]:
    """:func:`collect_sample` of every view, from one pre-filtered collect per
    :data:`GATHER_ROWS` rows of samples.

    A row is collected when, in some view, its rank ``xxhash64(key, seed)`` falls below
    its (s, y) cell's pre-filter (:func:`fairspark.sampling.prefilter_fractions`, about
    1.2 quotas). A view's cell then holds every row of the table that ranks below the
    pre-filter; when those are at least its quota, the quota's lowest-ranked rows among
    the collected ones are the table's, so the sample equals :func:`collect_sample`'s.
    A view whose pre-filter fell short (unlikely) is drawn again on its own.

    Parameters
    ----------
    df:
        A table with the y column and ``key_col``.
    views:
        View name to (its s column, the seed of its ranking, its rows per (s, y) cell).
    columns, key_col, cap:
        As in :func:`collect_sample`.

    Returns
    -------
    dict
        View name to its sample, with the columns and order of :func:`collect_sample`.
    """
    names = list(views)
    per_pass = max(1, GATHER_ROWS // max(int(cap), 1))
    out: dict[str, pd.DataFrame] = {}
    for start in range(0, len(names), per_pass):
        part = {n: views[n] for n in names[start:start + per_pass]}
        out.update(_view_samples_pass(df, views=part, columns=columns, key_col=key_col,
                                      cap=cap, y_col=y_col))
    return out


def _view_samples_pass(
    df: DataFrame,
    *,
    views: Mapping[str, tuple[Column, int, Mapping[tuple[int, int], int]]],
    columns: Sequence[Column],
    key_col: str,
    cap: int,
    y_col: str,
) -> dict[str, pd.DataFrame]:
    """One pass of :func:`view_samples`."""
    from pyspark.sql import functions as F

    sel = [F.col(y_col).alias("_y"), F.col(key_col).alias("_k"), *columns]
    plans = []
    for i, (s_col, seed, counts) in enumerate(views.values()):
        sel += [s_col.alias(f"_s{i}"),
                (hash_bucket(key_col, seed) / F.lit(float(BUCKETS))).alias(f"_h{i}")]
        counts = {k: int(v) for k, v in counts.items()}
        if sum(counts.values()) <= cap:  # the whole view is its sample
            quotas, frac = dict(counts), {k: 1.0 for k in counts}
        else:
            quotas = stratum_quotas(counts, cap)
            frac = prefilter_fractions(counts, quotas)
        plans.append((quotas, frac))
    base = df.select(*sel)
    keep = F.lit(False)
    for i, (_q, frac) in enumerate(plans):
        keep = keep | (F.col(f"_h{i}") < per_stratum([f"_s{i}", "_y"], frac, 0.0))
    kept = base.where(keep).toPandas()
    data = [c for c in kept.columns if c not in ("_y", "_k") and not c.startswith(("_s", "_h"))]
    out: dict[str, pd.DataFrame] = {}
    for i, name in enumerate(views):
        quotas, frac = plans[i]
        s, h = kept[f"_s{i}"].to_numpy(), kept[f"_h{i}"].to_numpy(float)
        picked: list | None = []
        for (cs, cy), q in quotas.items():
            cell = (s == cs) & (kept["_y"].to_numpy() == cy)
            below = cell & (h < frac[(cs, cy)])
            if int(below.sum()) < q:
                picked = None
                break
            rows = kept.loc[below, ["_k"]].assign(_h=h[below])
            picked.append(rows.sort_values(["_h", "_k"], kind="mergesort").index[:q])
        if picked is None:  # the pre-filter fell short in a cell: draw this view alone
            s_col, seed, counts = views[name]
            out[name] = collect_sample(df.withColumn(S_COL, s_col), columns=columns,
                                       key_col=key_col, counts=counts, cap=cap, seed=seed,
                                       y_col=y_col)
            continue
        idx = np.concatenate([np.asarray(p) for p in picked]) if picked else np.array([], int)
        pdf = pd.DataFrame({"_s": s[idx], "_y": kept["_y"].to_numpy()[idx],
                            "_k": kept["_k"].to_numpy()[idx]})
        for c in data:
            pdf[c] = kept[c].to_numpy()[idx]
        pdf["_h"] = h[idx]
        out[name] = pdf.sort_values(["_s", "_y", "_h", "_k"], kind="mergesort").reset_index(
            drop=True)
    return out


def run_splits(
    spark: SparkSession,
    sample: MDFASample,
    *,
    seeds: Sequence[int],
    params: MDFAParams,
    partitions: int | None = None,
    profile: list[dict[str, Any]] | None = None,
    first: int = 0,
    on_progress: Callable[[int, int], None] | None = None,
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
        Number of tasks (chunks of splits; default ``params.advanced.partitions``, else one
        task per split); the results do not depend on it.
    profile:
        A list to which every task appends its timings (``chunk``, ``splits``,
        ``pid``, ``worker_tasks_before`` (0 = a fresh Python worker), wall-clock
        ``start``/``end`` epoch seconds, ``ship_s``, ``run_s`` and its CPU seconds
        ``run_cpu_s``, ``serialise_s``) and
        then the driver's ``{"submit", "collected"}``; None records nothing.
    first:
        Number of the first split (``seeds[i]`` is split ``first + i``: a later wave of
        splits continues the numbering, which picks each split's null draw).
    on_progress:
        Called with (splits done, splits) from a driver thread while the job runs (at
        most every few seconds, from Spark's status tracker); None: not followed.

    Returns
    -------
    pandas.DataFrame
        One row per split with the fields of
        :class:`~fairspark.mdfa.results.SplitResult` as columns, ordered by split.
    """
    import time

    n = len(seeds)
    parts = partitions or params.advanced.partitions or n  # one split a task: progress in splits
    chunks = n_chunks(n, int(parts))
    shipped = _Shipped(spark, (sample, params.model_dump(), [int(s) for s in seeds]))
    t_submit = time.time()

    def tick(done_tasks: int, tasks: int) -> None:
        if on_progress is not None:  # a task holds ceil or floor of n / chunks splits
            on_progress(min(n, round(done_tasks * n / max(tasks, 1))), n)

    try:
        out = fan_out(spark, chunks=chunks, work=_SplitsWork(shipped, n, chunks, first),
                      schema=split_schema(), tag="mdfa",
                      profile_row=_profile_row if profile is not None else None,
                      on_tasks=tick if on_progress is not None else None)
    finally:
        shipped.release()
    if profile is not None:
        prof = out["split"] < 0
        profile.extend(json.loads(v) for v in out.loc[prof, _PROFILE_COL])
        profile.append({"submit": t_submit, "collected": time.time(), "chunks": chunks})
        out = out[~prof]
    return out.sort_values("split").reset_index(drop=True)


#: string column of the split table that carries a task's timings (``split = -1``)
_PROFILE_COL = "trace"


def chunk_splits(n: int, chunks: int, chunk: int) -> list[int]:
    """Splits of chunk ``chunk`` of ``chunks``: ``chunk, chunk + chunks, ...`` below ``n``
    (:func:`fairspark._fanout.chunk_ids`)."""
    return [int(i) for i in chunk_ids(n, chunks, chunk)]


class _SplitsWork:
    """A task's work: the splits of one chunk over the shipped sample."""

    def __init__(self, shipped: _Shipped, n: int, chunks: int, first: int) -> None:
        self.shipped, self.n, self.chunks, self.first = shipped, n, chunks, first

    def __call__(self, chunk: int) -> tuple[pd.DataFrame, dict[str, Any]]:
        import time

        t0 = time.perf_counter()
        smp, pdict, sds = self.shipped.value  # the broadcast, once per worker
        p = MDFAParams(**pdict)
        t1 = time.perf_counter()
        ids = chunk_splits(self.n, self.chunks, chunk)
        c1 = time.process_time()
        frame = split_frame([run_split(smp, split=self.first + i, seed=sds[i], params=p)
                             for i in ids])
        t2, c2 = time.perf_counter(), time.process_time()
        return frame, {"splits": len(ids), "ship_s": t1 - t0, "run_s": t2 - t1,
                       "run_cpu_s": c2 - c1}


def _profile_row(info: dict[str, Any]) -> pd.DataFrame:
    """A task's timings as one row of the split table (``split = -1``)."""
    row = split_frame([]).reindex([0])
    row["split"] = pd.array([-1], dtype="Int32")
    row[_PROFILE_COL] = json.dumps(info)
    return row


def run_splits_local(
    sample: MDFASample, *, seeds: Sequence[int], params: MDFAParams
) -> pd.DataFrame:
    """The same splits in a plain sequential loop on the driver (reference, benchmark)."""
    return split_frame(
        [run_split(sample, split=i, seed=int(sd), params=params) for i, sd in enumerate(seeds)]
    )
