"""The certified engine's cost model: its job counts against the jobs the test
counts itself, its rows against the table, and the result it comes with against brute
force."""

from __future__ import annotations

import time

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from fairspark.hfm.compute import CertifyOptions, DistanceOptions, hfm_distances

DX = 3


def _data(n: int = 900, seed: int = 3):
    rng = np.random.default_rng(seed)
    X = rng.random((n, DX))
    y = (rng.random(n) < 0.5).astype(float)
    yp = np.where(rng.random(n) < 0.8, y, 1 - y)
    c = (rng.random(n) < 0.3).astype(int)
    keys = np.array([f"k{i:05d}" for i in range(n)])
    return keys, y, yp, X, c


@pytest.fixture(scope="module")
def data():
    return _data()


@pytest.fixture(scope="module")
def pts(spark, data):
    keys, y, yp, X, c = data
    rows = [(str(keys[i]), float(y[i]), float(yp[i]), [float(v) for v in X[i]], int(c[i]))
            for i in range(len(keys))]
    df = spark.createDataFrame(rows, "key string, y double, yp double, x array<double>, c0 int")
    return df.repartition(3).cache()


def _nn(points: np.ndarray, codes: np.ndarray) -> np.ndarray:
    d = cdist(points, points)
    d[codes[:, None] == codes[None, :]] = np.inf
    return d.min(axis=1)


@pytest.mark.parametrize("budget", [None, 0])
def test_cost_model_counts_the_jobs_it_ran(spark, pts, data, budget):
    """The cost model's jobs are the jobs Spark ran for the call (counted here in a job
    group of the test's own), its passes read the table's rows, and it comes with
    the exact D."""
    keys, y, yp, X, c = data
    pts.count()
    sc = spark.sparkContext
    group = f"cost-{time.time_ns()}"
    sc.setJobGroup(group, "cost model")
    t0 = time.perf_counter()
    try:
        res = hfm_distances(
            pts, n_attr=1, dim_x=DX, n_rows=len(keys),
            options=DistanceOptions("certified", m2=1, histogram_bins=5),
            certify=CertifyOptions(sample_rows=16, seed=2,
                                   **({} if budget is None else {"local_max_bytes": budget})))
    finally:
        sc.setJobGroup("idle", "idle")
    wall = time.perf_counter() - t0
    n_jobs = len(sc.statusTracker().getJobIdsForGroup(group))
    cost = res[(0, 0)].extra["cost"]
    assert res[(1, 0)].extra["cost"] is cost  # one cost model for the shared passes
    engine = "driver" if budget is None else "spark"
    assert cost["engine"] == engine == res[(0, 0)].extra["engine"]
    assert cost["jobs"] == n_jobs == sum(p["jobs"] for p in cost["passes"])
    assert cost["stages"] >= cost["jobs"]
    if engine == "driver":
        assert n_jobs == 1 and cost["passes"][0]["pass"] == "driver collect"
    else:
        assert n_jobs > 1
    assert 0 < cost["seconds"] <= wall
    names = [p["pass"] for p in cost["passes"]]
    assert "B: exact searches" in names and "candidate count" in names
    for p in cost["passes"]:
        if p["pass"].startswith(("A:", "B:", "C:")):
            assert p["rows_read"] == len(keys)
            assert p["bytes_read"] == len(keys) * 8 * (DX + 2)
    for tgt, t in ((0, y), (1, yp)):
        nn = _nn(np.column_stack([t, X]), c)
        r = res[(tgt, 0)]
        assert r.certified and r.value == pytest.approx(nn.max(), abs=1e-12)
    c_pass = [p for p in cost["passes"] if p["pass"] == "C: elimination"]
    if c_pass:
        # rows left after pass B: at most the rows of both targets whose bound is >= L
        assert 0 <= c_pass[0]["rows_left"] <= 2 * len(keys)
