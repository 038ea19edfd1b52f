"""The HFM section of ``report.html`` (Jinja2 fragment, figures as ``data:`` URIs).

:func:`render` is the audit's ``SPEC.render``: the runner calls it, in its own error
isolation, with the outcome of ``fairspark.hfm.audit.run``. The template is
``templates/section.html.j2``; its ``+%}`` tags keep the newlines that the shared
environment's ``trim_blocks`` would drop, so the HTML is the same as it always was.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fairspark.audits.base import ReportSection
from fairspark.audits.figures import figure_to_data_uri, plt
from fairspark.audits.lines import row_number
from fairspark.audits.sections import render_template
from fairspark.hfm._kernels import hfm_df
from fairspark.hfm.results import HFMResult
from fairspark.metrics import BASELINE_MODEL, DIFFERENCE_MODEL
from fairspark.numbers import fmt_fixed, fmt_number, format_number
from fairspark.status import Status

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.audits.base import AuditContext, AuditOutcome, MetricRow
    from fairspark.hfm.params import HFMParams
    from fairspark.hfm.results import DistanceResult

__all__ = ["REFERENCE", "REFERENCE_DR", "TITLE", "finding", "reference_dr_text",
           "reference_text", "render", "show_witness_values"]

#: the section's title in ``report.html``
TITLE = "HFM: harmonic fairness via manifolds"

_METHOD_TEXT = {
    "certified": "certified exact (upper bounds from a random sample of the other group, "
                 "then exact nearest-neighbour searches and growing blocks for the rows "
                 "that could still matter)",
    "approx": "ApproxDist (the paper's Algorithms 1-2; an upper bound of the exact value)",
    "pointwise": "pointwise ApproxDist (min per row over projections; an upper bound)",
}

def _fmt(x: Any) -> str:
    """A distance in the section's table and figures: 6 significant digits."""
    return format_number(x, digits=6, missing="n/a")


def _fmt_interval(r: DistanceResult) -> str:
    s = _fmt(r.value)
    if r.lower is not None and r.upper is not None and not r.certified:
        s += f" (not certified: [{_fmt(r.lower)}, {_fmt(r.upper)}])"
    return s


def _figure(name: str, d: DistanceResult, d_f: DistanceResult, method: str) -> dict | None:
    if "hist" not in d.extra or "hist" not in d_f.extra:
        return None
    fig, ax = plt.subplots(figsize=(6, 2.6))
    # a dash besides the colour tells the two apart (no chart relies on colour alone)
    for r, label, dash in ((d, "label (D), solid", "-"), (d_f, "prediction (D_f), dashed", "--")):
        edges, counts = r.extra["hist"]
        line = ax.stairs(counts, edges, label=label, linestyle=dash, linewidth=1.4)
        if r.value is not None and math.isfinite(r.value):  # the distance itself: the max
            name_v = "D" if r is d else "D_f"
            ax.axvline(float(r.value), color=line.get_edgecolor(), linestyle=dash, lw=0.9,
                       label=f"{name_v} = {_fmt(r.value)}")
    ax.set_yscale("symlog")
    ax.set_xlabel("distance to the nearest row of the other group")
    ax.set_ylabel("rows")
    ax.set_title(f"{name}: per-row nearest-other-group distance")
    ax.legend()
    exact = ("per-row upper bounds (nearest row of a random sample of the other group); "
             "the maximum is certified separately" if method == "certified" else
             "per-row upper bounds (pointwise ApproxDist)")
    return {"uri": figure_to_data_uri(fig), "alt": f"HFM distances for {name}",
            "caption": f"{name}: histogram of per-row distances ({exact})."}


#: df, D and discriminative risk measured on the reference datasets at the audit's
#: defaults (logistic regression; ``studies/hfm_reference.py``, see docs/report.md):
#: (dataset, attribute, D, df)
REFERENCE: tuple[tuple[str, str, float, float], ...] = (
    ("Adult", "sex", 2.6624, 0.0), ("Adult", "race", 2.5611, 0.0347),
    ("COMPAS", "sex", 0.8966, 0.0), ("COMPAS", "race", 0.9021, -0.1689),
    ("German", "sex", 3.4142, -0.0124), ("German", "age", 3.6931, -0.0310),
)


