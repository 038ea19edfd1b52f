"""The toy audit's entry in the registry (its ``SPEC``, found through an entry point)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from fairspark.audits import AuditParams, AuditSpec, DecisionInput, DecisionLine, fmt_number, num


class ToyParams(AuditParams):
    """The toy audit's settings: the level of its intervals."""

    ci_level: float = Field(0.95, gt=0, lt=1)


def run(ctx: Any, params: ToyParams) -> Any:
    """:func:`toy_audit.audit.run` (imported on first use, like a real audit's)."""
    from toy_audit.audit import run as run_toy

    return run_toy(ctx, params)


def render(outcome: Any, **kw: Any) -> list[Any]:
    """One small section."""
    from toy_audit.audit import render as render_toy

    return render_toy(outcome, **kw)


def decision_lines(view: DecisionInput) -> list[DecisionLine]:
    """One line per attribute: evidence when the interval of the gap excludes 0."""
    out = []
    for r in view.rows:
        if r.get("metric") != "toy_gap":
            continue
        lo, hi, v = num(r.get("lower")), num(r.get("upper")), num(r.get("value"))
        clear = lo is not None and hi is not None and (lo > 0 or hi < 0)
        out.append(DecisionLine(
            audit="toy", attribute=str(r.get("attribute")), metric="toy_gap",
            what="toy gap in favourable decisions", status="evidence" if clear else "ok",
            far=f"toy gap {fmt_number(v, signed=True)}", nxt="the toy section",
            anchor=view.anchor, excess=None if v is None else abs(v), number=r))
    return out


SPEC = AuditSpec(
    name="toy",
    params=ToyParams,
    run=run,
    render=render,
    decision_lines=decision_lines,
    title="Toy gap",
    order=50,
    metrics=("toy_gap", "toy_rate_privileged"),
    trend_metrics=("toy_gap",),
    limit_hint="{attr}: the toy section's gap",
    reads_features=False,
)
