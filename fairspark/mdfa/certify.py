"""Driver-side kernels of mdfa: certificate gamma, worst violation (Alg. 1), one split.

Everything here is plain numpy / scikit-learn / torch; the Spark tasks of
:mod:`fairspark.mdfa.spark` call :func:`run_split` unchanged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.svm import SVC, LinearSVC
from sklearn.tree import DecisionTreeClassifier, export_text

from fairspark.audits.base import derive_seed
from fairspark.mdfa.balance import balanced_weights, fit_balancing
from fairspark.mdfa.params import MDFAParams

__all__ = [
    "MDFASample",
    "certificate_gamma",
    "fit_certificate",
    "make_auditor",
    "run_split",
    "violation_delta",
    "worst_violation",
]

Predictor = Callable[[np.ndarray], np.ndarray]


@dataclass
class MDFASample:
    """The collected audit sample of one attribute (small: capped by ``sample_rows``).

    Attributes
    ----------
    x:
        Audit features ``(n, d)`` as numbers (numeric columns, one-hot categories).
    s:
        Sensitive view in {-1, +1} (+1 = the target group).
    y:
        Outcome in {-1, +1} (+1 = favourable decision).
    desc:
        Description columns ``(n, k)`` in original units (redacted columns left out).
    feature_names, desc_names:
        Column names of ``x`` and ``desc``.
    """

    x: np.ndarray
    s: np.ndarray
    y: np.ndarray
    desc: np.ndarray
    feature_names: list[str]
    desc_names: list[str] = field(default_factory=list)


def make_auditor(name: str, *, seed: int) -> Any:
    """A fresh scikit-learn estimator for the certificate's concept class."""
    rs = seed % (2**32)
    if name == "random_forest":
        return RandomForestClassifier(n_estimators=100, max_depth=2, random_state=rs, n_jobs=1)
    if name == "svm_rbf":
        return SVC(kernel="rbf", C=1.0, gamma="scale")
    if name == "linear_svm":
        return LinearSVC(C=1.0, random_state=rs)
    if name == "logistic_regression":
        return LogisticRegression(C=1.0, max_iter=500)
    raise ValueError(
        f"unknown auditor {name!r}; expected random_forest, svm_rbf, linear_svm or "
        "logistic_regression"
    )


def fit_certificate(
    auditor: str, z: np.ndarray, target: np.ndarray, weights: np.ndarray, *, seed: int
) -> Predictor:
    """Fit c to predict ``target`` in {-1, +1} with sample weights; return x -> {-1, +1}.

    A target with one class gives the constant certificate.
    """
    classes = np.unique(target)
    if len(classes) == 1:
        const = int(classes[0])
        return lambda zz: np.full(len(zz), const, dtype=int)
    model = make_auditor(auditor, seed=seed)
    model.fit(z, target, sample_weight=weights)
    return lambda zz: model.predict(zz).astype(int)


def certificate_gamma(
    c: np.ndarray, *, s: np.ndarray, y: np.ndarray, w: np.ndarray, y_value: int
) -> float:
    """Lemma 3.1: ``gamma(y) = (Pr_w[c = r S Y] + rho(y) - 1) / 4``, r = sign(y).

    ``rho(y) = Pr_w[S = r Y]``. For balanced weights this is Eq. (4),
    ``Pr_w[G, Y=y] (Pr_w[S=+1 | G, Y=y] - 1/2)`` with G = {c = 1}.
    """
    r = 1 if y_value > 0 else -1
    tot = float(np.sum(w))
    if tot <= 0:
        return float("nan")
    acc = float(np.sum(w * (c == r * s * y))) / tot
    rho = float(np.sum(w * (s == r * y))) / tot
    return (acc + rho - 1.0) / 4.0


def violation_delta(
    in_g: np.ndarray, *, s: np.ndarray, y: np.ndarray, w: np.ndarray | None, y_value: int
) -> float:
    """ln of the ratio of (w-)counts of Y=y in G between s=+1 and s=-1.

    With ``w`` given: Alg. 1 line 4, ``sum_{G,Y=y,S=+1} w / sum_{G,Y=y,S=-1} w``
    (balanced weights make it ``Pr_w[Y=y|S=+1,G] / Pr_w[Y=y|S=-1,G]``). With
    ``w=None``: ``ln(Pr[Y=y | S=+1, G] / Pr[Y=y | S=-1, G])`` from plain counts.
    NaN when a group is absent from G; +-inf when one side has no Y=y.
    """
    hit = in_g & (y == y_value)
    if w is not None:
        num = float(np.sum(w[hit & (s > 0)]))
        den = float(np.sum(w[hit & (s < 0)]))
        if num == 0 and den == 0:
            return float("nan")
    else:
        n_pos = int(np.sum(in_g & (s > 0)))
        n_neg = int(np.sum(in_g & (s < 0)))
        if n_pos == 0 or n_neg == 0:
            return float("nan")
        num = np.sum(hit & (s > 0)) / n_pos
        den = np.sum(hit & (s < 0)) / n_neg
        if num == 0 and den == 0:
            return float("nan")
    if den == 0:
        return float("inf")
    if num == 0:
        return float("-inf")
    return float(math.log(num / den))


