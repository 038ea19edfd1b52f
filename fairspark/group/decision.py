"""The group audit's lines of the report's decision box (``SPEC.decision_lines``)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

from fairspark.audits import DecisionInput, DecisionLine, fmt_number, num
from fairspark.audits.lines import row_number
from fairspark.constants import DEFAULT_INTERVAL_LEVEL
from fairspark.numbers import fmt_level
from fairspark.stats import adjust_pvalues, family_level, normal_quantile

__all__ = ["CHANGE_WORDS", "DECISION_KEYS", "baseline_lines", "decision_lines", "unpaired"]

#: the comparisons whose clear gap is evidence in the decision box (no limit configured)
DECISION_KEYS = ("statistical_parity_difference", "disparate_impact", "tpr_difference")
_FOUR_FIFTHS = 0.8


def _params(r: Mapping[str, Any]) -> dict[str, Any]:
    try:
        p = json.loads(r.get("params") or "{}")
    except (TypeError, ValueError):
        return {}
    return p if isinstance(p, dict) else {}


def _verdicts(rows: list[Mapping[str, Any]]
              ) -> dict[tuple[str, str, str], tuple[str, dict]]:
    """(attribute, group, metric) -> ("fairer" | "less fair" | "no difference beyond
    noise", the difference row's params), for every comparison (the pooled
    ``unprivileged`` one and each unprivileged value) of :data:`DECISION_KEYS`.

    "worse" (the challenger's distance from parity minus the baseline's, paired) is
    tested two-sided against 0; the p-values of all these comparisons are Holm-adjusted
    together at ``1 - ci_level``, as the limits adjust their family. The params gain
    ``p_holm`` and the interval the verdict uses, ``adj_lower`` / ``adj_upper``: ``worse
    -/+ z se`` at the per-comparison level ``alpha*`` that reproduces Holm's rejections
    (:func:`fairspark.stats.family_level`, ``z`` of ``1 - alpha* / 2``), so it
    excludes 0 exactly when the word is "fairer" or "less fair".
    """
    found = []
    for r in rows:
        p = _params(r)
        w, se = num(p.get("worse")), num(p.get("worse_se"))
        if (r.get("metric") in DECISION_KEYS and w is not None and se is not None
                and (r.get("status") or "ok") == "ok"):
            pv = 1.0 if se <= 0 else 2.0 * (1.0 - NormalDist().cdf(abs(w) / se))
            found.append(((str(r["attribute"]), str(r["group"]), str(r["metric"])), w, pv, p))
    if not found:
        return {}
    alpha = 1.0 - float(found[0][3].get("ci_level", DEFAULT_INTERVAL_LEVEL))
    adj = adjust_pvalues([f[2] for f in found], "holm")
    z = normal_quantile(1.0 - family_level(adj, "holm", alpha) / 2.0)
    out = {}
    for (key, w, _, p), a in zip(found, adj, strict=True):
        word = ("no difference beyond noise" if a > alpha or math.isclose(w, 0.0)
                else "less fair" if w > 0 else "fairer")
        se = float(p["worse_se"])
        out[key] = (word, {**p, "p_holm": float(a), "adj_lower": w - z * se,
                           "adj_upper": w + z * se, "family": len(found)})
    return out


#: the one name of the challenger-minus-baseline quantity the comparison judges
#: (:func:`fairspark.metrics._core.distance_from_parity` of the challenger minus the
#: baseline's; positive: the challenger is further from parity)
CHANGE_WORDS = "change in distance from parity (challenger − baseline)"


def _change(p: Mapping[str, Any]) -> str:
    """The signed size and the interval the verdict uses, in the same units: the size
    lies inside its interval."""
    w = num(p.get("worse"))
    return (f"{CHANGE_WORDS} {fmt_number(w, signed=True)}, "
            f"{fmt_level(float(p.get('ci_level', DEFAULT_INTERVAL_LEVEL)))} Holm-adjusted "
            "interval "
            f"[{fmt_number(num(p.get('adj_lower')), signed=True)}, "
            f"{fmt_number(num(p.get('adj_upper')), signed=True)}]")


def _size(metric: str, p: Mapping[str, Any]) -> str:
    """Both values and the signed change in distance from parity, with the Holm-adjusted
    interval the verdict uses."""
    return (f"{metric.replace('_', ' ')}: challenger {fmt_number(num(p.get('challenger')))}"
            f" vs baseline {fmt_number(num(p.get('baseline')))}, {_change(p)} (over "
            f"{p.get('family')} comparisons), p {fmt_number(num(p.get('p_holm')))}")


def _headline(attr: str, word: str, metric: str, p: Mapping[str, Any],
              baseline: str | None = None, change: str | None = None,
              group: str | None = None) -> str:
    """One sentence for the top of the decision box: the verdict on ``attr`` against the
    baseline named by its column and rule, the metric, both values and the signed size
    with the interval the verdict uses (``change``: the limit check's, else the group
    family's); ``group``: the unprivileged value the numbers are of (a limit judged per
    group), else the pooled unprivileged group's."""
    named = f" ({baseline})" if baseline else ""
    who = f"group {group}: " if group else ""
    return (f"Challenger against baseline{named} on {attr}: {word} "
            f"({who}{metric.replace('_', ' ')} "
            f"{fmt_number(num(p.get('challenger')))} vs baseline "
            f"{fmt_number(num(p.get('baseline')))}; {change or _change(p)})")


