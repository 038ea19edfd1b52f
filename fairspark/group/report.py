"""The group audit's part of ``report.html``: verdicts, tables with intervals, charts.

:func:`render` (the spec's renderer) and :func:`group_section` turn the group audit's
long rows into one :class:`~fairspark.audits.base.ReportSection`; :func:`headlines`
gives the verdicts in words that open the report. Both read only the rows, so they
can be re-rendered from a published ``metrics.parquet``.

This module draws the charts and tables and assembles the section; the words (metric
names, numbers and intervals as printed, verdicts, :func:`headlines`) are in
:mod:`fairspark.group._words`, importable from here too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fairspark.audits.base import AuditOutcome, ReportSection
from fairspark.audits.figures import figure_to_data_uri, plt
from fairspark.audits.lines import fmt_number
from fairspark.audits.sections import render_template
from fairspark.group._words import (
    _FOUR_FIFTHS,
    _attribute_verdict,
    _attributes,
    _ci,
    _disadvantaged,
    _group_names,
    _group_sizes,
    _index,
    _level_pct,
    _limit_words,
    _limits_for,
    _num,
    _reading,
    _side_words,
    _signed,
    _value,
    headlines,
    metric_label,
)
from fairspark.group.decision import unpaired
from fairspark.group.results import HEADLINE_METRICS
from fairspark.metrics import BASELINES, CATALOGUE, RATES
from fairspark.numbers import fmt_count, fmt_setting
from fairspark.status import Status

__all__ = ["group_section", "headlines", "metric_label", "render"]

#: rates shown per group (the others are in metrics.parquet)
GROUP_RATES: tuple[str, ...] = ("selection_rate", "base_rate", "tpr", "fpr", "ppv", "accuracy")
#: comparisons shown per unprivileged value in the multi-valued view
VALUE_METRICS: tuple[str, ...] = (
    "statistical_parity_difference", "disparate_impact", "tpr_difference",
    "fpr_difference", "average_odds_difference",
)
_UNPRIV_COLOUR, _PRIV_COLOUR, _NEUTRAL_COLOUR = "#a8231b", "#6a3d9a", "#5b6670"
#: the group audit's rows that are not one unprivileged value against the reference
_POOLED = frozenset({"unprivileged", "privileged", "all", "None"})
_SHORT_RATE = {"selection_rate": "selection rate", "base_rate": "base rate", "tpr": "TPR",
               "fpr": "FPR", "ppv": "PPV", "accuracy": "accuracy"}


# --------------------------------------------------------------------------- charts


def _interval_chart(entries: list[dict[str, Any]], *, title: str, xlabel: str,
                    fair: float, level: str, xlim: tuple[float, float] | None = None,
                    bands: list[tuple[float, float, str]] = (),
                    lines: list[tuple[float, str]] = ()) -> str:
    """A horizontal point-and-interval chart; returns a data: URI.

    Long on purpose: the matplotlib calls of one chart, kept in one place.

    An entry with an ``interval`` name (a row a gating limit judges) has the interval
    its verdict uses (e.g. ``95% Holm-adjusted``); the legend and the x label say so.

    Colour marks only a clear gap that disadvantages a group (red: the unprivileged
    group, purple: the privileged group) and every such interval is also labelled in
    words, so colour is never the only signal. ``bands`` are shaded tolerance bands,
    ``lines`` configured limits (dotted), ``xlim`` the x-range shared across attributes.
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    n = len(entries)
    fig, ax = plt.subplots(figsize=(7.4, 0.5 * n + 1.6))
    ys = list(range(n))[::-1]
    for lo_b, hi_b, label in bands:
        ax.axvspan(lo_b, hi_b, color="#e7f4ec", zorder=0, label=label)
    for x, _label in lines:
        ax.axvline(x, color="#a8231b", ls=":", lw=1.6, zorder=1)
    for y, e in zip(ys, entries, strict=True):
        v, lo, hi = e["value"], e["lower"], e["upper"]
        colour = {"unprivileged": _UNPRIV_COLOUR, "privileged": _PRIV_COLOUR}.get(
            e.get("side") or "", _NEUTRAL_COLOUR)
        if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
            ax.plot([lo, hi], [y, y], color=colour, lw=2.4, solid_capstyle="butt", zorder=3)
        ax.plot([v], [y], "o" if e.get("side") else "s", color=colour, ms=7, zorder=4)
        for x in e.get("limits") or ():  # a limit applies to its own metric's row only
            ax.plot([x, x], [y - 0.38, y + 0.38], color="#a8231b", ls=":", lw=1.8, zorder=1)
        if e.get("note"):
            ax.annotate(e["note"], xy=(1.0, y), xycoords=("axes fraction", "data"),
                        xytext=(6, 0), textcoords="offset points", va="center",
                        fontsize=10, color=colour)
    ax.axvline(fair, color="#1d2329", ls="--", lw=1, zorder=2)
    ax.set_yticks(ys)
    ax.set_yticklabels([e["label"] for e in entries], fontsize=10)
    ax.set_ylim(-0.7, n - 0.3)
    if xlim is not None:
        ax.set_xlim(*xlim)
    names = list(dict.fromkeys(e["interval"] for e in entries if e.get("interval")))
    if names:
        xlabel += f"\nbar of a row a limit judges: its verdict's {' / '.join(names)} interval"
    ax.set_xlabel(xlabel, fontsize=10)
    ax.set_title(title, fontsize=12, loc="left")
    ax.tick_params(axis="x", labelsize=10)
    ax.grid(axis="x", color="#dde3e8", lw=0.8)
    ax.set_axisbelow(True)
    handles = [
        Line2D([], [], color=_UNPRIV_COLOUR, marker="o", lw=2.4,
               label=f"clear gap ({level} CI), disadvantages the unprivileged group"),
        Line2D([], [], color=_PRIV_COLOUR, marker="o", lw=2.4,
               label="clear gap, disadvantages the privileged group"),
        Line2D([], [], color=_NEUTRAL_COLOUR, marker="s", lw=2.4,
               label="no clear gap, or a gap with no side"),
        Line2D([], [], color="#1d2329", ls="--", lw=1, label=f"parity ({fmt_setting(fair)})"),
    ]
    if lines or any(e.get("limits") for e in entries):
        handles.append(Line2D([], [], color="#a8231b", ls=":", lw=1.6,
                              label="configured limit"))
    for name in dict.fromkeys(e["interval"] for e in entries if e.get("interval")):
        handles.append(Line2D([], [], color=_NEUTRAL_COLOUR, lw=2.4, label=(
            f"{name} interval (rows a limit judges)")))
    for _, _, label in bands[:1]:
        handles.append(Patch(color="#e7f4ec", label=label))
    ax.legend(handles=handles, fontsize=10, loc="upper left", bbox_to_anchor=(0.0, -0.22),
              frameon=False, ncol=2)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return figure_to_data_uri(fig)


