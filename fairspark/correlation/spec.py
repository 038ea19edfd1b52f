"""The ``correlation`` audit's entry in the registry."""

from __future__ import annotations

from fairspark.audits.spec import AuditSpec
from fairspark.correlation.params import CorrelationParams
from fairspark.metrics._core import CATALOGUE

SPEC = AuditSpec(
    name="correlation",
    params=CorrelationParams,
    run="fairspark.correlation.audit:run",
    render="fairspark.correlation.report:render",
    title="Representative metrics",
    order=40,
    headline_metrics=("representative",),
    metrics=(*CATALOGUE, "representative", "cluster", "tau", "model_accuracy",
             "acceptance_rate", "monte_carlo_se"),
)
