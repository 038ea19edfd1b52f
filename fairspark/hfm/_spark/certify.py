"""Certification: exact D from per-row upper bounds and few exact searches (METHODS §1).

Rows are taken in decreasing upper bound; each exact ``nn`` raises the lower bound;
rows whose upper bound is at most the lower bound can be discarded. One
:class:`_PairState` per (target, attribute) says where its search stands.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from fairspark.hfm._spark._points import code_cols
from fairspark.hfm._spark.exact import block_nn
from fairspark.hfm.results import CertifiedResult

__all__ = ["certify"]

Pair = tuple[int, int]


@dataclass
class _PairState:
    """Where the certification of one (target, attribute) stands.

    Attributes
    ----------
    batch:
        Rows planned for the next step (four times more after each step).
    lb:
        The largest exact ``nn`` found so far: a lower bound of D.
    cursor:
        ``(ub, key)`` of the last row searched; the next step starts after it.
    n:
        Rows searched exactly so far.
    done, certified:
        The search has stopped; it stopped because the interval collapsed.
    ub_rem:
        The largest upper bound among the rows not searched yet.
    best_key, best_nb_key:
        The witness pair of ``lb``.
    steps:
        ``(n, lower, upper)`` after each step.
    """

    batch: int
    lb: float = -math.inf
    cursor: tuple[float, str] | None = None
    n: int = 0
    done: bool = False
    certified: bool = False
    ub_rem: float = math.inf
    best_key: str | None = None
    best_nb_key: str | None = None
    steps: list[tuple[int, float, float]] = field(default_factory=list)

    def result(self, *, n_above: int | None = None) -> CertifiedResult:
        """The interval so far (the final one once ``done``)."""
        upper = self.lb if self.certified else max(self.lb, self.ub_rem)
        return CertifiedResult(
            lower=self.lb, upper=upper, certified=self.certified, n_searched=self.n,
            key=self.best_key, nb_key=self.best_nb_key, steps=list(self.steps),
            n_above=n_above,
        )


def _is_pair(p: Pair) -> Column:
    tgt, attr = p
    return (F.col("tgt") == tgt) & (F.col("attr") == attr)


def _ranked_batch(
    ub_rows: DataFrame, state: dict[Pair, _PairState], active: list[Pair], max_candidates: int
) -> DataFrame:
    """The rows of the next step of every active pair, ranked by decreasing bound.

    Keeps the rows after each pair's cursor whose bound is above its lower bound, up to
    the step's size plus one (that row's bound is the largest one left afterwards).
    """
    cond = F.lit(False)
    plan_col = F.lit(0)
    cap_col = F.lit(0)
    for p in active:
        st = state[p]
        c = _is_pair(p)
        if math.isfinite(st.lb):
            c &= F.col("ub") > F.lit(st.lb)
        if st.cursor is not None:
            cu, ck = st.cursor
            after = (F.col("ub") == F.lit(cu)) & (F.col("key") > F.lit(ck))
            c &= (F.col("ub") < F.lit(cu)) | after
        cond |= c
        left = max_candidates - st.n
        plan_col = F.when(_is_pair(p), F.lit(min(st.batch, left))).otherwise(plan_col)
        cap_col = F.when(_is_pair(p), F.lit(left)).otherwise(cap_col)
    by_pair = Window.partitionBy("tgt", "attr")
    rank = F.row_number().over(by_pair.orderBy(F.col("ub").desc(), F.col("key").asc()))
    # rows still above the lower bound ("rest"): when they are at most twice the
    # planned batch, search them all now (one step instead of two)
    rest = F.count(F.lit(1)).over(by_pair)
    size_col = F.least(
        F.col("cap"), F.when(F.col("rest") <= 2 * F.col("plan"), F.col("rest"))
        .otherwise(F.col("plan"))
    )
    return (
        ub_rows.where(cond)
        .select("tgt", "attr", "key", "ub")
        .withColumn("rn", rank)
        .withColumn("rest", rest)
        .withColumn("plan", plan_col)
        .withColumn("cap", cap_col)
        .withColumn("size", size_col)
        .where(F.col("rn") <= F.col("size") + 1)
    )


def _plan_step(
    ranked: DataFrame, state: dict[Pair, _PairState], active: list[Pair]
) -> tuple[list[Pair], int]:
    """Advance each active pair past its batch; the pairs to search and their row count.

    A pair without a row left above its lower bound is certified here.
    """
    info = (
        ranked.groupBy("tgt", "attr")
        .agg(
            F.sum(F.when(F.col("rn") <= F.col("size"), 1).otherwise(0)).alias("n"),
            F.max_by(F.struct("ub", "key"),
                     F.when(F.col("rn") <= F.col("size"), F.col("rn"))).alias("last"),
            F.max(F.when(F.col("rn") == F.col("size") + 1, F.col("ub"))).alias("rem"),
        )
        .toPandas()
    )
    got = {(int(r.tgt), int(r.attr)): r for r in info.itertuples()}
    searching: list[Pair] = []
    n_q = 0
    for p in active:
        st = state[p]
        r = got.get(p)
        if r is None or int(r.n) == 0:
            st.done, st.certified, st.ub_rem = True, True, -math.inf
            continue
        st.ub_rem = -math.inf if pd.isna(r.rem) else float(r.rem)
        st.cursor = (float(r.last["ub"]), str(r.last["key"]))
        st.n += int(r.n)
        st.batch *= 4
        searching.append(p)
        n_q += int(r.n)
    return searching, n_q


def _search_batch(
    ranked: DataFrame, pts: DataFrame, *, n_attr: int, dim_x: int, n_q: int,
    n_rblocks: int, block_rows: int, searching: list[Pair],
) -> pd.DataFrame:
    """Exact ``nn`` of the step's rows; per pair the largest one and its witness pair."""
    queries = (
        ranked.where(F.col("rn") <= F.col("size"))
        .select(F.col("tgt").alias("q_tgt"), F.col("attr").alias("q_attr"), "key")
        # join first, then drop duplicated keys among the few joined rows: a
        # dropDuplicates of pts would aggregate the whole table every step
        .join(pts.select("key", "y", "yp", "x", *code_cols(n_attr)), on="key", how="inner")
        .dropDuplicates(["q_tgt", "q_attr", "key"])
    )
    return (
        block_nn(queries, pts, n_attr=n_attr, dim_x=dim_x,
                 n_qblocks=max(1, math.ceil(n_q / block_rows)), n_rblocks=n_rblocks,
                 targets=tuple(sorted({p[0] for p in searching})))
        .groupBy("tgt", "attr", "key")
        .agg(F.min(F.struct("d", "nb_key")).alias("m"))
        .groupBy("tgt", "attr")
        .agg(F.min(F.struct((-F.col("m.d")).alias("nd"), F.col("key"),
                            F.col("m.nb_key").alias("nb_key"))).alias("w"))
        .select("tgt", "attr", (-F.col("w.nd")).alias("d"), "w.key", "w.nb_key")
        .toPandas()
    )


