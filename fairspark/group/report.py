"""The group audit's part of ``report.html``: verdicts, tables with intervals, charts.

:func:`render` (the spec's renderer) and :func:`group_section` turn the group audit's
long rows into one :class:`~fairspark.audits.base.ReportSection`; :func:`headlines`
gives the verdicts in words that open the report. Both read only the rows, so they
can be re-rendered from a published ``metrics.parquet``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fairspark.audits.base import AuditOutcome, ReportSection
from fairspark.metrics._core import BASELINES, CATALOGUE, RATES
from fairspark.report.figures import figure_to_data_uri, plt
from fairspark.report.sections import render_template
from fairspark.status import Status

__all__ = ["group_section", "headlines", "metric_label", "render"]

#: rates shown per group (the others are in metrics.parquet)
GROUP_RATES: tuple[str, ...] = ("selection_rate", "base_rate", "tpr", "fpr", "ppv", "accuracy")
#: comparisons shown per unprivileged value in the multi-valued view
VALUE_METRICS: tuple[str, ...] = (
    "statistical_parity_difference", "disparate_impact", "tpr_difference",
    "fpr_difference", "average_odds_difference",
)
_ABBR = {"tpr": "TPR", "fpr": "FPR", "fnr": "FNR", "tnr": "TNR", "ppv": "PPV", "npv": "NPV",
         "fdr": "FDR", "for": "FOR", "error_rate": "error rate"}
_ALIAS = {"tpr": " (equal opportunity)", "ppv": " (predictive parity)"}
_SPECIAL = {
    "statistical_parity_difference": "Statistical parity difference",
    "disparate_impact": "Disparate impact",
    "average_odds_difference": "Average odds difference",
    "equalized_odds_difference": "Equalized odds difference",
    "dp": "Demographic parity gap |SP|",
    "eo": "Equal opportunity gap |TPR|",
    "pqp": "Predictive parity gap |PPV|",
    "gei": "Generalized entropy index (α = 0.5)",
    "theil": "Theil index",
    "between_group_gei": "Between-group GEI",
    "between_group_theil": "Between-group Theil",
}
_FOUR_FIFTHS = 0.8
_SHORT_RATE = {"selection_rate": "selection rate", "base_rate": "base rate", "tpr": "TPR",
               "fpr": "FPR", "ppv": "PPV", "accuracy": "accuracy"}


def metric_label(name: str) -> str:
    """A reader's name for a metric or a rate."""
    if name in _SPECIAL:
        return _SPECIAL[name]
    if name in RATES:
        return RATES[name].description[:1].upper() + RATES[name].description[1:]
    for kind in ("difference", "ratio"):
        if name.endswith(f"_{kind}"):
            rate = name[: -len(kind) - 1]
            text = f"{_ABBR.get(rate, rate)} {kind}{_ALIAS.get(rate, '')}"
            return text[:1].upper() + text[1:]
    return name.replace("_", " ")


def _num(x: Any) -> float | None:
    if x is None:
        return None
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def _fair(metric: str) -> float | None:
    spec = CATALOGUE.get(metric) or BASELINES.get(metric)
    return spec.fair_value if spec else None


def _fmt(x: float | None, *, signed: bool = False) -> str:
    if x is None:
        return "–"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    s = f"{x:+.3f}" if signed else f"{x:.3f}"
    return s.replace("-", "−")


def _fmt_small(x: float | None) -> str:
    return "–" if x is None else f"{x:.3g}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def _reading(row: Mapping[str, Any]) -> tuple[str, str]:
    """(css class, words) for one comparison row."""
    status = row.get("status") or "ok"
    value, lo, hi = _num(row.get("value")), _num(row.get("lower")), _num(row.get("upper"))
    fair = _fair(row["metric"])
    if status == "failed":
        return "failed", f"not computed: {row.get('detail') or 'failed'}"
    if status == "inconclusive":
        return "inconclusive", f"inconclusive: {row.get('detail') or 'too few rows'}"
    if value is None:
        return "muted", f"undefined: {row.get('detail') or 'no rows'}"
    if fair is None or lo is None or hi is None:
        return "muted", "no interval"
    if lo > fair or hi < fair:
        return "gap", "clear gap"
    return "nogap", "no clear gap"


