"""The ``hfm`` audit's entry in the registry."""

from __future__ import annotations

from fairspark.audits.spec import AuditSpec
from fairspark.hfm.params import HFMParams

SPEC = AuditSpec(
    name="hfm",
    params=HFMParams,
    run="fairspark.hfm.audit:run",
    render="fairspark.hfm.report:render",
    title="Individual fairness (HFM)",
    order=30,
    joins_by_key=True,  # nearest neighbours are fetched and reported by row key
    headline_metrics=("D", "D_f", "df"),
    metrics=(
        *(f"{m}{suffix}" for suffix in ("", "_avg", "_approx", "_pointwise")
          for m in ("D", "D_f", "df")),
        "D_candidates", "D_f_candidates", "D_exact_searches", "D_f_exact_searches", "DR",
    ),
)
