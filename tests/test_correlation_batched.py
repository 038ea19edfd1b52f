"""A round's logistic regressions fitted together (batched Newton) against scikit-learn.

The reference is scikit-learn's ``LogisticRegression`` fitted per bootstrap sample with
the same ``C`` and intercept handling, run to a tight ``tol`` so that it is the
minimiser of the same objective (at its default ``tol=1e-4`` lbfgs stops about 1e-3
away from it, further than the batched fit).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from fairspark.correlation import OracleJob, draw_stratified_sample, run_oracle_tasks
from fairspark.correlation._batched import (
    batched_family,
    fit_logistic_batched,
    run_attempts_batched,
    run_round_batched,
)
from fairspark.correlation._oracle import (
    OracleData,
    OracleModel,
    _bootstrap,
    run_attempt,
    split_round,
)

TIGHT = {"tol": 1e-12, "max_iter": 100000}


def _data(n: int = 3000, d: int = 12, seed: int = 0) -> OracleData:
    rng = np.random.default_rng(seed)
    x = np.hstack([rng.normal(size=(n, 4)), (rng.random((n, d - 4)) < 0.2).astype(float)])
    priv = rng.random(n) < 0.6
    beta = rng.normal(0, 1, d)
    y = (rng.random(n) < 1 / (1 + np.exp(-(x @ beta - 0.5 + 0.8 * priv)))).astype(float)
    return OracleData(x=x, y=y, priv=priv, w=rng.uniform(0.5, 2.0, n))


def _sklearn(x, y, *, c: float, fit_intercept: bool) -> LogisticRegression:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LogisticRegression(C=c, fit_intercept=fit_intercept, **TIGHT).fit(x, y)


@pytest.mark.parametrize("c,fit_intercept", [(1.0, True), (0.05, True), (10.0, False)])
def test_batched_newton_is_sklearns_minimiser(c, fit_intercept):
    data = _data()
    split = split_round(data, seed=3, round_id=0, test_fraction=0.3)
    rng = np.random.default_rng(8)
    idx = [_bootstrap(split, rng, k=400, round_id=0) for _ in range(12)]
    kmax = max(len(r) for r in idx)
    rows = np.stack([np.pad(r, (0, kmax - len(r))) for r in idx])
    mask = np.stack([np.arange(kmax) < len(r) for r in idx]).astype(float)
    coef, icpt = fit_logistic_batched(data.x, data.y, rows, mask, c=c,
                                      fit_intercept=fit_intercept)
    xt = data.x[split.test]
    for b, r in enumerate(idx):
        ref = _sklearn(data.x[r], data.y[r], c=c, fit_intercept=fit_intercept)
        np.testing.assert_allclose(coef[b], ref.coef_[0], atol=1e-4, rtol=0)
        assert abs(icpt[b] - ref.intercept_[0]) < 1e-4
        margin = ref.decision_function(xt)
        ours = (xt @ coef[b] + icpt[b]) > 0
        clear = np.abs(margin) > 1e-6  # a tie is a tie only up to the fits' precision
        np.testing.assert_array_equal(ours[clear], ref.predict(xt)[clear] > 0.5)


def test_batched_attempts_equal_the_per_model_oracle():
    """The same bootstraps, statuses and metric vectors as run_attempt's scikit-learn fit."""
    data = _data(seed=1)
    split = split_round(data, seed=5, round_id=2, test_fraction=0.3)
    oracle = OracleModel(model="logistic_regression", k=300, min_accuracy=0.72,
                         model_params=TIGHT)
    got = run_attempts_batched(data, split, oracle, seed=5, round_id=2, attempts=range(40))
    statuses = set()
    for a, res in enumerate(got):
        ref = run_attempt(data, split, oracle, seed=5, round_id=2, attempt=a)
        assert (res.status, res.reason) == (ref.status, ref.reason)
        np.testing.assert_allclose(res.metrics, ref.metrics, rtol=1e-9, atol=1e-12)
        assert all(v >= 0 for v in res.cpu)
        statuses.add(str(res.status))
    assert statuses == {"accepted", "rejected"}  # both outcomes exercised
    # the identity E-Opp = -FNR-dif holds model by model: r = -1 over the kept models
    names = list(oracle.metrics)
    v = np.stack([r.metrics for r in got if r.status == "accepted"])
    tpr, fnr = v[:, names.index("tpr_difference")], v[:, names.index("fnr_difference")]
    assert np.corrcoef(tpr, fnr)[0, 1] == pytest.approx(-1, abs=1e-12)


def test_batched_round_runs_the_sequential_loops_attempts():
    data = _data(seed=2)
    split = split_round(data, seed=7, round_id=0, test_fraction=0.3)
    oracle = OracleModel(model="logistic_regression", k=200, min_accuracy=0.7,
                         model_params=TIGHT)
    for first, need, cap in [(0, 30, 200), (5, 10, 12), (0, 100, 90)]:
        seq, accepted, a = [], 0, first
        while accepted < need and a < cap:  # the loop run_round_ids runs
            res = run_attempt(data, split, oracle, seed=7, round_id=0, attempt=a)
            accepted += res.status == "accepted"
            seq.append((a, str(res.status)))
            a += 1
        got = run_round_batched(data, split, oracle, seed=7, round_id=0, first=first,
                                need=need, cap=cap)
        assert [(a, str(r.status)) for a, r in got] == seq


def test_only_the_l2_logistic_objective_is_batched():
    assert batched_family("logistic_regression", None)
    assert batched_family("logistic_regression", {"C": 0.5, "max_iter": 50})
    assert not batched_family("linear_svm", None)
    assert not batched_family("random_forest", None)
    assert not batched_family("logistic_regression", {"penalty": "l1", "solver": "saga"})
    assert not batched_family("logistic_regression", {"solver": "liblinear"})
    assert not batched_family("logistic_regression", {"class_weight": "balanced"})


def test_spark_tasks_batched_equal_per_model(spark):
    rng = np.random.default_rng(4)
    n = 900
    x = rng.random((n, 4))
    priv = rng.random(n) < 0.5
    y = (rng.random(n) < 1 / (1 + np.exp(-(4 * (x[:, 0] - 0.5) + 0.7 * priv)))).astype(float)
    pdf = pd.DataFrame({"_fs_key": [f"k{i}" for i in range(n)], "_fs_label": y,
                        "_fs_x": [list(r) for r in x], "_fs_w": 1.0, "_fs_p_0": priv})
    s = draw_stratified_sample(spark.createDataFrame(pdf), priv_cols=["_fs_p_0"],
                               attributes=["sex"], max_rows=600, seed=5)
    kw = {"attributes": [0], "models": ["logistic_regression"], "seeds": [31],
          "n_samples": 20, "rounds": 3, "k": 150, "min_accuracy": 0.6, "attempt_cap": 80,
          "model_params": {"logistic_regression": TIGHT}, "partitions": 2}
    a = run_oracle_tasks(spark, s, OracleJob(linear_fits="batched", **kw)).attempts
    b = run_oracle_tasks(spark, s, OracleJob(linear_fits="per_model", **kw)).attempts
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-9, atol=1e-12)
