"""Pearson correlations per round and their mean with a normal interval (Anahideh et al., 2021).

References
----------
.. [1] H. Anahideh, N. Nezami and A. Asudeh, "Finding Representative Group Fairness
   Metrics Using Correlation Estimations", arXiv:2109.05697, 2021.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fairspark.constants import FLOAT_NOISE
from fairspark.stats import normal_quantile

__all__ = [
    "CorrelationEstimate",
    "RoundsDecision",
    "decide_rounds",
    "estimate_correlations",
    "matrix_se_path",
    "pairwise_pearson",
]

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
    """Mean of per-round Pearson correlations and the interval of Anahideh et al. (2021).

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
    z = normal_quantile(1 - (1 - ci_level) / 2)
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


# ---------------------------------------------------------------- rounds by Monte-Carlo error
def _stable_at(reps: Sequence[Any], k: int, stable: int) -> bool:
    """Whether the representatives after kept rounds ``1..k`` are not None and equal
    those after each of the ``stable`` kept-round prefixes before it."""
    if stable < 1 or k - 1 - stable < 0 or reps[k - 1] is None:
        return False
    return all(reps[k - 1 - j] == reps[k - 1] for j in range(1, stable + 1))


def matrix_se_path(per_round: np.ndarray) -> np.ndarray:
    """The matrix's Monte-Carlo standard error after each of the first 1..L rounds.

    Parameters
    ----------
    per_round : (L, m, m) per-round Pearson r (NaN where undefined), rounds in order.

    Returns
    -------
    (L,) array: entry ``l`` is ``max_{i<j} s_ij / sqrt(L_ij)`` over the first ``l + 1``
    rounds, ``L_ij`` the rounds among them where r_ij is defined and ``s_ij`` their
    sample standard deviation (ddof 1); pairs with ``L_ij < 2`` are left out; NaN when
    no pair is left. The SE of r*_ij is ``e_ij / z``: the interval's own spread.
    """
    per_round = np.asarray(per_round, dtype=np.float64)
    n_rounds, m, _ = per_round.shape
    iu = np.triu_indices(m, k=1)
    x = per_round[:, iu[0], iu[1]]  # (L, pairs)
    defined = np.isfinite(x)
    xv = np.where(defined, x, 0.0)
    n = np.cumsum(defined, axis=0)
    s1 = np.cumsum(xv, axis=0)
    s2 = np.cumsum(xv**2, axis=0)
    out = np.full(n_rounds, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        # sum of squared deviations from the running mean; clipped at 0 against the
        # rounding of an entry that is the same in every round (an identity: r = -1)
        ssd = np.maximum(s2 - s1**2 / np.maximum(n, 1), 0.0)
        se = np.sqrt(ssd / np.maximum(n - 1, 1)) / np.sqrt(np.maximum(n, 1))
    se = np.where(n >= 2, se, np.nan)
    for t, row in enumerate(se):
        if np.isfinite(row).any():
            out[t] = float(np.nanmax(row))
    return out


@dataclass(frozen=True)
class RoundsDecision:
    """Where the rounds of one (attribute, model) stand under ``rounds: auto``.

    Attributes
    ----------
    stopped : no further round is needed.
    rounds : round ids used (``0..rounds-1``) when stopped; else the ids run so far.
    kept : complete rounds among them (a dropped round hit the attempt cap).
    se : the matrix's standard error over the kept rounds (NaN: none defined).
    reason : ``target_se`` (reached), ``stable`` (the representatives the same after
        each of the last ``stable_rounds`` kept rounds), ``rounds_max``, ``no_round``
        (none complete after ``rounds_min`` rounds), ``undefined`` (no pair defined in
        two kept rounds after ``rounds_min`` kept rounds), ``fixed`` (an integer
        ``rounds``) or ``running``.
    next_rounds : when not stopped, the round ids to have run after the next wave
        (the rounds the current standard error predicts, at least one more).
    """

    stopped: bool
    rounds: int
    kept: int
    se: float
    reason: str
    next_rounds: int | None = None


def decide_rounds(
    round_ids: Sequence[int],
    per_round: np.ndarray | None,
    *,
    rounds_run: int,
    rounds_min: int,
    rounds_max: int,
    target_se: float,
    representatives: Sequence[Any] | None = None,
    stable_rounds: int | None = None,
) -> RoundsDecision:
    """The stopping rule of ``rounds: auto``: the first round where the SE is small.

    Parameters
    ----------
    round_ids : the kept (complete) round ids among ``0..rounds_run-1``, ascending.
    per_round : (len(round_ids), m, m) their per-round correlations (None: none kept).
    rounds_run : round ids run so far, all finished (``0..rounds_run-1``).
    rounds_min, rounds_max, target_se : the rule's parameters.
    representatives : entry ``t``: the representatives after kept rounds ``1..t+1``
        (comparable with ``==``; None where there is no clustering), one per kept round.
    stable_rounds : with ``representatives``, also stop at the first kept round
        ``k >= rounds_min`` whose representatives equal those after each of the
        ``stable_rounds`` kept rounds before it (None: the standard error rule only).

    Returns
    -------
    RoundsDecision
        Stopped at the first kept round ``k >= rounds_min`` (counting kept rounds) whose
        standard error over kept rounds ``1..k`` (:func:`matrix_se_path`) is at most
        ``target_se``; the rounds used are the ids up to that round. Otherwise stopped
        at ``rounds_max`` ids, or when nothing more can come of it (see
        :class:`RoundsDecision`). The rule looks at prefixes only, so a round run beyond
        the stop (a wave ends later) changes nothing: the decision depends on the
        rounds' results, never on how they were grouped into waves or tasks.
    """
    ids = list(round_ids)
    path = matrix_se_path(per_round) if ids and per_round is not None else np.empty(0)
    reps = list(representatives) if stable_rounds and representatives is not None else None
    for k in range(rounds_min, len(ids) + 1):
        if path[k - 1] <= target_se:  # NaN compares False
            return RoundsDecision(True, ids[k - 1] + 1, k, float(path[k - 1]), "target_se")
        if reps is not None and _stable_at(reps, k, int(stable_rounds or 0)):
            return RoundsDecision(True, ids[k - 1] + 1, k, float(path[k - 1]), "stable")
    kept = len(ids)
    se = float(path[-1]) if kept else float("nan")
    if rounds_run >= rounds_max:
        used = [i for i in ids if i < rounds_max]
        k = len(used)
        se = float(path[k - 1]) if k else float("nan")
        return RoundsDecision(True, rounds_max, k, se, "rounds_max")
    if kept == 0 and rounds_run >= rounds_min:
        return RoundsDecision(True, rounds_run, 0, se, "no_round")
    if kept >= rounds_min and not np.isfinite(se):
        return RoundsDecision(True, rounds_run, kept, se, "undefined")
    # SE ~ 1 / sqrt(kept): kept rounds needed, then round ids at the drop rate so far
    # (less a hair, so that rounding does not ask for a round more than the ratio says)
    need = (rounds_min if kept < rounds_min
            else math.ceil(kept * (se / target_se) ** 2 - FLOAT_NOISE))
    need = max(need, kept + 1)
    if reps is not None and kept >= 1:
        # the earliest kept round the stability rule can stop at: the last change
        # plus stable_rounds (if it changes again, later waves add more)
        same = next(j for j in range(kept, 0, -1) if j == 1 or reps[j - 2] != reps[kept - 1])
        need = min(need, max(kept + 1, rounds_min, same + int(stable_rounds or 0)))
    ids_need = math.ceil(need * rounds_run / kept) if kept else need
    nxt = min(rounds_max, max(rounds_run + 1, ids_need))
    return RoundsDecision(False, rounds_run, kept, se, "running", nxt)
