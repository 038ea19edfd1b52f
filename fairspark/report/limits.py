"""The report's Limits section: every limit check, its verdict and its words, and the
limit headlines of the decision box."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from markupsafe import escape

from fairspark.audits.base import ReportSection
from fairspark.audits.lines import fmt_plain, num, row_number
from fairspark.numbers import fmt_setting, format_number
from fairspark.run_summary import RunSummary, as_run_summary
from fairspark.status import Verdict, limit_row_counts

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping

    from fairspark.audits.spec import AuditSpec
    from fairspark.nightly.gating import Check

__all__ = ["headlines", "how_in_words", "interval_words", "limits_section"]


def _would_gate(params: dict[str, Any]) -> bool:
    """A limit row's "violated for its required runs in a row" (older runs: ``gates``)."""
    return bool(params.get("would_gate", params.get("gates")))


def _row_params(r: dict[str, Any]) -> dict[str, Any]:
    try:
        return json.loads(r.get("params") or "{}")
    except (TypeError, ValueError):
        return {}


def headlines(rows: list[dict[str, Any]], *,
              summary: RunSummary | Mapping[str, Any]) -> list[str]:
    """Verdicts in words for the limits (used by the report's summary)."""
    out = []
    checks = [r for r in rows if r.get("audit") == "limits"
              and _row_params(r).get("role", "gate") == "gate"]
    if not checks:
        return out
    failing = as_run_summary(summary).fails_on_violation()
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
    n = limit_row_counts(checks)  # the one count (summary.json, banner, box, CLI)
    out.append(f"{n['checks']} limit check(s): {n['violated']} violated, {n['passed']} "
               f"passed, {n['inconclusive']} inconclusive (the "
               f"{interval_words(checks[0])} straddles the limit).")
    return out


def interval_words(r: dict[str, Any]) -> str:
    """``Holm-adjusted interval`` etc.: what a limit row's interval is (older: ``interval``)."""
    label = _row_params(r).get("interval")
    return f"{label} interval" if label else "interval"


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {format_number(p, digits=2)}"


def _side(rule: Any, value: float | None) -> str:
    """Which side of the limit the value lies on, in words."""
    if value is None:
        return "the limit"
    if rule.no_worse_than_baseline is not None:
        margin = fmt_setting(rule.no_worse_than_baseline.margin)
        return (f"the margin {margin} (how much further from parity than the baseline the "
                "challenger may be)")
    if rule.abs_max is not None:
        return f"the limit ±{fmt_setting(rule.abs_max)}"
    if rule.max is not None and (rule.min is None or value > rule.max):
        return f"the maximum {fmt_setting(rule.max)}"
    return f"the minimum {fmt_setting(rule.min)}"


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
    lvl = f" at alpha {fmt_setting(alpha)}" if alpha is not None else ""
    from fairspark.nightly.gating import interval_label

    iv = (interval_label(check.kind, check.role, correction or "none")
          + (f" interval [{row_number(row, 'ci_low')}, {row_number(row, 'ci_high')}]"
             if row is not None else
             f" interval [{fmt_plain(check.lower_adj)}, {fmt_plain(check.upper_adj)}]"))
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
    from fairspark.nightly.worst import rankable, support_words

    size = support_words(r)
    if not size or role == "pooled" or r.get("group") in (None, "unprivileged", "all"):
        return ""
    flag = "; too small to rank" if not rankable(r) else ""
    return f"<br><span class='small'>{escape(size + flag)}</span>"


def _worst_groups(checks: list[Check], rows: list[dict[str, Any]],
                  specs: Mapping[str, AuditSpec]) -> list[str]:
    """One sentence per (rule, attribute) judged per group: the worst group named.

    Ranked by :mod:`fairspark.nightly.worst` on the limits rows (the interval each
    verdict uses): verdict, then the interval's bound nearest the limit, among the
    groups large enough to rank; the others are listed as too small to rank.
    """
    from fairspark.audits.lines import short_metric
    from fairspark.nightly.gating import rule_text
    from fairspark.nightly.worst import rank_key, rankable, support_words

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
            what = short_metric(str(r["metric"]))
            if c.rule.no_worse_than_baseline is not None:  # its value is "worse", not M
                what += ": change in distance from parity (challenger − baseline)"
            text += (f"worst {r['group']}" + (f" ({size})" if size else "")
                     + f": {what} {row_number(r)} "
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
    # a no-worse check reads the paired row's "worse", not its value: not marked as
    # that row's interval (its ends are not the row's lower / upper)
    worse = c is not None and c.rule.no_worse_than_baseline is not None
    if raw[0] is not None and not worse and (num(src.get("lower")), num(src.get("upper"))) == (
            num(raw[0]), num(raw[1])):
        return f"[{row_number(src, 'ci_low')}, {row_number(src, 'ci_high')}]"
    return f"[{fmt_plain(raw[0])}, {fmt_plain(raw[1])}]"


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

    from fairspark.nightly.worst import bound_excess, rankable

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
