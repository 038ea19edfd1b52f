"""The ``group`` audit: the metric catalogue per sensitive attribute, from one Spark pass."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from fairspark._values import nan_to_none as _f
from fairspark._values import params_json
from fairspark.audits.base import AuditContext, AuditOutcome, MetricRow
from fairspark.columns import BASE, LABEL, PRED, WEIGHT
from fairspark.errors import InvalidValueError, TimeBudgetExhaustedError
from fairspark.group.paired import baseline_cells, difference_rows, overall_difference_rows
from fairspark.group.results import GroupResult
from fairspark.metrics import (
    BASELINE_MODEL,
    BASELINES,
    CATALOGUE,
    CELL_STATS,
    CELLS,
    DIFFERENCE_MODEL,
    RATES,
    cell_counts,
    compare_groups,
    comparison_intervals,
    comparison_reason,
    effective_n,
    inequality_indices,
    inequality_intervals,
    marginal_counts,
    rate_interval,
    rate_with_reason,
)
from fairspark.numbers import fmt_fixed, fmt_setting
from fairspark.status import Status

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from fairspark.audits.prepared import AttributeInfo
    from fairspark.group.params import GroupParams

__all__ = ["run", "attribute_rows"]

log = logging.getLogger("fairspark")

#: the most view-value combinations the audit brings back (as ``cell_counts``)
MAX_GROUPS = 100_000

_LABEL_RATES = {"tpr", "fpr", "fnr", "tnr", "ppv", "npv", "fdr", "for", "error_rate",
                "accuracy", "base_rate"}


def _support(counts: dict[str, float], cells: tuple[str, ...]) -> int:
    return int(sum(counts[f"{c}_n"] for c in cells))


def _too_little(counts: dict[str, float], cells: tuple[str, ...], what: str,
                params: GroupParams) -> str | None:
    """Why a rate over ``cells`` cannot be trusted here, or ``None``.

    Fewer rows than ``min_group_size``; or, with sampling weights, fewer effective
    rows (Kish: ``(sum w)^2 / sum w^2``, what the interval is computed on): a group
    of 500 rows where one row carries most of the weight is about one row.
    """
    n = _support(counts, cells)
    if n < params.min_group_size:
        return f"{n} {what}"
    if params.weights == "sampling":
        n_eff = float(effective_n(counts, cells, weights="sampling"))
        if n_eff < params.min_group_size:
            n_eff_text = fmt_fixed(n_eff, 1, minus="-")
            return f"{n} {what} but an effective sample size of {n_eff_text} under the weights"
    return None


def _rate_rows(
    attr: str, group: str, counts: dict[str, float], params: GroupParams, label_ok: bool,
    pjson: str,
) -> list[MetricRow]:
    rows = []
    for name, spec in RATES.items():
        value, why = rate_with_reason(counts, name)
        lo = hi = None
        if why is None:
            lo, hi = rate_interval(counts, name, level=params.ci_level,
                                   weights=params.weights)
        small = _too_little(counts, spec.denominator, spec.denominator_name, params)
        status, detail = Status.OK, why
        if name in _LABEL_RATES and not label_ok:
            status, detail = Status.FAILED, "no labelled row has the favourable label"
        elif why:  # undefined here (an empty denominator): never "ok"
            status = Status.NOT_COMPUTED
        elif small:
            status = Status.INCONCLUSIVE
            detail = f"only {small} (minimum {params.min_group_size})"
        rows.append(MetricRow(
            audit="group", attribute=attr, group=group, metric=name, value=_f(value),
            lower=_f(lo), upper=_f(hi), status=status, detail=detail, params=pjson,
        ))
    return rows


def _comparison_rows(
    attr: str, group: str, unpriv: dict[str, float], priv: dict[str, float],
    params: GroupParams, label_ok: bool, pjson: str,
) -> list[MetricRow]:
    values = compare_groups(unpriv, priv)
    intervals = comparison_intervals(unpriv, priv, level=params.ci_level,
                                     weights=params.weights)
    # the compared group's support, for ranking the worst group (limits, report):
    # its rows and its rows with the favourable decision (unweighted counts)
    pjson = params_json(json.loads(pjson or "{}"), n=_support(unpriv, CELLS),
                        favourable=_support(unpriv, ("tp", "fp", "up")))
    rows = []
    for name, spec in {**CATALOGUE, **BASELINES}.items():
        value = _f(values[name])
        rate_names = (spec.rate,) if spec.rate else ("tpr", "fpr")
        needs_label = any(r in _LABEL_RATES for r in rate_names)
        detail = None if value is not None else comparison_reason(unpriv, priv, name)
        status = Status.OK if value is not None else Status.NOT_COMPUTED
        if needs_label and not label_ok:
            status, detail, value = Status.FAILED, "no labelled row has the favourable label", None
        elif value is not None:
            small = []
            for r in rate_names:
                den = RATES[r].denominator
                for side, c in (("unprivileged", unpriv), ("privileged", priv)):
                    why = _too_little(c, den, RATES[r].denominator_name, params)
                    if why:
                        small.append(f"{why} in the {side} group")
            if small:
                status = Status.INCONCLUSIVE
                detail = f"only {'; '.join(small)} (minimum {params.min_group_size})"
        lo, hi = intervals.get(name, (None, None))
        rows.append(MetricRow(
            audit="group", attribute=attr, group=group, metric=name, value=value,
            lower=_f(lo), upper=_f(hi), status=status, detail=detail, params=pjson,
        ))
    return rows


def attribute_rows(
    attr: AttributeInfo, cells: pd.DataFrame, *, params: GroupParams, label_ok: bool
) -> tuple[list[MetricRow], dict[str, Any]]:
    """All rows of one sensitive view from the combination table ``cells``."""
    pjson = params_json({"ci_level": params.ci_level, "min_group_size": params.min_group_size,
                         "weights": params.weights})
    priv_mask = cells[attr.priv_col].astype(bool).to_numpy()
    n_priv, n_unpriv = attr.n_privileged, attr.n_unprivileged
    if n_priv == 0 or n_unpriv == 0:
        which = "privileged" if n_unpriv == 0 else "unprivileged"
        msg = (
            f"attribute {attr.name!r} has a single group: all {n_priv + n_unpriv} rows are "
            f"{which} (values: {sorted(attr.values)}; privileged: {attr.privileged_values})"
        )
        return [MetricRow(audit="group", attribute=attr.name, metric="*", status=Status.FAILED,
                          detail=msg, params=pjson)], {"status": Status.FAILED, "detail": msg}
    priv = marginal_counts(cells, priv_mask)
    unpriv = marginal_counts(cells, ~priv_mask)
    rows = _rate_rows(attr.name, "privileged", priv, params, label_ok, pjson)
    rows += _rate_rows(attr.name, "unprivileged", unpriv, params, label_ok, pjson)
    rows += _comparison_rows(attr.name, "unprivileged", unpriv, priv, params, label_ok, pjson)
    values = cells[attr.value_col].astype(str).to_numpy()
    unpriv_values = [v for v in attr.values if v not in attr.privileged_values]
    groups = [marginal_counts(cells, values == v) for v in attr.values]
    between = inequality_indices(groups)
    between_ci = inequality_intervals(groups, level=params.ci_level, weights=params.weights)
    for key in ("between_group_gei", "between_group_theil"):
        lo, hi = between_ci.get(key, (None, None))
        rows.append(MetricRow(
            audit="group", attribute=attr.name, group="all", metric=key,
            value=_f(between[key]), lower=_f(lo), upper=_f(hi),
            status=Status.OK if label_ok else Status.FAILED,
            detail=None if label_ok else "no labelled row has the favourable label",
            params=pjson,
        ))
    if params.multi_valued and len(unpriv_values) > 1:
        for v in unpriv_values:
            c = marginal_counts(cells, values == v)
            rows += _rate_rows(attr.name, v, c, params, label_ok, pjson)
            rows += _comparison_rows(attr.name, v, c, priv, params, label_ok, pjson)
        if len(attr.privileged_values) > 1:
            for v in attr.privileged_values:
                rows += _rate_rows(attr.name, v, marginal_counts(cells, values == v), params,
                                   label_ok, pjson)
    summary = {
        "status": Status.OK,
        "n_privileged": n_priv,
        "n_unprivileged": n_unpriv,
        "privileged_values": attr.privileged_values,
        "metrics": {
            r.metric: {"value": r.value, "lower": r.lower, "upper": r.upper, "status": r.status,
                       **({"detail": r.detail} if r.detail else {})}
            for r in rows if r.group == "unprivileged" and r.metric in {**CATALOGUE, **BASELINES}
        },
        "groups": {
            g: {r.metric: r.value for r in rows if r.group == g and r.metric in RATES}
            for g in dict.fromkeys(r.group for r in rows if r.metric in RATES)
        },
    }
    return rows, summary


def _cells(ctx: AuditContext, params: GroupParams, attrs: list[AttributeInfo]
           ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The confusion cells per combination of the views' values, and the joint cells.

    Without a sample (``max_rows`` unset or above the audited rows) they are the cells
    :func:`~fairspark.prepare.prepare` counted in its one aggregation over the input
    (no Spark job here); with a sample, one aggregation over the sampled rows. With a
    baseline decision the joint cells (split by it) come from the same aggregation,
    and the cells are their marginal; ``None`` without one.
    """
    prepared = ctx.prepared
    whole = params.max_rows is None or params.max_rows >= prepared.rows_audited
    group_cols = [c for a in attrs for c in (a.value_col, a.priv_col)]
    paired = bool(prepared.baseline_column)
    if whole and prepared.cells is not None and (not paired or prepared.joint_cells is not None):
        if len(prepared.cells[group_cols].drop_duplicates()) > MAX_GROUPS:
            raise InvalidValueError(
                f"the sensitive attributes {group_cols} form more than {MAX_GROUPS} groups")
        return prepared.cells, prepared.joint_cells
    df = prepared.capped_df(max_rows=params.max_rows, seed=ctx.seed_for("group", "cap"),
                            features=False)
    counted = cell_counts(df, group_cols=[*group_cols, *([BASE] if paired else [])],
                          label_col=LABEL, prediction_col=PRED, weight_col=WEIGHT,
                          max_groups=MAX_GROUPS * (2 if paired else 1))
    if not paired:
        return counted, None
    cells = counted.groupby(group_cols, sort=True)[list(CELL_STATS)].sum().reset_index()
    return cells, counted



