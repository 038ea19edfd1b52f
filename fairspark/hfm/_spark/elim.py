"""Exact D by elimination, with no copy of the feature vectors (METHODS §1, ``certified``).

1. **Sample bounds.** A seeded sample of every group (per attribute and code, ranked
   by a hash of the row key) is broadcast; one ``mapInPandas`` pass gives every row the
   distance ``u(p)`` to its nearest other-group sample row, an upper bound of ``nn(p)``.
2. **Exact searches** of the rows with the largest ``u`` (their feature vectors are
   broadcast; every task scans its own rows) give ``L = max nn``, a lower bound of D.
3. **Elimination.** A row with ``u(p) < L`` cannot raise D. The rows left are taken in
   decreasing ``u`` and checked against growing blocks of the other side (the rows of
   each code in hash-rank order, 1024, 2048, 4096 ... rows per code past the sample);
   a row leaves as soon as a neighbour closer than ``L`` is seen, and a row whose
   blocks have covered its whole other side has its exact ``nn(p)``, which may raise
   ``L``. When no row is left, ``D = L`` is exact.

Only ``(tgt, attr, key, distance, neighbour key)`` rows leave a task. Every distance
that decides D or a witness is computed directly (``sqrt(sum((a - b)^2))``, in
:func:`fairspark.hfm._kernels.nn_other_group`), and a row is eliminated only when its
bound is below ``L`` by a relative margin (:data:`MARGIN`), so rounding never drops a
row that could realise D, nor one that ties with it (witness ties go to the smallest
key, as in the ``exact`` method). Everything is a function of the rows and the seed,
so the result does not depend on partitioning.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from fairspark._testing import maybe_fail_first_attempt
from fairspark._threads import pin_threads
from fairspark.hfm._kernels import nn_other_group
from fairspark.hfm._spark._points import code_cols, keys_at, points_of, points_schema_check
from fairspark.hfm.results import CertifiedResult

__all__ = ["MARGIN", "certify_exact", "sample_bounds"]

Pair = tuple[int, int]

#: a row is eliminated only when its upper bound is below ``L * (1 - MARGIN)``
MARGIN = 1e-9
_RANK = 1 << 30
_NN_SCHEMA = "tgt int, attr int, key string, d double, nb_key string"
#: bytes of query feature vectors broadcast in one round
_QUERY_BYTES = 16 << 20


@dataclass
class _PairState:
    """Where the search of one (target, attribute) stands.

    ``lb``/``key``/``nb_key``: the largest exact ``nn`` so far and its witness pair;
    ``cursor``: ``(u, key)`` of the last row taken (rows are taken in decreasing ``u``);
    ``ub_rem``: the largest ``u`` not taken yet; ``open_ub``: the largest running bound
    of the rows still being checked; ``rounds``: per round ``L`` and the largest bound
    of the rows it eliminated (the elimination invariant: always below ``L``).
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
        if self.certified:
            return self.lb
        return max(self.lb, self.ub_rem, self.open_ub)

    def raise_lb(self, d: float, key: str, nb_key: str | None) -> None:
        if d > self.lb or (d == self.lb and (self.key is None or key < self.key)):
            self.lb, self.key, self.nb_key = d, key, nb_key

    def result(self, n_above: int | None = None) -> CertifiedResult:
        return CertifiedResult(
            lower=self.lb, upper=self.upper(), certified=self.certified, n_searched=self.n_exact,
            key=self.key, nb_key=self.nb_key, steps=list(self.steps), n_above=n_above,
            n_checked=self.n_checked, rounds=list(self.rounds),
        )


def _thr(lb: float) -> float:
    """Bounds below this cannot realise (or tie with) a distance ``lb``."""
    return lb - MARGIN * abs(lb)


def _max_result_bytes(spark) -> float:
    v = str(spark.conf.get("spark.driver.maxResultSize", "1g")).strip().lower()
    m = re.fullmatch(r"(\d+)([kmgt]?)b?", v)
    if not m:
        return 1 << 30
    unit = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2)]
    n = int(m.group(1)) * unit
    return math.inf if n == 0 else float(n)


