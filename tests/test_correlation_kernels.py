"""Kernels of the correlation audit, without Spark: oracle, Pearson/interval, clustering."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from fairspark.audits.base import derive_seed
from fairspark.correlation import (
    DEFAULT_METRICS,
    CorrelationParams,
    EmptyCellError,
    OracleData,
    OracleModel,
    cluster_metrics,
    estimate_correlations,
    make_model,
    pairwise_pearson,
    pivot_clustering,
    run_attempt,
    search_tau,
    split_round,
)


def _toy(n: int = 600, seed: int = 3, weights: bool = True) -> OracleData:
    rng = np.random.default_rng(seed)
    x = rng.random((n, 4))
    priv = rng.random(n) < 0.45
    logit = 4 * (x[:, 0] - 0.5) + 2 * (x[:, 1] - 0.5) + 0.7 * priv
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(float)
    w = rng.choice([1.0, 2.0, 0.5], size=n) if weights else np.ones(n)
    return OracleData(x=x, y=y, priv=priv, w=w)


# ---------------------------------------------------------------- plain reference loop
def _reference_split(d: OracleData, seed: int, round_id: int, test_fraction: float):
    rng = np.random.default_rng(derive_seed(seed, "split", round_id))
    cell = 2 * d.priv.astype(int) + d.y.astype(int)
    train, test = [], []
    for c in range(4):
        perm = rng.permutation(np.flatnonzero(cell == c))
        nt = int(min(max(np.floor(test_fraction * len(perm) + 0.5), 1), len(perm) - 1))
        test.extend(perm[:nt].tolist())
        train.append(np.sort(perm[nt:]))
    return train, np.sort(np.array(test))


def _reference_metrics(y, pred, priv, w) -> dict[str, float]:
    """The 20 catalogue metrics written out by hand (independent of metrics._core)."""

    def rates(mask):
        yy, pp, ww = y[mask], pred[mask], w[mask]
        tp = ww[(yy == 1) & (pp == 1)].sum()
        fp = ww[(yy == 0) & (pp == 1)].sum()
        tn = ww[(yy == 0) & (pp == 0)].sum()
        fn = ww[(yy == 1) & (pp == 0)].sum()
        div = lambda a, b: a / b if b != 0 else np.nan
        return {
            "selection_rate": div(tp + fp, tp + fp + tn + fn),
            "tpr": div(tp, tp + fn),
            "fpr": div(fp, fp + tn),
            "fnr": div(fn, tp + fn),
            "ppv": div(tp, tp + fp),
            "npv": div(tn, tn + fn),
            "fdr": div(fp, tp + fp),
            "for": div(fn, tn + fn),
            "error_rate": div(fp + fn, tp + fp + tn + fn),
        }

    u, p = rates(~priv), rates(priv)
    ratio = lambda a, b: a / b if b != 0 else np.nan
    out = {
        "statistical_parity_difference": u["selection_rate"] - p["selection_rate"],
        "disparate_impact": ratio(u["selection_rate"], p["selection_rate"]),
    }
    for r in ("tpr", "fpr", "fnr", "ppv", "npv", "fdr", "for", "error_rate"):
        out[f"{r}_difference"] = u[r] - p[r]
        out[f"{r}_ratio"] = ratio(u[r], p[r])
    out["average_odds_difference"] = ((u["fpr"] - p["fpr"]) + (u["tpr"] - p["tpr"])) / 2
    out["equalized_odds_difference"] = max(abs(u["tpr"] - p["tpr"]), abs(u["fpr"] - p["fpr"]))
    return out


def _reference_attempt(d: OracleData, model: str, seed: int, round_id: int, attempt: int, k: int):
    train, test = _reference_split(d, seed, round_id, 0.3)
    rng = np.random.default_rng(derive_seed(seed, round_id, attempt))
    u = rng.random(4)
    sizes = np.rint(u / u.sum() * k).astype(int)
    idx = np.concatenate(
        [train[c][rng.integers(0, len(train[c]), size=sizes[c])] for c in range(4) if sizes[c]]
    )
    rs = int(rng.integers(0, 2**31 - 1))
    if model == "logistic_regression":
        clf = LogisticRegression(max_iter=200, random_state=rs)
    else:
        clf = RandomForestClassifier(n_estimators=50, n_jobs=1, random_state=rs)
    clf.fit(d.x[idx], d.y[idx])
    pred = clf.predict(d.x[test])
    acc = d.w[test][pred == d.y[test]].sum() / d.w[test].sum()
    return acc, _reference_metrics(d.y[test], pred, d.priv[test], d.w[test])


@pytest.mark.parametrize("model", ["logistic_regression", "random_forest"])
def test_oracle_equals_plain_sklearn_loop(model):
    d = _toy()
    seed = 1234
    for round_id, attempt in [(0, 0), (0, 7), (3, 2)]:
        split = split_round(d, seed=seed, round_id=round_id, test_fraction=0.3)
        got = run_attempt(
            d, split, OracleModel(model=model, k=300, min_accuracy=0.0),
            seed=seed, round_id=round_id, attempt=attempt,
        )
        acc, ref = _reference_attempt(d, model, seed, round_id, attempt, 300)
        assert got.status == "accepted"
        assert got.accuracy == pytest.approx(acc, abs=1e-12)
        expected = np.array([ref[m] for m in DEFAULT_METRICS])
        np.testing.assert_allclose(got.metrics, expected, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_oracle_rejects_below_min_accuracy_and_names_reason():
    d = _toy()
    split = split_round(d, seed=1, round_id=0, test_fraction=0.3)
    res = run_attempt(
        d, split, OracleModel(model="linear_svm", k=200, min_accuracy=1.0),
        seed=1, round_id=0, attempt=0,
    )
    assert res.status == "rejected"
    assert res.reason.startswith("accuracy ") and "< min_accuracy 1.0" in res.reason


def test_oracle_empty_cell_raises_specific_error():
    d = _toy()
    # no privileged row with the favourable label
    keep = ~(d.priv & (d.y == 1))
    d2 = OracleData(x=d.x[keep], y=d.y[keep], priv=d.priv[keep], w=d.w[keep])
    split = split_round(d2, seed=1, round_id=0, test_fraction=0.3)
    with pytest.raises(EmptyCellError, match="privileged, favourable label"):
        run_attempt(
            d2, split, OracleModel(model="logistic_regression", k=200, min_accuracy=0),
            seed=1, round_id=0, attempt=0,
        )


def test_make_model_rejects_unknown_hyperparameter():
    with pytest.raises(ValueError, match=r"unknown hyperparameters \['depth'\]"):
        make_model("random_forest", {"depth": 3}, random_state=0)
    assert make_model("mlp", {"hidden_layer_sizes": [8]}, random_state=0).hidden_layer_sizes == (8,)


# ---------------------------------------------------------------- Pearson and intervals
def test_identities_on_oracle_samples():
    d = _toy(weights=False)
    split = split_round(d, seed=5, round_id=0, test_fraction=0.3)
    vals = np.array(
        [
            run_attempt(
                d, split, OracleModel(model="linear_svm", k=200, min_accuracy=0),
                seed=5, round_id=0, attempt=a,
            ).metrics
            for a in range(40)
        ]
    )
    r, count, _ = pairwise_pearson(vals, names=DEFAULT_METRICS)
    i, j = DEFAULT_METRICS.index("tpr_difference"), DEFAULT_METRICS.index("fnr_difference")
    assert abs(r[i, j] + 1.0) < 1e-9
    a, b = DEFAULT_METRICS.index("ppv_difference"), DEFAULT_METRICS.index("fdr_difference")
    assert abs(r[a, b] + 1.0) < 1e-9
    for m in range(len(DEFAULT_METRICS)):
        if np.isfinite(r[m, m]):
            assert abs(r[m, m] - 1.0) < 1e-9
    assert count[i, j] == np.isfinite(vals[:, i]).sum()


def test_pairwise_pearson_matches_scipy_on_rows_where_both_defined():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(60, 4))
    v[:, 1] += 0.8 * v[:, 0]
    v[rng.random(60) < 0.2, 0] = np.nan
    v[rng.random(60) < 0.3, 2] = np.nan
    r, count, reason = pairwise_pearson(v)
    for i in range(4):
        for j in range(4):
            m = np.isfinite(v[:, i]) & np.isfinite(v[:, j])
            assert count[i, j] == m.sum()
            if i != j:
                assert r[i, j] == pytest.approx(stats.pearsonr(v[m, i], v[m, j])[0], abs=1e-12)
    assert reason[0, 1] is None


def test_constant_metric_gives_nan_with_reason():
    rng = np.random.default_rng(1)
    v = np.column_stack([rng.normal(size=30), np.full(30, 0.25), rng.normal(size=30)])
    r, _, reason = pairwise_pearson(v, names=["a", "const", "b"])
    assert np.isnan(r[0, 1]) and np.isnan(r[1, 1])
    assert reason[0, 1] == "const constant across the samples"
    est = estimate_correlations([v, v[::-1]], metrics=["a", "const", "b"], ci_level=0.95)
    assert np.isnan(est.r[1, 2]) and est.reason[1, 2] == "const constant across the samples"
    assert est.rounds[1, 2] == 0


def test_too_few_defined_pairs_gives_reason():
    v = np.array([[1.0, np.nan], [2.0, 1.0], [3.0, np.nan], [4.0, 2.0]])
    r, _, reason = pairwise_pearson(v, names=["a", "b"])
    assert np.isnan(r[0, 1]) and "only 2 samples where both metrics are defined" in reason[0, 1]


def test_estimate_is_mean_over_rounds_with_normal_interval():
    rng = np.random.default_rng(2)
    rounds, per = [], []
    for _ in range(5):
        a = rng.normal(size=50)
        b = 0.5 * a + rng.normal(size=50)
        rounds.append(np.column_stack([a, b]))
        per.append(np.corrcoef(a, b)[0, 1])
    est = estimate_correlations(rounds, metrics=["a", "b"], ci_level=0.9)
    z = 1.6448536269514722
    assert est.r[0, 1] == pytest.approx(np.mean(per), abs=1e-12)
    assert est.e[0, 1] == pytest.approx(z * np.std(per, ddof=1) / np.sqrt(5), abs=1e-12)
    assert est.lower[0, 1] == pytest.approx(np.mean(per) - est.e[0, 1])
    assert est.rounds[0, 1] == 5 and est.n_min[0, 1] == 50
    assert abs(est.r[0, 0] - 1) < 1e-9 and est.e[0, 0] == pytest.approx(0, abs=1e-9)


# ---------------------------------------------------------------- clustering
def _blocks(sizes, within, between=0.1):
    m = sum(sizes)
    r = np.full((m, m), between)
    start = 0
    for s, w in zip(sizes, within, strict=True):
        r[start : start + s, start : start + s] = w
        start += s
    np.fill_diagonal(r, 1.0)
    return r


def test_pivot_clustering_recovers_blocks_for_any_order():
    r = _blocks([3, 2, 2], [0.8, 0.7, 0.9])
    expected = {frozenset({0, 1, 2}), frozenset({3, 4}), frozenset({5, 6})}
    for seed in range(5):
        order = np.random.default_rng(seed).permutation(7)
        cl = pivot_clustering(r, tau=0.5, order=order)
        assert {frozenset(m) for _, m in cl} == expected
        assert all(p in m for p, m in cl)
    best = cluster_metrics(r, tau=0.5, repeats=10, seed=0)
    assert len(best) == 3 and sorted(len(m) for _, m in best.clusters) == [2, 2, 3]


def test_repeats_keep_fewest_clusters():
    # a chain: a-b and b-c correlated, a-c not. Pivot b gives 1 cluster, pivot a or c gives 2.
    r = np.array([[1.0, 0.9, 0.1], [0.9, 1.0, 0.9], [0.1, 0.9, 1.0]])
    assert len(pivot_clustering(r, tau=0.5, order=np.array([0, 1, 2]))) == 2
    assert len(pivot_clustering(r, tau=0.5, order=np.array([1, 0, 2]))) == 1
    best = cluster_metrics(r, tau=0.5, repeats=20, seed=0)
    assert len(best) == 1 and best.representatives == [1]


def test_negative_correlation_never_joins_a_cluster():
    r = np.array([[1.0, -1.0], [-1.0, 1.0]])
    assert len(cluster_metrics(r, tau=0.5, repeats=5, seed=0)) == 2


def test_tau_search_reports_tau_or_unreachable():
    r = _blocks([3, 2, 2], [0.8, 0.7, 0.9])
    # tau 0.1 -> 1 cluster, 0.7 -> 3, 0.8 -> 4 (block 2 splits), 0.9 -> 6, above -> 7
    found = search_tau(r, k=3, repeats=10, seed=0)
    assert found.tau == pytest.approx(0.7) and len(found.clustering) == 3
    assert search_tau(r, k=4, repeats=10, seed=0).tau == pytest.approx(0.8)
    assert search_tau(r, k=7, repeats=10, seed=0).tau > 0.9
    nope = search_tau(r, k=2, repeats=10, seed=0)
    assert nope.clustering is None and nope.tau is None
    assert nope.message.startswith("2 representatives are not reachable")
    assert "3 (tau 0.7..0.7)" in nope.message


# ---------------------------------------------------------------- params
def test_params_defaults_and_errors():
    p = CorrelationParams()
    assert (p.n_samples, p.rounds, p.min_accuracy, p.tau, p.attempt_cap) == (
        1000,
        "auto",
        0.5,
        0.5,
        5000,
    )
    assert CorrelationParams(n_representatives=3).tau is None
    with pytest.raises(ValueError, match="not both"):
        CorrelationParams(tau=0.4, n_representatives=3)
    with pytest.raises(ValueError, match="extra"):
        CorrelationParams(bogus=1)
    with pytest.raises(ValueError, match="unknown metrics"):
        CorrelationParams(metrics=["tpr_difference", "nope"])


def test_constant_metric_is_left_out_of_the_clustering_with_its_reason():
    from fairspark.correlation.audit import _cluster
    from fairspark.correlation.results import ModelResult
    from fairspark.status import Status

    rng = np.random.default_rng(4)
    rounds = []
    for _ in range(3):
        a = rng.normal(size=40)
        rounds.append(
            np.column_stack(
                [a, a + 0.1 * rng.normal(size=40), np.full(40, 0.0), rng.normal(size=40)]
            )
        )
    est = estimate_correlations(rounds, metrics=["a", "a2", "flat", "b"], ci_level=0.95)
    res = ModelResult(attribute="sex", model="knn", status=Status.OK)
    _cluster(est, CorrelationParams(tau=0.5, repeats=5), 0, res)
    assert res.excluded == {
        "flat": "not clustered: no defined correlation with another metric "
        "(flat constant across the samples)"
    }
    assert res.clustered_metrics == ["a", "a2", "b"]
    groups = {frozenset(res.clustered_metrics[j] for j in m) for _, m in res.clustering.clusters}
    assert groups == {frozenset({"a", "a2"}), frozenset({"b"})}