def _performance(everyone: Any) -> dict[str, Any]:
    """The model's overall performance on the labelled rows (row counts, unweighted):
    accuracy, base rate (favourable labels) and positive rate (favourable decisions)."""
    n = float(sum(everyone[f"{c}_n"] for c in ("tp", "fp", "tn", "fn")))
    if n <= 0:
        return {"labelled_rows": 0, "accuracy": None, "base_rate": None,
                "positive_rate": None}
    return {"labelled_rows": int(n),
            "accuracy": float((everyone["tp_n"] + everyone["tn_n"]) / n),
            "base_rate": float((everyone["tp_n"] + everyone["fn_n"]) / n),
            "positive_rate": float((everyone["tp_n"] + everyone["fp_n"]) / n)}

def _overall_rows(everyone: dict[str, float], params: GroupParams, label_ok: bool,
                  model: str | None = None) -> list[MetricRow]:
    """GEI and Theil over every labelled row (attribute ``*``)."""
    overall = inequality_indices([everyone])
    overall_ci = inequality_intervals([everyone], level=params.ci_level,
                                      weights=params.weights)
    rows = []
    for key in ("gei", "theil"):
        lo, hi = overall_ci.get(key, (None, None))
        rows.append(MetricRow(
            audit="group", attribute="*", group="all", metric=key, value=_f(overall[key]),
            model=model, lower=_f(lo), upper=_f(hi),
            status=Status.OK if label_ok else Status.FAILED,
            detail=None if label_ok else "no labelled row has the favourable label",
            params=params_json(alpha=0.5 if key == "gei" else 1.0),
        ))
    return rows


