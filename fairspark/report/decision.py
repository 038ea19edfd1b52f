"""The top of ``report.html``: the decision box and what was audited.

Both read only ``summary.json`` and the long rows, so a published run re-renders.

The decision box has one line per limit check, per attribute of the hfm and mdfa
audits, per attribute of the group audit that no limit covers, and per failed audit:
a status (``violated``, ``evidence``, ``inconclusive``, ``failed``, ``passed``,
``ok``), how far the number is from its limit, the change since the previous run (when
the summary carries a ``previous`` mapping, see ``docs/report.md``) and the one thing
to look at next. Above it, one sentence says whether the run gates.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from fairspark._values import nan_to_none
from fairspark.status import FAILED_STATUSES

__all__ = ["audited_facts", "decision_box", "decision_items", "item_key"]

#: status -> (sort rank, icon shown beside the word; colour is never the only signal)
STATUS_ORDER: dict[str, tuple[int, str]] = {
    "violated": (0, "✖"), "failed": (1, "✖"), "evidence": (2, "▲"),
    "inconclusive": (3, "?"), "passed": (4, "✔"), "ok": (5, "✔"),
}
_BAD = {"violated", "failed", "evidence"}
_FOUR_FIFTHS = 0.8
#: group metrics whose clear gap is evidence in the decision box (no limit configured)
_GROUP_KEYS = ("statistical_parity_difference", "disparate_impact", "tpr_difference")


def _num(x: Any) -> float | None:
    return nan_to_none(x)


def _f(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "–"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return (f"{x:+.3g}" if signed else f"{x:.3g}").replace("-", "−")


def _count(x: Any) -> str:
    try:
        return f"{int(x):,}"
    except (TypeError, ValueError):
        return "n/a"


def _readable(check: str) -> str:
    """``disparate_impact >= 0.8`` -> ``disparate impact ≥ 0.8`` (breaks at spaces)."""
    return check.replace("_", " ").replace(">=", "≥").replace("<=", "≤")


def item_key(audit: str, attribute: str, metric: str) -> str:
    """The key of a decision line in ``summary['previous']['items']``."""
    return f"{audit}|{attribute}|{metric}"


def _params(r: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return json.loads(r.get("params") or "{}")
    except (TypeError, ValueError):
        return {}


# ------------------------------------------------------------------ distance to limits


def _limit_distance(r: Mapping[str, Any], rule: Mapping[str, Any]) -> tuple[str, float | None]:
    """(words, signed excess) for one limit row: excess > 0 is beyond the limit."""
    v, lo, hi = _num(r.get("value")), _num(r.get("lower")), _num(r.get("upper"))
    if v is None:
        return "no value", None
    parts: list[tuple[float, str, str]] = []  # (excess, words, interval note)
    if _num(rule.get("min")) is not None:
        m = float(rule["min"])
        whole = " (whole interval below)" if hi is not None and hi < m else (
            " (whole interval above)" if lo is not None and lo >= m else "")
        parts.append((m - v, f"{_f(abs(m - v))} {'below' if v < m else 'above'} the "
                      f"minimum {m:g}", whole))
    if _num(rule.get("max")) is not None:
        m = float(rule["max"])
        whole = " (whole interval above)" if lo is not None and lo > m else (
            " (whole interval below)" if hi is not None and hi <= m else "")
        parts.append((v - m, f"{_f(abs(v - m))} {'above' if v > m else 'below'} the "
                      f"maximum {m:g}", whole))
    if _num(rule.get("abs_max")) is not None:
        m = float(rule["abs_max"])
        worst = max(abs(lo), abs(hi)) if lo is not None and hi is not None else None
        best = (0.0 if lo is not None and hi is not None and lo <= 0 <= hi
                else min(abs(lo), abs(hi)) if lo is not None and hi is not None else None)
        whole = (" (whole interval beyond)" if best is not None and best > m else
                 " (whole interval within)" if worst is not None and worst <= m else "")
        parts.append((abs(v) - m, f"|value| {_f(abs(v))} is {_f(abs(abs(v) - m))} "
                      f"{'beyond' if abs(v) > m else 'within'} the limit ±{m:g}", whole))
    if not parts:
        return f"value {_f(v)}", None
    excess, words, whole = max(parts, key=lambda t: t[0])
    return words + whole, excess


# ------------------------------------------------------------------------ the lines


def _line(*, audit: str, attribute: str, metric: str, what: str, status: str, far: str,
          excess: float | None, nxt: str, anchor: str | None, gates: bool = False) -> dict:
    rank, icon = STATUS_ORDER.get(status, (6, "•"))
    return {"audit": audit, "attribute": attribute, "metric": metric, "what": what,
            "status": status, "icon": icon, "rank": rank, "far": far, "excess": excess,
            "next": nxt, "anchor": None if status in ("passed", "ok") else anchor,
            "gates": gates, "change": ""}


def _limit_lines(rows: list[Mapping[str, Any]], anchors: Mapping[str, str]) -> list[dict]:
    out = []
    for r in rows:
        if r.get("audit") != "limits":
            continue
        p = _params(r)
        rule = p.get("rule") or {}
        source = p.get("source_audit") or rule.get("audit") or "group"
        far, excess = _limit_distance(r, rule)
        attr = str(r.get("attribute"))
        metric = str(r.get("metric") or rule.get("metric") or "")
        status = str(r.get("status") or "")
        where = anchors.get(source)
        look = {
            "group": f"{attr}: rates per group, which group gets less",
            "hfm": f"{attr}: the HFM witness pair",
            "mdfa": f"{attr}: mdfa's worst-treated sub-population",
        }.get(source, f"the {source} section")
        nxt = look if status != "passed" else "Nothing: within the limit."
        if status == "inconclusive":
            nxt = f"Interval straddles the limit: more rows or runs decide; watch {look}"
        out.append(_line(audit=f"limit on {source}", attribute=attr, metric=metric,
                         what=_readable(str(r.get("metric_b") or metric)), status=status, far=far,
                         excess=excess, nxt=nxt, anchor=where, gates=bool(p.get("gates"))))
    return out


def _group_lines(rows: list[Mapping[str, Any]], covered: set[str],
                 anchors: Mapping[str, str]) -> list[dict]:
    idx = {(str(r.get("attribute")), str(r.get("group")), str(r.get("metric"))): r
           for r in rows if r.get("audit") == "group"}
    attrs = [a for a in dict.fromkeys(a for a, _, _ in idx) if a not in ("*", "None")]
    out = []
    for attr in attrs:
        if attr in covered:
            continue
        di = idx.get((attr, "unprivileged", "disparate_impact"))
        spd = idx.get((attr, "unprivileged", "statistical_parity_difference"))
        gaps, far = [], "no group comparison"
        for m in _GROUP_KEYS:
            r = idx.get((attr, "unprivileged", m))
            if r is None or (r.get("status") or "ok") != "ok":
                continue
            lo, hi = _num(r.get("lower")), _num(r.get("upper"))
            fair = 1.0 if m == "disparate_impact" else 0.0
            if lo is not None and hi is not None and (lo > fair or hi < fair):
                gaps.append(m)
        if di is not None and _num(di.get("value")) is not None:
            v = float(di["value"])
            far = (f"disparate impact {_f(v)}: {_f(abs(_FOUR_FIFTHS - v))} "
                   f"{'below' if v < _FOUR_FIFTHS else 'above'} the four-fifths line 0.8")
        elif spd is not None and _num(spd.get("value")) is not None:
            far = f"selection-rate difference {_f(float(spd['value']), signed=True)}"
        incon = any((r.get("status") == "inconclusive") for (a, g, m), r in idx.items()
                    if a == attr and m in _GROUP_KEYS)
        status = "evidence" if gaps else "inconclusive" if incon else "ok"
        nxt = (f"{attr}: the ranked metrics in the group section" if gaps
               else "Too few rows in a group to tell; see the group section" if incon
               else "Nothing: no clear gap in selection rate, disparate impact or TPR.")
        what = ("clear gap: " + ", ".join(m.replace("_", " ") for m in gaps)) if gaps \
            else "selection rate, disparate impact, TPR"
        out.append(_line(audit="group", attribute=attr, metric="group", what=what,
                         status=status, far=far, excess=None, nxt=nxt,
                         anchor=anchors.get("group")))
    return out


def _hfm_lines(rows: list[Mapping[str, Any]], anchors: Mapping[str, str]) -> list[dict]:
    idx = {(str(r.get("attribute")), str(r.get("metric"))): r for r in rows
           if r.get("audit") == "hfm" and r.get("group") in ("binary", None)}
    attrs = [a for a, m in idx if m == "df" and a != "*"]
    out = []
    for attr in attrs:
        d, d_f, df = (idx.get((attr, m)) for m in ("D", "D_f", "df"))
        v = _num((df or {}).get("value"))
        lo = _num((df or {}).get("lower"))
        status = str((df or {}).get("status") or "ok")
        if v is None or status in FAILED_STATUSES:
            far, st = f"df not computed: {(df or {}).get('detail') or 'failed'}", "failed"
        else:
            more = "more" if v > 0 else "less"
            dv = _f(_num(d.get("value")) if d else None)
            dfv = _f(_num(d_f.get("value")) if d_f else None)
            far = (f"df {_f(v, signed=True)}: the decisions separate the groups "
                   f"{abs(v):.1%} {more} than the labels (D_f {dfv} vs D {dv})")
            if v == 0:
                far = ("df 0: the decisions separate the groups as much as the labels "
                       f"(D_f = D = {dv})")
            st = "evidence" if (lo if lo is not None else v) > 0 else "ok"
        dr = idx.get((attr, "DR"))
        if dr is not None and _num(dr.get("value")) is not None:
            far += f"; discriminative risk {_f(float(dr['value']))}"
        nxt = (f"{attr}: the HFM witness pair (the rows the decisions pull apart)"
               if st == "evidence" else
               "Nothing: the model adds no individual-level separation to the data.")
        out.append(_line(audit="hfm", attribute=attr, metric="df", what="D, D_f, df",
                         status=st, far=far, excess=v, nxt=nxt, anchor=anchors.get("hfm")))
    return out


def _mdfa_lines(rows: list[Mapping[str, Any]], summary: Mapping[str, Any],
                anchors: Mapping[str, str]) -> list[dict]:
    info = (((summary.get("audits") or {}).get("mdfa") or {}).get("attributes")) or {}
    out = []
    for r in rows:
        if r.get("audit") != "mdfa" or r.get("metric") != "gamma_max":
            continue
        attr = str(r.get("attribute"))
        verdict = str((info.get(attr) or {}).get("verdict") or r.get("detail") or "")
        status = str(r.get("status") or "ok")
        v = _num(r.get("value"))
        if status in FAILED_STATUSES or v is None:
            st, far = "failed", f"not computed: {r.get('detail') or 'failed'}"
        elif verdict.startswith("not judged"):
            st, far = "inconclusive", f"gamma {_f(v)}: {verdict}"
        else:
            # "evidence of ..." vs "no evidence of ..." (fairspark.mdfa.results)
            st = "evidence" if re.search(r"(?<!no )evidence of", verdict) else "ok"
            null = (info.get(attr) or {}).get("null") or {}
            ref, bound = _num(null.get("mean")), _num(null.get("bound"))
            p = _num(null.get("p_value"))
            # the row's value is gamma less the reference (issue 14 item 4): the raw
            # mean (the null block's observed) is what the bound is on
            raw = _num(null.get("observed"))
            if ref is not None and bound is not None:
                far = (f"gamma {_f(v if raw is None else raw)} against {_f(ref)} for "
                       f"decisions that depend on the "
                       f"features alone (evidence above {_f(bound)}"
                       + (f"; p = {p:.2g})" if p is not None else ")"))
            else:
                far = f"gamma {_f(v)} over splits (0 = decisions reveal nothing of {attr})"
        nxt = {"evidence": f"{attr}: mdfa's worst-treated sub-population",
               "inconclusive": f"{attr}: run mdfa with null_draws and splits of at least 3",
               }.get(st, "Nothing: gamma is within what decisions that depend on the "
                         "features alone give.")
        out.append(_line(audit="mdfa", attribute=attr, metric="gamma_max", what="gamma",
                         status=st, far=far, excess=v, nxt=nxt, anchor=anchors.get("mdfa")))
    return out


def _failed_lines(summary: Mapping[str, Any], rows: list[Mapping[str, Any]]) -> list[dict]:
    out = []
    for name, a in (summary.get("audits") or {}).items():
        a = a or {}
        if a.get("status") in FAILED_STATUSES:
            out.append(_line(audit=name, attribute="*", metric="*", what=f"{name} audit",
                             status="failed", far=str(a.get("detail") or "see the log"),
                             excess=None, nxt="Read the failure reason in the Audits table",
                             anchor="audits"))
    return out


def _change(line: dict, prev: Mapping[str, Any] | None) -> str:
    """new / still there / better / worse / resolved, from the previous run's item."""
    if prev is None:
        return "new" if line["status"] in _BAD else ""
    was_bad = str(prev.get("status")) in _BAD
    now_bad = line["status"] in _BAD
    if now_bad and not was_bad:
        return "new"
    if was_bad and not now_bad:
        return "resolved"
    if not now_bad:
        return "unchanged"
    a, b = _num(prev.get("excess")), line.get("excess")
    if a is None or b is None or abs(b - a) < 1e-9:
        return "still there"
    return "worse" if b > a else "better"


