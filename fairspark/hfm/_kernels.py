"""Numpy kernels of the HFM audit (Bian and Luo, 2024).

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

This module holds the projections, the window scans of ApproxDist and ``df``; the
exact nearest other-group searches are in :mod:`fairspark.hfm._nn` (plain) and
:mod:`fairspark.hfm._nn_clustered` (clustered), and importable from here too.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from fairspark.hfm._nn import (
    _BLOCK_DOUBLES,
    exact_nn_numpy,
    nn_other_group,
    pair_distance,
)
from fairspark.hfm._nn_clustered import (
    nn_other_group_clustered,
    nn_other_group_refclustered,
    query_clusters,
)

__all__ = [
    "approx_dist_numpy",
    "default_m2",
    "exact_mean",
    "exact_nn_numpy",
    "fixed_parts",
    "fold_part",
    "hfm_df",
    "nn_other_group",
    "nn_other_group_clustered",
    "nn_other_group_refclustered",
    "pair_distance",
    "part_mean",
    "project",
    "query_clusters",
    "sample_projections",
    "value_part",
    "window_scan",
    "witness",
]


#: a mean's values are summed as whole multiples of ``2**-60``, in two integer parts of
#: ``2**30`` each (:func:`fixed_parts`): integer sums are exact in any order, so the mean
#: has the same bits whether numpy on the driver or Spark's tasks sum the rows
FIX_BITS = 30
#: values at or above this magnitude are left out of the integer sums (a sum of them
#: could overflow 64 bits): their mean is the plain floating sum's
FIX_LIMIT = float(1 << 31)


def fixed_parts(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``v`` as ``(hi + lo * 2**-30) * 2**-30`` with integer ``hi`` and ``lo`` (the bits
    below ``2**-60`` dropped; every step is exact in floating point)."""
    s = np.asarray(v, dtype=np.float64) * float(1 << FIX_BITS)
    hi = np.floor(s)
    lo = np.floor((s - hi) * float(1 << FIX_BITS))
    return hi.astype(np.int64), lo.astype(np.int64)


def exact_mean(hi_sum: int, lo_sum: int, weight: int) -> float:
    """The weighted mean from the integer sums of :func:`fixed_parts` (each part times
    its row's weight) and the sum of weights, rounded once."""
    if weight <= 0:
        return math.nan
    return float(Fraction(int(hi_sum) * (1 << FIX_BITS) + int(lo_sum),
                          (1 << (2 * FIX_BITS)) * int(weight)))


def bin_counts(v: np.ndarray, top: float, bins: int,
               weights: np.ndarray | None = None) -> np.ndarray:
    """Rows (or their ``weights``) per bin of ``v`` over ``[0, top]`` in ``bins`` equal
    bins, the last one closed and taking every value past ``top`` (a ``top`` of 0 read
    as 1): the histograms of HFM's per-row distances, on the driver and in Spark tasks."""
    b = np.minimum(np.floor(np.asarray(v, dtype=np.float64) / (top if top > 0 else 1.0)
                            * bins), bins - 1).astype(np.int64)
    return np.bincount(b, weights=weights, minlength=bins)


def missing_first(v: object) -> tuple[bool, str]:
    """A key's place in pandas' and Spark's ascending order, a missing one first (the
    order that picks a witness among rows at the maximum)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return False, ""
    return True, str(v)


def _witness_order(w: tuple) -> tuple:
    return (*missing_first(w[0]), *missing_first(w[1]))


def witness(keys: object, nb_keys: object) -> tuple:
    """The witness ``(key, nb_key)`` among rows at a maximum: the smallest key, then
    neighbour key, a missing one first (:func:`missing_first`)."""
    return min(zip(keys, nb_keys, strict=True), key=_witness_order)


def value_part(v: np.ndarray, w: np.ndarray) -> dict:
    """The order-free sums of values ``v`` with integer weights ``w``, to be folded
    (:func:`fold_part`) and read (:func:`part_mean`) on the driver and in Spark tasks:
    the maximum ``D``, the weight ``ws``, the weighted integer sums ``hs``, ``ls`` of
    :func:`fixed_parts` of the values below :data:`FIX_LIMIT`, their plain weighted sum
    ``vs`` and whether a value reached the limit (``any_big``; NaN and inf count)."""
    v = np.asarray(v, dtype=np.float64)
    w = np.asarray(w, dtype=np.int64)
    small = np.abs(v) < FIX_LIMIT  # false for inf and NaN
    hi, lo = fixed_parts(v[small])
    ws = w[small]
    # int64 sums wrap silently past 2**63 (values near 2**31, or many rows of unscaled
    # distances): where a float bound of the sums of |hi| * w and lo * w (below
    # (|v| + 1) * 2**30 per unit of weight) reaches 2**62, exact Python integers (slow,
    # and rare: the audit's scaled features keep distances small)
    wf = np.abs(ws).astype(np.float64)
    if (float(np.abs(v[small]) @ wf) + float(wf.sum())) * float(1 << FIX_BITS) >= 2.0**62:
        hi, lo, ws = hi.astype(object), lo.astype(object), ws.astype(object)
    return {"D": float(v.max()), "ws": int(w.sum()), "hs": int((hi * ws).sum()),
            "ls": int((lo * ws).sum()), "vs": float((v * w).sum()),
            "any_big": not bool(small.all())}


def fold_part(acc: dict, part: dict) -> None:
    """Add the part ``part`` (:func:`value_part`, with its witness ``w`` of the maximum
    when it has one) into ``acc``: the sums add up, the larger maximum and its witness
    win, and at an equal maximum the smaller witness (:func:`witness`)."""
    if not acc:
        acc.update(part)
        return
    if part["D"] > acc["D"]:
        acc["D"] = part["D"]
        if "w" in part:
            acc["w"] = part["w"]
    elif part["D"] == acc["D"] and "w" in part:
        acc["w"] = min(acc["w"], part["w"], key=_witness_order)
    for name in ("ws", "hs", "ls", "vs"):
        acc[name] += part[name]
    acc["any_big"] = acc["any_big"] or part["any_big"]


def part_mean(part: dict) -> float:
    """The weighted mean of a (folded) :func:`value_part`, the same bits in any row
    order and partitioning: the maximum when that is not finite, the plain floating mean
    when a value reached :data:`FIX_LIMIT`, else the exact mean of the integer sums."""
    top = part["D"]
    if not math.isfinite(top):
        return top
    if part["any_big"]:
        return part["vs"] / part["ws"]
    return exact_mean(part["hs"], part["ls"], part["ws"])


def fixed_mean(v: np.ndarray, w: np.ndarray) -> float:
    """Weighted mean of ``v`` with integer weights ``w`` with the same bits in any row
    order (:func:`part_mean` of one :func:`value_part`); NaN for no values."""
    if not len(v):
        return math.nan
    return part_mean(value_part(v, w))


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
    """``df = D_f / D - 1`` with ``0/0 -> 0`` and ``D = 0 < D_f -> +inf`` (Bian and Luo, 2024).

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
