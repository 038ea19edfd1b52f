"""The group audit's report in words: names, numbers as printed, verdicts, headlines.

:func:`metric_label` names a metric for a reader; the number helpers print a value and
its interval with as many decimals as tell them apart (a printed value always lies
inside its printed interval); :func:`_attribute_verdict` says per attribute what the
intervals show (a gap and its direction, no clear difference, the four-fifths rule);
:func:`headlines` gives those verdicts for the top of the report.
:mod:`fairspark.group.report` draws the section from these (and re-exports them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fairspark._values import nan_to_none
from fairspark.audits.lines import row_number, signed_metric
from fairspark.constants import DEFAULT_INTERVAL_LEVEL
from fairspark.group.decision import unpaired
from fairspark.metrics import BASELINES, CATALOGUE, RATES
from fairspark.numbers import fmt_fixed, fmt_level, fmt_setting
from fairspark.run_summary import as_run_summary

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.run_summary import RunSummary

__all__ = ["headlines", "metric_label"]


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
#: +1: a higher rate benefits the person (more favourable decisions, more of the deserved
#: ones); -1: a higher rate harms; 0: no side (precision-type rates, the label's base rate)
_BENEFIT = {"selection_rate": 1, "tpr": 1, "fpr": 1, "fnr": -1, "tnr": -1, "accuracy": 1,
            "error_rate": -1}


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
    return nan_to_none(x)


def _fair(metric: str) -> float | None:
    spec = CATALOGUE.get(metric) or BASELINES.get(metric)
    return spec.fair_value if spec else None


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{fmt_fixed(100 * x, 1)}%"


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


def _ci(row: Mapping[str, Any], *, signed: bool | None = None) -> str:
    """A row's interval as printed (and marked) everywhere (:func:`row_number`)."""
    lo, hi = _num(row.get("lower")), _num(row.get("upper"))
    if lo is None or hi is None:
        return "–"
    lo_s, hi_s = (row_number(row, s, signed=signed) for s in ("ci_low", "ci_high"))
    return f"[{lo_s}, {hi_s}]"


def _value(row: Mapping[str, Any], *, signed: bool | None = None) -> str:
    """A row's value at the precision its interval is printed with (:func:`row_number`)."""
    return row_number(row, "value", signed=signed)


def _signed(metric: str) -> bool:
    return signed_metric(metric)


def _index(rows: list[Mapping[str, Any]]) -> dict[tuple[str, str, str], Mapping[str, Any]]:
    return {(str(r.get("attribute")), str(r.get("group")), str(r.get("metric"))): r for r in rows}


def _attributes(rows: list[Mapping[str, Any]]) -> list[str]:
    return [a for a in dict.fromkeys(str(r.get("attribute")) for r in rows) if a != "*"]


def _level_pct(ci_level: float) -> str:
    return fmt_level(ci_level)


def _benefit(metric: str) -> int:
    """The sign that says which side a signed comparison favours (0: no side)."""
    if metric in ("statistical_parity_difference", "disparate_impact"):
        return 1
    if metric == "average_odds_difference":
        return 1
    for kind in ("_difference", "_ratio"):
        if metric.endswith(kind):
            return _BENEFIT.get(metric[: -len(kind)], 0)
    return 0


def _disadvantaged(row: Mapping[str, Any], names: Mapping[str, str]) -> str | None:
    """Which group a clear gap disadvantages ("unprivileged" / "privileged"), else None."""
    kind, _ = _reading(row)
    sign = _benefit(str(row.get("metric")))
    v, fair = _num(row.get("value")), _fair(str(row.get("metric")))
    if kind != "gap" or not sign or v is None or fair is None:
        return None
    return "unprivileged" if (v - fair) * sign < 0 else "privileged"


def _side_words(side: str | None, names: Mapping[str, str], row: Mapping[str, Any]) -> str:
    if side is None:
        kind, _ = _reading(row)
        return "a gap, no side (precision-type rate)" if kind == "gap" else ""
    who = names.get(side) or ""
    return f"{side} ({who})" if who and len(who) <= 24 else side


def _group_names(attr: str, sizes: Mapping[str, Any] | None) -> dict[str, str]:
    """privileged / unprivileged -> their real values (``Male``; ``Female``)."""
    a = (sizes or {}).get(attr) or {}
    priv = [str(v) for v in a.get("privileged") or []]
    others = [str(v) for v in (a.get("values") or {}) if str(v) not in priv]
    out = {}
    if priv:
        out["privileged"] = ", ".join(priv)
    if others:
        out["unprivileged"] = ", ".join(others[:3]) + (f" and {len(others) - 3} more"
                                                       if len(others) > 3 else "")
    return out


def _group_sizes(attr: str, sizes: Mapping[str, Any] | None) -> dict[str, int]:
    """privileged / unprivileged / each value -> audited rows."""
    a = (sizes or {}).get(attr) or {}
    values = {str(k): int(v or 0) for k, v in (a.get("values") or {}).items()}
    priv = {str(v) for v in a.get("privileged") or []}
    out = dict(values)
    if values:
        out["privileged"] = sum(n for v, n in values.items() if v in priv)
        out["unprivileged"] = sum(n for v, n in values.items() if v not in priv)
    return out