@dataclass
class WorstViolation:
    """Result of Algorithm 1 on one split."""

    t: int
    mass_train: float
    in_g_test: np.ndarray
    predictor: Predictor | None
    trace: list[dict[str, float]]


def worst_violation(
    *,
    auditor: str,
    z_tr: np.ndarray,
    s_tr: np.ndarray,
    y_tr: np.ndarray,
    w_tr: np.ndarray,
    z_te: np.ndarray,
    s_te: np.ndarray,
    y_te: np.ndarray,
    w_te: np.ndarray,
    y_value: int,
    xi: float,
    alpha: float,
    search: str,
    max_iterations: int,
    seed: int,
) -> WorstViolation:
    """Algorithm 1 (WVA): reweight, refit, stop when the subgroup's mass drops below alpha.

    At step t the rows with Y = y and S = -1 (for y = +1 these are the paper's
    ``a_i != y_i, y_i = y``; in general the rows whose target r S Y is -1 among Y = y)
    weigh ``u_i (1 + xi t)``, the others ``u_i``. The mass of G_t = {c_t = 1} is
    ``sum_{c_t=1, Y=y} u / sum u`` on the training part. The answer is the last t
    whose mass is >= alpha; the trace records every evaluated t with the held-out
    delta (Alg. 1 line 4, u-weighted).
    """
    r = 1 if y_value > 0 else -1
    target = r * s_tr * y_tr
    boosted = (y_tr == y_value) & (s_tr < 0)
    cache: dict[int, tuple[float, Predictor]] = {}
    trace: list[dict[str, float]] = []

    def at(t: int) -> tuple[float, Predictor]:
        if t not in cache:
            wt = w_tr * (1.0 + xi * t * boosted)
            c = fit_certificate(auditor, z_tr, target, wt, seed=derive_seed(seed, "wva", t))
            g_tr = c(z_tr) == 1
            mass = float(np.sum(w_tr[g_tr & (y_tr == y_value)]) / np.sum(w_tr))
            g_te = c(z_te) == 1
            d = violation_delta(g_te, s=s_te, y=y_te, w=w_te, y_value=y_value)
            trace.append({"t": t, "mass": mass, "delta": d})
            cache[t] = (mass, c)
        return cache[t]

    good = 0
    if at(0)[0] < alpha:
        return WorstViolation(0, at(0)[0], np.zeros(len(z_te), bool), None, trace)
    if search == "sequential":
        t = 1
        while t <= max_iterations and at(t)[0] >= alpha:
            good = t
            t += 1
    else:
        bad = None
        t = 1
        while t <= max_iterations:
            if at(t)[0] >= alpha:
                good = t
                t *= 2
            else:
                bad = t
                break
        if bad is None and good < max_iterations:
            if at(max_iterations)[0] >= alpha:
                good = max_iterations
            else:
                bad = max_iterations
        if bad is not None:
            while bad - good > 1:
                mid = (good + bad) // 2
                if at(mid)[0] >= alpha:
                    good = mid
                else:
                    bad = mid
    mass, c = at(good)
    trace.sort(key=lambda d: d["t"])
    return WorstViolation(good, mass, c(z_te) == 1, c, trace)


