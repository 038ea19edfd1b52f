"""The top of ``report.html``: the decision box and what was audited.

Both read only the run's :class:`~fairspark.run_summary.RunSummary` (``summary.json``)
and the long rows, so a published run re-renders.

The decision box has one line per limit check, per attribute of the hfm and mdfa
audits, per attribute of the group audit that no limit covers, and per failed audit:
a status (``violated``, ``evidence``, ``inconclusive``, ``failed``, ``passed``,
``ok``), how far the number is from its limit, the change since the previous run (when
the summary carries a ``previous`` mapping, see ``docs/report.md``) and the one thing
to look at next. Above it, one sentence says whether the run gates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from fairspark.audits.lines import (
    STATUS_ORDER,
    DecisionLine,
    fmt_number,
    num,
    row_number,
    short_metric,
)
from fairspark.audits.spec import AuditSpec, DecisionInput
from fairspark.constants import FLOAT_NOISE
from fairspark.numbers import fmt_count, fmt_fixed, fmt_setting
from fairspark.run_summary import (
    AttributeGroups,
    InputFacts,
    PreviousRun,
    RowCounts,
    RunSummary,
    as_run_summary,
)
from fairspark.status import limit_row_counts

__all__ = ["ROW_CHANGE_FRACTION", "DecisionInput", "DecisionLine", "audited_brief",
           "audited_facts", "data_differences", "decision_box", "decision_items",
           "fmt_number", "item_key", "num"]

_BAD = {"violated", "failed", "evidence"}
#: the statuses a limit check has: counted as checks (limit_row_counts), never as lines
_CHECK_STATUSES = ("violated", "inconclusive", "passed")


_num = num
_f = fmt_number


_count = fmt_count


def _readable(check: str) -> str:
    """``disparate_impact >= 0.8`` -> ``disparate impact ≥ 0.8`` (breaks at spaces)."""
    return check.replace("_", " ").replace(">=", "≥").replace("<=", "≤")


def item_key(audit: str, attribute: str, metric: str, group: Any = None) -> str:
    """The key of a decision line in ``summary['previous']['items']``: with ``group``, the
    line on that group; without, the attribute's line whichever group it was on."""
    key = f"{audit}|{attribute}|{metric}"
    return key if group is None else f"{key}|{group}"


def _line_group(line: Mapping[str, Any]) -> Any:
    return (line.get("number") or {}).get("group")


def _previous_item(items: Mapping[str, Any], line: Mapping[str, Any]
                   ) -> tuple[Mapping[str, Any] | None, str]:
    """The previous run's item for ``line``: the same group's, else the attribute's line
    (then a note naming the group it was on, when that was another group)."""
    audit, attr, metric = line["audit"], line["attribute"], line["metric"]
    group = _line_group(line)
    if group is not None and item_key(audit, attr, metric, group) in items:
        return items[item_key(audit, attr, metric, group)], ""
    prev = items.get(item_key(audit, attr, metric))
    was = _line_group(prev or {})
    if prev is not None and was is not None and group is not None and was != group:
        return None, f"last run's line was on {was}"
    return prev, ""


