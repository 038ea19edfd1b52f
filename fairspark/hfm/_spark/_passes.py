"""The passes of :mod:`fairspark.hfm._spark.elim` over the rows (its module doc).

Per pass the function of one batch, shared by the Spark task and the driver path
(:func:`_bounds_batch` for pass A, :func:`_scan_batches` for the exact scans of passes
B and D, :func:`_pass_c_batches` for pass C), and the Spark job that runs it on every
partition of the working table (:func:`_work_table`, :func:`_exact_scan`,
:func:`_eliminate`); with the code counts, the top bounds and the blocks they read.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from fairspark._testing import maybe_fail_first_attempt
from fairspark._threads import pin_threads
from fairspark.hfm._kernels import (
    bin_counts,
    fold_part,
    nn_other_group_clustered,
    nn_other_group_refclustered,
    part_mean,
    query_clusters,
    value_part,
    witness,
)
from fairspark.hfm._spark._blobs import (
    _NULL_CODE,
    _blobs_of,
    _codes,
    _col,
    _features,
    _from_blob,
    _key_order,
    _keys_at,
    _nbcol,
    _np,
    _rho,
    _stack_points,
    _strs,
    _tie_keys,
    _to_blob,
    _tpoints,
    _ucol,
)
from fairspark.hfm._spark._driver import (
    _collect,
    _map,
    _max_result_bytes,
)
from fairspark.hfm._spark._points import code_cols
from fairspark.hfm._spark._state import Pair, _PairState, _thr

__all__ = ["code_counts", "code_counts_and_rows", "sample_bounds_numpy"]

#: a scan of every row with at least this many queries groups the rows first
_REF_CLUSTER_QUERIES = 32
_NN_SCHEMA = "tgt int, attr int, qi long, d double, nb_key string"
_C_SCHEMA = ("kind int, tgt int, attr int, blk int, n long, mx double, key string, "
             "d double, nb_key string, code int, xb binary")


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


# ----------------------------------------------------------------------------- pass A
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


def _top_bounds(work: DataFrame, pairs: list[Pair], k: int) -> dict[Pair, list[tuple]]:
    """Per pair the ``k`` rows with the largest bound, then the smallest key (one job).

    Returns ``(-u, key, nb_key)`` tuples in that order.
    """
    parts = None
    for p in pairs:
        one = (work.select(F.lit(p[0]).alias("tgt"), F.lit(p[1]).alias("attr"), "key",
                           F.col(_ucol(p)).alias("u"), F.col(_nbcol(p)).alias("nb_key"))
               .orderBy(F.col("u").desc(), F.col("key").asc()).limit(k))
        parts = one if parts is None else parts.unionByName(one)
    out: dict[Pair, list[tuple]] = {p: [] for p in pairs}
    # repartition(1): the per-partition top rows meet in one task, not on the driver
    # (a plain collect of a sorted limit sends k rows per partition to the driver)
    for r in parts.repartition(1).collect():
        out[(int(r["tgt"]), int(r["attr"]))].append((-float(r["u"]), r["key"], r["nb_key"] or ""))
    return {p: sorted(v) for p, v in out.items()}


def _merge_top(parts: list[dict], pairs: list[Pair], k: int) -> dict[Pair, list[tuple]]:
    """Per pair the ``k`` smallest ``(-u, key, nb_key)`` tuples (:func:`_top_bounds`'s
    order) of every task's list (``parts``: pass A's marker rows, :func:`_work_table`)."""
    return {p: sorted(r for part in parts for r in part["top"].get(p, []))[:k] for p in pairs}


def _merge_summary(parts: list[dict], pairs: list[Pair]) -> pd.DataFrame:
    """``tgt, attr, D, D_avg, key, nb_key`` of every row's bound, folded from the tasks'
    summary parts (:func:`~fairspark.hfm._kernels.fold_part`): the bits of
    ``summarise_pointwise`` and of the driver path's summary, whatever the partitioning
    (the maximum and the integer sums are exact in any order, and the witness is the
    smallest key, then neighbour key, at the maximum)."""
    rows = []
    for p in pairs:
        acc: dict = {}
        for part in parts:
            if p in part["summ"]:
                fold_part(acc, part["summ"][p])
        if not acc:
            continue
        rows.append({"tgt": p[0], "attr": p[1], "D": acc["D"], "D_avg": float(part_mean(acc)),
                     "key": acc["w"][0], "nb_key": acc["w"][1]})
    return pd.DataFrame(rows, columns=["tgt", "attr", "D", "D_avg", "key", "nb_key"])


def _batch_top(batch: pa.RecordBatch, pairs: list[Pair], k: int,
               best: dict[Pair, list[tuple]]) -> None:
    """Fold one output batch of pass A into a task's top bounds ``best`` (per pair the
    ``k`` smallest ``(-u, key, nb_key or "")``): only the rows at or above the batch's
    ``k``-th largest bound become tuples (every tie with it too, so the key decides)."""
    for p in pairs:
        u = _np(batch, _ucol(p))
        if len(u) > k:
            kth = np.partition(u, len(u) - k)[len(u) - k]
            idx = np.flatnonzero(u >= kth)
        else:
            idx = np.arange(len(u))
        sel = pa.array(idx, pa.int64())
        keys = _col(batch, "key").take(sel).to_pylist()
        nbs = _col(batch, _nbcol(p)).take(sel).to_pylist()
        rows = [(-float(u[i]), keys[j], nbs[j] or "") for j, i in enumerate(idx)]
        best[p] = sorted(best.get(p, []) + rows)[:k]


def _batch_summary(batch: pa.RecordBatch, pairs: list[Pair], summ: dict[Pair, dict]) -> None:
    """Fold one output batch of pass A into a task's bound summaries ``summ``: per pair
    the batch's :func:`~fairspark.hfm._kernels.value_part` (every row weighs 1 in the
    working table) with the witness ``w`` of its maximum
    (:func:`~fairspark.hfm._kernels.witness`), the kernels the driver path's summary
    runs."""
    for p in pairs:
        u = _np(batch, _ucol(p))
        if not len(u):
            continue
        part = value_part(u, np.ones(len(u), np.int64))
        at = pa.array(np.flatnonzero(u == part["D"]), pa.int64())
        part["w"] = witness(_col(batch, "key").take(at).to_pylist(),
                            _col(batch, _nbcol(p)).take(at).to_pylist())
        fold_part(summ.setdefault(p, {}), part)


def _row_slices(n: int, threads: int) -> list[slice]:
    """Contiguous row ranges, one per thread (ranges of at least 4,096 rows), that pass A
    and the driver path's scans search apart: each range's target points and clusters
    are built on its own thread, and every (range, pair) search is one task, so both
    cores work even where there are as many pairs as threads (figures: docs/benchmarks.md,
    "HFM on Adult x 20"). A row's bound is its own, so the ranges do not change any
    result."""
    k = min(max(1, threads), max(1, n // 4096))
    edges = np.linspace(0, n, k + 1).round().astype(int)
    return [slice(int(edges[i]), int(edges[i + 1])) for i in range(k)]


def _bounds_batch(batch: pa.RecordBatch, s: dict, *, n_attr: int, dim_x: int,
                  pairs: list[Pair], keep: dict | None = None, threads: int = 1,
                  points: np.ndarray | None = None) -> pa.RecordBatch:
    """Pass A on one batch: ranks, blobs and sample bounds (``s``: the sample, see
    :func:`_work_table`); shared by the Spark task and the driver path (``keep``: gets
    the points ``P``, the row ranges searched apart and, per range, each target's points
    and the clusters, for the driver path's scans; ``threads``: the driver path splits
    its rows into one range per thread (:func:`_row_slices`) and searches every (range,
    pair) on the driver's cores; every row's bound is its own, so the ranges do not
    change the result).

    The rows' clusters (:func:`~fairspark.hfm._kernels.query_clusters` of ``[yp, y, x]``
    and the attribute's codes) are found once per attribute and range, for both targets."""
    cols = code_cols(n_attr)
    P = _features(batch, dim_x) if points is None else points
    h = _np(batch, "h")
    out = {"key": _col(batch, "key").cast(pa.string()), "h": pa.array(h)}
    codes = {c: _codes(batch, c) for c in cols}
    for c in cols:
        out[c] = _col(batch, c).cast(pa.int32())
    for a, c in enumerate(cols):
        out[f"rho{a}"] = pa.array(_rho(h, codes[c], s["counts"][a]))
    out["xb"] = _to_blob(P)
    targets = sorted({p[0] for p in pairs})
    attrs = sorted({p[1] for p in pairs})
    parts = _row_slices(len(P), threads)

    def prepare(r: slice) -> tuple[dict, dict]:
        # a range's target points (the prediction's a copy) and its clusters per attribute
        return ({t: _tpoints(P[r], t) for t in targets},
                {a: query_clusters(P[r], codes[cols[a]][r]) for a in attrs})

    prepared = _map(prepare, parts, threads)
    tps = [tp for tp, _ in prepared]
    clusters = {(i, a): cl[a] for i, (_, cl) in enumerate(prepared) for a in attrs}
    spts = {t: _tpoints(s["P"], t) for t in targets}

    def one(ip: tuple[int, Pair]) -> tuple[np.ndarray, np.ndarray]:
        i, p = ip
        c = cols[p[1]]
        return sample_bounds_numpy(tps[i][p[0]], codes[c][parts[i]], spts[p[0]],
                                   s["codes"][c], s["keys"], clusters=clusters[(i, p[1])])

    items = [(i, p) for p in pairs for i in range(len(parts))]
    res = dict(zip(items, _map(one, items, threads), strict=True))
    for p in pairs:
        out[_ucol(p)] = pa.array(np.concatenate([res[(i, p)][0] for i in range(len(parts))]))
        out[_nbcol(p)] = pa.array(np.concatenate([res[(i, p)][1] for i in range(len(parts))]),
                                  type=pa.string())
    if keep is not None:
        for (i, a), cl in clusters.items():
            tps[i][("cl", a)] = cl
        keep["P"], keep["parts"], keep["tp"] = P, parts, tps
    return pa.RecordBatch.from_pydict(out)