def _word(lower: float, upper: float) -> str:
    """The comparison's word from an interval of "worse" (challenger − baseline distance
    from parity): wholly above 0 "less fair", wholly below "fairer", else no difference."""
    return ("less fair" if lower > 0 else "fairer" if upper < 0
            else "no difference beyond noise")


_CHECK_ORDER = {"violated": 0, "inconclusive": 1, "passed": 2}


def _gating_checks(limits: list[Mapping[str, Any]]
                   ) -> dict[str, tuple[str, str, Mapping[str, Any]]]:
    """attribute -> (metric, word, limit row) of the ``no_worse_than_baseline`` check that
    gates on the pooled comparison the headline reads (``group = unprivileged``, a gating
    role: a binary attribute, or ``multi_valued: false``); with several such limits on an
    attribute, the worst verdict's (then the largest "worse").

    The word follows the check's own adjusted interval (the ``lower``/``upper`` of its
    limits row, the interval its verdict uses), so the headline and the Limits section
    read one family: the limits'.
    """
    from fairspark.metrics import DISTANCE_MODEL

    found: dict[str, list[tuple[tuple, str, str, Mapping[str, Any]]]] = {}
    for r in limits:
        p = _params(r)
        lo, hi, v = num(r.get("lower")), num(r.get("upper")), num(r.get("value"))
        if (r.get("model") != DISTANCE_MODEL or r.get("group") != "unprivileged"
                or (p.get("role") or "gate") != "gate" or lo is None or hi is None
                or v is None or r.get("status") not in _CHECK_ORDER):
            continue
        key = (_CHECK_ORDER[str(r["status"])], -v)
        found.setdefault(str(r.get("attribute")), []).append(
            (key, str(r.get("metric")), _word(lo, hi), r))
    return {a: min(c, key=lambda t: t[0])[1:] for a, c in found.items()}


def _per_group_checks(limits: list[Mapping[str, Any]]
                      ) -> dict[str, list[Mapping[str, Any]]]:
    """attribute -> the gating ``no_worse_than_baseline`` limit rows judged on each
    unprivileged value against the reference (an attribute with more than two values:
    no pooled check gates, each group's does)."""
    from fairspark.metrics import DISTANCE_MODEL

    out: dict[str, list[Mapping[str, Any]]] = {}
    for r in limits:
        p = _params(r)
        if (r.get("model") != DISTANCE_MODEL or r.get("group") in (None, "unprivileged")
                or (p.get("role") or "gate") != "gate" or num(r.get("value")) is None
                or num(r.get("lower")) is None or num(r.get("upper")) is None
                or r.get("status") not in _CHECK_ORDER):
            continue
        out.setdefault(str(r.get("attribute")), []).append(r)
    return out


def _per_group_word(checks: list[Mapping[str, Any]]
                    ) -> tuple[str, Mapping[str, Any], str]:
    """(word, the check it names, the counts) of an attribute judged per group.

    The word never contradicts a gating check: "less fair" when one is violated
    (naming the violated group furthest from parity against its baseline),
    "inconclusive" when none is violated and one is inconclusive (naming the
    inconclusive group with the largest change), and only when every check passed
    "fairer" (every adjusted interval wholly below 0) or "not less fair" (naming the
    group whose interval reaches highest).
    """
    by = {s: [c for c in checks if c.get("status") == s] for s in _CHECK_ORDER}
    counts = (f"{len(checks)} check(s) of each group against the reference: "
              f"{len(by['violated'])} violated, {len(by['inconclusive'])} inconclusive, "
              f"{len(by['passed'])} passed")
    for status, word in (("violated", "less fair"), ("inconclusive", "inconclusive")):
        if by[status]:
            return word, max(by[status], key=lambda c: float(c["value"])), counts
    top = max(checks, key=lambda c: float(c["upper"]))
    return ("fairer" if float(top["upper"]) < 0 else "not less fair"), top, counts


