"""HFM on Spark against references computed here: naive Alg. 1-2, brute force, scipy."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import cdist
from test_hfm_kernels import naive_approx_dist

from fairspark.hfm._kernels import sample_projections
from fairspark.hfm.compute import CertifyOptions, DistanceOptions, hfm_distances

M2 = 3
DX = 4
#: where ``certified`` runs its passes: the default (small tables: collected once and
#: searched on the driver) and the Spark passes, forced with a budget of 0
PATHS = {"driver": {}, "spark": {"local_max_bytes": 0}}


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


@pytest.fixture(scope="module", params=sorted(PATHS))
def certified_runs(request, pts, data, projections):
    n = len(data[0])
    runs = {
        P: hfm_distances(
            pts.repartition(P), n_attr=3, dim_x=DX, n_rows=n,
            options=DistanceOptions(method="certified", m2=M2, num_partitions=P,
                                    paper_value=True),
            certify=CertifyOptions(seed=5, sample_rows=64, **PATHS[request.param]),
            projections=projections,
        )
        for P in (1, 3, 8)
    }
    for res in runs.values():
        assert {r.extra["engine"] for r in res.values()} == {request.param}
    return runs


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
            assert got["approx_error"] == pytest.approx(approx / exact - 1, rel=1e-9)


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
            assert r.extra["n_checked"] >= r.extra["n_searched"]
            # elimination invariant: a row left only with a bound below L (<= D)
            for rnd in r.extra["rounds"]:
                assert rnd["L"] <= nn.max() + 1e-12
                if rnd["max_eliminated"] is not None:
                    assert rnd["max_eliminated"] < rnd["L"]
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
            for name in ("n_searched", "n_checked", "n_candidates"):
                assert o.extra[name] == r.extra[name], (P, k, name)
            assert o.avg == pytest.approx(r.avg, rel=1e-12)


def test_exact_equals_brute_force_and_scipy(pts, data):
    from scipy.spatial.distance import directed_hausdorff

    keys, y, yp, X, C = data
    res = hfm_distances(
        pts.repartition(3), n_attr=3, dim_x=DX, n_rows=len(keys),
        options=DistanceOptions(method="exact", m2=M2, exact_block_rows=800),
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


@pytest.mark.parametrize("path", sorted(PATHS))
def test_cap_gives_valid_interval_not_certified(pts, data, path):
    keys, y, yp, X, C = data
    snapshots = []
    res = hfm_distances(
        pts, n_attr=3, dim_x=DX, n_rows=len(keys), options=DistanceOptions("certified", m2=1),
        certify=CertifyOptions(max_candidates=1, sample_rows=8, **PATHS[path]),
        on_progress=snapshots.append,
    )
    assert len(snapshots) >= 2  # the sample bounds, then each round
    seen_uncertified = False
    for tgt, t in ((0, y), (1, yp)):
        V = np.column_stack([t, X])
        for a in range(3):
            r = res[(tgt, a)]
            exact = brute(V, C[:, a]).max()
            assert r.lower - 1e-12 <= exact <= r.upper + 1e-12
            assert r.extra["n_checked"] <= 1
            seen_uncertified |= not r.certified
            # the partial results: the sample bound alone, then the final interval
            p0, p1 = (snapshots[i][(tgt, a)] for i in (0, -1))
            assert p0.lower is None and p0.upper == p0.extra["bound_max"] >= exact - 1e-12
            assert (p1.lower, p1.upper, p1.certified) == (r.lower, r.upper, r.certified)
    assert seen_uncertified


@pytest.mark.parametrize("path", sorted(PATHS))
def test_time_budget_gives_valid_interval(pts, data, path):
    keys, y, yp, X, C = data
    calls = iter([1.0] + [0.0] * 1000)  # the budget runs out after the first searches
    res = hfm_distances(pts, n_attr=3, dim_x=DX, n_rows=len(keys),
                        options=DistanceOptions("certified", m2=1),
                        certify=CertifyOptions(sample_rows=8, time_left=lambda: next(calls),
                                               **PATHS[path]))
    for tgt, t in ((0, y), (1, yp)):
        V = np.column_stack([t, X])
        for a in range(3):
            r = res[(tgt, a)]
            exact = brute(V, C[:, a]).max()
            assert r.upper >= exact - 1e-12
            if r.lower is not None:
                assert r.lower <= exact + 1e-12
            if r.certified:
                assert r.value == pytest.approx(exact, abs=1e-12)
    assert not all(r.certified for r in res.values())


#: what :func:`test_every_method_gives_the_same_rows_on_both_session_kinds` runs: the
#: method and the certified engine's driver budget (0: the Spark passes)
KIND_RUNS = {
    "exact": ("exact", {}),
    "certified_driver": ("certified", {}),
    "certified_spark": ("certified", {"local_max_bytes": 0}),
    "approx": ("approx", {}),
}


@pytest.mark.both_kinds
@pytest.mark.parametrize("run", sorted(KIND_RUNS))
def test_every_method_gives_the_same_rows_on_both_session_kinds(spark, pts, data, projections,
                                                                 run, same_on_both_kinds):
    """Each method and engine on this run's session (classic or Spark Connect): exact
    against brute force and scipy, certified (driver path and Spark passes) exact with
    its witness, approx against the naive algorithm; and the rows equal the classic
    run's (values, witnesses, averages, histograms, counts)."""
    from scipy.spatial.distance import directed_hausdorff

    keys, y, yp, X, C = data
    method, certify = KIND_RUNS[run]
    res = hfm_distances(
        pts.repartition(3), n_attr=3, dim_x=DX, n_rows=len(keys),
        options=DistanceOptions(method, m2=M2, exact_block_rows=800, histogram_bins=5),
        certify=CertifyOptions(seed=5, sample_rows=64, **certify), projections=projections)
    rows = []
    for tgt, t in ((0, y), (1, yp)):
        V = np.column_stack([t, X])
        for a in range(3):
            r = res[(tgt, a)]
            nn = brute(V, C[:, a])
            if method == "approx":
                want, _ = naive_approx_dist(V, C[:, a], keys, projections[tgt], M2)
                assert r.value == pytest.approx(want, rel=1e-12, abs=1e-12)
            else:
                assert r.value == pytest.approx(nn.max(), abs=1e-12)
                if method == "exact":
                    assert r.avg == pytest.approx(nn.mean(), rel=1e-12)
                else:  # the mean of the rows' sample bounds (each at least its nn)
                    assert r.avg >= nn.mean() - 1e-12
                assert r.extra["hist"][1].sum() == len(keys)
            if method == "certified":
                assert r.certified and r.extra["engine"] == run.split("_")[1]
                i = int(np.flatnonzero(keys == r.key)[0])
                assert r.key == min(keys[nn == nn[i]]) and nn[i] == pytest.approx(nn.max())
            if a == 0 and method != "approx":
                s0, s1 = V[C[:, 0] == 0], V[C[:, 0] == 1]
                hd = max(directed_hausdorff(s0, s1)[0], directed_hausdorff(s1, s0)[0])
                assert r.value == pytest.approx(hd, abs=1e-9)
            ex = r.extra
            rows.append({"tgt": str(tgt), "attr": str(a), "value": r.value,
                         "avg": np.nan if r.avg is None else r.avg,
                         "key": str(r.key), "nb_key": str(r.nb_key),
                         "certified": float(bool(r.certified)),
                         "hist": ",".join(map(str, ex["hist"][1])) if "hist" in ex else "",
                         "counts": ",".join(str(ex.get(n)) for n in
                                            ("n_searched", "n_checked", "n_candidates"))})
    same_on_both_kinds(f"hfm_method_{run}", pd.DataFrame(rows))


