"""Report sections of the nightly features: limits (at the top) and run-over-run trends."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import pandas as pd
from markupsafe import escape

from fairspark._values import nan_to_none
from fairspark.audits.base import ReportSection
from fairspark.audits.lines import num, row_number, row_text
from fairspark.nightly.trend_groups import breached as _breached
from fairspark.nightly.trend_groups import (
    limit_excess,  # noqa: F401 - its old home: imported from here too
    limit_lines,
    pooled_superseded,
    worst_group_series,
)
from fairspark.status import Verdict

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping

    from fairspark.audits.spec import AuditSpec
    from fairspark.nightly.gating import Check

__all__ = ["badness", "fair_value", "headlines", "limits_section", "no_history_section",
           "trend_frame", "trend_section"]

_MAX_SERIES = 24


def _fmt(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return f"{x:.4g}"


def _would_gate(params: dict[str, Any]) -> bool:
    """A limit row's "violated for its required runs in a row" (older runs: ``gates``)."""
    return bool(params.get("would_gate", params.get("gates")))


def _row_params(r: dict[str, Any]) -> dict[str, Any]:
    try:
        return json.loads(r.get("params") or "{}")
    except (TypeError, ValueError):
        return {}


def headlines(rows: list[dict[str, Any]], *, summary: dict[str, Any]) -> list[str]:
    """Verdicts in words for the limits (used by the report's summary)."""
    out = []
    checks = [r for r in rows if r.get("audit") == "limits"
              and _row_params(r).get("role", "gate") == "gate"]
    if not checks:
        return out
    lim = summary.get("limits") or {}
    failing = bool(lim.get("fail_on_violation", summary.get("exit_code") == 3))
    gating = [r for r in checks if _would_gate(_row_params(r))]
    violated = [r for r in checks if r["status"] == Verdict.VIOLATED]
    for r in gating:
        word = "gates the run" if failing else "would gate; failing on a violation is off"
        out.append(f"LIMIT VIOLATED ({word}): {r['metric_b']} for {r['attribute']}"
                   f"{' / ' + str(r['group']) if r.get('group') else ''} "
                   f"(value {row_number(r)}, {interval_words(r)} "
                   f"[{row_number(r, 'ci_low')}, {row_number(r, 'ci_high')}]).")
    waiting = [r for r in violated if r not in gating]
    if waiting:
        out.append(f"{len(waiting)} limit(s) violated but not yet for the configured number "
                   "of consecutive runs.")
    n_pass = sum(r["status"] == Verdict.PASSED for r in checks)
    n_inc = sum(r["status"] == Verdict.INCONCLUSIVE for r in checks)
    out.append(f"{len(checks)} limit check(s): {len(violated)} violated, {n_pass} passed, "
               f"{n_inc} inconclusive (the {interval_words(checks[0])} straddles the limit).")
    return out


def interval_words(r: dict[str, Any]) -> str:
    """``Holm-adjusted interval`` etc.: what a limit row's interval is (older: ``interval``)."""
    label = _row_params(r).get("interval")
    return f"{label} interval" if label else "interval"


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def _side(rule: Any, value: float | None) -> str:
    """Which side of the limit the value lies on, in words."""
    if value is None:
        return "the limit"
    if rule.abs_max is not None:
        return f"the limit ±{rule.abs_max:g}"
    if rule.max is not None and (rule.min is None or value > rule.max):
        return f"the maximum {rule.max:g}"
    return f"the minimum {rule.min:g}"


