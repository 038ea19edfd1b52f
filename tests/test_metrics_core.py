"""The numpy metric core against fairlearn / plain pandas computed from rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import (
    MetricFrame,
    false_negative_rate,
    false_positive_rate,
    selection_rate,
    true_negative_rate,
    true_positive_rate,
)

from fairspark.metrics import (
    CATALOGUE,
    catalogue_from_counts,
    compare_groups,
    group_rates,
    inequality_indices,
)


def _cells(y, p, w=None):
    """Confusion cells of a group from raw rows (test-side, written independently)."""
    y = np.asarray(y, float)
    p = np.asarray(p, float)
    w = np.ones(len(y)) if w is None else np.asarray(w, float)
    lab = ~np.isnan(y)
    return {
        "tp": w[lab & (y == 1) & (p == 1)].sum(), "fp": w[lab & (y == 0) & (p == 1)].sum(),
        "tn": w[lab & (y == 0) & (p == 0)].sum(), "fn": w[lab & (y == 1) & (p == 0)].sum(),
        "up": w[~lab & (p == 1)].sum(), "un": w[~lab & (p == 0)].sum(),
    }


def test_catalogue_has_the_twenty_signed_metrics():
    assert len(CATALOGUE) >= 20
    for r in ("tpr", "fpr", "fnr", "ppv", "npv", "fdr", "for", "error_rate"):
        assert f"{r}_difference" in CATALOGUE and f"{r}_ratio" in CATALOGUE
    for m in ("statistical_parity_difference", "disparate_impact", "average_odds_difference",
              "equalized_odds_difference"):
        assert m in CATALOGUE


def _reference(y, p, s_unpriv, w=None):
    """Rates per group with fairlearn (+ pandas for what fairlearn lacks)."""
    groups = np.where(s_unpriv, "u", "p")
    kw = {} if w is None else {"sample_params": {m: {"sample_weight": w} for m in
                                                 ("sr", "tpr", "fpr", "fnr", "tnr")}}
    mf = MetricFrame(
        metrics={"sr": selection_rate, "tpr": true_positive_rate, "fpr": false_positive_rate,
                 "fnr": false_negative_rate, "tnr": true_negative_rate},
        y_true=y, y_pred=p, sensitive_features=groups, **kw,
    )
    by = mf.by_group
    ww = np.ones(len(y)) if w is None else w
    d = pd.DataFrame({"y": y, "p": p, "g": groups, "w": ww})
    out = {}
    for g in ("u", "p"):
        sub = d[d.g == g]
        pp, pn = sub[sub.p == 1], sub[sub.p == 0]
        out[g] = {
            "selection_rate": by.loc[g, "sr"], "tpr": by.loc[g, "tpr"],
            "fpr": by.loc[g, "fpr"], "fnr": by.loc[g, "fnr"],
            "ppv": np.average(pp.y == 1, weights=pp.w),
            "npv": np.average(pn.y == 0, weights=pn.w),
            "fdr": np.average(pp.y == 0, weights=pp.w),
            "for": np.average(pn.y == 1, weights=pn.w),
            "error_rate": np.average(sub.y != sub.p, weights=sub.w),
        }
    return out


def _check_against_reference(y, p, s_unpriv, w=None):
    ref = _reference(y, p, s_unpriv, w)
    cu = _cells(y[s_unpriv], p[s_unpriv], None if w is None else w[s_unpriv])
    cp = _cells(y[~s_unpriv], p[~s_unpriv], None if w is None else w[~s_unpriv])
    got = compare_groups(cu, cp)
    for r in ("tpr", "fpr", "fnr", "ppv", "npv", "fdr", "for", "error_rate"):
        assert got[f"{r}_difference"] == pytest.approx(ref["u"][r] - ref["p"][r], abs=1e-12)
        assert got[f"{r}_ratio"] == pytest.approx(ref["u"][r] / ref["p"][r], rel=1e-12)
    sr_u, sr_p = ref["u"]["selection_rate"], ref["p"]["selection_rate"]
    assert got["statistical_parity_difference"] == pytest.approx(sr_u - sr_p, abs=1e-12)
    assert got["disparate_impact"] == pytest.approx(sr_u / sr_p, rel=1e-12)
    dt = ref["u"]["tpr"] - ref["p"]["tpr"]
    df = ref["u"]["fpr"] - ref["p"]["fpr"]
    assert got["average_odds_difference"] == pytest.approx((dt + df) / 2, abs=1e-12)
    assert got["equalized_odds_difference"] == pytest.approx(max(abs(dt), abs(df)), abs=1e-12)
    assert got["dp"] == pytest.approx(abs(sr_u - sr_p), abs=1e-12)
    assert got["eo"] == pytest.approx(abs(dt), abs=1e-12)
    assert got["pqp"] == pytest.approx(abs(ref["u"]["ppv"] - ref["p"]["ppv"]), abs=1e-12)


def test_catalogue_on_adult_matches_fairlearn(adult_pdf):
    y = (adult_pdf.income == ">50K").to_numpy().astype(float)
    p = adult_pdf.prediction.to_numpy().astype(float)
    _check_against_reference(y, p, (adult_pdf.sex != "Male").to_numpy())
    _check_against_reference(y, p, (adult_pdf.race != "White").to_numpy())


def test_catalogue_on_compas_matches_fairlearn_with_weights(compas_pdf):
    y = compas_pdf.two_year_recid.to_numpy().astype(float)
    p = (compas_pdf.decile_score >= 5).to_numpy().astype(float)
    unpriv = (compas_pdf.race != "Caucasian").to_numpy()
    _check_against_reference(y, p, unpriv)
    w = np.random.default_rng(3).uniform(0.2, 3.0, len(y))
    _check_against_reference(y, p, unpriv, w)


def test_gei_and_theil_match_per_row_formula(compas_pdf):
    y = compas_pdf.two_year_recid.to_numpy().astype(float)
    p = (compas_pdf.decile_score >= 5).to_numpy().astype(float)
    b = p - y + 1
    mu = b.mean()
    a = 0.5
    gei = np.sum((b / mu) ** a - 1) / (len(b) * a * (a - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(b == 0, 0.0, (b / mu) * np.log(b / mu))
    theil = t.mean()
    g = compas_pdf.race.to_numpy()
    groups = [_cells(y[g == v], p[g == v]) for v in np.unique(g)]
    got = inequality_indices(groups, alpha=0.5)
    assert got["gei"] == pytest.approx(gei, rel=1e-12)
    assert got["theil"] == pytest.approx(theil, rel=1e-12)
    # between-group: every row's benefit replaced by its group's mean benefit
    mu_g = pd.Series(b).groupby(g).transform("mean").to_numpy()
    bg = np.sum((mu_g / mu) ** a - 1) / (len(b) * a * (a - 1))
    bt = np.mean((mu_g / mu) * np.log(mu_g / mu))
    assert got["between_group_gei"] == pytest.approx(bg, rel=1e-10)
    assert got["between_group_theil"] == pytest.approx(bt, rel=1e-10)


def test_empty_denominators_give_nan_not_a_constant():
    # unprivileged group has no favourable labels: TPR undefined
    cu = {"tp": 0, "fp": 3, "tn": 5, "fn": 0}
    cp = {"tp": 4, "fp": 1, "tn": 5, "fn": 2}
    got = compare_groups(cu, cp)
    assert np.isnan(got["tpr_difference"]) and np.isnan(got["fnr_ratio"])
    assert np.isnan(got["equalized_odds_difference"])
    assert got["fpr_difference"] == pytest.approx(3 / 8 - 1 / 6)
    # privileged selection rate 0: disparate impact undefined
    got = compare_groups({"tp": 1, "tn": 1}, {"tn": 2, "fn": 2})
    assert np.isnan(got["disparate_impact"])


def test_unlabelled_rows_count_only_for_selection_rate():
    c = {"tp": 2, "fp": 1, "tn": 3, "fn": 4, "up": 5, "un": 5}
    r = group_rates(c)
    assert r["selection_rate"] == pytest.approx(8 / 20)
    assert r["tpr"] == pytest.approx(2 / 6)
    assert r["error_rate"] == pytest.approx(5 / 10)


def test_vectorised_over_many_samples():
    rng = np.random.default_rng(0)
    cu = {c: rng.integers(1, 50, 100).astype(float) for c in ("tp", "fp", "tn", "fn")}
    cp = {c: rng.integers(1, 50, 100).astype(float) for c in ("tp", "fp", "tn", "fn")}
    vec = catalogue_from_counts(cu, cp)
    for i in (0, 17, 99):
        one = catalogue_from_counts({k: v[i] for k, v in cu.items()},
                                    {k: v[i] for k, v in cp.items()})
        for k in one:
            np.testing.assert_allclose(vec[k][i], one[k], rtol=1e-14)
    # identity: FNR difference = -TPR difference
    np.testing.assert_allclose(vec["fnr_difference"], -vec["tpr_difference"], atol=1e-15)
