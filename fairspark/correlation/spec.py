"""The ``correlation`` audit's entry in the registry."""

from __future__ import annotations

from typing import Any

from fairspark.audits.spec import AuditSpec
from fairspark.correlation.params import CorrelationParams
from fairspark.correlation.results import ORDER
from fairspark.metrics import CATALOGUE


def _load() -> None:
    import fairspark.correlation.audit  # noqa: F401


def run(ctx: Any, params: CorrelationParams) -> Any:
    """:func:`fairspark.correlation.audit.run` (imported on first use)."""
    from fairspark.correlation.audit import run as run_correlation

    return run_correlation(ctx, params)


def render(outcome: Any, **kw: Any) -> list[Any]:
    """:func:`fairspark.correlation.report.render` (imported on first use: matplotlib)."""
    from fairspark.correlation.report import render as render_correlation

    return render_correlation(outcome, **kw)


SPEC = AuditSpec(
    name="correlation",
    window_reads=("sample",),  # a window's merged hash-rank sample
    params=CorrelationParams,
    run=run,
    render=render,
    load=_load,
    title="Representative metrics",
    order=ORDER,
    metrics=(*CATALOGUE, "representative", "cluster", "tau", "model_accuracy",
             "acceptance_rate", "monte_carlo_se"),
    trend_metrics=("representative",),
    worker_modules=("fairspark.correlation._spark",),  # the oracle rounds' module
)
