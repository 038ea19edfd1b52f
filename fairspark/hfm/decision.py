"""The hfm audit's lines of the report's decision box (``SPEC.decision_lines``)."""

from __future__ import annotations

from fairspark.audits import DecisionInput, DecisionLine, fmt_number, num
from fairspark.audits.lines import row_number
from fairspark.numbers import fmt_fixed
from fairspark.status import FAILED_STATUSES

__all__ = ["decision_lines"]


def decision_lines(view: DecisionInput) -> list[DecisionLine]:
    """One line per attribute: df against the range seen on the reference datasets."""
    # the audited decision's rows (a baseline's rows and the differences have a model)
    idx = {(str(r.get("attribute")), str(r.get("metric"))): r for r in view.rows
           if r.get("group") in ("binary", None) and not r.get("model")}
    attrs = [a for a, m in idx if m == "df" and a != "*"]
    out = []
    for attr in attrs:
        d, d_f, df = (idx.get((attr, m)) for m in ("D", "D_f", "df"))
        v = num((df or {}).get("value"))
        lo = num((df or {}).get("lower"))
        status = str((df or {}).get("status") or "ok")
        if v is None or status in FAILED_STATUSES:
            far, st = f"df not computed: {(df or {}).get('detail') or 'failed'}", "failed"
        else:
            more = "more" if v > 0 else "less"
            dv = row_number(d) if d else fmt_number(None)
            dfv = row_number(d_f) if d_f else fmt_number(None)
            far = (f"df {row_number(df, signed=True)}: the decisions separate the groups "
                   f"{fmt_fixed(100 * abs(v), 1)}% {more} than the labels (D_f {dfv} vs D {dv})")
            if v == 0:
                far = ("df 0: the decisions separate the groups as much as the labels "
                       f"(D_f = D = {dv})")
            # the HFM section's own rule: evidence only above the range of df seen on
            # the reference datasets (fairspark.hfm.report.REFERENCE), judged on the
            # lower bound when there is one
            ref_lo, ref_hi = _reference_range()
            low = lo if lo is not None else v
            st = "evidence" if low > ref_hi else "ok"
            where = ("above" if v > ref_hi else "below" if v < ref_lo else "within")
            far += (f"; {where} the range seen on the reference datasets "
                    f"({fmt_fixed(ref_lo, 3, signed=True)} to {fmt_fixed(ref_hi, 3, signed=True)})"
                    + (", but not its whole interval" if where == "above" and st == "ok"
                       else ""))
        dr = idx.get((attr, "DR"))
        if dr is not None and num(dr.get("value")) is not None:
            far += f"; discriminative risk {fmt_number(float(dr['value']))}"
        nxt = (f"{attr}: the HFM witness pair (the rows the decisions pull apart)"
               if st == "evidence" else
               "Nothing: the model adds no individual-level separation to the data."
               if st == "ok" and (v is None or v <= 0) else
               "Nothing urgent: df is within what the reference datasets show; "
               "watch its trend." if st == "ok" else
               "Nothing: the model adds no individual-level separation to the data.")
        out.append(DecisionLine(audit="hfm", attribute=attr, metric="df", what="D, D_f, df",
                                status=st, far=far, excess=v, nxt=nxt, anchor=view.anchor,
                                number=df))
    return out


def _reference_range() -> tuple[float, float]:
    """(lowest, highest) df on the reference datasets (the HFM section's scale)."""
    from fairspark.hfm.report import REFERENCE

    dfs = [float(r[3]) for r in REFERENCE]
    return min(dfs), max(dfs)