def _collect(df: DataFrame, est_bytes: float) -> pd.DataFrame:
    """A small result on the driver, within ``spark.driver.maxResultSize``.

    Above a quarter of the limit the rows come one partition per job.
    """
    if est_bytes < _max_result_bytes(df.sparkSession) / 4:
        return df.toPandas()
    return pd.DataFrame.from_records([r.asDict() for r in df.toLocalIterator()],
                                     columns=df.columns)


def _code_counts(pts: DataFrame, n_attr: int) -> dict[int, dict[int, int]]:
    """Rows per (attribute, code): one aggregation."""
    pairs = F.explode(F.array(*[
        F.struct(F.lit(a).alias("a"), F.col(c).alias("c")) for a, c in enumerate(code_cols(n_attr))
    ])).alias("p")
    out: dict[int, dict[int, int]] = {a: {} for a in range(n_attr)}
    for r in pts.select(pairs).groupBy("p.a", "p.c").count().collect():
        if r["c"] is not None:
            out[int(r["a"])][int(r["c"])] = int(r["count"])
    return out


def with_ranks(pts: DataFrame, *, n_attr: int, counts: dict[int, dict[int, int]],
               seed: int) -> DataFrame:
    """Add ``rho0..``: a row's expected position among the rows of its code.

    ``rho_a = h * n(a, code)`` with ``h`` in [0, 1) a hash of the key and the seed, so
    ``rho_a < k`` takes about ``k`` rows of every code, the same rows for any
    partitioning.
    """
    h = F.pmod(F.xxhash64(F.col("key"), F.lit(seed)), F.lit(_RANK)).cast("double") / float(_RANK)
    rhos = []
    for a, c in enumerate(code_cols(n_attr)):
        m = F.create_map(*[x for code, n in sorted(counts[a].items())
                           for x in (F.lit(code), F.lit(float(n)))]) if counts[a] else None
        size = F.element_at(m, F.col(c)) if m is not None else F.lit(0.0)
        rhos.append((h * F.coalesce(size, F.lit(0.0))).alias(f"rho{a}"))
    return pts.select("key", "y", "yp", "x", *code_cols(n_attr), *rhos)


def _frame(tgt: int, attr: int, keys, d, nb) -> pd.DataFrame:
    n = len(keys)
    return pd.DataFrame({
        "tgt": np.full(n, tgt, dtype=np.int32), "attr": np.full(n, attr, dtype=np.int32),
        "key": pd.Series(np.asarray(keys, dtype=object), dtype=object),
        "d": np.asarray(d, dtype=np.float64),
        "nb_key": pd.Series(np.asarray(nb, dtype=object), dtype=object),
    })


def _by_key(pdf: pd.DataFrame) -> pd.DataFrame:
    """Rows sorted by key (nn ties go to the smallest index, hence the smallest key)."""
    return pdf.iloc[np.argsort(pdf["key"].to_numpy(dtype=str), kind="stable")]