def _per_group_headline(attr: str, checks: list[Mapping[str, Any]],
                        by_group: Mapping[tuple[str, str, str], Mapping[str, Any]],
                        named: str | None) -> tuple[str, list[str], str, str]:
    """(word, sizes, headline, line status) of an attribute whose no-worse limit is
    judged per group: the word follows the groups' checks (:func:`_per_group_word`),
    never contradicting one, with the named group's values and its check's interval."""
    word, lim, counts = _per_group_word(checks)
    metric, group = str(lim.get("metric")), str(lim.get("group"))
    change = _limit_change(lim)
    sizes = [f"{metric.replace('_', ' ')}: group {group}: {change}", counts]
    headline = (_headline(attr, word, metric, by_group.get((attr, group, metric), {}),
                          baseline=named, change=change, group=group) + f"; {counts}")
    status = {"less fair": "evidence", "inconclusive": "inconclusive"}.get(word, "ok")
    return word, sizes, headline, status


def _limit_change(r: Mapping[str, Any]) -> str:
    """The signed size and the interval of a limit check's row (the one its verdict
    uses), in the same units, naming the check and its verdict."""
    label = _params(r).get("interval") or "adjusted"
    return (f"{CHANGE_WORDS} {fmt_number(num(r.get('value')), signed=True)}, "
            f"{label} interval [{fmt_number(num(r.get('lower')), signed=True)}, "
            f"{fmt_number(num(r.get('upper')), signed=True)}] of the limit check "
            f"{str(r.get('metric_b') or '').replace('_', ' ')}: {r.get('status')}")


def unpaired(row: Mapping[str, Any]) -> bool:
    """A row of the audited decision (no ``model``; read back from Parquet it may be NaN)."""
    m = row.get("model")
    return m is None or (isinstance(m, float) and math.isnan(m))


def baseline_lines(view: DecisionInput) -> list[DecisionLine]:
    """Per attribute: is the challenger at least as fair as the baseline, on the same rows?

    "less fair" when a headline metric is further from parity than the baseline's
    beyond noise (Holm over every attribute, comparison and metric), "fairer" when one
    is closer and none further, else "no difference beyond noise" (the pooled
    unprivileged group); each names the metric and the size of the paired difference
    with its interval. Each unprivileged value where the challenger is less fair is
    named too (the line is then evidence).

    Where a ``no_worse_than_baseline`` limit gates on an attribute's pooled comparison
    (``view.limits``), the word, the metric and the interval are that check's: its
    adjusted interval of "worse" (the one its verdict uses), named with the check and
    its verdict, so the headline and the Limits section read one family. Elsewhere
    the word is the group family's above (docs/report.md says which).
    """
    from fairspark.metrics import DIFFERENCE_MODEL

    rows = [r for r in view.rows if r.get("model") == DIFFERENCE_MODEL]
    verdicts = _verdicts(rows)
    gating = _gating_checks(view.limits)
    per_group = _per_group_checks(view.limits)
    by_group = {(str(r.get("attribute")), str(r.get("group")), str(r.get("metric"))):
                _params(r) for r in rows}
    pooled = {(str(r.get("attribute")), str(r.get("metric"))): _params(r) for r in rows
              if r.get("group") == "unprivileged"}
    info = (view.info or {}).get("baseline") or {}
    named = info.get("decision") or info.get("column")
    out = []
    for attr in dict.fromkeys(a for a, _, _ in verdicts):
        mine = {m: v for (a, g, m), v in verdicts.items() if a == attr and g == "unprivileged"}
        worse = [m for m, (w, _) in mine.items() if w == "less fair"]
        better = [m for m, (w, _) in mine.items() if w == "fairer"]
        word = "less fair" if worse else "fairer" if better else "no difference beyond noise"
        shown = worse or better or list(mine)
        sizes = [_size(m, mine[m][1]) for m in shown[:2]]
        headline = _headline(attr, word, shown[0], mine[shown[0]][1], baseline=named)
        status = None
        check = gating.get(attr)
        if check is not None and (attr, check[0]) in pooled:
            # a no-worse limit gates on this comparison: its interval decides the word
            metric, word, lim = check
            others = [_size(m, mine[m][1]) for m in shown if m != metric]
            sizes = [f"{metric.replace('_', ' ')}: {_limit_change(lim)}", *others[:1]]
            headline = _headline(attr, word, metric, pooled[(attr, metric)],
                                 baseline=named, change=_limit_change(lim))
        elif per_group.get(attr):
            # limits judged per group (more than two values): no pooled check gates
            word, sizes, headline, status = _per_group_headline(attr, per_group[attr],
                                                                by_group, named)
        # each unprivileged value against the reference, where the challenger is worse
        groups = [f"less fair for {g}: {_size(m, v[1])}" for (a, g, m), v in verdicts.items()
                  if a == attr and g != "unprivileged" and v[0] == "less fair"]
        bad = word == "less fair" or bool(groups)
        status = "evidence" if bad else (status or "ok")
        out.append(DecisionLine(
            audit="group", attribute=attr, metric="baseline",
            what=f"challenger against baseline: {word}",
            status=status,
            far="; ".join(([f"baseline {named}"] if named else []) + sizes + groups[:2]),
            nxt=(f"{attr}: the paired differences (model {DIFFERENCE_MODEL}) in "
                 "metrics.parquet" if bad else
                 f"{attr}: the limit checks of each group (Limits); more rows decide"
                 if status == "inconclusive" else
                 "Nothing: the challenger is not less fair than the baseline on these rows."),
            anchor=view.anchor, headline=headline))
    note = info.get("note")
    if out and note:  # the other audits did not look at the baseline: say so
        compared = " and ".join(info.get("compared_in") or ["group"])
        out.append(DecisionLine(audit="group", attribute="*", metric="baseline",
                                what=f"challenger against baseline: {compared} metrics only",
                                status="ok", far=note, nxt="Nothing to do; read the other "
                                "audits as the audited decision's alone.",
                                anchor=view.anchor))
    return out


