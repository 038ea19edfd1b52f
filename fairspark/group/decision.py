"""The group audit's lines of the report's decision box (``SPEC.decision_lines``)."""

from __future__ import annotations

from fairspark.audits import DecisionInput, DecisionLine, fmt_number, num
from fairspark.audits.lines import row_number

__all__ = ["DECISION_KEYS", "decision_lines"]

#: the comparisons whose clear gap is evidence in the decision box (no limit configured)
DECISION_KEYS = ("statistical_parity_difference", "disparate_impact", "tpr_difference")
_FOUR_FIFTHS = 0.8


def decision_lines(view: DecisionInput) -> list[DecisionLine]:
    """One line per attribute that no group limit covers: a clear gap or none."""
    idx = {(str(r.get("attribute")), str(r.get("group")), str(r.get("metric"))): r
           for r in view.rows}
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
    return out