def _short_name(name: str, *, width: int = 22, lines: int = 2) -> str:
    """A group's name as a chart label: wrapped at ``width`` characters on at most
    ``lines`` lines, the rest cut with an ellipsis (never replaced by its role)."""
    import textwrap

    parts = textwrap.wrap(name, width=width, break_long_words=True) or [name]
    if len(parts) > lines:
        parts = [*parts[:lines - 1], parts[lines - 1][:width - 1] + "…"]
    return "\n".join(parts)


def _chart_entries(rows: list[Mapping[str, Any]],
                   names: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        v = _num(r.get("value"))
        if v is None or (r.get("status") or "ok") != "ok":
            continue  # undefined, failed or inconclusive: not drawn as if precise
        side = _disadvantaged(r, names or {})
        who = (names or {}).get(side or "", side or "")
        kind, _ = _reading(r)
        note = (f"▼ {_short_name(who)}" if side else
                "gap, no side" if kind == "gap" else "no clear gap")
        out.append({"label": r.get("_label") or metric_label(r["metric"]), "value": v,
                    "lower": _num(r.get("lower")), "upper": _num(r.get("upper")),
                    "status": r.get("status") or "ok", "gap": kind == "gap",
                    "side": side, "note": note, "limits": r.get("_limits") or [],
                    "interval": r.get("_interval")})
    return out


def check_intervals(checks: list[Mapping[str, Any]] | None
                    ) -> dict[tuple[str, str, str], tuple[float, float, str]]:
    """(attribute, group, metric) -> (lower, upper, name) of the interval a gating limit
    check's verdict uses (its ``audit = limits`` row: Holm- or BH-adjusted under a
    correction), for the group audit's rows a statistical check judges; where several
    rules judge one row, the widest. A ``no_worse_than_baseline`` check (another
    quantity, "worse") and a pooled view that does not gate are left out."""
    import json

    out: dict[tuple[str, str, str], tuple[float, float, str]] = {}
    for r in checks or []:
        try:
            p = json.loads(r.get("params") or "{}")
        except (TypeError, ValueError):
            continue
        lo, hi = _num(r.get("lower")), _num(r.get("upper"))
        if (r.get("audit") != "limits" or not unpaired(r) or lo is None or hi is None
                or p.get("source_audit", "group") != "group" or p.get("kind") != "statistical"
                or p.get("role", "gate") != "gate"):
            continue
        key = (str(r.get("attribute")), str(r.get("group")), str(r.get("metric")))
        name = str(p.get("interval") or "adjusted")
        if key in out:
            lo, hi = min(lo, out[key][0]), max(hi, out[key][1])
        out[key] = (lo, hi, name)
    return out


def _with_check_intervals(idx, adjusted: Mapping[tuple[str, str, str], tuple],
                          level: str) -> dict:
    """``idx`` for the charts: each row a gating check judges carries the interval its
    verdict uses and its name at the limits' ``level`` (``95% Holm-adjusted``), the
    others their own."""
    out = dict(idx)
    for key, (lo, hi, name) in adjusted.items():
        if key in out:
            out[key] = {**out[key], "lower": lo, "upper": hi, "_interval": f"{level} {name}"}
    return out


def _span(rows: list[Mapping[str, Any]], *, fair: float,
          extra: list[float] = ()) -> tuple[float, float] | None:
    """An x-range that holds every finite estimate and interval of ``rows``."""
    xs = [fair, *extra]
    for r in rows:
        if (r.get("status") or "ok") != "ok":
            continue
        xs += [x for x in (_num(r.get(k)) for k in ("value", "lower", "upper"))
               if x is not None and math.isfinite(x)]
    lo, hi = min(xs), max(xs)
    pad = (hi - lo) * 0.06 or 0.05
    return lo - pad, hi + pad


def _values_of(idx, attr: str, metric: str) -> list[str]:
    """The unprivileged values of ``attr`` with their own ``metric`` row against the
    reference (the multi-valued view), in row order."""
    return [g for (a, g, m) in idx if a == attr and m == metric and g not in _POOLED]


def _gating_limits(idx, attr: str, group: str, metric: str,
                   limits: list[Mapping[str, Any]] | None) -> list[float]:
    """The limit lines of the rules that judge ``attr``/``group``'s ``metric`` row.

    The rule of :mod:`fairspark.nightly.gating`: a rule naming a group judges that
    group's row; a rule naming none judges every unprivileged value's row where the
    attribute has them (the limit is per group; the pooled row is then an extra view
    that never gates) and the pooled ``unprivileged`` row otherwise. ``abs_max`` gives
    two lines.
    """
    per_group = (metric in CATALOGUE or metric in BASELINES) and bool(
        _values_of(idx, attr, metric))
    out: list[float] = []
    for rule in limits or []:
        if rule.get("metric") != metric or rule.get("audit") not in (None, "group"):
            continue
        if rule.get("attribute") not in (None, attr):
            continue
        want = rule.get("group")
        judged = (group == want if want is not None
                  else group not in _POOLED if per_group else group == "unprivileged")
        if not judged:
            continue
        if rule.get("abs_max") is not None:
            out += [-float(rule["abs_max"]), float(rule["abs_max"])]
        out += [float(rule[k]) for k in ("min", "max") if rule.get(k) is not None]
    return list(dict.fromkeys(out))


def _per_group(idx, attr: str, metric: str, limits: list[Mapping[str, Any]] | None) -> bool:
    """Whether a limit on ``metric`` judges ``attr`` per unprivileged value."""
    return any(_gating_limits(idx, attr, g, metric, limits)
               for g in _values_of(idx, attr, metric))


def _di_chart(idx, attrs: list[str], names_of: Mapping[str, Mapping[str, str]],
              level: str, limits: list[Mapping[str, Any]] | None) -> str | None:
    """Disparate impact of every attribute on one chart with the four-fifths band.

    Where a limit on disparate impact is judged per group (an attribute with more than
    one unprivileged value), the chart draws every value against the reference with the
    limit on its row (each is a gating check), and the pooled row beside them labelled
    as the view that does not gate, without the limit.
    """
    metric = "disparate_impact"
    rows = []
    for a in attrs:
        per_group = _per_group(idx, a, metric, limits)
        r = idx.get((a, "unprivileged", metric))
        if r is not None:
            own = _gating_limits(idx, a, "unprivileged", metric, limits)
            label = (a if not per_group else f"{a}: pooled" if own
                     else f"{a}: pooled (does not gate)")
            rows.append({**r, "_label": label, "_names": names_of.get(a, {}), "_limits": own})
        if per_group:
            for g in _values_of(idx, a, metric):
                rows.append({**idx[(a, g, metric)], "_label": f"{a}: {g}",
                             "_names": {"unprivileged": g, "privileged": "reference"},
                             "_limits": _gating_limits(idx, a, g, metric, limits)})
    bounds = sorted({b for r in rows for b in r["_limits"]})
    entries = []
    for r in rows:
        entries += _chart_entries([r], r["_names"])
    if not entries:
        return None
    # the whole four-fifths band is in range (it was cut at the largest value)
    xlim = _span(rows, fair=1.0, extra=[_FOUR_FIFTHS, 1 / _FOUR_FIFTHS, *bounds])
    return _interval_chart(
        entries, title="Disparate impact per attribute (unprivileged ÷ privileged)",
        xlabel=f"selection-rate ratio, unprivileged ÷ privileged ({level} CI)", fair=1.0,
        level=level, xlim=xlim, bands=[(_FOUR_FIFTHS, 1 / _FOUR_FIFTHS,
                                        "four-fifths band 0.8 to 1.25")])


# -------------------------------------------------------------------------- section


def _comparison_row(r: Mapping[str, Any], name: str, names: Mapping[str, str],
                    limits: list[tuple[str, float]]) -> dict[str, Any]:
    spec = CATALOGUE.get(name) or BASELINES[name]
    kind, words = _reading(r)
    signed = _signed(name)
    inconclusive = r.get("status") == "inconclusive"
    side = _disadvantaged(r, names)
    # An inconclusive metric shows its row count, not a number that looks precise.
    return {
        "label": metric_label(name), "formula": spec.formula,
        "value": "–" if inconclusive else _value(r, signed=signed),
        "ci": "–" if inconclusive else _ci(r, signed=signed),
        "fair": fmt_setting(spec.fair_value),
        "status": r.get("status") or "ok", "kind": kind, "reading": words,
        "muted": inconclusive, "side": side, "who": _side_words(side, names, r),
        "limit": _limit_words(limits),
    }


def _comparison_table(idx, attr: str, group: str, names: Mapping[str, str] | None = None,
                      limits: list[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    out = []
    for name in [*CATALOGUE, *BASELINES]:
        r = idx.get((attr, group, name))
        if r is not None:
            out.append(_comparison_row(r, name, names or {}, _limits_for(attr, name, limits)))
    return out


def _headline_table(idx, attr: str, names: Mapping[str, str],
                    limits: list[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """The handful of headline comparisons, the ones that disadvantage someone first."""
    out = []
    for name in HEADLINE_METRICS:
        r = idx.get((attr, "unprivileged", name))
        if r is not None:
            out.append(_comparison_row(r, name, names, _limits_for(attr, name, limits)))
    return sorted(out, key=lambda m: (m["side"] is None, m["kind"] != "gap"))


def _rate_table(idx, attr: str, groups: list[str], names: Mapping[str, str] | None = None,
                sizes: Mapping[str, int] | None = None) -> dict[str, Any]:
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
                # the interval may wrap below its value, never inside itself
                ci = _ci(r, signed=False).replace(", ", ",\u00a0")
                cells.append({"text": f"{_value(r)} {ci}", "title": "", "muted": False})
        label = f"{g} ({names[g]})" if names and names.get(g) else g
        n = (sizes or {}).get(g)
        body.append({"group": label, "n": fmt_count(n) if n is not None else "–", "cells": cells})
    return {"header": [{"short": _SHORT_RATE.get(r, r), "title": metric_label(r)}
                       for r in GROUP_RATES], "rows": body}


def _value_table(idx, attr: str, values: list[str],
                 sizes: Mapping[str, int] | None = None) -> dict[str, Any]:
    body = []
    for v in values:
        cells = []
        for m in VALUE_METRICS:
            r = idx.get((attr, v, m))
            if r is None:
                cells.append({"text": "–", "kind": "muted", "title": ""})
                continue
            kind, words = _reading(r)
            side = _disadvantaged(r, {})
            signed = _signed(m)
            val = _num(r.get("value"))
            if r.get("status") == "inconclusive":
                text = f"inconclusive: {r.get('detail') or 'too few rows'}"
            elif val is None:
                text = "undefined"
            else:
                text = f"{_value(r, signed=signed)} {_ci(r, signed=signed)}"
                if side == "unprivileged":
                    text = f"▼ {text}"
            cells.append({"text": text, "title": words,
                          "kind": "disadv" if side == "unprivileged" else
                          "muted" if kind in ("muted", "inconclusive", "failed") else ""})
        n = (sizes or {}).get(v)
        body.append({"value": v, "n": fmt_count(n) if n is not None else "–", "cells": cells})
    return {"header": [metric_label(m) for m in VALUE_METRICS], "rows": body}


def _value_chart(idx, attr: str, values: list[str], level: str,
                 xlim: tuple[float, float] | None = None,
                 limits: list[Mapping[str, Any]] | None = None) -> str | None:
    """Each unprivileged value against the reference, with the limits that judge it."""
    v_rows = []
    for v in values:
        for m in ("statistical_parity_difference", "tpr_difference"):
            r = idx.get((attr, v, m))
            if r is not None:
                short = "selection rate" if m.startswith("statistical") else "TPR"
                v_rows.append({**r, "_label": f"{v} · {short}",
                               "_limits": _gating_limits(idx, attr, v, m, limits)})
    v_entries = _chart_entries(v_rows, {"unprivileged": "this value",
                                        "privileged": "privileged"})
    if not v_entries:
        return None
    return _interval_chart(
        v_entries, title=f"{attr}: each value vs the privileged group", level=level,
        fair=0.0, xlabel=f"difference, value − privileged ({level} CI)", xlim=xlim,
    )


def _signed_headlines(idx, attr: str) -> list[Mapping[str, Any]]:
    return [idx[(attr, "unprivileged", m)] for m in HEADLINE_METRICS
            if _signed(m) and (attr, "unprivileged", m) in idx]


def _attribute_view(attr: str, rows: list[dict[str, Any]], idx, level: str, *,
                    sizes: Mapping[str, Any] | None = None,
                    limits: list[Mapping[str, Any]] | None = None,
                    xlim: tuple[float, float] | None = None,
                    cidx=None) -> dict[str, Any]:
    """Everything the template shows for one attribute (``cidx``: the index the charts
    draw, each row a gating check judges with the interval its verdict uses)."""
    cidx = idx if cidx is None else cidx
    a_rows = [r for r in rows if r.get("attribute") == attr]
    groups = list(dict.fromkeys(str(r.get("group")) for r in a_rows
                                if r.get("metric") in RATES))
    values = [g for g in dict.fromkeys(str(r.get("group")) for r in a_rows
                                       if r.get("metric") in CATALOGUE)
              if g != "unprivileged"]
    failed = [r for r in a_rows if r.get("metric") == "*" and r.get("status") == Status.FAILED]
    names = _group_names(attr, sizes)
    n_of = _group_sizes(attr, sizes)
    chart = None
    heads = []
    for r in _signed_headlines(cidx, attr):
        m = str(r["metric"])
        # a limit judged per value is drawn on the values' chart, not on the pooled row
        own = _gating_limits(idx, attr, "unprivileged", m, limits)
        pooled = (" (pooled, does not gate)" if not own and _per_group(idx, attr, m, limits)
                  else "")
        heads.append({**r, "_label": metric_label(m) + pooled, "_limits": own})
    entries = _chart_entries(heads, names)
    if entries:
        short = {k: v if len(v) <= 24 else k for k, v in names.items()}
        chart = _interval_chart(
            entries, title=f"{attr}: {short.get('unprivileged', 'unprivileged')} − "
                           f"{short.get('privileged', 'privileged')}",
            level=level, fair=0.0, xlim=xlim,
            xlabel=f"difference, unprivileged − privileged ({level} CI)",
        )
    between = [
        {"label": metric_label(m), "value": _value(r), "ci": _ci(r, signed=False)}
        for m in ("between_group_gei", "between_group_theil")
        if (r := idx.get((attr, "all", m))) is not None
    ]
    comparisons = _comparison_table(idx, attr, "unprivileged", names, limits)
    headline = _headline_table(idx, attr, names, limits)
    return {
        "name": attr,
        "slug": "group-" + "".join(c if c.isalnum() else "-" for c in attr.lower()),
        "names": names,
        "n_priv": n_of.get("privileged"), "n_unpriv": n_of.get("unprivileged"),
        "failed": [r.get("detail") for r in failed],
        "verdict": _attribute_verdict(attr, idx, level, names.get("unprivileged"),
                                      limited=bool(limits)) if not failed else None,
        "chart": chart,
        "headline": headline,
        "n_disadv": sum(1 for m in comparisons if m["side"]),
        "comparisons": comparisons,
        "rates": _rate_table(idx, attr, groups, names, n_of) if groups else None,
        "by_value": _value_table(idx, attr, values, n_of) if values else None,
        "value_chart": _value_chart(cidx, attr, values, level, xlim, limits) if values else None,
        "between": between,
    }


def _sizes_from(ctx: Any, outcome: AuditOutcome) -> dict[str, Any]:
    """Group sizes and privileged values per attribute from the run's prepared table."""
    out: dict[str, Any] = {}
    for a in getattr(getattr(ctx, "prepared", None), "attributes", None) or []:
        out[a.name] = {"values": dict(a.values), "privileged": list(a.privileged_values)}
    return out


def _limits_from(ctx: Any) -> list[dict[str, Any]]:
    rules = getattr(getattr(getattr(ctx, "config", None), "limits", None), "rules", None)
    return [r.model_dump() for r in rules or []]


def _comparison_view(comparison: list[Mapping[str, Any]], attr: str) -> list[dict[str, Any]]:
    """The headline metrics of ``attr``'s pooled comparison, challenger against baseline."""
    import json

    out = []
    for m in HEADLINE_METRICS:
        r = next((x for x in comparison if x.get("attribute") == attr and x.get("metric") == m
                  and x.get("group") == "unprivileged"), None)
        if r is None:
            continue
        p = json.loads(r.get("params") or "{}")
        w, lo, hi = p.get("worse"), p.get("worse_lower"), p.get("worse_upper")
        word = ("further from parity" if lo is not None and lo > 0 else
                "closer to parity" if hi is not None and hi < 0 else
                "no difference beyond noise")
        # the one signed comparison quantity: the change in distance from parity,
        # challenger minus baseline (fairspark.metrics._core.distance_from_parity), with
        # its own paired interval: the size lies inside it
        reading = (f"{fmt_number(w, signed=True)} [{fmt_number(lo, signed=True)}, "
                   f"{fmt_number(hi, signed=True)}]: {word}" if w is not None else word)
        out.append({"label": metric_label(m), "challenger": fmt_number(p.get("challenger")),
                    "baseline": fmt_number(p.get("baseline")),
                    "difference": _value(r, signed=True), "ci": _ci(r, signed=True),
                    "reading": reading, "status": r.get("status") or "ok"})
    return out


def group_section(
    rows: list[Mapping[str, Any]], *, ci_level: float, min_group_size: int,
    sizes: Mapping[str, Any] | None = None, limits: list[Mapping[str, Any]] | None = None,
    comparison: list[Mapping[str, Any]] | None = None,
    checks: list[Mapping[str, Any]] | None = None, check_level: str | None = None,
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
    sizes:
        Per attribute ``{"values": {value: rows}, "privileged": [values]}`` (the shape
        of ``summary.json`` ``rows.attributes``): real group names and sizes in tables.
    limits:
        The configured limit rules (``limits.rules`` as dicts), drawn on the charts.
    comparison:
        With ``columns.baseline``: the paired-difference rows; per attribute a table of
        the headline metrics, challenger against baseline, follows the headline table.
    checks:
        The run's limit check rows (``audit = limits``): on the charts, a row a gating
        check judges is drawn with the interval its verdict uses (Holm-adjusted under
        the default correction; :func:`check_intervals`), named in the legend; the
        tables keep the audit's own intervals.
    check_level:
        The limits' level (``1 - limits.alpha``, e.g. ``95%``), for those labels.

    Returns
    -------
    ReportSection
        A disparate-impact chart of every attribute with the four-fifths band; per
        attribute the verdict, the headline comparisons ranked by whom a clear gap
        disadvantages (with a chart on one x-range shared by all attributes and the
        configured limits), rates per group with their sizes, the multi-valued
        comparisons, and every other comparison folded away; then the overall
        inequality indices.
    """
    rows = [dict(r) for r in rows if r.get("audit", "group") == "group" and unpaired(r)]
    level = _level_pct(ci_level)
    idx = _index(rows)
    cidx = _with_check_intervals(idx, check_intervals(checks), check_level or level)
    names = _attributes(rows)
    limit_marks = [x for a in names for m in HEADLINE_METRICS if _signed(m)
                   for k, b in _limits_for(a, m, limits)
                   for x in ((-b, b) if k == "abs_max" else (b,))]
    shared = [r for a in names for r in _signed_headlines(cidx, a)]
    shared += [cidx.get((str(r.get("attribute")), str(r.get("group")), str(r.get("metric"))),
                        r)
               for r in rows if r.get("group") not in ("unprivileged", "privileged", "all")
               and r.get("metric") in ("statistical_parity_difference", "tpr_difference")]
    xlim = _span(shared, fair=0.0, extra=limit_marks) if shared else None
    attrs = [_attribute_view(a, rows, idx, level, sizes=sizes, limits=limits, xlim=xlim,
                             cidx=cidx)
             for a in names]
    for a in attrs:
        a["comparison"] = _comparison_view(list(comparison or []), a["name"])
    di_chart = _di_chart(cidx, names, {a["name"]: a["names"] for a in attrs}, level, limits)
    overall = [
        {"label": metric_label(m), "value": _value(r),
         "ci": _ci(r, signed=False), "status": r.get("status") or "ok",
         "detail": r.get("detail") or ""}
        for m in ("gei", "theil") if (r := idx.get(("*", "all", m))) is not None
    ]
    n_inc = sum(1 for r in rows if r.get("status") == Status.INCONCLUSIVE)
    html = render_template(
        "fairspark.group", "section.html.j2",
        attrs=attrs, overall=overall, level=level, min_group_size=min_group_size,
        n_inconclusive=n_inc, di_chart=di_chart,
        adjusted=sorted({n for _, _, n in check_intervals(checks).values()}),
        check_level=check_level or level,
    )
    return ReportSection(title="Group fairness metrics", html=html, order=10)


def render(outcome: AuditOutcome, *, ctx: Any = None, params: Any = None) -> list[ReportSection]:
    """The spec's renderer: the group section from the audit's :class:`GroupResult`."""
    res = outcome.result
    if res is None:
        return []
    alpha = getattr(getattr(getattr(ctx, "config", None), "limits", None), "alpha", None)
    return [group_section(res.rows, ci_level=res.ci_level, min_group_size=res.min_group_size,
                          sizes=_sizes_from(ctx, outcome), limits=_limits_from(ctx),
                          comparison=getattr(res, "comparison", None),
                          checks=list(getattr(ctx, "limit_rows", None) or ()),
                          check_level=_level_pct(1.0 - alpha) if alpha is not None else None)]