#: discriminative risk on the same runs (dr_ratio 0.5): (dataset, attribute, DR); the
#: attribute ``*`` is every sensitive attribute flipped
REFERENCE_DR: tuple[tuple[str, str, float], ...] = (
    ("Adult", "sex", 0.0463), ("Adult", "race", 0.0196), ("Adult", "*", 0.0593),
    ("COMPAS", "sex", 0.0701), ("COMPAS", "race", 0.0230), ("COMPAS", "*", 0.0846),
    ("German", "sex", 0.0390), ("German", "age", 0.0190), ("German", "*", 0.0520),
)


def reference_dr_text() -> str:
    """The range of discriminative risk seen on the reference datasets, in one sentence."""
    one = [r[2] for r in REFERENCE_DR if r[1] != "*"]
    every = [r[2] for r in REFERENCE_DR if r[1] == "*"]
    return (f"On the reference datasets DR ranged from {fmt_fixed(min(one), 3)} to "
            f"{fmt_fixed(max(one), 3)} with one attribute flipped and from "
            f"{fmt_fixed(min(every), 3)} to {fmt_fixed(max(every), 3)} "
            "with every attribute flipped.")


def reference_text() -> str:
    """The range of df and D seen on the reference datasets, in one sentence."""
    dfs = [r[3] for r in REFERENCE]
    ds = [r[2] for r in REFERENCE]
    lo = min(REFERENCE, key=lambda r: r[3])
    hi = max(REFERENCE, key=lambda r: r[3])
    df_lo, df_hi = (fmt_fixed(x, 3, signed=True) for x in (min(dfs), max(dfs)))
    return (f"On the reference datasets (Adult, COMPAS, German, a logistic regression, "
            f"this audit's defaults) df ranged from {df_lo} ({lo[0]}, {lo[1]}) to "
            f"{df_hi} ({hi[0]}, {hi[1]}), with 0 on Adult and COMPAS for sex; "
            f"D ranged from {fmt_fixed(min(ds), 2)} to {fmt_fixed(max(ds), 2)} (D grows "
            "with the number of features, so compare D only between runs on the same "
            "features).")


def finding(name: str, d: float | None, d_f: float | None, df: float | None,
            certified: bool = True) -> str:
    """The HFM result of one attribute in one plain sentence.

    Parameters
    ----------
    name:
        The attribute.
    d, d_f, df:
        D, D_f and df = D_f / D - 1.
    certified:
        Whether both distances are exact (else the sentence says they are bounds).
    """
    if df is None or d is None or d_f is None or math.isnan(df):
        return f"{name}: df could not be computed."
    lo = min(r[3] for r in REFERENCE)
    hi = max(r[3] for r in REFERENCE)
    scale = ("within the range seen on the reference datasets" if lo <= df <= hi
             else "above the range seen on the reference datasets" if df > hi
             else "below the range seen on the reference datasets")
    pair = f"D_f {fmt_number(d_f)} vs D {fmt_number(d)}"
    share, signed = fmt_fixed(100 * abs(df), 1), fmt_fixed(df, 3, signed=True)
    if math.isinf(df):
        text = (f"{name}: the labels do not separate the groups at all (D = 0) but the "
                f"decisions do ({pair}): the model creates a separation the data does not "
                "have; look at the witness pair.")
    elif df > 0:
        text = (f"{name}: the decisions separate the groups {share}% more than the labels "
                f"do (df {signed}, {pair}; {scale}): somewhere two similar people of "
                "the two groups get decisions further apart than their labels; the "
                "witness pair below shows where.")
    elif df < 0:
        text = (f"{name}: the decisions separate the groups {share}% less than the labels "
                f"do (df {signed}, {pair}; {scale}): at the individual level the model "
                "adds no separation between the groups beyond what the labels have.")
    else:
        text = (f"{name}: the decisions separate the groups exactly as much as the labels "
                f"do (df 0, {pair}): the model adds no separation between the groups "
                "beyond what the labels have.")
    if not certified:
        text += " The distances are bounds, not exact values (see the table)."
    return text


def show_witness_values(params: Any) -> bool:
    """Whether the report shows witness rows' feature values: only on an explicit opt-in.

    Witness rows are real people's records (age, race, marital status ...), so they are
    redacted by default; ``audits.hfm.show_witness_values: true`` shows them.
    """
    return bool(getattr(params, "show_witness_values", False))


def _or_dash(v: Any) -> Any:
    return "-" if v is None else v


