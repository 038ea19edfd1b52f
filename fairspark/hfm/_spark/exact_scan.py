"""Passes B and D of the certified elimination (:mod:`.elimination`): exact scans.

The exact nearest other-group row of a few query rows among the rows of the working
table in a rank range (:func:`scan_batches`, the function of some batches shared by
the Spark task and the driver engine; :func:`scan_job`, the Spark job).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fairspark._testing import maybe_fail_first_attempt
from fairspark._threads import pin_threads
from fairspark.hfm._kernels import (
    nn_other_group_clustered,
    nn_other_group_refclustered,
    query_clusters,
)
from fairspark.hfm._spark.blobs import (
    closer_or_tied,
    codes_of,
    column_of,
    from_blob,
    key_order,
    keys_at_rows,
    numpy_of,
    strings_of,
    target_points,
)
from fairspark.hfm._spark.driver import collect_within, max_result_bytes
from fairspark.hfm._spark.points import code_cols
from fairspark.hfm._spark.records import RangeCache, ScanQuery, ScanRows

__all__ = ["best_per_query", "scan_arrays", "scan_batches", "scan_job"]

_REF_CLUSTER_QUERIES = 32
_NN_SCHEMA = "tgt int, attr int, qi long, d double, nb_key string"


def scan_arrays(batch: pa.RecordBatch, *, n_attr: int, dim_x: int,
                key_sorted: bool = False) -> ScanRows:
    """What a scan reads of a batch, key-sorted, with an empty cache (the driver path
    decodes its one batch, already key-sorted, once for every scan)."""
    if not key_sorted:
        batch = key_order(batch)
    cols = code_cols(n_attr)
    return ScanRows(points=from_blob(column_of(batch, "xb"), dim_x + 2),
                    keys=strings_of(column_of(batch, "key")),
                    ranks={a: numpy_of(batch, f"rho{a}") for a in range(n_attr)},
                    codes={a: codes_of(batch, cols[a]) for a in range(n_attr)},
                    cache=RangeCache())


def scan_batches(it, qs: list[ScanQuery], *, n_attr: int, dim_x: int, lo: float,
                 hi: float, prepared: list[ScanRows] | None = None,
                 ) -> Iterator[pa.RecordBatch]:
    """The exact scan of :func:`scan_job` over some batches of the working table.

    Per query its best neighbour over the batches (ties to the smaller key); shared by
    the Spark task and the driver path (``prepared``: batches already read by
    :func:`scan_arrays`, instead of ``it``).
    """
    best = [(np.full(len(q.points), np.inf), np.full(len(q.points), None, dtype=object))
            for q in qs]
    arrays = prepared if prepared is not None else (
        scan_arrays(b, n_attr=n_attr, dim_x=dim_x) for b in it if b.num_rows)
    for rows in arrays:
        P, keys, codes, cache = rows.points, rows.keys, rows.codes, rows.cache
        for q, (bd, bk) in zip(qs, best, strict=True):
            t, a, Q, qc = q.tgt, q.attr, q.points, q.codes
            rho = rows.ranks[a]
            m = (rho >= lo) & (rho < hi)
            if not m.any():
                continue
            if t not in cache.points:  # each target's points once per batch (not per query)
                cache.points[t] = target_points(P, t)
            tp = cache.points[t]
            whole = bool(m.all())
            if whole and len(Q) >= _REF_CLUSTER_QUERIES:
                # every row is a reference: grouped once per batch and attribute (on
                # [yp, y, x], for both targets), only near clusters are measured
                if a not in cache.clusters:
                    cache.clusters[a] = query_clusters(P, codes[a])
                d, idx = nn_other_group_refclustered(Q, qc, tp, codes[a],
                                                     clusters=cache.clusters[a])
            else:
                d, idx = nn_other_group_clustered(Q, qc, tp if whole else tp[m],
                                                  codes[a] if whole else codes[a][m])
            nk = np.full(len(d), None, dtype=object)
            ok = idx >= 0
            nk[ok] = keys_at_rows(keys, idx[ok], None if whole else m)
            better = closer_or_tied(d, nk, bd, bk)
            bd[better], bk[better] = d[better], nk[better]
    for q, (bd, bk) in zip(qs, best, strict=True):
        ok = np.flatnonzero(np.isfinite(bd))
        if len(ok):
            yield pa.RecordBatch.from_pydict({
                "tgt": pa.array(np.full(len(ok), q.tgt, np.int32)),
                "attr": pa.array(np.full(len(ok), q.attr, np.int32)),
                "qi": pa.array(ok.astype(np.int64)), "d": pa.array(bd[ok]),
                "nb_key": pa.array(bk[ok], type=pa.string())})


def best_per_query(raw: pd.DataFrame) -> pd.DataFrame:
    """Per query the smallest distance, then the smallest neighbour key."""
    raw["nb_key"] = raw["nb_key"].astype(object)
    raw = raw.sort_values(["tgt", "attr", "qi", "d", "nb_key"], kind="mergesort")
    return raw.drop_duplicates(["tgt", "attr", "qi"]).reset_index(drop=True)


def scan_job(work: DataFrame, queries: list[ScanQuery], *, n_attr: int, dim_x: int,
             lo: float, hi: float, n_tasks: int) -> pd.DataFrame:
    """Nearest other-group row, among the rows with ``lo <= rho_attr < hi``, of each query.

    ``queries``: per pair its query rows (in the task's closure;
    every task scans its own rows and keeps per query its best neighbour over its
    batches, ties to the smaller key); ``n_tasks``: the tasks that read ``work`` (sizes
    what they send back). Returns ``tgt, attr, qi, d, nb_key`` (queries with no such
    neighbour are absent), reduced over tasks in Spark.
    """
    cols = code_cols(n_attr)
    attrs = sorted({q.attr for q in queries})
    cond = F.lit(False)
    for a in attrs:
        c = F.col(f"rho{a}") >= F.lit(float(lo))
        if math.isfinite(hi):
            c &= F.col(f"rho{a}") < F.lit(float(hi))
        cond |= c

    def scan(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pin_threads()
        maybe_fail_first_attempt("hfm")
        yield from scan_batches(it, queries, n_attr=n_attr, dim_x=dim_x, lo=lo, hi=hi)

    per_task = work.where(cond).select("key", "xb", *cols, *[f"rho{a}" for a in attrs]) \
        .mapInArrow(scan, _NN_SCHEMA)
    n_q = sum(len(q.points) for q in queries)
    if 64.0 * n_q * max(1, n_tasks) < max_result_bytes(work.sparkSession) / 4:
        # few queries: every task's rows come back, reduced here (no shuffle)
        return best_per_query(per_task.toPandas())
    return collect_within(
        per_task.groupBy("tgt", "attr", "qi")
        .agg(F.min(F.struct("d", "nb_key")).alias("m"))
        .select("tgt", "attr", "qi", F.col("m.d").alias("d"),
                F.col("m.nb_key").alias("nb_key")),
        est_bytes=64.0 * n_q,
    )


