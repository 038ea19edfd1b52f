"""Exact D by elimination, with no copy of the feature vectors (Bian and Luo, 2024; ``certified``).

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

Modules: this one holds the options and the algorithm (:func:`certify_exact` and the
passes' order, the rounds of pass D); :mod:`._work` the working table (on Spark or on
the driver), :mod:`._passes` the passes over its rows, :mod:`._state` a pair's search
state, :mod:`._blobs` the blob and Arrow column helpers, :mod:`._driver` the driver's
budget, collects and threads.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame

from fairspark._testing import fault_point
from fairspark.hfm._spark._blobs import _NULL_CODE, _blobs_of, _tpoints
from fairspark.hfm._spark._cost import CostLog
from fairspark.hfm._spark._driver import driver_budget
from fairspark.hfm._spark._passes import (
    _block_bcast,
    _block_edges,
    _other_max,
    _pass_c_spec,
    code_counts,
    sample_bounds_numpy,
)
from fairspark.hfm._spark._points import points_schema_check
from fairspark.hfm._spark._state import MARGIN, Pair, _PairState, _thr
from fairspark.hfm._spark._work import (
    _LocalWork,
    _SparkWork,
    _Work,
)
from fairspark.hfm.results import CertifiedResult
from fairspark.sampling import hash_bucket

__all__ = ["Bounds", "LOCAL_MAX_BYTES", "MARGIN", "CertifyOptions", "certify_exact", "code_counts",
           "driver_budget", "sample_bounds_numpy"]

_LOG = logging.getLogger(__name__)
_RANK = 1 << 30  # fairspark.sampling.BUCKETS
#: bytes of feature vectors broadcast in one round (queries or blocks)
_BCAST_BYTES = 32 << 20
#: default budget of the driver path (``audits.hfm.local_max_bytes``): ``None`` sizes it
#: from the driver's memory (:func:`driver_budget`)
LOCAL_MAX_BYTES: int | None = None


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
    code_counts:
        Rows of the points per (attribute index, code), null codes left out, when the
        caller counted them already (the HFM audit's group count): the Spark passes then
        run no job for them. ``None``: counted here.
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
    code_counts: dict[int, dict[int, int]] | None = None


@dataclass(frozen=True)
class Bounds:
    """Pass A's per-row sample bounds, as ``certify_exact`` hands them to ``on_bounds``.

    Attributes
    ----------
    rows : DataFrame or pandas.DataFrame
        ``tgt, attr, key, u, nb_key, mult``: a Spark DataFrame, or a pandas frame on the
        driver path.
    top : dict
        Per pair the largest bound.
    summary : pandas.DataFrame or None
        ``tgt, attr, D, D_avg, key, nb_key`` where pass A's Spark tasks gathered it (no
        job); ``None``: computed from ``rows``.
    histogram : callable or None
        ``histogram(tops, bins)``: per pair the rows per bin (``tgt, attr, bin, n``) of
        the bounds over ``[0, tops[attr]]`` (the last bin closed), in one aggregation
        of the Spark working table; ``None``: counted from ``rows``.
    """

    rows: DataFrame | pd.DataFrame
    top: dict[Pair, float]
    summary: pd.DataFrame | None = None
    histogram: Callable[[dict[int, float], int], pd.DataFrame] | None = None


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


def certify_exact(
    pts: DataFrame,
    *,
    n_attr: int,
    dim_x: int,
    pairs: list[Pair],
    n_rows: int | None = None,
    options: CertifyOptions | None = None,
    on_step: Callable[[dict[Pair, CertifiedResult]], None] | None = None,
    on_bounds: Callable[[Bounds], None] | None = None,
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
        Called with the per-row bounds (:class:`Bounds`) once they are known, before
        the search (histograms, averages).

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
        work = _SparkWork.build(ranked, n_attr=n_attr, dim_x=dim_x, pairs=pairs,
                                n_rows=n_rows, cost=cost, top_k=plan.k + 1, options=opt)
    cost.engine = work.where
    out = _certify_on(work, pairs, plan, t0=t0, on_step=on_step, on_bounds=on_bounds)
    summary = cost.log()
    for r in out.values():
        r.cost = summary
    return out


def _certify_on(work: _Work, pairs: list[Pair], plan: _Plan, *, t0: float,
                on_step: Callable[[dict[Pair, CertifiedResult]], None] | None,
                on_bounds: Callable[[Bounds], None] | None,
                ) -> dict[Pair, CertifiedResult]:
    """The passes of :func:`certify_exact` on a working table (Spark or driver)."""
    try:
        state = {p: _PairState() for p in pairs}
        fault_point("hfm:pass A")
        with work.step("A: sample bounds, top bounds", full=True) as rec:
            top = work.top_bounds(pairs, plan.k + 1)  # Spark: pass A, into the cache
            rec["rows_left"] = work.n_rows
        _LOG.debug("hfm pass A (bounds, working table, %s): %.2f s", work.where,
                  time.perf_counter() - t0)
        for p in pairs:
            state[p].ub_rem = -top[p][0][0] if top.get(p) else -math.inf
        if on_bounds is not None:
            with work.step("bound summaries"):
                on_bounds(Bounds(rows=work.bounds_rows(pairs),
                                 top={p: state[p].ub_rem for p in pairs},
                                 summary=work.bound_summary(pairs),
                                 histogram=work.bound_histogram(pairs)))

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
        st.n_surv = int(sv["n"].sum())
        st.ub_rem = float(sv["mx"].max()) if st.n_surv else -math.inf
        st.cursor = None
        ex = sub[sub["kind"] == 2].sort_values("key", kind="mergesort")
        for key, d, nb in zip(ex["key"], ex["d"], ex["nb_key"], strict=True):
            if np.isfinite(d):
                st.raise_lb(float(d), str(key), nb)


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
        taken = _first_survivors(work, surv, state, active, max_q + 1, row_bytes)
        for p in active:
            st = state[p]
            if p in taken:
                rows = taken[p]
            else:
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


def _first_survivors(work: _Work, surv, state: dict[Pair, _PairState], active: list[Pair],
                     limit: int, row_bytes: float) -> dict[Pair, pd.DataFrame]:
    """Pass D's first batch of every pair in one collect, where no pair has been taken
    from yet and pass C's survivors of all of them number at most ``limit`` (so each
    pair's batch holds all of its own, as ``survivor_rows`` would take them); else none."""
    if any(state[p].cursor is not None or state[p].n_surv is None for p in active):
        return {}
    n = sum(state[p].n_surv or 0 for p in active)
    if n > limit:
        return {}
    with work.step("D: survivor batch"):
        return work.survivors_of(surv, {p: _thr(state[p].lb) for p in active},
                                 est_bytes=row_bytes * max(n, 1))


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
    jump = False
    while len(live):
        if time_left() <= 0:
            for p in {(int(tg[i]), int(at[i])) for i in live}:
                m = live[(tg[live] == p[0]) & (at[live] == p[1])]
                state[p].open_ub = max(state[p].open_ub, float(bound[m].max()))
            return False
        # a round that eliminated under half of its rows says the rest lie far apart:
        # the next block reaches the end of every other side (one more scan, not a
        # doubling scan each; the rows then all become exact)
        hi = max(lo + size, float(full[live].max())) if jump else lo + size
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
        jump = 2 * int(keep.sum()) > len(live)
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
