"""The mdfa audit's lines of the report's decision box (``SPEC.decision_lines``)."""

from __future__ import annotations

import re

from fairspark.audits import DecisionInput, DecisionLine, fmt_number, num
from fairspark.audits.lines import row_number
from fairspark.status import FAILED_STATUSES

__all__ = ["decision_lines"]


def decision_lines(view: DecisionInput) -> list[DecisionLine]:
    """One line per attribute: gamma_max against decisions that use the features alone."""
    info = view.info.get("attributes") or {}
    out = []
    for r in view.rows:
        model = r.get("model")  # the audited decision's rows (NaN read back from Parquet)
        if r.get("metric") != "gamma_max" or not (model is None or model != model):
            continue
        attr = str(r.get("attribute"))
        verdict = str((info.get(attr) or {}).get("verdict") or r.get("detail") or "")
        status = str(r.get("status") or "ok")
        v = num(r.get("value"))
        if status in FAILED_STATUSES or v is None:
            st, far = "failed", f"not computed: {r.get('detail') or 'failed'}"
        elif verdict.startswith("not judged"):
            st, far = "inconclusive", f"gamma_max {row_number(r)}: {verdict}"
        else:
            # "evidence of ..." vs "no evidence of ..." (fairspark.mdfa.results)
            st = "evidence" if re.search(r"(?<!no )evidence of", verdict) else "ok"
            null = (info.get(attr) or {}).get("null") or {}
            ref, bound = num(null.get("mean")), num(null.get("bound"))
            p, draws = num(null.get("p_value")), null.get("draws")
            # one name per quantity (docs/mdfa.md, "Glossary"): gamma_max is the row's
            # value, the larger printed gamma(y); the verdict's bound is on its test
            # statistic, the raw mean of per-split maxima (the null block's observed)
            raw = num(null.get("observed"))
            if ref is not None and bound is not None:
                # the p that decides is the t test's (the bound is its critical value);
                # the rank p beside it in summary.json cannot go below 1 / (K + 1)
                said_p = "" if p is None else (
                    f"; p = {fmt_number(p)}, the t test against {draws} null draws that decides "
                    f"(a rank test over {draws} draws cannot give p below "
                    f"{fmt_number(1 / (int(draws) + 1))})" if draws else f"; p = {fmt_number(p)}")
                far = (f"gamma_max {row_number(r)} above the features-only reference (test "
                       f"statistic, the raw mean over splits of the larger gamma(y), "
                       f"{fmt_number(v if raw is None else raw)} against "
                       f"{fmt_number(ref)} for decisions that depend on the features alone; "
                       f"evidence when the test statistic is above {fmt_number(bound)}{said_p})")
                lo, hi = num(r.get("lower")), num(r.get("upper"))
                if st == "evidence" and lo is not None and hi is not None and lo <= 0:
                    far += (f"; the decisions on these rows depend on {attr} beyond the "
                            f"features, but how much in the population is not pinned down "
                            f"(95% interval {row_number(r, 'ci_low')} to "
                            f"{row_number(r, 'ci_high')} holds 0)")
            else:
                far = (f"gamma_max {row_number(r)} over splits (0 = decisions reveal nothing of "
                       f"{attr})")
        m = re.search(r"the weights leave the groups unbalanced in (\d+) of (\d+) splits",
                      verdict)
        if m:  # the balance caveat belongs in the line, not only in a table cell
            far += (f"; caveat: the weights leave the groups unbalanced in {m.group(1)} of "
                    f"{m.group(2)} splits, so part of gamma is imbalance, not treatment")
        nxt = {"evidence": f"{attr}: mdfa's worst-treated sub-population",
               "inconclusive": f"{attr}: run mdfa with null_draws and splits of at least 3",
               }.get(st, "Nothing: gamma is within what decisions that depend on the "
                         "features alone give.")
        out.append(DecisionLine(audit="mdfa", attribute=attr, metric="gamma_max",
                                what="gamma_max", status=st, far=far, excess=v, nxt=nxt,
                                anchor=view.anchor, number=r))
    return out