def _marked(r: DistanceResult, row: Any) -> str:
    """D or D_f as its result row prints everywhere (:func:`row_number`), else as before."""
    if row is None:
        return _fmt_interval(r)
    s = row_number(row)
    if r.lower is not None and r.upper is not None and not r.certified:
        s += f" (not certified: [{row_number(row, 'ci_low')}, {row_number(row, 'ci_high')}])"
    return s


def _attribute_cells(name: str, d: DistanceResult, d_f: DistanceResult,
                     rows: Mapping[tuple[str, str], Any] | None = None) -> dict[str, str]:
    """One line of the attribute table (numbers from ``rows`` where they are)."""
    rows = rows or {}
    searches = " / ".join(
        f"{r.extra.get('n_searched', '-')} ({_or_dash(r.extra.get('n_candidates'))})"
        for r in (d, d_f))
    return {
        "name": name, "D": _marked(d, rows.get((name, "D"))),
        "D_f": _marked(d_f, rows.get((name, "D_f"))),
        "df": (row_number(rows[(name, "df")], signed=True) if (name, "df") in rows
               else _fmt(hfm_df(d.value, d_f.value))),
        "D_avg": row_number(rows[(name, "D_avg")]) if (name, "D_avg") in rows
        else _fmt(d.avg),
        "D_f_avg": row_number(rows[(name, "D_f_avg")]) if (name, "D_f_avg") in rows
        else _fmt(d_f.avg), "D_approx": _fmt(d.extra.get("approx")),
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


def _distance_parts(result: HFMResult, method: str, rows: list[MetricRow] | None = None
                    ) -> tuple[list, list, list, list, list[str]]:
    """Attribute lines, witness lines, certification steps, figures and findings."""
    attrs, wit, steps, figures, findings = [], [], [], [], []
    idx = {(r.attribute, r.metric): r for r in rows or []
           if r.status == Status.OK and r.group in ("binary", None) and r.model is None}
    for name, (d, d_f) in result.distances.items():
        attrs.append(_attribute_cells(name, d, d_f, idx))
        findings.append(finding(name, d.value, d_f.value, hfm_df(d.value, d_f.value),
                                certified=bool(d.certified and d_f.certified)))
        for metric, r in (("D", d), ("D_f", d_f)):
            wit.append({"attr": name, "metric": metric, "key": r.key or "n/a",
                        "nb_key": r.nb_key or "n/a", "value": _fmt(r.value)})
            for n_s, lo, hi in r.extra.get("steps", []):
                steps.append(f"{name} {metric}: after {n_s} searches [{_fmt(lo)}, {_fmt(hi)}]")
        # a partial result (kept while certification runs) is drawn without plots
        fig = None if result.partial else _figure(name, d, d_f, method)
        if fig:
            figures.append(fig)
    return attrs, wit, steps, figures, findings


def _comparison(rows: list[MetricRow]) -> list[dict[str, str]]:
    """With ``columns.baseline``: per attribute, D_f and df of the challenger and the
    baseline, and their difference with its certified bounds (D is shared)."""
    idx = {(r.attribute, r.metric, r.model): r for r in rows}
    out = []
    for (attr, metric, model), diff in idx.items():
        if model != DIFFERENCE_MODEL or metric not in ("D_f", "df"):
            continue
        c, b = idx.get((attr, metric, None)), idx.get((attr, metric, BASELINE_MODEL))
        signed = metric == "df"
        bounds = (f"[{row_number(diff, 'ci_low')}, {row_number(diff, 'ci_high')}]"
                  if diff.lower is not None and diff.upper is not None else "–")
        out.append({"name": attr, "metric": metric,
                    "challenger": row_number(c, signed=signed) if c else "–",
                    "baseline": row_number(b, signed=signed) if b else "–",
                    "difference": row_number(diff, signed=True), "bounds": bounds,
                    "status": str(diff.status)})
    return out


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
    attrs, wit, steps, figures, findings = _distance_parts(result, params.method, rows)
    show = show_witness_values(params)
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
        witnesses=wit, redacted=list(result.redacted), show_values=show,
        witness_values=sorted(witnesses.items()) if show else [],
        witness_cols=sorted({c for v in witnesses.values() for c in v}) if show else [],
        dr=_dr_text(rows), figures=figures, findings=findings, reference=reference_text(),
        comparison=_comparison(rows),
        reference_dr=reference_dr_text(),
    )
    return [ReportSection(title=TITLE, html=html, order=30)]
