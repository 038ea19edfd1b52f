"""Where the passes of :mod:`fairspark.hfm._spark.elimination` run: the working table.

:class:`Engine` is what the algorithm reads; :class:`SparkEngine` the working table on
Spark (persisted once, every pass a job), :class:`DriverEngine` the same table as one
key-sorted Arrow batch on the driver when the points fit the driver budget (every pass
then runs the per-batch function of its Spark task, so results, counts and rounds are
those of the Spark passes).
"""

from __future__ import annotations

import abc
import logging
import math
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fairspark.hfm._spark.blobs import (
    NULL_CODE,
    bound_col,
    codes_of,
    column_of,
    neighbour_col,
    numpy_of,
    ranks_of,
    stack_points,
    strings_of,
)
from fairspark.hfm._spark.block_elimination import (
    after_cursor,
    elimination_job,
    is_pair,
    pass_c_batches,
)
from fairspark.hfm._spark.cost import CostLog
from fairspark.hfm._spark.driver import (
    arrow_via_files,
    collect_within,
    driver_budget,
    driver_threads,
    local_master,
    log_path_choice,
    max_result_bytes,
    thread_map,
)
from fairspark.hfm._spark.exact_scan import best_per_query, scan_batches, scan_job
from fairspark.hfm._spark.points import code_cols
from fairspark.hfm._spark.records import (
    Blocks,
    KeySortedPoints,
    PassAMarker,
    PassARanges,
    PassCOutput,
    PassCTarget,
    RowKind,
    Sample,
    ScanQuery,
    ScanRows,
    TopBound,
)
from fairspark.hfm._spark.sample_bounds import (
    bounds_batch,
    code_counts,
    histogram_of_bounds,
    merge_summary,
    merge_top,
    top_bounds_job,
    work_table,
)
from fairspark.hfm._spark.state import Pair, PairState, threshold
from fairspark.prepare import cache_level

__all__ = ["DriverEngine", "Engine", "SparkEngine", "sorted_by_key"]

#: the engine's one logger (the passes log under the name of :mod:`.elimination`)
_LOG = logging.getLogger("fairspark.hfm._spark.elimination")


