"""Two decisions on the same rows: paired differences of every group metric, with intervals.

Plain numpy, no Spark. A challenger (the audited decision) and a baseline (today's
model, ``columns.baseline``) decide on the same rows, so their metrics are not
independent: a row the two models treat alike moves both the same way. Two separate
intervals overlap where the paired difference is clearly non-zero; the interval here
accounts for the pairing.

Joint cells
-----------
The one aggregation keeps the rows apart by (group, label, decision, baseline
decision). For one group (side of a comparison) the **joint counts** are a mapping
``{1: counts, 0: counts}``: for each baseline decision, the challenger's confusion
cells of the rows with that baseline decision (``c``, ``c_w2``, ``c_n`` for each cell
``c`` of :data:`~fairspark.metrics._core.CELLS`, as :func:`marginal_counts` gives
them). Both models' cells are marginals of these (:func:`marginal_cells`).

Interval
--------
Every metric ``M`` of the catalogue and the baselines is a function of the 24 joint
cell weights ``W_k`` (2 groups x 2 baseline decisions x 6 cells), homogeneous of
degree 0 within each group (a rate does not change when a group's counts are
scaled). The paired difference ``D = M(challenger cells) - M(baseline cells)`` is
then linearised (delta method) around the observed weights, with rows as independent
draws: ``Var(D) ~ sum_k V_k (dD / dW_k)**2``, where ``V_k`` is the cell's sum of
squared weights (sampling weights; with unit weights its row count) or its weight
sum (frequency weights). The centring term ``(sum_k W_k dD/dW_k)**2 / n`` vanishes by
Euler's theorem for a function homogeneous of degree 0, within each group, so the
formula holds whether the groups' sizes are fixed or random. The gradient is taken by
central differences. The interval is ``D -/+ z se``. See ``docs/intervals.md``.

Per-group rates and inequality indices
--------------------------------------
The same linearisation gives the paired difference of each group's rates
(:func:`paired_rates`: a function of that group's 12 joint cells, homogeneous of degree
0 in them) and of the generalized entropy index and Theil index on the benefit ``b =
yhat - y + 1`` (:func:`paired_inequality`: functions of the labelled joint cells of
all groups together, homogeneous of degree 0 in all of them jointly, so the centring
term vanishes for rows drawn from the whole population). A rate has no parity, so its
``worse`` is NaN; an index's parity is 0 and it is never negative, so its ``worse`` is
its difference.

"Worse" is further from parity, by the one distance every part of fairspark uses
(:func:`~fairspark.metrics._core.distance_from_parity`: ``|M|`` for differences and
the absolute gaps, ``|ln M|`` for ratios). ``worse = dist(M_c) - dist(M_b)`` gets the
same kind of interval; positive means the challenger is further from parity. Near
a metric's fair value (an absolute gap or a distance at 0) the function has a kink
and the linearisation is rough there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from fairspark.metrics._core import (
    BASELINES,
    CATALOGUE,
    CELLS,
    RATES,
    compare_groups,
    distance_from_parity,
    group_rates,
    inequality_indices,
)
from fairspark.metrics._intervals import Weights, z_value

__all__ = ["BASELINE_MODEL", "DIFFERENCE_MODEL", "DISTANCE_MODEL", "INEQUALITY_KEYS", "PairedValue",
           "baseline_cell", "marginal_cells", "paired_comparison", "paired_inequality",
           "paired_rates"]

#: the inequality indices of :func:`paired_inequality` (over all rows and between groups)
INEQUALITY_KEYS = ("gei", "theil", "between_group_gei", "between_group_theil")

#: ``model`` of the baseline decision's result rows (the audited decision's rows keep
#: ``model`` empty, as without a baseline)
BASELINE_MODEL = "baseline"
#: ``model`` of the paired-difference rows: value = challenger minus baseline
DIFFERENCE_MODEL = "challenger_minus_baseline"
#: ``model`` of a ``no_worse_than_baseline`` limit's rows: value = the challenger's
#: distance from parity minus the baseline's (``worse``), so that one key never holds
#: two quantities of opposite signs (the metric's difference is ``DIFFERENCE_MODEL``'s)
DISTANCE_MODEL = "distance_challenger_minus_baseline"

_LABEL_OF = {"tp": 1, "fn": 1, "fp": 0, "tn": 0, "up": None, "un": None}
_CELL_OF = {(1, 1): "tp", (1, 0): "fn", (0, 1): "fp", (0, 0): "tn",
            (None, 1): "up", (None, 0): "un"}


def baseline_cell(cell: str, base: int) -> str:
    """The baseline's cell of a row in the challenger's ``cell`` with baseline decision ``base``.

    The label stays; the decision is the baseline's: e.g. a challenger true positive
    that the baseline turned down is a baseline false negative.

    Examples
    --------
    >>> baseline_cell("tp", 0), baseline_cell("tn", 1), baseline_cell("fn", 0)
    ('fn', 'fp', 'fn')
    >>> baseline_cell("up", 1)  # an unknown label stays unknown
    'up'
    """
    return _CELL_OF[(_LABEL_OF[cell], int(base))]


JointCounts = Mapping[int, Mapping[str, float]]


def marginal_cells(joint: JointCounts) -> tuple[dict[str, float], dict[str, float]]:
    """(challenger cells, baseline cells) of one group from its joint counts.

    Each with ``c``, ``c_w2`` and ``c_n`` for every cell ``c``.

    Examples
    --------
    Of the challenger's 5 true positives the baseline accepted 3 (they stay true
    positives) and turned down 2 (baseline false negatives):

    >>> joint = {1: {"tp": 3, "fp": 1}, 0: {"tp": 2, "tn": 4}}
    >>> chal, base = marginal_cells(joint)
    >>> chal["tp"], chal["fp"], chal["tn"]
    (5.0, 1.0, 4.0)
    >>> base["tp"], base["fn"], base["fp"], base["tn"]
    (3.0, 2.0, 1.0, 4.0)
    """
    chal = {f"{c}{s}": 0.0 for c in CELLS for s in ("", "_w2", "_n")}
    base = dict(chal)
    for b in (0, 1):
        counts = joint.get(b, {})
        for c in CELLS:
            bc = baseline_cell(c, b)
            for s in ("", "_w2", "_n"):
                v = float(counts.get(f"{c}{s}", 0.0))
                chal[f"{c}{s}"] += v
                base[f"{bc}{s}"] += v
    return chal, base


@dataclass(frozen=True)
class PairedValue:
    """One metric of both decisions and their paired difference.

    ``difference = challenger - baseline`` with its interval ``[lower, upper]`` and
    standard error ``se``; ``worse`` (further from parity, positive: the challenger is)
    with ``worse_lower``, ``worse_upper`` and ``worse_se``. NaN where undefined.

    Examples
    --------
    One group of unit weights, 10 rows with the favourable label: the challenger
    accepts 8 (TPR 0.8), the baseline 7 (TPR 0.7).

    >>> group = {1: {"tp": 6, "fn": 1, "fp": 1, "tn": 1},
    ...          0: {"tp": 2, "fn": 1, "tn": 8}}
    >>> value = paired_rates(group)["tpr"]
    >>> value.challenger, value.baseline, round(value.difference, 6)
    (0.8, 0.7, 0.1)
    >>> value.worse  # a rate has no parity
    nan
    """

    challenger: float
    baseline: float
    difference: float
    se: float
    lower: float
    upper: float
    worse: float
    worse_se: float
    worse_lower: float
    worse_upper: float


_METRICS = {**CATALOGUE, **BASELINES}


def _vector(unpriv: JointCounts, priv: JointCounts, suffix: str) -> np.ndarray:
    """The 24 joint cells' statistic (``""``, ``"_w2"`` or ``"_n"``), in a fixed order."""
    return np.array([float((side.get(b) or {}).get(f"{c}{suffix}", 0.0))
                     for side in (unpriv, priv) for b in (1, 0) for c in CELLS])