def _gate_sentence(summary: Mapping[str, Any], failed: list[str]) -> dict[str, str]:
    code = summary.get("exit_code")
    limits = summary.get("limits") or {}
    n_viol = limits.get("violated") or 0
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
    if limits.get("gates"):
        return {"kind": "nogate-violated", "text": (
            f"This run does not gate (exit code {code}), although {n_viol} limit(s) are "
            "violated: failing on a violation is switched off (limits.fail_on_violation: "
            "false or --no-fail-on-violation). With it on, this run would fail with exit "
            "code 3.")}
    if n_viol:
        return {"kind": "nogate-violated", "text": (
            f"This run does not gate (exit code {code}): {n_viol} limit(s) are violated, "
            "but not yet for their required number of consecutive runs.")}
    return {"kind": "nogate", "text": (
        f"This run does not gate (exit code {code}): no configured limit is violated "
        f"({limits.get('passed', 0)} passed, {limits.get('inconclusive', 0)} inconclusive).")}


def decision_box(summary: Mapping[str, Any], rows: list[Mapping[str, Any]], *,
                 anchors: Mapping[str, str]) -> dict[str, Any]:
    """The decision box: the gate sentence and one line per check, worst first.

    Parameters
    ----------
    summary, rows:
        ``summary.json`` and the long rows of the run.
    anchors:
        Audit name -> the id of its report section (for "look at next" links).
    """
    failed = [n for n, a in (summary.get("audits") or {}).items()
              if (a or {}).get("status") in FAILED_STATUSES]
    limit_lines = _limit_lines(rows, anchors)
    covered = {ln["attribute"] for ln in limit_lines if ln["audit"] == "limit on group"}
    lines = [*_failed_lines(summary, rows), *limit_lines,
             *_group_lines(rows, covered, anchors), *_hfm_lines(rows, anchors),
             *_mdfa_lines(rows, summary, anchors)]
    previous = summary.get("previous")
    prev_items = (previous or {}).get("items") if isinstance(previous, Mapping) else None
    if isinstance(previous, Mapping) and not previous.get("run_date"):
        prev_items = None  # nothing published before this run: nothing to compare with
    if summary.get("schema_change"):
        prev_items = None  # the input's features changed: not comparable with that run
    for ln in lines:
        if prev_items is not None:
            ln["change"] = _change(
                ln, prev_items.get(item_key(ln["audit"], ln["attribute"], ln["metric"])))
    lines.sort(key=lambda ln: (ln["rank"], -(ln["excess"] or 0) if ln["excess"] is not None
                               and ln["rank"] <= 2 else 0))
    counts: dict[str, int] = {}
    for ln in lines:
        counts[ln["status"]] = counts.get(ln["status"], 0) + 1
    return {
        "gate": _gate_sentence(summary, failed),
        "lines": lines,
        "counts": [(s, counts[s], STATUS_ORDER[s][1]) for s in STATUS_ORDER if s in counts],
        "previous": (previous or {}).get("run_date") if prev_items is not None else None,
        "previous_note": _previous_note(summary, previous),
    }