class Engine(abc.ABC):
    """The working table the passes read: on Spark (:class:`SparkEngine`) or one Arrow
    batch on the driver (:class:`DriverEngine`). Both run the same per-batch functions
    (:func:`bounds_batch`, :func:`scan_batches`, :func:`pass_c_batches`), so results,
    counts and rounds are the same on both.

    Attributes
    ----------
    where:
        ``"spark"`` or ``"driver"`` (reported as the result's engine).
    counts:
        Rows per (attribute index, code).
    quota:
        Sample rows per code (expected).
    n_rows, dim_x:
        Rows of the table, feature length.
    cost:
        The cost log every pass is measured by.
    """

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

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release what the working table holds."""

    def release(self, surv) -> None:  # noqa: B027 - nothing to release by default
        """Release the survivors of pass C."""

    @abc.abstractmethod
    def top_bounds(self, pairs: list[Pair], k: int) -> dict[Pair, list[TopBound]]:
        """Pass A (on Spark: into the cache) and per pair the ``k`` largest bounds,
        smallest key first among ties."""

    @abc.abstractmethod
    def bounds_rows(self, pairs: list[Pair]) -> DataFrame | pd.DataFrame:
        """Every row's bound in long form: ``tgt, attr, key, u, nb_key, mult``."""

    @abc.abstractmethod
    def fetch(self, keys: list[str], attrs: list[int], lo: float, hi: float, *,
              est_bytes: float) -> pd.DataFrame:
        """Rows (``key, xb``, codes, ranks) with these keys or with ``lo <= rho < hi``
        for one of ``attrs``."""

    @abc.abstractmethod
    def scan(self, queries: list[ScanQuery], *, lo: float, hi: float) -> pd.DataFrame:
        """Passes B and D: each query's nearest other-group row among the rows with
        ``lo <= rho < hi`` (``tgt, attr, qi, d, nb_key``)."""

    @abc.abstractmethod
    def count_left(self, active: list[Pair], state: dict[Pair, PairState]) -> dict[Pair, int]:
        """Rows after the cursor with a bound not below ``L``, per pair."""

    @abc.abstractmethod
    def eliminate(self, b: Blocks, spec: list[PassCTarget], edges: list[float]) -> PassCOutput:
        """Pass C against the blocks ``b`` (:func:`pass_c_batches`)."""

    @abc.abstractmethod
    def survivor_rows(self, surv, p: Pair, thr: float, cursor: tuple[float, str] | None,
                      limit: int, *, est_bytes: float) -> pd.DataFrame:
        """The first ``limit`` survivors of a pair after the cursor with ``d >= thr``."""

    @abc.abstractmethod
    def count_above(self, state: dict[Pair, PairState]) -> dict[Pair, int]:
        """Rows whose sample bound exceeds the final lower bound, per pair."""

    def survivors_of(self, surv, thr: dict[Pair, float], *,
                     est_bytes: float) -> dict[Pair, pd.DataFrame]:
        """Per pair every survivor of pass C with ``d >= thr[pair]`` (its
        ``survivor_rows`` without a cursor or a limit; the caller knows they are few)."""
        return {p: self.survivor_rows(surv, p, t, None, len(surv), est_bytes=est_bytes)
                for p, t in thr.items()}

    def bound_summary(self, pairs: list[Pair]) -> pd.DataFrame | None:
        """The bounds' summary (``tgt, attr, D, D_avg, key, nb_key``) if pass A gathered
        it; ``None``: it is computed from :meth:`bounds_rows`."""
        return None

    def bound_histogram(self, pairs: list[Pair]) -> Callable | None:
        """A function ``(tops, bins) -> tgt, attr, bin, n`` counting the bounds per bin
        on the working table; ``None``: they are counted from :meth:`bounds_rows`."""
        return None