def test_exact_with_empty_blocks_and_duplicates(spark):
    rng = np.random.default_rng(3)
    X = rng.random((12, 2))
    codes = np.array([0, 1] * 6)
    rows = [(f"k{i}", 1.0, 0.0, [float(v) for v in X[i]], int(codes[i])) for i in range(12)]
    rows += rows[:2]  # two duplicated rows (same key)
    pts = spark.createDataFrame(rows, "key string, y double, yp double, x array<double>, c0 int")
    res = hfm_distances(pts, n_attr=1, dim_x=2, n_rows=len(rows),  # 14 blocks: some empty
                        options=DistanceOptions("exact", m2=1, exact_block_rows=1))
    V = np.column_stack([np.ones(14), np.r_[X, X[:2]]])
    nn = brute(V, np.r_[codes, codes[:2]])
    assert res[(0, 0)].value == pytest.approx(nn.max(), abs=1e-12)
    assert res[(0, 0)].avg == pytest.approx(nn.mean(), rel=1e-12)


def _points_df(spark, keys, y, yp, X, codes):
    return spark.createDataFrame(
        [(str(keys[i]), float(y[i]), float(yp[i]), [float(v) for v in X[i]], int(codes[i]))
         for i in range(len(keys))],
        "key string, y double, yp double, x array<double>, c0 int",
    )