def how_in_words(check: Check, *, correction: str | None = None,
                 n_statistical: int | None = None, alpha: float | None = None,
                 row: Mapping[str, Any] | None = None) -> str:
    """A limit check's verdict explained in words (the limits table's "how" column).

    E.g. *"the whole Holm-adjusted interval [0.12, 0.2] is beyond the limit ±0.1
    (p < 0.001, Holm-adjusted over 6 checks)"*, *"cannot tell: the Holm-adjusted
    interval [0.7, 0.85] straddles the minimum 0.8 (p = 0.21 for beyond, p = 0.4 for
    within, Holm-adjusted; neither is significant at alpha 0.05)"*, or for
    HFM *"the whole certified interval is beyond the maximum 0.5"*. Persistence is
    added: *"violated 1 run in a row, gates from 2"*. With ``row`` (the check's limits
    row) the interval is printed as that row's everywhere else in the report.
    """
    v = check.row.get("value")
    side = _side(check.rule, v if isinstance(v, int | float) else None)
    corr = {"holm": "Holm-adjusted", "bh": "Benjamini-Hochberg-adjusted",
            "none": "not adjusted"}.get(correction or "", "")
    over = (f" over {n_statistical} check{'s' if n_statistical != 1 else ''}"
            if corr and correction != "none" and n_statistical else "")
    adj = f", {corr}{over}" if corr else ""
    lvl = f" at alpha {alpha:g}" if alpha is not None else ""
    from fairspark.nightly.gating import interval_label

    iv = (interval_label(check.kind, check.role, correction or "none")
          + (f" interval [{row_number(row, 'ci_low')}, {row_number(row, 'ci_high')}]"
             if row is not None else
             f" interval [{_fmt(check.lower_adj)}, {_fmt(check.upper_adj)}]"))
    if check.role == "pooled":
        pv, pp = _p(check.p_violated), _p(check.p_passed)
        return (f"the pooled view of every unprivileged value together, shown for "
                f"comparison: {check.verdict} ({pv} for beyond {side}, {pp} for within, not "
                "adjusted); it does not gate, each group against the reference does")
    if check.kind == "bounds":
        text = {Verdict.VIOLATED: f"the whole certified interval is beyond {side}",
                Verdict.PASSED: f"the whole certified interval is within {side}",
                }.get(check.verdict, f"cannot tell: the certified interval straddles {side}")
        text += " (exact bounds, not a statistical test)"
    elif check.verdict == Verdict.VIOLATED:
        text = f"the whole {iv} is beyond {side} ({_p(check.p_violated)}{adj})"
    elif check.verdict == Verdict.PASSED:
        text = f"the whole {iv} is within {side} ({_p(check.p_passed)}{adj})"
    else:
        text = (f"cannot tell: the {iv} straddles {side} ({_p(check.p_violated)} for "
                f"beyond, {_p(check.p_passed)} for within{adj}; neither is significant{lvl})")
    if check.verdict == Verdict.VIOLATED:
        n, need = check.consecutive, check.rule.persistence
        text += (f"; violated {n} run{'s' if n != 1 else ''} in a row"
                 + ("" if need == 1 else f", gates from {need}"))
    return text


def _group_label(r: dict[str, Any], role: str) -> str:
    g = str(r.get("group") or "")
    return "all unprivileged pooled (extra view)" if role == "pooled" else g


def _size_note(r: dict[str, Any], role: str) -> str:
    """A group cell's size (``n 800, 120 favourable``), flagged when too small to rank."""
    from fairspark.report.worst import rankable, support_words

    size = support_words(r)
    if not size or role == "pooled" or r.get("group") in (None, "unprivileged", "all"):
        return ""
    flag = "; too small to rank" if not rankable(r) else ""
    return f"<br><span class='small'>{escape(size + flag)}</span>"


def _worst_groups(checks: list[Check], rows: list[dict[str, Any]],
                  specs: Mapping[str, AuditSpec]) -> list[str]:
    """One sentence per (rule, attribute) judged per group: the worst group named.

    Ranked by :mod:`fairspark.report.worst` on the limits rows (the interval each
    verdict uses): verdict, then the interval's bound nearest the limit, among the
    groups large enough to rank; the others are listed as too small to rank.
    """
    from fairspark.audits.lines import short_metric
    from fairspark.nightly.gating import rule_text
    from fairspark.report.worst import rank_key, rankable, support_words

    per_group = {n for n, s in specs.items() if s.limits_per_group}
    by: dict[tuple[str, str], list[tuple[Check, dict[str, Any]]]] = {}
    for c, r in zip(checks, rows, strict=False):
        if c.role == "gate" and c.row.get("audit") in per_group and c.row.get("group") not in (
                None, "unprivileged"):
            by.setdefault((rule_text(c.rule), str(c.row["attribute"])), []).append((c, r))
    out = []
    for (rule, attr), cs in by.items():
        ranked = [t for t in cs if rankable(t[1])]
        small = [t for t in cs if not rankable(t[1])]
        n_v = sum(c.verdict == Verdict.VIOLATED for c, _ in cs)
        text = f"{attr}: {rule} checked on each of {len(cs)} group(s) against the reference; "
        if ranked:
            c, r = min(ranked, key=lambda t: rank_key(t[1], t[0].rule))
            size = support_words(r)
            text += (f"worst {r['group']}" + (f" ({size})" if size else "")
                     + f": {short_metric(str(r['metric']))} {row_number(r)} "
                     f"[{row_number(r, 'ci_low')}, {row_number(r, 'ci_high')}], "
                     f"{c.verdict}; ")
        else:
            text += "no group large enough to rank; "
        text += f"{n_v} of {len(cs)} violated."
        if small:
            text += " Too small to rank: " + ", ".join(
                f"{r['group']} ({support_words(r)}, {c.verdict})" for c, r in small) + "."
        out.append(text)
    return out





