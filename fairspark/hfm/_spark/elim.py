"""Exact D by elimination, with no copy of the feature vectors (METHODS §1, ``certified``).

Passes over the rows, each a ``mapInArrow`` task reading the feature vectors where
they lie (a float64 blob per row, decoded without a per-row Python object):

0. **Ranks and sample.** Every row gets ``rho_a = h(key, seed) * n(a, code)`` (its
   expected position among the rows of its code); the rows with ``rho_a < q`` for some
   attribute are collected (the sample, about ``q`` rows per code).
1. **Bounds** (pass A). The sample is broadcast; every row gets ``u(p)``, the distance
   to its nearest other-group sample row (an upper bound of ``nn(p)``). The pass
   writes the *working table* (key, codes, ranks, blob, bounds), persisted once; every
   later pass reads it.
2. **Exact searches** (pass B) of the ``first_search`` rows with the largest ``u``
   (their vectors broadcast; every task scans its own rows) give ``L = max nn``, a
   lower bound of D.
3. **Elimination** (pass C). The next blocks of every code (``q <= rho < R``, growing
   ``first_block, 2 * first_block, ...`` rows per code) are broadcast; in one pass every
   row with ``u >= L`` is checked against them block after block and leaves as soon as
   a neighbour closer than ``L`` is seen (EarlyBreak's idea with one global bound).
   Rows whose blocks covered their whole other side have their exact ``nn``.
4. **Survivors** (pass D, usually few rows) are taken in decreasing bound, broadcast,
   and checked against the blocks past ``R`` (doubling) until eliminated or exact; an
   exact ``nn`` may raise ``L``. When no row is left, ``D = L`` is exact.

Only keys, groups and bounds (and the vectors of the few rows searched) leave a task.
Every distance that decides D or a witness is computed directly
(``sqrt(sum((a - b)^2))``, in :func:`fairspark.hfm._kernels.nn_other_group`; rows that
repeat or cluster are searched once per cluster by
:func:`~fairspark.hfm._kernels.nn_other_group_clustered`, same result), and a row
is eliminated only when its bound is below ``L`` by a relative margin (:data:`MARGIN`),
so rounding never drops a row that could realise D, nor one that ties with it (witness
ties go to the smallest key, as in the ``exact`` method). Everything is a function of
the rows and the seed, so the result does not depend on partitioning.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from fairspark._testing import maybe_fail_first_attempt
from fairspark._threads import pin_threads, single_thread
from fairspark.hfm._kernels import (
    nn_other_group_clustered,
    nn_other_group_refclustered,
    query_clusters,
)
from fairspark.hfm._spark._cost import CostLog
from fairspark.hfm._spark._points import code_cols, points_schema_check
from fairspark.hfm.results import CertifiedResult
from fairspark.sampling import hash_bucket

__all__ = ["LOCAL_MAX_BYTES", "MARGIN", "CertifyOptions", "certify_exact", "code_counts",
           "driver_budget", "sample_bounds_numpy"]

Pair = tuple[int, int]
_LOG = logging.getLogger(__name__)
#: a scan of every row with at least this many queries groups the rows first
_REF_CLUSTER_QUERIES = 32

#: a row is eliminated only when its upper bound is below ``L * (1 - MARGIN)``
MARGIN = 1e-9
_RANK = 1 << 30  # fairspark.sampling.BUCKETS
#: bytes of feature vectors broadcast in one round (queries or blocks)
_BCAST_BYTES = 32 << 20
#: default budget of the driver path (``audits.hfm.local_max_bytes``): ``None`` sizes it
#: from the driver's memory (:func:`driver_budget`)
LOCAL_MAX_BYTES: int | None = None
_NN_SCHEMA = "tgt int, attr int, qi long, d double, nb_key string"
_C_SCHEMA = ("kind int, tgt int, attr int, blk int, n long, mx double, key string, "
             "d double, nb_key string, code int, xb binary")


@dataclass(frozen=True)
class CertifyOptions:
    """How :func:`certify_exact` searches (the defaults are the ``hfm`` audit's).

    Attributes
    ----------
    seed:
        Seed of the hash ranks (sample and blocks).
    sample_rows:
        Sample size per code (at least 64 rows of every code; fewer when there are many
        codes, about ``2 * sample_rows`` rows in all).
    first_search:
        Rows with the largest bound searched exactly first, per pair (they set ``L``).
    first_block:
        Rows per code of the first block past the sample; each next block is twice as
        large.
    max_candidates:
        Cap on rows checked per pair (``not_certified`` when reached); default none.
    local_max_bytes:
        Driver path: when the points (``8 * (dim_x + 2) + 64`` bytes a row) fit this
        budget and half of ``spark.driver.maxResultSize``, they are collected once
        (a capped collect of at most that many rows) and the same passes run on the
        driver, on one Arrow batch (one Spark job instead of about twenty; same result,
        counts and rounds). 0: always the Spark passes; ``None`` (default): sized from
        the driver's memory (:func:`driver_budget`).
    time_left:
        Seconds left of the time budget, checked between passes; past it the result is
        ``not_certified`` with the interval so far. ``None``: no budget.
    """

    seed: int = 0
    sample_rows: int = 1024
    first_search: int = 256
    first_block: int = 1024
    max_candidates: int | None = None
    local_max_bytes: int | None = LOCAL_MAX_BYTES
    time_left: Callable[[], float] | None = None


@dataclass(frozen=True)
class _Plan:
    """What every pass of one :func:`certify_exact` call reads: the points' shape, the
    first searches per pair (``k``), the options that steer the passes, the budget."""

    n_attr: int
    dim_x: int
    k: int
    first_block: int
    max_candidates: int | None
    time_left: Callable[[], float]


@dataclass
class _PairState:
    """Where the search of one (target, attribute) stands.

    ``lb``/``key``/``nb_key``: the largest exact ``nn`` so far and its witness pair;
    ``cursor``: ``(bound, key)`` of the last row taken (rows are taken in decreasing
    bound); ``ub_rem``: the largest bound not taken yet; ``open_ub``: the largest running
    bound of the rows still being checked; ``rounds``: per round ``L`` and the largest
    bound of the rows it eliminated (the elimination invariant: always below ``L``).
    """

    lb: float = -math.inf
    key: str | None = None
    nb_key: str | None = None
    cursor: tuple[float, str] | None = None
    ub_rem: float = math.inf
    open_ub: float = -math.inf
    n_exact: int = 0
    n_checked: int = 0
    done: bool = False
    certified: bool = False
    steps: list[tuple[int, float, float]] = field(default_factory=list)
    rounds: list[dict] = field(default_factory=list)

    def upper(self) -> float:
        """The upper end of the interval so far."""
        if self.certified:
            return self.lb
        return max(self.lb, self.ub_rem, self.open_ub)

    def raise_lb(self, d: float, key: str, nb_key: str | None) -> None:
        """An exact ``nn``: the lower bound, ties to the smallest key."""
        if d > self.lb or (d == self.lb and (self.key is None or key < self.key)):
            self.lb, self.key, self.nb_key = d, key, nb_key

    def result(self, n_above: int | None = None) -> CertifiedResult:
        """The interval and counts as a :class:`CertifiedResult`."""
        return CertifiedResult(
            lower=self.lb, upper=self.upper(), certified=self.certified, n_searched=self.n_exact,
            key=self.key, nb_key=self.nb_key, steps=list(self.steps), n_above=n_above,
            n_checked=self.n_checked, rounds=list(self.rounds),
        )


def _thr(lb: float) -> float:
    """Bounds below this cannot realise (or tie with) a distance ``lb``."""
    return lb - MARGIN * abs(lb) if math.isfinite(lb) else -math.inf


def _max_result_bytes(spark) -> float:
    v = str(spark.conf.get("spark.driver.maxResultSize", "1g")).strip().lower()
    m = re.fullmatch(r"(\d+)([kmgt]?)b?", v)
    if not m:
        return 1 << 30
    unit = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2)]
    n = int(m.group(1)) * unit
    return math.inf if n == 0 else float(n)


def _jvm_max_heap(spark) -> float:
    """The driver JVM's maximum heap (bytes; ``inf`` when it cannot be read)."""
    try:
        return float(spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory())
    except Exception:  # noqa: BLE001 - a remote (Connect) session has no JVM here
        return math.inf


def _available_memory() -> float:
    """Physical memory available to this process now (bytes; ``inf`` when unknown)."""
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return math.inf


def driver_budget(spark, local_max_bytes: int | None = None) -> tuple[float, dict[str, float]]:
    """Bytes of points (``8 * (d + 2) + 64`` a row) the driver path may collect.

    An explicit ``local_max_bytes`` is used as given; ``None`` sizes the budget from the
    driver: a quarter of the JVM's maximum heap (the collected Arrow batches pass
    through it), an eighth of the physical memory available now (the working batch and
    the passes' temporaries hold about five copies of the points in Python), and always
    at most half of ``spark.driver.maxResultSize`` (the row estimate is above the Arrow
    bytes of a row, ``8 d + 45``, so the collect stays within the limit).

    Returns
    -------
    budget : float
        Bytes.
    sized_from : dict
        The figures the budget was taken from (for the cost model).
    """
    max_result = _max_result_bytes(spark)
    parts = {"max_result_size / 2": max_result / 2}
    if local_max_bytes is not None:
        parts["local_max_bytes"] = float(local_max_bytes)
    else:
        parts["jvm_heap / 4"] = _jvm_max_heap(spark) / 4
        parts["available_memory / 8"] = _available_memory() / 8
    budget = min(parts.values())
    return budget, {k: (v if math.isfinite(v) else None) for k, v in parts.items()}


def _log_path_choice(n_rows: int | None, row_bytes: float, budget: float,
                     sized_from: dict[str, float | None]) -> None:
    """One log line: the path the engine takes (driver or Spark) and why."""
    def mb(v: float | None) -> str:
        return "unknown" if v is None else f"{v / 2**20:,.0f} MB"

    parts = ", ".join(f"{k} = {mb(v)}" for k, v in sized_from.items())
    if n_rows is None:
        _LOG.info("hfm: driver path if the points fit %s (min of %s)", mb(budget), parts)
        return
    need = n_rows * row_bytes
    where = "driver path" if need <= budget else "Spark path"
    _LOG.info("hfm: %s: %d points need %s, the driver budget is %s (min of %s)",
              where, n_rows, mb(need), mb(budget), parts)


def _collect(df: DataFrame, est_bytes: float) -> pd.DataFrame:
    """A small result on the driver, within ``spark.driver.maxResultSize``.

    Above a quarter of the limit the rows are spread over enough partitions (an explicit
    ``repartition``, which adaptive execution does not coalesce) that each holds about an
    eighth of the limit, and come one partition per job: however small
    ``spark.driver.maxResultSize`` is, no job returns more than it allows.
    """
    budget = _max_result_bytes(df.sparkSession) / 4
    if est_bytes < budget:
        return df.toPandas()
    pages = df.repartition(max(1, math.ceil(2.0 * est_bytes / budget)))
    return pd.DataFrame.from_records([r.asDict() for r in pages.toLocalIterator()],
                                     columns=df.columns)


def code_counts(pts: DataFrame, n_attr: int) -> dict[int, dict[int, int]]:
    """Rows per (attribute, code): one aggregation."""
    pairs = F.explode(F.array(*[
        F.struct(F.lit(a).alias("a"), F.col(c).alias("c")) for a, c in enumerate(code_cols(n_attr))
    ])).alias("p")
    out: dict[int, dict[int, int]] = {a: {} for a in range(n_attr)}
    for r in pts.select(pairs).groupBy("p.a", "p.c").count().collect():
        if r["c"] is not None:
            out[int(r["a"])][int(r["c"])] = int(r["count"])
    return out


# ----------------------------------------------------------------------------- blobs
def _to_blob(P: np.ndarray) -> pa.Array:
    """Rows of a float matrix as a binary array (one float64 blob per row)."""
    P = np.ascontiguousarray(P, dtype=np.float64)
    n, w = P.shape
    offs = (np.arange(n + 1, dtype=np.int64) * (8 * w)).astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offs), pa.py_buffer(P)])