def _group_description(
    desc: np.ndarray, s: np.ndarray, y: np.ndarray, in_g: np.ndarray, y_value: int
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, grp in (("+1", s > 0), ("-1", s < 0)):
        m = in_g & grp
        n = int(m.sum())
        out[key] = {
            "n": n,
            "mean": desc[m].mean(0).tolist() if n else None,
            "sd": desc[m].std(0).tolist() if n else None,
            "rate": float(np.mean(y[m] == y_value)) if n else None,
        }
    return out


def _nan_to_none(v: float) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def run_split(sample: MDFASample, *, split: int, seed: int, params: MDFAParams) -> dict:
    """One random train/test split of mdfa: balance, certify, worst violation, describe.

    Parameters
    ----------
    sample:
        The collected sample of one attribute.
    split:
        Split number (recorded only; the randomness comes from ``seed``).
    seed:
        Seed of this split (e.g. ``ctx.seed_for("mdfa", attribute, split)``); the
        result depends on nothing else, so any parallel layout gives the same numbers.
    params:
        The audit parameters.

    Returns
    -------
    dict
        Scalars (gamma_pos, gamma_neg, gamma_max, y_wv, delta, delta_unweighted,
        dt_g, mass, t, l2, mmd) and JSON strings (trace, description, rules).
    """
    import torch

    torch.set_num_threads(1)
    x, s, y = sample.x, sample.s.astype(int), sample.y.astype(int)
    n = len(s)
    rng = np.random.default_rng(derive_seed(seed, "split"))
    perm = rng.permutation(n)
    n_te = round(params.test_fraction * n)
    te, tr = np.sort(perm[:n_te]), np.sort(perm[n_te:])
    mean = x[tr].mean(0)
    sd = x[tr].std(0)
    sd[sd == 0] = 1.0
    xs = ((x - mean) / sd).astype(np.float32)

    if params.balancing == "mmd_net":
        bal = fit_balancing(
            xs[tr],
            s[tr],
            seed=derive_seed(seed, "balance"),
            kernel=params.mmd_kernel,
            epochs=params.epochs,
            batch_size=params.batch_size,
            learning_rate=params.learning_rate,
            l2_grid=params.l2_grid,
            folds=params.folds,
        )
        u = bal.u(xs)
        l2, mmd = bal.l2, bal.heldout_loss
    else:
        u = np.ones(n)
        l2 = mmd = None
        bal = None
    w_tr = balanced_weights(u[tr], s[tr])
    w_te = balanced_weights(u[te], s[te])
    use_rep = params.certificate_features == "representation" and bal is not None
    z = bal.representation(xs) if use_rep else xs.astype(float)

    tilt = params.certificate_tilt

    def certificate(y_value: int) -> np.ndarray:
        target = y_value * s[tr] * y[tr]
        wt = w_tr * (1.0 + tilt * (target < 0)) if tilt > 0 else w_tr
        c = fit_certificate(
            params.auditor, z[tr], target, wt, seed=derive_seed(seed, "cert", y_value)
        )
        return c(z[te])

    c_pos = certificate(1)
    gamma_pos = certificate_gamma(c_pos, s=s[te], y=y[te], w=w_te, y_value=1)
    # without tilt the concept classes are symmetric: the certificate for y = -1
    # (target -S Y) is -c, so it is not fitted again
    c_neg = certificate(-1) if tilt > 0 else -c_pos
    gamma_neg = certificate_gamma(c_neg, s=s[te], y=y[te], w=w_te, y_value=-1)
    out: dict[str, Any] = {
        "split": int(split),
        "gamma_pos": gamma_pos,
        "gamma_neg": gamma_neg,
        "gamma_max": max(gamma_pos, gamma_neg),
        "l2": l2,
        "mmd": mmd,
        "y_wv": None,
        "delta": None,
        "delta_unweighted": None,
        "dt_g": None,
        "mass": None,
        "t": None,
        "trace": "[]",
        "description": "{}",
        "rules": "",
        "rule_fidelity": None,
    }
    if not params.worst_violation:
        return out
    if params.violation_outcome == "favourable":
        y_value = 1
    elif params.violation_outcome == "unfavourable":
        y_value = -1
    else:
        y_value = 1 if gamma_pos >= gamma_neg else -1
    wv = worst_violation(
        auditor=params.auditor,
        z_tr=z[tr],
        s_tr=s[tr],
        y_tr=y[tr],
        w_tr=w_tr,
        z_te=z[te],
        s_te=s[te],
        y_te=y[te],
        w_te=w_te,
        y_value=y_value,
        xi=params.xi,
        alpha=params.alpha,
        search=params.wva_search,
        max_iterations=params.max_iterations,
        seed=seed,
    )
    g = wv.in_g_test
    du = violation_delta(g, s=s[te], y=y[te], w=None, y_value=y_value)
    out.update(
        y_wv=y_value,
        delta=violation_delta(g, s=s[te], y=y[te], w=w_te, y_value=y_value),
        delta_unweighted=du,
        dt_g=math.exp(du) if np.isfinite(du) else (du if not math.isnan(du) else None),
        mass=wv.mass_train,
        t=wv.t,
        trace=json.dumps([{k: _nan_to_none(v) for k, v in d.items()} for d in wv.trace]),
        description=json.dumps(
            _group_description(sample.desc[te], s[te], y[te], g, y_value)
        ),
    )
    if g.any() and (~g).any() and sample.desc.shape[1] > 0:
        tree = DecisionTreeClassifier(
            max_depth=params.rule_depth, random_state=derive_seed(seed, "rules") % (2**32)
        ).fit(sample.desc[te], g)
        out["rules"] = export_text(tree, feature_names=list(sample.desc_names), decimals=2)
        out["rule_fidelity"] = float(np.mean(tree.predict(sample.desc[te]) == g))
    for k in ("delta", "delta_unweighted", "dt_g"):
        v = out[k]
        if v is not None and isinstance(v, float) and math.isnan(v):
            out[k] = None
    return out
