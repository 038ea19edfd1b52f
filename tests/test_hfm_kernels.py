"""HFM numpy kernels against references written here (no Spark)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.distance import directed_hausdorff

from fairspark.hfm._kernels import (
    approx_dist_numpy,
    default_m2,
    exact_nn_numpy,
    hfm_df,
    nn_other_group,
    project,
    sample_projections,
    window_scan,
)


# ---------------------------------------------------------------- references
def brute_nn(points, codes):
    n = len(points)
    out = np.full(n, np.inf)
    for i in range(n):
        for j in range(n):
            if codes[i] != codes[j]:
                dim = points.shape[1]
                d = math.sqrt(sum((points[i][k] - points[j][k]) ** 2 for k in range(dim)))
                out[i] = min(out[i], d)
    return out


def seq_project(points, w):
    out = []
    for p in points:
        s = 0.0
        for k in range(1, len(p)):
            s = s + float(p[k]) * float(w[k])
        out.append(float(p[0]) * float(w[0]) + s)
    return out


def naive_accele_dist(points, codes, keys, w, m2):
    """Algorithm 2 written from the paper, loop by loop (returns the per-anchor d_i)."""
    g = seq_project(points, w)
    order = sorted(range(len(points)), key=lambda i: (g[i], keys[i]))
    d = {}
    for pos, i in enumerate(order):
        best = math.inf
        for step in (-1, 1):
            seen = 0
            p = pos + step
            while 0 <= p < len(order) and seen < m2:
                j = order[p]
                if codes[j] != codes[i]:
                    seen += 1
                    best = min(best, float(np.sqrt(np.sum((points[i] - points[j]) ** 2))))
                p += step
        d[i] = best
    return np.array([d[i] for i in range(len(points))])


def naive_approx_dist(points, codes, keys, W, m2):
    per = [naive_accele_dist(points, codes, keys, w, m2) for w in W]
    approx = min(p.max() for p in per)
    pointwise = np.min(np.vstack(per), axis=0).max()
    return approx, pointwise


def adversarial(rng, n, dim, *, n_codes=2, dup=True):
    pts = rng.integers(0, 3, size=(n, dim)).astype(float) / 2.0  # lots of ties
    pts[: n // 3] = rng.random((n // 3, dim))
    codes = rng.integers(0, n_codes, size=n)
    if dup:  # exact duplicates (same key: the same row twice)
        pts[-3:] = pts[:3]
        codes[-3:] = codes[:3]
    keys = np.array([f"k{i:05d}" for i in range(n)])
    if dup:
        keys[-3:] = keys[:3]
    return pts, codes, keys


# ---------------------------------------------------------------- tests
def test_default_m2():
    assert default_m2(100) == 4
    assert default_m2(1000) == 6
    assert default_m2(1001) == 7
    assert default_m2(1) == 1


@pytest.mark.parametrize("sampler", ["uniform_l1", "reference_sequential"])
def test_projections_have_unit_l1_norm(sampler):
    w = sample_projections(dim=7, m1=50, sampler=sampler, seed=3)
    assert w.shape == (50, 7)
    np.testing.assert_allclose(np.abs(w).sum(axis=1), 1.0, atol=1e-12)
    w2 = sample_projections(dim=7, m1=50, sampler=sampler, seed=3)
    np.testing.assert_array_equal(w, w2)


def test_reference_sequential_gives_label_half_the_mass():
    w = sample_projections(dim=20, m1=4000, sampler="reference_sequential", seed=1)
    assert abs(np.abs(w[:, 0]).mean() - 0.5) < 0.03
    u = sample_projections(dim=20, m1=4000, sampler="uniform_l1", seed=1)
    assert abs(np.abs(u[:, 0]).mean() - 1 / 20) < 0.01


def test_project_matches_sequential_sum_bitwise():
    rng = np.random.default_rng(0)
    pts = rng.random((50, 9))
    w = sample_projections(dim=9, m1=1, sampler="uniform_l1", seed=2)[0]
    assert project(pts, w).tolist() == seq_project(pts, w)


@pytest.mark.parametrize("n_codes", [2, 4])
def test_exact_nn_equals_brute_force_and_scipy(n_codes):
    rng = np.random.default_rng(11)
    pts, codes, _ = adversarial(rng, 120, 5, n_codes=n_codes)
    d, idx = exact_nn_numpy(pts, codes)
    ref = brute_nn(pts, codes)
    np.testing.assert_allclose(d, ref, rtol=0, atol=1e-12)
    # witness indices realise the distance and belong to another group
    assert np.all(codes[idx] != codes)
    np.testing.assert_allclose(np.linalg.norm(pts - pts[idx], axis=1), d, atol=1e-12)
    if n_codes == 2:
        a, b = pts[codes == 0], pts[codes == 1]
        D = max(directed_hausdorff(a, b)[0], directed_hausdorff(b, a)[0])
        assert abs(d.max() - D) < 1e-12


def test_exact_nn_near_zero_distances_are_exact():
    rng = np.random.default_rng(5)
    a = rng.random((40, 30)) * 1e3
    b = a + 1e-9  # the dot-product shortcut cannot resolve this
    pts = np.vstack([a, b])
    codes = np.r_[np.zeros(40, int), np.ones(40, int)]
    d, _ = exact_nn_numpy(pts, codes)
    ref = brute_nn(pts, codes)
    np.testing.assert_allclose(d, ref, rtol=1e-6, atol=0)


def test_nn_other_group_blocks_and_no_other_group():
    rng = np.random.default_rng(1)
    q = rng.random((7, 3))
    r = rng.random((5, 3))
    d, idx = nn_other_group(q, np.zeros(7, int), r, np.zeros(5, int))
    assert np.all(np.isinf(d)) and np.all(idx == -1)


@pytest.mark.parametrize("case", ["uniform", "ties", "far", "one_hot_wide"])
def test_nn_other_group_float32_selection_is_the_direct_minimum(case):
    """The float32 candidate selection (and its float64 redo for features far from the
    origin) gives each query the smallest direct distance, ties to the smallest
    reference index: against a double loop of the direct formula."""
    rng = np.random.default_rng({"uniform": 1, "ties": 2, "far": 3, "one_hot_wide": 4}[case])
    nq, nr, dim = (60, 80, 7) if case != "one_hot_wide" else (50, 70, 300)
    q, r = rng.random((nq, dim)), rng.random((nr, dim))
    if case == "ties":  # many equal distances: a half grid, and copies of queries
        q, r = np.round(q * 2) / 2, np.round(r * 2) / 2
        r[:10] = q[:10]
    if case == "far":  # the float32 bound is too loose here: the float64 redo
        q, r = q + 1e7, r + 1e7
    if case == "one_hot_wide":
        q, r = (q < 0.03).astype(float), (r < 0.03).astype(float)
        q[:, 0], r[:, 0] = rng.random(nq), rng.random(nr)
    qc, rc = rng.integers(0, 2, nq), rng.integers(0, 2, nr)
    d, idx = nn_other_group(q, qc, r, rc)
    for i in range(nq):
        dd = [math.inf if qc[i] == rc[j] else float(np.sqrt(np.sum((q[i] - r[j]) ** 2)))
              for j in range(nr)]
        j = int(np.argmin(dd))  # the first index at the minimum
        assert idx[i] == j and d[i] == dd[j]


@pytest.mark.parametrize(
    "n_codes,m2,dup", [(2, 1, True), (2, 3, True), (3, 2, True), (5, 4, False)]
)
def test_window_scan_equals_naive_algorithm(n_codes, m2, dup):
    rng = np.random.default_rng(100 + n_codes * 10 + m2)
    pts, codes, keys = adversarial(rng, 90, 4, n_codes=n_codes, dup=dup)
    W = sample_projections(dim=4, m1=6, sampler="uniform_l1", seed=9)
    got = approx_dist_numpy(pts, codes, W, m2=m2, keys=keys)
    approx, pointwise = naive_approx_dist(pts, codes, keys, W, m2)
    assert got["approx"] == pytest.approx(approx, rel=1e-12, abs=1e-12)
    assert got["pointwise"] == pytest.approx(pointwise, rel=1e-12, abs=1e-12)
    exact = brute_nn(pts, codes).max()
    assert exact - 1e-12 <= got["pointwise"] <= got["approx"] + 1e-12


def test_window_scan_group_of_one_and_anchor_mask():
    pts = np.array([[0.0], [1.0], [2.0], [3.0], [10.0]])
    codes = np.array([0, 0, 1, 0, 0])
    d, nb = window_scan(pts, codes, m2=1)
    np.testing.assert_allclose(d, [2.0, 1.0, 1.0, 1.0, 8.0])
    assert nb.tolist() == [2, 2, 1, 2, 2]
    d, nb = window_scan(pts, codes, m2=1, anchor_mask=np.array([0, 1, 0, 0, 0], bool))
    assert np.isinf(d[0]) and d[1] == 1.0 and nb[0] == -1


def test_hfm_df_edge_cases():
    assert hfm_df(0.0, 0.0) == 0.0
    assert hfm_df(0.0, 0.5) == math.inf
    assert hfm_df(2.0, 3.0) == pytest.approx(0.5)
    assert hfm_df(2.0, 1.0) == pytest.approx(-0.5)


def test_row_views_give_the_results_of_contiguous_copies():
    """The kernels take the label's points ``[y, x]`` as a view of ``[yp, y, x]`` rows
    (no copy): the distances and indices equal those of a contiguous copy, bit for bit,
    and the brute force's."""
    from scipy.spatial.distance import cdist

    from fairspark.hfm._kernels import (
        nn_other_group,
        nn_other_group_clustered,
        nn_other_group_refclustered,
        query_clusters,
    )

    rng = np.random.default_rng(7)
    base = rng.random((40, 6))
    P = base[rng.integers(0, 40, 3000)] + rng.normal(0, 1e-3, (3000, 6))
    codes = rng.integers(0, 3, 3000)
    view = P[:, 1:]
    assert not view.flags.c_contiguous
    copy = np.ascontiguousarray(view)
    refs, rcodes = copy[::7], codes[::7]
    d = cdist(copy, refs)
    d[codes[:, None] == rcodes[None, :]] = np.inf
    for fn in (nn_other_group, nn_other_group_clustered):
        dv, iv = fn(view, codes, refs, rcodes)
        dc, ic = fn(copy, codes, refs, rcodes)
        assert np.array_equal(dv, dc) and np.array_equal(iv, ic)
        np.testing.assert_allclose(dv, d.min(axis=1), rtol=0, atol=1e-12)
    cl = query_clusters(P, codes)
    dv, iv = nn_other_group_refclustered(refs, rcodes, view, codes, clusters=cl)
    dc, ic = nn_other_group_refclustered(refs, rcodes, copy, codes, clusters=cl)
    assert np.array_equal(dv, dc) and np.array_equal(iv, ic)
    np.testing.assert_allclose(dv, d.min(axis=0), rtol=0, atol=1e-12)


def test_gathered_pair_distances_are_the_direct_ones_bit_for_bit():
    """The candidate measurements gather rows and square in place: the same bits as
    ``pair_distance`` of the gathered rows, also on row views, and within rounding of
    the distance computed here in the plainest way."""
    from fairspark.hfm._kernels import pair_distance
    from fairspark.hfm._nn import pair_distance_at

    rng = np.random.default_rng(11)
    for dim in (3, 57, 400):
        P = rng.random((500, dim + 1))
        a, b = P[:, 1:], rng.random((300, dim))  # a: a row view of a wider matrix
        ai, bi = rng.integers(0, 500, 4000), rng.integers(0, 300, 4000)
        got = pair_distance_at(a, ai, b, bi)
        assert np.array_equal(got, pair_distance(a[ai], b[bi]))
        plain = np.array([np.sqrt(sum((x - y) ** 2 for x, y in zip(a[i], b[j], strict=True)))
                          for i, j in zip(ai[:50], bi[:50], strict=True)])
        np.testing.assert_allclose(got[:50], plain, rtol=1e-13, atol=0)
        assert np.array_equal(pair_distance_at(a[:300], None, b, np.arange(300)),
                              pair_distance(a[:300], b))
