"""Clustered exact nearest other-group search of the HFM audit (Bian and Luo, 2024).

Rows that repeat or cluster (a grid of cell :data:`CLUSTER_CELL` on the features,
per group code) are searched once per cluster: :func:`nn_other_group_clustered`
groups the queries, :func:`nn_other_group_refclustered` the references, and
:func:`query_clusters` proposes the clusters once for several searches. Only
candidates that bounds cannot rule out are measured, directly, so the results are
those of :func:`fairspark.hfm._nn.nn_other_group`, bit for bit.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from fairspark.hfm._nn import (
    BLOCK_DOUBLES,
    EPS,
    as_rows,
    nn_other_group,
    nonzero2,
    pair_distance_at,
)

__all__ = ["CLUSTER_CELL", "Clusters", "nn_other_group_clustered", "nn_other_group_refclustered",
           "query_clusters"]


#: grid cell of the cluster proposal (in feature units; min-max scaled features)
CLUSTER_CELL = 0.05
#: grid offset (in cells): 0/1 values (one-hot, min-max ends) sit mid-cell, not on an edge
_CELL_OFFSET = 0.37
#: the clustered search runs when the queries form at most this fraction of clusters
_CLUSTER_GAIN = 0.5
#: rows (query, candidate) measured at a time by the clustered search
_PAIR_ROWS = 1 << 14


class Clusters(NamedTuple):
    """A cluster proposal (:func:`query_clusters`): the rows in cluster order, where
    each cluster starts in it, each cluster's radius and each member's distance to its
    representative (by position of ``order``; both ``None`` when the clusters are too
    many for the searches to use them)."""

    order: np.ndarray
    starts: np.ndarray
    radii: np.ndarray | None
    distances: np.ndarray | None


def _grid_clusters(q: np.ndarray, qcodes: np.ndarray,
                  cell: float) -> tuple[np.ndarray, np.ndarray]:
    """Proposed clusters of the queries: same grid cell (hashed) and same code.

    Returns ``order`` (queries grouped by cluster, each cluster's first the smallest
    index) and ``starts`` (where each cluster begins in ``order``, with ``len(q)`` last).
    The hash is a float dot product of the cell coordinates: a collision only merges
    cells, and rounding only splits one; the search measures every member's distance to
    its representative, so a proposal never changes the result, only the work.
    """
    nq, dim = q.shape
    w = np.random.default_rng(12345).random(dim) + 0.5
    h = np.empty(nq)
    step = max(1, BLOCK_DOUBLES // max(1, dim))
    for s0 in range(0, nq, step):
        g = q[s0:s0 + step] * (1.0 / cell)
        g += _CELL_OFFSET
        np.floor(g, out=g)
        h[s0:s0 + step] = g @ w
    order = np.lexsort((np.arange(nq), h, qcodes))
    hs, cs = h[order], np.asarray(qcodes)[order]
    new = np.ones(nq, dtype=bool)
    new[1:] = (hs[1:] != hs[:-1]) | (cs[1:] != cs[:-1])
    return order, np.r_[np.flatnonzero(new), nq]


def nn_other_group_clustered(
    queries: np.ndarray,
    qcodes: np.ndarray,
    refs: np.ndarray,
    rcodes: np.ndarray,
    *,
    cell: float = CLUSTER_CELL,
    clusters: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`nn_other_group`, one full search per cluster of queries (same result).

    Queries that repeat, or lie within a grid cell of each other (same code), form a
    cluster; only its first query (the representative ``c``) is compared with every
    reference of another code (one BLAS product per code). A member ``m`` at
    ``delta = |m - c|`` has its nearest reference among the references within
    ``nn(c) + 2 * delta`` of ``c`` (triangle inequality; a relative margin and the
    rounding bound of the norm shortcut on top), so only those are measured for it,
    directly, with the same ties (the smallest reference index): the distances and
    indices are those of :func:`nn_other_group`, bit for bit. A member of a cluster
    with one such reference costs one direct distance. When the queries do not cluster
    (more than half as many clusters as queries), this is :func:`nn_other_group`.

    Parameters
    ----------
    queries, refs : numpy.ndarray
        Shapes ``(q, dim)`` and ``(r, dim)``.
    qcodes, rcodes : numpy.ndarray
        Integer group codes.
    cell : float
        Grid cell of the cluster proposal.
    clusters : tuple, optional
        A cluster proposal computed elsewhere: ``(order, starts)``, or
        :func:`query_clusters`' four arrays (with radii and member distances that are
        upper bounds of those of these points, e.g. found once on the points of both
        targets). Every cluster's members must share a code, its first member is the
        representative. Any proposal gives the same result; it only changes the work.

    Returns
    -------
    dist, idx : numpy.ndarray
        As :func:`nn_other_group`.
    """
    q, r = as_rows(queries), as_rows(refs)
    qcodes, rcodes = np.asarray(qcodes), np.asarray(rcodes)
    nq, nr = q.shape[0], r.shape[0]
    if nq < 8 or nr == 0 or q.shape[1] == 0:
        return nn_other_group(q, qcodes, r, rcodes)
    order, starts = clusters[:2] if clusters is not None else _grid_clusters(q, qcodes, cell)
    n_cl = len(starts) - 1
    if n_cl > _CLUSTER_GAIN * nq:
        return nn_other_group(q, qcodes, r, rcodes)
    size = np.diff(starts)
    rep = order[starts[:-1]]
    rad, delta = (clusters[2:4] if clusters is not None and len(clusters) > 2
                  and clusters[2] is not None else _cluster_radii(q, order, starts, size, rep))
    coff, ncand, cand, clb_d, nn_ub = _cluster_candidates(q, qcodes, r, rcodes, rep, rad)
    best = np.full(nq, np.inf)
    bidx = np.full(nq, -1, dtype=np.int64)
    _measure_members(q, r, order, size, delta, (coff, ncand, cand, clb_d, nn_ub), best, bidx)
    return best, bidx


