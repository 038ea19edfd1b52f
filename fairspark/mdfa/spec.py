"""The ``mdfa`` audit's entry in the registry."""

from __future__ import annotations

from fairspark.audits.spec import AuditSpec
from fairspark.mdfa.params import MDFAParams

SPEC = AuditSpec(
    name="mdfa",
    params=MDFAParams,
    run="fairspark.mdfa.audit:run",
    render="fairspark.mdfa.report:render",
    title="mdfa",
    order=35,
    headline_metrics=("gamma",),
    metrics=("gamma", "gamma_max", "gamma_unfavourable", "gamma_null", "delta", "delta_unweighted",
             "outcome_ratio_in_subgroup", "outcome_ratio_overall", "subgroup_mass",
             "balance_auc", "balance_auc_before", "max_abs_smd_before", "max_abs_smd_after"),
)
