"""Rows that repeat or cluster: one full search per cluster, the same result
as the plain search and as brute force (scipy's cdist), bit for bit."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from fairspark.hfm._kernels import (
    nn_other_group,
    nn_other_group_clustered,
    nn_other_group_refclustered,
    pair_distance,
    query_clusters,
)
from fairspark.hfm._nn_clustered import _grid_clusters


def _brute(q, qc, r, rc):
    d = cdist(q, r)
    d[np.asarray(qc)[:, None] == np.asarray(rc)[None, :]] = np.inf
    idx = np.where(np.isfinite(d).any(axis=1), d.argmin(axis=1), -1)  # ties: smallest index
    return d.min(axis=1), idx


def _case(kind: str, seed: int):
    rng = np.random.default_rng(seed)
    n, dim = int(rng.integers(200, 1500)), int(rng.integers(1, 9))
    n_codes = int(rng.choice([2, 3, 12]))
    if kind == "grid":  # many exact ties of distances
        base = rng.integers(0, 3, (n // 10 + 1, dim)) / 2.0
    elif kind == "one_hot":
        base = np.eye(dim)[rng.integers(0, dim, n // 10 + 1)]
    else:
        base = rng.random((n // 10 + 1, dim))
    jitter = {"duplicates": 0.0, "jitter": 1e-3, "wide": 3e-2}.get(kind, 0.0)
    q = base[rng.integers(0, len(base), n)] + rng.normal(0.0, jitter, (n, dim))
    qc = rng.integers(0, n_codes, n)
    m = int(rng.integers(1, 700))
    r = np.r_[q[rng.integers(0, n, m // 2)], rng.random((m - m // 2, dim))]  # some at 0
    rc = rng.integers(0, n_codes, m)
    return q, qc, r, rc


@pytest.mark.parametrize("kind", ["duplicates", "jitter", "wide", "grid", "one_hot",
                                  "uniform"])
@pytest.mark.parametrize("seed", range(6))
def test_clustered_search_equals_plain_and_brute_force(kind, seed):
    q, qc, r, rc = _case(kind, seed)
    d, idx = nn_other_group_clustered(q, qc, r, rc)
    d0, idx0 = nn_other_group(q, qc, r, rc)
    assert np.array_equal(d, d0) and np.array_equal(idx, idx0)  # bit for bit
    db, ib = _brute(q, qc, r, rc)
    np.testing.assert_allclose(d, db, rtol=0, atol=1e-12)
    ok = np.isfinite(d)
    # the neighbour found is at the nearest distance (ties may be equal to rounding)
    np.testing.assert_allclose(pair_distance(q[ok], r[idx[ok]]), db[ok], atol=1e-12)
    assert np.array_equal(idx[~ok], ib[~ok])


@pytest.mark.parametrize("cell", [1e-6, 0.05, 10.0])
def test_any_cell_gives_the_same_result(cell):
    """The grid only proposes clusters: a tiny cell (no clusters), the default, or one
    cell holding everything (members far from their representative) give one result."""
    q, qc, r, rc = _case("jitter", 11)
    d, idx = nn_other_group_clustered(q, qc, r, rc, cell=cell)
    d0, idx0 = nn_other_group(q, qc, r, rc)
    assert np.array_equal(d, d0) and np.array_equal(idx, idx0)


def test_repeated_rows_form_few_clusters():
    """20 jittered copies of 50 points (two codes) form about 100 clusters, each with
    one code, its first member the smallest index: the fast path is taken."""
    rng = np.random.default_rng(0)
    base = rng.random((50, 6))
    q = np.tile(base, (20, 1)) + rng.normal(0.0, 1e-4, (1000, 6))
    qc = np.tile(rng.integers(0, 2, 50), 20)
    order, starts = _grid_clusters(q, qc, 0.05)
    n_cl = len(starts) - 1
    assert 50 <= n_cl <= 100 <= 0.5 * len(q)  # below the fast path's limit
    for s, e in itertools.pairwise(starts):
        members = order[s:e]
        assert len(set(qc[members])) == 1
        assert members[0] == members.min()


def test_no_other_group_and_empty_refs():
    q = np.random.default_rng(1).random((40, 3))
    q = np.r_[q, q]
    d, idx = nn_other_group_clustered(q, np.zeros(80, int), q[:5], np.zeros(5, int))
    assert np.isinf(d).all() and (idx == -1).all()
    d, idx = nn_other_group_clustered(q, np.zeros(80, int), np.zeros((0, 3)), np.zeros(0, int))
    assert np.isinf(d).all() and (idx == -1).all()


@pytest.mark.parametrize("seed", range(4))
def test_one_proposal_for_both_targets(seed):
    """Clusters found once on ``[y, yp, x]`` serve the points of either target: the
    same distances and neighbours as the plain search and brute force, per target."""
    rng = np.random.default_rng(100 + seed)
    base = rng.random((60, 5))
    n = 1200
    x = base[rng.integers(0, 60, n)] + rng.normal(0.0, 1e-3, (n, 5))
    y, yp = rng.integers(0, 2, n).astype(float), rng.integers(0, 2, n).astype(float)
    codes = rng.integers(0, 2, n)
    P = np.column_stack([y, yp, x])
    cl = query_clusters(P, codes)
    assert len(cl[1]) - 1 < 0.5 * n  # the clustered path is taken
    ref = rng.choice(n, 300, replace=False)
    for t in (0, 1):
        T = np.column_stack([P[:, t], x])
        d, idx = nn_other_group_clustered(T, codes, T[ref], codes[ref], clusters=cl)
        d0, idx0 = nn_other_group(T, codes, T[ref], codes[ref])
        assert np.array_equal(d, d0) and np.array_equal(idx, idx0)
        db, _ = _brute(T, codes, T[ref], codes[ref])
        np.testing.assert_allclose(d, db, rtol=0, atol=1e-12)


def test_members_far_from_their_representative_keep_their_nearest():
    """One cell holding everything (members far from the representative, whose
    candidate lists differ member by member) and many codes: brute force's result."""
    rng = np.random.default_rng(7)
    q = rng.random((900, 4))
    qc = rng.integers(0, 12, 900)
    r = np.r_[q[:200], rng.random((300, 4))]
    rc = rng.integers(0, 12, 500)
    d, idx = nn_other_group_clustered(q, qc, r, rc, cell=100.0)
    db, _ = _brute(q, qc, r, rc)
    np.testing.assert_allclose(d, db, rtol=0, atol=1e-12)
    d0, idx0 = nn_other_group(q, qc, r, rc)
    assert np.array_equal(d, d0) and np.array_equal(idx, idx0)