def _scenario(kind: str, rng, n: int, d: int):
    if kind == "uniform":
        X = rng.random((n, d))
    elif kind == "clustered":
        centres = rng.random((6, d))
        X = np.clip(centres[rng.integers(0, 6, n)] + rng.normal(0, 0.02, (n, d)), 0, 1)
    elif kind == "duplicated":
        base = rng.random((n // 8, d))
        X = base[rng.integers(0, n // 8, n)]
    else:  # ties: a coarse grid, many equal distances
        X = rng.integers(0, 3, (n, d)) / 2.0
    y = rng.integers(0, 2, n).astype(float)
    codes = (rng.random(n) < 0.3).astype(int)
    return X, y, codes


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("kind", ["uniform", "clustered", "duplicated", "ties"])
def test_elimination_engine_equals_scipy(spark, kind, path):
    """The elimination engine against scipy (EarlyBreak) and brute force, 1 and 4 partitions."""
    from scipy.spatial.distance import directed_hausdorff

    rng = np.random.default_rng(len(kind))
    n, d = 1500, 6
    X, y, codes = _scenario(kind, rng, n, d)
    keys = np.array([f"e{i:05d}" for i in range(n)])
    V = np.column_stack([y, X])
    nn = brute(V, codes)
    D = nn.max()
    s0, s1 = V[codes == 0], V[codes == 1]
    hd = max(directed_hausdorff(s0, s1)[0], directed_hausdorff(s1, s0)[0])
    assert D == pytest.approx(hd, abs=1e-12)
    pts = _points_df(spark, keys, y, y, X, codes).cache()
    got, avgs = [], []
    for P in (1, 4):
        res = hfm_distances(pts.repartition(P), n_attr=1, dim_x=d, n_rows=n,
                            options=DistanceOptions("certified", m2=1, targets=(0,)),
                            certify=CertifyOptions(sample_rows=32, seed=3, **PATHS[path]))
        r = res[(0, 0)]
        assert r.extra["engine"] == path
        assert r.certified and r.lower == r.upper == r.value
        assert r.value == pytest.approx(D, abs=1e-12)
        # the witness: the smallest key among the rows realising D, and its nearest row
        i = int(np.flatnonzero(keys == r.key)[0])
        assert r.key == min(keys[nn == nn[i]]) and nn[i] == pytest.approx(D, abs=1e-12)
        j = int(np.flatnonzero(keys == r.nb_key)[0])
        assert codes[i] != codes[j]
        assert np.linalg.norm(V[i] - V[j]) == pytest.approx(D, abs=1e-12)
        # counts: rows whose sample bound exceeds D needed a check
        assert r.extra["n_checked"] >= r.extra["n_candidates"] >= 1
        for rnd in r.extra["rounds"]:
            if rnd["max_eliminated"] is not None:
                assert rnd["max_eliminated"] < rnd["L"] <= D + 1e-12
        got.append((r.value, r.key, r.nb_key, r.extra["n_searched"], r.extra["n_checked"],
                    r.extra["n_candidates"]))
        avgs.append(r.avg)
    assert got[0] == got[1]  # nothing depends on partitioning
    assert avgs[0] == pytest.approx(avgs[1], rel=1e-12)  # (up to the summation order)
    pts.unpersist()


def test_sample_bounds_are_upper_bounds(spark):
    """Every row's sample bound is at least its exact nn (what elimination relies on)."""
    from pyspark.sql import functions as F

    from fairspark.hfm._spark._passes import _top_bounds, _work_table
    from fairspark.hfm._spark.elim import code_counts

    rng = np.random.default_rng(4)
    n = 600
    X, y, codes = _scenario("clustered", rng, n, 3)
    keys = np.array([f"b{i:04d}" for i in range(n)])
    pts = _points_df(spark, keys, y, 1 - y, X, codes)
    counts = code_counts(pts, 1)
    assert counts == {0: {0: int((codes == 0).sum()), 1: int((codes == 1).sum())}}
    ranked = pts.withColumn("h", F.rand(seed=1))
    sample = ranked.where("h < 0.05").toPandas()
    assert 5 <= len(sample) <= 80
    work_df = _work_table(ranked, sample, n_attr=1, dim_x=3, pairs=[(0, 0), (1, 0)],
                          counts=counts)
    work = work_df.toPandas()
    top = _top_bounds(work_df, [(0, 0), (1, 0)], 5)
    for tgt, t in ((0, y), (1, 1 - y)):
        nn = brute(np.column_stack([t, X]), codes)
        sub = work.set_index("key").loc[keys]
        u = sub[f"u{tgt}_0"].to_numpy()
        assert (u >= nn - 1e-15).all()
        assert (u == nn).any()
        # the five largest bounds, ties to the smallest key
        order = sorted(zip(-u, keys, strict=True))[:5]
        assert [(a, b) for a, b, _ in top[(tgt, 0)]] == [(float(a), b) for a, b in order]


@pytest.mark.parametrize("path", sorted(PATHS))
def test_survivor_pass_equals_brute_force(spark, monkeypatch, path):
    """With broadcasts of a few rows, pass C has no blocks and pass D does all the work."""
    import fairspark.hfm._spark.elim as elim

    monkeypatch.setattr(elim, "_BCAST_BYTES", 2000)  # about 15 rows per broadcast
    rng = np.random.default_rng(11)
    n, d = 900, 5
    X, y, codes = _scenario("uniform", rng, n, d)
    keys = np.array([f"s{i:04d}" for i in range(n)])
    V = np.column_stack([y, X])
    nn = brute(V, codes)
    pts = _points_df(spark, keys, y, y, X, codes).cache()
    got = []
    for P in (1, 4):
        opts = elim.CertifyOptions(seed=2, sample_rows=32, first_search=2, **PATHS[path])
        r = elim.certify_exact(pts.repartition(P), n_attr=1, dim_x=d, pairs=[(0, 0)],
                               options=opts)[(0, 0)]
        assert r.engine == path
        assert r.certified and r.lower == pytest.approx(nn.max(), abs=1e-12)
        assert r.key == min(keys[nn == nn.max()])
        assert r.n_checked > 2  # rows beyond the first searches went to pass D
        assert r.rounds and all(x["max_eliminated"] is None or x["max_eliminated"] < x["L"]
                                for x in r.rounds)
        got.append((r.lower, r.key, r.nb_key, r.n_searched, r.n_checked))
    assert got[0] == got[1]
    pts.unpersist()


def _jobs(spark, fn):
    """``fn()`` and the number of Spark jobs it ran."""
    import time

    sc = spark.sparkContext
    group = f"count-{time.time_ns()}"
    sc.setJobGroup(group, "counted")
    try:
        out = fn()
    finally:
        sc.setJobGroup("idle", "idle")
    return out, len(sc.statusTracker().getJobIdsForGroup(group))


def test_driver_path_equals_spark_passes(spark, pts, data):
    """Same rows and seed: the driver path gives the Spark passes' result field by field."""
    keys, y, yp, X, C = data
    runs = {}
    for path in sorted(PATHS):
        runs[path] = hfm_distances(pts.repartition(3), n_attr=3, dim_x=DX, n_rows=len(keys),
                                   options=DistanceOptions("certified", m2=1, histogram_bins=7),
                                   certify=CertifyOptions(sample_rows=16, seed=9,
                                                          **PATHS[path]))
    for (tgt, a), r in runs["spark"].items():
        o = runs["driver"][(tgt, a)]
        assert (r.extra["engine"], o.extra["engine"]) == ("spark", "driver")
        nn = brute(np.column_stack([y if tgt == 0 else yp, X]), C[:, a])
        assert o.certified and o.value == pytest.approx(nn.max(), abs=1e-12)
        assert (o.value, o.lower, o.upper, o.key, o.nb_key) == (r.value, r.lower, r.upper,
                                                                 r.key, r.nb_key)
        for name in ("n_searched", "n_checked", "n_candidates", "rounds", "steps",
                     "bound_max"):
            assert o.extra[name] == r.extra[name], (tgt, a, name)
        assert o.avg == pytest.approx(r.avg, rel=1e-12)
        assert np.array_equal(o.extra["hist"][0], r.extra["hist"][0])
        assert np.array_equal(o.extra["hist"][1], r.extra["hist"][1])
        assert o.extra["hist"][1].sum() == len(keys)


def test_default_takes_driver_path_on_a_small_table(spark, pts, data):
    """At the defaults a small table is collected once (one Spark job) and exact."""
    keys, y, yp, X, C = data
    pts.count()  # cached
    res, n_jobs = _jobs(spark, lambda: hfm_distances(
        pts, n_attr=3, dim_x=DX, n_rows=len(keys), options=DistanceOptions("certified", m2=1)))
    assert n_jobs == 1  # the capped collect (the Spark passes take about ten)
    for (tgt, a), r in res.items():
        assert r.extra["engine"] == "driver"
        nn = brute(np.column_stack([y if tgt == 0 else yp, X]), C[:, a])
        assert r.certified and r.value == pytest.approx(nn.max(), abs=1e-12)
        assert r.key == min(keys[nn == nn.max()])


@pytest.mark.parametrize("n_rows", [None, "true"])
def test_small_budget_takes_spark_passes(spark, pts, data, n_rows):
    """A budget below the table's size (known, or found by the capped collect) runs Spark."""
    keys, y, yp, X, C = data
    n = len(keys)
    budget = 100 * (8 * (DX + 2) + 64)  # 100 rows
    from fairspark.hfm._spark.elim import certify_exact

    res = certify_exact(pts.repartition(3), n_attr=3, dim_x=DX, pairs=[(0, 0), (1, 2)],
                        n_rows=None if n_rows is None else n,
                        options=CertifyOptions(seed=4, local_max_bytes=budget))
    for (tgt, a), r in res.items():
        assert r.engine == "spark"
        nn = brute(np.column_stack([y if tgt == 0 else yp, X]), C[:, a])
        assert r.certified and r.lower == pytest.approx(nn.max(), abs=1e-12)


def test_survivor_rounds_jump_to_the_end_after_a_poor_round(spark, monkeypatch):
    """Pass D: after a round that eliminates under half of its rows the next block
    reaches the end of every other side (each row then exact); exact, and the same
    rounds on both paths."""
    import fairspark.hfm._spark.elim as elim

    monkeypatch.setattr(elim, "_BCAST_BYTES", 2000)  # about 15 rows per broadcast
    rng = np.random.default_rng(11)
    n, d = 900, 5
    X, y, codes = _scenario("uniform", rng, n, d)
    keys = np.array([f"s{i:04d}" for i in range(n)])
    nn = brute(np.column_stack([y, X]), codes)
    smaller_side = int(np.bincount(codes).min())
    pts = _points_df(spark, keys, y, y, X, codes).cache()
    rounds = {}
    for path in sorted(PATHS):
        opts = elim.CertifyOptions(seed=2, sample_rows=32, first_search=2, first_block=4,
                                   **PATHS[path])
        r = elim.certify_exact(pts.repartition(4), n_attr=1, dim_x=d, pairs=[(0, 0)],
                               options=opts)[(0, 0)]
        assert r.certified and r.lower == pytest.approx(nn.max(), abs=1e-12)
        rounds[path] = r.rounds
    assert rounds["driver"] == rounds["spark"]
    jumps = 0
    pass_c_end = 64 + 4  # the sample quota (at least 64 rows a code) and one block of 4
    for prev, nxt in zip(rounds["driver"], rounds["driver"][1:], strict=False):
        entered = prev["left"] + prev["eliminated"]
        if prev["hi"] > pass_c_end and nxt["hi"] > prev["hi"] and 2 * prev["left"] > entered > 0:
            # a poor round: the next block covers the largest other side whole
            # (doubling from there would reach about hi + 8, far below either side)
            assert nxt["hi"] >= smaller_side and nxt["left"] == 0
            jumps += 1
    assert jumps >= 1  # the branch ran
    pts.unpersist()


@pytest.mark.both_kinds
@pytest.mark.parametrize("parts", [1, 5])
def test_pass_a_tasks_send_the_top_bounds_of_the_job_of_their_own(spark, parts):
    """The top bounds the pass-A tasks send (one job, filling the cache) are those of
    the sorted job over the working table and of a sort of every row's bound, ties
    (a coarse grid: many equal bounds) to the smallest key, at 1 and 5 partitions."""
    from pyspark.sql import functions as F

    from fairspark.hfm._spark import summarise_pointwise
    from fairspark.hfm._spark._cost import CostLog
    from fairspark.hfm._spark._passes import _top_bounds
    from fairspark.hfm._spark._work import _SparkWork

    rng = np.random.default_rng(11)
    n, d, k = 900, 3, 7
    X, y, codes = _scenario("ties", rng, n, d)
    keys = np.array([f"t{i:04d}" for i in rng.permutation(n)])
    pts = _points_df(spark, keys, y, 1 - y, X, codes).repartition(parts)
    ranked = pts.withColumn("h", F.rand(seed=2))
    pairs = [(0, 0), (1, 0)]
    work = _SparkWork.build(ranked, n_attr=1, dim_x=d, pairs=pairs, n_rows=n,
                            cost=CostLog(spark), top_k=k,
                            options=CertifyOptions(sample_rows=40))
    try:
        got = work.top_bounds(pairs, k)
        # one marker row per task (of the job that filled the cache), none in the rows
        assert work.n_tasks() == parts == len(work.parts)
        assert work.df.count() == n
        ref = _top_bounds(work.df, pairs, k)
        rows = work.df.toPandas()
        assert got == ref
        for p in pairs:
            u, nb = rows[f"u{p[0]}_0"].to_numpy(), rows[f"nb{p[0]}_0"].fillna("")
            brute_top = sorted(zip((-u).tolist(), rows["key"], nb, strict=True))[:k]
            assert got[p] == brute_top
            # ties at the k-th bound: the key decided between them
            assert (u == -brute_top[-1][0]).sum() > 1
        # the bounds' summary the same tasks sent: Spark's aggregation of every row's
        # bound to the bit, and a brute force (numpy max, Fraction mean, sorted witness)
        gathered = work.bound_summary(pairs)
        spark_summ = summarise_pointwise(work.ub, value_col="u").sort_values(["tgt", "attr"])
        pd.testing.assert_frame_equal(gathered.reset_index(drop=True),
                                      spark_summ.reset_index(drop=True), check_dtype=False)
        for r in gathered.itertuples():
            u = rows[f"u{r.tgt}_{r.attr}"].to_numpy()
            assert r.D == u.max()
            assert r.D_avg == float(sum(Fraction(x) for x in u) / len(u))
            at = rows[u == u.max()]
            witnesses = zip(at["key"], at[f"nb{r.tgt}_{r.attr}"], strict=True)
            assert (r.key, r.nb_key) == min(witnesses, key=lambda w: (w[0], w[1] is not None,
                                                                      w[1] or ""))
        # the histogram in one aggregation of the working table: numpy's bins of every
        # row's bound over [0, top] (a top that is not a bound: edges inside the grid)
        tops, bins = {0: float(gathered["D"].max()) * 0.75}, 7
        got_hist = work.bound_histogram(pairs)(tops, bins)
        for p in pairs:
            u = rows[f"u{p[0]}_{p[1]}"].to_numpy()
            b = np.minimum(np.floor(u / tops[0] * bins), bins - 1).astype(int)
            ref_n = np.bincount(b, minlength=bins)
            sub = got_hist[(got_hist["tgt"] == p[0]) & (got_hist["attr"] == p[1])]
            n = np.zeros(bins, dtype=int)
            n[sub["bin"].to_numpy(int)] = sub["n"].to_numpy(int)
            assert n.tolist() == ref_n.tolist()
            assert (ref_n > 0).sum() >= 2 and (u > tops[0]).any()  # values past the top
    finally:
        work.close()


def test_counts_handed_to_the_spark_passes_are_their_own(spark, pts, data):
    """The audit's count (:func:`code_counts_and_rows`) equals the engine's and numpy's,
    and the Spark passes given it run no job for it, with the same results."""
    from fairspark.hfm._spark import code_counts_and_rows
    from fairspark.hfm._spark.elim import code_counts

    counts, n = code_counts_and_rows(pts, 2)
    assert counts == code_counts(pts, 2)
    codes = data[4]
    assert n == len(codes)
    for a in range(2):
        v, c = np.unique(codes[:, a], return_counts=True)
        assert counts[a] == {int(x): int(m) for x, m in zip(v, c, strict=True)}
    runs = []
    for given in (None, counts):
        res = hfm_distances(pts, n_attr=2, dim_x=DX, n_rows=n,
                            options=DistanceOptions("certified", m2=1),
                            certify=CertifyOptions(sample_rows=48, seed=5, local_max_bytes=0,
                                                   code_counts=given))
        step = next(p for p in res[(0, 0)].extra["cost"]["passes"]
                    if p["pass"] == "code counts")
        assert (step["jobs"] == 0) if given else (step["jobs"] >= 1)
        runs.append({p: (r.value, r.key, r.nb_key, r.certified, r.extra["n_searched"])
                     for p, r in res.items()})
    assert runs[0] == runs[1]
