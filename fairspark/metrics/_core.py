"""The group-metric core: weighted confusion cells -> the whole metric catalogue.

This module is the only place where fairness-metric formulas live. It is plain numpy:
the Spark audit calls it on the driver with counts aggregated in one pass, and the
correlation audit's pandas-UDF tasks call it on each model's test-set counts.

Cells
-----
Every row falls into one of six cells, by its (favourable) label and decision:

====== ===================== =====================
cell   label                 decision
====== ===================== =====================
``tp`` favourable            favourable
``fp`` unfavourable          favourable
``tn`` unfavourable          unfavourable
``fn`` favourable            unfavourable
``up`` unknown (null)        favourable
``un`` unknown (null)        unfavourable
====== ===================== =====================

Rows with an unknown label count for the prediction-only metrics (selection rate,
statistical parity, disparate impact) and for nothing else.

All functions accept scalars or numpy arrays of any (broadcastable) shape for each
cell, so many groups or many bootstrap samples are evaluated in one call.

The catalogue of 20 signed metrics follows Anahideh et al. [1]_.

References
----------
.. [1] H. Anahideh, N. Nezami and A. Asudeh, "Finding Representative Group Fairness
   Metrics Using Correlation Estimations", arXiv:2109.05697, 2021.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = [
    "BASELINES",
    "CATALOGUE",
    "CELLS",
    "COMPARED_RATES",
    "RATES",
    "MetricSpec",
    "RateSpec",
    "catalogue_from_counts",
    "compare_groups",
    "distance_from_parity",
    "metric_range",
    "group_rates",
    "inequality_indices",
    "rate_with_reason",
]

CELLS: tuple[str, ...] = ("tp", "fp", "tn", "fn", "up", "un")


@dataclass(frozen=True)
class RateSpec:
    """A rate ``sum(numerator cells) / sum(denominator cells)``.

    Examples
    --------
    >>> from fairspark.metrics import RATES
    >>> RATES["tpr"].numerator, RATES["tpr"].denominator
    (('tp',), ('tp', 'fn'))"""

    name: str
    numerator: tuple[str, ...]
    denominator: tuple[str, ...]
    description: str
    denominator_name: str


RATES: dict[str, RateSpec] = {
    r.name: r
    for r in [
        RateSpec("selection_rate", ("tp", "fp", "up"), CELLS,
                 "share of rows with the favourable decision", "rows"),
        RateSpec("base_rate", ("tp", "fn"), ("tp", "fp", "tn", "fn"),
                 "share of labelled rows with the favourable label", "labelled rows"),
        RateSpec("tpr", ("tp",), ("tp", "fn"),
                 "true positive rate (recall)", "rows with favourable label"),
        RateSpec("fpr", ("fp",), ("fp", "tn"),
                 "false positive rate", "rows with unfavourable label"),
        RateSpec("fnr", ("fn",), ("tp", "fn"),
                 "false negative rate", "rows with favourable label"),
        RateSpec("tnr", ("tn",), ("fp", "tn"),
                 "true negative rate", "rows with unfavourable label"),
        RateSpec("ppv", ("tp",), ("tp", "fp"),
                 "positive predictive value (precision)", "labelled rows predicted favourable"),
        RateSpec("npv", ("tn",), ("tn", "fn"),
                 "negative predictive value", "labelled rows predicted unfavourable"),
        RateSpec("fdr", ("fp",), ("tp", "fp"),
                 "false discovery rate", "labelled rows predicted favourable"),
        RateSpec("for", ("fn",), ("tn", "fn"),
                 "false omission rate", "labelled rows predicted unfavourable"),
        RateSpec("error_rate", ("fp", "fn"), ("tp", "fp", "tn", "fn"),
                 "misclassification rate", "labelled rows"),
        RateSpec("accuracy", ("tp", "tn"), ("tp", "fp", "tn", "fn"),
                 "accuracy", "labelled rows"),
    ]
}

#: Rates compared between groups by a difference and a ratio (Anahideh et al., 2021).
COMPARED_RATES: tuple[str, ...] = ("tpr", "fpr", "fnr", "ppv", "npv", "fdr", "for", "error_rate")

_RATE_ALIASES = {
    "tpr": "equal opportunity (E-Opp)",
    "ppv": "predictive parity (PP)",
}


@dataclass(frozen=True)
class MetricSpec:
    """A signed between-group metric of the catalogue.

    ``kind`` is ``difference`` (unprivileged minus privileged, fair = 0), ``ratio``
    (unprivileged over privileged, fair = 1), ``combined`` (fair = 0) or ``absolute``.

    Examples
    --------
    >>> from fairspark.metrics import CATALOGUE
    >>> spec = CATALOGUE["disparate_impact"]
    >>> spec.kind, spec.rate, spec.formula, spec.fair_value
    ('ratio', 'selection_rate', 'SR_u / SR_p', 1.0)
    """

    name: str
    kind: str
    rate: str | None
    formula: str
    fair_value: float


def _build_catalogue() -> dict[str, MetricSpec]:
    specs = [
        MetricSpec("statistical_parity_difference", "difference", "selection_rate",
                   "SR_u - SR_p", 0.0),
        MetricSpec("disparate_impact", "ratio", "selection_rate", "SR_u / SR_p", 1.0),
    ]
    for r in COMPARED_RATES:
        up = r.upper()
        specs.append(MetricSpec(f"{r}_difference", "difference", r, f"{up}_u - {up}_p", 0.0))
        specs.append(MetricSpec(f"{r}_ratio", "ratio", r, f"{up}_u / {up}_p", 1.0))
    specs += [
        MetricSpec("average_odds_difference", "combined", None,
                   "((FPR_u - FPR_p) + (TPR_u - TPR_p)) / 2", 0.0),
        MetricSpec("equalized_odds_difference", "combined", None,
                   "max(|TPR_u - TPR_p|, |FPR_u - FPR_p|)", 0.0),
    ]
    return {s.name: s for s in specs}


#: The signed catalogue of 20 metrics (after Anahideh et al., 2021).
CATALOGUE: dict[str, MetricSpec] = _build_catalogue()

#: Seed-000 baselines reported beside HFM (absolute gaps).
BASELINES: dict[str, MetricSpec] = {
    s.name: s
    for s in [
        MetricSpec("dp", "absolute", "selection_rate", "|SR_u - SR_p|", 0.0),
        MetricSpec("eo", "absolute", "tpr", "|TPR_u - TPR_p|", 0.0),
        MetricSpec("pqp", "absolute", "ppv", "|PPV_u - PPV_p|", 0.0),
    ]
}


def distance_from_parity(kind: str, value: object) -> np.ndarray:
    """How far ``value`` of a metric of ``kind`` is from parity: the one definition.

    Every comparison of "further from parity" (the paired ``worse`` of a challenger
    against a baseline, the ``no_worse_than_baseline`` limit that judges it, the limits'
    words, the trends' better/worse and the decision box's headline) reads this.

    - ``difference``, ``combined`` and ``absolute`` (fair at 0): ``|M|``;
    - ``ratio`` (fair at 1): ``|ln M|``, symmetric in the two groups (swapping which
      group is privileged turns ``M`` into ``1/M`` and keeps the distance): a disparate
      impact of 0.5 and one of 2 are equally far from parity, where ``|M - 1|`` would
      call 2 twice as far. ``M = 0`` is infinitely far; a negative or NaN ``M`` has no
      distance (NaN).

    Parameters
    ----------
    kind:
        :attr:`MetricSpec.kind` (``difference``, ``ratio``, ``combined`` or ``absolute``).
    value:
        The metric's value (scalar or array).

    Returns
    -------
    numpy.ndarray
        The distance, same shape as ``value`` (a 0-d array for a scalar).

    Examples
    --------
    >>> round(float(distance_from_parity("ratio", 0.5)), 6)  # ln 2
    0.693147
    >>> round(float(distance_from_parity("ratio", 2.0)), 6)  # as far as 0.5
    0.693147
    >>> float(distance_from_parity("difference", -0.25))
    0.25
    >>> [float(d) for d in distance_from_parity("ratio", [1.0, 0.0, -1.0])]
    [0.0, inf, nan]
    """
    v = np.asarray(value, np.float64)
    if kind == "ratio":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.abs(np.where(v >= 0, np.log(np.where(v >= 0, v, np.nan)), np.nan))
    if kind in ("difference", "combined", "absolute"):
        return np.abs(v)
    raise ValueError(f"no distance from parity for a metric of kind {kind!r}")


def metric_range(name: str) -> tuple[float, float] | None:
    """The values a catalogue metric (or baseline) can take; ``None``: not one of them.

    Ratios ``[0, inf)``; differences of rates and the average odds ``[-1, 1]``; the
    absolute gaps and equalized odds (a maximum of absolute gaps) ``[0, 1]``. No printed
    interval of the metric leaves this range.

    Examples
    --------
    >>> metric_range("disparate_impact"), metric_range("tpr_difference")
    ((0.0, inf), (-1.0, 1.0))
    >>> metric_range("dp"), metric_range("accuracy") is None
    ((0.0, 1.0), True)
    """
    spec = CATALOGUE.get(name) or BASELINES.get(name)
    if spec is None:
        return None
    if spec.kind == "ratio":
        return 0.0, math.inf
    if spec.kind == "absolute" or name == "equalized_odds_difference":
        return 0.0, 1.0
    return -1.0, 1.0


def _as(counts: Mapping[str, object], cell: str) -> np.ndarray:
    v = counts.get(cell, 0.0)
    return np.asarray(v, dtype=np.float64)


def _sum(counts: Mapping[str, object], cells: tuple[str, ...]) -> np.ndarray:
    out = _as(counts, cells[0])
    for c in cells[1:]:
        out = out + _as(counts, c)
    return out


def _divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num, den = np.broadcast_arrays(np.asarray(num, np.float64), np.asarray(den, np.float64))
    out = np.full(num.shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out if out.shape else out[()]


def group_rates(counts: Mapping[str, object]) -> dict[str, np.ndarray]:
    """Every rate of :data:`RATES` for one group (or arrays of groups).

    A rate whose denominator is zero is NaN; :func:`rate_with_reason` gives the reason.

    Examples
    --------
    >>> counts = {"tp": 30, "fp": 10, "tn": 50, "fn": 10, "up": 0, "un": 0}
    >>> rates = group_rates(counts)
    >>> float(rates["tpr"]), float(rates["selection_rate"]), float(rates["accuracy"])
    (0.75, 0.4, 0.8)
    """
    return {
        name: _divide(_sum(counts, spec.numerator), _sum(counts, spec.denominator))
        for name, spec in RATES.items()
    }


def rate_with_reason(counts: Mapping[str, float], rate: str) -> tuple[float, str | None]:
    """A scalar rate and, when it is undefined, the reason in words.

    Examples
    --------
    >>> rate_with_reason({"tp": 30, "fp": 10, "tn": 50, "fn": 10}, "tpr")
    (0.75, None)
    >>> rate_with_reason({"tp": 0, "fp": 5, "tn": 5, "fn": 0}, "tpr")
    (nan, 'tpr undefined: no rows with favourable label')"""
    spec = RATES[rate]
    den = float(_sum(counts, spec.denominator))
    if den == 0:
        return float("nan"), f"{rate} undefined: no {spec.denominator_name}"
    return float(_sum(counts, spec.numerator)) / den, None


def compare_groups(
    unpriv: Mapping[str, object], priv: Mapping[str, object]
) -> dict[str, np.ndarray]:
    """The catalogue (:data:`CATALOGUE`) and baselines (:data:`BASELINES`).

    Differences are unprivileged minus privileged, ratios unprivileged over
    privileged (AIF360 convention). NaN where a rate or ratio is undefined.

    Examples
    --------
    >>> unpriv = {"tp": 30, "fp": 10, "tn": 50, "fn": 10, "up": 0, "un": 0}
    >>> priv = {"tp": 40, "fp": 10, "tn": 40, "fn": 10, "up": 0, "un": 0}
    >>> out = compare_groups(unpriv, priv)
    >>> round(float(out["statistical_parity_difference"]), 6)  # 0.4 - 0.5
    -0.1
    >>> round(float(out["disparate_impact"]), 6)  # 0.4 / 0.5
    0.8
    >>> round(float(out["tpr_difference"]), 6)  # 30/40 - 40/50
    -0.05
    """
    ru, rp = group_rates(unpriv), group_rates(priv)
    out: dict[str, np.ndarray] = {}
    for name, spec in CATALOGUE.items():
        if spec.kind == "difference":
            out[name] = ru[spec.rate] - rp[spec.rate]
        elif spec.kind == "ratio":
            out[name] = _divide(ru[spec.rate], rp[spec.rate])
    dtpr = ru["tpr"] - rp["tpr"]
    dfpr = ru["fpr"] - rp["fpr"]
    out["average_odds_difference"] = (dfpr + dtpr) / 2.0
    # np.fmax would hide a NaN; equalized odds is undefined if either gap is.
    out["equalized_odds_difference"] = np.maximum(np.abs(dtpr), np.abs(dfpr))
    for name, spec in BASELINES.items():
        out[name] = np.abs(ru[spec.rate] - rp[spec.rate])
    return out


def _entropy_terms(ratio: np.ndarray, alpha: float) -> np.ndarray:
    """Per-value term of the generalized entropy index for b/mu = ``ratio``."""
    ratio = np.asarray(ratio, np.float64)
    if alpha == 1.0:  # Theil: (b/mu) ln(b/mu), with 0 ln 0 = 0
        with np.errstate(divide="ignore", invalid="ignore"):
            t = ratio * np.log(ratio)
        return np.where(ratio == 0, 0.0, t)
    if alpha == 0.0:
        with np.errstate(divide="ignore"):
            return -np.log(ratio)
    return (np.power(ratio, alpha) - 1.0) / (alpha * (alpha - 1.0))


def inequality_indices(
    groups: list[Mapping[str, object]], *, alpha: float = 0.5
) -> dict[str, np.ndarray]:
    """Generalized entropy index (GEI) and Theil index on ``b = y_hat - y + 1``.

    ``b`` is 0 for a false negative, 1 for a correct decision and 2 for a false
    positive, so both indices follow from the labelled cells (Speicher et al. 2018,
    as used by Bian and Luo, 2024, §IV-A). Returned keys:

    - ``gei``: GEI(alpha) over all labelled rows of all ``groups``;
    - ``theil``: Theil index (GEI with alpha = 1) over the same rows;
    - ``between_group_gei`` / ``between_group_theil``: the same with every row's
      benefit replaced by its group's mean benefit.

    NaN when there is no labelled row or the mean benefit is 0.

    References
    ----------
    .. [1] T. Speicher, H. Heidari, N. Grgic-Hlaca, K. P. Gummadi, A. Singla, A. Weller
       and M. B. Zafar, "A Unified Approach to Quantifying Algorithmic Unfairness:
       Measuring Individual & Group Unfairness via Inequality Indices", KDD 2018.
    .. [2] Y. Bian and Y. Luo, "Measuring Model-Induced Discrimination via Efficient
       Fairness Approximation", arXiv:2405.09251, 2024.

    Examples
    --------
    Every row correct: each benefit equals the mean, both indices are 0.

    >>> fair = {"tp": 50, "fp": 0, "tn": 50, "fn": 0}
    >>> {k: float(v) for k, v in inequality_indices([fair, fair]).items()}
    {'gei': 0.0, 'between_group_gei': 0.0, 'theil': 0.0, 'between_group_theil': 0.0}

    One group's errors all false positives (benefit 2), the other's false negatives
    (benefit 0): the group means differ, so the between-group part is positive.

    >>> a = {"tp": 40, "fp": 20, "tn": 40, "fn": 0}
    >>> b = {"tp": 40, "fp": 0, "tn": 40, "fn": 20}
    >>> out = inequality_indices([a, b], alpha=2.0)  # (mean(b**2) - 1) / 2, mean benefit 1
    >>> round(float(out["gei"]), 6), round(float(out["between_group_gei"]), 6)
    (0.1, 0.02)
    """
    n0 = sum(_as(g, "fn") for g in groups)
    n1 = sum(_as(g, "tp") + _as(g, "tn") for g in groups)
    n2 = sum(_as(g, "fp") for g in groups)
    n = n0 + n1 + n2
    mu = _divide(n1 + 2.0 * n2, n)
    out: dict[str, np.ndarray] = {}
    for key, a in (("gei", alpha), ("theil", 1.0)):
        with np.errstate(invalid="ignore", divide="ignore"):
            total = (
                n0 * _entropy_terms(_divide(0.0 * mu, mu), a)
                + n1 * _entropy_terms(_divide(1.0 + 0.0 * mu, mu), a)
                + n2 * _entropy_terms(_divide(2.0 + 0.0 * mu, mu), a)
            )
            out[key] = _divide(total, n)
        between = 0.0
        for g in groups:
            g0, g2 = _as(g, "fn"), _as(g, "fp")
            g1 = _as(g, "tp") + _as(g, "tn")
            ng = g0 + g1 + g2
            mug = _divide(g1 + 2.0 * g2, ng)
            with np.errstate(invalid="ignore", divide="ignore"):
                term = np.where(ng > 0, ng * _entropy_terms(_divide(mug, mu), a), 0.0)
            between = between + term
        out[f"between_group_{key}"] = _divide(between, n)
    return out


def catalogue_from_counts(
    unpriv: Mapping[str, object], priv: Mapping[str, object], *, alpha: float = 0.5
) -> dict[str, np.ndarray]:
    """Everything for one comparison: catalogue, baselines, GEI and Theil.

    This is the function the correlation audit evaluates per trained model: it
    returns the 20 catalogue metrics, ``dp``/``eo``/``pqp``, ``gei``/``theil`` (on
    the two groups' rows), their between-group variants, and ``accuracy`` over both
    groups.

    Examples
    --------
    >>> unpriv = {"tp": 30, "fp": 10, "tn": 50, "fn": 10, "up": 0, "un": 0}
    >>> priv = {"tp": 40, "fp": 10, "tn": 40, "fn": 10, "up": 0, "un": 0}
    >>> out = catalogue_from_counts(unpriv, priv)
    >>> len(out), float(out["accuracy"])
    (28, 0.8)
    """
    out = compare_groups(unpriv, priv)
    out.update(inequality_indices([unpriv, priv], alpha=alpha))
    both = {c: _as(unpriv, c) + _as(priv, c) for c in CELLS}
    out["accuracy"] = group_rates(both)["accuracy"]
    return out


def comparison_reason(
    unpriv: Mapping[str, float], priv: Mapping[str, float], metric: str
) -> str | None:
    """Why a scalar catalogue metric is NaN (``None`` when it is defined).

    Examples
    --------
    >>> unpriv = {"tp": 30, "fp": 10, "tn": 50, "fn": 10, "up": 0, "un": 0}
    >>> none_favoured = {"tp": 0, "fp": 0, "tn": 5, "fn": 5, "up": 0, "un": 0}
    >>> comparison_reason(unpriv, unpriv, "disparate_impact") is None
    True
    >>> comparison_reason(unpriv, none_favoured, "disparate_impact")
    'ratio undefined: selection_rate of the privileged group is 0'
    >>> comparison_reason(unpriv, {"tp": 0, "fp": 0, "tn": 0, "fn": 0}, "tpr_difference")
    'tpr undefined: no rows with favourable label in the privileged group'"""
    spec = CATALOGUE.get(metric) or BASELINES.get(metric)
    rates: tuple[str, ...]
    if spec is None or spec.rate is None:
        rates = ("tpr", "fpr")
    else:
        rates = (spec.rate,)
    for r in rates:
        for side, c in (("unprivileged", unpriv), ("privileged", priv)):
            _, why = rate_with_reason(c, r)
            if why:
                return f"{why} in the {side} group"
    if spec is not None and spec.kind == "ratio":
        v, _ = rate_with_reason(priv, spec.rate)  # type: ignore[arg-type]
        if v == 0:
            return f"ratio undefined: {spec.rate} of the privileged group is 0"
    return None
