"""The ``mdfa`` audit's entry in the registry."""

from __future__ import annotations

from typing import Any

from fairspark.audits.spec import AuditSpec
from fairspark.mdfa.decision import decision_lines
from fairspark.mdfa.params import MDFAParams
from fairspark.mdfa.results import ORDER


def _load() -> None:
    import fairspark.mdfa.audit  # noqa: F401 - torch: seconds on a busy machine


def run(ctx: Any, params: MDFAParams) -> Any:
    """:func:`fairspark.mdfa.audit.run` (imported on first use: it loads torch)."""
    from fairspark.mdfa.audit import run as run_mdfa

    return run_mdfa(ctx, params)


def render(outcome: Any, **kw: Any) -> list[Any]:
    """:func:`fairspark.mdfa.report.render` (imported on first use: matplotlib)."""
    from fairspark.mdfa.report import render as render_mdfa

    return render_mdfa(outcome, **kw)


SPEC = AuditSpec(
    name="mdfa",
    window_reads=("sample",),  # a window's merged hash-rank sample
    compares_baseline=True,  # gamma over the same splits: fairspark.mdfa.paired
    decimals=4,  # its gammas are hundredths
    params=MDFAParams,
    run=run,
    render=render,
    decision_lines=decision_lines,
    load=_load,
    title="mdfa",
    order=ORDER,
    metrics=("gamma", "gamma_max", "gamma_unfavourable", "gamma_null", "delta", "delta_unweighted",
             "outcome_ratio_in_subgroup", "outcome_ratio_overall", "subgroup_mass",
             "balance_auc", "balance_auc_before", "max_abs_smd_before", "max_abs_smd_after"),
    trend_metrics=("gamma", "gamma_max", "delta"),
    limit_hint="{attr}: mdfa's worst-treated sub-population",
    worker_modules=("fairspark.mdfa.certify",),  # the split tasks' module (torch)
)