def _ci(row: Mapping[str, Any], *, signed: bool) -> str:
    lo, hi = _num(row.get("lower")), _num(row.get("upper"))
    if lo is None or hi is None:
        return "–"
    return f"[{_fmt(lo, signed=signed)}, {_fmt(hi, signed=signed)}]"


def _signed(metric: str) -> bool:
    spec = CATALOGUE.get(metric)
    return bool(spec and spec.kind in ("difference", "combined")
                and metric != "equalized_odds_difference")


def _index(rows: list[Mapping[str, Any]]) -> dict[tuple[str, str, str], Mapping[str, Any]]:
    return {(str(r.get("attribute")), str(r.get("group")), str(r.get("metric"))): r for r in rows}


def _attributes(rows: list[Mapping[str, Any]]) -> list[str]:
    return [a for a in dict.fromkeys(str(r.get("attribute")) for r in rows) if a != "*"]


def _level_pct(ci_level: float) -> str:
    pct = ci_level * 100
    return f"{pct:.0f}%" if abs(pct - round(pct)) < 1e-9 else f"{pct:.1f}%"


# ------------------------------------------------------------------------- verdicts


def _attribute_verdict(attr: str, idx: Mapping[tuple[str, str, str], Mapping[str, Any]],
                       level: str, unpriv_name: str | None, *, full: bool = True) -> str:
    """One attribute's verdict; ``full=False`` keeps selection, DI and equal opportunity."""
    failed = idx.get((attr, "None", "*"))
    if failed is not None and failed.get("status") == "failed":
        return f"{attr}: could not be audited: {failed.get('detail')}."
    who = f"the unprivileged group ({unpriv_name})" if unpriv_name else "the unprivileged group"
    parts: list[str] = []
    spd = idx.get((attr, "unprivileged", "statistical_parity_difference"))
    sr_u = idx.get((attr, "unprivileged", "selection_rate"))
    sr_p = idx.get((attr, "privileged", "selection_rate"))
    if spd is not None:
        kind, _ = _reading(spd)
        v = _num(spd.get("value"))
        rates = (f"{_pct(_num(sr_u.get('value')))} vs {_pct(_num(sr_p.get('value')))}"
                 if sr_u and sr_p else "")
        if kind == "gap" and v is not None:
            more = "less" if v < 0 else "more"
            parts.append(f"{who} receives the favourable decision {more} often ({rates}; "
                         f"difference {_fmt(v, signed=True)}, {level} CI "
                         f"{_ci(spd, signed=True)})")
        elif kind == "nogap":
            parts.append(f"selection rates show no clear difference ({rates}; {level} CI "
                         f"{_ci(spd, signed=True)} includes 0)")
        elif kind == "inconclusive":
            parts.append(f"selection rates are inconclusive ({spd.get('detail')})")
    di = idx.get((attr, "unprivileged", "disparate_impact"))
    if di is not None and (di.get("status") or "ok") == "ok":
        v, hi = _num(di.get("value")), _num(di.get("upper"))
        if v is not None and v < _FOUR_FIFTHS:
            clear = hi is not None and hi < _FOUR_FIFTHS
            sure = " even at the top of its interval" if clear else ""
            parts.append(f"disparate impact {_fmt(v)} is below the four-fifths threshold "
                         f"(0.8){sure}")
        elif v is not None and v > 1 / _FOUR_FIFTHS:
            parts.append(f"disparate impact {_fmt(v)} favours the unprivileged group beyond "
                         "the four-fifths rule (above 1.25)")
    label_metrics = [("tpr_difference", "equal opportunity (true positive rate)"),
                     ("average_odds_difference", "average odds"),
                     ("ppv_difference", "predictive parity (precision)")]
    for metric, words in label_metrics if full else label_metrics[:1]:
        r = idx.get((attr, "unprivileged", metric))
        if r is None:
            continue
        kind, _ = _reading(r)
        v = _num(r.get("value"))
        if kind == "gap" and v is not None:
            side = "lower" if v < 0 else "higher"
            parts.append(f"{words}: {side} for the unprivileged group by {abs(v):.3f} "
                         f"({level} CI {_ci(r, signed=True)})")
        elif kind == "nogap":
            parts.append(f"{words}: no clear gap")
        elif kind == "inconclusive":
            parts.append(f"{words}: inconclusive")
    comps = [r for (a, g, m), r in idx.items()
             if a == attr and g == "unprivileged" and (m in CATALOGUE or m in BASELINES)]
    n_inc = sum(1 for r in comps if r.get("status") == "inconclusive")
    if n_inc:
        parts.append(f"{n_inc} of {len(comps)} comparisons are inconclusive for lack of rows")
    if not parts:
        return f"{attr}: no binary comparison available."
    text = "; ".join(parts)
    return f"{attr}: {text[:1].upper()}{text[1:]}."