#: the Limits section's opening paragraph: how a verdict is reached
_LIMITS_INTRO = (
    "<p>Each limit is judged on the uncertainty of its number: the confidence interval "
    "(group metrics), the certified interval (HFM) or the band over splits (mdfa). "
    "The interval printed beside a verdict is the one the verdict uses: under a "
    "multiple-testing correction (Holm or Benjamini-Hochberg) it is the "
    "<b>adjusted</b> interval, each end at the per-check level the correction used "
    "for the test it decides, labelled so; without a correction it is the interval at "
    "the test's own level (alpha, split over the two sides of a two-sided limit). The "
    "audit's own interval (its configured level, not adjusted) is beside it. "
    "<em>Violated</em> means the interval the verdict uses lies wholly beyond the "
    "limit, <em>passed</em> wholly within, <em>inconclusive</em> that it straddles the "
    "limit. On an attribute "
    "with several unprivileged values (and on intersections) a group limit is checked "
    "on <b>each group against the reference</b> (privileged) group, and every such "
    "comparison counts in the multiple-testing correction; the pooled view of all "
    "unprivileged values together is an extra row that does not gate.</p>"
)


def _own_interval(r: dict[str, Any], c: Check | None) -> str:
    """A limits row's "audit's own interval" cell: its source row's interval, printed as
    that row prints everywhere (the group section shows it too)."""
    raw = _row_params(r).get("own_interval") or [None, None]
    src = c.row if c is not None else {}
    if raw[0] is not None and (num(src.get("lower")), num(src.get("upper"))) == (
            num(raw[0]), num(raw[1])):
        return f"[{row_number(src, 'ci_low')}, {row_number(src, 'ci_high')}]"
    return f"[{_fmt(raw[0])}, {_fmt(raw[1])}]"