def _from_blob(col: pa.Array, width: int, *, copy: bool = True) -> np.ndarray:
    """A binary array of float64 blobs as an ``(n, width)`` matrix (no per-row objects;
    ``copy=False``: a read-only view of the Arrow buffer, valid while it lives)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    n = len(col)
    if n == 0:
        return np.zeros((0, width))
    big = pa.types.is_large_binary(col.type)
    bufs = col.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int64 if big else np.int32)
    offs = offs[col.offset:col.offset + n + 1]
    if col.null_count or offs[-1] - offs[0] != 8 * width * n:
        raise ValueError("feature blobs of unequal length")
    data = np.frombuffer(bufs[2], dtype=np.uint8, count=int(offs[-1] - offs[0]),
                         offset=int(offs[0]))
    view = data.view(np.float64).reshape(n, width)
    return np.array(view) if copy else view


def _blobs_of(values) -> np.ndarray:
    """Blobs collected on the driver (bytes objects) as one matrix per row."""
    vals = list(values)
    if not vals:
        return np.zeros((0, 0))
    return np.frombuffer(b"".join(bytes(v) for v in vals), dtype=np.float64).reshape(len(vals), -1)


def _col(batch: pa.RecordBatch, name: str) -> pa.Array:
    return batch.column(batch.schema.get_field_index(name))


def _strs(col: pa.Array) -> np.ndarray:
    """A string column as an object array of ``str`` (``None`` where null)."""
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)


def _np(batch: pa.RecordBatch, name: str, dtype=np.float64) -> np.ndarray:
    return _col(batch, name).to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def _stack_points(y: np.ndarray, yp: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The points matrix ``[yp, y, x]``: the one place its column order is set."""
    return np.column_stack([yp, y, x])


def _features(batch: pa.RecordBatch, dim_x: int) -> np.ndarray:
    """``[yp, y, x]`` of a batch of the points table (``x`` a list column): the label's
    points ``[y, x]`` are then a view (:func:`_tpoints`)."""
    x = _col(batch, "x")
    flat = x.flatten().to_numpy(zero_copy_only=False)
    n = len(x)
    if flat.size != n * dim_x:
        raise ValueError(f"feature vectors must all have length {dim_x}")
    return _stack_points(_np(batch, "y"), _np(batch, "yp"), flat.reshape(n, dim_x))