def _quota(sample_rows: int, counts: dict[int, dict[int, int]]) -> float:
    """Sample rows per code (expected): at least 64, about ``2 * sample_rows`` in all."""
    n_codes = sum(len(c) for c in counts.values())
    return float(max(64, (2 * sample_rows) // max(1, n_codes)))


class SparkEngine(Engine):
    """The working table on Spark (persisted once, read by every pass)."""

    where = "spark"
    #: the top bounds per pair pass A's tasks gathered in their marker rows (0: none)
    top_k = 0

    def __init__(self, table: DataFrame, *, n_attr: int, dim_x: int, pairs: list[Pair],
                 counts: dict[int, dict[int, int]], quota: float, n_rows: int,
                 cost: CostLog) -> None:
        """``table``: pass A's output, persisted (:func:`work_table`, with one marker
        row per task when :attr:`top_k` > 0); the passes read its point rows (``df``)."""
        self.table = table
        df = table.where(F.col("tops").isNull()).drop("tops")
        self.df, self.n_attr, self.dim_x = df, n_attr, dim_x
        self.counts, self.quota = counts, quota
        self.n_rows, self.cost = n_rows, cost
        self.max_result = max_result_bytes(df.sparkSession)
        #: pass A's marker rows, unpickled (:meth:`top_bounds` reads them)
        self.parts: list[PassAMarker] | None = None
        # the bounds in long form, one row per (row, pair), from one scan of the working
        # table (an explode, not a union that scans it once per pair)
        rows = F.explode(F.array(*[
            F.struct(F.lit(p[0]).alias("tgt"), F.lit(p[1]).alias("attr"),
                     F.col(bound_col(p)).alias("u"), F.col(neighbour_col(p)).alias("nb_key"))
            for p in pairs])).alias("b")
        self.ub = df.select("key", rows).select(
            "b.tgt", "b.attr", "key", "b.u", "b.nb_key", F.lit(1).cast("long").alias("mult"))

    @classmethod
    def build(cls, ranked: DataFrame, *, n_attr: int, dim_x: int, pairs: list[Pair],
              n_rows: int | None, cost: CostLog, top_k: int,
              options: Any) -> SparkEngine:
        """Code counts (unless ``options.code_counts`` gives them: :func:`code_counts`
        of ``ranked``; ``options``: the engine's ``CertifyOptions``, not imported here,
        which would close an import circle), the sample (one collect,
        ``options.sample_rows`` rows) and pass A
        (persisted, not run yet; ``top_k``: its tasks gather the ``top_k`` largest bounds
        per pair as they run)."""
        counts = options.code_counts
        sample_rows = options.sample_rows
        with cost.step("code counts", spark_jobs=counts is None) as rec:
            if counts is None:
                counts = code_counts(ranked, n_attr)
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
            sample = collect_within(ranked.where(in_sample).select("key", "y", "yp", "x",
                                                             *code_cols(n_attr)),
                              est_bytes=8.0 * (dim_x + 4) * quota * max(1, n_codes))
            rec["rows_out"] = len(sample)
        # fairspark's one cache level (DISK_ONLY, never on the driver's heap): at
        # MEMORY_AND_DISK this table (about 8 d + 150 bytes a row) killed a 1 GB driver
        # and filled 19% slower on a 12 GB one (2M x 50 rows: docs/benchmarks.md)
        table = work_table(ranked, sample, n_attr=n_attr, dim_x=dim_x, pairs=pairs,
                            counts=counts, top_k=top_k).persist(cache_level())
        work = cls(table, n_attr=n_attr, dim_x=dim_x, pairs=pairs, counts=counts,
                   quota=quota, n_rows=n_rows, cost=cost)
        work.top_k = top_k
        return work

    def close(self) -> None:
        self.table.unpersist()

    def top_bounds(self, pairs: list[Pair], k: int) -> dict[Pair, list[TopBound]]:
        """Pass A into the cache, and per pair the ``k`` largest bounds (smallest key
        first among ties): from the marker rows its tasks wrote (one job, which fills
        the cache and brings back one row per task), or, for more than the ``top_k``
        they gathered, from a job of their own (:func:`top_bounds_job`)."""
        marks = self.table.where(F.col("tops").isNotNull()).select("tops").collect()
        self.parts = [pickle.loads(r["tops"]) for r in marks]
        if k > self.top_k:
            return top_bounds_job(self.df, pairs, k)
        return merge_top(self.parts, pairs, k)

    def n_tasks(self) -> int:
        """Tasks that read the working table (one marker row each; 1 before pass A)."""
        return max(1, len(self.parts or ()))

    def bounds_rows(self, pairs: list[Pair]) -> DataFrame:
        return self.ub

    def bound_histogram(self, pairs: list[Pair]) -> Callable | None:
        """The bounds per bin over ``[0, tops[attr]]`` in ``bins`` bins
        (:func:`histogram_of_bounds`: the driver path's numpy bins, counted by the tasks
        over the bound columns; one job, no shuffle, a few rows per partition back)."""
        return lambda tops, bins: histogram_of_bounds(self.df, pairs, tops, bins)

    def bound_summary(self, pairs: list[Pair]) -> pd.DataFrame | None:
        """The summary pass A's tasks wrote in their marker rows (no job); ``None``
        before :meth:`top_bounds` or without marker rows (``top_k`` 0)."""
        if not self.top_k or self.parts is None:
            return None
        return merge_summary(self.parts, pairs)

    def fetch(self, keys: list[str], attrs: list[int], lo: float, hi: float, *,
              est_bytes: float) -> pd.DataFrame:
        """Rows with these keys or with ``lo <= rho < hi`` for one of ``attrs``."""
        want = F.col("key").isin(keys) if keys else F.lit(False)
        for a in attrs:
            want |= (F.col(f"rho{a}") >= F.lit(lo)) & (F.col(f"rho{a}") < F.lit(hi))
        return collect_within(self.df.where(want).select("key", "xb", *code_cols(self.n_attr),
                                                   *[f"rho{a}" for a in range(self.n_attr)]),
                        est_bytes=est_bytes)

    def scan(self, queries: list[ScanQuery], *, lo: float, hi: float) -> pd.DataFrame:
        return scan_job(self.df, queries, n_attr=self.n_attr, dim_x=self.dim_x, lo=lo, hi=hi,
                           n_tasks=self.n_tasks())

    def count_left(self, active: list[Pair], state: dict[Pair, PairState]) -> dict[Pair, int]:
        """Rows after the cursor with a bound not below ``L`` (one aggregation)."""
        cond = [F.sum(((F.col(bound_col(p)) >= F.lit(threshold(state[p].lb)))
                       & after_cursor(p, state[p].cursor)).cast("long")).alias(bound_col(p))
                for p in active]
        n_left = self.df.agg(*cond).first()
        return {p: int(n_left[bound_col(p)] or 0) for p in active}

    def eliminate(self, b: Blocks, spec: list[PassCTarget], edges: list[float]) -> PassCOutput:
        """Pass C: its small rows (collected) and the survivors (persisted)."""
        out = elimination_job(self.df, b, spec, edges, n_attr=self.n_attr,
                              dim_x=self.dim_x).persist(cache_level())
        try:
            small = out.where(F.col("kind") != F.lit(int(RowKind.SURVIVOR))).drop("xb").toPandas()
        except BaseException:
            out.unpersist()
            raise
        return PassCOutput(small=small, survivors=out)

    def release(self, surv) -> None:
        surv.unpersist()

    def survivor_rows(self, surv: DataFrame, p: Pair, thr: float,
                      cursor: tuple[float, str] | None, limit: int, *,
                      est_bytes: float) -> pd.DataFrame:
        """The first ``limit`` survivors of a pair after the cursor with ``d >= thr``."""
        cond = (F.col("kind") == F.lit(int(RowKind.SURVIVOR))) & is_pair(p) & (
            F.col("d") >= F.lit(thr))
        if cursor is not None:
            cu, ck = cursor
            cond &= (F.col("d") < F.lit(cu)) | (
                (F.col("d") == F.lit(cu)) & (F.col("key") > F.lit(ck)))
        return collect_within(surv.where(cond)
                        .select("tgt", "attr", "key", "d", "nb_key", "code", "xb")
                        .orderBy(F.col("d").desc(), F.col("key").asc()).limit(limit)
                        .repartition(1), est_bytes=est_bytes)

    def survivors_of(self, surv: DataFrame, thr: dict[Pair, float], *,
                     est_bytes: float) -> dict[Pair, pd.DataFrame]:
        """Every pair's survivors with ``d >= thr[pair]`` in one collect (no sort, no
        limit: the caller knows they are few), in ``survivor_rows``' columns."""
        cond = F.lit(False)
        for p, t in thr.items():
            cond |= is_pair(p) & (F.col("d") >= F.lit(t))
        got = collect_within(surv.where((F.col("kind") == F.lit(int(RowKind.SURVIVOR))) & cond)
                       .select("tgt", "attr", "key", "d", "nb_key", "code", "xb"),
                       est_bytes=est_bytes)
        tg, at = got["tgt"].to_numpy(), got["attr"].to_numpy()
        return {p: got[(tg == p[0]) & (at == p[1])].reset_index(drop=True) for p in thr}

    def count_above(self, state: dict[Pair, PairState]) -> dict[Pair, int]:
        """Rows whose sample bound exceeds the final lower bound (those needed a search)."""
        # one aggregation of the working table's bound columns (no explode, no shuffle)
        pairs = [p for p, st in state.items() if math.isfinite(st.lb)]
        if not pairs:
            return {}
        n = self.df.agg(*[F.sum((F.col(bound_col(p)) > F.lit(state[p].lb)).cast("long"))
                          .alias(bound_col(p)) for p in pairs]).first()
        return {p: int(n[bound_col(p)] or 0) for p in pairs}


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


def sorted_by_key(tbl: pa.Table, dim_x: int, *, threads: int = 1) -> KeySortedPoints:
    """The collected points as one key-sorted batch (without ``x``) and their key-sorted
    points ``[yp, y, x]``. Every chunk's feature lists are written straight to their
    sorted rows of the one matrix (no concatenated copy, no Arrow ``take`` of a list
    column, which is several times slower). The chunks are written on ``threads``
    threads (disjoint rows of the matrix)."""
    perm = pc.sort_indices(tbl["key"]).to_numpy()
    rest = tbl.drop_columns(["x"]).take(perm).combine_chunks()
    n = tbl.num_rows
    x = tbl.column("x")
    if x.null_count:
        raise ValueError(f"feature vectors must all have length {dim_x}")
    inv = np.empty(n, dtype=np.int64)
    inv[perm] = np.arange(n)
    P = np.empty((n, dim_x + 2))
    starts = np.cumsum([0, *(len(c) for c in x.chunks)])

    def fill(i: int) -> None:
        chunk, start = x.chunks[i], int(starts[i])
        m = len(chunk)
        flat = chunk.flatten().to_numpy(zero_copy_only=False)
        if flat.size != m * dim_x:
            raise ValueError(f"feature vectors must all have length {dim_x}")
        P[inv[start:start + m], 2:] = flat.reshape(m, dim_x)

    thread_map(fill, list(range(x.num_chunks)), threads)
    names = [c for c in tbl.column_names if c != "x"]
    batch = pa.RecordBatch.from_arrays([rest.column(c).combine_chunks() for c in names],
                                       names=names)
    P[:, :2] = stack_points(numpy_of(batch, "y"), numpy_of(batch, "yp"), np.zeros((n, 0)))
    return KeySortedPoints(batch=batch, points=P)


class DriverEngine(Engine):
    """The working table as one key-sorted Arrow batch on the driver.

    Taken when the points fit a byte budget (a capped collect, like Spark's broadcast
    join threshold); every pass then runs the per-batch function of its Spark task on
    this batch, so results, counts and rounds are those of the Spark passes.
    """

    where = "driver"
    spark_jobs = False

    def __init__(self, table: KeySortedPoints, *, n_attr: int, dim_x: int,
                 pairs: list[Pair], sample_rows: int, max_result: float, cost: CostLog,
                 threads: int = 1) -> None:
        """``table``: the key-sorted points (:func:`sorted_by_key`)."""
        batch, points = table.batch, table.points
        del table
        self.n_attr, self.dim_x, self.max_result = n_attr, dim_x, max_result
        self.cost, self.n_rows, self.threads = cost, batch.num_rows, threads
        cols = code_cols(n_attr)
        codes = {c: codes_of(batch, c) for c in cols}
        self.counts = {}
        for a, c in enumerate(cols):
            v, n = np.unique(codes[c][codes[c] != NULL_CODE], return_counts=True)
            self.counts[a] = {int(x): int(m) for x, m in zip(v, n, strict=True)}
        self.quota = _quota(sample_rows, self.counts)
        h = numpy_of(batch, "h")
        in_sample = np.zeros(batch.num_rows, dtype=bool)
        for a, c in enumerate(cols):
            in_sample |= (codes[c] != NULL_CODE) & (
                ranks_of(h, codes[c], self.counts[a]) < self.quota)
        idx = np.flatnonzero(in_sample)
        s = Sample(keys=strings_of(column_of(batch, "key").take(pa.array(idx))),
                   points=points[idx],
                   codes={c: codes[c][idx].astype(np.int64) for c in cols},
                   counts=self.counts)
        kept = PassARanges()
        with self.step("A: sample bounds", full=True) as rec:
            self.batch = bounds_batch(batch, s, n_attr=n_attr, dim_x=dim_x, pairs=pairs,
                                       keep=kept, threads=threads, points=points)
            rec["threads"] = threads
            rec["rows_out"] = len(idx)
        del batch, points
        with self.step("keys and bounds as arrays"):
            # the keys and neighbour keys stay Arrow arrays (a Python string is made
            # only for a row a search or a witness reads): 2.7M strings for Adult x 20
            # would cost 0.1-0.6 s
            self.keys = column_of(self.batch, "key")
            # what the scans read: the batch is key-sorted, its points and each target's
            # points are pass A's (no second decode)
            rho = {a: numpy_of(self.batch, f"rho{a}") for a in range(n_attr)}
            code = {a: codes_of(self.batch, c) for a, c in enumerate(cols)}
            # per row range of pass A (each on its own thread): views, no copies
            self._scan_read = [ScanRows(points=kept.points[r],
                                        keys=self.keys.slice(r.start, r.stop - r.start),
                                        ranks={a: v[r] for a, v in rho.items()},
                                        codes={a: v[r] for a, v in code.items()}, cache=cache)
                               for r, cache in zip(kept.ranges, kept.caches, strict=True)]
            self.u = {p: numpy_of(self.batch, bound_col(p)) for p in pairs}
            self.nb = {p: column_of(self.batch, neighbour_col(p)) for p in pairs}

    @classmethod
    def collect(cls, ranked: DataFrame, *, n_attr: int, dim_x: int, pairs: list[Pair],
                sample_rows: int, n_rows: int | None, max_bytes: int | None,
                cost: CostLog) -> DriverEngine | None:
        """The points on the driver when they fit the budget (:func:`driver_budget`):
        one capped collect; ``None`` when they do not."""
        spark = ranked.sparkSession
        max_result = max_result_bytes(spark)
        row_bytes = 8.0 * (dim_x + 2) + 64
        # a local master with a known row count: the points come through local files,
        # past the JVM (a 1 GB driver takes this path as a larger one does)
        via_files = n_rows is not None and local_master(spark)
        budget, sized_from = driver_budget(spark, max_bytes, via_files=via_files)
        cap = int(budget // row_bytes)
        cost.budget = {"bytes": int(budget), "rows": cap, "row_bytes": row_bytes,
                       "sized_from": sized_from, "via_files": via_files}
        log_path_choice(n_rows, row_bytes, budget, sized_from, via_files=via_files)
        if cap < 1 or (n_rows is not None and n_rows > cap):
            return None
        cols = code_cols(n_attr)
        sel = ranked.select("key", "h", "y", "yp", "x", *cols)
        # a known row count within the cap bounds the collect; otherwise a limit does
        # (a global limit moves every row into one task through a shuffle: 53 s against
        # 9.7 s without it for 904k rows at d = 56, loaded machine; so only when the
        # count is not known)
        with cost.step("driver collect") as rec:
            if via_files:
                tbl = arrow_via_files(sel)
            else:
                tbl = (sel if n_rows is not None else sel.limit(cap + 1)).toArrow()
            rec["rows_read"] = rec["rows_out"] = tbl.num_rows
            rec["bytes_read"] = int(tbl.nbytes)
        if tbl.num_rows > cap or tbl.num_rows == 0:
            _LOG.info("hfm: %d points do not fit the driver path (at most %d)", tbl.num_rows, cap)
            return None
        with cost.step("key sort", spark_jobs=False) as rec:
            threads = driver_threads(spark)
            table = sorted_by_key(tbl, dim_x, threads=threads)
            rec["rows_read"] = tbl.num_rows
        del tbl
        return cls(table, n_attr=n_attr,
                   dim_x=dim_x, pairs=pairs, sample_rows=sample_rows,
                   max_result=max_result, cost=cost, threads=threads)

    def _first_after(self, key: str) -> int:
        """The position of the first row whose key is greater than ``key`` (the batch
        is key-sorted: a binary search, no Python string per row)."""
        lo, hi = 0, len(self.keys)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.keys[mid].as_py() <= key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _rows_after(self, u: np.ndarray, cursor: tuple[float, str] | None) -> np.ndarray:
        if cursor is None:
            return np.ones(len(u), dtype=bool)
        cu, ck = cursor
        later = np.arange(len(u)) >= self._first_after(ck)
        return (u < cu) | ((u == cu) & later)

    def top_bounds(self, pairs: list[Pair], k: int) -> dict[Pair, list[TopBound]]:
        out = {}
        for p in pairs:
            order = np.argsort(-self.u[p], kind="stable")[:k]  # ties: key order
            out[p] = sorted(TopBound(-float(self.u[p][i]), self.keys[int(i)].as_py(),
                                     self.nb[p][int(i)].as_py() or "") for i in order)
        return out

    def bounds_rows(self, pairs: list[Pair]) -> pd.DataFrame:
        """The bounds in long form; keys and neighbour keys as Arrow-backed columns
        (:func:`~fairspark.hfm.compute._summarise_local` reads only the witnesses')."""
        n, k = len(self.keys), len(pairs)

        def arrow(arrays: list[pa.Array]) -> pd.arrays.ArrowExtensionArray:
            return pd.arrays.ArrowExtensionArray(pa.chunked_array(arrays, pa.string()))

        return pd.DataFrame({
            "tgt": np.repeat(np.array([p[0] for p in pairs], np.int32), n),
            "attr": np.repeat(np.array([p[1] for p in pairs], np.int32), n),
            "key": arrow([self.keys] * k),
            "u": np.concatenate([self.u[p] for p in pairs] or [np.zeros(0)]),
            "nb_key": arrow([self.nb[p] for p in pairs]),
            "mult": np.ones(n * k, np.int64)})

    def fetch(self, keys: list[str], attrs: list[int], lo: float, hi: float, *,
              est_bytes: float) -> pd.DataFrame:
        # the wanted keys by Arrow's hash lookup (no Python string per row)
        want = np.zeros(len(self.keys), dtype=bool)
        if keys and len(self.keys):
            want = pc.is_in(self.keys, value_set=pa.array(list(keys), pa.string())
                            ).to_numpy(zero_copy_only=False).astype(bool)
        for a in attrs:
            r = numpy_of(self.batch, f"rho{a}")
            want |= (r >= lo) & (r < hi)
        names = ["key", "xb", *code_cols(self.n_attr), *[f"rho{a}" for a in range(self.n_attr)]]
        return self.batch.filter(pa.array(want)).select(names).to_pandas()

    def scan(self, queries: list[ScanQuery], *, lo: float, hi: float) -> pd.DataFrame:
        # each query set and row range on its own thread (same batch, read only), the
        # best per query over the ranges as over Spark's tasks: the same result
        def one(qr: tuple[ScanQuery, ScanRows]) -> pd.DataFrame:
            return _frame(scan_batches([], [qr[0]], n_attr=self.n_attr, dim_x=self.dim_x,
                                        lo=lo, hi=hi, prepared=[qr[1]]), _NN_PA)

        parts = thread_map(one, [(q, r) for q in queries for r in self._scan_read], self.threads)
        raw = pd.concat(parts, ignore_index=True) if parts else _frame(iter(()), _NN_PA)
        return best_per_query(raw)

    def count_left(self, active: list[Pair], state: dict[Pair, PairState]) -> dict[Pair, int]:
        return {p: int(((self.u[p] >= threshold(state[p].lb))
                        & self._rows_after(self.u[p], state[p].cursor)).sum()) for p in active}

    def eliminate(self, b: Blocks, spec: list[PassCTarget], edges: list[float]) -> PassCOutput:
        out = _frame(pass_c_batches([self.batch], b, spec, edges, self.dim_x), _C_PA)
        surv = out["kind"] == int(RowKind.SURVIVOR)
        return PassCOutput(small=out[~surv].drop(columns="xb").reset_index(drop=True),
                           survivors=out[surv])

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

    def count_above(self, state: dict[Pair, PairState]) -> dict[Pair, int]:
        return {p: int((self.u[p] > st.lb).sum()) for p, st in state.items()
                if math.isfinite(st.lb)}