def limits_section(checks: list[Check], rows: list[dict[str, Any]],
                   unmatched: list[str], *, specs: Mapping[str, AuditSpec],
                   limits: Any = None, fail_on_violation: bool | None = None
                   ) -> ReportSection:
    """A table of every limit check, violated ones first, the "how" said in words.

    Parameters
    ----------
    checks, rows:
        :func:`~fairspark.nightly.gating.evaluate_limits`'s checks and their result rows
        (as dicts), in the same order.
    unmatched:
        Messages for rules that matched no row.
    limits:
        ``config.limits`` (correction and alpha, for the words); optional.
    fail_on_violation:
        Whether a violation fails the run (``gates``) or not (``would gate``); default
        ``limits.fail_on_violation``.
    """
    from fairspark.nightly.gating import gate_word

    if fail_on_violation is None:
        fail_on_violation = bool(getattr(limits, "fail_on_violation", True))
    order = {Verdict.VIOLATED: 0, Verdict.INCONCLUSIVE: 1, Verdict.PASSED: 2}
    n_stat = sum(1 for c in checks if c.kind == "statistical" and c.role == "gate")
    by_row = {id(r): c for c, r in zip(checks, rows, strict=False)}
    body = []

    from fairspark.report.worst import bound_excess, rankable

    def key(r: dict[str, Any]) -> tuple:
        c = by_row.get(id(r))
        pooled = c is not None and c.role == "pooled"
        # worst group first: the interval's bound nearest the limit, too small last
        ex = bound_excess(r, c.rule) if c is not None else 0.0
        return (pooled, order.get(r["status"], 3), r["attribute"], not rankable(r), -ex)

    for r in sorted(rows, key=key):
        c = by_row.get(id(r))
        role = c.role if c is not None else "gate"
        word = gate_word(r["status"], would_gate=bool(c and c.would_gate),
                         consecutive=c.consecutive if c else 0,
                         persistence=c.rule.persistence if c else 1,
                         fail_on_violation=fail_on_violation, role=role)
        cls = ("muted" if role == "pooled" else "bad" if r["status"] == Verdict.VIOLATED
               else "warn" if r["status"] == Verdict.INCONCLUSIVE else "good")
        how = (how_in_words(c, correction=getattr(limits, "correction", None),
                            n_statistical=n_stat, alpha=getattr(limits, "alpha", None),
                            row=r)
               if c is not None else r.get("detail") or "")
        verdict = f"<b>{escape(r['status'])}</b>" + (f" ({escape(word)})" if word else "")
        label = str(_row_params(r).get("interval") or "")
        raw_cell = _own_interval(r, c)
        body.append(
            f"<tr class='{cls}'><td>{escape(r['metric_b'])}</td><td>{escape(r['attribute'])}"
            f"</td><td>{escape(_group_label(r, role))}{_size_note(r, role)}</td>"
            f"<td>{row_number(r)}</td>"
            f"<td>[{row_number(r, 'ci_low')}, {row_number(r, 'ci_high')}]"
            + (f" <span class='small'>{escape(label)}</span>" if label else "") + "</td>"
            f"<td class='small'>{raw_cell}</td>"
            f"<td>{verdict}</td><td class='small'>{escape(how)}</td></tr>")
    miss = "".join(f"<li>{escape(m)}</li>" for m in unmatched)
    worst = "".join(f"<li>{escape(w)}</li>" for w in _worst_groups(checks, rows, specs))
    html = (
        _LIMITS_INTRO
        + (f"<ul class='worst'>{worst}</ul>" if worst else "")
        + "<div class='tablewrap'><table class='metrics'><caption>Every limit check, "
        "violated first, worst group first: the number, its interval, the verdict "
        "(✖ violated, ? inconclusive, ✔ passed; <em>gates</em> = this violation fails the "
        "run, <em>would gate</em> = it would if failing on a violation were on) and how "
        "the verdict was reached, in words.</caption>"
        "<thead><tr><th>limit</th><th>attribute</th><th>group</th>"
        "<th>value</th><th>interval the verdict uses</th><th>the audit's own interval</th>"
        "<th>verdict</th><th>how</th></tr></thead><tbody>"
        + "".join(body) + "</tbody></table></div>"
        + (f"<p class='warn'>Rules that matched nothing:</p><ul>{miss}</ul>" if miss else "")
    )
    return ReportSection(title="Limits", html=html, order=1)


def trend_frame(history: pd.DataFrame, rows: list[dict[str, Any]], *, run_date: str,
                config_hash: str, version: str, specs: Mapping[str, AuditSpec],
                schema_hash: str | None = None) -> pd.DataFrame:
    """History plus tonight's headline rows, one row per (series, run date).

    ``schema_hash`` is tonight's input schema (the history frame carries each earlier
    run's); two runs whose schema hashes differ are not compared.
    """
    now = []
    for r in rows:
        spec = specs.get(str(r.get("audit")))
        if spec is None or not spec.is_trend_row(r):
            continue
        now.append({**{k: r.get(k) for k in ("audit", "attribute", "group", "metric", "model",
                                              "value", "lower", "upper", "status")},
                    "run_date": run_date, "config_hash": config_hash,
                    "fairspark_version": version, "metric_b": r.get("metric_b"),
                    "schema_hash": schema_hash})
    cur = pd.DataFrame(now)
    hist = history[history["audit"] != "limits"] if len(history) else history
    frame = pd.concat([hist, cur], ignore_index=True) if len(hist) else cur
    if frame.empty:
        return frame
    # one series per (audit, attribute, metric, second metric, model): a correlation
    # representative names its metric in metric_b, and three of them are three series
    second = (frame["metric_b"] if "metric_b" in frame else pd.Series(None, index=frame.index))
    frame["series"] = (frame["audit"] + " · " + frame["attribute"].astype(str) + " · "
                       + frame["metric"].astype(str)
                       + second.fillna("").map(lambda m: f" · {m}" if m else "")
                       + frame["model"].fillna("").map(lambda m: f" · {m}" if m else ""))
    # where a limit is judged per group: tonight's worst group's series, with its limit
    worst = worst_group_series(history, rows, run_date=run_date, config_hash=config_hash,
                               version=version, schema_hash=schema_hash, specs=specs)
    if len(worst):
        frame = pd.concat([frame, worst], ignore_index=True)
    return frame.sort_values(["series", "run_date"]).reset_index(drop=True)