def query_clusters(points: np.ndarray, codes: np.ndarray, *,
                   cell: float = CLUSTER_CELL) -> Clusters:
    """A cluster proposal for :func:`nn_other_group_clustered` (of queries) and
    :func:`nn_other_group_refclustered` (of references): ``order``, ``starts``, each
    cluster's radius and each member's distance to its representative (by position of
    ``order``).

    The radii and distances are ``None`` when the clusters are too many for the
    searches to use them (more than :data:`_CLUSTER_GAIN` of the points).

    Computed on points that hold every target's coordinates (``[yp, y, x]``), it serves
    the points of each target (``[y, x]``, ``[yp, x]``): rows in one grid cell of all
    coordinates are in one cell of any subset of them, and a distance over all
    coordinates is at least the distance over a subset, so the radii stay upper bounds.
    """
    p = as_rows(points)
    order, starts = _grid_clusters(p, np.asarray(codes), cell)
    if len(starts) - 1 > _CLUSTER_GAIN * len(p):
        # too many clusters: the searches take their plain path and never read the radii
        return Clusters(order, starts, None, None)
    size = np.diff(starts)
    rad, delta = _cluster_radii(p, order, starts, size, order[starts[:-1]])
    return Clusters(order, starts, rad, delta)


def _cluster_radii(q: np.ndarray, order: np.ndarray, starts: np.ndarray, size: np.ndarray,
                   rep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per cluster the largest distance of a member to its representative (0 for
    singletons), and per position of ``order`` that member's distance."""
    rad = np.zeros(len(size))
    delta = np.zeros(len(order))
    multi = np.flatnonzero(size > 1)
    for s0 in range(0, len(multi), 4096):  # slices: no large fresh temporaries
        cl = multi[s0:s0 + 4096]
        cnt = size[cl]
        first = np.repeat(np.cumsum(cnt) - cnt, cnt)
        pos = np.repeat(starts[cl], cnt) + np.arange(cnt.sum()) - first
        dl = pair_distance_at(q, order[pos], q, np.repeat(rep[cl], cnt))
        delta[pos] = dl
        rad[cl] = np.maximum.reduceat(dl, np.cumsum(cnt) - cnt)
    return rad, delta


def _cluster_candidates(q: np.ndarray, qcodes: np.ndarray, r: np.ndarray, rcodes: np.ndarray,
                        rep: np.ndarray, rad: np.ndarray,
                        ) -> tuple[np.ndarray, ...]:
    """Per cluster, the references of another code within ``nn(c) + 2 rad`` of its
    representative ``c`` (one norm-shortcut product, whose error per entry is below
    ``tol / 2``), ascending: ``cand[coff[k]:coff[k] + ncand[k]]`` for cluster ``k``;
    with ``cand_lb``, a lower bound of each candidate's distance to ``c``, and
    ``nn_ub``, an upper bound of ``nn(c)`` per cluster."""
    n_cl = len(rep)
    cn = np.sum(q[rep] ** 2, axis=1)
    rn = np.sum(r * r, axis=1)
    coef = 4.0 * (q.shape[1] + 4) * EPS
    tol = 2.0 * coef * (cn + float(rn.max())) + 1e-300
    ccode = qcodes[rep]
    ucodes = np.unique(ccode)
    # few codes: per code, only the references of other codes (no masked work)
    groups = ([(np.flatnonzero(ccode == c), np.flatnonzero(rcodes != c)) for c in ucodes]
              if len(ucodes) <= 8 else [(np.arange(n_cl), None)])
    coff = np.zeros(n_cl, dtype=np.int64)
    ncand = np.zeros(n_cl, dtype=np.int64)
    nn_ub = np.zeros(n_cl)
    parts, lbs, total = [], [], 0
    for cl, rs in groups:
        rr, rnn = (r, rn) if rs is None else (r[rs], rn[rs])
        if len(rr) == 0:
            continue
        bq = max(1, min(len(cl), BLOCK_DOUBLES // max(1, len(rr))))
        for s0 in range(0, len(cl), bq):
            clb = cl[s0:s0 + bq]
            sq = q[rep[clb]] @ rr.T
            sq *= -2.0
            sq += cn[clb, None]
            sq += rnn[None, :]
            if rs is None:
                sq[rcodes[None, :] == ccode[clb, None]] = np.inf
            m = sq.min(axis=1)
            ok = np.isfinite(m)
            reach = np.where(ok, (np.sqrt(np.maximum(m, 0.0) + tol[clb]) + 2.0 * rad[clb])
                             * (1.0 + 1e-9), 0.0)
            ci, ri = nonzero2(sq <= (reach ** 2 + tol[clb])[:, None])
            nn_ub[clb] = np.where(ok, np.sqrt(np.maximum(m, 0.0) + tol[clb]), 0.0)
            lbs.append(np.sqrt(np.maximum(sq[ci, ri] - tol[clb][ci], 0.0)))
            cnt = np.bincount(ci, minlength=len(clb))
            ncand[clb] = cnt
            coff[clb] = total + np.cumsum(cnt) - cnt
            parts.append(ri if rs is None else rs[ri])
            total += len(ri)
    cand = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    cand_lb = np.concatenate(lbs) if lbs else np.zeros(0)
    return coff, ncand, cand, cand_lb, nn_ub


def _measure_members(q: np.ndarray, r: np.ndarray, order: np.ndarray, size: np.ndarray,
                     delta: np.ndarray, cands: tuple, best: np.ndarray,
                     bidx: np.ndarray) -> None:
    """Every member of each cluster against the candidates of its cluster that can be
    its nearest, measured directly; ``best``/``bidx`` set in place (smallest distance,
    then smallest reference index: the candidates are ascending, so the first at the
    minimum).

    ``cands``: :func:`_cluster_candidates`' output. A member ``m`` at ``delta`` from its
    representative ``c`` needs only the candidates with ``d(c, r) <= nn(c) + 2 delta``
    (``nn(m) <= nn(c) + delta``, and ``d(m, r) >= d(c, r) - delta``), by the same
    margins. Members are taken in ``order`` (grouped by cluster), each with all its
    candidates in one slice of at most :data:`_PAIR_ROWS` pairs (or one member)."""
    coff, ncand, cand, cand_lb, nn_ub = cands
    cid = np.repeat(np.arange(len(size)), size)
    k = ncand[cid]
    ends = np.cumsum(k)
    s0, n = 0, len(order)
    while s0 < n:
        base = ends[s0 - 1] if s0 else 0
        s1 = max(s0 + 1, int(np.searchsorted(ends, base + _PAIR_ROWS, "right")))
        km = k[s0:s1]
        has = km > 0
        pos = np.arange(s0, s1)[has]
        km = km[has]
        s0 = s1
        if not len(pos):
            continue
        seg = np.cumsum(km) - km
        ci = cid[pos]
        pi = np.repeat(coff[ci] - seg, km) + np.arange(int(km.sum()))
        mj = np.repeat(np.arange(len(pos)), km)
        reach = (nn_ub[ci] + 2.0 * delta[pos]) * (1.0 + 1e-9)
        keep = cand_lb[pi] <= reach[mj]
        pi, mj = pi[keep], mj[keep]
        # every member keeps its nearest candidate: at least one pair each
        km = np.bincount(mj, minlength=len(pos))
        seg = np.cumsum(km) - km
        ri = cand[pi]
        mem = order[pos]
        d = pair_distance_at(q, mem[mj], r, ri)
        mn = np.minimum.reduceat(d, seg)
        hit = np.flatnonzero(d == np.repeat(mn, km))
        first = hit[np.searchsorted(hit, seg)]
        best[mem], bidx[mem] = mn, ri[first]


def nn_other_group_refclustered(
    queries: np.ndarray,
    qcodes: np.ndarray,
    refs: np.ndarray,
    rcodes: np.ndarray,
    *,
    clusters: tuple[np.ndarray, np.ndarray] | None = None,
    cell: float = CLUSTER_CELL,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`nn_other_group` with the *references* grouped in clusters (same result).

    For few queries against many references that repeat or cluster (pass B's first
    searches): each query is compared with every cluster's representative ``c`` (one
    BLAS product); the closest bounds ``nn(q)`` from above, and a cluster of radius
    ``R`` can hold a nearest reference only when ``d(q, c) - R`` is not above that
    bound (triangle inequality, with a relative margin and the shortcut's rounding
    bound). Only those clusters' members are measured, directly, ties to the smallest
    index: :func:`nn_other_group`'s distances and indices, bit for bit, which it is
    when the references do not cluster (more than half as many clusters as rows).

    Parameters
    ----------
    queries, refs : numpy.ndarray
        Shapes ``(q, dim)`` and ``(r, dim)``.
    qcodes, rcodes : numpy.ndarray
        Integer group codes.
    clusters : tuple, optional
        A cluster proposal of the references: ``(order, starts)`` or
        :func:`query_clusters`' four arrays (radii that bound these references'); default:
        found here with ``cell``.
    cell : float
        Grid cell of the cluster proposal when ``clusters`` is not given.

    Returns
    -------
    dist, idx : numpy.ndarray
        As :func:`nn_other_group`.
    """
    q, r = as_rows(queries), as_rows(refs)
    qcodes, rcodes = np.asarray(qcodes), np.asarray(rcodes)
    nq, nr = q.shape[0], r.shape[0]
    if nq == 0 or nr < 8 or q.shape[1] == 0:
        return nn_other_group(q, qcodes, r, rcodes)
    order, starts = clusters[:2] if clusters is not None else _grid_clusters(r, rcodes, cell)
    if len(starts) - 1 > _CLUSTER_GAIN * nr:
        return nn_other_group(q, qcodes, r, rcodes)
    size = np.diff(starts)
    rep = order[starts[:-1]]
    rad = (clusters[2] if clusters is not None and len(clusters) > 2
           and clusters[2] is not None else _cluster_radii(r, order, starts, size, rep)[0])
    ccode = rcodes[rep]
    qn, cn, tol = _shortcut_bound(q, r[rep])
    best = np.full(nq, np.inf)
    bidx = np.full(nq, -1, dtype=np.int64)
    uq = np.unique(qcodes)
    groups = ([(np.flatnonzero(qcodes == c), np.flatnonzero(ccode != c)) for c in uq]
              if len(uq) <= 8 else [(np.arange(nq), None)])
    for qs_all, ks in groups:
        reps = rep if ks is None else rep[ks]
        if len(reps) == 0:
            continue
        R = r[reps]
        bq = max(1, min(len(qs_all), BLOCK_DOUBLES // len(reps)))
        for s0 in range(0, len(qs_all), bq):
            qs = qs_all[s0:s0 + bq]
            sq = q[qs] @ R.T
            sq *= -2.0
            sq += qn[qs, None]
            sq += (cn if ks is None else cn[ks])[None, :]
            if ks is None:
                sq[qcodes[qs, None] == ccode[None, :]] = np.inf
            m = sq.min(axis=1)
            ub = np.where(np.isfinite(m), np.sqrt(np.maximum(m, 0.0) + tol[qs]), -np.inf)
            lb = np.sqrt(np.maximum(sq - tol[qs, None], 0.0))
            lb -= (rad if ks is None else rad[ks])[None, :]
            qi, ki = nonzero2(lb <= (ub * (1.0 + 1e-9))[:, None])
            if ks is not None:
                ki = ks[ki]
            _measure_clusters(q, r, qs[qi], ki, (order, starts, size), (best, bidx))
    return best, bidx


def _shortcut_bound(q: np.ndarray,
                    reps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Squared norms of the queries and the representatives, and the rounding bound of
    the norm shortcut ``|q|^2 - 2 q.c + |c|^2`` per query (computed for the
    representatives only: their norms bound its error)."""
    qn = np.sum(q * q, axis=1)
    cn = np.sum(reps ** 2, axis=1)
    coef = 4.0 * (q.shape[1] + 4) * EPS
    return qn, cn, 2.0 * coef * (qn + float(cn.max())) + 1e-300


def _measure_clusters(q: np.ndarray, r: np.ndarray, qi: np.ndarray, ki: np.ndarray,
                      clusters: tuple[np.ndarray, np.ndarray, np.ndarray],
                      found: tuple[np.ndarray, np.ndarray]) -> None:
    """Each query ``qi`` against every member of its candidate cluster ``ki``, measured
    directly; ``clusters``: ``(order, starts, size)`` of the references' clusters;
    ``found = (best, bidx)`` updated in place (smallest distance, then smallest
    reference index), in slices of about :data:`_PAIR_ROWS` pairs."""
    order, starts, size = clusters
    best, bidx = found
    cnt = size[ki]
    ends = np.cumsum(cnt)
    s0 = 0
    while s0 < len(qi):
        base = ends[s0 - 1] if s0 else 0
        s1 = max(s0 + 1, int(np.searchsorted(ends, base + _PAIR_ROWS, "right")))
        c = cnt[s0:s1]
        seg = np.cumsum(c) - c
        mi = order[np.repeat(starts[ki[s0:s1]] - seg, c) + np.arange(int(c.sum()))]
        qq = np.repeat(qi[s0:s1], c)
        s0 = s1
        d = pair_distance_at(q, qq, r, mi)
        o = np.lexsort((mi, d, qq))
        qq, mi, d = qq[o], mi[o], d[o]
        first = np.ones(len(qq), dtype=bool)
        first[1:] = qq[1:] != qq[:-1]
        qq, mi, d = qq[first], mi[first], d[first]
        better = (d < best[qq]) | ((d == best[qq]) & (mi < bidx[qq]))
        best[qq[better]], bidx[qq[better]] = d[better], mi[better]
