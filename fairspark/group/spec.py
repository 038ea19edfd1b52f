"""The ``group`` audit's entry in the registry."""

from __future__ import annotations

from fairspark.audits.spec import AuditSpec
from fairspark.group.params import GroupParams
from fairspark.metrics._core import BASELINES, CATALOGUE, RATES

SPEC = AuditSpec(
    name="group",
    params=GroupParams,
    run="fairspark.group.audit:run",
    render="fairspark.group.report:render",
    headlines="fairspark.group.report:headlines",
    title="Group metrics",
    order=10,
    headline_metrics=("statistical_parity_difference", "disparate_impact",
                      "equal_opportunity_difference", "average_odds_difference"),
    metrics=(*RATES, *CATALOGUE, *BASELINES, "gei", "theil", "between_group_gei",
             "between_group_theil"),
    enabled_by_default=True,
    reads_features=False,  # the weighted cells of the one preparation pass only
)
