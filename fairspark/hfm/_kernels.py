"""Numpy kernels of the HFM audit (METHODS §1).

These plain functions are what the unit tests call without Spark and what the pandas
UDFs of :mod:`fairspark.hfm._spark` run unchanged on each partition.

Conventions
-----------
- A *point* is a row ``[t, x_1 .. x_nx]`` where ``t`` is the label (for D) or the
  prediction (for D_f).
- ``codes`` is an integer group code per point; the "other group" of a point is every
  point whose code differs (binary view: codes 0/1; ``any_other_value``: one code per
  value).
- Every distance that is reported is computed directly as
  ``sqrt(sum((a - b) ** 2))`` (never through ``|a|^2 + |b|^2 - 2ab``, which loses about
  1e-8 near 0).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "approx_dist_numpy",
    "default_m2",
    "exact_nn_numpy",
    "hfm_df",
    "nn_other_group",
    "nn_other_group_clustered",
    "nn_other_group_refclustered",
    "pair_distance",
    "project",
    "query_clusters",
    "sample_projections",
    "window_scan",
]

_EPS = np.finfo(np.float64).eps
#: number of doubles one temporary block may hold (bounds memory per task)
_BLOCK_DOUBLES = 2_000_000


def default_m2(n: int) -> int:
    """The paper's default ``m2 = ceil(2 * log10(n))`` (at least 1).

    Parameters
    ----------
    n : int
        Number of points.

    Returns
    -------
    int
    """
    if n <= 1:
        return 1
    return max(1, math.ceil(2.0 * math.log10(n)))


def sample_projections(*, dim: int, m1: int, sampler: str, seed: int) -> np.ndarray:
    """Draw ``m1`` projection vectors ``w`` in ``R^dim`` with ``sum |w_i| = 1``.

    Parameters
    ----------
    dim : int
        ``1 + nx`` (label/prediction coordinate first).
    m1 : int
        Number of projections.
    sampler : {"uniform_l1", "reference_sequential"}
        ``uniform_l1``: uniform on the L1 unit sphere (exponential magnitudes, random
        signs, normalised). ``reference_sequential``: the authors' stick-breaking draw
        (``w_i ~ U(-t, t)``, ``t -= |w_i|``, last coordinate = the remainder ``t``).
    seed : int
        Seed of the generator.

    Returns
    -------
    numpy.ndarray
        Shape ``(m1, dim)``.
    """
    rng = np.random.default_rng(seed)
    if sampler == "uniform_l1":
        mag = rng.exponential(1.0, size=(m1, dim))
        sign = rng.choice(np.array([-1.0, 1.0]), size=(m1, dim))
        w = sign * mag / mag.sum(axis=1, keepdims=True)
    elif sampler == "reference_sequential":
        w = np.empty((m1, dim))
        for j in range(m1):
            t = 1.0
            for i in range(dim - 1):
                w[j, i] = rng.uniform(-t, t)
                t -= abs(w[j, i])
            w[j, dim - 1] = t
    else:
        raise ValueError(
            f"unknown sampler {sampler!r}; expected 'uniform_l1' or 'reference_sequential'"
        )
    return w


def project(points: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Project points on ``w`` with a fixed summation order.

    ``g = t * w_0 + (((0 + x_1 w_1) + x_2 w_2) + ...)``: the same order the Spark SQL
    expression of :mod:`fairspark.hfm._spark.approx` uses, so both give identical bits and the
    same sort order.

    Parameters
    ----------
    points : numpy.ndarray
        Shape ``(n, dim)``.
    w : numpy.ndarray
        Shape ``(dim,)``.

    Returns
    -------
    numpy.ndarray
        Shape ``(n,)``.
    """
    points = np.asarray(points, dtype=np.float64)
    s = np.zeros(points.shape[0])
    for k in range(1, points.shape[1]):
        s = s + points[:, k] * w[k]
    return points[:, 0] * w[0] + s


