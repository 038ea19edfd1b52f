"""The synthetic check of Gitiaux and Rangwala (2019, §4.1): data with a planted violation.

References
----------
.. [1] X. Gitiaux and H. Rangwala, "Multi-Differential Fairness Auditor for Black Box
   Classifiers", arXiv:1903.07609, 2019.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LogisticRegression

__all__ = ["SyntheticData", "make_synthetic", "planted_gamma"]


@dataclass
class SyntheticData:
    """A synthetic audit sample and the violation planted in it.

    Attributes
    ----------
    x:
        Features ``(n, 2)``, x1 and x2 ~ N(0, 1).
    s:
        Sensitive attribute in {-1, +1}.
    y:
        Outcome of the altered classifier in {-1, +1}.
    in_g:
        Membership of the planted region G = {x1^2 + x2^2 <= 1, y_hat = -1}.
    propensity:
        The true Pr[S = +1 | x].
    gamma:
        Planted gamma(+1): Eq. (4) with c = 1_G on this sample, under the exact
        importance weights rescaled to Pr_w[S = +1] = 1/2.
    delta:
        Planted delta: ln(Pr[Y=1 | S=+1, G] / Pr[Y=1 | S=-1, G]) on this sample.
    """

    x: np.ndarray
    s: np.ndarray
    y: np.ndarray
    in_g: np.ndarray
    propensity: np.ndarray
    gamma: float
    delta: float


def planted_gamma(
    *, s: np.ndarray, y: np.ndarray, in_g: np.ndarray, propensity: np.ndarray
) -> float:
    """Eq. (4) for c = 1_G and y = +1 with exact importance weights.

    Rows with s = +1 get ``(1 - p) / p`` (p = Pr[S=+1|x]) rescaled so their sum equals
    the count of s = -1 rows; rows with s = -1 get 1. Then
    ``Pr_w[G, Y=1] (Pr_w[S=+1 | G, Y=1] - 1/2) = E_w[1_G 1_{Y=1} S] / 2``.
    """
    pos = s > 0
    w = np.ones(len(s))
    w[pos] = (1.0 - propensity[pos]) / propensity[pos]
    w[pos] *= (~pos).sum() / w[pos].sum()
    return float(0.5 * np.sum(w * in_g * (y > 0) * s) / w.sum())


def make_synthetic(*, n: int, nu: float, mu: float = 0.0, seed: int) -> SyntheticData:
    """Draw the paper's synthetic audit sample with a planted violation of strength nu.

    Parameters
    ----------
    n:
        Number of rows.
    nu:
        Violation strength in [0, 1): inside G all s = +1 outcomes become +1 and each
        s = -1 outcome becomes +1 with probability ``1 - nu`` (nu = 0: fair).
    mu:
        Imbalance factor: Pr[S=+1 | x] = e^{mu q} / (1 + e^{mu q}), q = (x1 + x2)^2.
    seed:
        Seed of every random draw.
    """
    if not 0.0 <= nu < 1.0:
        raise ValueError(f"nu must be in [0, 1), got {nu}")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2))
    q = (x[:, 0] + x[:, 1]) ** 2
    propensity = 1.0 / (1.0 + np.exp(-mu * q))
    s = np.where(rng.random(n) < propensity, 1, -1)
    e = rng.normal(0.0, 0.2, n)
    label = np.where((x[:, 0] + x[:, 1] + e) ** 3 > 0, 1, -1)
    lr = LogisticRegression().fit(x, label)
    y_hat = lr.predict(x).astype(int)
    in_g = (x[:, 0] ** 2 + x[:, 1] ** 2 <= 1.0) & (y_hat == -1)
    flip_neg = rng.random(n) < 1.0 - nu
    y = y_hat.copy()
    y[in_g & (s > 0)] = 1
    y[in_g & (s < 0) & flip_neg] = 1
    g_pos, g_neg = in_g & (s > 0), in_g & (s < 0)
    p_pos = (y[g_pos] > 0).mean() if g_pos.any() else np.nan
    p_neg = (y[g_neg] > 0).mean() if g_neg.any() else np.nan
    delta = float(np.log(p_pos / p_neg)) if p_neg > 0 else float("inf")
    gamma = planted_gamma(s=s, y=y, in_g=in_g, propensity=propensity)
    return SyntheticData(
        x=x, s=s, y=y, in_g=in_g, propensity=propensity, gamma=gamma, delta=delta
    )