def _params(r: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return json.loads(r.get("params") or "{}")
    except (TypeError, ValueError):
        return {}


# ------------------------------------------------------------------ distance to limits


def _limit_distance(r: Mapping[str, Any], rule: Mapping[str, Any], *,
                    interval: bool = True) -> tuple[str, float | None]:
    """(words, signed excess) for one limit row: excess > 0 is beyond the limit.

    The value with its interval first, then its distance: *"DI 0.057 [0.010, 0.305],
    0.743 below the minimum 0.8 (whole Holm-adjusted interval below)"*: every gating
    number with its interval, also when the whole interval is beyond the limit.
    ``interval=False`` leaves the interval to the caller (:func:`_worst_of` puts it
    after the value itself).
    """
    v, lo, hi = _num(r.get("value")), _num(r.get("lower")), _num(r.get("upper"))
    if v is None:
        return "no value", None
    # the limits row's interval is the one its verdict uses (adjusted under a correction)
    iv = f"whole {_params(r).get('interval') or ''} interval".replace("  ", " ")
    short = short_metric(str(r.get("metric") or rule.get("metric") or "value"))
    shown_iv = (f" [{row_number(r, 'ci_low')}, {row_number(r, 'ci_high')}]"
                if interval and lo is not None and hi is not None else "")
    name = f"{short} {row_number(r)}{shown_iv}, "
    parts: list[tuple[float, str, str]] = []  # (excess, words, interval note)
    margin = _num((rule.get("no_worse_than_baseline") or {}).get("margin"))
    if margin is not None:  # the row's value is "worse": further from parity, paired
        whole = " (wholly above the margin)" if lo is not None and lo > margin else (
            " (wholly below the margin)" if hi is not None and hi <= margin else "")
        side = "further from" if v > 0 else "closer to" if v < 0 else "as far from"
        # the numbers of the interval the verdict uses (adjusted under a correction); the
        # one signed quantity of the comparison, its size inside its interval
        shown = (f", {iv.removeprefix('whole ')} [{_f(lo, signed=True)}, "
                 f"{_f(hi, signed=True)}]" if lo is not None and hi is not None else "")
        parts.append((v - margin, f"{short}: change in distance from parity (challenger − "
                      f"baseline) {_f(v, signed=True)}, {side} parity than the baseline "
                      f"(margin {fmt_setting(margin)}){shown}", whole))
    if _num(rule.get("min")) is not None:
        m = float(rule["min"])
        whole = f" ({iv} below)" if hi is not None and hi < m else (
            f" ({iv} above)" if lo is not None and lo >= m else "")
        parts.append((m - v, f"{name}{_f(abs(m - v))} {'below' if v < m else 'above'} the "
                      f"minimum {fmt_setting(m)}", whole))
    if _num(rule.get("max")) is not None:
        m = float(rule["max"])
        whole = f" ({iv} above)" if lo is not None and lo > m else (
            f" ({iv} below)" if hi is not None and hi <= m else "")
        parts.append((v - m, f"{name}{_f(abs(v - m))} {'above' if v > m else 'below'} the "
                      f"maximum {fmt_setting(m)}", whole))
    if _num(rule.get("abs_max")) is not None:
        m = float(rule["abs_max"])
        worst = max(abs(lo), abs(hi)) if lo is not None and hi is not None else None
        best = (0.0 if lo is not None and hi is not None and lo <= 0 <= hi
                else min(abs(lo), abs(hi)) if lo is not None and hi is not None else None)
        whole = (f" ({iv} beyond)" if best is not None and best > m else
                 f" ({iv} within)" if worst is not None and worst <= m else "")
        parts.append((abs(v) - m, f"{name}{_f(abs(abs(v) - m))} "
                      f"{'beyond' if abs(v) > m else 'within'} the limit ±{fmt_setting(m)}", whole))
    if not parts:
        return f"value {row_number(r)}", None
    excess, words, whole = max(parts, key=lambda t: t[0])
    return words + whole, excess


# ------------------------------------------------------------------------ the lines


def _limit_gate_word(r: Mapping[str, Any], p: Mapping[str, Any], failing: bool) -> str:
    from fairspark.nightly.gating import gate_word

    rule = p.get("rule") or {}
    return gate_word(str(r.get("status") or ""),
                     would_gate=bool(p.get("would_gate", p.get("gates"))),
                     consecutive=int(p.get("consecutive") or 1),
                     persistence=int(rule.get("persistence") or 1),
                     fail_on_violation=failing, role=str(p.get("role") or "gate"))


def _limit_lines(rows: list[Mapping[str, Any]], anchors: Mapping[str, str],
                 summary: RunSummary, specs: Mapping[str, AuditSpec]
                 ) -> list[dict]:
    """One line per (limit, attribute): the worst group's check when judged per group."""
    failing = summary.fails_on_violation()
    checks: dict[tuple[str, str, str], list[tuple[Mapping[str, Any], dict]]] = {}
    for r in rows:
        if r.get("audit") != "limits":
            continue
        p = _params(r)
        if p.get("role") == "pooled":
            continue  # the pooled view is in the Limits section, it does not decide
        rule = p.get("rule") or {}
        source = str(p.get("source_audit") or rule.get("audit") or "")
        checks.setdefault((str(r.get("metric_b")), str(r.get("attribute")), source),
                          []).append((r, p))
    out = []
    named = summary.unprivileged_values
    for (check, attr, source), found in checks.items():
        line_row, r, p, far, excess = _worst_of(found)
        if r.get("group") == "unprivileged" and attr in named:  # called by its value
            far = f"group {named[attr]}: {far}"
        rule = p.get("rule") or {}
        metric = str(r.get("metric") or rule.get("metric") or "")
        status = str(line_row[0].get("status") or "")
        where = anchors.get(source)
        spec = specs.get(source)
        look = spec.look_next(attr) if spec is not None else f"the {source} section"
        nxt = look if status != "passed" else "Nothing: within the limit."
        if status == "inconclusive":
            label = _params(r).get("interval")
            nxt = (f"The {label + ' ' if label else ''}interval straddles the limit: more "
                   f"rows or runs decide; watch {look}")
        out.append(DecisionLine(
            audit=f"limit on {source}", attribute=attr, metric=metric,
            what=_readable(check if check != "None" else metric), status=status, far=far,
            excess=excess, nxt=nxt, anchor=where,
            gate_word=_limit_gate_word(*line_row, failing), number=r).as_dict())
    return out


def _worst_of(found: list[tuple[Mapping[str, Any], dict]]) -> tuple[
        tuple[Mapping[str, Any], dict], Mapping[str, Any], dict, str, float | None]:
    """(the row deciding the line's status, the worst group's row and params, its
    words, its excess) of one (limit, attribute)'s checks.

    The line's status and gate word are the worst verdict of any group (a group too
    small to rank may still gate); the group named worst is ranked by
    :mod:`fairspark.nightly.worst` among the groups large enough to rank.
    """
    from fairspark.nightly.gating import GATE
    from fairspark.nightly.worst import rank_key, rankable, support_words

    def key(t: tuple[Mapping[str, Any], dict]) -> tuple:
        return rank_key(t[0], t[1].get("rule") or {})

    def status_key(t: tuple[Mapping[str, Any], dict]) -> tuple:
        r, p = t
        return (STATUS_ORDER.get(str(r.get("status")), (6, ""))[0],
                not p.get("would_gate", p.get("gates")), key(t))

    line_row = min(found, key=status_key)
    groups = [t for t in found if t[0].get("group") not in (None, "unprivileged", "all")
              and (t[1].get("role") or GATE) == GATE]
    if not groups:
        r, p = line_row
        far, excess = _limit_distance(r, p.get("rule") or {})
        return line_row, r, p, far, excess
    ranked = [t for t in groups if rankable(t[0])]
    small = [t for t in groups if not rankable(t[0])]
    r, p = min(ranked or groups, key=key)
    far, excess = _limit_distance(r, p.get("rule") or {}, interval=False)
    n_v = sum(1 for x, _ in found if x.get("status") == "violated")
    size = support_words(r)
    lo, hi = _num(r.get("lower")), _num(r.get("upper"))
    margin = (p.get("rule") or {}).get("no_worse_than_baseline")  # its words say it
    interval = (f" [{row_number(r, 'ci_low')}, {row_number(r, 'ci_high')}]"
                if lo is not None and hi is not None and not margin else "")
    value, _, rest = far.partition(", ")
    head = (f"worst group {r.get('group')}" + (f" ({size})" if size else "") if ranked
            else "no group is large enough to rank; nearest")
    far = (f"{head}: {value}{interval}" + (f", {rest}" if rest else "")
           + f"; {n_v} of {len(found)} groups violated (each against the reference)")
    if small:
        far += "; too small to rank: " + ", ".join(
            f"{x.get('group')} ({support_words(x)}, {x.get('status')})" for x, _ in small)
    return line_row, r, p, far, excess


def _audit_lines(summary: RunSummary, rows: list[Mapping[str, Any]],
                 anchors: Mapping[str, str], limit_lines: list[dict],
                 specs: Mapping[str, AuditSpec]) -> list[dict]:
    """Every audit's own lines (``AuditSpec.decision_lines``), in run order; each reads
    its audit's own entry (:meth:`~fairspark.run_summary.AuditEntry.to_json`)."""
    audits = summary.audits
    out: list[dict] = []
    for name, spec in specs.items():
        if spec.decision_lines is None:
            continue
        covered = frozenset(ln["attribute"] for ln in limit_lines
                            if ln["audit"] == f"limit on {name}")
        mine = [r for r in rows if r.get("audit") == name]
        judged = [r for r in rows if r.get("audit") == "limits"
                  and _params(r).get("source_audit") == name]
        entry = audits.get(name)
        view = DecisionInput(audit=name, rows=mine, info=entry.to_json() if entry else {},
                             anchor=anchors.get(name), covered=covered, limits=judged)
        out += [ln.as_dict() for ln in spec.decision_lines(view)]
    return out


def _failed_lines(summary: RunSummary) -> list[dict]:
    out = []
    for name in summary.failed_audits:
        out.append(DecisionLine(
            audit=name, attribute="*", metric="*", what=f"{name} audit", status="failed",
            far=str(summary.audits[name].detail or "see the log"),
            nxt="Read the failure reason in the Audits table", anchor="audits").as_dict())
    return out


def _change(line: dict, prev: Mapping[str, Any] | None) -> str:
    """The change since the previous run's item, on the trends' rule and words.

    A status that appears or goes is *new* / *resolved* only when the number moved
    beyond the interval of the difference (:func:`fairspark.report.trends.change_between`);
    otherwise the line says the status changed but the number's move is *within noise*.
    A problem still there is *worse* / *better* beyond that interval, else *within noise*.
    """
    from fairspark.report.trends import change_between

    if prev is None:
        return "new" if line["status"] in _BAD else ""
    was_bad = str(prev.get("status")) in _BAD
    now_bad = line["status"] in _BAD
    a, b = prev.get("number") or {}, line.get("number") or {}
    metric = str(b.get("metric") or a.get("metric") or "")
    word = change_between(metric, a, b)[0] if a and b else ""
    if now_bad and not was_bad:
        return "new (the number moved within noise)" if word == "within noise" else "new"
    if was_bad and not now_bad:
        return ("no longer flagged (the number moved within noise)" if word == "within noise"
                else "resolved")
    if not now_bad:
        return "unchanged"
    if word:
        return "still there, " + word if word == "within noise" else word
    ea, eb = _num(prev.get("excess")), line.get("excess")
    if ea is None or eb is None or abs(eb - ea) < FLOAT_NOISE:
        return "still there"
    return "still there (no interval to judge the change)"


def _gate_sentence(summary: RunSummary, failed: list[str]) -> dict[str, str]:
    code = summary.exit_code
    limits = summary.limits
    n_viol = limits.violated if limits is not None else 0
    if failed:
        return {"kind": "gates", "text": (
            f"This run fails (exit code {code}): the {', '.join(failed)} audit(s) failed; "
            "a scheduler treats the run as failed whatever the limits say.")}
    if code == 3:
        return {"kind": "gates", "text": (
            f"This run gates: exit code 3. {n_viol} violated limit(s) fail the pipeline "
            "(limits.fail_on_violation is on).")}
    if not limits:
        return {"kind": "nogate", "text": (
            f"This run does not gate (exit code {code}): no fairness limits are configured, "
            "so nothing in this report can fail the pipeline.")}
    if limits.gating():
        return {"kind": "nogate-violated", "text": (
            f"This run does not gate (exit code {code}), although {n_viol} limit(s) are "
            "violated: failing on a violation is switched off (limits.fail_on_violation: "
            "false or --no-fail-on-violation). With it on, this run would fail with exit "
            "code 3.")}
    unjudged = [str(x.get("text") or x.get("rule")) for x in limits.not_evaluated]
    nothing = "; ".join(unjudged)
    if n_viol:
        return {"kind": "nogate-violated", "text": (
            f"This run does not gate (exit code {code}): {n_viol} limit(s) are violated, "
            "but not yet for their required number of consecutive runs."
            + (f" Not evaluated: {nothing}." if nothing else ""))}
    if not limits.checks:  # a gate that judged nothing never reads as passed
        return {"kind": "nogate-violated", "text": (
            f"This run does not gate (exit code {code}), but no configured limit was "
            f"evaluated: {nothing or 'no limit made a check'}.")}
    if nothing:
        return {"kind": "nogate-violated", "text": (
            f"This run does not gate (exit code {code}): no evaluated limit is violated "
            f"({limits.passed} passed, {limits.inconclusive} "
            f"inconclusive); {len(unjudged)} limit(s) not evaluated: {nothing}.")}
    return {"kind": "nogate", "text": (
        f"This run does not gate (exit code {code}): no configured limit is violated "
        f"({limits.passed} passed, {limits.inconclusive} inconclusive).")}


def _caveat(line: Mapping[str, Any], lines: list[dict]) -> str:
    """A headline that says "fairer" or "no difference" while a limit check of its
    attribute is violated or inconclusive says so (issue 58): the word is the documented
    family's (:mod:`fairspark.group.decision`), the checks are the limits'."""
    head = str(line["headline"])
    attr = line.get("attribute")
    if not re.search(r": (fairer|not less fair|no difference beyond noise) \(", head):
        return head
    bad = [ln for ln in lines if str(ln.get("audit", "")).startswith("limit on")
           and ln.get("attribute") == attr and ln.get("status") in ("violated",
                                                                  "inconclusive")]
    if not bad:
        return head
    said = "; ".join(f"{ln.get('what')}: {ln.get('status')}" for ln in bad[:3])
    more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
    return (f"{head}. But {len(bad)} limit check(s) on {attr} are not passed: "
            f"{said}{more}")


def decision_box(summary: RunSummary | Mapping[str, Any], rows: list[Mapping[str, Any]], *,
                 anchors: Mapping[str, str], specs: Mapping[str, AuditSpec]
                 ) -> dict[str, Any]:
    """The decision box: the gate sentence and one line per check, worst first.

    Parameters
    ----------
    summary, rows:
        The run's :class:`~fairspark.run_summary.RunSummary` (or a parsed
        ``summary.json``) and its long rows.
    anchors:
        Audit name -> the id of its report section (for "look at next" links).
    specs:
        Audit name -> spec, in run order: each audit's ``decision_lines`` and the
        "look at next" of a limit on it.
    """
    summary = as_run_summary(summary)
    failed = summary.failed_audits
    limit_lines = _limit_lines(rows, anchors, summary, specs)
    lines = [*_failed_lines(summary), *limit_lines,
             *_audit_lines(summary, rows, anchors, limit_lines, specs)]
    previous = summary.previous
    prev_items = previous.items if previous is not None else None
    if previous is not None and not previous.run_date:
        prev_items = None  # nothing published before this run: nothing to compare with
    if summary.schema_change:
        prev_items = None  # the input's features changed: not comparable with that run
    for ln in lines:
        if prev_items is not None:
            prev, note = _previous_item(prev_items, ln)
            ln["change"] = _change(ln, prev)
            if note:  # tonight's worst group is another: not compared with that one
                ln["change"] = f"{ln['change']} ({note})" if ln["change"] else note
    lines.sort(key=lambda ln: (ln["rank"], -(ln["excess"] or 0) if ln["excess"] is not None
                               and ln["rank"] <= 2 else 0))
    counts: dict[str, int] = {}
    for ln in lines:
        counts[ln["status"]] = counts.get(ln["status"], 0) + 1
    checks = limit_row_counts(rows)
    if checks["checks"]:
        # one count of limit checks wherever printed (fairspark.status.verdict_counts):
        # violated / inconclusive / passed are the checks', not the box's lines'
        counts = {s: n for s, n in counts.items() if s not in _CHECK_STATUSES}
        counts |= {s: checks[s] for s in _CHECK_STATUSES if checks[s]}
    return {
        "gate": _gate_sentence(summary, failed),
        # the lines' one-sentence answers (e.g. challenger against baseline), worst first
        "headlines": [_caveat(ln, lines) for ln in lines if ln.get("headline")],
        "lines": lines,
        "counts": [(s, counts[s], STATUS_ORDER[s][1]) for s in STATUS_ORDER if s in counts],
        "checks": checks["checks"],
        "previous": previous.run_date if previous is not None and prev_items is not None
        else None,
        "previous_note": _previous_note(summary, previous),
        "differs": data_differences(summary, previous),
        "differs_from": previous.run_date if previous is not None else None,
    }


#: rows audited may move by this fraction between two runs before the report says so
ROW_CHANGE_FRACTION = 0.01


def data_differences(summary: RunSummary | Mapping[str, Any],
                     previous: PreviousRun | Mapping[str, Any] | None) -> list[str]:
    """Why tonight's data differ from the previous run's, in words (empty: they do not).

    A changed data window (``input.where``, ``--where``), input path or table, and a
    number of audited rows that moved by more than :data:`ROW_CHANGE_FRACTION`. These
    leave the config hash alone (a nightly job reads a new window every night), so the
    report states them on the first screen as a reason the runs differ.
    """
    summary = as_run_summary(summary)
    if isinstance(previous, Mapping):
        previous = PreviousRun.from_json(previous)
    if previous is None or not previous.run_date or previous.error:
        return []
    before = previous.input
    if not isinstance(before, Mapping):
        return []  # a previous run read by an older version: nothing to compare
    now = summary.input
    out = []
    w0, w1 = before.get("where"), now.where
    if (w0 or None) != (w1 or None):
        out.append(f"the data window changed: {('where ' + w0) if w0 else 'all rows'} then, "
                   f"{('where ' + w1) if w1 else 'all rows'} now")
    for key, word in (("path", "input path"), ("table", "input table")):
        a, b = before.get(key), getattr(now, key)
        if (a or None) != (b or None):
            out.append(f"the {word} changed: {a or 'none'} then, {b or 'none'} now")
    n0 = previous.rows_audited
    n1 = summary.rows.audited
    try:
        n0, n1 = int(n0), int(n1)
    except (TypeError, ValueError):
        return out
    if n0 > 0 and abs(n1 - n0) / n0 > ROW_CHANGE_FRACTION:
        change = fmt_fixed(100 * (n1 - n0) / n0, 1, signed=True, minus="-")
        out.append(f"rows audited went from {fmt_count(n0)} to {fmt_count(n1)} ({change}%, "
                   f"more than the {fmt_setting(100 * ROW_CHANGE_FRACTION)}% this report "
                   "lets pass unremarked)")
    return out


def _previous_note(summary: RunSummary, previous: PreviousRun | None) -> str:
    """One sentence on the change column: why it is missing, or what it compares with."""
    if previous is None:
        return ("Change since the previous run: not shown, this run carries no previous "
                "run's results (a run in memory, or the runner did not read its history).")
    date = previous.run_date
    if not date:
        return ("Change since the previous run: no previous runs; this is the first run "
                "published at this output location, so every problem is new.")
    if previous.error:
        return (f"Change since the previous run: the run of {date} could not be read "
                f"({previous.error}).")
    change = summary.schema_change
    if isinstance(change, Mapping) and change.get("message"):
        return f"Change since the previous run: not shown, not comparable: {change['message']}."
    prev_hash, hash_now = previous.config_hash, summary.config_hash
    if prev_hash and hash_now and prev_hash != hash_now:
        return (f"Compared with the run of {date}, whose configuration differs (config hash "
                f"{prev_hash} then, {hash_now} now): a change may come from the "
                "configuration rather than from the model or the data.")
    differs = data_differences(summary, previous)
    data = (f"same configuration, but the data differ: {'; '.join(differs)}" if differs
            else "same configuration and data window")
    return (f"Compared with the run of {date} ({data}). new = a problem that was not there; "
            "still there = as before; better / worse = closer to / further from its limit "
            "or fair value by more than the interval of the difference; within noise = a "
            "move inside it; resolved = gone.")


def decision_items(summary: RunSummary | Mapping[str, Any], rows: list[Mapping[str, Any]], *,
                   specs: Mapping[str, AuditSpec]) -> dict[str, dict[str, Any]]:
    """A run's decision lines as ``summary['previous']['items']`` of the next run.

    The runner builds ``previous = {"run_date": <D>, "items": decision_items(summary_D,
    rows_D)}`` from the last published run, so the next report says what changed.
    """
    box = decision_box(summary, rows, anchors={}, specs=specs)
    items: dict[str, dict[str, Any]] = {}
    for ln in box["lines"]:
        item = {"status": ln["status"], "excess": ln["excess"], "number": ln["number"]}
        items[item_key(ln["audit"], ln["attribute"], ln["metric"])] = item
        if _line_group(ln) is not None:  # and under its group: compared group to group
            items[item_key(ln["audit"], ln["attribute"], ln["metric"], _line_group(ln))] = item
    return items


# --------------------------------------------------------------------- what was audited


def _groups(attrs: Mapping[str, AttributeGroups], limit: int = 6) -> list[tuple[str, str]]:
    out = []
    for name, a in attrs.items():
        values = a.values or {}
        priv = set(map(str, a.privileged or []))
        items = sorted(values.items(), key=lambda kv: (str(kv[0]) not in priv, -int(kv[1] or 0)))
        shown = [f"{v}{' (privileged)' if str(v) in priv else ''}: {_count(n)}"
                 for v, n in items[:limit]]
        if len(items) > limit:
            rest = sum(int(n or 0) for _, n in items[limit:])
            shown.append(f"{len(items) - limit} more: {_count(rest)}")
        out.append((name, "; ".join(shown)))
    return out


def _values(vals: Any) -> str:
    vals = vals if isinstance(vals, list | tuple) else [vals]
    return " or ".join(fmt_setting(v) if isinstance(v, float) else str(v) for v in vals)


def _favourable(inp: InputFacts) -> tuple[str | None, str | None]:
    """(decision, label) favourable outcome as in the data, e.g. ``prediction = 1.0``."""
    neg = inp.favourable == "negative"
    eq = "≠" if neg else "="
    dec = lab = None
    col = inp.decision
    if inp.decision_positive is not None and col:
        dec = f"{col} {eq} {_values(inp.decision_positive)}"
    elif inp.decision_rule:
        dec = f"not ({inp.decision_rule})" if neg else str(inp.decision_rule)
    if inp.label_positive is not None and inp.label:
        lab = f"{inp.label} {eq} {_values(inp.label_positive)}"
    return dec, lab


def audited_facts(summary: RunSummary | Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) pairs: dataset, model, decision, label, performance, window, rows,
    group sizes (from the run's :class:`~fairspark.run_summary.RunSummary`)."""
    summary = as_run_summary(summary)
    inp, rows = summary.input, summary.rows
    model = summary.model.to_json() if summary.model is not None else {}
    out: list[tuple[str, str]] = []
    source = inp.table or inp.path or inp.source or "in memory"
    dataset = summary.dataset if summary.dataset is not None else "unnamed"
    out.append(("Dataset", f"{dataset} ({source})"))
    name = " ".join(str(x) for x in (model.get("name"), model.get("version") and
                                     f"version {model['version']}") if x)
    desc = model.get("description")
    # champion against challenger: the audit that names the baseline's rule
    bases = [a.baseline for a in summary.audits.values() if a.baseline is not None]
    base = next((b for b in bases if b.get("decision")), bases[0] if bases else {})
    baseline = base.get("decision") or (f"column {base['column']}" if base.get("column")
                                        else None)
    out.append(("Model", _model_text(name, desc, inp, baseline)))
    fav = inp.favourable or "positive"
    decision = model.get("decision")
    fav_words = model.get("favourable")
    col = inp.decision
    dec_value, lab_value = _favourable(inp)
    text = (f"{decision} (column {col})" if decision else f"column {col}") if col else \
        (decision or "n/a")
    shown = dec_value or f"the {fav} value"
    text += (f"; favourable outcome: {fav_words} ({shown})" if fav_words
             else f"; favourable outcome: {shown}")
    out.append(("Decision", text))
    if baseline:
        out.append(("Baseline", f"{baseline} (the decision compared with on the same rows)"))
    if inp.label:
        out.append(("Label", f"column {inp.label}"
                    + (f"; favourable: {lab_value}" if lab_value else "")))
    perf = summary.performance  # the run's model line, chosen once (run_summary.run_level)
    if perf is not None and perf.accuracy is not None:
        out.append(("Performance", (
            f"accuracy {_rate(perf.accuracy)}, base rate {_rate(perf.base_rate)} (favourable "
            f"labels), positive rate {_rate(perf.positive_rate)} (favourable decisions), over "
            f"{_count(perf.labelled_rows)} labelled rows")))
    out.append(("Data window", f"where {inp.where}" if inp.where
                else "all rows of the input (no where filter)"))
    out.append(("Rows", _rows_text(rows)))
    for name, text in _groups(rows.attributes):
        out.append((f"Groups: {name}", text))
    return out


def _rate(x: float | None) -> str:
    """A rate of the model line (accuracy, base rate, positive rate): 3 decimals."""
    return fmt_fixed(x, 3, minus="-")


def _model_text(name: str, desc: str | None, inp: InputFacts,
                baseline: str | None = None) -> str:
    """The model card's first line: name and version (or the keys that set them), what
    it does, the threshold when a score is audited (``score >= threshold``), and the
    baseline it is compared with (champion against challenger), by its rule or column."""
    text = ((name or "not named (set model.name and model.version)")
            + (f": {desc}" if desc else ""))
    if inp.threshold is not None and inp.score:
        thr = fmt_setting(float(inp.threshold))
        text += (f"; score column {inp.score}, decision threshold {thr} "
                 f"(decision = {inp.score} >= {thr})")
    if baseline:
        text += f"; compared with the baseline {baseline} on the same rows"
    return text


def _rows_text(rows: RowCounts) -> str:
    dropped = {k: v for k, v in (rows.dropped or {}).items() if v and k != "total"}
    n_drop = sum(int(v) for v in dropped.values())
    rtext = (f"{_count(rows.audited)} audited of {_count(rows.read)} read; "
             f"{_count(n_drop)} dropped")
    if dropped:
        rtext += " (" + ", ".join(f"{k}: {_count(v)}" for k, v in dropped.items()) + ")"
    if rows.unlabelled:
        rtext += f"; {_count(rows.unlabelled)} without a label yet"
    if rows.weighted:
        rtext += "; rows are weighted"
    return rtext


def audited_brief(summary: RunSummary | Mapping[str, Any]) -> list[tuple[str, str]]:
    """The first screen's short form of :func:`audited_facts` (one line per fact).

    Dataset and source, model (or "not named" with the config keys to name it), the
    decision and label with their favourable values as in the data, the data window,
    rows audited and dropped, and every attribute's group sizes (first four values).
    """
    summary = as_run_summary(summary)
    facts = dict(audited_facts(summary))
    # the model card: what was audited, how well it does, over which data, side by side
    brief = [(k, facts[k]) for k in ("Dataset", "Model", "Performance", "Data window",
                                     "Decision", "Label", "Rows") if k in facts]
    groups = _groups(summary.rows.attributes, limit=4)
    if groups:
        brief.append(("Groups", " · ".join(f"{n}: {t}" for n, t in groups)))
    return brief
