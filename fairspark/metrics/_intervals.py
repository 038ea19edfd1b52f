"""Confidence intervals for the group-metric catalogue, from the same one-pass counts.

Plain numpy, no Spark: the group audit calls these functions on the driver with the
counts it aggregated in its single pass. Formulas and their justification are in
``docs/intervals.md``; in short:

- a **rate** gets the Wilson score interval, computed with the effective sample size
  of its denominator rows;
- a **difference** of two groups' rates gets Newcombe's hybrid score interval
  (MOVER-D with Wilson limits);
- a **ratio** gets the MOVER-R interval with Wilson limits (Donner & Zou 2012), which,
  unlike Katz's log interval, is defined when the unprivileged rate is 0;
- **average odds** gets MOVER for a sum of four independent rates;
- the **absolute baselines** (dp, eo, pqp) and **equalized odds** (a max of two
  absolute gaps) get intervals for a parameter bounded by its fair value 0: the lower
  limit is 0 unless a test interval excludes 0, then a one-sided signed limit; the
  upper limit is the farther signed limit (:func:`_abs_limits`);
- **GEI / Theil** (and their between-group parts) get a delta-method interval on the
  log scale, treating all groups' benefit cells as one multinomial sample.

Counts
------
The counts of one group are a mapping with, for each cell ``c`` of
:data:`~fairspark.metrics._core.CELLS`: ``c`` (sum of weights), ``c_w2`` (sum of
squared weights) and ``c_n`` (row count). Every value may be a scalar or a numpy
array (all of one shape), so many groups or simulated samples are handled in one
call; reasons in words are given for scalar input only.

Weights
-------
``weights="sampling"`` (the default) treats weights as survey/sampling weights: a
rate over rows with weight sum ``W`` and squared-weight sum ``W2`` carries the
information of ``n_eff = W**2 / W2`` unweighted rows (Kish). ``weights="frequency"``
treats an integer weight ``w`` as ``w`` identical rows: ``n = W``. With unit weights
both equal the row count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fairspark.metrics._core import (
    BASELINES,
    CATALOGUE,
    CELLS,
    COMPARED_RATES,
    RATES,
    inequality_indices,
)
from fairspark.numbers import fmt_detail
from fairspark.stats import normal_quantile

__all__ = [
    "Interval",
    "comparison_intervals",
    "comparison_support",
    "effective_n",
    "inequality_intervals",
    "rate_interval",
    "rate_support",
    "wilson",
    "z_value",
]

Weights = Literal["sampling", "frequency"]
_NAN = float("nan")


class Interval(tuple):
    """A ``(lower, upper)`` pair that also carries ``reason`` when it is undefined.

    It unpacks like a plain pair: ``lower, upper = interval``; ``interval.reason`` is
    ``None`` or a sentence saying why the bounds are NaN.

    Examples
    --------
    >>> interval = Interval(0.25, 0.5)
    >>> lower, upper = interval
    >>> lower, upper, interval.upper, interval.reason is None
    (0.25, 0.5, 0.5, True)
    >>> Interval(float("nan"), float("nan"), "no rows").reason
    'no rows'
    """

    reason: str | None

    def __new__(
        cls, lower: object, upper: object, reason: str | None = None
    ) -> Interval:
        self = super().__new__(cls, (_scalar(lower), _scalar(upper)))
        self.reason = reason
        return self

    @property
    def lower(self) -> object:
        """The lower limit (NaN when undefined)."""
        return self[0]

    @property
    def upper(self) -> object:
        """The upper limit (NaN when undefined)."""
        return self[1]


_interval = Interval


def _scalar(x: object) -> object:
    a = np.asarray(x, dtype=np.float64)
    return float(a) if a.ndim == 0 else a


def z_value(level: float) -> float:
    """The two-sided standard normal quantile ``z_(1 - (1 - level) / 2)``.

    Examples
    --------
    >>> round(z_value(0.95), 6), round(z_value(0.9), 6)
    (1.959964, 1.644854)
    """
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"confidence level must be strictly between 0 and 1, got {level!r}")
    return normal_quantile(1.0 - (1.0 - float(level)) / 2.0)


# --------------------------------------------------------------------------- counts


def _get(counts: Mapping[str, object], key: str, default: object = 0.0) -> np.ndarray:
    return np.asarray(counts.get(key, default), dtype=np.float64)


def _cells_sum(counts: Mapping[str, object], cells: tuple[str, ...], suffix: str) -> np.ndarray:
    out = np.asarray(0.0)
    for c in cells:
        if suffix == "_w2":
            # Without squared weights the weights are taken as frequencies of unit rows.
            v = counts.get(c + "_w2", counts.get(c, 0.0))
        elif suffix == "_n":
            v = counts.get(c + "_n", counts.get(c, 0.0))
        else:
            v = counts.get(c, 0.0)
        out = out + np.asarray(v, dtype=np.float64)
    return out


def effective_n(
    counts: Mapping[str, object], cells: tuple[str, ...], *, weights: Weights = "sampling"
) -> np.ndarray:
    """The sample size behind a weighted proportion over ``cells``.

    ``W**2 / W2`` (Kish) for sampling weights, ``W`` for frequency weights; 0 when
    the cells hold no weight.

    Examples
    --------
    Three rows of weight 1 and one of weight 2 in ``tp``, one row of weight 1 in ``fn``:
    ``W = 6`` and ``W2 = 3 + 4 + 1 = 8``, so ``n_eff = 36 / 8``.

    >>> counts = {"tp": 5, "tp_w2": 7, "tp_n": 4, "fn": 1, "fn_w2": 1, "fn_n": 1}
    >>> float(effective_n(counts, ("tp", "fn")))
    4.5
    >>> float(effective_n(counts, ("tp", "fn"), weights="frequency"))
    6.0
    """
    w = _cells_sum(counts, cells, "")
    if weights == "frequency":
        return w
    if weights != "sampling":
        raise ValueError(f"weights must be 'sampling' or 'frequency', got {weights!r}")
    w2 = _cells_sum(counts, cells, "_w2")
    out = np.zeros(np.broadcast(w, w2).shape)
    np.divide(w * w, w2, out=out, where=w2 > 0)
    return out if out.shape else out[()]


def rate_support(counts: Mapping[str, object], rate: str) -> np.ndarray:
    """Number of rows (not weights) in the denominator of ``rate``.

    Examples
    --------
    >>> counts = {"tp": 9.5, "tp_n": 6, "fn": 3.0, "fn_n": 2, "fp": 4.0, "fp_n": 4}
    >>> float(rate_support(counts, "tpr"))  # tp_n + fn_n
    8.0
    """
    return _cells_sum(counts, RATES[rate].denominator, "_n")


def _rate_point(counts: Mapping[str, object], rate: str) -> tuple[np.ndarray, np.ndarray]:
    spec = RATES[rate]
    num = _cells_sum(counts, spec.numerator, "")
    den = _cells_sum(counts, spec.denominator, "")
    p = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=p, where=den > 0)
    return p, den


# --------------------------------------------------------------------------- kernels


def wilson(p: object, n: object, z: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score limits for a proportion ``p`` observed on ``n`` (effective) rows.

    NaN where ``n <= 0`` or ``p`` is NaN. ``n`` need not be an integer.

    Examples
    --------
    8 successes in 10 rows at 95%: ``(p + z**2 / 2n -/+ z sqrt(p (1 - p) / n +
    z**2 / 4n**2)) / (1 + z**2 / n)``.

    >>> lo, hi = wilson(0.8, 10, z_value(0.95))
    >>> round(float(lo), 6), round(float(hi), 6)
    (0.490162, 0.943318)

    No success: the lower limit is exactly 0. No rows: NaN.

    >>> lo, hi = wilson(0.0, 10, z_value(0.95))
    >>> float(lo), round(float(hi), 6)
    (0.0, 0.277533)
    >>> [float(x) for x in wilson(0.5, 0, z_value(0.95))]
    [nan, nan]
    """
    p = np.asarray(p, np.float64)
    n = np.asarray(n, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        z2n = z * z / n
        centre = (p + z2n / 2.0) / (1.0 + z2n)
        half = z / (1.0 + z2n) * np.sqrt(np.clip(p * (1.0 - p), 0.0, None) / n + z2n / (4.0 * n))
    ok = (n > 0) & np.isfinite(p)
    lo = np.where(ok, np.clip(centre - half, 0.0, 1.0), np.nan)
    hi = np.where(ok, np.clip(centre + half, 0.0, 1.0), np.nan)
    # Exact at the edges (floating point can leave 1e-17 there).
    lo = np.where(ok & (p <= 0.0), 0.0, lo)
    hi = np.where(ok & (p >= 1.0), 1.0, hi)
    return lo, hi


def _rate_limits(
    counts: Mapping[str, object], rate: str, z: float, weights: Weights
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p, _ = _rate_point(counts, rate)
    n = effective_n(counts, RATES[rate].denominator, weights=weights)
    lo, hi = wilson(p, n, z)
    return p, lo, hi


def _mover_diff(p1, l1, u1, p2, l2, u2):
    """Newcombe's hybrid score (MOVER-D) limits for ``p1 - p2``."""
    d = p1 - p2
    lo = d - np.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    hi = d + np.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return np.clip(lo, -1.0, 1.0), np.clip(hi, -1.0, 1.0)


def _mover_ratio(p1, l1, u1, p2, l2, u2):
    """MOVER-R limits for ``p1 / p2`` (Donner & Zou 2012), NaN when ``p2 == 0``.

    The limits are the roots ``t`` of ``MOVER-D bound of (p1 - t p2) = 0``; they are
    written in rationalised form so that a vanishing quadratic coefficient is safe.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        b = p1 * p2
        a_lo = u2 * (2.0 * p2 - u2)
        c_lo = l1 * (2.0 * p1 - l1)
        disc_lo = np.sqrt(np.clip(b * b - a_lo * c_lo, 0.0, None))
        lo = np.where(c_lo <= 0.0, 0.0, c_lo / (b + disc_lo))
        a_hi = l2 * (2.0 * p2 - l2)
        c_hi = u1 * (2.0 * p1 - u1)
        disc_hi = np.sqrt(np.clip(b * b - a_hi * c_hi, 0.0, None))
        hi = (b + disc_hi) / a_hi
    ok = np.isfinite(p1) & np.isfinite(p2) & (p2 > 0) & np.isfinite(l1) & np.isfinite(l2)
    return np.where(ok, lo, np.nan), np.where(ok, np.where(a_hi > 0, hi, np.inf), np.nan)


def _abs_limits(unpriv, priv, rate: str, *, alpha: float, test_alpha: float,
                near_share: float, weights: Weights) -> tuple[np.ndarray, np.ndarray]:
    """Limits for ``|p_u - p_p|`` (a gap whose fair value, 0, is on the boundary).

    The lower limit is 0 unless the signed interval at two-sided level
    ``1 - test_alpha`` excludes 0; then it is the signed limit nearer 0 at one-sided
    level ``1 - near_share * alpha``. The upper limit is the farther signed limit at
    one-sided level ``1 - (1 - near_share) * alpha``. Folding a plain equal-tailed
    interval instead covers up to ``1 - alpha/2`` when the gap is a few standard errors
    from 0 (docs/intervals.md).
    """

    def signed(two_sided_alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        z = z_value(1.0 - two_sided_alpha)
        lu = _rate_limits(unpriv, rate, z, weights)
        lp = _rate_limits(priv, rate, z, weights)
        lo, hi = _mover_diff(*lu, *lp)
        return lu[0] - lp[0], lo, hi

    _, t_lo, t_hi = signed(test_alpha)
    _, n_lo, n_hi = signed(2.0 * near_share * alpha)
    _, f_lo, f_hi = signed(2.0 * (1.0 - near_share) * alpha)
    lower = np.where(t_lo > 0.0, np.maximum(n_lo, 0.0),
                     np.where(t_hi < 0.0, np.maximum(-n_hi, 0.0), 0.0))
    upper = np.maximum(np.abs(f_lo), np.abs(f_hi))
    ok = np.isfinite(t_lo) & np.isfinite(t_hi)
    return np.where(ok, lower, np.nan), np.where(ok, upper, np.nan)


# --------------------------------------------------------------------------- public


def rate_interval(
    counts: Mapping[str, object],
    rate: str,
    *,
    level: float = 0.95,
    weights: Weights = "sampling",
) -> Interval:
    """Wilson score interval for one group's ``rate``.

    Parameters
    ----------
    counts:
        The group's cells: ``c``, ``c_w2`` and ``c_n`` for each cell ``c``.
    rate:
        A name of :data:`~fairspark.metrics._core.RATES` (e.g. ``"tpr"``).
    level:
        Confidence level, strictly between 0 and 1.
    weights:
        ``"sampling"`` (Kish effective sample size) or ``"frequency"``.

    Returns
    -------
    Interval
        ``(lower, upper)``; NaN with ``reason`` when the rate's denominator is empty.

    Examples
    --------
    Unit weights (no ``_w2``/``_n``: each weight is one row): TPR 8 / 10 on 10 rows,
    the Wilson interval of :func:`wilson`.

    >>> iv = rate_interval({"tp": 8, "fn": 2, "fp": 1, "tn": 9}, "tpr")
    >>> round(iv.lower, 6), round(iv.upper, 6)
    (0.490162, 0.943318)
    >>> rate_interval({"tp": 0, "fn": 0, "fp": 1, "tn": 9}, "tpr").reason
    'tpr undefined: no rows with favourable label'
    """
    if rate not in RATES:
        raise ValueError(f"unknown rate {rate!r}; known rates: {sorted(RATES)}")
    z = z_value(level)
    p, lo, hi = _rate_limits(counts, rate, z, weights)
    reason = None
    if np.ndim(p) == 0 and not np.isfinite(p):
        reason = f"{rate} undefined: no {RATES[rate].denominator_name}"
    return _interval(lo, hi, reason)


def comparison_support(
    unpriv: Mapping[str, object], priv: Mapping[str, object]
) -> dict[str, np.ndarray]:
    """For each catalogue/baseline metric, the smallest row count it rests on.

    That is the least, over both groups and every rate the metric uses, of the rows in
    the rate's denominator (the number the minimum-support rule compares with).

    Examples
    --------
    TPR rests on 12 and 10 rows, FPR on 8 and 15, the selection rate on 20 and 25:

    >>> unpriv = {"tp": 8, "fn": 4, "fp": 2, "tn": 6}
    >>> priv = {"tp": 5, "fn": 5, "fp": 5, "tn": 10}
    >>> support = comparison_support(unpriv, priv)
    >>> float(support["tpr_difference"]), float(support["dp"])
    (10.0, 20.0)
    >>> float(support["equalized_odds_difference"])  # TPR and FPR of both groups
    8.0
    """
    sup_u = {r: rate_support(unpriv, r) for r in RATES}
    sup_p = {r: rate_support(priv, r) for r in RATES}
    out: dict[str, np.ndarray] = {}
    for name, spec in {**CATALOGUE, **BASELINES}.items():
        rates = (spec.rate,) if spec.rate else ("tpr", "fpr")
        vals = [sup_u[r] for r in rates] + [sup_p[r] for r in rates]
        out[name] = np.minimum.reduce(np.broadcast_arrays(*vals))
    return out


@dataclass(frozen=True)
class _GroupLimits:
    """``(point, lower, upper)`` of each needed rate in both groups, at one level."""

    unpriv: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
    priv: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]

    @classmethod
    def of(cls, unpriv: Mapping[str, object], priv: Mapping[str, object], z: float,
           weights: Weights) -> _GroupLimits:
        needed = set(COMPARED_RATES) | {"selection_rate", "tpr", "fpr", "ppv"}
        return cls({r: _rate_limits(unpriv, r, z, weights) for r in needed},
                   {r: _rate_limits(priv, r, z, weights) for r in needed})

    @property
    def scalar(self) -> bool:
        """Scalar counts (reasons are given in words only then)."""
        return all(np.ndim(v[0]) == 0 for v in self.unpriv.values())

    def reason(self, rates: tuple[str, ...], ratio_rate: str | None = None) -> str | None:
        """Why an interval over ``rates`` is undefined (``None`` when it is defined)."""
        if not self.scalar:
            return None
        for r in rates:
            for side, lim in (("unprivileged", self.unpriv), ("privileged", self.priv)):
                if not np.isfinite(lim[r][0]):
                    return f"{r} undefined in the {side} group: no {RATES[r].denominator_name}"
        if ratio_rate is not None and self.priv[ratio_rate][0] == 0:
            return f"ratio undefined: {ratio_rate} of the privileged group is 0"
        return None


def _catalogue_intervals(lims: _GroupLimits) -> dict[str, Interval]:
    """MOVER-D for the differences, MOVER-R for the ratios of the catalogue."""
    out: dict[str, Interval] = {}
    for name, spec in CATALOGUE.items():
        if spec.kind == "difference":
            lo, hi = _mover_diff(*lims.unpriv[spec.rate], *lims.priv[spec.rate])
            out[name] = _interval(lo, hi, lims.reason((spec.rate,)))
        elif spec.kind == "ratio":
            lo, hi = _mover_ratio(*lims.unpriv[spec.rate], *lims.priv[spec.rate])
            out[name] = _interval(lo, hi, lims.reason((spec.rate,), spec.rate))
    return out


def _average_odds_interval(lims: _GroupLimits) -> Interval:
    """MOVER for ``(TPR_u - TPR_p + FPR_u - FPR_p) / 2``, four independent rates."""
    (tu, tul, tuu), (tp_, tpl, tpu) = lims.unpriv["tpr"], lims.priv["tpr"]
    (fu, ful, fuu), (fp_, fpl, fpu) = lims.unpriv["fpr"], lims.priv["fpr"]
    s = (tu - tp_) + (fu - fp_)
    lo = s - np.sqrt((tu - tul) ** 2 + (tpu - tp_) ** 2 + (fu - ful) ** 2 + (fpu - fp_) ** 2)
    hi = s + np.sqrt((tuu - tu) ** 2 + (tp_ - tpl) ** 2 + (fuu - fu) ** 2 + (fp_ - fpl) ** 2)
    return _interval(np.clip(lo / 2.0, -1.0, 1.0), np.clip(hi / 2.0, -1.0, 1.0),
                     lims.reason(("tpr", "fpr")))


def _equalized_odds_interval(unpriv: Mapping[str, object], priv: Mapping[str, object], *,
                             alpha: float, weights: Weights, reason: str | None) -> Interval:
    """``max(|dTPR|, |dFPR|)``.

    Either gap can push the lower limit up, so a gap counts as non-zero only when its
    interval at level ``1 - alpha/2`` excludes 0 (Bonferroni over the two); its limits
    are then the ``level`` ones.
    """
    lo_t, hi_t = _abs_limits(unpriv, priv, "tpr", alpha=alpha, test_alpha=alpha / 2.0,
                             near_share=0.5, weights=weights)
    lo_f, hi_f = _abs_limits(unpriv, priv, "fpr", alpha=alpha, test_alpha=alpha / 2.0,
                             near_share=0.5, weights=weights)
    return _interval(np.maximum(lo_t, lo_f), np.maximum(hi_t, hi_f), reason)


def comparison_intervals(
    unpriv: Mapping[str, object],
    priv: Mapping[str, object],
    *,
    level: float = 0.95,
    weights: Weights = "sampling",
) -> dict[str, Interval]:
    """Intervals for every metric of the catalogue and the baselines.

    Parameters
    ----------
    unpriv, priv:
        Counts of the unprivileged and the privileged group (disjoint rows).
    level:
        Confidence level, strictly between 0 and 1.
    weights:
        ``"sampling"`` (Kish effective sample size) or ``"frequency"``.

    Returns
    -------
    dict
        metric name -> :class:`Interval`. Keys are those of
        :data:`~fairspark.metrics._core.CATALOGUE` and
        :data:`~fairspark.metrics._core.BASELINES`. Undefined intervals are NaN with
        a ``reason`` (scalar input).

    Examples
    --------
    TPR 8 / 10 against 5 / 10: Newcombe's interval for the difference 0.3 takes the
    Wilson limits of both rates, ``0.3 -/+ sqrt((p - l)**2 + (u - p)**2)``.

    >>> unpriv = {"tp": 8, "fn": 2, "fp": 1, "tn": 9}
    >>> priv = {"tp": 5, "fn": 5, "fp": 0, "tn": 10}
    >>> out = comparison_intervals(unpriv, priv)
    >>> len(out)  # the 20 metrics of the catalogue and the 3 baselines
    23
    >>> iv = out["tpr_difference"]
    >>> round(iv.lower, 6), round(iv.upper, 6)
    (-0.106672, 0.599872)
    >>> out["fpr_ratio"].reason
    'ratio undefined: fpr of the privileged group is 0'
    """
    lims = _GroupLimits.of(unpriv, priv, z_value(level), weights)
    out = _catalogue_intervals(lims)
    out["average_odds_difference"] = _average_odds_interval(lims)
    alpha = 1.0 - level
    out["equalized_odds_difference"] = _equalized_odds_interval(
        unpriv, priv, alpha=alpha, weights=weights, reason=lims.reason(("tpr", "fpr")))
    # Absolute gaps: 80% of the error on the lower side, 20% on the upper side, which
    # keeps the coverage within [1 - alpha, 1 - 0.8 alpha] for every gap size.
    for name, spec in BASELINES.items():
        lo, hi = _abs_limits(unpriv, priv, spec.rate, alpha=alpha, test_alpha=alpha,
                             near_share=0.8, weights=weights)
        out[name] = _interval(lo, hi, lims.reason((spec.rate,)))
    return out


_INEQUALITY_KEYS = ("gei", "theil", "between_group_gei", "between_group_theil")


def _benefit_shares(groups: list[Mapping[str, object]],
                    weights: Weights) -> tuple[np.ndarray, float, float]:
    """The groups' benefit cells (fn, correct, fp) as counts, their total and ``n_eff``."""
    cells = [("fn",), ("tp", "tn"), ("fp",)]
    x = np.array([[float(_cells_sum(g, cs, "")) for cs in cells] for g in groups])
    labelled = ("tp", "fp", "tn", "fn")
    n_eff = float(sum(effective_n(g, labelled, weights="frequency") for g in groups))
    if weights == "sampling":
        w = sum(float(_cells_sum(g, labelled, "")) for g in groups)
        w2 = sum(float(_cells_sum(g, labelled, "_w2")) for g in groups)
        n_eff = w * w / w2 if w2 > 0 else 0.0
    return x, float(x.sum()), n_eff


def _share_gradients(pi: np.ndarray, alpha: float) -> tuple[dict[str, float],
                                                            dict[str, np.ndarray]]:
    """The indices at the shares ``pi`` and their gradients (central differences)."""

    def f(shares: np.ndarray) -> dict[str, float]:
        gs = [{"fn": s[0], "tp": s[1], "tn": 0.0, "fp": s[2]} for s in shares]
        return {k: float(v) for k, v in inequality_indices(gs, alpha=alpha).items()}

    h = 1e-6
    grads = {k: np.zeros_like(pi) for k in _INEQUALITY_KEYS}
    for idx in np.ndindex(pi.shape):
        if pi[idx] <= 0:
            continue  # an empty cell has no sampling variance at first order
        up, dn = pi.copy(), pi.copy()
        step = h * max(pi[idx], 1e-3)
        up[idx] += step
        dn[idx] -= min(step, pi[idx])
        fu, fd = f(up), f(dn)
        for k in _INEQUALITY_KEYS:
            grads[k][idx] = (fu[k] - fd[k]) / (up[idx] - dn[idx])
    return f(pi), grads


def inequality_intervals(
    groups: list[Mapping[str, object]],
    *,
    alpha: float = 0.5,
    level: float = 0.95,
    weights: Weights = "sampling",
) -> dict[str, Interval]:
    """Delta-method intervals (log scale) for GEI, Theil and their between-group parts.

    All groups' labelled rows fall into ``3 * len(groups)`` benefit cells (false
    negative, correct, false positive, per group); each index is a smooth function of
    the cells' shares ``pi``, so ``Var ~ sum_k pi_k (d f / d pi_k)**2 / n_eff`` (the
    index is homogeneous of degree 0 in the counts, which removes the multinomial
    covariance term). The gradient is taken by central differences. The interval is
    ``exp(log f -/+ z se / f)``; it is NaN when the index is 0 or undefined (then
    there is no spread to describe: every row has the same benefit) and for array
    input. The normal approximation needs a few hundred labelled rows per cell with
    rows; below that treat these intervals as rough.

    Examples
    --------
    200 rows of unit weight, benefit 2 (false positive) on 20 rows of one group and 0
    (false negative) on 20 of the other, 1 elsewhere: Theil is ``0.2 ln 2``.

    >>> a = {"tp": 40, "fp": 20, "tn": 40, "fn": 0}
    >>> b = {"tp": 40, "fp": 0, "tn": 40, "fn": 20}
    >>> out = inequality_intervals([a, b])
    >>> lower, upper = out["theil"]
    >>> round(lower, 4), round(upper, 4)
    (0.0985, 0.195)

    Every row correct: no spread, no interval.

    >>> fair = {"tp": 50, "fp": 0, "tn": 50, "fn": 0}
    >>> iv = inequality_intervals([fair, fair])["gei"]
    >>> iv.lower, iv.reason is not None
    (nan, True)
    """
    z = z_value(level)
    keys = _INEQUALITY_KEYS
    if any(np.ndim(g.get(c, 0.0)) for g in groups for c in CELLS):
        return {k: _interval(_NAN, _NAN, "intervals for array input not supported")
                for k in keys}
    x, total, n_eff = _benefit_shares(groups, weights)
    if total <= 0 or n_eff <= 0:
        return {k: _interval(_NAN, _NAN, "no labelled rows") for k in keys}
    pi = x / total
    base, grads = _share_gradients(pi, alpha)
    out: dict[str, Interval] = {}
    for k in keys:
        v = base[k]
        if not np.isfinite(v) or v <= 0:
            out[k] = _interval(_NAN, _NAN, f"{k} is {fmt_detail(v, 6)}: every labelled row "
                               "has the same benefit (or the groups' mean benefits are "
                               "equal), no spread")
            continue
        se = float(np.sqrt(np.sum(pi * grads[k] ** 2) / n_eff))
        out[k] = _interval(v * np.exp(-z * se / v), v * np.exp(z * se / v))
    return out