def _record_step(state: dict[Pair, _PairState], searching: list[Pair], found: pd.DataFrame) -> None:
    """Raise the lower bounds with the step's exact values; close collapsed intervals."""
    for r in found.itertuples():
        st = state[(int(r.tgt), int(r.attr))]
        d = float(r.d)
        if d > st.lb or (d == st.lb and r.key < (st.best_key or "\uffff")):
            st.lb = d
            st.best_key, st.best_nb_key = r.key, r.nb_key
    for p in searching:
        st = state[p]
        st.steps.append((st.n, st.lb, max(st.lb, st.ub_rem)))
        if st.ub_rem <= st.lb:
            st.done, st.certified = True, True


def _count_above(ub_rows: DataFrame, state: dict[Pair, _PairState]) -> dict[Pair, int]:
    """Rows whose upper bound exceeds the final lower bound, per pair.

    Those are the rows that truly needed an exact search (the batches may have searched
    more).
    """
    above = F.lit(False)
    for p, st in state.items():
        if math.isfinite(st.lb):
            above |= _is_pair(p) & (F.col("ub") > st.lb)
    return {
        (int(r["tgt"]), int(r["attr"])): int(r["n"])
        for r in ub_rows.where(above).groupBy("tgt", "attr").count()
        .withColumnRenamed("count", "n").collect()
    }


