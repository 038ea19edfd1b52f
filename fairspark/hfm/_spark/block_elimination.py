"""Pass C of the certified elimination (:mod:`.elimination`): growing blocks.

Every row whose bound is not below ``L`` is checked against the doubling blocks of
every code and leaves as soon as a neighbour closer than ``L`` is seen
(:func:`pass_c_batches`, the function of some batches shared by the Spark task and the
driver engine; :func:`elimination_job`, the Spark job).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from fairspark._testing import maybe_fail_first_attempt
from fairspark._threads import pin_threads
from fairspark.hfm._kernels import (
    nn_other_group_clustered,
)
from fairspark.hfm._spark.blobs import (
    NULL_CODE,
    blobs_of,
    bound_col,
    closer_or_tied,
    codes_of,
    column_of,
    from_blob,
    neighbour_col,
    numpy_of,
    target_points,
    to_blob,
)
from fairspark.hfm._spark.records import Blocks, PassCStats, PassCTarget, RowKind
from fairspark.hfm._spark.state import Pair, PairState, threshold

__all__ = ["after_cursor", "block_edges", "blocks_of", "elimination_job", "is_pair",
           "other_max", "pass_c_batches", "pass_c_targets"]

_C_SCHEMA = ("kind int, tgt int, attr int, blk int, n long, mx double, key string, "
             "d double, nb_key string, code int, xb binary")


def is_pair(p: Pair) -> Column:
    """Rows of pair ``p`` (columns ``tgt``, ``attr``)."""
    return (F.col("tgt") == p[0]) & (F.col("attr") == p[1])


def other_max(counts: dict[int, dict[int, int]], a: int, code: int) -> float:
    """Rows of the largest other code: a block reaching it covers the whole other side."""
    return float(max((n for c, n in counts[a].items() if c != code), default=0))


def after_cursor(p: Pair, cursor: tuple[float, str] | None) -> Column:
    """Rows after ``cursor`` in the order (bound descending, key ascending)."""
    if cursor is None:
        return F.lit(True)
    u = F.col(bound_col(p))
    cu, ck = cursor
    return (u < F.lit(cu)) | ((u == F.lit(cu)) & (F.col("key") > F.lit(ck)))


def block_edges(quota: float, first_block: int, n_blocks: int) -> list[float]:
    """Rank limits ``q, q + b, q + 3b, q + 7b, ...`` of the doubling blocks."""
    return [quota + first_block * ((1 << j) - 1) for j in range(n_blocks + 1)]


def _other_max_codes(codes: np.ndarray, cnt: dict[int, int]) -> np.ndarray:
    """Rows of the largest other code, per row code (see :func:`other_max`)."""
    tot = [*sorted(cnt.values(), reverse=True), 0, 0]
    top = max(cnt, key=lambda c: (cnt[c], c)) if cnt else None
    return np.where(codes == top, tot[1], tot[0]).astype(float)


def blocks_of(blocks: pd.DataFrame, *, n_attr: int, dim_x: int,
              counts: dict[int, dict[int, int]]) -> Blocks:
    """The blocks of pass C as its tasks read them (vectors, keys, codes and ranks,
    key order)."""
    blocks = blocks.sort_values("key", kind="mergesort")
    BP = blobs_of(blocks["xb"]) if len(blocks) else np.zeros((0, dim_x + 2))
    return Blocks(
        points=BP, keys=blocks["key"].to_numpy(dtype=object),
        codes={a: blocks[f"c{a}"].fillna(NULL_CODE).to_numpy(np.int64) for a in range(n_attr)},
        ranks={a: blocks[f"rho{a}"].to_numpy(float) for a in range(n_attr)},
        counts={a: counts[a] for a in range(n_attr)},
    )


def pass_c_targets(state: dict[Pair, PairState], active: list[Pair]) -> list[PassCTarget]:
    """The active pairs as pass C checks them (threshold from ``L``, the cursor)."""
    return [PassCTarget(p[0], p[1], threshold(state[p].lb), state[p].cursor) for p in active]


def pass_c_batches(it, b: Blocks, spec: list[PassCTarget], edges: list[float],
                   dim_x: int) -> Iterator[pa.RecordBatch]:
    """Pass C over some batches of the working table (see :func:`elimination_job`); shared
    by the Spark task and the driver path."""
    nblk = len(edges) - 1
    stats = {s.pair: PassCStats.empty(nblk) for s in spec}
    for batch in it:
        if batch.num_rows == 0:
            continue
        P = None
        for target in spec:
            t, a, thr, cur = target.tgt, target.attr, target.threshold, target.cursor
            u = numpy_of(batch, bound_col((t, a)))
            alive = u >= thr
            if cur is not None:
                alive &= u <= cur[0]
                eq = np.flatnonzero(alive & (u == cur[0]))
                if len(eq):
                    ks = column_of(batch, "key").take(pa.array(eq)).to_pylist()
                    alive[eq[[k <= cur[1] for k in ks]]] = False
            idx = np.flatnonzero(alive)
            if not len(idx):
                continue
            if P is None:  # a view: only the rows checked are copied
                P = from_blob(column_of(batch, "xb"), dim_x + 2, copy=False)
            st = stats[(t, a)]
            st.entered += len(idx)
            codes = codes_of(batch, f"c{a}")[idx]
            Q = target_points(P[idx], t)
            bound = u[idx].copy()
            nb = np.asarray(column_of(batch, neighbour_col((t, a))).take(pa.array(idx)).to_pylist(),
                            dtype=object)
            full = _other_max_codes(codes, b.counts[a])
            keep = np.ones(len(idx), dtype=bool)
            for j in range(nblk):
                lo, hi = edges[j], edges[j + 1]
                m = (b.ranks[a] >= lo) & (b.ranks[a] < hi)
                live = np.flatnonzero(keep)
                if not len(live):
                    break
                if m.any():
                    d, ri = nn_other_group_clustered(Q[live], codes[live],
                                                     target_points(b.points[m], t),
                                                     b.codes[a][m])
                    nk = np.full(len(d), None, dtype=object)
                    ok = ri >= 0
                    nk[ok] = b.keys[m][ri[ok]]
                    better = closer_or_tied(d, nk, bound[live], nb[live])
                    bound[live[better]] = d[better]
                    nb[live[better]] = nk[better]
                out = live[bound[live] < thr]
                st.eliminated[j] += len(out)
                if len(out):
                    st.max_eliminated[j] = max(st.max_eliminated[j], float(bound[out].max()))
                keep[out] = False
                ex = live[keep[live] & (full[live] <= hi)]
                st.made_exact[j] += len(ex)
                if len(ex):
                    yield _c_rows(RowKind.EXACT, (t, a), batch, idx[ex], bound[ex], nb[ex],
                                  codes[ex])
                    keep[ex] = False
            sv = np.flatnonzero(keep)
            st.survived += len(sv)
            if len(sv):
                st.max_survivor = max(st.max_survivor, float(bound[sv].max()))
                yield _c_rows(RowKind.SURVIVOR, (t, a), batch, idx[sv], bound[sv], nb[sv],
                              codes[sv], xb=to_blob(P[idx[sv]]))
    for (t, a), st in stats.items():
        yield _stats_rows(t, a, st)


def _stats_rows(t: int, a: int, st: PassCStats) -> pa.RecordBatch:
    """One task's counts of pass C for pair ``(t, a)`` as output rows: per block one
    :attr:`RowKind.ELIMINATED` and one :attr:`RowKind.MADE_EXACT` row, then one
    :attr:`RowKind.ENTERED` and one :attr:`RowKind.SURVIVED` row."""
    ne, mx, nx = st.eliminated, st.max_eliminated, st.made_exact
    k = len(ne)
    m = 2 * k + 2
    kinds = np.r_[np.full(k, int(RowKind.ELIMINATED)), np.full(k, int(RowKind.MADE_EXACT)),
                  [int(RowKind.ENTERED), int(RowKind.SURVIVED)]]
    return pa.RecordBatch.from_pydict({
        "kind": pa.array(kinds.astype(np.int32)),
        "tgt": pa.array(np.full(m, t, np.int32)),
        "attr": pa.array(np.full(m, a, np.int32)),
        "blk": pa.array(np.r_[np.arange(k), np.arange(k), [-1, -1]].astype(np.int32)),
        "n": pa.array(np.r_[ne, nx, [st.entered, st.survived]].astype(np.int64)),
        "mx": pa.array(np.r_[mx, np.full(k + 1, -np.inf), [st.max_survivor]]),
        "key": pa.nulls(m, pa.string()), "d": pa.nulls(m, pa.float64()),
        "nb_key": pa.nulls(m, pa.string()),
        "code": pa.nulls(m, pa.int32()), "xb": pa.nulls(m, pa.binary()),
    })


def elimination_job(work: DataFrame, b: Blocks, spec: list[PassCTarget],
                    edges: list[float], *, n_attr: int, dim_x: int) -> DataFrame:
    """Pass C: every row with ``u >= L`` (not searched yet) against the blocks (in the
    task's closure).

    ``b``: the blocks (:func:`blocks_of`); ``spec``: the active pairs. Returns the
    (unpersisted) output, one :class:`RowKind` per row.
    """
    def run(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pin_threads()
        maybe_fail_first_attempt("hfm")
        yield from pass_c_batches(it, b, spec, edges, dim_x)

    need = ["key", "xb", *[f"c{a}" for a in range(n_attr)],
            *{c for s in spec for c in (bound_col(s.pair), neighbour_col(s.pair))}]
    # only rows with a bound not below some pair's threshold enter the pass (the task
    # skips the others): filtered in the JVM, so the rows left after pass B (about 2%
    # on Adult x 20) are all that cross to Python, not every row's vector
    entering = F.lit(False)
    for s in spec:
        entering |= F.col(bound_col(s.pair)) >= F.lit(float(s.threshold))
    return work.where(entering).select(*need).mapInArrow(run, _C_SCHEMA)


def _c_rows(kind: RowKind, p: Pair, batch: pa.RecordBatch, rows: np.ndarray,
            d: np.ndarray, nb: np.ndarray, codes: np.ndarray,
            xb: pa.Array | None = None) -> pa.RecordBatch:
    """Pass C output rows of ``kind`` for pair ``p = (tgt, attr)``: ``rows`` of ``batch``
    with their distances ``d``, neighbour keys ``nb``, codes (and vectors ``xb``)."""
    t, a = p
    n = len(rows)
    return pa.RecordBatch.from_pydict({
        "kind": pa.array(np.full(n, int(kind), np.int32)), "tgt": pa.array(np.full(n, t, np.int32)),
        "attr": pa.array(np.full(n, a, np.int32)), "blk": pa.nulls(n, pa.int32()),
        "n": pa.nulls(n, pa.int64()), "mx": pa.nulls(n, pa.float64()),
        "key": column_of(batch, "key").take(pa.array(rows)).cast(pa.string()),
        "d": pa.array(np.asarray(d, float)), "nb_key": pa.array(list(nb), type=pa.string()),
        "code": pa.array(np.asarray(codes, np.int64).astype(np.int32)),
        "xb": xb if xb is not None else pa.nulls(n, pa.binary()),
    })