# ------------------------------------------------------------------------------ trends

#: flag -> (sort rank, words); worst first (the table's row class adds ✖ / ? / ✔)
_FLAG_ORDER: dict[str, tuple[int, str]] = {
    "worse": (0, "worse"), "changed": (1, "changed"), "better": (2, "better"),
    "within noise": (3, "within noise"), "": (4, ""),
}


def fair_value(metric: str) -> float | None:
    """The value a metric takes when nothing separates the groups (``None``: no such value).

    Differences (and mdfa's delta and gamma, HFM's df and discriminative risk DR) are
    fair at 0, ratios such as disparate impact at 1. HFM's D and D_f describe distances
    in the data and have no fair value of their own.
    """
    if metric in ("disparate_impact",) or metric.endswith("_ratio"):
        return 1.0
    if (metric.endswith("_difference") or metric in ("df", "delta", "DR")
            or metric.startswith("gamma")):
        return 0.0
    return None


def badness(metric: str, value: float | None) -> float | None:
    """How unfair ``value`` of ``metric`` is (larger = worse; ``None``: no direction).

    Distance from the fair value: ``|v|`` for differences and delta, ``|ln v|`` for
    ratios (0.5 and 2 are equally far from 1); for df, DR and gamma the value itself (a
    negative df or gamma is no separation at all, and lower is better).
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    fair = fair_value(metric)
    if fair is None:
        return None
    if metric in ("df", "DR") or metric.startswith("gamma"):
        return float(value)
    if fair == 1.0:
        return math.inf if value <= 0 else abs(math.log(value))
    return abs(float(value))


def _scale(metric: str, *xs: float | None) -> tuple[Any, str]:
    """(transform, name): ratios on the log scale when every number is positive."""
    if fair_value(metric) == 1.0 and all(x is not None and x > 0 for x in xs):
        return math.log, "log"
    return (lambda x: x), "linear"


def change_between(metric: str, a: Any, b: Any) -> tuple[str, str]:
    """(word, note) for the move of ``metric`` from run ``a`` to run ``b``.

    ``a`` and ``b`` have ``value``, ``lower``, ``upper`` (mappings or Series). The
    move is beyond noise when the difference ``b - a`` lies outside its own interval:
    ``|b - a| > sqrt(h_a^2 + h_b^2)``, with ``h`` each run's interval half-width (the
    difference of two independent estimates; ratios on the log scale). Then it is
    **worse** / **better** (further from / closer to the fair value, see
    :func:`badness`) or **changed** for a number with no fair side; otherwise **within
    noise**. Without a value: ``""``; without intervals: ``""`` with a note. The
    decision box and the trends both use this one rule and these words.
    """
    get = (lambda m, k: m.get(k)) if not isinstance(a, pd.Series) else (lambda m, k: m[k])
    va, vb = nan_to_none(get(a, "value")), nan_to_none(get(b, "value"))
    if va is None or vb is None:
        return "", "no value in one of the two runs"
    move = f"{_fmt(va)} → {_fmt(vb)}"
    ba, bb = badness(metric, va), badness(metric, vb)
    way = ("worse" if bb > ba else "better" if bb < ba else "") if (
        ba is not None and bb is not None) else ""
    fair = fair_value(metric)
    la, ua = nan_to_none(get(a, "lower")), nan_to_none(get(a, "upper"))
    lb, ub = nan_to_none(get(b, "lower")), nan_to_none(get(b, "upper"))
    if None in (la, ua, lb, ub):
        if va == vb:
            return "", f"unchanged ({_fmt(vb)}); no interval"
        what = (f"{way}: {'further from' if way == 'worse' else 'closer to'} {fair:g}"
                if way else "higher" if vb > va else "lower")
        return "", f"{what} ({move}); no interval to tell whether that is more than noise"
    if va == vb:
        return "", f"unchanged ({_fmt(vb)})"
    f, scale = _scale(metric, va, vb, la, ua, lb, ub)
    d = f(vb) - f(va)
    h = math.hypot((f(ua) - f(la)) / 2, (f(ub) - f(lb)) / 2)
    on = " on the log scale" if scale == "log" else ""
    if abs(d) <= h:
        return "within noise", (
            f"within noise ({move}; the difference {d:+.3g}{on} is inside its interval "
            f"±{h:.3g})" + (f", nominally {way}" if way else ""))
    if not way:
        return "changed", (f"{'higher' if vb > va else 'lower'} ({move}); the difference "
                           f"{d:+.3g}{on} is beyond its interval ±{h:.3g}. This number has "
                           "no better or worse side")
    return way, (f"{way}: {'further from' if way == 'worse' else 'closer to'} the fair "
                 f"value {fair:g} ({move}); the difference {d:+.3g}{on} is beyond its "
                 f"interval ±{h:.3g}, so the change is larger than the uncertainty explains")


def _flag(s: pd.DataFrame) -> tuple[str, str]:
    """(flag, note) for the last two points of one series (:func:`change_between`)."""
    if len(s) < 2:
        return "", "first run of this series"
    a, b = s.iloc[-2], s.iloc[-1]
    if a["config_hash"] != b["config_hash"] or a["fairspark_version"] != b["fairspark_version"]:
        return "", "config or fairspark version changed: not comparable with the run before"
    if _schema_changed(a, b):
        return "", ("not comparable: schema changed (the input's features differ from the "
                    "run before)")
    return change_between(str(b["metric"]), a, b)


def _schema_changed(a: pd.Series, b: pd.Series) -> bool:
    """Both runs recorded their input schema (``schema_hash``) and the two differ."""
    ha, hb = a.get("schema_hash"), b.get("schema_hash")
    return isinstance(ha, str) and isinstance(hb, str) and ha != hb


def _y_ranges(frame: pd.DataFrame, limits: dict[str, list[float]]
              ) -> dict[str, tuple[float, float]]:
    """One y-range per metric, shared by all its series (the trend plots' one rule).

    It spans every finite value and interval bound of that metric over the runs shown,
    its fair value and every limit drawn on it, plus 8% margin, so two panels of the
    same metric are read on the same scale and a tiny wobble is never blown up to fill
    a panel.
    """
    out: dict[str, tuple[float, float]] = {}
    for metric, m in frame.groupby("metric"):
        vals = pd.concat([m[c] for c in ("value", "lower", "upper")]).astype(float)
        pts = [float(v) for v in vals if math.isfinite(v)]
        fair = fair_value(str(metric))
        if fair is not None:
            pts.append(fair)
        for name in m["series"].unique():
            pts += limits.get(name, [])
        if not pts:
            continue
        lo, hi = min(pts), max(pts)
        pad = (hi - lo) * 0.08 or max(abs(hi) * 0.1, 0.01)
        out[str(metric)] = (lo - pad, hi + pad)
    return out


def _panel(ax: Any, s: pd.DataFrame, name: str, flag: str, limits: list[float],
           ylim: tuple[float, float] | None) -> None:
    x = list(range(len(s)))
    v = s["value"].astype(float)
    lo = (v - s["lower"].astype(float)).clip(lower=0).fillna(0)
    hi = (s["upper"].astype(float) - v).clip(lower=0).fillna(0)
    ax.errorbar(x, v, yerr=[lo, hi], fmt="o-", ms=3, capsize=2, lw=1, color="#2457a6")
    for i in range(1, len(s)):
        if (s.loc[i, "config_hash"] != s.loc[i - 1, "config_hash"]
                or s.loc[i, "fairspark_version"] != s.loc[i - 1, "fairspark_version"]
                or _schema_changed(s.loc[i - 1], s.loc[i])):
            ax.axvline(i - 0.5, color="#7a4f00", ls=":", lw=1.2)
    for lim in limits:
        ax.axhline(lim, color="#a8231b", ls="--", lw=1)
    fair = fair_value(str(s["metric"].iloc[0]))
    if fair is not None:
        ax.axhline(fair, color="#555", lw=0.6)
    if flag == "within noise":
        flag = ""
    if flag:
        marker = {"worse": "v", "better": "^"}.get(flag, "D")
        ax.plot([x[-1]], [v.iloc[-1]], marker, color="#a8231b" if flag == "worse" else "#1f6e3a"
                if flag == "better" else "#7a4f00", ms=9)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_title(name + (f" ({flag})" if flag else ""), fontsize=9, wrap=True)
    ax.set_xticks(x)
    ax.set_xticklabels([str(d)[5:] for d in s["run_date"]], rotation=45)
    ax.set_ylabel(str(s["metric"].iloc[0]))


def no_history_section(*, config_hash: str | None = None) -> ReportSection:
    """The trends section of a run that has no earlier published run to compare with."""
    html = ("<p><b>No previous runs.</b> This is the first run published at this output "
            "location (or earlier runs could not be read), so there is nothing to compare "
            "with yet. From the next run on, this section draws every headline number over "
            "the run dates and says whether it got better or worse"
            + (f"; runs are comparable while their config hash stays {escape(config_hash)}"
               if config_hash else "") + ".</p>")
    return ReportSection(title="Trends over previous runs", html=html, order=2)


def _trend_figure(frame: pd.DataFrame, drawn: list[tuple], info: list[tuple]) -> str:
    """The small multiples of the drawn series as a ``<figure>`` with its caption.

    Each panel is its own image in a grid that wraps (``.trend-panels``): three or more
    across on a wide screen, one under the other on a phone, each at a readable size,
    and a title never runs into its neighbour's (long titles wrap inside their panel).
    """
    from fairspark.report.figures import figure_to_data_uri, plt

    ylim = _y_ranges(frame[frame["series"].isin([t[0] for t in drawn])],
                     {t[0]: t[4] for t in drawn})
    panels = []
    for name, s, flag, _note, lims in drawn:
        fig, ax = plt.subplots(figsize=(3.6, 2.9))
        _panel(ax, s, name, flag, lims, ylim.get(str(s["metric"].iloc[0])))
        fig.tight_layout()
        alt = (f"{name} over {s['run_date'].nunique()} run dates"
               + (f", {flag}" if flag else ""))
        panels.append(f"<img alt='{escape(alt)}' src='{figure_to_data_uri(fig)}'>")
    n_flag = sum(1 for t in info if t[2])
    label = (f"Trend panels of {len(drawn)} headline series over "
             f"{frame['run_date'].nunique()} run dates; {n_flag} flagged: "
             + (", ".join(f"{t[0]} {t[2]}" for t in info if t[2]) or "none") + ".")
    return (
        f"<figure aria-label='{escape(label)}'><div class='trend-panels'>"
        + "".join(panels) + "</div>"
        "<figcaption>Headline numbers over run dates, worst change first. Each panel: "
        "value and interval per run (blue), the fair value (grey line), the configured "
        "limits (red dashes), a dotted brown line where the config, the input schema or "
        "the fairspark version changed (not comparable across it), and a marker on "
        "tonight's point when it moved "
        "beyond the uncertainty (▼ red: worse, ▲ green: better, ◆: changed, no better side)."
        " One y-scale rule: all panels of the same metric share one range, spanning its "
        "values, intervals, fair value and limits. Where a limit is judged per group, a "
        "<em>worst group</em> panel follows tonight's worst group (the decision box's) "
        "through the earlier runs with the interval its verdict used and the limit; the "
        "pooled panel of that metric is the view that does not gate and carries no line of "
        "that limit.</figcaption></figure>"
    )


def trend_section(frame: pd.DataFrame, *, specs: Mapping[str, AuditSpec],
                  rules: list[Any] | None = None, max_panels: int = _MAX_SERIES
                  ) -> ReportSection | None:
    """Every headline series over run dates: flags, limits, one y-scale per metric.

    Parameters
    ----------
    frame:
        :func:`trend_frame` (history plus tonight).
    specs:
        Audit name -> spec (a rule without ``group`` matches an audit's series in
        its ``view_group``).
    rules:
        The configured limit rules (``LimitRule`` or dicts); the ones matching a series
        are drawn on its panel as red dashes.
    max_panels:
        Panels drawn at most; the series beyond it (the least flagged) are still in the
        table and named in an "N more" list under the figure. Nothing is dropped.

    Returns
    -------
    ReportSection or None
        The section; with fewer than two run dates, the "no previous runs" section.
    """
    if frame is None or frame.empty or frame["run_date"].nunique() < 2:
        return no_history_section()
    rules = list(rules or [])
    superseded = pooled_superseded(frame)
    info = []
    for name in dict.fromkeys(frame["series"]):
        s = frame[frame["series"] == name].reset_index(drop=True)
        flag, note = _flag(s)
        info.append((name, s, flag, note, limit_lines(rules, s.iloc[-1], specs, superseded)))
    # worst first: flag, then the limited series, then the catalogue order
    # worst first: worse, then a series beyond a configured limit tonight (a breach
    # outranks a move), then better, changed (no fair side: HFM's D), within noise
    breached = {t[0] for t in info if _breached(rules, t[1].iloc[-1], specs, superseded)}
    info.sort(key=lambda t: (0 if t[2] == "worse" else 1 if t[0] in breached
                             else 1 + _FLAG_ORDER[t[2]][0], not t[4]))
    # a series with no value in any run (e.g. DR without a model) has nothing to draw
    empty = [t for t in info if t[1]["value"].astype(float).isna().all()]
    info = [t for t in info if t not in empty] + empty
    plotted = [t for t in info if t not in empty]
    drawn, rest = plotted[:max_panels], plotted[max_panels:]
    figure = _trend_figure(frame, drawn, info) if drawn else ""
    table = []
    for name, s, flag, note, lims in info:
        last = s.iloc[-1]
        prev = s.iloc[-2] if len(s) > 1 else None
        now = last.to_dict()
        cls = {"worse": "bad", "changed": "warn", "better": "good"}.get(flag, "")
        lim = ", ".join(f"{x:g}" for x in lims) or "–"
        table.append(
            f"<tr class='{cls}'><td>{escape(name)}</td>"
            # tonight's point is tonight's row: printed (and marked) as everywhere else
            f"<td>{row_text(prev.to_dict()) if prev is not None else '–'}</td>"
            f"<td>{row_number(now)} [{row_number(now, 'ci_low')}, "
            f"{row_number(now, 'ci_high')}]</td>"
            f"<td>{lim}</td><td>{'<b>' + _FLAG_ORDER[flag][1] + '</b>' if flag else '–'}</td>"
            f"<td class='small'>{escape(note)}</td></tr>")
    more = ""
    if rest:
        more = (f"<p class='small'><b>{len(rest)} more series not drawn</b> (the table below "
                "lists every series): " + ", ".join(escape(t[0]) for t in rest) + ".</p>")
    if empty:
        more += ("<p class='small'>Not drawn, no value in any run (not computed): "
                 + ", ".join(escape(t[0]) for t in empty) + ".</p>")
    html = (
        figure
        + more
        + "<div class='tablewrap'><table class='metrics'><caption>Every headline series "
        "(nothing is dropped), worst change first: tonight against the previous run. "
        "<em>Worse</em> / <em>better</em> = further from / closer to the fair value by more "
        "than the intervals allow; the note says how it moved otherwise.</caption>"
        "<thead><tr><th>series</th><th>previous</th><th>tonight [interval]</th>"
        "<th>limits</th><th>flag</th><th>note</th></tr></thead><tbody>"
        + "".join(table) + "</tbody></table></div>"
    )
    return ReportSection(title="Trends over previous runs", html=html, order=2)