def _metrics_at(x: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Both models' metrics at rows of joint weights ``x`` (shape ``(m, 24)``)."""
    (cu, bu), (cp, bp) = _cells_at(x, 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return compare_groups(cu, cp), compare_groups(bu, bp)


def _distance(name: str, v: np.ndarray) -> np.ndarray:
    return distance_from_parity(_METRICS[name].kind, v)


def _perturbed(w: np.ndarray, totals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``w``, then ``w`` with each cell moved up and down by its step ``h``.

    ``h`` is a millionth of the cell's group total (``totals``, one per cell).
    """
    h = 1e-6 * np.where(totals > 0, totals, 1.0)
    x = np.tile(w, (1 + 2 * len(w), 1))
    k = np.arange(len(w))
    x[1 + 2 * k, k] += h
    x[2 + 2 * k, k] -= h
    return x, h


def _paired(chal: np.ndarray, base: np.ndarray, worse: np.ndarray | None, h: np.ndarray,
            var_w: np.ndarray, z: float) -> PairedValue:
    """One :class:`PairedValue` from both models' values at the perturbed rows."""
    d = chal - base
    se = _se(d, h, var_w)
    nan = float("nan")
    wse = nan if worse is None else _se(worse, h, var_w)
    w0 = nan if worse is None else float(worse[0])
    return PairedValue(
        challenger=float(chal[0]), baseline=float(base[0]), difference=float(d[0]), se=se,
        lower=float(d[0] - z * se), upper=float(d[0] + z * se), worse=w0, worse_se=wse,
        worse_lower=w0 - z * wse, worse_upper=w0 + z * wse)


def _check_weights(weights: str) -> None:
    if weights not in ("sampling", "frequency"):
        raise ValueError(f"weights must be 'sampling' or 'frequency', got {weights!r}")


def paired_comparison(
    unpriv: JointCounts,
    priv: JointCounts,
    *,
    level: float = 0.95,
    weights: Weights = "sampling",
) -> dict[str, PairedValue]:
    """Both decisions' catalogue and baselines, and their paired differences.

    Parameters
    ----------
    unpriv, priv:
        Joint counts of the unprivileged and the privileged group (see the module
        docstring): ``{baseline decision: challenger's cells of those rows}``.
    level:
        Confidence level of the intervals (unadjusted; the limits correct their
        family, as for every other row).
    weights:
        ``"sampling"`` (variance from each cell's sum of squared weights) or
        ``"frequency"`` (an integer weight is that many rows).

    Returns
    -------
    dict
        metric name (:data:`~fairspark.metrics._core.CATALOGUE` and
        :data:`~fairspark.metrics._core.BASELINES`) -> :class:`PairedValue`.

    Examples
    --------
    The unprivileged group as in :func:`paired_rates` (TPR 0.8 against 0.7); in the
    privileged one 4 favourable rows are accepted by both, 1 by the challenger only, 2
    by the baseline only and 3 by neither (TPR 0.5 against 0.6). The TPR difference
    is 0.3 for the challenger and 0.1 for the baseline; the groups are independent, so
    the variances of the two paired differences (0.029 each) add. Unit weights given
    without ``_w2``: frequency weights, as in :func:`paired_rates`.

    >>> unpriv = {1: {"tp": 6, "fn": 1, "fp": 1, "tn": 1},
    ...           0: {"tp": 2, "fn": 1, "tn": 8}}
    >>> priv = {1: {"tp": 4, "fn": 2, "fp": 1, "tn": 1},
    ...         0: {"tp": 1, "fn": 3, "tn": 8}}
    >>> v = paired_comparison(unpriv, priv, weights="frequency")["tpr_difference"]
    >>> round(v.challenger, 6), round(v.baseline, 6), round(v.difference, 6)
    (0.3, 0.1, 0.2)
    >>> round(v.se, 6)  # sqrt(0.058)
    0.240832

    Both are above parity, so the challenger is 0.2 further from it:

    >>> round(v.worse, 6), round(v.worse_se, 6)
    (0.2, 0.240832)
    """
    _check_weights(weights)
    z = z_value(level)
    w = _vector(unpriv, priv, "")
    var_w = w if weights == "frequency" else _vector(unpriv, priv, "_w2")
    x, h = _perturbed(w, np.repeat([w[:12].sum(), w[12:].sum()], 12))
    chal, base = _metrics_at(x)
    return {name: _paired(chal[name], base[name],
                          _distance(name, chal[name]) - _distance(name, base[name]),
                          h, var_w, z)
            for name in _METRICS}


def _group_vector(groups: list[JointCounts], suffix: str) -> np.ndarray:
    """Each group's 12 joint cells' statistic, group after group."""
    return np.array([float((g.get(b) or {}).get(f"{c}{suffix}", 0.0))
                     for g in groups for b in (1, 0) for c in CELLS])


def _cells_at(x: np.ndarray, groups: int) -> list[tuple[dict, dict]]:
    """Per group (challenger cells, baseline cells) at rows of joint weights ``x``."""
    out = []
    for g in range(groups):
        chal = {c: np.zeros(len(x)) for c in CELLS}
        base = {c: np.zeros(len(x)) for c in CELLS}
        for j, b in enumerate((1, 0)):
            for i, c in enumerate(CELLS):
                col = x[:, g * 12 + j * 6 + i]
                chal[c] = chal[c] + col
                base[baseline_cell(c, b)] = base[baseline_cell(c, b)] + col
        out.append((chal, base))
    return out


def _setup(groups: list[JointCounts], weights: str
           ) -> tuple[np.ndarray, np.ndarray, list[tuple[dict, dict]]]:
    """(steps, cell variances, per group both models' cells at the perturbed rows)."""
    _check_weights(weights)
    w = _group_vector(groups, "")
    var_w = w if weights == "frequency" else _group_vector(groups, "_w2")
    totals = np.repeat([w[12 * g:12 * g + 12].sum() for g in range(len(groups))], 12)
    x, h = _perturbed(w, totals)
    return h, var_w, _cells_at(x, len(groups))


def paired_rates(
    group: JointCounts,
    *,
    level: float = 0.95,
    weights: Weights = "sampling",
) -> dict[str, PairedValue]:
    """One group's rates under both decisions, and their paired differences.

    Parameters
    ----------
    group:
        The group's joint counts (``{baseline decision: challenger's cells}``).
    level:
        Confidence level of the intervals (unadjusted).
    weights:
        ``"sampling"`` or ``"frequency"``, as in :func:`paired_comparison`.

    Returns
    -------
    dict
        rate name (:data:`~fairspark.metrics._core.RATES`) -> :class:`PairedValue`;
        ``worse`` is NaN (a rate has no parity).

    Examples
    --------
    Of 10 rows with the favourable label (unit weights), 6 are accepted by both
    decisions, 2 by the challenger only, 1 by the baseline only and 1 by neither: TPR
    0.8 against 0.7. The paired variance is that of McNemar's difference,
    ``(2 + 1) / 10**2 - (2 - 1)**2 / 10**3 = 0.029``. The counts have no ``_w2``, so
    the weights are read as frequencies (with sampling weights a missing ``c_w2`` is 0).

    >>> group = {1: {"tp": 6, "fn": 1, "fp": 1, "tn": 1},
    ...          0: {"tp": 2, "fn": 1, "tn": 8}}
    >>> tpr = paired_rates(group, weights="frequency")["tpr"]
    >>> round(tpr.difference, 6), round(tpr.se, 6)  # se = sqrt(0.029)
    (0.1, 0.170294)
    >>> round(tpr.lower, 6), round(tpr.upper, 6)  # 0.1 -/+ 1.959964 se
    (-0.23377, 0.43377)
    """
    h, var_w, ((chal, base),) = _setup([group], weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        rc, rb = group_rates(chal), group_rates(base)
    z = z_value(level)
    return {name: _paired(np.asarray(rc[name], np.float64), np.asarray(rb[name], np.float64),
                          None, h, var_w, z) for name in RATES}


def paired_inequality(
    groups: list[JointCounts],
    *,
    alpha: float = 0.5,
    level: float = 0.95,
    weights: Weights = "sampling",
) -> dict[str, PairedValue]:
    """GEI and Theil under both decisions, over all ``groups``' rows and between them.

    Parameters
    ----------
    groups:
        Each group's joint counts: the groups partition the rows (the values of one
        attribute, or one group holding every row for the overall indices).
    alpha:
        The GEI's alpha (Theil is alpha = 1).
    level:
        Confidence level of the intervals (unadjusted).
    weights:
        ``"sampling"`` or ``"frequency"``, as in :func:`paired_comparison`.

    Returns
    -------
    dict
        :data:`INEQUALITY_KEYS` -> :class:`PairedValue`; ``worse`` is the difference
        (an index is never negative and 0 is equality).

    Examples
    --------
    The baseline decides every row right; the challenger wrongly turns down one of
    the 5 favourable rows (benefit 0) and accepts one of the 5 unfavourable ones
    (benefit 2). Mean benefit 1, so Theil is ``2 ln 2 / 10`` and the GEI (alpha 0.5)
    is ``(2 - sqrt 2) / 2.5``.

    >>> group = {1: {"tp": 4, "fn": 1}, 0: {"fp": 1, "tn": 4}}
    >>> out = paired_inequality([group])
    >>> theil = out["theil"]
    >>> round(theil.challenger, 6), theil.baseline, round(theil.worse, 6)
    (0.138629, 0.0, 0.138629)
    >>> round(out["gei"].difference, 6)
    0.234315
    """
    h, var_w, cells = _setup(groups, weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        ic = inequality_indices([c for c, _ in cells], alpha=alpha)
        ib = inequality_indices([b for _, b in cells], alpha=alpha)
    z = z_value(level)
    out = {}
    for k in INEQUALITY_KEYS:
        c, b = np.asarray(ic[k], np.float64), np.asarray(ib[k], np.float64)
        out[k] = _paired(c, b, c - b, h, var_w, z)
    return out


def _se(f: np.ndarray, h: np.ndarray, var_w: np.ndarray) -> float:
    """``sqrt(sum_k V_k (df/dW_k)**2)`` from the central differences in ``f``."""
    if not np.isfinite(f[0]):
        return float("nan")
    grad = (f[1::2] - f[2::2]) / (2.0 * h)
    used = var_w > 0  # an empty cell has no sampling variance at first order
    if not np.all(np.isfinite(grad[used])):
        return float("nan")
    return float(np.sqrt(np.sum(var_w[used] * grad[used] ** 2)))
