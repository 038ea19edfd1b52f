"""mdfa validation: planted violations on the paper's synthetic data, and COMPAS.

The verdict test runs at the default settings (6 splits, n = 3000).

Settings (documented in docs/mdfa.md): 20 splits, n = 5000, SVM RBF auditor as in the
paper's Fig. 1. To keep the suite short on 2 cores the balancing net trains 10 epochs
with one L2 strength (mu = 0.2: quadratic kernel, 60 epochs; COMPAS: the defaults),
and the certificate is fitted on the standardised raw features with
``certificate_tilt=0.3`` (the 8-unit representation loses the planted disc too often at
n = 5000; docs/mdfa_validation.md has both). The planted values come from the
generator's known region and exact propensities, never from the code under test.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import COMPAS_CSV, write_parquet
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier

from fairspark.config import parse_config
from fairspark.mdfa import MDFAParams, MDFASample, make_synthetic, run_splits
from fairspark.runner import run_audit_job

SYNTH = {
    "auditor": "svm_rbf", "certificate_features": "raw", "certificate_tilt": 0.3,
    "epochs": 10, "l2_grid": [0.001], "splits": 20, "worst_violation": False,
}


def _gammas(spark, *, nu: float, mu: float, seed: int = 0):
    d = make_synthetic(n=5000, nu=nu, mu=mu, seed=seed)
    smp = MDFASample(x=d.x, s=d.s, y=d.y, desc=d.x, feature_names=["x1", "x2"],
                     desc_names=["x1", "x2"])
    # the paper's imbalance e^{mu (x1+x2)^2} is in the second moments, which the linear
    # kernel cannot match (fair, mu = 0.2: gamma 0.007 with it even after 60 epochs);
    # the quadratic kernel (the default, on rank features) removes it once trained long
    # enough: this fast setting trains 10 epochs, so mu > 0 gets 60
    extra = {"epochs": 60} if mu > 0 else {}
    p = MDFAParams(**{**SYNTH, **extra})
    seeds = [10_000 * seed + 7 * k + 1 for k in range(p.splits)]
    res = run_splits(spark, smp, seeds=seeds, params=p)
    g = res["gamma_pos"].to_numpy(float)
    return d, g


@pytest.mark.parametrize(("nu", "mu"), [(0.5, 0.0), (0.8, 0.0), (0.5, 0.2)])
def test_planted_gamma_is_recovered(spark, nu, mu):
    d, g = _gammas(spark, nu=nu, mu=mu)
    assert d.gamma > 0.015
    assert abs(g.mean() - d.gamma) <= 0.25 * d.gamma, (g.mean(), d.gamma)
    assert g.std(ddof=1) <= d.gamma / 3, (g.std(ddof=1), d.gamma)


@pytest.mark.parametrize("mu", [0.0, 0.2])
def test_fair_classifier_gives_gamma_near_zero(spark, mu):
    _, g = _gammas(spark, nu=0.0, mu=mu)
    assert abs(g.mean()) <= 0.005, g.mean()


# ------------------------------------------------------------------------ COMPAS
def _compas() -> pd.DataFrame:
    df = pd.read_csv(COMPAS_CSV)
    keep = ["id", "sex", "race", "age", "priors_count", "c_charge_degree", "juv_fel_count",
            "juv_misd_count", "v_score_text", "two_year_recid"]
    return df[keep].dropna().reset_index(drop=True)


@pytest.fixture(scope="module")
def compas_run(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("mdfa_compas")
    inp = write_parquet(_compas(), base / "in", n_files=2)
    cfg = {
        "dataset": "compas_mdfa", "run_date": "2026-11-29", "seed": 7, "input": {"path": inp},
        "columns": {
            "features": ["priors_count", "c_charge_degree", "age", "juv_fel_count",
                         "juv_misd_count"],
            "categorical": ["c_charge_degree"],
            "sensitive": [
                {"column": "race", "privileged_expr": "race <> 'African-American'",
                 "name": "race"},
                {"column": "sex", "privileged": "Female"},
            ],
            "label": {"column": "two_year_recid", "positive": 1},
            # 'High' violent risk is the unfavourable decision; gamma(y=-1) is the paper's
            "favourable": "negative",
            "prediction": {"column": "v_score_text", "positive": "High"},
            "row_key": "id",
        },
        "audits": {"group": None, "mdfa": {"splits": 20, "worst_violation": False}},
        "output": {"path": str(base / "out"), "report": False},
    }
    res = run_audit_job(spark, parse_config(cfg))
    return res


def _row(res, attribute, metric):
    rows = pd.DataFrame(res.rows)
    return rows[(rows.audit == "mdfa") & (rows.attribute == attribute)
                & (rows.metric == metric)].iloc[0]


def test_compas_race_gamma_and_its_null_reference(compas_run):
    r = _row(compas_run, "race", "gamma_unfavourable")  # y = High violent risk
    a = compas_run.summary["audits"]["mdfa"]["attributes"]["race"]
    c = a["corrected"]["gamma_neg"]
    # the raw mean over splits is the paper's estimate: 0.024 +- 0.004 (see
    # docs/mdfa_compas_study.md); the row reports it less its features-only reference
    assert 0.005 < c["raw"] < 0.045
    assert c["raw"] == pytest.approx(a["gamma_neg"]["mean"])
    assert r.value == pytest.approx(c["raw"] - c["reference"])
    assert r.lower <= r.value <= r.upper
    # the verdict is judged against 20 null draws (one per split at 20 splits)
    assert a["null"]["draws"] == 20
    assert a["verdict"].startswith("evidence of" if a["null"]["evidence"] else "no evidence")
    # decisions redrawn from the five features alone still give a clearly positive
    # gamma_max: the part of the raw gamma that the verdict (and the row) does not count
    assert 0.002 < a["null"]["mean"] < c["raw"]


def test_default_verdict_finds_a_planted_violation_and_not_a_features_only_decision():
    """Default settings (MMD net, representation, random forest): a planted violation
    (nu = 0.8) is evidence; decisions redrawn from P(y | x) estimated by an independent
    random forest without s, on the same rows, are not. The balancing depends on the
    rows only, so both decision vectors share it (run_split(state=))."""
    import dataclasses

    from fairspark.audits.base import derive_seed
    from fairspark.mdfa import balance_split, null_reference, run_split
    from fairspark.mdfa.results import split_frame

    d = make_synthetic(n=3000, nu=0.8, mu=0.0, seed=4)
    smp = MDFASample(x=d.x, s=d.s, y=d.y, desc=d.x, feature_names=["x1", "x2"],
                     desc_names=["x1", "x2"])
    p = MDFAParams(splits=6, worst_violation=False)
    seeds = [derive_seed(3, "split", i) for i in range(p.splits)]
    states = [balance_split(smp, seed=sd, params=p) for sd in seeds]
    rf = RandomForestClassifier(200, min_samples_leaf=20, random_state=0, n_jobs=1)
    p_x = rf.fit(d.x, d.y > 0).predict_proba(d.x)[:, 1]
    y_null = np.where(np.random.default_rng(5).random(len(d.y)) < p_x, 1, -1)

    frames = {}

    def judged(y):
        s2 = dataclasses.replace(smp, y=y).with_null_model(seed=11)
        res = split_frame([run_split(s2, split=i, seed=sd, params=p, state=st)
                           for i, (sd, st) in enumerate(zip(seeds, states, strict=True))])
        frames[len(frames)] = res
        return null_reference(res, level=p.verdict_level)

    planted, null = judged(d.y), judged(y_null)
    assert planted.evidence, planted
    assert planted.excess > 0.5 * d.gamma, (planted.excess, d.gamma)
    assert not null.evidence, null
    # the reported gamma (raw mean less the features-only reference)
    # is within 25% of the planted gamma(+1) (the generator's region and exact
    # propensities; here 0.0353 for 0.0434: -19%, raw -11%), and its 95% interval,
    # which carries the sampling of the rows (0.0227 - 0.0478; without the sampling
    # term it was 0.0275 - 0.0431 and missed), covers it; for the features-only
    # decisions the interval of the reported gamma_max holds 0
    from fairspark.mdfa.null import corrected_gamma

    rep = corrected_gamma(frames[0], observed="gamma_pos")
    assert abs(rep.value - d.gamma) <= 0.25 * d.gamma, (rep, d.gamma)
    assert rep.lower <= d.gamma <= rep.upper, (rep, d.gamma)
    assert rep.value == pytest.approx(frames[0]["gamma_pos"].mean() - rep.reference)
    zero = corrected_gamma(frames[1], observed="gamma_max")
    assert zero.lower <= 0.0 <= zero.upper, zero


def test_compas_gender_gamma_matches_an_importance_sampling_reference(compas_run):
    """Gender: the paper reports ~0. With these 5 features an independent estimate with
    propensity-score weights (gradient boosting) and the paper's RF certificate finds a
    small positive gamma too; mdfa must agree with it."""
    df = _compas()
    x = np.column_stack([df.priors_count, (df.c_charge_degree == "F"), df.age,
                         df.juv_fel_count, df.juv_misd_count]).astype(float)
    y = np.where(df.v_score_text == "High", 1, -1)
    s = np.where(df.sex == "Male", 1, -1)
    ref = []
    for k in range(5):
        perm = np.random.default_rng(k).permutation(len(s))
        te, tr = perm[: int(0.3 * len(s))], perm[int(0.3 * len(s)):]
        prop = HistGradientBoostingClassifier(max_depth=3, random_state=k).fit(x[tr], s[tr] > 0)
        p = np.clip(prop.predict_proba(x)[:, 1], 0.02, 0.98)
        w = np.where(s > 0, (1 - p) / p, 1.0)
        for idx in (tr, te):  # rescale s=+1 mass to the s=-1 count within each part
            pos = idx[s[idx] > 0]
            w[pos] *= (s[idx] < 0).sum() / w[pos].sum()
        c = RandomForestClassifier(100, max_depth=2, random_state=k).fit(
            x[tr], s[tr] * y[tr], sample_weight=w[tr]).predict(x[te])
        acc = np.sum(w[te] * (c == s[te] * y[te])) / w[te].sum()
        rho = np.sum(w[te] * (s[te] == y[te])) / w[te].sum()
        ref.append((acc + rho - 1) / 4)
    got = _row(compas_run, "sex", "gamma_unfavourable").value
    assert abs(got - np.mean(ref)) < 0.006, (got, np.mean(ref))
    assert abs(got) < 0.02