def _unpriv_names(summary: Mapping[str, Any] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    attrs = (((summary or {}).get("rows") or {}).get("attributes")) or {}
    for name, a in attrs.items():
        priv = set(map(str, a.get("privileged") or []))
        others = [str(v) for v in (a.get("values") or {}) if str(v) not in priv]
        if others and a.get("kind") != "predicate":
            out[name] = ", ".join(others[:3]) + (f" and {len(others) - 3} more"
                                                 if len(others) > 3 else "")
    return out


def headlines(rows: list[Mapping[str, Any]], *, summary: Mapping[str, Any] | None = None,
              ci_level: float | None = None) -> list[str]:
    """One verdict in words per audited attribute (binary view), for the report's top.

    Short form (selection rates, disparate impact, equal opportunity and the count of
    inconclusive comparisons); the section repeats it with average odds and predictive
    parity. A gap is called clear only when its interval excludes the fair value.
    """
    rows = [r for r in rows if r.get("audit", "group") == "group"]
    if ci_level is None:
        params = (((summary or {}).get("audits") or {}).get("group") or {}).get("params") or {}
        ci_level = float(params.get("ci_level", 0.95))
    idx = _index(rows)
    names = _unpriv_names(summary)
    return [_attribute_verdict(a, idx, _level_pct(ci_level), names.get(a), full=False)
            for a in _attributes(rows)]


# --------------------------------------------------------------------------- charts


def _interval_chart(entries: list[dict[str, Any]], *, title: str, xlabel: str,
                    fair: float, level: str) -> str:
    """A horizontal point-and-interval chart; returns a data: URI."""
    n = len(entries)
    fig, ax = plt.subplots(figsize=(7.6, 0.42 * n + 1.3))
    ys = list(range(n))[::-1]
    for y, e in zip(ys, entries, strict=True):
        v, lo, hi = e["value"], e["lower"], e["upper"]
        colour = "#b3261e" if e["gap"] else "#2457a6"
        if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
            ax.plot([lo, hi], [y, y], color=colour, lw=2.2, solid_capstyle="butt")
        ax.plot([v], [y], "o", color=colour, ms=6)
    ax.axvline(fair, color="#1d2329", ls="--", lw=1, label=f"fair value ({fair:g})")
    ax.set_yticks(ys)
    ax.set_yticklabels([e["label"] for e in entries], fontsize=9)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("metric")
    ax.set_title(title, fontsize=11, loc="left")
    ax.grid(axis="x", color="#dde3e8", lw=0.8)
    ax.set_axisbelow(True)
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], color="#b3261e", marker="o", lw=2.2, label=f"clear gap ({level} CI)"),
        Line2D([], [], color="#2457a6", marker="o", lw=2.2, label="interval includes fair value"),
        Line2D([], [], color="#1d2329", ls="--", lw=1, label=f"fair value ({fair:g})"),
    ]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return figure_to_data_uri(fig)