#: Spark's name of each Arrow type of the working table
_DDL = {pa.string(): "string", pa.float64(): "double", pa.int32(): "int", pa.binary(): "binary"}


def _work_schema(n_attr: int, pairs: list[Pair]) -> pa.Schema:
    """The working table's columns (:func:`_bounds_batch`'s, and ``tops``)."""
    return pa.schema([
        ("key", pa.string()), ("h", pa.float64()),
        *[(c, pa.int32()) for c in code_cols(n_attr)],
        *[(f"rho{a}", pa.float64()) for a in range(n_attr)], ("xb", pa.binary()),
        *[f for p in pairs for f in ((_ucol(p), pa.float64()), (_nbcol(p), pa.string()))],
        ("tops", pa.binary())])


def _work_table(ranked: DataFrame, sample: pd.DataFrame, *, n_attr: int, dim_x: int,
                pairs: list[Pair], counts: dict[int, dict[int, int]],
                top_k: int = 0) -> DataFrame:
    """Pass A: the working table with blobs, ranks and sample bounds (not persisted).

    ``ranked`` is the points table with ``h`` (the seeded hash of the key in [0, 1));
    ``sample`` its sample rows (pandas, with ``x``), shipped in the task's closure
    (which a classic session broadcasts, being over 1 MB). ``top_k > 0``: every task
    ends with one *marker row* (every column null but ``tops``, which holds the pickled
    ``{"top": {pair: [(-u, key, nb_key), ...]}, "summ": {pair: part}}`` of its rows:
    the ``top_k`` largest bounds per pair, :func:`_batch_top`, and the bounds' summary
    parts, :func:`_batch_summary`), so the job that fills the cache also brings them
    back as rows of the table (:func:`_merge_top`, :func:`_merge_summary`); the point
    rows have ``tops`` null. A task run again replaces its output, marker included.
    """
    cols = code_cols(n_attr)
    sample = sample.sort_values("key", kind="mergesort")
    sx = np.vstack(sample["x"].to_numpy()) if len(sample) else np.zeros((0, dim_x))
    SP = _stack_points(sample["y"].to_numpy(float), sample["yp"].to_numpy(float),
                       sx.reshape(len(sample), dim_x))
    s = {"keys": sample["key"].to_numpy(dtype=object), "P": SP,
         "codes": {c: sample[c].fillna(_NULL_CODE).to_numpy(np.int64) for c in cols},
         "counts": counts}
    schema = _work_schema(n_attr, pairs)

    def bounds(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pin_threads()
        maybe_fail_first_attempt("hfm")
        best: dict[Pair, list[tuple]] = {}
        summ: dict[Pair, dict] = {}
        for batch in it:
            if batch.num_rows:
                out = _bounds_batch(batch, s, n_attr=n_attr, dim_x=dim_x, pairs=pairs)
                if top_k > 0:
                    _batch_top(out, pairs, top_k, best)
                    _batch_summary(out, pairs, summ)
                yield out.append_column("tops", pa.nulls(out.num_rows, pa.binary()))
        if top_k > 0:
            blob = pickle.dumps({"top": best, "summ": summ})
            yield pa.RecordBatch.from_arrays(
                [pa.array([blob], pa.binary()) if f.name == "tops" else pa.nulls(1, f.type)
                 for f in schema], schema=schema)

    ddl = ", ".join(f"{f.name} {_DDL[f.type]}" for f in schema)
    return ranked.select("key", "h", "y", "yp", "x", *cols).mapInArrow(bounds, ddl)


def _bound_histogram(work: DataFrame, pairs: list[Pair], tops: dict[int, float],
                     bins: int) -> pd.DataFrame:
    """Per pair the rows per bin of its bound column
    (:func:`~fairspark.hfm._kernels.bin_counts`, the driver path's bins), counted by
    each task over its partition's bound columns only (one job, no shuffle) and summed
    on the driver: ``tgt, attr, bin, n`` for the non-empty bins."""

    def count(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        n = {p: np.zeros(bins, np.int64) for p in pairs}
        for batch in it:
            for p in pairs:
                n[p] += bin_counts(_np(batch, _ucol(p)), tops.get(p[1], 0.0), bins)
        yield pa.RecordBatch.from_pydict({
            "tgt": pa.array([p[0] for p in pairs for _ in range(bins)], pa.int32()),
            "attr": pa.array([p[1] for p in pairs for _ in range(bins)], pa.int32()),
            "bin": pa.array([j for _ in pairs for j in range(bins)], pa.int32()),
            "n": pa.array(np.concatenate([n[p] for p in pairs] or [np.zeros(0, np.int64)]))})

    got = (work.select(*[_ucol(p) for p in pairs])
           .mapInArrow(count, "tgt int, attr int, bin int, n long").toPandas())
    out = got.groupby(["tgt", "attr", "bin"], as_index=False)["n"].sum()
    return out[out["n"] > 0].reset_index(drop=True)


# ----------------------------------------------------------------------------- searches
def _scan_arrays(batch: pa.RecordBatch, *, n_attr: int, dim_x: int,
                 key_sorted: bool = False) -> tuple:
    """What a scan reads of a batch, key-sorted: points, keys, and per attribute the
    ranks and codes, and a cache of each target's points (the driver path decodes its
    one batch, already key-sorted, once for every scan)."""
    if not key_sorted:
        batch = _key_order(batch)
    cols = code_cols(n_attr)
    return (_from_blob(_col(batch, "xb"), dim_x + 2),
            _strs(_col(batch, "key")),
            {a: _np(batch, f"rho{a}") for a in range(n_attr)},
            {a: _codes(batch, cols[a]) for a in range(n_attr)}, {})


def _scan_batches(it, qs: list[tuple], *, n_attr: int, dim_x: int, lo: float,
                  hi: float, prepared: list[tuple] | None = None) -> Iterator[pa.RecordBatch]:
    """The exact scan of :func:`_exact_scan` over some batches of the working table.

    Per query its best neighbour over the batches (ties to the smaller key); shared by
    the Spark task and the driver path (``prepared``: batches already read by
    :func:`_scan_arrays`, instead of ``it``).
    """
    best = [(np.full(len(q[2]), np.inf), np.full(len(q[2]), None, dtype=object)) for q in qs]
    arrays = prepared if prepared is not None else (
        _scan_arrays(b, n_attr=n_attr, dim_x=dim_x) for b in it if b.num_rows)
    for P, keys, rhos, codes, tp in arrays:
        for (t, a, Q, qc), (bd, bk) in zip(qs, best, strict=True):
            rho = rhos[a]
            m = (rho >= lo) & (rho < hi)
            if not m.any():
                continue
            if t not in tp:  # each target's points once per batch (no copy per query set)
                tp[t] = _tpoints(P, t)
            whole = bool(m.all())
            if whole and len(Q) >= _REF_CLUSTER_QUERIES:
                # every row is a reference: grouped once per batch and attribute (on
                # [yp, y, x], for both targets), only near clusters are measured
                if ("cl", a) not in tp:
                    tp[("cl", a)] = query_clusters(P, codes[a])
                d, idx = nn_other_group_refclustered(Q, qc, tp[t], codes[a],
                                                     clusters=tp[("cl", a)])
            else:
                d, idx = nn_other_group_clustered(Q, qc, tp[t] if whole else tp[t][m],
                                                  codes[a] if whole else codes[a][m])
            nk = np.full(len(d), None, dtype=object)
            ok = idx >= 0
            nk[ok] = _keys_at(keys, idx[ok], None if whole else m)
            better = _tie_keys(d, nk, bd, bk)
            bd[better], bk[better] = d[better], nk[better]
    for (t, a, _, _), (bd, bk) in zip(qs, best, strict=True):
        ok = np.flatnonzero(np.isfinite(bd))
        if len(ok):
            yield pa.RecordBatch.from_pydict({
                "tgt": pa.array(np.full(len(ok), t, np.int32)),
                "attr": pa.array(np.full(len(ok), a, np.int32)),
                "qi": pa.array(ok.astype(np.int64)), "d": pa.array(bd[ok]),
                "nb_key": pa.array(bk[ok], type=pa.string())})


def _best_per_query(raw: pd.DataFrame) -> pd.DataFrame:
    """Per query the smallest distance, then the smallest neighbour key."""
    raw["nb_key"] = raw["nb_key"].astype(object)
    raw = raw.sort_values(["tgt", "attr", "qi", "d", "nb_key"], kind="mergesort")
    return raw.drop_duplicates(["tgt", "attr", "qi"]).reset_index(drop=True)


def _exact_scan(work: DataFrame, queries: list[tuple], *, n_attr: int, dim_x: int,
                lo: float, hi: float, n_tasks: int) -> pd.DataFrame:
    """Nearest other-group row, among the rows with ``lo <= rho_attr < hi``, of each query.

    ``queries``: per pair ``(tgt, attr, points [t, x], codes)`` (in the task's closure;
    every task scans its own rows and keeps per query its best neighbour over its
    batches, ties to the smaller key); ``n_tasks``: the tasks that read ``work`` (sizes
    what they send back). Returns ``tgt, attr, qi, d, nb_key`` (queries with no such
    neighbour are absent), reduced over tasks in Spark.
    """
    cols = code_cols(n_attr)
    attrs = sorted({q[1] for q in queries})
    cond = F.lit(False)
    for a in attrs:
        c = F.col(f"rho{a}") >= F.lit(float(lo))
        if math.isfinite(hi):
            c &= F.col(f"rho{a}") < F.lit(float(hi))
        cond |= c

    def scan(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pin_threads()
        maybe_fail_first_attempt("hfm")
        yield from _scan_batches(it, queries, n_attr=n_attr, dim_x=dim_x, lo=lo, hi=hi)

    per_task = work.where(cond).select("key", "xb", *cols, *[f"rho{a}" for a in attrs]) \
        .mapInArrow(scan, _NN_SCHEMA)
    n_q = sum(len(q[2]) for q in queries)
    if 64.0 * n_q * max(1, n_tasks) < _max_result_bytes(work.sparkSession) / 4:
        # few queries: every task's rows come back, reduced here (no shuffle)
        return _best_per_query(per_task.toPandas())
    return _collect(
        per_task.groupBy("tgt", "attr", "qi")
        .agg(F.min(F.struct("d", "nb_key")).alias("m"))
        .select("tgt", "attr", "qi", F.col("m.d").alias("d"), F.col("m.nb_key").alias("nb_key")),
        est_bytes=64.0 * n_q,
    )


def _is_pair(p: Pair) -> Column:
    return (F.col("tgt") == p[0]) & (F.col("attr") == p[1])


def _other_max(counts: dict[int, dict[int, int]], a: int, code: int) -> float:
    """Rows of the largest other code: a block reaching it covers the whole other side."""
    return float(max((n for c, n in counts[a].items() if c != code), default=0))


def _after(p: Pair, cursor: tuple[float, str] | None) -> Column:
    """Rows after ``cursor`` in the order (bound descending, key ascending)."""
    if cursor is None:
        return F.lit(True)
    u = F.col(_ucol(p))
    cu, ck = cursor
    return (u < F.lit(cu)) | ((u == F.lit(cu)) & (F.col("key") > F.lit(ck)))


# ----------------------------------------------------------------------------- pass C
def _block_edges(quota: float, first_block: int, n_blocks: int) -> list[float]:
    """Rank limits ``q, q + b, q + 3b, q + 7b, ...`` of the doubling blocks."""
    return [quota + first_block * ((1 << j) - 1) for j in range(n_blocks + 1)]


def _other_max_codes(codes: np.ndarray, cnt: dict[int, int]) -> np.ndarray:
    """Rows of the largest other code, per row code (see :func:`_other_max`)."""
    tot = [*sorted(cnt.values(), reverse=True), 0, 0]
    top = max(cnt, key=lambda c: (cnt[c], c)) if cnt else None
    return np.where(codes == top, tot[1], tot[0]).astype(float)


def _block_bcast(blocks: pd.DataFrame, *, n_attr: int, dim_x: int,
                 counts: dict[int, dict[int, int]]) -> dict:
    """The blocks of pass C as its tasks read them (vectors, keys, codes and ranks,
    key order)."""
    blocks = blocks.sort_values("key", kind="mergesort")
    BP = _blobs_of(blocks["xb"]) if len(blocks) else np.zeros((0, dim_x + 2))
    return {
        "P": BP, "keys": blocks["key"].to_numpy(dtype=object),
        "codes": {a: blocks[f"c{a}"].fillna(_NULL_CODE).to_numpy(np.int64) for a in range(n_attr)},
        "rho": {a: blocks[f"rho{a}"].to_numpy(float) for a in range(n_attr)},
        "full": {a: counts[a] for a in range(n_attr)},
    }


def _pass_c_spec(state: dict[Pair, _PairState], active: list[Pair]) -> list[tuple]:
    return [(p[0], p[1], _thr(state[p].lb), state[p].cursor) for p in active]


def _pass_c_batches(it, b: dict, spec: list[tuple], edges: list[float],
                    dim_x: int) -> Iterator[pa.RecordBatch]:
    """Pass C over some batches of the working table (see :func:`_eliminate`); shared
    by the Spark task and the driver path."""
    nblk = len(edges) - 1
    stats = {(t, a): (np.zeros(nblk, np.int64), np.full(nblk, -np.inf),
                      np.zeros(nblk, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64),
                      np.full(1, -np.inf)) for t, a, _, _ in spec}
    for batch in it:
        if batch.num_rows == 0:
            continue
        P = None
        for t, a, thr, cur in spec:
            u = _np(batch, _ucol((t, a)))
            alive = u >= thr
            if cur is not None:
                alive &= u <= cur[0]
                eq = np.flatnonzero(alive & (u == cur[0]))
                if len(eq):
                    ks = _col(batch, "key").take(pa.array(eq)).to_pylist()
                    alive[eq[[k <= cur[1] for k in ks]]] = False
            idx = np.flatnonzero(alive)
            if not len(idx):
                continue
            if P is None:  # a view: only the rows checked are copied
                P = _from_blob(_col(batch, "xb"), dim_x + 2, copy=False)
            st = stats[(t, a)]
            st[3][0] += len(idx)
            codes = _codes(batch, f"c{a}")[idx]
            Q = _tpoints(P[idx], t)
            bound = u[idx].copy()
            nb = np.asarray(_col(batch, _nbcol((t, a))).take(pa.array(idx)).to_pylist(),
                            dtype=object)
            full = _other_max_codes(codes, b["full"][a])
            keep = np.ones(len(idx), dtype=bool)
            for j in range(nblk):
                lo, hi = edges[j], edges[j + 1]
                m = (b["rho"][a] >= lo) & (b["rho"][a] < hi)
                live = np.flatnonzero(keep)
                if not len(live):
                    break
                if m.any():
                    d, ri = nn_other_group_clustered(Q[live], codes[live],
                                                     _tpoints(b["P"][m], t), b["codes"][a][m])
                    nk = np.full(len(d), None, dtype=object)
                    ok = ri >= 0
                    nk[ok] = b["keys"][m][ri[ok]]
                    better = _tie_keys(d, nk, bound[live], nb[live])
                    bound[live[better]] = d[better]
                    nb[live[better]] = nk[better]
                out = live[bound[live] < thr]
                st[0][j] += len(out)
                if len(out):
                    st[1][j] = max(st[1][j], float(bound[out].max()))
                keep[out] = False
                ex = live[keep[live] & (full[live] <= hi)]
                st[2][j] += len(ex)
                if len(ex):
                    yield _c_rows(2, (t, a), batch, idx[ex], bound[ex], nb[ex], codes[ex])
                    keep[ex] = False
            sv = np.flatnonzero(keep)
            st[4][0] += len(sv)
            if len(sv):
                st[5][0] = max(st[5][0], float(bound[sv].max()))
                yield _c_rows(1, (t, a), batch, idx[sv], bound[sv], nb[sv], codes[sv],
                              xb=_to_blob(P[idx[sv]]))
    for (t, a), (ne, mx, nx, nin, nsv, msv) in stats.items():
        k = len(ne)
        m = 2 * k + 2
        yield pa.RecordBatch.from_pydict({
            "kind": pa.array(np.r_[np.zeros(k), np.full(k, 3), [4, 5]].astype(np.int32)),
            "tgt": pa.array(np.full(m, t, np.int32)),
            "attr": pa.array(np.full(m, a, np.int32)),
            "blk": pa.array(np.r_[np.arange(k), np.arange(k), [-1, -1]].astype(np.int32)),
            "n": pa.array(np.r_[ne, nx, nin, nsv].astype(np.int64)),
            "mx": pa.array(np.r_[mx, np.full(k + 1, -np.inf), msv]),
            "key": pa.nulls(m, pa.string()), "d": pa.nulls(m, pa.float64()),
            "nb_key": pa.nulls(m, pa.string()),
            "code": pa.nulls(m, pa.int32()), "xb": pa.nulls(m, pa.binary()),
        })


def _eliminate(work: DataFrame, b: dict, spec: list[tuple], edges: list[float], *,
               n_attr: int, dim_x: int) -> DataFrame:
    """Pass C: every row with ``u >= L`` (not searched yet) against the blocks (in the
    task's closure).

    ``b``: the blocks (:func:`_block_bcast`); ``spec``: per active pair
    ``(tgt, attr, threshold, cursor)``. Returns the (unpersisted) output: ``kind`` 0 per
    block the rows eliminated (``n``, largest bound ``mx``), 3 the rows made exact, 4 the
    rows entering; 1 the survivors (with their vectors), 2 the rows whose blocks covered
    their other side (exact ``nn``, may raise ``L``).
    """
    def run(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pin_threads()
        maybe_fail_first_attempt("hfm")
        yield from _pass_c_batches(it, b, spec, edges, dim_x)

    need = ["key", "xb", *[f"c{a}" for a in range(n_attr)],
            *{c for t, a, _, _ in spec for c in (_ucol((t, a)), _nbcol((t, a)))}]
    # only rows with a bound not below some pair's threshold enter the pass (the task
    # skips the others): filtered in the JVM, so the rows left after pass B (about 2%
    # on Adult x 20) are all that cross to Python, not every row's vector
    entering = F.lit(False)
    for t, a, thr, _ in spec:
        entering |= F.col(_ucol((t, a))) >= F.lit(float(thr))
    return work.where(entering).select(*need).mapInArrow(run, _C_SCHEMA)


def _c_rows(kind: int, p: Pair, batch: pa.RecordBatch, rows: np.ndarray,
            d: np.ndarray, nb: np.ndarray, codes: np.ndarray,
            xb: pa.Array | None = None) -> pa.RecordBatch:
    """Pass C output rows of ``kind`` for pair ``p = (tgt, attr)``: ``rows`` of ``batch``
    with their distances ``d``, neighbour keys ``nb``, codes (and vectors ``xb``)."""
    t, a = p
    n = len(rows)
    return pa.RecordBatch.from_pydict({
        "kind": pa.array(np.full(n, kind, np.int32)), "tgt": pa.array(np.full(n, t, np.int32)),
        "attr": pa.array(np.full(n, a, np.int32)), "blk": pa.nulls(n, pa.int32()),
        "n": pa.nulls(n, pa.int64()), "mx": pa.nulls(n, pa.float64()),
        "key": _col(batch, "key").take(pa.array(rows)).cast(pa.string()),
        "d": pa.array(np.asarray(d, float)), "nb_key": pa.array(list(nb), type=pa.string()),
        "code": pa.array(np.asarray(codes, np.int64).astype(np.int32)),
        "xb": xb if xb is not None else pa.nulls(n, pa.binary()),
    })