def _previous_note(summary: Mapping[str, Any], previous: Any) -> str:
    """One sentence on the change column: why it is missing, or what it compares with."""
    if not isinstance(previous, Mapping):
        return ("Change since the previous run: not shown, this run carries no previous "
                "run's results (a run in memory, or the runner did not read its history).")
    date = previous.get("run_date")
    if not date:
        return ("Change since the previous run: no previous runs; this is the first run "
                "published at this output location, so every problem is new.")
    if previous.get("error"):
        return (f"Change since the previous run: the run of {date} could not be read "
                f"({previous['error']}).")
    change = summary.get("schema_change")
    if isinstance(change, Mapping) and change.get("message"):
        return f"Change since the previous run: not shown, not comparable: {change['message']}."
    prev_hash, hash_now = previous.get("config_hash"), summary.get("config_hash")
    if prev_hash and hash_now and prev_hash != hash_now:
        return (f"Compared with the run of {date}, whose configuration differs (config hash "
                f"{prev_hash} then, {hash_now} now): a change may come from the "
                "configuration rather than from the model or the data.")
    return (f"Compared with the run of {date} (same configuration): new = a problem that "
            "was not there; still there = as far from the limit as before; better / worse "
            "= closer to / further beyond its limit; resolved = gone.")


def decision_items(summary: Mapping[str, Any], rows: list[Mapping[str, Any]]
                   ) -> dict[str, dict[str, Any]]:
    """A run's decision lines as ``summary['previous']['items']`` of the next run.

    The runner builds ``previous = {"run_date": <D>, "items": decision_items(summary_D,
    rows_D)}`` from the last published run, so the next report says what changed.
    """
    box = decision_box(summary, rows, anchors={})
    return {item_key(ln["audit"], ln["attribute"], ln["metric"]):
            {"status": ln["status"], "excess": ln["excess"]} for ln in box["lines"]}


