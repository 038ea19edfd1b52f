"""Pass A of the certified elimination (:mod:`.elimination`): every row's sample bound.

Code counts and ranks, the sample's upper bounds of every row (:func:`bounds_batch`,
the function of one batch shared by the Spark task and the driver engine), the working
table the Spark job writes (:func:`work_table`), the largest bounds per pair and the
bounds' summary and histogram.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fairspark._testing import maybe_fail_first_attempt
from fairspark._threads import pin_threads
from fairspark.hfm._kernels import (
    bin_counts,
    fold_part,
    nn_other_group_clustered,
    part_mean,
    query_clusters,
    value_part,
    witness,
)
from fairspark.hfm._spark.blobs import (
    NULL_CODE,
    bound_col,
    codes_of,
    column_of,
    features_of,
    neighbour_col,
    numpy_of,
    ranks_of,
    stack_points,
    target_points,
    to_blob,
)
from fairspark.hfm._spark.driver import thread_map
from fairspark.hfm._spark.points import code_cols
from fairspark.hfm._spark.records import PassAMarker, PassARanges, RangeCache, Sample, TopBound
from fairspark.hfm._spark.state import Pair

__all__ = ["bounds_batch", "code_counts", "code_counts_and_rows", "histogram_of_bounds",
           "merge_summary", "merge_top", "row_slices", "sample_bounds_numpy",
           "top_bounds_job", "work_table"]


def code_counts(pts: DataFrame, n_attr: int) -> dict[int, dict[int, int]]:
    """Rows per (attribute, code): one aggregation."""
    return code_counts_and_rows(pts, n_attr)[0]


def code_counts_and_rows(pts: DataFrame,
                         n_attr: int) -> tuple[dict[int, dict[int, int]], int]:
    """Rows per (attribute, code) (null codes left out) and the rows in all: one
    aggregation, the engine's counts (the HFM audit counts its groups with it and hands
    the counts to the engine, which then runs no job of its own for them)."""
    if n_attr == 0:
        return {}, int(pts.count())
    pairs = F.explode(F.array(*[
        F.struct(F.lit(a).alias("a"), F.col(c).alias("c")) for a, c in enumerate(code_cols(n_attr))
    ])).alias("p")
    out: dict[int, dict[int, int]] = {a: {} for a in range(n_attr)}
    n = 0
    for r in pts.select(pairs).groupBy("p.a", "p.c").count().collect():
        if int(r["a"]) == 0:
            n += int(r["count"])
        if r["c"] is not None:
            out[int(r["a"])][int(r["c"])] = int(r["count"])
    return out, n


def sample_bounds_numpy(P: np.ndarray, codes: np.ndarray, S: np.ndarray, scodes: np.ndarray,
                        skeys: np.ndarray, *, clusters: tuple | None = None,
                        ) -> tuple[np.ndarray, np.ndarray]:
    """``u(p)`` of points against a key-sorted sample, with the sample key realising it.

    Parameters
    ----------
    P, S : numpy.ndarray
        Points and sample points ``[t, x]``.
    codes, scodes : numpy.ndarray
        Their group codes.
    skeys : numpy.ndarray
        Sample keys (sorted).
    clusters : (order, starts), optional
        A cluster proposal of the points (:func:`~fairspark.hfm._kernels.query_clusters`);
        the result does not depend on it.

    Returns
    -------
    u : numpy.ndarray
        Distance to the nearest other-group sample row (``inf`` when none).
    nb : numpy.ndarray
        Its key (``None`` when none).
    """
    d, idx = nn_other_group_clustered(P, codes, S, scodes, clusters=clusters)
    nb = np.full(len(d), None, dtype=object)
    ok = idx >= 0
    nb[ok] = np.asarray(skeys, dtype=object)[idx[ok]]
    return d, nb


def top_bounds_job(work: DataFrame, pairs: list[Pair], k: int) -> dict[Pair, list[TopBound]]:
    """Per pair the ``k`` rows with the largest bound, then the smallest key (one job),
    in that order."""
    parts = None
    for p in pairs:
        one = (work.select(F.lit(p[0]).alias("tgt"), F.lit(p[1]).alias("attr"), "key",
                           F.col(bound_col(p)).alias("u"),
                           F.col(neighbour_col(p)).alias("nb_key"))
               .orderBy(F.col("u").desc(), F.col("key").asc()).limit(k))
        parts = one if parts is None else parts.unionByName(one)
    out: dict[Pair, list[TopBound]] = {p: [] for p in pairs}
    # repartition(1): the per-partition top rows meet in one task, not on the driver
    # (a plain collect of a sorted limit sends k rows per partition to the driver)
    for r in parts.repartition(1).collect():
        out[(int(r["tgt"]), int(r["attr"]))].append(
            TopBound(-float(r["u"]), r["key"], r["nb_key"] or ""))
    return {p: sorted(v) for p, v in out.items()}


def merge_top(parts: list[PassAMarker], pairs: list[Pair],
              k: int) -> dict[Pair, list[TopBound]]:
    """Per pair the ``k`` first bounds (:func:`top_bounds_job`'s order) of every task's
    list (``parts``: pass A's marker rows, :func:`work_table`)."""
    return {p: sorted(r for part in parts for r in part.top.get(p, []))[:k] for p in pairs}


def merge_summary(parts: list[PassAMarker], pairs: list[Pair]) -> pd.DataFrame:
    """``tgt, attr, D, D_avg, key, nb_key`` of every row's bound, folded from the tasks'
    summary parts (:func:`~fairspark.hfm._kernels.fold_part`): the bits of
    ``summarise_pointwise`` and of the driver path's summary, whatever the partitioning
    (the maximum and the integer sums are exact in any order, and the witness is the
    smallest key, then neighbour key, at the maximum)."""
    rows = []
    for p in pairs:
        acc: dict = {}
        for part in parts:
            if p in part.summary:
                fold_part(acc, part.summary[p])
        if not acc:
            continue
        rows.append({"tgt": p[0], "attr": p[1], "D": acc["D"], "D_avg": float(part_mean(acc)),
                     "key": acc["w"][0], "nb_key": acc["w"][1]})
    return pd.DataFrame(rows, columns=["tgt", "attr", "D", "D_avg", "key", "nb_key"])


def _batch_top(batch: pa.RecordBatch, pairs: list[Pair], k: int,
               best: dict[Pair, list[TopBound]]) -> None:
    """Fold one output batch of pass A into a task's top bounds ``best`` (per pair the
    ``k`` first :class:`TopBound`): only the rows at or above the batch's ``k``-th
    largest bound become records (every tie with it too, so the key decides)."""
    for p in pairs:
        u = numpy_of(batch, bound_col(p))
        if len(u) > k:
            kth = np.partition(u, len(u) - k)[len(u) - k]
            idx = np.flatnonzero(u >= kth)
        else:
            idx = np.arange(len(u))
        sel = pa.array(idx, pa.int64())
        keys = column_of(batch, "key").take(sel).to_pylist()
        nbs = column_of(batch, neighbour_col(p)).take(sel).to_pylist()
        rows = [TopBound(-float(u[i]), keys[j], nbs[j] or "") for j, i in enumerate(idx)]
        best[p] = sorted(best.get(p, []) + rows)[:k]


def _batch_summary(batch: pa.RecordBatch, pairs: list[Pair], summ: dict[Pair, dict]) -> None:
    """Fold one output batch of pass A into a task's bound summaries ``summ``: per pair
    the batch's :func:`~fairspark.hfm._kernels.value_part` (every row weighs 1 in the
    working table) with the witness ``w`` of its maximum
    (:func:`~fairspark.hfm._kernels.witness`), the kernels the driver path's summary
    runs."""
    for p in pairs:
        u = numpy_of(batch, bound_col(p))
        if not len(u):
            continue
        part = value_part(u, np.ones(len(u), np.int64))
        at = pa.array(np.flatnonzero(u == part["D"]), pa.int64())
        part["w"] = witness(column_of(batch, "key").take(at).to_pylist(),
                            column_of(batch, neighbour_col(p)).take(at).to_pylist())
        fold_part(summ.setdefault(p, {}), part)


def row_slices(n: int, threads: int) -> list[slice]:
    """Contiguous row ranges, one per thread (ranges of at least 4,096 rows), that pass A
    and the driver path's scans search apart: each range's target points and clusters
    are built on its own thread, and every (range, pair) search is one task, so both
    cores work even where there are as many pairs as threads (figures: docs/benchmarks.md,
    "HFM on Adult x 20"). A row's bound is its own, so the ranges do not change any
    result."""
    k = min(max(1, threads), max(1, n // 4096))
    edges = np.linspace(0, n, k + 1).round().astype(int)
    return [slice(int(edges[i]), int(edges[i + 1])) for i in range(k)]


def bounds_batch(batch: pa.RecordBatch, s: Sample, *, n_attr: int, dim_x: int,
                 pairs: list[Pair], keep: PassARanges | None = None, threads: int = 1,
                 points: np.ndarray | None = None) -> pa.RecordBatch:
    """Pass A on one batch: ranks, blobs and sample bounds (``s``: the sample, see
    :func:`work_table`); shared by the Spark task and the driver path (``keep``: gets
    the points, the row ranges searched apart and, per range, each target's points
    and the clusters, for the driver path's scans; ``threads``: the driver path splits
    its rows into one range per thread (:func:`row_slices`) and searches every (range,
    pair) on the driver's cores; every row's bound is its own, so the ranges do not
    change the result).

    The rows' clusters (:func:`~fairspark.hfm._kernels.query_clusters` of ``[yp, y, x]``
    and the attribute's codes) are found once per attribute and range, for both targets."""
    cols = code_cols(n_attr)
    P = features_of(batch, dim_x) if points is None else points
    h = numpy_of(batch, "h")
    out = {"key": column_of(batch, "key").cast(pa.string()), "h": pa.array(h)}
    codes = {c: codes_of(batch, c) for c in cols}
    for c in cols:
        out[c] = column_of(batch, c).cast(pa.int32())
    for a, c in enumerate(cols):
        out[f"rho{a}"] = pa.array(ranks_of(h, codes[c], s.counts[a]))
    out["xb"] = to_blob(P)
    targets = sorted({p[0] for p in pairs})
    attrs = sorted({p[1] for p in pairs})
    parts = row_slices(len(P), threads)

    def prepare(r: slice) -> RangeCache:
        # a range's target points (the prediction's a copy) and its clusters per attribute
        return RangeCache(points={t: target_points(P[r], t) for t in targets},
                          clusters={a: query_clusters(P[r], codes[cols[a]][r]) for a in attrs})

    caches = thread_map(prepare, parts, threads)
    spts = {t: target_points(s.points, t) for t in targets}

    def one(ip: tuple[int, Pair]) -> tuple[np.ndarray, np.ndarray]:
        i, p = ip
        c = cols[p[1]]
        return sample_bounds_numpy(caches[i].points[p[0]], codes[c][parts[i]], spts[p[0]],
                                   s.codes[c], s.keys, clusters=caches[i].clusters[p[1]])

    items = [(i, p) for p in pairs for i in range(len(parts))]
    res = dict(zip(items, thread_map(one, items, threads), strict=True))
    for p in pairs:
        ranges = range(len(parts))
        out[bound_col(p)] = pa.array(np.concatenate([res[(i, p)][0] for i in ranges]))
        out[neighbour_col(p)] = pa.array(np.concatenate([res[(i, p)][1] for i in ranges]),
                                         type=pa.string())
    if keep is not None:
        keep.points, keep.ranges, keep.caches = P, parts, caches
    return pa.RecordBatch.from_pydict(out)


#: Spark's name of each Arrow type of the working table
_DDL = {pa.string(): "string", pa.float64(): "double", pa.int32(): "int", pa.binary(): "binary"}


def _work_schema(n_attr: int, pairs: list[Pair]) -> pa.Schema:
    """The working table's columns (:func:`bounds_batch`'s, and ``tops``)."""
    return pa.schema([
        ("key", pa.string()), ("h", pa.float64()),
        *[(c, pa.int32()) for c in code_cols(n_attr)],
        *[(f"rho{a}", pa.float64()) for a in range(n_attr)], ("xb", pa.binary()),
        *[f for p in pairs
          for f in ((bound_col(p), pa.float64()), (neighbour_col(p), pa.string()))],
        ("tops", pa.binary())])


def work_table(ranked: DataFrame, sample: pd.DataFrame, *, n_attr: int, dim_x: int,
                pairs: list[Pair], counts: dict[int, dict[int, int]],
                top_k: int = 0) -> DataFrame:
    """Pass A: the working table with blobs, ranks and sample bounds (not persisted).

    ``ranked`` is the points table with ``h`` (the seeded hash of the key in [0, 1));
    ``sample`` its sample rows (pandas, with ``x``), shipped in the task's closure
    (which a classic session broadcasts, being over 1 MB). ``top_k > 0``: every task
    ends with one *marker row* (every column null but ``tops``, which holds the pickled
    :class:`PassAMarker` of its rows:
    the ``top_k`` largest bounds per pair, :func:`_batch_top`, and the bounds' summary
    parts, :func:`_batch_summary`), so the job that fills the cache also brings them
    back as rows of the table (:func:`merge_top`, :func:`merge_summary`); the point
    rows have ``tops`` null. A task run again replaces its output, marker included.
    """
    cols = code_cols(n_attr)
    sample = sample.sort_values("key", kind="mergesort")
    sx = np.vstack(sample["x"].to_numpy()) if len(sample) else np.zeros((0, dim_x))
    SP = stack_points(sample["y"].to_numpy(float), sample["yp"].to_numpy(float),
                       sx.reshape(len(sample), dim_x))
    s = Sample(keys=sample["key"].to_numpy(dtype=object), points=SP,
               codes={c: sample[c].fillna(NULL_CODE).to_numpy(np.int64) for c in cols},
               counts=counts)
    schema = _work_schema(n_attr, pairs)

    def bounds(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pin_threads()
        maybe_fail_first_attempt("hfm")
        best: dict[Pair, list[TopBound]] = {}
        summ: dict[Pair, dict] = {}
        for batch in it:
            if batch.num_rows:
                out = bounds_batch(batch, s, n_attr=n_attr, dim_x=dim_x, pairs=pairs)
                if top_k > 0:
                    _batch_top(out, pairs, top_k, best)
                    _batch_summary(out, pairs, summ)
                yield out.append_column("tops", pa.nulls(out.num_rows, pa.binary()))
        if top_k > 0:
            blob = pickle.dumps(PassAMarker(top=best, summary=summ))
            yield pa.RecordBatch.from_arrays(
                [pa.array([blob], pa.binary()) if f.name == "tops" else pa.nulls(1, f.type)
                 for f in schema], schema=schema)

    ddl = ", ".join(f"{f.name} {_DDL[f.type]}" for f in schema)
    return ranked.select("key", "h", "y", "yp", "x", *cols).mapInArrow(bounds, ddl)


def histogram_of_bounds(work: DataFrame, pairs: list[Pair], tops: dict[int, float],
                     bins: int) -> pd.DataFrame:
    """Per pair the rows per bin of its bound column
    (:func:`~fairspark.hfm._kernels.bin_counts`, the driver path's bins), counted by
    each task over its partition's bound columns only (one job, no shuffle) and summed
    on the driver: ``tgt, attr, bin, n`` for the non-empty bins."""

    def count(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        n = {p: np.zeros(bins, np.int64) for p in pairs}
        for batch in it:
            for p in pairs:
                n[p] += bin_counts(numpy_of(batch, bound_col(p)), tops.get(p[1], 0.0), bins)
        yield pa.RecordBatch.from_pydict({
            "tgt": pa.array([p[0] for p in pairs for _ in range(bins)], pa.int32()),
            "attr": pa.array([p[1] for p in pairs for _ in range(bins)], pa.int32()),
            "bin": pa.array([j for _ in pairs for j in range(bins)], pa.int32()),
            "n": pa.array(np.concatenate([n[p] for p in pairs] or [np.zeros(0, np.int64)]))})

    got = (work.select(*[bound_col(p) for p in pairs])
           .mapInArrow(count, "tgt int, attr int, bin int, n long").toPandas())
    out = got.groupby(["tgt", "attr", "bin"], as_index=False)["n"].sum()
    return out[out["n"] > 0].reset_index(drop=True)


