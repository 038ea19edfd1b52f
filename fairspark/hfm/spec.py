"""The ``hfm`` audit's entry in the registry."""

from __future__ import annotations

from typing import Any

from fairspark.audits.spec import AuditSpec
from fairspark.hfm.decision import decision_lines
from fairspark.hfm.params import HFMParams


def _load() -> None:
    import fairspark.hfm.audit  # noqa: F401


def run(ctx: Any, params: HFMParams) -> Any:
    """:func:`fairspark.hfm.audit.run` (imported on first use)."""
    from fairspark.hfm.audit import run as run_hfm

    return run_hfm(ctx, params)


def render(outcome: Any, **kw: Any) -> list[Any]:
    """:func:`fairspark.hfm.report.render` (imported on first use: matplotlib)."""
    from fairspark.hfm.report import render as render_hfm

    return render_hfm(outcome, **kw)


SPEC = AuditSpec(
    name="hfm",
    params=HFMParams,
    run=run,
    render=render,
    decision_lines=decision_lines,
    load=_load,
    title="Individual fairness (HFM)",
    order=30,
    joins_by_key=True,  # nearest neighbours are fetched and reported by row key
    # its distance does not merge over partitions: the newest one, or the merged sample
    window_reads=("newest", "sample"),
    window_sample_param="max_rows",  # the rows it audits (its sample_rows size its bounds)
    path_params=("dr_model",),
    compares_baseline=True,  # the baseline's D_f (D is shared): fairspark.hfm.paired
    metrics=(
        *(f"{m}{suffix}" for suffix in ("", "_avg", "_approx", "_pointwise")
          for m in ("D", "D_f", "df")),
        "D_candidates", "D_f_candidates", "D_exact_searches", "D_f_exact_searches", "DR",
    ),
    trend_metrics=("df", "D", "D_f", "DR"),
    interval="bounds",  # certified bounds (or the approximation's upper bound)
    limit_hint="{attr}: the HFM witness pair",
    small_params={"method": "certified"},
    shrink_params={"max_rows": 3000},
)