def _limits_for(attr: str, metric: str, limits: list[Mapping[str, Any]] | None
                ) -> list[tuple[str, float]]:
    """(kind, bound) of every configured limit on ``metric`` for ``attr``."""
    out = []
    for rule in limits or []:
        if rule.get("metric") != metric or rule.get("audit") not in (None, "group"):
            continue
        if rule.get("attribute") not in (None, attr):
            continue
        for kind in ("min", "max", "abs_max"):
            if rule.get(kind) is not None and (kind, float(rule[kind])) not in out:
                out.append((kind, float(rule[kind])))
    return out


def _limit_words(bounds: list[tuple[str, float]]) -> str:
    words = {"min": "≥ {}", "max": "≤ {}", "abs_max": "|x| ≤ {}"}
    return "; ".join(words[k].format(fmt_setting(b)) for k, b in bounds)


# ------------------------------------------------------------------------- verdicts


def _pooled_words(attr: str, idx: Mapping[tuple[str, str, str], Mapping[str, Any]],
                  limited: bool) -> str:
    """``pooled over its 4 unprivileged values, `` where the attribute has several (the
    limits then judge each value against the reference, never this pooled number)."""
    values = {g for (a, g, m) in idx if a == attr and m == "disparate_impact"} - {
        "unprivileged", "privileged", "all", "None"}
    if not values:
        return ""
    return (f"pooled over its {len(values)} unprivileged values (a limit on {attr} judges "
            "each value against the reference, not this pooled number), " if limited
            else f"pooled over its {len(values)} unprivileged values, ")


def _attribute_verdict(attr: str, idx: Mapping[tuple[str, str, str], Mapping[str, Any]],
                       level: str, unpriv_name: str | None, *, full: bool = True,
                       limited: bool = False) -> str:
    """One attribute's verdict; ``full=False`` keeps selection, DI and equal opportunity.

    ``limited``: the run has limits (an attribute with several unprivileged values is
    then judged per value, and its pooled disparate impact says it does not gate).
    Long on purpose: one table of verdict wordings, kept together so they read as one text.
    """
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
                         f"difference {_value(spd, signed=True)}, {level} CI "
                         f"{_ci(spd, signed=True)})")
        elif kind == "nogap":
            parts.append(f"selection rates show no clear difference ({rates}; {level} CI "
                         f"{_ci(spd, signed=True)} includes 0)")
        elif kind == "inconclusive":
            parts.append(f"selection rates are inconclusive ({spd.get('detail')})")
    di = idx.get((attr, "unprivileged", "disparate_impact"))
    if di is not None and (di.get("status") or "ok") == "ok":
        v, hi = _num(di.get("value")), _num(di.get("upper"))
        pooled = _pooled_words(attr, idx, limited)
        if v is not None and v < _FOUR_FIFTHS:
            clear = hi is not None and hi < _FOUR_FIFTHS
            sure = " even at the top of its interval" if clear else ""
            parts.append(f"{pooled}disparate impact {_value(di)} is below the four-fifths "
                         f"threshold (0.8){sure}")
        elif v is not None and v > 1 / _FOUR_FIFTHS:
            parts.append(f"{pooled}disparate impact {_value(di)} favours the unprivileged "
                         "group beyond the four-fifths rule (above 1.25)")
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
            parts.append(f"{words}: {side} for the unprivileged group by {fmt_fixed(abs(v), 3)} "
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


def _unpriv_names(summary: RunSummary | None) -> dict[str, str]:
    out: dict[str, str] = {}
    attrs = summary.rows.attributes if summary is not None else {}
    for name, a in attrs.items():
        priv = set(map(str, a.privileged or []))
        others = [str(v) for v in (a.values or {}) if str(v) not in priv]
        if others and a.kind != "predicate":
            out[name] = ", ".join(others[:3]) + (f" and {len(others) - 3} more"
                                                 if len(others) > 3 else "")
    return out


def headlines(rows: list[Mapping[str, Any]], *,
              summary: RunSummary | Mapping[str, Any] | None = None,
              ci_level: float | None = None) -> list[str]:
    """One verdict in words per audited attribute (binary view), for the report's top.

    Short form (selection rates, disparate impact, equal opportunity and the count of
    inconclusive comparisons); the section repeats it with average odds and predictive
    parity. A gap is called clear only when its interval excludes the fair value.
    ``summary`` is the run's :class:`~fairspark.run_summary.RunSummary` (or a parsed
    ``summary.json``): the group audit's interval level, the unprivileged values and
    whether limits are configured.
    """
    rows = [r for r in rows if r.get("audit", "group") == "group" and unpaired(r)]
    run = as_run_summary(summary) if summary is not None else None
    if ci_level is None:
        group = run.audits.get("group") if run is not None else None
        level = group.interval_level if group is not None else None
        ci_level = level if level is not None else DEFAULT_INTERVAL_LEVEL
    idx = _index(rows)
    names = _unpriv_names(run)
    limited = run is not None and run.limits is not None
    return [_attribute_verdict(a, idx, _level_pct(ci_level), names.get(a), full=False,
                               limited=limited) for a in _attributes(rows)]