def _tpoints(P: np.ndarray, tgt: int) -> np.ndarray:
    """Points ``[t, x]`` of ``[yp, y, x]`` rows, ``t`` the label (0) or the prediction (1).

    The label's are a view of the rows (no copy: D's points, which every audit
    computes; 400 MB at 1e6 x 50); the prediction's a copy."""
    if tgt == 0:
        return P[:, 1:]
    return np.concatenate([P[:, :1], P[:, 2:]], axis=1)


def _ucol(p: Pair) -> str:
    return f"u{p[0]}_{p[1]}"


def _nbcol(p: Pair) -> str:
    return f"nb{p[0]}_{p[1]}"


def _tie_keys(d: np.ndarray, nk: np.ndarray, bd: np.ndarray, bk: np.ndarray) -> np.ndarray:
    """Where a new distance beats the running one: smaller, or equal with a smaller key."""
    better = d < bd
    tie = np.flatnonzero((d == bd) & np.isfinite(d))
    for i in tie:
        if nk[i] is not None and (bk[i] is None or nk[i] < bk[i]):
            better[i] = True
    return better


def _key_order(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch sorted by key (nn ties go to the smallest index, hence the smallest key)."""
    return batch.take(pc.sort_indices(_col(batch, "key")))


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


_NULL_CODE = -(1 << 31)


def _codes(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """An int code column (nulls as a code of their own that matches nothing else)."""
    return _col(batch, name).fill_null(_NULL_CODE).to_numpy(zero_copy_only=False)


def _rho(h: np.ndarray, codes: np.ndarray, counts: dict[int, int]) -> np.ndarray:
    """``rho = h * n(code)`` (0 for codes not counted)."""
    if not counts:
        return np.zeros(len(h))
    ks = np.array(sorted(counts), dtype=np.int64)
    vs = np.array([counts[k] for k in sorted(counts)], dtype=float)
    pos = np.clip(np.searchsorted(ks, codes), 0, len(ks) - 1)
    return h * np.where(ks[pos] == codes, vs[pos], 0.0)


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


def _map(fn: Callable, items: list, threads: int) -> list:
    """``[fn(x) for x in items]``, on up to ``threads`` threads (numpy's kernels release
    the GIL; BLAS held to one thread each meanwhile). Same results in the same order."""
    if threads <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with single_thread(), ThreadPoolExecutor(max_workers=min(threads, len(items))) as ex:
        return list(ex.map(fn, items))


def _row_slices(n: int, threads: int) -> list[slice]:
    """Contiguous row ranges, one per thread (ranges of at least 4,096 rows), that pass A
    and the driver path's scans search apart: each range's target points and clusters
    are built on its own thread, and every (range, pair) search is one task, so both
    cores work even where there are as many pairs as threads (figures: docs/benchmarks.md,
    issue 26 session 16). A row's bound is its own, so the ranges do not change any
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


def _work_table(ranked: DataFrame, sample: pd.DataFrame, *, n_attr: int, dim_x: int,
                pairs: list[Pair], counts: dict[int, dict[int, int]]) -> DataFrame:
    """Pass A: the working table with blobs, ranks and sample bounds (not persisted).

    ``ranked`` is the points table with ``h`` (the seeded hash of the key in [0, 1));
    ``sample`` its sample rows (pandas, with ``x``).
    """
    cols = code_cols(n_attr)
    sample = sample.sort_values("key", kind="mergesort")
    sx = np.vstack(sample["x"].to_numpy()) if len(sample) else np.zeros((0, dim_x))
    SP = _stack_points(sample["y"].to_numpy(float), sample["yp"].to_numpy(float),
                       sx.reshape(len(sample), dim_x))
    bc = ranked.sparkSession.sparkContext.broadcast({
        "keys": sample["key"].to_numpy(dtype=object), "P": SP,
        "codes": {c: sample[c].fillna(_NULL_CODE).to_numpy(np.int64) for c in cols},
        "counts": counts,
    })
    fields = ["key string", "h double", *[f"{c} int" for c in cols],
              *[f"rho{a} double" for a in range(n_attr)], "xb binary",
              *[f"{_ucol(p)} double, {_nbcol(p)} string" for p in pairs]]

    def bounds(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pin_threads()
        maybe_fail_first_attempt("hfm")
        s = bc.value
        for batch in it:
            if batch.num_rows:
                yield _bounds_batch(batch, s, n_attr=n_attr, dim_x=dim_x, pairs=pairs)

    return ranked.select("key", "h", "y", "yp", "x", *cols).mapInArrow(bounds, ", ".join(fields))


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
            nk[ok] = (keys if whole else keys[m])[idx[ok]]
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
                lo: float, hi: float) -> pd.DataFrame:
    """Nearest other-group row, among the rows with ``lo <= rho_attr < hi``, of each query.

    ``queries``: per pair ``(tgt, attr, points [t, x], codes)`` (broadcast; every task
    scans its own rows and keeps per query its best neighbour over its batches, ties to
    the smaller key). Returns ``tgt, attr, qi, d, nb_key`` (queries with no such
    neighbour are absent), reduced over tasks in Spark.
    """
    cols = code_cols(n_attr)
    bc = work.sparkSession.sparkContext.broadcast(queries)
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
        yield from _scan_batches(it, bc.value, n_attr=n_attr, dim_x=dim_x, lo=lo, hi=hi)

    per_task = work.where(cond).select("key", "xb", *cols, *[f"rho{a}" for a in attrs]) \
        .mapInArrow(scan, _NN_SCHEMA)
    n_q = sum(len(q[2]) for q in queries)
    if 64.0 * n_q * work.rdd.getNumPartitions() < _max_result_bytes(work.sparkSession) / 4:
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


def _search_top(work: _Work, found_rows: pd.DataFrame, top: dict,
                state: dict[Pair, _PairState], pairs: list[Pair], *, dim_x: int, k: int) -> None:
    """Pass B: exact ``nn`` of the ``k`` rows with the largest bound per pair (sets ``L``).

    ``top``: per pair the ``k + 1`` largest ``(-u, key, nb_key)`` (from pass A);
    ``found_rows``: collected rows of the working table holding their vectors.
    """
    queries, tops = [], {}
    by_key = found_rows.drop_duplicates("key").set_index("key")
    for p in pairs:
        st = state[p]
        rows = top.get(p, [])
        st.ub_rem = -rows[k][0] if len(rows) > k else -math.inf
        rows = rows[:k]
        if rows:
            st.cursor = (-rows[-1][0], rows[-1][1])
        keys = [r[1] for r in rows]
        tops[p] = keys
        st.n_checked += len(rows)
        sub = by_key.loc[keys] if keys else by_key.iloc[:0]
        P = _blobs_of(sub["xb"]) if len(sub) else np.zeros((0, dim_x + 2))
        queries.append((p[0], p[1], _tpoints(P, p[0]),
                        sub[f"c{p[1]}"].fillna(_NULL_CODE).to_numpy(np.int64)))
    found = work.scan(queries, lo=0.0, hi=math.inf)
    for p in pairs:
        st, keys = state[p], tops[p]
        st.n_exact += len(keys)
        sub = found[(found["tgt"] == p[0]) & (found["attr"] == p[1])]
        for qi, d, nb in zip(sub["qi"], sub["d"], sub["nb_key"], strict=True):
            st.raise_lb(float(d), str(keys[int(qi)]), nb)
        if st.ub_rem == -math.inf or st.ub_rem < _thr(st.lb):
            st.done = st.certified = True
            st.ub_rem = -math.inf


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
    """The blocks of pass C as broadcast (vectors, keys, codes and ranks, key order)."""
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
    """Pass C: every row with ``u >= L`` (not searched yet) against the broadcast blocks.

    ``b``: the blocks (:func:`_block_bcast`); ``spec``: per active pair
    ``(tgt, attr, threshold, cursor)``. Returns the (unpersisted) output: ``kind`` 0 per
    block the rows eliminated (``n``, largest bound ``mx``), 3 the rows made exact, 4 the
    rows entering; 1 the survivors (with their vectors), 2 the rows whose blocks covered
    their other side (exact ``nn``, may raise ``L``).
    """
    bc = work.sparkSession.sparkContext.broadcast(b)

    def run(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pin_threads()
        maybe_fail_first_attempt("hfm")
        yield from _pass_c_batches(it, bc.value, spec, edges, dim_x)

    need = ["key", "xb", *[f"c{a}" for a in range(n_attr)],
            *{c for t, a, _, _ in spec for c in (_ucol((t, a)), _nbcol((t, a)))}]
    return work.select(*need).mapInArrow(run, _C_SCHEMA)


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


def _apply_pass_c(small: pd.DataFrame, state: dict[Pair, _PairState], active: list[Pair],
                  edges: list[float]) -> None:
    """Counts, rounds and exact rows of pass C (its rows but the survivors) into the
    pair states."""
    for p in active:
        st = state[p]
        sub = small[(small["tgt"] == p[0]) & (small["attr"] == p[1])]
        entered = int(sub.loc[sub["kind"] == 4, "n"].sum())
        st.n_checked += entered
        left = entered
        for j in range(len(edges) - 1):
            bj = sub[sub["blk"] == j]
            ne = int(bj.loc[bj["kind"] == 0, "n"].sum())
            nx = int(bj.loc[bj["kind"] == 3, "n"].sum())
            mx = bj.loc[bj["kind"] == 0, "mx"]
            mx = float(mx.max()) if ne else None
            st.n_exact += nx
            left -= ne + nx
            st.rounds.append({"L": st.lb, "hi": edges[j + 1], "eliminated": ne,
                              "max_eliminated": mx, "left": left})
        sv = sub[sub["kind"] == 5]
        st.ub_rem = float(sv["mx"].max()) if int(sv["n"].sum()) else -math.inf
        st.cursor = None
        ex = sub[sub["kind"] == 2].sort_values("key", kind="mergesort")
        for key, d, nb in zip(ex["key"], ex["d"], ex["nb_key"], strict=True):
            if np.isfinite(d):
                st.raise_lb(float(d), str(key), nb)


# ----------------------------------------------------------------------------- where
class _Work:
    """The working table the passes read: on Spark (:class:`_SparkWork`) or one Arrow
    batch on the driver (:class:`_LocalWork`). Both run the same per-batch functions
    (:func:`_bounds_batch`, :func:`_scan_batches`, :func:`_pass_c_batches`)."""

    where = ""
    counts: dict[int, dict[int, int]]
    quota: float
    max_result: float
    cost: CostLog
    n_rows: int
    dim_x: int

    #: whether the passes run Spark jobs (the driver path's passes are numpy only)
    spark_jobs = True

    def step(self, name: str, *, full: bool = False):
        """A pass measured by the cost log; ``full``: it reads every row's features."""
        if not full:
            return self.cost.step(name, spark_jobs=self.spark_jobs)
        return self.cost.step(name, rows_read=self.n_rows,
                              bytes_read=self.n_rows * 8.0 * (self.dim_x + 2),
                              spark_jobs=self.spark_jobs)

    def n_part(self) -> int:
        """Partitions the working table is read in (sizes the collects)."""
        return 1

    def close(self) -> None:
        """Release what the working table holds."""

    def release(self, surv) -> None:
        """Release the survivors of pass C."""


def _quota(sample_rows: int, counts: dict[int, dict[int, int]]) -> float:
    """Sample rows per code (expected): at least 64, about ``2 * sample_rows`` in all."""
    n_codes = sum(len(c) for c in counts.values())
    return float(max(64, (2 * sample_rows) // max(1, n_codes)))


class _SparkWork(_Work):
    """The working table on Spark (persisted once, read by every pass)."""

    where = "spark"

    def __init__(self, df: DataFrame, *, n_attr: int, dim_x: int, pairs: list[Pair],
                 counts: dict[int, dict[int, int]], quota: float, n_rows: int,
                 cost: CostLog) -> None:
        self.df, self.n_attr, self.dim_x = df, n_attr, dim_x
        self.counts, self.quota = counts, quota
        self.n_rows, self.cost = n_rows, cost
        self.max_result = _max_result_bytes(df.sparkSession)
        ub = None
        for p in pairs:
            one = df.select(F.lit(p[0]).alias("tgt"), F.lit(p[1]).alias("attr"), "key",
                            F.col(_ucol(p)).alias("u"), F.col(_nbcol(p)).alias("nb_key"),
                            F.lit(1).cast("long").alias("mult"))
            ub = one if ub is None else ub.unionByName(one)
        self.ub = ub

    @classmethod
    def build(cls, pts: DataFrame, ranked: DataFrame, *, n_attr: int, dim_x: int,
              pairs: list[Pair], sample_rows: int, n_rows: int | None,
              cost: CostLog) -> _SparkWork:
        """Code counts, the sample (one collect) and pass A (persisted, not run yet)."""
        with cost.step("code counts") as rec:
            counts = code_counts(pts, n_attr)
        if n_rows is None:
            n_rows = sum(counts[0].values()) if n_attr else 0
        rec["rows_read"] = n_rows
        quota = _quota(sample_rows, counts)
        n_codes = sum(len(c) for c in counts.values())
        in_sample = F.lit(False)
        for a, c in enumerate(code_cols(n_attr)):
            if counts[a]:
                m = F.create_map(*[x for code, n in sorted(counts[a].items())
                                   for x in (F.lit(code), F.lit(float(n)))])
                in_sample |= F.col("h") * F.element_at(m, F.col(c)) < F.lit(quota)
        with cost.step("sample collect", rows_read=n_rows,
                       bytes_read=n_rows * 8.0 * (dim_x + 2)) as rec:
            sample = _collect(ranked.where(in_sample).select("key", "y", "yp", "x",
                                                             *code_cols(n_attr)),
                              est_bytes=8.0 * (dim_x + 4) * quota * max(1, n_codes))
            rec["rows_out"] = len(sample)
        df = _work_table(ranked, sample, n_attr=n_attr, dim_x=dim_x, pairs=pairs,
                         counts=counts).persist(StorageLevel.MEMORY_AND_DISK)
        return cls(df, n_attr=n_attr, dim_x=dim_x, pairs=pairs, counts=counts, quota=quota,
                   n_rows=n_rows, cost=cost)

    def n_part(self) -> int:
        return max(1, self.df.rdd.getNumPartitions())

    def close(self) -> None:
        self.df.unpersist()

    def top_bounds(self, pairs: list[Pair], k: int) -> dict[Pair, list[tuple]]:
        return _top_bounds(self.df, pairs, k)

    def bounds_rows(self, pairs: list[Pair]) -> DataFrame:
        return self.ub

    def fetch(self, keys: list[str], attrs: list[int], lo: float, hi: float, *,
              est_bytes: float) -> pd.DataFrame:
        """Rows with these keys or with ``lo <= rho < hi`` for one of ``attrs``."""
        want = F.col("key").isin(keys) if keys else F.lit(False)
        for a in attrs:
            want |= (F.col(f"rho{a}") >= F.lit(lo)) & (F.col(f"rho{a}") < F.lit(hi))
        return _collect(self.df.where(want).select("key", "xb", *code_cols(self.n_attr),
                                                   *[f"rho{a}" for a in range(self.n_attr)]),
                        est_bytes=est_bytes)

    def scan(self, queries: list[tuple], *, lo: float, hi: float) -> pd.DataFrame:
        return _exact_scan(self.df, queries, n_attr=self.n_attr, dim_x=self.dim_x, lo=lo, hi=hi)

    def count_left(self, active: list[Pair], state: dict[Pair, _PairState]) -> dict[Pair, int]:
        """Rows after the cursor with a bound not below ``L`` (one aggregation)."""
        cond = [F.sum(((F.col(_ucol(p)) >= F.lit(_thr(state[p].lb))) & _after(p, state[p].cursor))
                      .cast("long")).alias(_ucol(p)) for p in active]
        n_left = self.df.agg(*cond).first()
        return {p: int(n_left[_ucol(p)] or 0) for p in active}

    def eliminate(self, b: dict, spec: list[tuple], edges: list[float]) -> tuple:
        """Pass C: its small rows (collected) and the survivors (persisted)."""
        out = _eliminate(self.df, b, spec, edges, n_attr=self.n_attr,
                         dim_x=self.dim_x).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            small = out.where(F.col("kind") != 1).drop("xb").toPandas()
        except BaseException:
            out.unpersist()
            raise
        return small, out

    def release(self, surv) -> None:
        surv.unpersist()

    def survivor_rows(self, surv: DataFrame, p: Pair, thr: float,
                      cursor: tuple[float, str] | None, limit: int, *,
                      est_bytes: float) -> pd.DataFrame:
        """The first ``limit`` survivors of a pair after the cursor with ``d >= thr``."""
        cond = (F.col("kind") == 1) & _is_pair(p) & (F.col("d") >= F.lit(thr))
        if cursor is not None:
            cu, ck = cursor
            cond &= (F.col("d") < F.lit(cu)) | (
                (F.col("d") == F.lit(cu)) & (F.col("key") > F.lit(ck)))
        return _collect(surv.where(cond)
                        .select("tgt", "attr", "key", "d", "nb_key", "code", "xb")
                        .orderBy(F.col("d").desc(), F.col("key").asc()).limit(limit)
                        .repartition(1), est_bytes=est_bytes)

    def count_above(self, state: dict[Pair, _PairState]) -> dict[Pair, int]:
        """Rows whose sample bound exceeds the final lower bound (those needed a search)."""
        above = F.lit(False)
        for p, st in state.items():
            if math.isfinite(st.lb):
                above |= _is_pair(p) & (F.col("u") > F.lit(st.lb))
        return {(int(r["tgt"]), int(r["attr"])): int(r["count"])
                for r in self.ub.where(above).groupBy("tgt", "attr").count().collect()}


_NN_PA = pa.schema([("tgt", pa.int32()), ("attr", pa.int32()), ("qi", pa.int64()),
                    ("d", pa.float64()), ("nb_key", pa.string())])
_C_PA = pa.schema([("kind", pa.int32()), ("tgt", pa.int32()), ("attr", pa.int32()),
                   ("blk", pa.int32()), ("n", pa.int64()), ("mx", pa.float64()),
                   ("key", pa.string()), ("d", pa.float64()), ("nb_key", pa.string()),
                   ("code", pa.int32()), ("xb", pa.binary())])


def _frame(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> pd.DataFrame:
    """Batches of one schema as a pandas frame (empty with the columns when none)."""
    bs = [pa.RecordBatch.from_arrays([b.column(b.schema.get_field_index(f.name)).cast(f.type)
                                      for f in schema], schema=schema) for b in batches]
    return pa.Table.from_batches(bs, schema=schema).to_pandas()


def _driver_threads(spark) -> int:
    """Threads of the driver path's pass A: the session's parallelism (``local[2]``:
    2), at most the driver's cores."""
    try:
        par = int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - a remote (Connect) session has no context here
        par = 1
    return max(1, min(par, os.cpu_count() or 1))


def _sorted_by_key(tbl: pa.Table, dim_x: int) -> tuple[pa.RecordBatch, np.ndarray]:
    """The collected points as one key-sorted batch (without ``x``) and their key-sorted
    points ``[yp, y, x]``. Every chunk's feature lists are written straight to their
    sorted rows of the one matrix (no concatenated copy, no Arrow ``take`` of a list
    column, which is several times slower): on a machine that faults fresh memory in
    slowly, each 400 MB copy of 1e6 x 50 points costs about a second."""
    perm = pc.sort_indices(tbl["key"]).to_numpy()
    rest = tbl.drop_columns(["x"]).take(perm).combine_chunks()
    n = tbl.num_rows
    x = tbl.column("x")
    if x.null_count:
        raise ValueError(f"feature vectors must all have length {dim_x}")
    inv = np.empty(n, dtype=np.int64)
    inv[perm] = np.arange(n)
    P = np.empty((n, dim_x + 2))
    start = 0
    for chunk in x.chunks:
        m = len(chunk)
        flat = chunk.flatten().to_numpy(zero_copy_only=False)
        if flat.size != m * dim_x:
            raise ValueError(f"feature vectors must all have length {dim_x}")
        P[inv[start:start + m], 2:] = flat.reshape(m, dim_x)
        start += m
    names = [c for c in tbl.column_names if c != "x"]
    batch = pa.RecordBatch.from_arrays([rest.column(c).combine_chunks() for c in names],
                                       names=names)
    P[:, :2] = _stack_points(_np(batch, "y"), _np(batch, "yp"), np.zeros((n, 0)))
    return batch, P


class _LocalWork(_Work):
    """The working table as one key-sorted Arrow batch on the driver.

    Taken when the points fit a byte budget (a capped collect, like Spark's broadcast
    join threshold); every pass then runs the per-batch function of its Spark task on
    this batch, so results, counts and rounds are those of the Spark passes.
    """

    where = "driver"
    spark_jobs = False

    def __init__(self, batch: pa.RecordBatch, points: np.ndarray, *, n_attr: int, dim_x: int,
                 pairs: list[Pair], sample_rows: int, max_result: float, cost: CostLog,
                 threads: int = 1) -> None:
        """``batch``: the key-sorted points table (:func:`_sorted_by_key`), ``points``
        its ``[yp, y, x]``."""
        self.n_attr, self.dim_x, self.max_result = n_attr, dim_x, max_result
        self.cost, self.n_rows, self.threads = cost, batch.num_rows, threads
        cols = code_cols(n_attr)
        codes = {c: _codes(batch, c) for c in cols}
        self.counts = {}
        for a, c in enumerate(cols):
            v, n = np.unique(codes[c][codes[c] != _NULL_CODE], return_counts=True)
            self.counts[a] = {int(x): int(m) for x, m in zip(v, n, strict=True)}
        self.quota = _quota(sample_rows, self.counts)
        h = _np(batch, "h")
        in_sample = np.zeros(batch.num_rows, dtype=bool)
        for a, c in enumerate(cols):
            in_sample |= (codes[c] != _NULL_CODE) & (_rho(h, codes[c], self.counts[a]) < self.quota)
        idx = np.flatnonzero(in_sample)
        s = {"keys": _strs(_col(batch, "key").take(pa.array(idx))),
             "P": points[idx],
             "codes": {c: codes[c][idx].astype(np.int64) for c in cols},
             "counts": self.counts}
        kept: dict = {}
        with self.step("A: sample bounds", full=True) as rec:
            self.batch = _bounds_batch(batch, s, n_attr=n_attr, dim_x=dim_x, pairs=pairs,
                                       keep=kept, threads=threads, points=points)
            rec["threads"] = threads
            rec["rows_out"] = len(idx)
        del batch, points
        self.keys = _strs(_col(self.batch, "key"))
        # what the scans read: the batch is key-sorted, its points and each target's
        # points are pass A's (no second decode)
        rho = {a: _np(self.batch, f"rho{a}") for a in range(n_attr)}
        code = {a: _codes(self.batch, c) for a, c in enumerate(cols)}
        # per row range of pass A (each on its own thread): views, no copies
        self._scan_read = [(kept["P"][r], self.keys[r], {a: v[r] for a, v in rho.items()},
                            {a: v[r] for a, v in code.items()}, tp)
                           for r, tp in zip(kept["parts"], kept["tp"], strict=True)]
        self.u = {p: _np(self.batch, _ucol(p)) for p in pairs}
        self.nb = {p: _strs(_col(self.batch, _nbcol(p))) for p in pairs}

    @classmethod
    def collect(cls, ranked: DataFrame, *, n_attr: int, dim_x: int, pairs: list[Pair],
                sample_rows: int, n_rows: int | None, max_bytes: int | None,
                cost: CostLog) -> _LocalWork | None:
        """The points on the driver when they fit the budget (:func:`driver_budget`):
        one capped collect; ``None`` when they do not."""
        max_result = _max_result_bytes(ranked.sparkSession)
        row_bytes = 8.0 * (dim_x + 2) + 64
        budget, sized_from = driver_budget(ranked.sparkSession, max_bytes)
        cap = int(budget // row_bytes)
        cost.budget = {"bytes": int(budget), "rows": cap, "row_bytes": row_bytes,
                       "sized_from": sized_from}
        _log_path_choice(n_rows, row_bytes, budget, sized_from)
        if cap < 1 or (n_rows is not None and n_rows > cap):
            return None
        cols = code_cols(n_attr)
        sel = ranked.select("key", "h", "y", "yp", "x", *cols)
        # a known row count within the cap bounds the collect; otherwise a limit does
        # (a global limit moves every row into one task through a shuffle: 53 s against
        # 9.7 s without it for 904k rows at d = 56, loaded machine; so only when the
        # count is not known)
        with cost.step("driver collect") as rec:
            tbl = (sel if n_rows is not None else sel.limit(cap + 1)).toArrow()
            rec["rows_read"] = rec["rows_out"] = tbl.num_rows
            rec["bytes_read"] = int(tbl.nbytes)
        if tbl.num_rows > cap or tbl.num_rows == 0:
            _LOG.info("hfm: %d points do not fit the driver path (at most %d)", tbl.num_rows, cap)
            return None
        batch, points = _sorted_by_key(tbl, dim_x)
        del tbl
        return cls(batch, points, n_attr=n_attr, dim_x=dim_x, pairs=pairs, sample_rows=sample_rows,
                   max_result=max_result, cost=cost, threads=_driver_threads(ranked.sparkSession))

    def _after(self, u: np.ndarray, cursor: tuple[float, str] | None) -> np.ndarray:
        if cursor is None:
            return np.ones(len(u), dtype=bool)
        cu, ck = cursor
        return (u < cu) | ((u == cu) & (self.keys > ck))

    def top_bounds(self, pairs: list[Pair], k: int) -> dict[Pair, list[tuple]]:
        out = {}
        for p in pairs:
            order = np.argsort(-self.u[p], kind="stable")[:k]  # ties: key order
            out[p] = sorted((-float(self.u[p][i]), self.keys[i], self.nb[p][i] or "")
                            for i in order)
        return out

    def bounds_rows(self, pairs: list[Pair]) -> pd.DataFrame:
        n, k = len(self.keys), len(pairs)
        return pd.DataFrame({
            "tgt": np.repeat(np.array([p[0] for p in pairs], np.int32), n),
            "attr": np.repeat(np.array([p[1] for p in pairs], np.int32), n),
            "key": np.tile(self.keys, k),
            "u": np.concatenate([self.u[p] for p in pairs] or [np.zeros(0)]),
            "nb_key": np.concatenate([self.nb[p] for p in pairs]
                                     or [np.zeros(0, dtype=object)]),
            "mult": np.ones(n * k, np.int64)})

    def fetch(self, keys: list[str], attrs: list[int], lo: float, hi: float, *,
              est_bytes: float) -> pd.DataFrame:
        # the batch is key-sorted: the wanted keys by binary search (no object-array isin)
        want = np.zeros(len(self.keys), dtype=bool)
        if keys and len(self.keys):
            ks = np.asarray(sorted(keys), dtype=object)
            pos = np.clip(np.searchsorted(self.keys, ks), 0, len(self.keys) - 1)
            want[pos[self.keys[pos] == ks]] = True
        for a in attrs:
            r = _np(self.batch, f"rho{a}")
            want |= (r >= lo) & (r < hi)
        names = ["key", "xb", *code_cols(self.n_attr), *[f"rho{a}" for a in range(self.n_attr)]]
        return self.batch.filter(pa.array(want)).select(names).to_pandas()

    def scan(self, queries: list[tuple], *, lo: float, hi: float) -> pd.DataFrame:
        # each query set and row range on its own thread (same batch, read only), the
        # best per query over the ranges as over Spark's tasks: the same result
        def one(qr: tuple) -> pd.DataFrame:
            return _frame(_scan_batches([], [qr[0]], n_attr=self.n_attr, dim_x=self.dim_x,
                                        lo=lo, hi=hi, prepared=[qr[1]]), _NN_PA)

        parts = _map(one, [(q, r) for q in queries for r in self._scan_read], self.threads)
        raw = pd.concat(parts, ignore_index=True) if parts else _frame(iter(()), _NN_PA)
        return _best_per_query(raw)

    def count_left(self, active: list[Pair], state: dict[Pair, _PairState]) -> dict[Pair, int]:
        return {p: int(((self.u[p] >= _thr(state[p].lb))
                        & self._after(self.u[p], state[p].cursor)).sum()) for p in active}

    def eliminate(self, b: dict, spec: list[tuple], edges: list[float]) -> tuple:
        out = _frame(_pass_c_batches([self.batch], b, spec, edges, self.dim_x), _C_PA)
        kind1 = out["kind"] == 1
        return out[~kind1].drop(columns="xb").reset_index(drop=True), out[kind1]

    def survivor_rows(self, surv: pd.DataFrame, p: Pair, thr: float,
                      cursor: tuple[float, str] | None, limit: int, *,
                      est_bytes: float) -> pd.DataFrame:
        d = surv["d"].to_numpy(float)
        m = (surv["tgt"].to_numpy() == p[0]) & (surv["attr"].to_numpy() == p[1]) & (d >= thr)
        if cursor is not None:
            cu, ck = cursor
            m &= (d < cu) | ((d == cu) & (surv["key"].to_numpy(dtype=object) > ck))
        rows = surv[m].sort_values(["d", "key"], ascending=[False, True], kind="mergesort")
        return rows.head(limit)[["tgt", "attr", "key", "d", "nb_key", "code", "xb"]]

    def count_above(self, state: dict[Pair, _PairState]) -> dict[Pair, int]:
        return {p: int((self.u[p] > st.lb).sum()) for p, st in state.items()
                if math.isfinite(st.lb)}


def certify_exact(
    pts: DataFrame,
    *,
    n_attr: int,
    dim_x: int,
    pairs: list[Pair],
    n_rows: int | None = None,
    options: CertifyOptions | None = None,
    on_step: Callable[[dict[Pair, CertifiedResult]], None] | None = None,
    on_bounds: Callable[[DataFrame | pd.DataFrame], None] | None = None,
) -> dict[Pair, CertifiedResult]:
    """Exact D per (target, attribute) by sample bounds and elimination (module doc).

    Over 60 lines only by this docstring and its keyword-only parameters; the passes
    are helpers, run on the Spark working table or on the driver (:class:`_LocalWork`).

    Parameters
    ----------
    pts : DataFrame
        Points (``key, y, yp, x, c0..``).
    n_attr, dim_x : int
        Number of code columns, feature length.
    pairs : list of (tgt, attr)
        What to compute.
    n_rows : int, optional
        Rows of ``pts`` when known: a table that cannot fit ``options.local_max_bytes``
        goes to the Spark passes without trying the driver path.
    options : CertifyOptions, optional
        Seed, sample size, first searches and blocks, cap, driver-path budget, time
        budget (:class:`CertifyOptions`; default: its defaults).
    on_step : callable, optional
        Called with the intervals so far once the bounds are known (no lower bound
        yet) and after every pass or round.
    on_bounds : callable, optional
        Called with the per-row bounds (``tgt, attr, key, u, nb_key, mult``) once they
        are known, before the search (histograms, averages): a Spark DataFrame, or a
        pandas DataFrame on the driver path.

    Returns
    -------
    dict
        ``(tgt, attr) -> CertifiedResult``.
    """
    points_schema_check(pts, n_attr)
    opt = options or CertifyOptions()
    h = hash_bucket("key", opt.seed).cast("double") / float(_RANK)  # the one sampler's hash
    ranked = pts.withColumn("h", h)
    k = (opt.first_search if opt.max_candidates is None
         else max(1, min(opt.first_search, opt.max_candidates)))
    plan = _Plan(n_attr=n_attr, dim_x=dim_x, k=k, first_block=opt.first_block,
                 max_candidates=opt.max_candidates,
                 time_left=opt.time_left or (lambda: math.inf))
    t0 = time.perf_counter()
    cost = CostLog(pts.sparkSession)
    work = _LocalWork.collect(ranked, n_attr=n_attr, dim_x=dim_x, pairs=pairs,
                              sample_rows=opt.sample_rows, n_rows=n_rows,
                              max_bytes=opt.local_max_bytes, cost=cost)
    if work is None:
        work = _SparkWork.build(pts, ranked, n_attr=n_attr, dim_x=dim_x, pairs=pairs,
                                sample_rows=opt.sample_rows, n_rows=n_rows, cost=cost)
    cost.engine = work.where
    out = _certify_on(work, pairs, plan, t0=t0, on_step=on_step, on_bounds=on_bounds)
    summary = cost.log()
    for r in out.values():
        r.cost = summary
    return out


def _certify_on(work: _Work, pairs: list[Pair], plan: _Plan, *, t0: float,
                on_step: Callable[[dict[Pair, CertifiedResult]], None] | None,
                on_bounds: Callable[[DataFrame | pd.DataFrame], None] | None,
                ) -> dict[Pair, CertifiedResult]:
    """The passes of :func:`certify_exact` on a working table (Spark or driver)."""
    try:
        state = {p: _PairState() for p in pairs}
        with work.step("A: sample bounds, top bounds", full=True) as rec:
            top = work.top_bounds(pairs, plan.k + 1)  # Spark: pass A, into the cache
            rec["rows_left"] = work.n_rows
        _LOG.info("hfm pass A (bounds, working table, %s): %.2f s", work.where,
                  time.perf_counter() - t0)
        for p in pairs:
            state[p].ub_rem = -top[p][0][0] if top.get(p) else -math.inf
        if on_bounds is not None:
            with work.step("bound summaries"):
                on_bounds(work.bounds_rows(pairs))

        def report(step: bool = True) -> None:
            if step:
                for st in state.values():
                    st.steps.append((st.n_exact, st.lb, st.upper()))
            if on_step is not None:
                on_step({p: st.result() for p, st in state.items()})

        report(step=False)
        _run_passes(work, top, state, pairs, plan, report=report)
        with work.step("candidate count"):
            n_above = work.count_above(state)
        out = {p: st.result(n_above=n_above.get(p, 0)) for p, st in state.items()}
        for r in out.values():
            r.engine = work.where
        return out
    finally:
        work.close()


def _n_blocks(first_block: int, quota: float, counts: dict[int, dict[int, int]],
              attrs: list[int], budget_rows: float) -> int:
    """Doubling blocks of pass C: as many as ``budget_rows`` allow, until one covers a code."""
    n_codes = sum(len(counts[a]) for a in attrs)
    n_blocks = 0
    while first_block * ((1 << (n_blocks + 1)) - 1) * n_codes <= budget_rows and n_blocks < 20:
        n_blocks += 1
        if quota + first_block * ((1 << n_blocks) - 1) >= max(
                max(counts[a].values(), default=0) for a in attrs):
            break
    return n_blocks


def _run_passes(work: _Work, top: dict, state: dict[Pair, _PairState], pairs: list[Pair],
                plan: _Plan, *, report: Callable[[], None]) -> None:
    """Passes B, C and D (module doc), each after a look at the time budget."""
    n_attr, dim_x, k, first_block = plan.n_attr, plan.dim_x, plan.k, plan.first_block
    max_candidates, time_left = plan.max_candidates, plan.time_left
    if time_left() <= 0:
        return
    counts, quota = work.counts, work.quota
    row_bytes = 8.0 * (dim_x + 2) + 64
    # a collect that is too large for spark.driver.maxResultSize comes in pages (_collect),
    # so the blocks keep their size whatever the limit
    budget = _BCAST_BYTES / row_bytes
    attrs = sorted({p[1] for p in pairs})
    n_blocks = _n_blocks(first_block, quota, counts, attrs, budget)
    edges = _block_edges(quota, first_block, n_blocks)
    # Spark: one collect, the vectors of the first searches and the blocks of pass C;
    # the driver path takes the blocks only when pass C runs (no job to save there)
    top_keys = sorted({r[1] for p in pairs for r in top.get(p, [])[:k]})
    block_bytes = row_bytes * (edges[-1] - edges[0]) * sum(len(counts[a]) for a in attrs)
    blocks_now = bool(n_blocks) and work.spark_jobs
    with work.step("fetch: top vectors, blocks" if blocks_now else "fetch: top vectors") as rec:
        got = work.fetch(top_keys, attrs if blocks_now else [], edges[0], edges[-1],
                         est_bytes=(block_bytes if blocks_now else 0.0)
                         + row_bytes * len(top_keys))
        rec["rows_out"] = len(got)
    with work.step("B: exact searches", full=True) as rec_b:
        _search_top(work, got, top, state, pairs, dim_x=dim_x, k=k)
        rec_b["queries"] = sum(min(k, len(top.get(p, []))) for p in pairs)
    report()
    active = [p for p in pairs if not state[p].done]
    rec_b["rows_left"] = 0 if not active else None  # known once pass C counts its rows
    if max_candidates is not None and active:
        with work.step("count left"):
            n_left = work.count_left(active, state)
        for p in active:
            if state[p].n_checked + n_left[p] > max_candidates:
                state[p].done = True
        active = [p for p in active if not state[p].done]
    if not active or time_left() <= 0:
        return
    if n_blocks and not blocks_now:
        with work.step("fetch: blocks") as rec:
            got = work.fetch([], attrs, edges[0], edges[-1], est_bytes=block_bytes)
            rec["rows_out"] = len(got)
    in_blocks = np.zeros(len(got), dtype=bool)
    for a in attrs if n_blocks else []:
        r = got[f"rho{a}"].to_numpy(float)
        in_blocks |= (r >= edges[0]) & (r < edges[-1])
    b = _block_bcast(got[in_blocks], n_attr=n_attr, dim_x=dim_x, counts=counts)
    with work.step("C: elimination", full=True) as rec:
        small, surv = work.eliminate(b, _pass_c_spec(state, active), edges)
        rec["block_rows"] = int(in_blocks.sum())
    try:
        # rows left after pass B (bound not below L) entered pass C; its survivors are
        # the rows left after it (rows of every pair, a row counted once per pair)
        rec_b["rows_left"] = int(small.loc[small["kind"] == 4, "n"].sum())
        rec["rows_left"] = int(small.loc[small["kind"] == 5, "n"].sum())
        _apply_pass_c(small, state, active, edges)
        for p in active:
            st = state[p]
            if st.ub_rem == -math.inf or st.ub_rem < _thr(st.lb):
                st.ub_rem = -math.inf
                st.done = st.certified = True
        report()
        _survivors(work, surv, state, active, plan, lo=edges[-1],
                   size=float(first_block << n_blocks), report=report)
    finally:
        work.release(surv)


def _survivors(work: _Work, surv, state: dict[Pair, _PairState], pairs: list[Pair],
               plan: _Plan, *, lo: float, size: float, report: Callable[[], None]) -> None:
    """Pass D: the survivors of pass C in decreasing bound, against doubling blocks past ``lo``.

    Each batch (as many vectors as :data:`_BCAST_BYTES` allows) is broadcast and
    checked against the rows with ``lo <= rho < lo + size``, then the next block twice
    as large, until each row is eliminated (bound below ``L``) or exact.
    """
    dim_x, time_left = plan.dim_x, plan.time_left
    row_bytes = 8.0 * (dim_x + 2) + 64
    # survivor batches come in pages within spark.driver.maxResultSize (_collect), so
    # a small maxResultSize does not shrink the batches (and multiply the passes)
    max_q = int(max(1, _BCAST_BYTES // row_bytes))
    while True:
        active = [p for p in pairs if not state[p].done]
        if not active or time_left() <= 0:
            return
        parts = []
        for p in active:
            st = state[p]
            with work.step("D: survivor batch"):
                rows = work.survivor_rows(surv, p, _thr(st.lb), st.cursor, max_q + 1,
                                          est_bytes=row_bytes * (max_q + 1))
            rows = rows.sort_values(["d", "key"], ascending=[False, True],
                                    kind="mergesort").reset_index(drop=True)
            st.ub_rem = float(rows["d"].iloc[max_q]) if len(rows) > max_q else -math.inf
            rows = rows.iloc[:max_q]
            if len(rows):
                st.cursor = (float(rows["d"].iloc[-1]), str(rows["key"].iloc[-1]))
                parts.append(rows)
            st.n_checked += len(rows)
        if parts:
            batch = pd.concat(parts, ignore_index=True)
            if not _check_batch(work, batch, state, lo=lo, size=size, time_left=time_left,
                                report=report):
                return
        for p in active:
            st = state[p]
            if st.ub_rem == -math.inf or st.ub_rem < _thr(st.lb):
                st.done = st.certified = True
                st.ub_rem = -math.inf
        report()


def _check_batch(work: _Work, batch: pd.DataFrame, state: dict[Pair, _PairState], *,
                 lo: float, size: float, time_left: Callable[[], float],
                 report: Callable[[], None]) -> bool:
    """Rounds of one batch of survivors; ``False`` when the time budget ran out first."""
    alive = batch.reset_index(drop=True)
    P = _blobs_of(alive["xb"])
    bound = alive["d"].to_numpy(float).copy()
    nb = alive["nb_key"].to_numpy(dtype=object).copy()
    codes = alive["code"].fillna(_NULL_CODE).to_numpy(np.int64)
    tg, at = alive["tgt"].to_numpy(int), alive["attr"].to_numpy(int)
    full = np.array([_other_max(work.counts, int(a), int(c))
                     for a, c in zip(at, codes, strict=True)])
    live = np.arange(len(alive))
    while len(live):
        if time_left() <= 0:
            for p in {(int(tg[i]), int(at[i])) for i in live}:
                m = live[(tg[live] == p[0]) & (at[live] == p[1])]
                state[p].open_ub = max(state[p].open_ub, float(bound[m].max()))
            return False
        hi = lo + size
        queries, index = [], []
        for p in sorted({(int(tg[i]), int(at[i])) for i in live}):
            m = live[(tg[live] == p[0]) & (at[live] == p[1])]
            queries.append((p[0], p[1], _tpoints(P[m], p[0]), codes[m]))
            index.append(m)
        with work.step("D: survivor round", full=True) as rec:
            found = work.scan(queries, lo=lo, hi=hi)
            rec["queries"] = len(live)
        pos = {(q[0], q[1]): m for q, m in zip(queries, index, strict=True)}
        for t, a, qi, d, nk in zip(found["tgt"], found["attr"], found["qi"], found["d"],
                                   found["nb_key"], strict=True):
            i = int(pos[(int(t), int(a))][int(qi)])
            if d < bound[i] or (d == bound[i] and nk is not None and (nb[i] is None or nk < nb[i])):
                bound[i], nb[i] = d, nk
        keep = np.ones(len(live), dtype=bool)
        for p in sorted({(int(tg[i]), int(at[i])) for i in live}):
            st = state[p]
            sel = np.flatnonzero((tg[live] == p[0]) & (at[live] == p[1]))
            ex = sel[full[live[sel]] <= hi]
            for i in sorted(live[ex], key=lambda j: str(alive["key"].iloc[j])):
                st.n_exact += 1
                if np.isfinite(bound[i]):
                    st.raise_lb(float(bound[i]), str(alive["key"].iloc[i]), nb[i])
            keep[ex] = False
            rest = sel[keep[sel]]
            out = rest[bound[live[rest]] < _thr(st.lb)]
            keep[out] = False
            st.rounds.append({"L": st.lb, "hi": hi, "eliminated": len(out),
                              "max_eliminated": float(bound[live[out]].max()) if len(out) else None,
                              "left": int(keep[sel].sum())})
        live = live[keep]
        rec["rows_left"] = len(live)
        for st in state.values():
            st.open_ub = -math.inf
        for p in {(int(tg[i]), int(at[i])) for i in live}:
            m = live[(tg[live] == p[0]) & (at[live] == p[1])]
            state[p].open_ub = float(bound[m].max())
        report()
        lo, size = hi, size * 2
    return True