# --------------------------------------------------------------------- what was audited


def _groups(attrs: Mapping[str, Any], limit: int = 6) -> list[tuple[str, str]]:
    out = []
    for name, a in attrs.items():
        values = a.get("values") or {}
        priv = set(map(str, a.get("privileged") or []))
        items = sorted(values.items(), key=lambda kv: (str(kv[0]) not in priv, -int(kv[1] or 0)))
        shown = [f"{v}{' (privileged)' if str(v) in priv else ''}: {_count(n)}"
                 for v, n in items[:limit]]
        if len(items) > limit:
            rest = sum(int(n or 0) for _, n in items[limit:])
            shown.append(f"{len(items) - limit} more: {_count(rest)}")
        out.append((name, "; ".join(shown)))
    return out


def audited_facts(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) pairs: dataset, model, decision, label, window, rows, group sizes."""
    inp = summary.get("input") or {}
    rows = summary.get("rows") or {}
    model = summary.get("model") or {}
    out: list[tuple[str, str]] = []
    source = inp.get("table") or inp.get("path") or inp.get("source") or "in memory"
    out.append(("Dataset", f"{summary.get('dataset', 'unnamed')} ({source})"))
    name = " ".join(str(x) for x in (model.get("name"), model.get("version") and
                                     f"version {model['version']}") if x)
    desc = model.get("description")
    out.append(("Model", (name or "not named (set model.name and model.version)")
                + (f": {desc}" if desc else "")))
    fav = inp.get("favourable") or "positive"
    decision = model.get("decision")
    fav_words = model.get("favourable")
    col = inp.get("decision")
    text = (f"{decision} (column {col})" if decision else f"column {col}") if col else \
        (decision or "n/a")
    text += (f"; favourable outcome: {fav_words} (the {fav} value)" if fav_words
             else f"; favourable outcome: the {fav} value")
    out.append(("Decision", text))
    if inp.get("label"):
        out.append(("Label", f"column {inp['label']}"))
    out.append(("Data window", f"where {inp['where']}" if inp.get("where")
                else "all rows of the input (no where filter)"))
    dropped = {k: v for k, v in (rows.get("dropped") or {}).items() if v and k != "total"}
    n_drop = sum(int(v) for v in dropped.values())
    rtext = (f"{_count(rows.get('audited'))} audited of {_count(rows.get('read'))} read; "
             f"{_count(n_drop)} dropped")
    if dropped:
        rtext += " (" + ", ".join(f"{k}: {_count(v)}" for k, v in dropped.items()) + ")"
    if rows.get("unlabelled"):
        rtext += f"; {_count(rows['unlabelled'])} without a label yet"
    if rows.get("weighted"):
        rtext += "; rows are weighted"
    out.append(("Rows", rtext))
    for name, text in _groups(rows.get("attributes") or {}):
        out.append((f"Groups: {name}", text))
    return out