def certify(
    pts: DataFrame,
    ub_rows: DataFrame,
    *,
    n_attr: int,
    dim_x: int,
    n_rows: int,
    pairs: list[tuple[int, int]],
    max_candidates: int,
    block_rows: int = 20_000,
    first_batch: int = 1024,
    on_step: Callable[[dict[tuple[int, int], CertifiedResult]], None] | None = None,
) -> dict[tuple[int, int], CertifiedResult]:
    """Exact D from per-row upper bounds plus exact searches for few rows (METHODS §1).

    Rows are taken in decreasing upper bound; each exact ``nn`` raises the lower bound;
    rows whose upper bound is at most the lower bound can be discarded. The loop stops
    when no row left has ``ub > lower`` (certified: lower = upper = D) or when the next
    batch would exceed ``max_candidates`` exact searches (not certified; the interval is
    ``[lower, upper]``). Candidates never travel to the driver: each step selects them
    with a window rank and searches them with :func:`block_nn`; the driver receives a
    few numbers per (target, attribute).

    (Its length is its parameter documentation; the loop body is five helpers.)

    Parameters
    ----------
    pts : DataFrame
        Points DataFrame.
    ub_rows : DataFrame
        From :func:`pointwise_rows` (``tgt, attr, key, ub``); persisted by the caller.
    n_attr, dim_x, n_rows : int
        Number of code columns, feature length, rows of ``pts``.
    pairs : list of (tgt, attr)
        What to certify.
    max_candidates : int
        Cap on exact searches per (tgt, attr).
    block_rows : int
        Rows per block of the exact search.
    first_batch : int
        Rows planned for the first step; each later step plans four times more. When
        the rows left with ``ub`` above the lower bound are at most twice the planned
        batch, the step searches all of them (within ``max_candidates``), which saves
        the step that would otherwise search the rest.
    on_step : callable, optional
        Called after every step with the current ``(tgt, attr) -> CertifiedResult``
        (the interval so far; ``certified`` only where it has collapsed), so a caller
        can keep the best interval when a time budget cuts the loop.

    Returns
    -------
    dict
        ``(tgt, attr) -> CertifiedResult``; ``steps`` lists ``(n_searched, lower, upper)``.
    """
    n_rblocks = max(1, math.ceil(n_rows / block_rows))
    state = {p: _PairState(batch=first_batch) for p in pairs}
    while True:
        for st in state.values():
            if not st.done and st.n >= max_candidates:
                st.done = True
        active = [p for p, st in state.items() if not st.done]
        if not active:
            break
        ranked = _ranked_batch(ub_rows, state, active, max_candidates).persist()
        try:
            searching, n_q = _plan_step(ranked, state, active)
            if not searching:
                break
            found = _search_batch(ranked, pts, n_attr=n_attr, dim_x=dim_x, n_q=n_q,
                                  n_rblocks=n_rblocks, block_rows=block_rows,
                                  searching=searching)
        finally:
            ranked.unpersist()
        _record_step(state, searching, found)
        if on_step is not None:
            on_step({p: st.result() for p, st in state.items()})
    n_above = _count_above(ub_rows, state)
    return {p: st.result(n_above=n_above.get(p, 0)) for p, st in state.items()}
