"""Report section of the correlation audit: heatmap, cluster graph, table, acceptance.

The runner calls :func:`render` (``SPEC.render``) on the audit's outcome inside its own
error isolation; the HTML comes from ``templates/section.html.j2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from fairspark.audits.base import AuditOutcome, ReportSection
from fairspark.audits.figures import figure_to_data_uri, plt
from fairspark.audits.sections import render_template
from fairspark.correlation.results import ORDER, CorrelationResult, ModelResult, rounds_text
from fairspark.numbers import fmt_fixed, fmt_number, format_number
from fairspark.status import Status

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.audits.base import AuditContext
    from fairspark.correlation.params import CorrelationParams

__all__ = ["CMAP", "TITLE", "correlation_section", "finding", "negative_partners", "render"]

#: the section's title in ``report.html``
TITLE = "Representative fairness metrics (correlation)"


def _order(res: ModelResult) -> tuple[list[str], list[tuple[int, int]], set[str]]:
    """Metric order for the heatmap (cluster by cluster), block spans, representatives."""
    est = res.estimate
    assert est is not None
    names, spans, reps = [], [], set()
    if res.clustering is not None:
        cn = res.clustered_metrics
        for piv, members in res.clustering.clusters:
            start = len(names)
            names += [cn[piv]] + [cn[j] for j in members if j != piv]
            spans.append((start, len(names)))
            reps.add(cn[piv])
    names += [m for m in est.metrics if m not in names]
    return names, spans, reps


#: the heatmap's diverging palette: orange = negative r*, purple = positive, white = 0;
#: neither end is red, since a correlation is neither good nor bad
CMAP = "PuOr"


def _r_text(r: float) -> str:
    """r* for a heatmap cell: two decimals without the leading zero (``−.85``, ``1``)."""
    if not np.isfinite(r):
        return ""
    if abs(r) >= 0.995:
        return "1" if r > 0 else "−1"
    return fmt_fixed(r, 2).replace("0.", ".", 1)


def _heatmap(res: ModelResult) -> str:
    """r* of every metric pair, cluster by cluster, with the value written in each cell."""
    est = res.estimate
    assert est is not None
    names, spans, reps = _order(res)
    idx = [est.metrics.index(m) for m in names]
    mat = est.r[np.ix_(idx, idx)]
    n = len(names)
    # inches per cell: room for "−.85" at the report's 10 pt minimum, and the whole
    # figure (labels ~2.4 in) within ~10.5 in so that the page does not shrink its text
    cell = min(0.42, 8.0 / max(n, 1))
    fig, ax = plt.subplots(figsize=(cell * n + 2.6 + (1.2 if n <= 12 else 0), cell * n + 2.6))
    im = ax.imshow(np.ma.masked_invalid(mat), cmap=CMAP, vmin=-1, vmax=1)
    for i in range(n):
        for j in range(n):
            r = mat[i, j]
            if np.isfinite(r):
                ax.text(j, i, _r_text(r), ha="center", va="center", fontsize=10,
                        color="white" if abs(r) > 0.6 else "black")
    labels = [f"{m} *" if m in reps else m for m in names]
    ax.set_xticks(range(n), labels, rotation=90)
    ax.set_yticks(range(n), labels)
    for a, b in spans:
        ax.add_patch(plt.Rectangle((a - 0.5, a - 0.5), b - a, b - a, fill=False, lw=2, ec="black"))
    if n <= 12:  # a wide matrix has no room for a colour bar: its cells carry the values
        bar = fig.colorbar(im, ax=ax, shrink=0.7)
        bar.set_label("r*: −1 opposite (orange) … +1 together (purple)")
    ax.set_title(f"{res.attribute} / {res.model}: r* (clusters outlined, * = representative)")
    return figure_to_data_uri(fig)


def negative_partners(res: ModelResult, *, threshold: float | None = None
                      ) -> dict[str, list[tuple[str, float]]]:
    """Each representative's strongly negative partners: metrics with r* ≤ −threshold.

    ``threshold`` defaults to the clustering's tau (the bar a metric clears to join a
    cluster, mirrored), so a partner is as strongly opposed as a member is aligned.
    Partners are sorted from the most negative r*.
    """
    est, cl = res.estimate, res.clustering
    if est is None or cl is None:
        return {}
    t = cl.tau if threshold is None else threshold
    out: dict[str, list[tuple[str, float]]] = {}
    for piv, _members in cl.clusters:
        rep = res.clustered_metrics[piv]
        i = est.metrics.index(rep)
        found = [(m, float(est.r[i, j])) for j, m in enumerate(est.metrics)
                 if m != rep and np.isfinite(est.r[i, j]) and est.r[i, j] <= -t]
        out[rep] = sorted(found, key=lambda t: t[1])
    return out


def finding(res: ModelResult) -> str | None:
    """The clustering of one (attribute, model family) in one sentence."""
    est, cl = res.estimate, res.clustering
    if est is None or cl is None:
        return None
    reps = [res.clustered_metrics[p] for p, _ in cl.clusters]
    partners = negative_partners(res)
    n_neg = sum(len(v) for v in partners.values())
    return (f"{res.attribute} / {res.model}: the {len(res.clustered_metrics)} metrics fall "
            f"into {len(reps)} cluster{'s' if len(reps) != 1 else ''} at tau "
            f"{format_number(cl.tau, digits=2)}; watching {', '.join(reps)} covers the rest"
            + (f", and {n_neg} strongly negative partner{'s' if n_neg != 1 else ''} of "
               "those move the opposite way (listed below)." if n_neg else "."))


def _graph(res: ModelResult) -> str:
    est, cl = res.estimate, res.clustering
    assert est is not None and cl is not None
    cn = res.clustered_metrics
    k = len(cl.clusters)
    fig, ax = plt.subplots(figsize=(9, 9))
    big = 2.2 + 0.9 * k if k > 1 else 0.0
    for c, (piv, members) in enumerate(cl.clusters):
        cx, cy = big * math.cos(2 * math.pi * c / k), big * math.sin(2 * math.pi * c / k)
        others = [j for j in members if j != piv]
        for t, j in enumerate(others):
            ang = 2 * math.pi * (t + 0.25) / max(len(others), 1)
            x, y = cx + 1.7 * math.cos(ang), cy + 1.7 * math.sin(ang)
            ax.plot([cx, x], [cy, y], color="grey", lw=1, zorder=1)
            rv = est.r[est.metrics.index(cn[piv]), est.metrics.index(cn[j])]
            ax.text(
                cx + 0.55 * (x - cx),
                cy + 0.55 * (y - cy),
                fmt_fixed(rv, 2),
                fontsize=6,
                color="dimgrey",
                ha="center",
                va="center",
                bbox={"fc": "white", "ec": "none", "pad": 0.5},
            )
            ax.scatter([x], [y], s=200, color="white", edgecolor="black", zorder=2)
            ax.text(
                cx + 2.05 * math.cos(ang),
                cy + 2.05 * math.sin(ang),
                cn[j],
                fontsize=6,
                ha="left"
                if math.cos(ang) > 0.1
                else ("right" if math.cos(ang) < -0.1 else "center"),
                va="center",
            )
        ax.scatter([cx], [cy], s=420, color="orange", edgecolor="black", zorder=3)
        ax.text(
            cx,
            cy - 0.35,
            cn[piv],
            fontsize=7,
            ha="center",
            va="top",
            weight="bold",
            zorder=4,
            bbox={"fc": "white", "ec": "orange", "pad": 1.0},
        )
    lim = big + 3.2
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_axis_off()
    ax.set_aspect("equal")
    ax.set_title(
        f"{res.attribute} / {res.model}: clusters (orange = representative), "
        f"tau={fmt_number(cl.tau)}",
        fontsize=9,
    )
    return figure_to_data_uri(fig)


def _accuracy_hist(res: ModelResult, min_accuracy: float) -> str:
    sel = res.selection
    assert sel is not None
    fig, ax = plt.subplots(figsize=(5, 2.6))
    ax.hist(sel.accuracies, bins=30, color="steelblue")
    ax.axvline(min_accuracy, color="red", ls="--", label=f"min_accuracy={min_accuracy}")
    ax.set_xlabel("test-set accuracy of kept models")
    ax.set_ylabel("models")
    ax.legend(fontsize=7)
    return figure_to_data_uri(fig)


def _cell(r: float, lo: float, hi: float) -> str:
    if not np.isfinite(r):
        return "n/a"
    if not np.isfinite(lo):
        return fmt_fixed(r, 2)
    return f"{fmt_fixed(r, 2)} [{fmt_fixed(lo, 2)}, {fmt_fixed(hi, 2)}]"


@dataclass
class _Block:
    """What the template shows for one (attribute, model family)."""

    attribute: str
    model: str
    acceptance: str | None = None
    rounds: str | None = None
    failed: str | None = None
    note: str | None = None
    tau_detail: str | None = None
    reps: list[tuple[str, str, str]] = field(default_factory=list)
    finding: str | None = None
    tau: float | None = None
    excluded: dict[str, str] = field(default_factory=dict)
    figures: list[tuple[str, str]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    matrix: list[tuple[str, list[str]]] | None = None


def _representatives(res: ModelResult) -> list[tuple[str, str, str]]:
    """Each representative, its members and its strongly negative partners, with r*."""
    est, cl = res.estimate, res.clustering
    assert est is not None and cl is not None
    cn = res.clustered_metrics
    partners = negative_partners(res)
    out = []
    for piv, members in cl.clusters:
        pi = est.metrics.index(cn[piv])
        mem = ", ".join(
            f"{cn[j]} ({fmt_fixed(est.r[pi, est.metrics.index(cn[j])], 2)})"
            for j in members if j != piv
        )
        neg = ", ".join(f"{m} ({fmt_fixed(r, 2)})" for m, r in partners.get(cn[piv], []))
        out.append((cn[piv], mem or "(alone)", neg or "none"))
    return out


def _block(res: ModelResult, result: CorrelationResult) -> _Block:
    b = _Block(
        attribute=res.attribute,
        model=res.model,
        excluded=res.excluded,
        failed=res.detail if res.status == Status.FAILED else None,
        note=res.detail if res.status == Status.NOT_COMPUTED else None,
        tau_detail=res.tau_detail,
    )
    sel = res.selection
    if sel is not None and sel.attempts:
        b.acceptance = (
            f"{sel.accepted} of {sel.attempts} attempts accepted "
            f"({fmt_fixed(100 * sel.accepted / sel.attempts, 1)}%)"
        )
    if res.rounds is not None:
        b.rounds = rounds_text(res.rounds, result.params, res.rounds_run)
    est = res.estimate
    if est is not None:
        b.figures.append(("Correlation heatmap", _heatmap(res)))
        if res.clustering is not None:
            b.reps = _representatives(res)
            b.finding = finding(res)
            b.tau = res.clustering.tau
            b.figures.append(("Cluster graph", _graph(res)))
        b.names = est.metrics
        b.matrix = [
            (
                m,
                [
                    _cell(est.r[i, j], est.lower[i, j], est.upper[i, j])
                    for j in range(len(est.metrics))
                ],
            )
            for i, m in enumerate(est.metrics)
        ]
    if sel is not None and sel.accuracies.size:
        hist = _accuracy_hist(res, result.params.min_accuracy)
        b.figures.append(("Accuracy of the kept models", hist))
    return b


def correlation_section(result: CorrelationResult, *, order: int = 40) -> ReportSection:
    """Render the audit's report section (self-contained HTML, figures as data URIs)."""
    html = render_template(
        "fairspark.correlation",
        "section.html.j2",
        p=result.params,
        sample_rows=result.sample_rows,
        population_rows=result.population_rows,
        failed=result.failed_attributes,
        blocks=[_block(res, result) for res in result.models],
        partial=result.partial,
    )
    return ReportSection(title=TITLE, html=html, order=order)


def render(
    outcome: AuditOutcome,
    *,
    ctx: AuditContext | None = None,
    params: CorrelationParams | None = None,
) -> list[ReportSection]:
    """``SPEC.render``: the section of the outcome's :class:`CorrelationResult`.

    Parameters
    ----------
    outcome:
        What :func:`fairspark.correlation.audit.run` returned (or handed to
        ``ctx.report_partial``); its ``result`` is drawn.
    ctx, params:
        The audit's context and parameters (the result carries the parameters it
        was computed with, so neither is needed here).

    Returns
    -------
    list of ReportSection
        One section, titled :data:`TITLE`, at ``SPEC.order``; none without a result.
    """
    result = outcome.result
    if not isinstance(result, CorrelationResult):
        return []
    return [correlation_section(result, order=ORDER)]