def _rows(a: np.ndarray) -> np.ndarray:
    """``a`` as float64 rows without a copy when each row is contiguous (a view of some
    columns of a wider matrix, e.g. the label's points ``[y, x]`` of ``[yp, y, x]``);
    otherwise a contiguous copy. The kernels read rows, blocks of rows and BLAS
    products of them, which take such views as they are (same values, same results)."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 2 and a.strides[1] == 8 and a.strides[0] >= 8 * a.shape[1] >= 0:
        return a
    return np.ascontiguousarray(a)


def _nonzero2(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.nonzero`` of a 2-D mask (same indices, same row-major order), by the flat
    positions: several times faster on the kernels' sparse candidate masks (numpy
    builds 2-D indices element by element)."""
    flat = np.flatnonzero(mask)
    return np.divmod(flat, mask.shape[1]) if mask.shape[1] else (flat, flat)


def pair_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclidean distance computed directly, row by row (broadcasting)."""
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return np.sqrt(np.sum(diff * diff, axis=-1))


def _pair_distance_at(a: np.ndarray, ai: np.ndarray | None, b: np.ndarray,
                      bi: np.ndarray) -> np.ndarray:
    """``pair_distance(a[ai], b[bi])`` (``ai`` ``None``: every row of ``a``) with the
    same operations on the same contiguous rows, so the same bits, but from two gathers
    and in-place steps: one temporary instead of four (half the time of the candidate
    measurements at d = 57, which read each gathered row once)."""
    # fancy indexing, not np.take: take is element by element on row views
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    diff = np.array(a) if ai is None else a[ai]
    diff -= b[bi]
    np.multiply(diff, diff, out=diff)
    return np.sqrt(np.add.reduce(diff, axis=-1))


def window_scan(
    points: np.ndarray,
    codes: np.ndarray,
    *,
    m2: int,
    anchor_mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """AcceleDist lines 3-11 on points already sorted by projection.

    For every anchor, walk left and right in the given order; points with the anchor's
    own code are skipped and do not count; stop after ``m2`` other-group points on each
    side or at the end of the array. The anchor's value is the smallest distance seen.

    Parameters
    ----------
    points : numpy.ndarray
        Shape ``(n, dim)``, sorted by projection (ties broken by row key).
    codes : numpy.ndarray
        Integer group code of each point, shape ``(n,)``.
    m2 : int
        Number of other-group points looked at on each side.
    anchor_mask : numpy.ndarray of bool, optional
        Which points are anchors (halo rows are neighbours only). Default: all.

    Returns
    -------
    dist : numpy.ndarray
        ``d_i`` per point (``inf`` for non-anchors or when no other-group point exists).
    nb : numpy.ndarray
        Index of the neighbour realising ``d_i`` (-1 where none).
    """
    points = np.ascontiguousarray(points, dtype=np.float64)
    codes = np.asarray(codes)
    n = codes.shape[0]
    if anchor_mask is None:
        anchor_mask = np.ones(n, dtype=bool)
    dist = np.full(n, np.inf)
    nb = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return dist, nb
    pos = np.arange(n)
    for c in np.unique(codes[anchor_mask]):
        other = pos[codes != c]
        anchors = pos[(codes == c) & anchor_mask]
        if other.size == 0 or anchors.size == 0:
            continue
        _scan_code(points, anchors, other, m2=m2, dist=dist, nb=nb)
    return dist, nb


def _scan_code(
    points: np.ndarray, anchors: np.ndarray, other: np.ndarray, *, m2: int,
    dist: np.ndarray, nb: np.ndarray,
) -> None:
    """:func:`window_scan` for the anchors of one code; fills ``dist`` and ``nb`` in place.

    ``anchors`` and ``other`` are sorted positions (anchors of the code, points of every
    other code); the anchors are done in chunks that bound the temporary memory.
    """
    offs = np.arange(-m2, m2)
    dim = max(1, points.shape[1])
    chunk = max(1, _BLOCK_DOUBLES // (2 * m2 * dim))
    k = np.searchsorted(other, anchors)  # other-group points strictly left of each anchor
    for s in range(0, anchors.size, chunk):
        a = anchors[s : s + chunk]
        ci = k[s : s + chunk, None] + offs[None, :]
        valid = (ci >= 0) & (ci < other.size)
        cand = other[np.clip(ci, 0, other.size - 1)]
        d = pair_distance(points[a][:, None, :], points[cand])
        d[~valid] = np.inf
        j = np.argmin(d, axis=1)
        r = np.arange(a.size)
        dist[a] = d[r, j]
        nb[a] = np.where(np.isfinite(d[r, j]), cand[r, j], -1)


def nn_other_group(
    queries: np.ndarray,
    qcodes: np.ndarray,
    refs: np.ndarray,
    rcodes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact distance from each query to the nearest reference of another group.

    Blocked brute force: the ``|q|^2 + |r|^2 - 2 q.r`` shortcut only selects candidates
    (everything within its rounding bound of the block minimum); the distances of the
    candidates are then recomputed directly, so the result is exact to rounding of the
    direct formula. Ties go to the smallest reference index.

    Parameters
    ----------
    queries, refs : numpy.ndarray
        Shapes ``(q, dim)`` and ``(r, dim)``.
    qcodes, rcodes : numpy.ndarray
        Integer group codes.

    Returns
    -------
    dist : numpy.ndarray
        Shape ``(q,)``; ``inf`` where no reference of another group exists.
    idx : numpy.ndarray
        Index into ``refs`` of the nearest one (-1 where none).
    """
    q, r = _rows(queries), _rows(refs)
    qcodes = np.asarray(qcodes)
    rcodes = np.asarray(rcodes)
    nq, nr = q.shape[0], r.shape[0]
    best = np.full(nq, np.inf)
    bidx = np.full(nq, -1, dtype=np.int64)
    if nq == 0 or nr == 0:
        return best, bidx
    qu = np.unique(qcodes)
    if len(qu) <= 8:
        # per query code: only the references of other codes (no masked work)
        rn = np.sum(r * r, axis=1)
        for c in qu:
            qs = np.flatnonzero(qcodes == c)
            rs = np.flatnonzero(rcodes != c)
            if rs.size == 0:
                continue
            d, i = _nn_plain(q, r[rs], rn[rs], rows=qs)
            best[qs] = d
            bidx[qs] = np.where(i >= 0, rs[np.maximum(i, 0)], -1)
        return best, bidx
    dim = q.shape[1]
    qn = np.sum(q * q, axis=1)
    rn = np.sum(r * r, axis=1)
    bq = max(1, min(nq, 1024))
    br = max(1, _BLOCK_DOUBLES // bq)
    coef = 4.0 * (dim + 4) * _EPS
    for qs in range(0, nq, bq):
        qsl = slice(qs, qs + bq)
        for rs in range(0, nr, br):
            rsl = slice(rs, rs + br)
            qi, ri, d = _nn_block(q[qsl], qn[qsl], qcodes[qsl], r[rsl], rn[rsl], rcodes[rsl],
                                  coef=coef)
            gq = qi + qs
            better = d < best[gq]
            best[gq[better]] = d[better]
            bidx[gq[better]] = ri[better] + rs
    return best, bidx


#: grid cell of the cluster proposal (in feature units; min-max scaled features)
CLUSTER_CELL = 0.05
#: grid offset (in cells): 0/1 values (one-hot, min-max ends) sit mid-cell, not on an edge
_CELL_OFFSET = 0.37
#: the clustered search runs when the queries form at most this fraction of clusters
_CLUSTER_GAIN = 0.5
#: rows (query, candidate) measured at a time by the clustered search
_PAIR_ROWS = 1 << 14


def _clusters(q: np.ndarray, qcodes: np.ndarray, cell: float) -> tuple[np.ndarray, np.ndarray]:
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
    step = max(1, _BLOCK_DOUBLES // max(1, dim))
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
    q, r = _rows(queries), _rows(refs)
    qcodes, rcodes = np.asarray(qcodes), np.asarray(rcodes)
    nq, nr = q.shape[0], r.shape[0]
    if nq < 8 or nr == 0 or q.shape[1] == 0:
        return nn_other_group(q, qcodes, r, rcodes)
    order, starts = clusters[:2] if clusters is not None else _clusters(q, qcodes, cell)
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
                   cell: float = CLUSTER_CELL) -> tuple[np.ndarray, ...]:
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
    p = _rows(points)
    order, starts = _clusters(p, np.asarray(codes), cell)
    if len(starts) - 1 > _CLUSTER_GAIN * len(p):
        # too many clusters: the searches take their plain path and never read the radii
        return order, starts, None, None
    size = np.diff(starts)
    rad, delta = _cluster_radii(p, order, starts, size, order[starts[:-1]])
    return order, starts, rad, delta


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
        dl = _pair_distance_at(q, order[pos], q, np.repeat(rep[cl], cnt))
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
    coef = 4.0 * (q.shape[1] + 4) * _EPS
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
        bq = max(1, min(len(cl), _BLOCK_DOUBLES // max(1, len(rr))))
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
            ci, ri = _nonzero2(sq <= (reach ** 2 + tol[clb])[:, None])
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
        d = _pair_distance_at(q, mem[mj], r, ri)
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
    searches against the whole table): each query is compared with every cluster's
    representative ``c`` (one BLAS product); the closest one bounds ``nn(q)`` from
    above, and a cluster of radius ``R`` can hold a nearest reference only when
    ``d(q, c) - R`` is not above that bound (triangle inequality; a relative margin and
    the rounding bound of the norm shortcut on top). Only the members of those
    clusters are measured, directly, ties to the smallest reference index: the
    distances and indices are those of :func:`nn_other_group`, bit for bit. When the
    references do not cluster (more than half as many clusters as references), this is
    :func:`nn_other_group`.

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
    q, r = _rows(queries), _rows(refs)
    qcodes, rcodes = np.asarray(qcodes), np.asarray(rcodes)
    nq, nr = q.shape[0], r.shape[0]
    if nq == 0 or nr < 8 or q.shape[1] == 0:
        return nn_other_group(q, qcodes, r, rcodes)
    order, starts = clusters[:2] if clusters is not None else _clusters(r, rcodes, cell)
    n_cl = len(starts) - 1
    if n_cl > _CLUSTER_GAIN * nr:
        return nn_other_group(q, qcodes, r, rcodes)
    size = np.diff(starts)
    rep = order[starts[:-1]]
    rad = (clusters[2] if clusters is not None and len(clusters) > 2
           and clusters[2] is not None else _cluster_radii(r, order, starts, size, rep)[0])
    ccode = rcodes[rep]
    qn = np.sum(q * q, axis=1)
    cn = np.sum(r[rep] ** 2, axis=1)
    coef = 4.0 * (q.shape[1] + 4) * _EPS
    # the shortcut is computed for the representatives only: their norms bound its error
    tol = 2.0 * coef * (qn + float(cn.max())) + 1e-300
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
        bq = max(1, min(len(qs_all), _BLOCK_DOUBLES // len(reps)))
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
            qi, ki = _nonzero2(lb <= (ub * (1.0 + 1e-9))[:, None])
            if ks is not None:
                ki = ks[ki]
            _measure_clusters(q, r, qs[qi], ki, (order, starts, size), (best, bidx))
    return best, bidx


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
        d = _pair_distance_at(q, qq, r, mi)
        o = np.lexsort((mi, d, qq))
        qq, mi, d = qq[o], mi[o], d[o]
        first = np.ones(len(qq), dtype=bool)
        first[1:] = qq[1:] != qq[:-1]
        qq, mi, d = qq[first], mi[first], d[first]
        better = (d < best[qq]) | ((d == best[qq]) & (mi < bidx[qq]))
        best[qq[better]], bidx[qq[better]] = d[better], mi[better]


#: float32 rounding unit (the prefilter's products)
_EPS32 = float(np.finfo(np.float32).eps)
#: the float32 prefilter is used while squared norms stay far from float32's range
_F32_MAX_NORM = 1e30
#: a float32 block with more candidates than this per query is redone in float64
_F32_MAX_CAND = 8
#: after a float32 block with more candidates than this per query (a wide table of fine
#: steps: measuring them costs what float32 saved), the next blocks are float64
_F32_KEEP_CAND = 4


def _nn_plain(q: np.ndarray, r: np.ndarray, rn: np.ndarray,
              rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest reference of each query (no groups), ties to the smallest index.

    ``rn``: squared norms of ``r``; ``rows``: the queries to search (indices into ``q``;
    default all), gathered a block at a time (no copy of the whole query set).

    The shortcut ``|r|^2 - 2 q.r`` (the query's own norm does not change the order) is
    one product of ``[q, 1]`` and ``[-2 r, |r|^2]``, in float32 (twice BLAS's float64
    speed, half the memory traffic); it only *selects* candidates, everything within
    its rounding bound of the block minimum, and those are measured directly in
    float64, so the result is the float64 direct formula's, bit for bit. The bound:
    rounding ``q``, ``r`` and ``|r|^2`` to float32 and the product's own error move an
    entry by at most ``e = (dim + 3) eps32 (|q|^2 + max |r|^2)`` (with
    ``gamma_{dim+1}`` for the dot product of ``dim + 1`` terms whose absolute sum is at
    most ``|q|^2 + 2 |r|^2``). The entry of the float32 minimum gives a reference whose
    direct distance ``d0`` is measured; the nearest reference has ``|r|^2 - 2 q.r <=
    d0^2 - |q|^2``, so its entry is at most ``d0^2 - |q|^2 + e`` (with ``1.25 e`` and
    float64's rounding of ``d0^2 - |q|^2`` on top): the candidates. A block whose bound
    lets through more than :data:`_F32_MAX_CAND` candidates per query (features far
    from the origin) is redone in float64 with its own bound (:func:`_plain_f64`), and
    after a block with more than :data:`_F32_KEEP_CAND` per query the next ones are.
    """
    nq = q.shape[0] if rows is None else len(rows)
    nr, dim = r.shape
    best = np.full(nq, np.inf)
    bidx = np.full(nq, -1, dtype=np.int64)
    if nq == 0 or nr == 0:
        return best, bidx
    bq = max(1, min(nq, 1024))
    br = max(1, _BLOCK_DOUBLES // bq)
    rmax = float(rn.max())
    f32 = rmax < _F32_MAX_NORM
    ra = np.empty((nr, dim + 1), dtype=np.float32 if f32 else np.float64)
    np.multiply(r, -2.0, out=ra[:, :dim], casting="same_kind")
    ra[:, dim] = rn
    ra64 = None
    qa = np.empty((bq, dim + 1), dtype=ra.dtype)
    qa[:, dim] = 1.0
    qb = np.empty((bq, dim))
    for qs in range(0, nq, bq):
        m_q = min(bq, nq - qs)
        qv = qb[:m_q]
        qv[...] = q[qs:qs + m_q] if rows is None else q[rows[qs:qs + m_q]]
        qa[:m_q, :dim] = qv
        qn = np.einsum("ij,ij->i", qv, qv)
        for rs in range(0, nr, br):
            re = min(nr, rs + br)
            cand = None
            if f32 and float(qn.max()) < _F32_MAX_NORM:
                s = qa[:m_q] @ ra[rs:re].T
                # the float32 minimum's own distance d0 (direct): a reference can be
                # the nearest only when its entry is within the bound of d0^2 - |q|^2
                j0 = s.argmin(axis=1)
                d0 = _pair_distance_at(qv, None, r, rs + j0)
                d0 *= d0
                thr = (d0 - qn + 1.25 * (dim + 4) * _EPS32 * (qn + rmax)
                       + 8.0 * (dim + 4) * _EPS * (qn + rmax + d0))
                cand = _nonzero2(s <= thr[:, None])
                f32 = len(cand[0]) <= _F32_KEEP_CAND * m_q + 16
                if len(cand[0]) > _F32_MAX_CAND * m_q:
                    cand = None
                else:  # the minimum itself, whatever the rounding of thr
                    cand = (np.r_[cand[0], np.arange(m_q)], np.r_[cand[1], j0])
            if cand is None:
                if ra64 is None:
                    ra64 = np.empty((nr, dim + 1))
                    np.multiply(r, -2.0, out=ra64[:, :dim])
                    ra64[:, dim] = rn
                cand = _plain_f64(qv, qn, ra64[rs:re], rmax)
            qi, ri = cand
            d = _pair_distance_at(qv, qi, r, rs + ri)
            order = np.lexsort((ri, d, qi))
            qi, ri, d = qi[order], ri[order], d[order]
            first = np.ones(qi.size, dtype=bool)
            first[1:] = qi[1:] != qi[:-1]
            qi, ri, d = qi[first], ri[first] + rs, d[first]
            gq = qi + qs
            better = d < best[gq]
            best[gq[better]] = d[better]
            bidx[gq[better]] = ri[better]
    return best, bidx


def _plain_f64(qv: np.ndarray, qn: np.ndarray, ra: np.ndarray,
               rmax: float) -> tuple[np.ndarray, np.ndarray]:
    """Candidates of :func:`_nn_plain`'s float64 product (``ra``: ``[-2 r, |r|^2]``):
    its error is below ``1.5 (dim + 1) eps (|q|^2 + max |r|^2)``, the tolerance more
    than twice that."""
    dim = qv.shape[1]
    tol = 8.0 * (dim + 4) * _EPS * (qn + rmax) + 1e-300
    s = qv @ ra[:, :dim].T
    s += ra[:, dim][None, :]
    return _nonzero2(s <= (s.min(axis=1) + tol)[:, None])


def _nn_block(
    qb: np.ndarray, qnb: np.ndarray, qcb: np.ndarray, rb: np.ndarray, rnb: np.ndarray,
    rcb: np.ndarray, *, coef: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nearest other-group reference of each query within one (query, reference) block.

    ``qnb``/``rnb`` are the squared norms and ``coef`` the relative rounding bound of the
    norm shortcut. Returns block-local query indices, reference indices and direct
    distances (only queries with a candidate; ties to the smallest reference index).
    """
    s = qnb[:, None] + rnb[None, :] - 2.0 * (qb @ rb.T)
    same = qcb[:, None] == rcb[None, :]
    s[same] = np.inf
    m = s.min(axis=1)
    tol = coef * (qnb + rnb.max()) + 1e-300
    cand = s <= (m + 2.0 * tol)[:, None]
    cand &= ~same
    qi, ri = _nonzero2(cand)
    if qi.size == 0:
        return qi, ri, np.zeros(0)
    d = _pair_distance_at(qb, qi, rb, ri)
    # per query: smallest distance, then smallest reference index
    order = np.lexsort((ri, d, qi))
    qi, ri, d = qi[order], ri[order], d[order]
    first = np.ones(qi.size, dtype=bool)
    first[1:] = qi[1:] != qi[:-1]
    return qi[first], ri[first], d[first]


def exact_nn_numpy(points: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact nearest-other-group distance of every point (single machine).

    Parameters
    ----------
    points : numpy.ndarray
        Shape ``(n, dim)``.
    codes : numpy.ndarray
        Integer group codes.

    Returns
    -------
    dist, idx : numpy.ndarray
        ``nn(p)`` and the index of the nearest other-group point.
    """
    return nn_other_group(points, codes, points, codes)


def approx_dist_numpy(
    points: np.ndarray,
    codes: np.ndarray,
    projections: np.ndarray,
    *,
    m2: int,
    keys: np.ndarray | None = None,
) -> dict[str, object]:
    """Single-machine ApproxDist (Alg. 1-2) plus the pointwise variant.

    Parameters
    ----------
    points : numpy.ndarray
        Shape ``(n, dim)``.
    codes : numpy.ndarray
        Integer group codes.
    projections : numpy.ndarray
        Shape ``(m1, dim)``, e.g. from :func:`sample_projections`.
    m2 : int
        Window size per side.
    keys : numpy.ndarray, optional
        Row keys breaking ties of the projection (default: the row index).

    Returns
    -------
    dict
        ``approx`` (min over projections of the max), ``pointwise`` (max over points of
        the min over projections), ``approx_avg`` (min over projections of the mean),
        ``per_point`` (min over projections per point), ``per_projection`` (max per
        projection).
    """
    points = np.asarray(points, dtype=np.float64)
    n = points.shape[0]
    if keys is None:
        keys = np.arange(n)
    per_point = np.full(n, np.inf)
    maxes, means = [], []
    for w in projections:
        g = project(points, w)
        order = np.lexsort((keys, g))
        d, _ = window_scan(points[order], np.asarray(codes)[order], m2=m2)
        dd = np.empty(n)
        dd[order] = d
        per_point = np.minimum(per_point, dd)
        maxes.append(float(dd.max()))
        means.append(float(dd.mean()))
    return {
        "approx": min(maxes),
        "pointwise": float(per_point.max()),
        "approx_avg": min(means),
        "per_point": per_point,
        "per_projection": np.array(maxes),
    }


def hfm_df(d: float, d_f: float) -> float:
    """``df = D_f / D - 1`` with ``0/0 -> 0`` and ``D = 0 < D_f -> +inf`` (METHODS §1).

    Parameters
    ----------
    d, d_f : float
        The distances for labels and predictions.

    Returns
    -------
    float
    """
    if d == 0.0:
        return 0.0 if d_f == 0.0 else math.inf
    return d_f / d - 1.0
