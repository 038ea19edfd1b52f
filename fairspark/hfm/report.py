"""The HFM section of ``report.html`` (Jinja2 fragment, figures as ``data:`` URIs)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import jinja2

from fairspark.audits.base import ReportSection
from fairspark.report.figures import figure_to_data_uri, plt

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.audits.base import MetricRow
    from fairspark.hfm.compute import DistanceResult
    from fairspark.hfm.params import HFMParams

__all__ = ["render_section"]

_METHOD_TEXT = {
    "certified": "certified exact (pointwise ApproxDist upper bounds, then exact "
                 "nearest-neighbour searches for the rows that could still matter)",
    "exact": "exact (distributed block nested loop over all pairs of rows)",
    "approx": "ApproxDist (the paper's Algorithms 1-2; an upper bound of the exact value)",
    "pointwise": "pointwise ApproxDist (min per row over projections; an upper bound)",
}

_TEMPLATE = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(
    """
<section class="hfm">
<p>Harmonic fairness via manifolds (HFM): <b>D</b> is the Hausdorff distance between the
privileged and unprivileged rows as points <code>[label, features]</code>, <b>D_f</b> the
same with the prediction in place of the label, and <b>df = D_f / D - 1</b>
(&gt; 0: the model adds distance between the groups beyond what the data has).</p>
<p>Method: <b>{{ method }}</b> &mdash; {{ method_text }}. View: {{ view }};
m1 = {{ m1 }}, m2 = {{ m2 }}, sampler = {{ sampler }}; {{ rows }} labelled rows
({{ unlabelled }} unlabelled rows are not used).</p>
<table class="metrics">
<thead><tr><th>attribute</th><th>D</th><th>D_f</th><th>df</th><th>D_avg</th><th>D_f_avg</th>
{% if show_approx %}<th>D (ApproxDist)</th><th>D_f (ApproxDist)</th>{% endif %}
{% if show_searches %}<th>exact searches (rows with bound above D), D / D_f</th>
{% endif %}</tr></thead>
<tbody>
{% for a in attrs %}
<tr><td>{{ a.name }}</td><td>{{ a.D }}</td><td>{{ a.D_f }}</td><td>{{ a.df }}</td>
<td>{{ a.D_avg }}</td><td>{{ a.D_f_avg }}</td>
{% if show_approx %}<td>{{ a.D_approx }}</td><td>{{ a.D_f_approx }}</td>{% endif %}
{% if show_searches %}<td>{{ a.searches }}</td>{% endif %}</tr>
{% endfor %}
</tbody></table>
{% if failed %}
<p>Not computed:</p><ul>{% for f in failed %}<li>{{ f }}</li>{% endfor %}</ul>
{% endif %}
{% if steps %}
<details><summary>Certification steps (rows searched exactly, interval)</summary>
<ul>{% for s in steps %}<li>{{ s }}</li>{% endfor %}</ul></details>
{% endif %}
<h4>Witnesses</h4>
<p>The pair of rows that realises each distance (row keys){% if redacted %}; values of
{{ redacted|join(", ") }} are redacted{% endif %}.</p>
<table class="metrics"><thead><tr><th>attribute</th><th>distance</th><th>row</th>
<th>nearest row of the other group</th><th>distance value</th></tr></thead><tbody>
{% for w in witnesses %}
<tr><td>{{ w.attr }}</td><td>{{ w.metric }}</td><td><code>{{ w.key }}</code></td>
<td><code>{{ w.nb_key }}</code></td><td>{{ w.value }}</td></tr>
{% endfor %}
</tbody></table>
{% if witness_values %}
<table class="metrics"><thead><tr><th>row key</th>
{% for c in witness_cols %}<th>{{ c }}</th>{% endfor %}</tr></thead><tbody>
{% for k, vals in witness_values %}
<tr><td><code>{{ k }}</code></td>{% for c in witness_cols %}<td>{{ vals.get(c, "") }}</td>
{% endfor %}</tr>
{% endfor %}</tbody></table>
{% endif %}
{% if dr %}<p>Discriminative risk: {{ dr }}</p>{% endif %}
{% for f in figures %}
<figure><img alt="{{ f.alt }}" src="{{ f.uri }}"><figcaption>{{ f.caption }}</figcaption>
</figure>
{% endfor %}
</section>
"""
)


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
    exact = "exact values" if method == "exact" else \
        "per-row upper bounds (pointwise ApproxDist); the maximum is certified separately"
    return {"uri": figure_to_data_uri(fig), "alt": f"HFM distances for {name}",
            "caption": f"{name}: histogram of per-row distances ({exact})."}


def _or_dash(v: Any) -> Any:
    return "-" if v is None else v


def render_section(
    *,
    params: HFMParams,
    summary: dict[str, Any],
    results: dict[str, tuple[DistanceResult, DistanceResult]],
    rows: list[MetricRow],
    witnesses: dict[str, dict],
) -> ReportSection:
    """Render the HFM section.

    Parameters
    ----------
    params : HFMParams
        The audit's parameters.
    summary : dict
        The audit's summary (method, m2, rows).
    results : dict
        Attribute -> (D, D_f) results.
    rows : list of MetricRow
        The audit's rows (failed attributes and DR are taken from them).
    witnesses : dict
        Row key -> raw values (redacted columns already left out).

    Returns
    -------
    ReportSection
    """
    attrs, wit, steps, figures = [], [], [], []
    for name, (d, d_f) in results.items():
        from fairspark.hfm._kernels import hfm_df

        searches = " / ".join(
            f"{r.extra.get('n_searched', '-')} ({_or_dash(r.extra.get('n_candidates'))})"
            for r in (d, d_f))
        attrs.append({
            "name": name, "D": _fmt_interval(d), "D_f": _fmt_interval(d_f),
            "df": _fmt(hfm_df(d.value, d_f.value)), "D_avg": _fmt(d.avg),
            "D_f_avg": _fmt(d_f.avg), "D_approx": _fmt(d.extra.get("approx")),
            "D_f_approx": _fmt(d_f.extra.get("approx")), "searches": searches,
        })
        for metric, r in (("D", d), ("D_f", d_f)):
            wit.append({"attr": name, "metric": metric, "key": r.key or "n/a",
                        "nb_key": r.nb_key or "n/a", "value": _fmt(r.value)})
            for n_s, lo, hi in r.extra.get("steps", []):
                steps.append(f"{name} {metric}: after {n_s} searches [{_fmt(lo)}, {_fmt(hi)}]")
        fig = _figure(name, d, d_f, params.method)
        if fig:
            figures.append(fig)
    failed = [f"{r.attribute}: {r.detail}" for r in rows
              if r.status == "failed" and r.metric in ("D", "DR")]
    dr_rows = [r for r in rows if r.metric == "DR"]
    dr = None
    if dr_rows:
        r = dr_rows[0]
        dr = (f"{_fmt(r.value)} [{_fmt(r.lower)}, {_fmt(r.upper)}]" if r.status == "ok"
              else f"{r.status}: {r.detail}")
        alone = [f"{a.attribute} {_fmt(a.value)} [{_fmt(a.lower)}, {_fmt(a.upper)}]"
                 for a in dr_rows[1:] if a.status == "ok"]
        if r.status == "ok" and alone:
            dr += " with every attribute flipped; one attribute flipped: " + "; ".join(alone)
    witness_cols = sorted({c for v in witnesses.values() for c in v})
    html = _TEMPLATE.render(
        method=params.method, method_text=_METHOD_TEXT[params.method], view=params.view,
        m1=params.m1, m2=summary.get("m2"), sampler=params.sampler, rows=summary.get("rows"),
        unlabelled=summary.get("rows_unlabelled_skipped", 0), attrs=attrs,
        show_approx=params.method in ("certified", "pointwise"),
        show_searches=params.method == "certified", failed=failed, steps=steps,
        witnesses=wit, redacted=list(params.redact_columns),
        witness_values=sorted(witnesses.items()), witness_cols=witness_cols, dr=dr,
        figures=figures,
    )
    return ReportSection(title="HFM: harmonic fairness via manifolds", html=html, order=30)
