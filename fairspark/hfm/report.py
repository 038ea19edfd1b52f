"""The HFM section of ``report.html`` (Jinja2 fragment, figures as ``data:`` URIs).

:func:`render` is the audit's ``SPEC.render``: the runner calls it, in its own error
isolation, with the outcome of ``fairspark.hfm.audit.run``. The template is
``templates/section.html.j2``; its ``+%}`` tags keep the newlines that the shared
environment's ``trim_blocks`` would drop, so the HTML is the same as it always was.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from fairspark.audits.base import ReportSection
from fairspark.hfm._kernels import hfm_df
from fairspark.hfm.results import HFMResult
from fairspark.report.figures import figure_to_data_uri, plt
from fairspark.report.sections import render_template
from fairspark.status import Status

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.audits.base import AuditContext, AuditOutcome, MetricRow
    from fairspark.hfm.params import HFMParams
    from fairspark.hfm.results import DistanceResult

__all__ = ["TITLE", "render"]

#: the section's title in ``report.html``
TITLE = "HFM: harmonic fairness via manifolds"

_METHOD_TEXT = {
    "certified": "certified exact (upper bounds from a random sample of the other group, "
                 "then exact nearest-neighbour searches and growing blocks for the rows "
                 "that could still matter)",
    "exact": "exact (distributed block nested loop over all pairs of rows)",
    "approx": "ApproxDist (the paper's Algorithms 1-2; an upper bound of the exact value)",
    "pointwise": "pointwise ApproxDist (min per row over projections; an upper bound)",
}

def _fmt(x: Any) -> str:
    if x is None:
        return "n/a"
    x = float(x)
    if math.isinf(x):
        return "+inf" if x > 0 else "-inf"
    if math.isnan(x):
        return "NaN"
    return f"{x:.6g}"


def _fmt_interval(r: DistanceResult) -> str:
    s = _fmt(r.value)
    if r.lower is not None and r.upper is not None and not r.certified:
        s += f" (not certified: [{_fmt(r.lower)}, {_fmt(r.upper)}])"
    return s


def _figure(name: str, d: DistanceResult, d_f: DistanceResult, method: str) -> dict | None:
    if "hist" not in d.extra or "hist" not in d_f.extra:
        return None
    fig, ax = plt.subplots(figsize=(6, 2.6))
    for r, label in ((d, "label (D)"), (d_f, "prediction (D_f)")):
        edges, counts = r.extra["hist"]
        ax.stairs(counts, edges, label=label)
    ax.set_yscale("symlog")
    ax.set_xlabel("distance to the nearest row of the other group")
    ax.set_ylabel("rows")
    ax.set_title(f"{name}: per-row nearest-other-group distance")
    ax.legend()
    exact = ("exact values" if method == "exact" else
             "per-row upper bounds (nearest row of a random sample of the other group); "
             "the maximum is certified separately" if method == "certified" else
             "per-row upper bounds (pointwise ApproxDist)")
    return {"uri": figure_to_data_uri(fig), "alt": f"HFM distances for {name}",
            "caption": f"{name}: histogram of per-row distances ({exact})."}


def _or_dash(v: Any) -> Any:
    return "-" if v is None else v


def _attribute_cells(name: str, d: DistanceResult, d_f: DistanceResult) -> dict[str, str]:
    """One line of the attribute table."""
    searches = " / ".join(
        f"{r.extra.get('n_searched', '-')} ({_or_dash(r.extra.get('n_candidates'))})"
        for r in (d, d_f))
    return {
        "name": name, "D": _fmt_interval(d), "D_f": _fmt_interval(d_f),
        "df": _fmt(hfm_df(d.value, d_f.value)), "D_avg": _fmt(d.avg),
        "D_f_avg": _fmt(d_f.avg), "D_approx": _fmt(d.extra.get("approx")),
        "D_f_approx": _fmt(d_f.extra.get("approx")), "searches": searches,
    }


def _dr_text(rows: list[MetricRow]) -> str | None:
    """Discriminative risk in words: the joint value, then each attribute flipped alone."""
    dr_rows = [r for r in rows if r.metric == "DR"]
    if not dr_rows:
        return None
    r = dr_rows[0]
    dr = (f"{_fmt(r.value)} [{_fmt(r.lower)}, {_fmt(r.upper)}]" if r.status == Status.OK
          else f"{r.status}: {r.detail}")
    alone = [f"{a.attribute} {_fmt(a.value)} [{_fmt(a.lower)}, {_fmt(a.upper)}]"
             for a in dr_rows[1:] if a.status == Status.OK]
    if r.status == Status.OK and alone:
        dr += " with every attribute flipped; one attribute flipped: " + "; ".join(alone)
    return dr


def _distance_parts(result: HFMResult, method: str) -> tuple[list, list, list, list]:
    """Attribute lines, witness lines, certification steps and figures of the section."""
    attrs, wit, steps, figures = [], [], [], []
    for name, (d, d_f) in result.distances.items():
        attrs.append(_attribute_cells(name, d, d_f))
        for metric, r in (("D", d), ("D_f", d_f)):
            wit.append({"attr": name, "metric": metric, "key": r.key or "n/a",
                        "nb_key": r.nb_key or "n/a", "value": _fmt(r.value)})
            for n_s, lo, hi in r.extra.get("steps", []):
                steps.append(f"{name} {metric}: after {n_s} searches [{_fmt(lo)}, {_fmt(hi)}]")
        # a partial result (kept while certification runs) is drawn without plots
        fig = None if result.partial else _figure(name, d, d_f, method)
        if fig:
            figures.append(fig)
    return attrs, wit, steps, figures


def render(outcome: AuditOutcome, *, ctx: AuditContext, params: HFMParams) -> list[ReportSection]:
    """The HFM section of ``report.html`` (``SPEC.render`` of the audit).

    Parameters
    ----------
    outcome : AuditOutcome
        What ``fairspark.hfm.audit.run`` returned (or handed to ``report_partial``):
        its rows (failed attributes and DR are taken from them), summary (method, m2,
        rows) and :class:`~fairspark.hfm.results.HFMResult`.
    ctx : AuditContext
        The audit's context (unused: everything the section shows is in ``outcome``).
    params : HFMParams
        The audit's parameters.

    Returns
    -------
    list of ReportSection
        One section (order 30); none when the outcome has no HFM result.
    """
    result = outcome.result
    if not isinstance(result, HFMResult):
        return []
    summary, rows = outcome.summary, outcome.rows
    attrs, wit, steps, figures = _distance_parts(result, params.method)
    failed = [f"{r.attribute}: {r.detail}" for r in rows
              if r.status == Status.FAILED and r.metric in ("D", "DR")]
    witnesses = result.witnesses
    html = render_template(
        "fairspark.hfm", "section.html.j2",
        method=params.method, method_text=_METHOD_TEXT[params.method], view=params.view,
        m1=params.m1, m2=summary.get("m2"), sampler=params.sampler, rows=summary.get("rows"),
        unlabelled=summary.get("rows_unlabelled_skipped", 0), attrs=attrs,
        show_approx=params.method == "pointwise" or (params.method == "certified"
                                                     and params.paper_value),
        show_searches=params.method == "certified", failed=failed, steps=steps,
        witnesses=wit, redacted=list(result.redacted),
        witness_values=sorted(witnesses.items()),
        witness_cols=sorted({c for v in witnesses.values() for c in v}),
        dr=_dr_text(rows), figures=figures,
    )
    return [ReportSection(title=TITLE, html=html, order=30)]