@pytest.mark.parametrize("kind", ["duplicates", "jitter", "wide", "grid", "one_hot",
                                  "uniform"])
@pytest.mark.parametrize("seed", range(4))
def test_reference_clusters_give_the_plain_result(kind, seed):
    """Few queries against many clustered references (pass B against the whole table):
    the references grouped, only near clusters measured; plain search and brute force."""
    q, qc, r, rc = _case(kind, 50 + seed)
    rng = np.random.default_rng(seed)
    refs, rcodes = q, qc  # the table itself is the reference set
    queries = np.r_[r[:40], q[rng.integers(0, len(q), 40)]]
    qcodes = np.r_[rc[:40], rng.integers(0, 3, 40)]
    for cl in (None, query_clusters(refs, rcodes)):
        d, idx = nn_other_group_refclustered(queries, qcodes, refs, rcodes, clusters=cl)
        d0, idx0 = nn_other_group(queries, qcodes, refs, rcodes)
        assert np.array_equal(d, d0) and np.array_equal(idx, idx0)
        db, _ = _brute(queries, qcodes, refs, rcodes)
        np.testing.assert_allclose(d, db, rtol=0, atol=1e-12)


def test_reference_clusters_from_both_targets_bound_each_target():
    """Clusters and radii found on ``[y, yp, x]`` serve the references of one target."""
    rng = np.random.default_rng(3)
    base = rng.random((40, 4))
    x = base[rng.integers(0, 40, 2000)] + rng.normal(0.0, 1e-3, (2000, 4))
    y, yp = rng.integers(0, 2, 2000), rng.integers(0, 2, 2000)
    codes = rng.integers(0, 2, 2000)
    cl = query_clusters(np.column_stack([y, yp, x]), codes)
    T = np.column_stack([yp, x]).astype(float)
    qi = rng.choice(2000, 64, replace=False)
    d, idx = nn_other_group_refclustered(T[qi], codes[qi], T, codes, clusters=cl)
    d0, idx0 = nn_other_group(T[qi], codes[qi], T, codes)
    assert np.array_equal(d, d0) and np.array_equal(idx, idx0)