def sample_bounds(ranked: DataFrame, sample: pd.DataFrame, *, n_attr: int, dim_x: int,
                  targets: tuple[int, ...]) -> DataFrame:
    """Per row and (target, attribute): distance to the nearest other-group sample row.

    ``sample`` (rows of the points table) is broadcast; the result has one row per
    point and pair (``tgt, attr, key, d, nb_key``; ``d = inf`` when the sample holds no
    row of another group), not collected.
    """
    sample = _by_key(sample.drop_duplicates("key"))
    cols = code_cols(n_attr)
    bc = ranked.sparkSession.sparkContext.broadcast({
        "keys": sample["key"].to_numpy(dtype=object),
        "pts": {t: points_of(sample, t, dim_x) for t in targets},
        "codes": {c: sample[c].to_numpy() for c in cols},
    })

    def bounds(it: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        pin_threads()
        maybe_fail_first_attempt("hfm")
        s = bc.value
        for pdf in it:
            if len(pdf) == 0:
                continue
            keys = pdf["key"].to_numpy(dtype=object)
            for t in targets:
                P = points_of(pdf, t, dim_x)
                for a, c in enumerate(cols):
                    d, idx = nn_other_group(P, pdf[c].to_numpy(), s["pts"][t], s["codes"][c])
                    yield _frame(t, a, keys, d, keys_at(s["keys"], idx))

    return ranked.select("key", "y", "yp", "x", *cols).mapInPandas(bounds, _NN_SCHEMA)


def _scan_queries(ranked: DataFrame, queries: pd.DataFrame, *, n_attr: int, dim_x: int,
                  lo: float, hi: float) -> pd.DataFrame:
    """Nearest other-group row, among the rows with ``lo <= rho_attr < hi``, of each query.

    ``queries`` (``tgt, attr, key, y, yp, x, c0..``) are broadcast; every task scans its
    own rows and keeps per query its best neighbour over all its batches, so one row
    per query and task leaves it. Returns ``tgt, attr, key, d, nb_key`` (queries with
    no such neighbour are absent).
    """
    cols = code_cols(n_attr)
    groups = []
    for (t, a), q in queries.groupby(["tgt", "attr"], sort=True):
        groups.append((int(t), int(a), q["key"].to_numpy(dtype=object),
                       points_of(q, int(t), dim_x), q[cols[int(a)]].to_numpy()))
    bc = ranked.sparkSession.sparkContext.broadcast(groups)
    attrs = sorted({g[1] for g in groups})
    cond = F.lit(False)
    for a in attrs:
        c = F.col(f"rho{a}") >= F.lit(float(lo))
        if math.isfinite(hi):
            c &= F.col(f"rho{a}") < F.lit(float(hi))
        cond |= c

    def scan(it: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        pin_threads()
        maybe_fail_first_attempt("hfm")
        gs = bc.value
        best = [(np.full(len(g[2]), np.inf), np.full(len(g[2]), None, dtype=object)) for g in gs]
        for pdf in it:
            if len(pdf) == 0:
                continue
            pdf = _by_key(pdf)
            for (t, a, _, Q, qc), (bd, bk) in zip(gs, best, strict=True):
                rho = pdf[f"rho{a}"].to_numpy()
                sub = pdf[(rho >= lo) & (rho < hi)]
                if len(sub) == 0:
                    continue
                d, idx = nn_other_group(Q, qc, points_of(sub, t, dim_x), sub[cols[a]].to_numpy())
                nk = keys_at(sub["key"].to_numpy(dtype=object), idx)
                ok = np.isfinite(d)
                # a tie between batches goes to the smaller neighbour key
                better = ok & ((d < bd) | ((d == bd) & np.array(
                    [n is not None and (b is None or n < b) for n, b in zip(nk, bk, strict=True)],
                    dtype=bool)))
                bd[better], bk[better] = d[better], nk[better]
        for (t, a, qk, _, _), (bd, bk) in zip(gs, best, strict=True):
            ok = np.isfinite(bd)
            if ok.any():
                yield _frame(t, a, qk[ok], bd[ok], bk[ok])

    per_task = ranked.where(cond).mapInPandas(scan, _NN_SCHEMA)
    return _collect(
        per_task.groupBy("tgt", "attr", "key")
        .agg(F.min(F.struct("d", "nb_key")).alias("m"))
        .select("tgt", "attr", "key", F.col("m.d").alias("d"), F.col("m.nb_key").alias("nb_key")),
        est_bytes=64.0 * len(queries),
    )


def _is_pair(p: Pair) -> Column:
    return (F.col("tgt") == p[0]) & (F.col("attr") == p[1])


def _any_pair(pairs: list[Pair]) -> Column:
    cond = F.lit(False)
    for p in pairs:
        cond |= _is_pair(p)
    return cond


def _next_batch(ub_df: DataFrame, ranked: DataFrame, state: dict[Pair, _PairState],
                active: list[Pair], size: int, *, n_attr: int, dim_x: int) -> pd.DataFrame:
    """The next ``size`` rows per active pair, in decreasing ``u``, with their points.

    Rows whose bound is below the pair's lower bound are left out (eliminated). Sets
    each pair's cursor and ``ub_rem`` (the largest bound left after the batch).
    """
    cond = F.lit(False)
    for p in active:
        st = state[p]
        c = _is_pair(p)
        if math.isfinite(st.lb):
            c &= F.col("u") >= F.lit(_thr(st.lb))
        if st.cursor is not None:
            cu, ck = st.cursor
            c &= (F.col("u") < F.lit(cu)) | ((F.col("u") == F.lit(cu)) & (F.col("key") > F.lit(ck)))
        cond |= c
    rank = F.row_number().over(
        Window.partitionBy("tgt", "attr").orderBy(F.col("u").desc(), F.col("key").asc()))
    top = (ub_df.where(cond).select("tgt", "attr", "key", "u", "nb_key")
           .withColumn("rn", rank).where(F.col("rn") <= size + 1)).persist()
    try:
        rem = {(int(r["tgt"]), int(r["attr"])): float(r["u"])
               for r in top.where(F.col("rn") == size + 1).select("tgt", "attr", "u").collect()}
        pts = ranked.select("key", "y", "yp", "x", *code_cols(n_attr))
        q = top.where(F.col("rn") <= size).drop("rn")
        # join first, then drop the rows sharing a key among the few joined rows (a
        # dropDuplicates of the table would shuffle every feature vector)
        batch = _collect(q.join(pts, on="key", how="inner")
                         .dropDuplicates(["tgt", "attr", "key"]),
                         est_bytes=(8.0 * (dim_x + 4) + 64) * size * len(active))
    finally:
        top.unpersist()
    batch = batch.sort_values(["tgt", "attr", "u", "key"], ascending=[True, True, False, True],
                              kind="mergesort").reset_index(drop=True)
    for p in active:
        st = state[p]
        sub = batch[(batch["tgt"] == p[0]) & (batch["attr"] == p[1])]
        st.ub_rem = rem.get(p, -math.inf)
        if len(sub):
            st.cursor = (float(sub["u"].iloc[-1]), str(sub["key"].iloc[-1]))
    return batch


def _other_max(counts: dict[int, dict[int, int]], a: int, code: int) -> float:
    """Rows of the largest other code: a block reaching it covers the whole other side."""
    return float(max((n for c, n in counts[a].items() if c != code), default=0))


def _check_batch(ranked: DataFrame, batch: pd.DataFrame, state: dict[Pair, _PairState], *,
                 n_attr: int, dim_x: int, counts: dict[int, dict[int, int]], start: float,
                 first_block: int, exact_first: bool, time_left: Callable[[], float],
                 on_round: Callable[[], None]) -> bool:
    """Check the batch's rows against growing blocks until each is eliminated or exact.

    ``exact_first``: one scan of the whole table (the first batch, which sets ``L``).
    Returns ``False`` when the time budget ran out first.
    """
    cols = code_cols(n_attr)
    alive = batch.copy()
    alive["bound"] = alive["u"].astype(float)
    alive["nb"] = alive["nb_key"]
    own = alive[cols].to_numpy()[np.arange(len(alive)), alive["attr"].to_numpy(dtype=int)]
    alive["full"] = [_other_max(counts, int(a), int(c))
                     for a, c in zip(alive["attr"], own, strict=True)]
    for p, sub in alive.groupby(["tgt", "attr"]):
        state[(int(p[0]), int(p[1]))].n_checked += len(sub)
    lo, size = (0.0, math.inf) if exact_first else (float(start), float(first_block))
    while len(alive):
        if time_left() <= 0:
            for p, sub in alive.groupby(["tgt", "attr"]):
                st = state[(int(p[0]), int(p[1]))]
                st.open_ub = max(st.open_ub, float(sub["bound"].max()))
            return False
        hi = lo + size
        found = _scan_queries(ranked, alive, n_attr=n_attr, dim_x=dim_x, lo=lo, hi=hi)
        alive = _merge_found(alive, found)
        exact = alive["full"].to_numpy() <= hi
        for r in alive[exact].itertuples():
            st = state[(int(r.tgt), int(r.attr))]
            st.n_exact += 1
            if np.isfinite(r.bound):
                st.raise_lb(float(r.bound), str(r.key), r.nb)
        alive = alive[~exact]
        keep = np.ones(len(alive), dtype=bool)
        for p, idx in alive.groupby(["tgt", "attr"]).groups.items():
            st = state[(int(p[0]), int(p[1]))]
            b = alive.loc[idx, "bound"].to_numpy()
            out = b < _thr(st.lb) if math.isfinite(st.lb) else np.zeros(len(b), dtype=bool)
            keep[alive.index.get_indexer(idx)] = ~out
            st.rounds.append({"L": st.lb, "hi": hi, "eliminated": int(out.sum()),
                              "max_eliminated": float(b[out].max()) if out.any() else None,
                              "left": int((~out).sum())})
        alive = alive[keep]
        for st in state.values():
            st.open_ub = -math.inf
        for p, sub in alive.groupby(["tgt", "attr"]):
            st = state[(int(p[0]), int(p[1]))]
            st.open_ub = float(sub["bound"].max())
        on_round()
        lo, size = hi, size * 2
    return True


def _merge_found(alive: pd.DataFrame, found: pd.DataFrame) -> pd.DataFrame:
    """Running bounds: the smaller distance, a tie to the smaller neighbour key."""
    if len(found) == 0:
        return alive
    m = alive.merge(found, on=["tgt", "attr", "key"], how="left", suffixes=("", "_f"))
    d = m["d"].to_numpy(dtype=float)
    nk = m["nb_key_f"].to_numpy(dtype=object)
    b = m["bound"].to_numpy(dtype=float)
    nb = m["nb"].to_numpy(dtype=object)
    tie = np.array([x is not None and not (isinstance(x, float)) and (y is None or x < y)
                    for x, y in zip(nk, nb, strict=True)], dtype=bool)
    better = ~np.isnan(d) & ((d < b) | ((d == b) & tie))
    m.loc[better, "bound"] = d[better]
    m.loc[better, "nb"] = nk[better]
    return m.drop(columns=["d", "nb_key_f"])


def certify_exact(
    pts: DataFrame,
    *,
    n_attr: int,
    dim_x: int,
    pairs: list[Pair],
    seed: int,
    sample_rows: int = 1024,
    first_search: int = 256,
    first_block: int = 1024,
    max_candidates: int | None = None,
    time_left: Callable[[], float] | None = None,
    on_step: Callable[[dict[Pair, CertifiedResult]], None] | None = None,
    on_bounds: Callable[[DataFrame], None] | None = None,
) -> dict[Pair, CertifiedResult]:
    """Exact D per (target, attribute) by sample bounds and elimination (module doc).

    Over 60 lines only by this docstring and its keyword-only parameters; the rounds are helpers.

    (Its length is its parameter documentation; each step is a helper.)

    Parameters
    ----------
    pts : DataFrame
        Points (``key, y, yp, x, c0..``).
    n_attr, dim_x : int
        Number of code columns, feature length.
    pairs : list of (tgt, attr)
        What to compute.
    seed : int
        Seed of the hash ranks (sample and blocks).
    sample_rows : int
        Sample size per code (at least 64 rows of every code; fewer when there are many
        codes, about ``2 * sample_rows`` rows in all).
    first_search : int
        Rows with the largest bound searched exactly first, per pair (they set ``L``).
    first_block : int
        Rows per code of the first block past the sample; each next block is twice as
        large.
    max_candidates : int, optional
        Cap on rows checked per pair (``not_certified`` when reached); default none.
    time_left : callable, optional
        Seconds left of the time budget, checked between rounds; past it the result is
        ``not_certified`` with the interval so far.
    on_step : callable, optional
        Called with the intervals so far once the bounds are known (no lower bound
        yet) and after every round.
    on_bounds : callable, optional
        Called with the persisted per-row bounds (``tgt, attr, key, u, nb_key, mult``)
        once they are known, before the search (histograms, averages).

    Returns
    -------
    dict
        ``(tgt, attr) -> CertifiedResult``.
    """
    points_schema_check(pts, n_attr)
    time_left = time_left or (lambda: math.inf)
    targets = tuple(sorted({p[0] for p in pairs}))
    counts = _code_counts(pts, n_attr)
    ranked = with_ranks(pts, n_attr=n_attr, counts=counts, seed=seed).persist()
    n_codes = sum(len(c) for c in counts.values())
    quota = float(max(64, (2 * sample_rows) // max(1, n_codes)))
    in_sample = F.lit(False)
    for a in range(n_attr):
        in_sample |= F.col(f"rho{a}") < F.lit(quota)
    ub_df = None
    try:
        sample = _collect(ranked.where(in_sample),
                          est_bytes=8.0 * (dim_x + 4) * quota * max(1, n_codes))
        ub_df = (
            sample_bounds(ranked, sample, n_attr=n_attr, dim_x=dim_x, targets=targets)
            .where(_any_pair(pairs))
            .groupBy("tgt", "attr", "key")
            .agg(F.min(F.struct("d", "nb_key")).alias("m"), F.count(F.lit(1)).alias("mult"))
            .select("tgt", "attr", "key", F.col("m.d").alias("u"),
                    F.col("m.nb_key").alias("nb_key"), "mult")
        ).persist()
        state = {p: _PairState() for p in pairs}
        for r in ub_df.groupBy("tgt", "attr").agg(F.max("u").alias("u")).collect():
            if (int(r["tgt"]), int(r["attr"])) in state:
                state[(int(r["tgt"]), int(r["attr"]))].ub_rem = float(r["u"])

        if on_bounds is not None:
            on_bounds(ub_df)

        def report(step: bool = True) -> None:
            if step:
                for st in state.values():
                    st.steps.append((st.n_exact, st.lb, st.upper()))
            if on_step is not None:
                on_step({p: st.result() for p, st in state.items()})

        report(step=False)
        _search(ranked, ub_df, state, n_attr=n_attr, dim_x=dim_x, counts=counts, quota=quota,
                first_search=first_search, first_block=first_block,
                max_candidates=max_candidates, time_left=time_left, report=report)
        n_above = _count_above(ub_df, state)
        return {p: st.result(n_above=n_above.get(p, 0)) for p, st in state.items()}
    finally:
        if ub_df is not None:
            ub_df.unpersist()
        ranked.unpersist()


def _search(ranked: DataFrame, ub_df: DataFrame, state: dict[Pair, _PairState], *,
            n_attr: int, dim_x: int, counts: dict[int, dict[int, int]], quota: float,
            first_search: int, first_block: int, max_candidates: int | None,
            time_left: Callable[[], float], report: Callable[[], None]) -> None:
    """The elimination loop: batches in decreasing bound until none is left."""
    max_q = max(first_search, _QUERY_BYTES // (8 * (dim_x + 1)))
    first = True
    while True:
        for st in state.values():
            if not st.done and max_candidates is not None and st.n_checked >= max_candidates:
                st.done = True
        active = [p for p, st in state.items() if not st.done]
        if not active:
            return
        if time_left() <= 0:
            return
        size = first_search if first else max_q
        if max_candidates is not None:
            size = max(1, min(size, *(max_candidates - state[p].n_checked for p in active)))
        batch = _next_batch(ub_df, ranked, state, active, size, n_attr=n_attr, dim_x=dim_x)
        taken = {(int(t), int(a)) for t, a in zip(batch["tgt"], batch["attr"], strict=True)}
        for p in active:
            if p not in taken:
                st = state[p]
                st.done = st.certified = True
                st.ub_rem = -math.inf
        if not len(batch):
            report()
            return
        if not _check_batch(ranked, batch, state, n_attr=n_attr, dim_x=dim_x, counts=counts,
                            start=quota, first_block=first_block, exact_first=first,
                            time_left=time_left, on_round=report):
            return
        first = False
        for p in active:
            st = state[p]
            if not st.done and st.ub_rem < _thr(st.lb):
                st.done = st.certified = True
                st.ub_rem = -math.inf
        report()


def _count_above(ub_df: DataFrame, state: dict[Pair, _PairState]) -> dict[Pair, int]:
    """Rows whose sample bound exceeds the final lower bound (those needed a search)."""
    above = F.lit(False)
    for p, st in state.items():
        if math.isfinite(st.lb):
            above |= _is_pair(p) & (F.col("u") > F.lit(st.lb))
    return {(int(r["tgt"]), int(r["attr"])): int(r["count"])
            for r in ub_df.where(above).groupBy("tgt", "attr").count().collect()}
