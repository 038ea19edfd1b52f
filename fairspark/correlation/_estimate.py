"""Pearson correlations per round and their mean with a normal interval (METHODS §3)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

__all__ = ["CorrelationEstimate", "estimate_correlations", "pairwise_pearson"]

_MIN_PAIRS = 3


def _is_constant(v: np.ndarray) -> bool:
    # Relative tolerance: a metric that is constant up to float noise (e.g. 1 - x - x)
    # must not produce a correlation from rounding errors.
    spread = float(np.max(v) - np.min(v))
    return spread <= 1e-12 * max(1.0, float(np.max(np.abs(v))))


def pairwise_pearson(
    values: np.ndarray, *, names: Sequence[str] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pearson r between every pair of columns over the rows where both are defined.

    Parameters
    ----------
    values : (n, m) array; NaN/inf marks a metric undefined for that sample.
    names : column names, used in the reasons.

    Returns
    -------
    r : (m, m) correlations, NaN where undefined.
    count : (m, m) number of rows where both metrics are defined.
    reason : (m, m) object array, the reason where ``r`` is NaN, else ``None``.
    """
    values = np.asarray(values, dtype=np.float64)
    _n, m = values.shape
    names = list(names) if names is not None else [f"m{i}" for i in range(m)]
    finite = np.isfinite(values)
    r = np.full((m, m), np.nan)
    count = finite.T.astype(np.int64) @ finite.astype(np.int64)
    reason = np.full((m, m), None, dtype=object)
    for i in range(m):
        for j in range(i, m):
            mask = finite[:, i] & finite[:, j]
            nij = int(mask.sum())
            why = None
            if nij < _MIN_PAIRS:
                why = f"only {nij} samples where both metrics are defined (need {_MIN_PAIRS})"
            else:
                a, b = values[mask, i], values[mask, j]
                const = [nm for nm, v in ((names[i], a), (names[j], b)) if _is_constant(v)]
                if const:
                    why = f"{' and '.join(dict.fromkeys(const))} constant across the samples"
                else:
                    a = a - a.mean()
                    b = b - b.mean()
                    val = float(a @ b / np.sqrt((a @ a) * (b @ b)))
                    r[i, j] = r[j, i] = min(1.0, max(-1.0, val))
            reason[i, j] = reason[j, i] = why
    return r, count, reason


@dataclass
class CorrelationEstimate:
    """r* with its confidence error over L rounds, for one attribute and model.

    Attributes
    ----------
    metrics : names of the rows/columns.
    r : (m, m) r*_ij, the mean of the per-round r over the rounds where it is defined.
    e : (m, m) confidence error ``z s / sqrt(L_ij)`` (NaN with fewer than 2 rounds).
    s : (m, m) sample standard deviation of the per-round r.
    rounds : (m, m) L_ij, rounds where r is defined.
    n_min, n_max : (m, m) fewest / most samples with both metrics defined in a round.
    reason : (m, m) why r* is NaN (the most frequent per-round reason), else None.
    per_round : (L, m, m) the per-round correlations.
    ci_level : confidence level of ``e``.
    """

    metrics: list[str]
    r: np.ndarray
    e: np.ndarray
    s: np.ndarray
    rounds: np.ndarray
    n_min: np.ndarray
    n_max: np.ndarray
    reason: np.ndarray
    per_round: np.ndarray
    ci_level: float

    @property
    def lower(self) -> np.ndarray:
        """``r* - e``."""
        return self.r - self.e

    @property
    def upper(self) -> np.ndarray:
        """``r* + e``."""
        return self.r + self.e


def estimate_correlations(
    rounds: Sequence[np.ndarray], *, metrics: Sequence[str], ci_level: float
) -> CorrelationEstimate:
    """Mean of per-round Pearson correlations and the interval of METHODS §3.

    Parameters
    ----------
    rounds : one (N, m) array of metric vectors (accepted models) per round.
    metrics : the m metric names.
    ci_level : confidence level; ``z = Phi^-1(1 - (1 - ci_level) / 2)``.

    Returns
    -------
    CorrelationEstimate
    """
    metrics = list(metrics)
    m = len(metrics)
    if not rounds:
        raise ValueError("no round to estimate correlations from")
    per, cnt, reasons = [], [], []
    for v in rounds:
        r, c, why = pairwise_pearson(v, names=metrics)
        per.append(r)
        cnt.append(c)
        reasons.append(why)
    per_round = np.stack(per)
    counts = np.stack(cnt)
    defined = np.isfinite(per_round)
    n_rounds = defined.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.where(defined, per_round, 0.0).sum(axis=0)
        r_star = np.where(n_rounds > 0, total / np.maximum(n_rounds, 1), np.nan)
        dev = np.where(defined, per_round - r_star, 0.0)
        s = np.where(
            n_rounds > 1, np.sqrt((dev**2).sum(axis=0) / np.maximum(n_rounds - 1, 1)), np.nan
        )
    z = float(norm.ppf(1 - (1 - ci_level) / 2))
    e = np.where(n_rounds > 1, z * s / np.sqrt(np.maximum(n_rounds, 1)), np.nan)
    reason = np.full((m, m), None, dtype=object)
    for i in range(m):
        for j in range(m):
            if n_rounds[i, j] == 0:
                c = Counter(rw[i, j] for rw in reasons if rw[i, j])
                reason[i, j] = c.most_common(1)[0][0] if c else "undefined in every round"
            elif n_rounds[i, j] == 1 and len(rounds) > 1:
                reason[i, j] = "defined in one round only: no interval"
    return CorrelationEstimate(
        metrics=metrics,
        r=r_star,
        e=e,
        s=s,
        rounds=n_rounds,
        n_min=counts.min(axis=0),
        n_max=counts.max(axis=0),
        reason=reason,
        per_round=per_round,
        ci_level=ci_level,
    )
