"""HFM's champion-against-challenger part (``columns.baseline``).

D measures how far apart the groups' points ``[y, x]`` are: it reads the label and the
features, never a decision, so the challenger (the audited decision) and the baseline
share it. Only D_f reads the decision: the baseline's D_f is the same distance on the
points ``[baseline decision, x]`` of the same rows (``fairspark.hfm.audit`` runs the
engine once more on them, for D_f only).

The baseline's rows are the D_f-derived rows (D_f, D_f_avg, df, df_avg and the
variants beside them) with ``model =`` :data:`~fairspark.metrics._paired.BASELINE_MODEL`;
the D rows are not repeated. Every D_f, D_f_avg, df and df_avg gets a row with
``model =`` :data:`~fairspark.metrics._paired.DIFFERENCE_MODEL`: challenger minus
baseline. HFM's intervals are certification bounds, not statistical ones, so the
difference's bounds are the sound ``[lower_c - upper_b, upper_c - lower_b]``: exact
when both values are exact, none when either side has no bound on that end.
"""

from __future__ import annotations

import dataclasses
import json

from fairspark._values import nan_to_none, params_json
from fairspark.audits.base import MetricRow
from fairspark.metrics import BASELINE_MODEL, DIFFERENCE_MODEL
from fairspark.status import Status

__all__ = ["PAIRED_METRICS", "baseline_rows", "difference_rows"]

#: the metrics whose challenger-minus-baseline difference is a row
PAIRED_METRICS: tuple[str, ...] = ("D_f", "D_f_avg", "df", "df_avg")

#: a difference row is no better than the worse status of its two sources
_RANK = {Status.OK: 0, Status.INCONCLUSIVE: 1, Status.NOT_CERTIFIED: 2, Status.TIMED_OUT: 3,
         Status.NOT_COMPUTED: 4, Status.FAILED: 5}


def _reads_decision(metric: str) -> bool:
    """D_f and df (and their variants) read the decision; D and its variants do not."""
    return metric.startswith(("D_f", "df"))


def baseline_rows(rows: list[MetricRow]) -> list[MetricRow]:
    """The rows of an HFM run on the baseline's points as the baseline's rows.

    Parameters
    ----------
    rows:
        Rows built from ``(D, baseline D_f)`` pairs, as the challenger's are.

    Returns
    -------
    list of MetricRow
        The rows that read the decision, with ``model = "baseline"``; D's rows are
        dropped (they are the challenger's, unchanged).
    """
    return [dataclasses.replace(r, model=BASELINE_MODEL) for r in rows
            if _reads_decision(r.metric)]


def _bounds(r: MetricRow) -> tuple[float | None, float | None]:
    """The interval that certainly holds the row's exact quantity (``None``: no bound).

    An ``_avg`` row marks an exact mean by ``lower = value`` (no ``upper``) and an upper
    bound by ``upper = value`` (no ``lower``).
    """
    if r.metric.endswith("_avg") and r.upper is None and r.lower is not None:
        return r.lower, r.lower
    return r.lower, r.upper


def _minus(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return nan_to_none(a - b)  # inf - inf: undefined


def _detail(lo: float | None, hi: float | None, value: float | None) -> str:
    text = "challenger minus baseline on the same rows (D shared)"
    if value is None:
        return text + "; undefined for one of the two decisions"
    if lo is not None and lo == hi == value:
        return text + "; exact (both values are exact)"
    if lo is not None or hi is not None:
        return text + ("; certified bounds [lower_c - upper_b, upper_c - lower_b] "
                       "of the two decisions' intervals")
    return text + "; no bounds (either value lacks a certified interval)"


def _difference(c: MetricRow, b: MetricRow) -> MetricRow:
    """The row ``c - b`` of one (attribute, view, metric)."""
    (c_lo, c_hi), (b_lo, b_hi) = _bounds(c), _bounds(b)
    value = _minus(c.value, b.value)
    lo, hi = _minus(c_lo, b_hi), _minus(c_hi, b_lo)
    status = max((c.status, b.status), key=lambda s: _RANK.get(s, 0))
    if value is None and status == Status.OK:
        status = Status.NOT_COMPUTED
    try:
        own = json.loads(c.params) if c.params else {}
    except ValueError:  # pragma: no cover - the audit writes JSON
        own = {}
    return MetricRow(
        audit=c.audit, attribute=c.attribute, group=c.group, metric=c.metric,
        model=DIFFERENCE_MODEL, value=value, lower=lo, upper=hi, status=status,
        detail=_detail(lo, hi, value),
        params=params_json(own, challenger=c.value, baseline=b.value,
                           interval="certified bounds"))


def difference_rows(challenger: list[MetricRow], baseline: list[MetricRow]) -> list[MetricRow]:
    """Challenger minus baseline for every :data:`PAIRED_METRICS` row both decisions have.

    Parameters
    ----------
    challenger:
        The audited decision's rows (``model`` empty).
    baseline:
        The baseline's rows (:func:`baseline_rows`).

    Returns
    -------
    list of MetricRow
        One row per (attribute, view, metric), in the challenger's order, with
        ``model = "challenger_minus_baseline"``; ``params`` keeps the two values.
    """
    def key(r: MetricRow) -> tuple:
        return r.attribute, r.group, r.metric

    base = {key(r): r for r in baseline if r.metric in PAIRED_METRICS}
    return [_difference(r, base[key(r)]) for r in challenger
            if r.metric in PAIRED_METRICS and r.model is None and key(r) in base]
