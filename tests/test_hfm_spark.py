"""HFM on Spark against references computed here: naive Alg. 1-2, brute force, scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from test_hfm_kernels import naive_accele_dist, naive_approx_dist

from fairspark.hfm._kernels import sample_projections
from fairspark.hfm.compute import hfm_distances

M2 = 3
DX = 4


def make_data(seed: int = 7, n: int = 2000):
    """Adversarial rows: grid ties, exact duplicates, a 1-row group, a rare group."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 3, size=(n, DX)) / 2.0
    X[: n // 4] = rng.random((n // 4, DX))
    y = rng.integers(0, 2, n).astype(float)
    yp = np.where(rng.random(n) < 0.8, y, 1 - y)
    c0 = (rng.random(n) < 0.006).astype(int)  # rare group: most partitions hold < m2 of it
    c1 = rng.integers(0, 3, n)
    c1[c1 == 2] = 1
    c1[17] = 2  # a group of one row
    c2 = rng.integers(0, 4, n)  # multi-valued (any_other_value)
    keys = np.array([f"r{i:05d}" for i in range(n)])
    dup = rng.choice(n, 40, replace=False)  # duplicated rows share their key
    idx = np.r_[np.arange(n), dup]
    return keys[idx], y[idx], yp[idx], X[idx], np.column_stack([c0, c1, c2])[idx]


@pytest.fixture(scope="module")
def data():
    return make_data()


@pytest.fixture(scope="module")
def pts(spark, data):
    keys, y, yp, X, C = data
    rows = [
        (str(keys[i]), float(y[i]), float(yp[i]), [float(v) for v in X[i]], *[int(c) for c in C[i]])
        for i in range(len(keys))
    ]
    return spark.createDataFrame(
        rows, "key string, y double, yp double, x array<double>, c0 int, c1 int, c2 int"
    ).cache()


@pytest.fixture(scope="module")
def projections():
    return {
        0: sample_projections(dim=1 + DX, m1=3, sampler="uniform_l1", seed=1),
        1: sample_projections(dim=1 + DX, m1=3, sampler="reference_sequential", seed=2),
    }


def brute(points, codes):
    d = cdist(points, points)
    d[codes[:, None] == codes[None, :]] = np.inf
    return d.min(axis=1)


@pytest.fixture(scope="module")
def certified_runs(pts, data, projections):
    n = len(data[0])
    return {
        P: hfm_distances(
            pts.repartition(P), n_attr=3, dim_x=DX, n_rows=n, method="certified",
            m2=M2, projections=projections, num_partitions=P,
        )
        for P in (1, 3, 8)
    }


def test_approx_and_pointwise_equal_naive_algorithm(certified_runs, data, projections):
    keys, y, yp, X, C = data
    res = certified_runs[3]
    for tgt, t in ((0, y), (1, yp)):
        V = np.column_stack([t, X])
        for a in range(3):
            approx, pointwise = naive_approx_dist(V, C[:, a], keys, projections[tgt], M2)
            got = res[(tgt, a)].extra
            assert got["approx"] == pytest.approx(approx, rel=1e-12, abs=1e-12), (tgt, a)
            assert got["pointwise"] == pytest.approx(pointwise, rel=1e-12, abs=1e-12), (tgt, a)
            exact = brute(V, C[:, a]).max()
            assert exact - 1e-12 <= got["pointwise"] <= got["approx"] + 1e-12
            # candidates: distinct rows whose pointwise bound exceeds the exact D
            per = np.min([naive_accele_dist(V, C[:, a], keys, w, M2)
                          for w in projections[tgt]], axis=0)
            lo = len(set(keys[per > exact + 1e-9]))
            hi = len(set(keys[per > exact - 1e-9]))
            assert lo <= got["n_candidates"] <= hi, (tgt, a)
            assert got["n_searched"] >= got["n_candidates"]


def test_certified_is_exact_with_candidate_count(certified_runs, data):
    keys, y, yp, X, C = data
    for tgt, t in ((0, y), (1, yp)):
        V = np.column_stack([t, X])
        for a in range(3):
            nn = brute(V, C[:, a])
            r = certified_runs[8][(tgt, a)]
            assert r.certified
            assert r.value == pytest.approx(nn.max(), rel=0, abs=1e-12)
            assert r.lower == r.upper == r.value
            assert r.extra["n_searched"] >= 1
            # the witness pair realises the distance and crosses groups
            i = int(np.flatnonzero(keys == r.key)[0])
            j = int(np.flatnonzero(keys == r.nb_key)[0])
            assert C[i, a] != C[j, a]
            assert np.linalg.norm(V[i] - V[j]) == pytest.approx(r.value, abs=1e-12)
            # every step's interval holds the exact value
            for _, lo, hi in r.extra["steps"]:
                assert lo - 1e-12 <= nn.max() <= hi + 1e-12


def test_results_do_not_depend_on_partitioning(certified_runs):
    base = certified_runs[1]
    for P in (3, 8):
        other = certified_runs[P]
        assert set(other) == set(base)
        for k, r in base.items():
            o = other[k]
            for name in ("approx", "approx_avg", "pointwise", "pointwise_avg"):
                assert o.extra[name] == pytest.approx(r.extra[name], rel=1e-12, abs=0), (P, k, name)
            assert o.value == pytest.approx(r.value, rel=1e-12, abs=0)
            assert (o.key, o.nb_key) == (r.key, r.nb_key)


def test_exact_equals_brute_force_and_scipy(pts, data):
    from scipy.spatial.distance import directed_hausdorff

    keys, y, yp, X, C = data
    res = hfm_distances(
        pts.repartition(3), n_attr=3, dim_x=DX, n_rows=len(keys), method="exact", m2=M2,
        exact_block_rows=800,
    )
    for tgt, t in ((0, y), (1, yp)):
        V = np.column_stack([t, X])
        for a in range(3):
            nn = brute(V, C[:, a])
            r = res[(tgt, a)]
            assert r.value == pytest.approx(nn.max(), abs=1e-12)
            assert r.avg == pytest.approx(nn.mean(), rel=1e-12)
            if a == 0:
                s0, s1 = V[C[:, 0] == 0], V[C[:, 0] == 1]
                hd = max(directed_hausdorff(s0, s1)[0], directed_hausdorff(s1, s0)[0])
                assert r.value == pytest.approx(hd, abs=1e-9)


def test_cap_gives_valid_interval_not_certified(pts, data, projections):
    keys, y, yp, X, C = data
    snapshots = []
    res = hfm_distances(
        pts, n_attr=3, dim_x=DX, n_rows=len(keys), method="certified", m2=1,
        projections={k: v[:1] for k, v in projections.items()}, num_partitions=2,
        max_candidates=1, on_progress=snapshots.append,
    )
    assert len(snapshots) == 2  # pointwise bounds, then the one capped step
    seen_uncertified = False
    for tgt, t in ((0, y), (1, yp)):
        V = np.column_stack([t, X])
        for a in range(3):
            r = res[(tgt, a)]
            exact = brute(V, C[:, a]).max()
            assert r.lower - 1e-12 <= exact <= r.upper + 1e-12
            assert r.extra["n_searched"] <= 1
            seen_uncertified |= not r.certified
            # the partial results: the pointwise bound alone, then the final interval
            p0, p1 = (snap[(tgt, a)] for snap in snapshots)
            assert p0.lower is None and p0.upper == p0.extra["pointwise"] >= exact - 1e-12
            assert (p1.lower, p1.upper, p1.certified) == (r.lower, r.upper, r.certified)
    assert seen_uncertified


def test_exact_with_empty_blocks_and_duplicates(spark):
    rng = np.random.default_rng(3)
    X = rng.random((12, 2))
    codes = np.array([0, 1] * 6)
    rows = [(f"k{i}", 1.0, 0.0, [float(v) for v in X[i]], int(codes[i])) for i in range(12)]
    rows += rows[:2]  # two duplicated rows (same key)
    pts = spark.createDataFrame(rows, "key string, y double, yp double, x array<double>, c0 int")
    res = hfm_distances(pts, n_attr=1, dim_x=2, n_rows=len(rows), method="exact", m2=1,
                        exact_block_rows=1)  # 14 blocks: several are empty
    V = np.column_stack([np.ones(14), np.r_[X, X[:2]]])
    nn = brute(V, np.r_[codes, codes[:2]])
    assert res[(0, 0)].value == pytest.approx(nn.max(), abs=1e-12)
    assert res[(0, 0)].avg == pytest.approx(nn.mean(), rel=1e-12)


def test_certify_in_steps_matches_reference_policy(spark):
    """Direct certify with tiny batches: every step, against brute force and a simulation."""
    from fairspark.hfm._spark import certify

    rng = np.random.default_rng(12)
    n = 400
    X = rng.random((n, 3))
    y = rng.integers(0, 2, n).astype(float)
    codes = (rng.random(n) < 0.3).astype(int)
    keys = np.array([f"q{i:04d}" for i in range(n)])
    V = np.column_stack([y, X])
    nn = brute(V, codes)
    D = nn.max()
    # valid upper bounds with many ties (rounded up to 0.1), many of them above D
    ub = np.ceil((nn + 3.0 * D * rng.random(n)) * 10) / 10
    pts = spark.createDataFrame(
        [(str(keys[i]), float(y[i]), 0.0, [float(v) for v in X[i]], int(codes[i]))
         for i in range(n)],
        "key string, y double, yp double, x array<double>, c0 int",
    ).cache()
    ub_rows = spark.createDataFrame(
        [(0, 0, str(keys[i]), float(ub[i])) for i in range(n)],
        "tgt int, attr int, key string, ub double",
    ).cache()
    calls = []
    res = certify(pts, ub_rows, n_attr=1, dim_x=3, n_rows=n, pairs=[(0, 0)],
                  max_candidates=n, block_rows=64, first_batch=4, on_step=calls.append)
    r = res[(0, 0)]
    # reference: rows by (ub desc, key); each step searches the planned batch, or all rows
    # still above the bound when they are at most twice the planned batch
    order = np.lexsort((keys, -ub))
    lb, pos, plan, steps, beyond_plan = -np.inf, 0, 4, [], False
    while True:
        rest = [i for i in order[pos:] if ub[i] > lb]
        if not rest:
            break
        size = len(rest) if len(rest) <= 2 * plan else plan
        beyond_plan |= size > plan
        lb = max(lb, nn[rest[:size]].max())
        pos = int(np.flatnonzero(order == rest[size - 1])[0]) + 1
        rem = ub[rest[size]] if size < len(rest) else -np.inf
        steps.append((pos, lb, max(lb, rem)))
        plan *= 4
        if rem <= lb:
            break
    assert r.certified and r.lower == r.upper == pytest.approx(D, abs=1e-12)
    assert len(steps) >= 3 and beyond_plan  # both batch rules are exercised
    assert [s[0] for s in r.steps] == [s[0] for s in steps]
    assert np.allclose([s[1:] for s in r.steps], [s[1:] for s in steps], rtol=0, atol=1e-12)
    assert r.n_searched == steps[-1][0]
    assert r.n_above == int((ub > D).sum())
    assert r.key == min(keys[nn == D])
    assert len(calls) == len(r.steps)
    assert calls[-1][(0, 0)].certified