def baseline_decision(spec: Any) -> str | None:
    """The baseline named by its column and rule: ``decile_score11 >= 5`` (a score and
    its threshold) or ``pred_lr = 1`` (a decision column and its favourable value(s))."""
    if spec is None:
        return None
    if getattr(spec, "threshold", None) is not None:
        return f"{spec.column} >= {fmt_setting(spec.threshold)}"
    values = list(getattr(spec, "positive", None) or [1])
    shown = values[0] if len(values) == 1 else "{" + ", ".join(map(str, values)) + "}"
    return f"{spec.column} {'=' if len(values) == 1 else 'in'} {shown}"


def _baseline_part(ctx: AuditContext, attrs: list[AttributeInfo], joint: pd.DataFrame,
                   challenger: list[MetricRow], params: GroupParams, label_ok: bool,
                   summary: dict[str, Any]) -> list[MetricRow]:
    """The baseline decision's rows and the paired differences of every group metric.

    Adds ``summary["baseline"]``: the column, per attribute the pooled comparison's
    paired differences, and which other enabled audits audit the challenger only.
    """
    base = baseline_cells(joint)
    rows: list[MetricRow] = []
    info: dict[str, Any] = {"column": ctx.prepared.baseline_column,
                            "decision": baseline_decision(ctx.config.columns.baseline),
                            "attributes": {}}
    for a in attrs:
        b_rows, _ = attribute_rows(a, base, params=params, label_ok=label_ok)
        b_rows = [dataclasses.replace(r, model=BASELINE_MODEL) for r in b_rows]
        mine = [r for r in challenger if r.attribute == a.name]
        if any(r.metric == "*" for r in mine):  # a single group: nothing to compare
            rows += b_rows
            continue
        d_rows, d_summary = difference_rows(a, joint, params=params, challenger=mine,
                                            baseline=b_rows)
        rows += b_rows + d_rows
        info["attributes"][a.name] = d_summary
    overall = _overall_rows(marginal_counts(base, np.ones(len(base), dtype=bool)), params,
                            label_ok, model=BASELINE_MODEL)
    rows += overall + overall_difference_rows(
        joint, params=params, challenger=[r for r in challenger if r.attribute == "*"],
        baseline=overall)
    specs = ctx.config.audits.audit_specs()
    enabled = [n for n in ctx.config.audits.enabled() if n != "group"]
    # an audit whose spec says it compares the baseline writes its own baseline rows
    compared = ["group", *(n for n in enabled
                           if getattr(specs.get(n), "compares_baseline", False))]
    others = [n for n in enabled if n not in compared]
    info["compared_in"] = compared
    info["challenger_only"] = others
    if others:
        info["note"] = (f"the baseline decision is compared in the {', '.join(compared)} "
                        f"audit{'s' if len(compared) > 1 else ''} only; "
                        f"{', '.join(others)} do not compare the two decisions (they audit "
                        "the challenger, or read no decision)")
    summary["baseline"] = info
    return rows