def _chart_entries(rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        v = _num(r.get("value"))
        if v is None or (r.get("status") or "ok") != "ok":
            continue  # undefined, failed or inconclusive: not drawn as if precise
        kind, _ = _reading(r)
        out.append({"label": r.get("_label") or metric_label(r["metric"]), "value": v,
                    "lower": _num(r.get("lower")), "upper": _num(r.get("upper")),
                    "status": r.get("status") or "ok", "gap": kind == "gap"})
    return out


# -------------------------------------------------------------------------- section


def _comparison_table(idx, attr: str, group: str) -> list[dict[str, Any]]:
    out = []
    for name in [*CATALOGUE, *BASELINES]:
        r = idx.get((attr, group, name))
        if r is None:
            continue
        spec = CATALOGUE.get(name) or BASELINES[name]
        kind, words = _reading(r)
        signed = _signed(name)
        inconclusive = r.get("status") == "inconclusive"
        # An inconclusive metric shows its row count, not a number that looks precise.
        out.append({
            "label": metric_label(name), "formula": spec.formula,
            "value": "–" if inconclusive else _fmt(_num(r.get("value")), signed=signed),
            "ci": "–" if inconclusive else _ci(r, signed=signed),
            "fair": f"{spec.fair_value:g}",
            "status": r.get("status") or "ok", "kind": kind, "reading": words,
            "muted": inconclusive,
        })
    return out


def _rate_table(idx, attr: str, groups: list[str]) -> dict[str, Any]:
    body = []
    for g in groups:
        cells = []
        for rate in GROUP_RATES:
            r = idx.get((attr, g, rate))
            if r is None:
                cells.append({"text": "–", "title": "", "muted": True})
                continue
            v = _num(r.get("value"))
            status = r.get("status") or "ok"
            if status == "inconclusive":
                cells.append({"text": f"inconclusive: {r.get('detail') or 'too few rows'}",
                              "title": "", "muted": True})
            elif v is None:
                cells.append({"text": "undefined", "title": r.get("detail") or "",
                              "muted": True})
            else:
                cells.append({"text": f"{_fmt(v)} {_ci(r, signed=False)}", "title": "",
                              "muted": False})
        body.append({"group": g, "cells": cells})
    return {"header": [{"short": _SHORT_RATE.get(r, r), "title": metric_label(r)}
                       for r in GROUP_RATES], "rows": body}


def _value_table(idx, attr: str, values: list[str]) -> dict[str, Any]:
    body = []
    for v in values:
        cells = []
        for m in VALUE_METRICS:
            r = idx.get((attr, v, m))
            if r is None:
                cells.append({"text": "–", "kind": "muted", "title": ""})
                continue
            kind, words = _reading(r)
            signed = _signed(m)
            val = _num(r.get("value"))
            if r.get("status") == "inconclusive":
                text = f"inconclusive: {r.get('detail') or 'too few rows'}"
            elif val is None:
                text = "undefined"
            else:
                text = f"{_fmt(val, signed=signed)} {_ci(r, signed=signed)}"
            cells.append({"text": text, "kind": kind, "title": words})
        body.append({"value": v, "cells": cells})
    return {"header": [metric_label(m) for m in VALUE_METRICS], "rows": body}


def _value_chart(idx, attr: str, values: list[str], level: str) -> str | None:
    v_rows = []
    for v in values:
        for m in ("statistical_parity_difference", "tpr_difference"):
            r = idx.get((attr, v, m))
            if r is not None:
                v_rows.append({**r, "_label": f"{v}: {metric_label(m).split(' (')[0]}"})
    v_entries = _chart_entries(v_rows)
    if not v_entries:
        return None
    return _interval_chart(
        v_entries, title=f"{attr}: each value vs the privileged group", level=level,
        fair=0.0, xlabel=f"difference, value − privileged ({level} CI)",
    )


def _attribute_view(attr: str, rows: list[dict[str, Any]], idx, level: str) -> dict[str, Any]:
    """Everything the template shows for one attribute."""
    a_rows = [r for r in rows if r.get("attribute") == attr]
    groups = list(dict.fromkeys(str(r.get("group")) for r in a_rows
                                if r.get("metric") in RATES))
    values = [g for g in dict.fromkeys(str(r.get("group")) for r in a_rows
                                       if r.get("metric") in CATALOGUE)
              if g != "unprivileged"]
    failed = [r for r in a_rows if r.get("metric") == "*" and r.get("status") == Status.FAILED]
    signed_rows = [idx[(attr, "unprivileged", m)] for m in CATALOGUE
                   if _signed(m) and (attr, "unprivileged", m) in idx]
    chart = None
    entries = _chart_entries(signed_rows)
    if entries:
        chart = _interval_chart(
            entries, title=f"{attr}: unprivileged vs privileged", level=level, fair=0.0,
            xlabel=f"difference, unprivileged − privileged ({level} CI)",
        )
    between = [
        {"label": metric_label(m), "value": _fmt_small(_num(r.get("value"))),
         "ci": _ci(r, signed=False)}
        for m in ("between_group_gei", "between_group_theil")
        if (r := idx.get((attr, "all", m))) is not None
    ]
    return {
        "name": attr,
        "failed": [r.get("detail") for r in failed],
        "verdict": _attribute_verdict(attr, idx, level, None) if not failed else None,
        "chart": chart,
        "comparisons": _comparison_table(idx, attr, "unprivileged"),
        "rates": _rate_table(idx, attr, groups) if groups else None,
        "by_value": _value_table(idx, attr, values) if values else None,
        "value_chart": _value_chart(idx, attr, values, level) if values else None,
        "between": between,
    }


def group_section(
    rows: list[Mapping[str, Any]], *, ci_level: float, min_group_size: int
) -> ReportSection:
    """The group audit's report section.

    Parameters
    ----------
    rows:
        The group audit's long rows (``MetricRow`` fields as dicts; other audits' rows
        are ignored).
    ci_level:
        The confidence level of the intervals (for labels).
    min_group_size:
        The minimum support below which a metric is inconclusive (for the text).

    Returns
    -------
    ReportSection
        Per attribute: a verdict in words, a point-and-interval chart of the signed
        differences, the table of every comparison with its interval and reading,
        per-group rates, and the multi-valued comparisons when present; then the
        overall inequality indices.
    """
    rows = [dict(r) for r in rows if r.get("audit", "group") == "group"]
    level = _level_pct(ci_level)
    idx = _index(rows)
    attrs = [_attribute_view(attr, rows, idx, level) for attr in _attributes(rows)]
    overall = [
        {"label": metric_label(m), "value": _fmt(_num(r.get("value"))),
         "ci": _ci(r, signed=False), "status": r.get("status") or "ok",
         "detail": r.get("detail") or ""}
        for m in ("gei", "theil") if (r := idx.get(("*", "all", m))) is not None
    ]
    n_inc = sum(1 for r in rows if r.get("status") == Status.INCONCLUSIVE)
    html = render_template(
        "fairspark.group", "section.html.j2",
        attrs=attrs, overall=overall, level=level, min_group_size=min_group_size,
        n_inconclusive=n_inc,
    )
    return ReportSection(title="Group fairness metrics", html=html, order=10)


def render(outcome: AuditOutcome, *, ctx: Any = None, params: Any = None) -> list[ReportSection]:
    """The spec's renderer: the group section from the audit's :class:`GroupResult`."""
    res = outcome.result
    if res is None:
        return []
    return [group_section(res.rows, ci_level=res.ci_level, min_group_size=res.min_group_size)]
