"""Confidence intervals: hand-checked values and a plain-numpy coverage simulation.

The simulation draws 2,000 samples per scenario from known cell probabilities, so the
true value of every metric is known (computed here by hand from the probabilities, not
with fairspark), and counts how often the nominal 95% interval holds it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fairspark.metrics._core import BASELINES, CATALOGUE, CELLS
from fairspark.metrics._intervals import (
    comparison_intervals,
    comparison_support,
    inequality_intervals,
    rate_interval,
    wilson,
    z_value,
)

REPS = 2000
LEVEL = 0.95
BAND = (0.93, 0.97)
#: Absolute gaps and equalized odds (a max of two) are bounded by their fair value 0.
#: Under normal theory their intervals cover 95-96% (|d|) and 95-97.5% (max) whatever
#: the gap; Wilson limits add a little conservatism in small groups. They must never
#: under-cover; the band's upper edge allows for that documented conservatism.
FOLDED = {"dp", "eo", "pqp", "equalized_odds_difference"}
FOLDED_BAND = (0.93, 0.985)


# ----------------------------------------------------------------------- hand values


def test_z_value_and_bad_level():
    assert z_value(0.95) == pytest.approx(1.959964, abs=1e-6)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        z_value(95)


def test_wilson_zero_of_ten():
    # 0/10: upper = z^2 / (n + z^2) (Wilson 1927), lower = 0.
    z = z_value(0.95)
    lo, hi = wilson(0.0, 10.0, z)
    assert lo == 0.0
    assert hi == pytest.approx(z * z / (10 + z * z), abs=1e-12)


def test_newcombe_published_example():
    # Newcombe (1998), Stat Med 17:873, Table II example (a): 56/70 - 48/80,
    # method 10 (hybrid score): 0.0524 to 0.3339.
    unpriv = {"tp": 56.0, "fn": 14.0}
    priv = {"tp": 48.0, "fn": 32.0}
    lo, hi = comparison_intervals(unpriv, priv)["tpr_difference"]
    assert lo == pytest.approx(0.0524, abs=5e-5)
    assert hi == pytest.approx(0.3339, abs=5e-5)


def test_every_metric_has_an_interval_and_undefined_ones_say_why():
    unpriv = {"tp": 5.0, "fp": 3.0, "tn": 7.0, "fn": 2.0, "up": 1.0, "un": 4.0}
    priv = {"tp": 9.0, "fp": 0.0, "tn": 8.0, "fn": 6.0, "up": 2.0, "un": 3.0}
    ci = comparison_intervals(unpriv, priv)
    assert set(ci) == set(CATALOGUE) | set(BASELINES)
    # FPR of the privileged group is 0, so the FPR ratio is undefined, with a reason.
    assert math.isnan(ci["fpr_ratio"][0]) and "privileged" in ci["fpr_ratio"].reason
    assert ci["fpr_difference"].reason is None
    for name, (lo, hi) in ci.items():
        if name != "fpr_ratio" and not name.startswith("fdr_ratio"):
            assert lo <= hi, name
    empty = rate_interval({"up": 3.0}, "tpr")
    assert math.isnan(empty[0]) and "no rows with favourable label" in empty.reason


def test_frequency_weights_equal_duplicated_rows_and_sampling_weights_widen():
    rows = {"tp": 6.0, "fn": 4.0}
    doubled = {"tp": 12.0, "fn": 8.0}
    w2 = {"tp": 6.0, "tp_w2": 12.0, "tp_n": 3.0, "fn": 4.0, "fn_w2": 8.0, "fn_n": 2.0}
    freq = rate_interval(w2, "tpr", weights="frequency")
    assert freq == pytest.approx(rate_interval(rows, "tpr"))
    # Five rows of weight 2 carry five rows' information as sampling weights.
    samp = rate_interval(w2, "tpr", weights="sampling")
    five = rate_interval({"tp": 3.0, "fn": 2.0}, "tpr")
    assert samp == pytest.approx(five)
    assert rate_interval(doubled, "tpr")[0] > samp[0]


def test_support_counts_rows_not_weights():
    u = {"tp": 50.0, "tp_n": 5.0, "fn": 50.0, "fn_n": 5.0, "fp": 1.0, "fp_n": 1.0,
         "tn": 1.0, "tn_n": 1.0}
    p = {c: 100.0 for c in CELLS} | {f"{c}_n": 100.0 for c in CELLS}
    sup = comparison_support(u, p)
    assert sup["tpr_difference"] == 10
    assert sup["average_odds_difference"] == 2  # FPR of the unprivileged rests on 2 rows
    assert sup["statistical_parity_difference"] == 12


# ------------------------------------------------------------------------ simulation


def _truth(pu: dict[str, float], pp: dict[str, float], alpha: float) -> dict[str, float]:
    """Population values of every metric, by hand from the cell probabilities."""

    def rates(p):
        lab = p["tp"] + p["fp"] + p["tn"] + p["fn"]
        return {
            "selection_rate": p["tp"] + p["fp"] + p["up"],
            "tpr": p["tp"] / (p["tp"] + p["fn"]),
            "fpr": p["fp"] / (p["fp"] + p["tn"]),
            "fnr": p["fn"] / (p["tp"] + p["fn"]),
            "ppv": p["tp"] / (p["tp"] + p["fp"]),
            "npv": p["tn"] / (p["tn"] + p["fn"]),
            "fdr": p["fp"] / (p["tp"] + p["fp"]),
            "for": p["fn"] / (p["tn"] + p["fn"]),
            "error_rate": (p["fp"] + p["fn"]) / lab,
        }

    ru, rp = rates(pu), rates(pp)
    out = {
        "statistical_parity_difference": ru["selection_rate"] - rp["selection_rate"],
        "disparate_impact": ru["selection_rate"] / rp["selection_rate"],
        "dp": abs(ru["selection_rate"] - rp["selection_rate"]),
        "eo": abs(ru["tpr"] - rp["tpr"]),
        "pqp": abs(ru["ppv"] - rp["ppv"]),
        "average_odds_difference": ((ru["fpr"] - rp["fpr"]) + (ru["tpr"] - rp["tpr"])) / 2,
        "equalized_odds_difference": max(abs(ru["tpr"] - rp["tpr"]), abs(ru["fpr"] - rp["fpr"])),
    }
    for r in ("tpr", "fpr", "fnr", "ppv", "npv", "fdr", "for", "error_rate"):
        out[f"{r}_difference"] = ru[r] - rp[r]
        out[f"{r}_ratio"] = ru[r] / rp[r]
    return out


def _draw(rng, probs: dict[str, float], n: int, weight_sigma: float | None):
    """REPS samples of n rows: per cell the weight sum, squared-weight sum, row count."""
    p = np.array([probs[c] for c in CELLS])
    cell = rng.choice(len(CELLS), size=(REPS, n), p=p / p.sum())
    if weight_sigma is None:
        w = np.ones((REPS, n))
    else:  # sampling weights, independent of the cell
        w = rng.lognormal(0.0, weight_sigma, size=(REPS, n))
    key = (np.arange(REPS)[:, None] * len(CELLS) + cell).ravel()
    size = REPS * len(CELLS)
    sums = np.bincount(key, weights=w.ravel(), minlength=size).reshape(REPS, -1)
    sq = np.bincount(key, weights=(w * w).ravel(), minlength=size).reshape(REPS, -1)
    cnt = np.bincount(key, minlength=size).reshape(REPS, -1).astype(float)
    out = {}
    for j, c in enumerate(CELLS):
        out[c], out[f"{c}_w2"], out[f"{c}_n"] = sums[:, j], sq[:, j], cnt[:, j]
    return out


UNFAIR_U = {"tp": 0.22, "fp": 0.10, "tn": 0.38, "fn": 0.18, "up": 0.05, "un": 0.07}
UNFAIR_P = {"tp": 0.33, "fp": 0.15, "tn": 0.30, "fn": 0.10, "up": 0.06, "un": 0.06}
FAIR = {"tp": 0.30, "fp": 0.12, "tn": 0.35, "fn": 0.13, "up": 0.05, "un": 0.05}

SCENARIOS = {
    # name: (probs unprivileged, probs privileged, n_u, n_p, lognormal sigma of weights)
    "small groups n=40/60, unit weights": (UNFAIR_U, UNFAIR_P, 40, 60, None),
    "small groups n=60/80, sampling weights": (UNFAIR_U, UNFAIR_P, 60, 80, 0.7),
    "n=400/1500, sampling weights": (UNFAIR_U, UNFAIR_P, 400, 1500, 0.7),
    "fair model n=300/300, unit weights": (FAIR, FAIR, 300, 300, None),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_coverage_of_the_catalogue(scenario):
    pu, pp, n_u, n_p, sigma = SCENARIOS[scenario]
    rng = np.random.default_rng(20260601 + list(SCENARIOS).index(scenario))
    cu, cp = _draw(rng, pu, n_u, sigma), _draw(rng, pp, n_p, sigma)
    truth = _truth(pu, pp, 0.5)
    ci = comparison_intervals(cu, cp, level=LEVEL)
    assert set(ci) == set(truth)
    bad = {}
    for name, (lo, hi) in ci.items():
        lo, hi = np.asarray(lo), np.asarray(hi)
        defined = np.isfinite(lo) & np.isfinite(hi)
        # Rare empty denominators (e.g. no false positive among 8 privileged negatives)
        # leave a metric undefined; coverage is judged on the defined samples, which
        # must be the vast majority.
        assert defined.mean() > 0.9, (name, defined.mean())
        t = truth[name]
        cover = float(np.mean((lo[defined] <= t + 1e-12) & (t - 1e-12 <= hi[defined])))
        band = FOLDED_BAND if name in FOLDED else BAND
        if not band[0] <= cover <= band[1]:
            bad[name] = round(cover, 4)
    assert not bad, f"coverage outside the band in {scenario!r}: {bad}"


@pytest.mark.parametrize("sigma", [None, 0.7], ids=["unit", "weighted"])
def test_coverage_of_single_rates(sigma):
    # Each rate of a group of 40 rows (selection rate on 40, TPR on ~16 rows, ...).
    rng = np.random.default_rng(7 if sigma is None else 8)
    c = _draw(rng, UNFAIR_U, 40, sigma)
    p = UNFAIR_U
    truth = {
        "selection_rate": p["tp"] + p["fp"] + p["up"],
        "base_rate": (p["tp"] + p["fn"]) / (p["tp"] + p["fp"] + p["tn"] + p["fn"]),
        "tpr": p["tp"] / (p["tp"] + p["fn"]),
        "tnr": p["tn"] / (p["tn"] + p["fp"]),
        "accuracy": (p["tp"] + p["tn"]) / (p["tp"] + p["fp"] + p["tn"] + p["fn"]),
    }
    for rate, t in truth.items():
        lo, hi = rate_interval(c, rate, level=LEVEL)
        cover = float(np.mean((lo <= t) & (t <= hi)))
        assert BAND[0] <= cover <= BAND[1], (rate, cover)


def _gei_by_hand(probs: list[np.ndarray], alpha: float) -> dict[str, float]:
    # probs[g] = (P(b=0), P(b=1), P(b=2)) of group g's labelled rows, times its share.
    p = np.sum(probs, axis=0)
    mu = (p[1] + 2 * p[2]) / p.sum()

    def gei(weights, values, a):
        shares = weights / weights.sum()
        r = values / mu
        if a == 1.0:
            terms = np.where(r > 0, r * np.log(np.where(r > 0, r, 1.0)), 0.0)
            return float(np.sum(shares * terms))
        return float(np.sum(shares * (r**a - 1)) / (a * (a - 1)))

    out = {"gei": gei(p, np.array([0.0, 1.0, 2.0]), alpha),
           "theil": gei(p, np.array([0.0, 1.0, 2.0]), 1.0)}
    gw = np.array([g.sum() for g in probs])
    gm = np.array([(g[1] + 2 * g[2]) / g.sum() for g in probs])
    out["between_group_gei"] = gei(gw, gm, alpha)
    out["between_group_theil"] = gei(gw, gm, 1.0)
    return out


def test_coverage_of_gei_and_theil():
    rng = np.random.default_rng(11)
    reps = 600  # each call is a scalar delta-method fit; 600 keeps the test quick
    n_u, n_p = 1200, 1800
    pu, pp = UNFAIR_U, UNFAIR_P
    truth_in = []
    for probs, share in ((pu, n_u), (pp, n_p)):
        lab = probs["tp"] + probs["fp"] + probs["tn"] + probs["fn"]
        truth_in.append(share * np.array([probs["fn"], probs["tp"] + probs["tn"],
                                          probs["fp"]]) / lab)
    truth = _gei_by_hand(truth_in, 0.5)
    hits = {k: 0 for k in truth}
    for _ in range(reps):
        groups = []
        for probs, n in ((pu, n_u), (pp, n_p)):
            p = np.array([probs[c] for c in CELLS])
            k = rng.multinomial(n, p / p.sum())
            groups.append(dict(zip(CELLS, k.astype(float), strict=True)))
        ci = inequality_intervals(groups, alpha=0.5, level=LEVEL)
        for key, t in truth.items():
            lo, hi = ci[key]
            hits[key] += lo <= t <= hi
    # 600 reps: Monte Carlo s.e. 0.9 points, so the band is widened by one s.e.
    cover = {k: v / reps for k, v in hits.items()}
    assert all(0.92 <= c <= 0.98 for c in cover.values()), cover
