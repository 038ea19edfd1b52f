"""The ``group`` audit's entry in the registry."""

from __future__ import annotations

from typing import Any

from fairspark.audits.spec import AuditSpec
from fairspark.group.decision import decision_lines
from fairspark.group.params import GroupParams
from fairspark.group.results import HEADLINE_METRICS
from fairspark.metrics import BASELINES, CATALOGUE, RATES


def _load() -> None:
    import fairspark.group.audit  # noqa: F401


def run(ctx: Any, params: GroupParams) -> Any:
    """:func:`fairspark.group.audit.run` (imported on first use)."""
    from fairspark.group.audit import run as run_group

    return run_group(ctx, params)


def render(outcome: Any, **kw: Any) -> list[Any]:
    """:func:`fairspark.group.report.render` (imported on first use: matplotlib)."""
    from fairspark.group.report import render as render_group

    return render_group(outcome, **kw)


def headlines(rows: list[Any], **kw: Any) -> list[str]:
    """:func:`fairspark.group.report.headlines` (imported on first use)."""
    from fairspark.group.report import headlines as group_headlines

    return group_headlines(rows, **kw)


SPEC = AuditSpec(
    name="group",
    params=GroupParams,
    run=run,
    render=render,
    headlines=headlines,
    decision_lines=decision_lines,
    load=_load,
    title="Group metrics",
    order=10,
    metrics=(*RATES, *CATALOGUE, *BASELINES, "gei", "theil", "between_group_gei",
             "between_group_theil"),
    # trends and the decision box read the pooled comparison of the unprivileged values
    view_group="unprivileged",
    trend_metrics=("statistical_parity_difference", "disparate_impact", "tpr_difference",
                   "average_odds_difference", "equalized_odds_difference"),
    headline_metrics=HEADLINE_METRICS,
    limits_per_group=True,  # each unprivileged value against the reference
    limit_hint="{attr}: rates per group, which group gets less",
    enabled_by_default=True,
    reads_features=False,  # the weighted cells of the one preparation pass only
)
