"""Exact nearest other-group search of the HFM audit (Bian and Luo, 2024): the plain kernels.

:func:`nn_other_group` is a blocked brute force whose norm shortcut only *selects*
candidates, which are then measured directly (:func:`pair_distance`,
:func:`pair_distance_at`), so every distance is the direct formula's; :func:`_nn_plain`
is its float32-prefiltered search without groups. The clustered searches
(:mod:`fairspark.hfm._nn_clustered`) and the window scans
(:mod:`fairspark.hfm._kernels`, which re-exports everything here) build on these.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BLOCK_DOUBLES", "EPS", "as_rows", "exact_nn_numpy", "nn_other_group", "nonzero2",
           "pair_distance", "pair_distance_at"]


EPS = np.finfo(np.float64).eps
#: number of doubles one temporary block may hold (bounds memory per task)
BLOCK_DOUBLES = 2_000_000


def as_rows(a: np.ndarray) -> np.ndarray:
    """``a`` as float64 rows without a copy when each row is contiguous (a view of some
    columns of a wider matrix, e.g. the label's points ``[y, x]`` of ``[yp, y, x]``);
    otherwise a contiguous copy. The kernels read rows, blocks of rows and BLAS
    products of them, which take such views as they are (same values, same results)."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 2 and a.strides[1] == 8 and a.strides[0] >= 8 * a.shape[1] >= 0:
        return a
    return np.ascontiguousarray(a)


def nonzero2(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.nonzero`` of a 2-D mask (same indices, same row-major order), by the flat
    positions: several times faster on the kernels' sparse candidate masks (numpy
    builds 2-D indices element by element)."""
    flat = np.flatnonzero(mask)
    return np.divmod(flat, mask.shape[1]) if mask.shape[1] else (flat, flat)


def pair_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclidean distance computed directly, row by row (broadcasting)."""
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return np.sqrt(np.sum(diff * diff, axis=-1))


def pair_distance_at(a: np.ndarray, ai: np.ndarray | None, b: np.ndarray,
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
    q, r = as_rows(queries), as_rows(refs)
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
    br = max(1, BLOCK_DOUBLES // bq)
    coef = 4.0 * (dim + 4) * EPS
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
    br = max(1, BLOCK_DOUBLES // bq)
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
                d0 = pair_distance_at(qv, None, r, rs + j0)
                d0 *= d0
                thr = (d0 - qn + 1.25 * (dim + 4) * _EPS32 * (qn + rmax)
                       + 8.0 * (dim + 4) * EPS * (qn + rmax + d0))
                cand = nonzero2(s <= thr[:, None])
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
            _keep_nearer(best, bidx, qv=qv, cand=cand, r=r, rs=rs, qs=qs)
    return best, bidx


def _keep_nearer(best: np.ndarray, bidx: np.ndarray, *, qv: np.ndarray,
                 cand: tuple[np.ndarray, np.ndarray], r: np.ndarray, rs: int,
                 qs: int) -> None:
    """Measure the candidate pairs ``cand`` (query, reference within the block that
    starts at ``rs``) directly in float64 and keep, per query, the nearest (ties to the
    smallest index) where it beats ``best`` (queries offset by ``qs``), in place."""
    qi, ri = cand
    d = pair_distance_at(qv, qi, r, rs + ri)
    order = np.lexsort((ri, d, qi))
    qi, ri, d = qi[order], ri[order], d[order]
    first = np.ones(qi.size, dtype=bool)
    first[1:] = qi[1:] != qi[:-1]
    qi, ri, d = qi[first], ri[first] + rs, d[first]
    gq = qi + qs
    better = d < best[gq]
    best[gq[better]] = d[better]
    bidx[gq[better]] = ri[better]


def _plain_f64(qv: np.ndarray, qn: np.ndarray, ra: np.ndarray,
               rmax: float) -> tuple[np.ndarray, np.ndarray]:
    """Candidates of :func:`_nn_plain`'s float64 product (``ra``: ``[-2 r, |r|^2]``):
    its error is below ``1.5 (dim + 1) eps (|q|^2 + max |r|^2)``, the tolerance more
    than twice that."""
    dim = qv.shape[1]
    tol = 8.0 * (dim + 4) * EPS * (qn + rmax) + 1e-300
    s = qv @ ra[:, :dim].T
    s += ra[:, dim][None, :]
    return nonzero2(s <= (s.min(axis=1) + tol)[:, None])


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
    qi, ri = nonzero2(cand)
    if qi.size == 0:
        return qi, ri, np.zeros(0)
    d = pair_distance_at(qb, qi, rb, ri)
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