def _check_time(ctx: AuditContext, step: str) -> None:
    """Stop between steps once the audit's ``timeout_s`` is spent (no partial is kept).

    The check makes the budget hold whatever the threads' scheduling: the runner's own
    wait may return only after a fast audit has finished.
    """
    if ctx.time_left() <= 0:
        raise TimeBudgetExhaustedError(f"group: time budget spent before {step}")


def run(ctx: AuditContext, params: GroupParams) -> AuditOutcome:
    """Compute the catalogue for every sensitive view in one aggregation pass.

    Parameters
    ----------
    ctx:
        The audit context (prepared table, config, seeds).
    params:
        ``audits.group`` from the config.

    Returns
    -------
    AuditOutcome
        Long rows (per attribute: per-group rates, the 20 signed catalogue metrics
        and the DP/EO/PQP baselines in the binary view and per unprivileged value,
        between-group GEI/Theil) plus overall GEI and Theil under attribute ``*``.
    """
    attrs = ctx.attributes(params)
    cells, joint = _cells(ctx, params, attrs)
    everyone = marginal_counts(cells, np.ones(len(cells), dtype=bool))
    label_ok = (everyone["tp_n"] + everyone["fn_n"]) > 0
    rows: list[MetricRow] = []
    summary: dict[str, Any] = {"attributes": {}}
    for a in attrs:
        _check_time(ctx, f"attribute {a.name!r}")
        a_rows, a_summary = attribute_rows(a, cells, params=params, label_ok=label_ok)
        rows += a_rows
        summary["attributes"][a.name] = a_summary
    _check_time(ctx, "the overall indices and the comparison")
    overall = inequality_indices([everyone])
    rows += _overall_rows(everyone, params, label_ok)
    if joint is not None:
        rows += _baseline_part(ctx, attrs, joint, rows, params, label_ok, summary)
    summary["overall"] = {"gei": _f(overall["gei"]), "theil": _f(overall["theil"])}
    summary["labelled_rows"] = int(sum(everyone[f"{c}_n"] for c in ("tp", "fp", "tn", "fn")))
    summary["favourable_labels"] = int(everyone["tp_n"] + everyone["fn_n"])
    summary["performance"] = _performance(everyone)
    failed = [r for r in rows if r.status == Status.FAILED]
    summary["status"] = Status.FAILED if failed else Status.OK
    if failed:
        summary["detail"] = "; ".join(dict.fromkeys(r.detail for r in failed if r.detail))
    # the section draws the audited decision; the comparison has its own lines
    result = GroupResult(rows=[r.__dict__ for r in rows if r.model is None],
                         comparison=[r.__dict__ for r in rows if r.model == DIFFERENCE_MODEL],
                         ci_level=params.ci_level,
                         min_group_size=params.min_group_size)
    return AuditOutcome(rows=rows, summary=summary, result=result)