def decision_lines(view: DecisionInput) -> list[DecisionLine]:
    """One line per attribute that no group limit covers: a clear gap or none; with a
    baseline decision, first the comparison (:func:`baseline_lines`)."""
    first = baseline_lines(view)
    # the audited decision's rows (a baseline's and the differences carry a model)
    idx = {(str(r.get("attribute")), str(r.get("group")), str(r.get("metric"))): r
           for r in view.rows if unpaired(r)}
    attrs = [a for a in dict.fromkeys(a for a, _, _ in idx) if a not in ("*", "None")]
    out = []
    for attr in attrs:
        if attr in view.covered:
            continue
        di = idx.get((attr, "unprivileged", "disparate_impact"))
        spd = idx.get((attr, "unprivileged", "statistical_parity_difference"))
        gaps, far = [], "no group comparison"
        for m in DECISION_KEYS:
            r = idx.get((attr, "unprivileged", m))
            if r is None or (r.get("status") or "ok") != "ok":
                continue
            lo, hi = num(r.get("lower")), num(r.get("upper"))
            fair = 1.0 if m == "disparate_impact" else 0.0
            if lo is not None and hi is not None and (lo > fair or hi < fair):
                gaps.append(m)
        if di is not None and num(di.get("value")) is not None:
            v = float(di["value"])
            far = (f"disparate impact {row_number(di)}: {fmt_number(abs(_FOUR_FIFTHS - v))} "
                   f"{'below' if v < _FOUR_FIFTHS else 'above'} the four-fifths line 0.8")
        elif spd is not None and num(spd.get("value")) is not None:
            far = f"selection-rate difference {row_number(spd)}"
        incon = any((r.get("status") == "inconclusive") for (a, g, m), r in idx.items()
                    if a == attr and m in DECISION_KEYS)
        status = "evidence" if gaps else "inconclusive" if incon else "ok"
        nxt = (f"{attr}: the ranked metrics in the group section" if gaps
               else "Too few rows in a group to tell; see the group section" if incon
               else "Nothing: no clear gap in selection rate, disparate impact or TPR.")
        what = ("clear gap: " + ", ".join(m.replace("_", " ") for m in gaps)) if gaps \
            else "selection rate, disparate impact, TPR"
        out.append(DecisionLine(audit="group", attribute=attr, metric="group", what=what,
                                status=status, far=far, nxt=nxt, anchor=view.anchor,
                                number=di or spd))
    return first + out
