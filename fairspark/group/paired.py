"""The group audit's champion-against-challenger part (``columns.baseline``).

The audited decision (the challenger) keeps today's rows (``model`` empty). The
baseline decision on the same rows gets the same rows with ``model =``
:data:`~fairspark.metrics._paired.BASELINE_MODEL`, from its cells, which are a
marginal of the joint cells of the one aggregation (:func:`baseline_cells`). Every
comparison (the pooled unprivileged group and each unprivileged value against the
privileged group) gets, per catalogue metric, a row with ``model =``
:data:`~fairspark.metrics._paired.DIFFERENCE_MODEL`: challenger minus baseline, with
the paired interval of :func:`fairspark.metrics._paired.paired_comparison`. So does
every other group metric the challenger has: each group's rates
(:func:`~fairspark.metrics._paired.paired_rates`), an attribute's between-group GEI and
Theil and the overall GEI and Theil (attribute ``*``,
:func:`~fairspark.metrics._paired.paired_inequality`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from fairspark._values import nan_to_none as _f
from fairspark._values import params_json
from fairspark.audits.base import MetricRow
from fairspark.columns import BASE
from fairspark.metrics import (
    BASELINES,
    CATALOGUE,
    CELL_STATS,
    CELLS,
    DIFFERENCE_MODEL,
    PairedValue,
    baseline_cell,
    marginal_counts,
    paired_comparison,
    paired_inequality,
    paired_rates,
)
from fairspark.status import Status

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from fairspark.audits.prepared import AttributeInfo
    from fairspark.group.params import GroupParams

__all__ = ["baseline_cells", "difference_rows", "joint_counts", "overall_difference_rows"]

#: the worst status of the two decisions' rows is the difference row's
_RANK = {Status.OK: 0, Status.INCONCLUSIVE: 1, Status.NOT_COMPUTED: 2, Status.FAILED: 3}


def baseline_cells(joint: pd.DataFrame) -> pd.DataFrame:
    """The baseline decision's cells per combination of the views, from the joint cells.

    A row keeps its label and takes the baseline's decision (``_fs_base``), so e.g. a
    challenger true positive that the baseline turned down counts as a baseline false
    negative. Same layout as the challenger's cells.
    """
    view_cols = [c for c in joint.columns if c not in CELL_STATS and c != BASE]
    out = joint[view_cols].copy()
    for s in CELL_STATS:
        out[s] = 0.0
    base = joint[BASE].to_numpy()
    for c in CELLS:
        for b in (0, 1):
            target = baseline_cell(c, b)
            for suffix in ("", "_w2", "_n"):
                out[f"{target}{suffix}"] += np.where(base == b, joint[f"{c}{suffix}"], 0.0)
    return (out.groupby(view_cols, sort=True, dropna=False)[list(CELL_STATS)].sum()
            .reset_index())


def joint_counts(joint: pd.DataFrame, mask: Any) -> dict[int, dict[str, float]]:
    """``{baseline decision: the challenger's cells of those rows}`` of the rows in ``mask``."""
    mask = np.asarray(mask, dtype=bool)
    base = joint[BASE].to_numpy()
    return {b: marginal_counts(joint, mask & (base == b)) for b in (1, 0)}


def _discordant(joint: dict[int, dict[str, float]]) -> int:
    """Rows where the two decisions differ (what the paired interval rests on: with a
    handful of them it is rough, as McNemar's normal approximation is)."""
    yes, no = ("tp", "fp", "up"), ("tn", "fn", "un")
    return int(sum(joint[0][f"{c}_n"] for c in yes) + sum(joint[1][f"{c}_n"] for c in no))


def _status(statuses: dict[tuple[str, str], Any], group: str, name: str) -> Any:
    found = [statuses[k] for k in ((f"c:{group}", name), (f"b:{group}", name)) if k in statuses]
    return max(found, key=lambda s: _RANK.get(s, 0)) if found else Status.OK


def _row(attr: str, group: str, name: str, pv: PairedValue, *, params: GroupParams,
         statuses: dict[tuple[str, str], Any], **extra_params: Any) -> MetricRow:
    """One paired-difference row: its status no better than its two sources'."""
    status = _status(statuses, group, name)
    detail = None
    if status == Status.OK and _f(pv.difference) is None:
        status, detail = Status.NOT_COMPUTED, "undefined for one of the two decisions"
    elif status != Status.OK:
        detail = f"the two decisions' rows are {status} at worst"
    extra = {"challenger": _f(pv.challenger), "baseline": _f(pv.baseline),
             "se": _f(pv.se), "worse": _f(pv.worse), "worse_se": _f(pv.worse_se),
             "worse_lower": _f(pv.worse_lower), "worse_upper": _f(pv.worse_upper)}
    return MetricRow(
        audit="group", attribute=attr, group=group, metric=name, model=DIFFERENCE_MODEL,
        value=_f(pv.difference), lower=_f(pv.lower), upper=_f(pv.upper), status=status,
        detail=detail,
        params=params_json(ci_level=params.ci_level, weights=params.weights,
                           interval="paired delta method", **extra_params, **extra))


def _rate_groups(attr: AttributeInfo, joint: pd.DataFrame, params: GroupParams
                 ) -> list[tuple[str, Any]]:
    """(group, mask) of every group the challenger has rates for (as ``attribute_rows``)."""
    priv_mask = joint[attr.priv_col].astype(bool).to_numpy()
    values = joint[attr.value_col].astype(str).to_numpy()
    out = [("privileged", priv_mask), ("unprivileged", ~priv_mask)]
    unpriv_values = [v for v in attr.values if v not in attr.privileged_values]
    if params.multi_valued and len(unpriv_values) > 1:
        out += [(v, values == v) for v in unpriv_values]
        if len(attr.privileged_values) > 1:
            out += [(v, values == v) for v in attr.privileged_values]
    return out


def _other_rows(attr: AttributeInfo, joint: pd.DataFrame, params: GroupParams,
                statuses: dict[tuple[str, str], Any]) -> list[MetricRow]:
    """The rates of every group and the between-group GEI and Theil, paired."""
    rows = []
    for group, mask in _rate_groups(attr, joint, params):
        j = joint_counts(joint, mask)
        for name, pv in paired_rates(j, level=params.ci_level, weights=params.weights).items():
            rows.append(_row(attr.name, group, name, pv, params=params, statuses=statuses,
                             discordant_rows=[_discordant(j)]))
    values = joint[attr.value_col].astype(str).to_numpy()
    groups = [joint_counts(joint, values == v) for v in attr.values]
    between = paired_inequality(groups, level=params.ci_level, weights=params.weights)
    for key in ("between_group_gei", "between_group_theil"):
        rows.append(_row(attr.name, "all", key, between[key], params=params,
                         statuses=statuses))
    return rows


def overall_difference_rows(joint: pd.DataFrame, *, params: GroupParams,
                            challenger: list[MetricRow], baseline: list[MetricRow],
                            ) -> list[MetricRow]:
    """The overall GEI and Theil (attribute ``*``), challenger minus baseline, paired.

    Parameters
    ----------
    joint:
        The joint cells (views' columns, ``_fs_base`` and the challenger's cell stats).
    params:
        ``audits.group``: the level and the weights.
    challenger, baseline:
        The two decisions' overall rows (attribute ``*``): their worse status is the
        difference rows'.
    """
    statuses = {(f"c:{r.group}", r.metric): r.status for r in challenger}
    statuses |= {(f"b:{r.group}", r.metric): r.status for r in baseline}
    everyone = joint_counts(joint, np.ones(len(joint), dtype=bool))
    res = paired_inequality([everyone], level=params.ci_level, weights=params.weights)
    return [_row("*", "all", key, res[key], params=params, statuses=statuses,
                 alpha=0.5 if key == "gei" else 1.0) for key in ("gei", "theil")]


def difference_rows(
    attr: AttributeInfo, joint: pd.DataFrame, *, params: GroupParams,
    challenger: list[MetricRow], baseline: list[MetricRow],
) -> tuple[list[MetricRow], dict[str, Any]]:
    """The paired-difference rows of one attribute and its summary (the pooled view).

    Parameters
    ----------
    attr:
        The sensitive view.
    joint:
        The joint cells (views' columns, ``_fs_base`` and the challenger's cell stats).
    params:
        ``audits.group``: the level, weights and whether each value is compared.
    challenger, baseline:
        The two decisions' rows of this attribute: a difference row is no better than
        the worse status of its two sources (e.g. inconclusive on a small group).

    Returns
    -------
    (rows, summary)
        Rows of every comparison metric, every group's rates and the between-group
        GEI and Theil. ``summary`` maps each metric of the pooled comparison to its
        challenger, baseline and difference values, the difference's interval, and
        ``worse`` (further from parity) with its interval.
    """
    statuses = {(f"c:{r.group}", r.metric): r.status for r in challenger}
    statuses |= {(f"b:{r.group}", r.metric): r.status for r in baseline}
    priv_mask = joint[attr.priv_col].astype(bool).to_numpy()
    values = joint[attr.value_col].astype(str).to_numpy()
    comparisons = [("unprivileged", ~priv_mask)]
    unpriv_values = [v for v in attr.values if v not in attr.privileged_values]
    if params.multi_valued and len(unpriv_values) > 1:
        comparisons += [(v, values == v) for v in unpriv_values]
    priv = joint_counts(joint, priv_mask)
    priv_apart = _discordant(priv)
    rows: list[MetricRow] = []
    summary: dict[str, Any] = {}
    for group, mask in comparisons:
        unpriv = joint_counts(joint, mask)
        paired = paired_comparison(unpriv, priv, level=params.ci_level,
                                   weights=params.weights)
        apart = [_discordant(unpriv), priv_apart]
        for name in {**CATALOGUE, **BASELINES}:
            row = _row(attr.name, group, name, paired[name], params=params,
                       statuses=statuses, discordant_rows=apart)
            rows.append(row)
            if group == "unprivileged":
                p = json.loads(row.params or "{}")
                keep = ("challenger", "baseline", "se", "worse", "worse_se", "worse_lower",
                        "worse_upper")
                summary[name] = {"difference": row.value, "lower": row.lower,
                                 "upper": row.upper, "status": row.status,
                                 **{k: p.get(k) for k in keep}}
    return rows + _other_rows(attr, joint, params, statuses), summary
