"""A limit rule that judged nothing: its one sentence and its reason.

``fairspark.nightly.gating`` reports every rule that made no check as *"not evaluated
(0 checks: why)"*, on the first screen and in ``summary.json``, never as passed (a
gate that matched nothing is visible).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from fairspark.metrics import BASELINE_MODEL, DIFFERENCE_MODEL
from fairspark.status import Status

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.config_model import LimitRule

__all__ = ["USABLE", "not_evaluated_text", "why_nothing"]

#: statuses of rows whose value a limit may judge (``fairspark.nightly.gating`` too)
USABLE = frozenset({Status.OK, Status.INCONCLUSIVE, Status.NOT_CERTIFIED, Status.TIMED_OUT})


def not_evaluated_text(rule: str, why: str) -> str:
    """The one sentence for a limit (``rule``: its text) that judged nothing: *"limit X:
    not evaluated (0 checks: why)"* (the limits section, the decision box and
    ``summary.json`` alike)."""
    return f"limit {rule}: not evaluated (0 checks: {why})"


def why_nothing(rule: LimitRule, rows: list[dict[str, Any]]) -> str:
    """Why no row matched ``rule``: the details of the rows of its metric that could
    not be judged (e.g. a disparate impact the baseline cannot have because it never
    decides favourably), else that no row of the metric exists."""
    def mine(r: dict[str, Any]) -> bool:
        return (r.get("metric") == rule.metric and not r.get("metric_b")
                and (rule.audit is None or r.get("audit") == rule.audit)
                and (rule.attribute is None or r.get("attribute") == rule.attribute)
                and (rule.group is None or r.get("group") == rule.group))

    cand = [r for r in rows if mine(r)]
    if rule.no_worse_than_baseline is not None:
        # the baseline's own rows say why the paired ones are undefined
        order = (BASELINE_MODEL, DIFFERENCE_MODEL)
        cand = sorted((r for r in cand if r.get("model") in order),
                      key=lambda r: order.index(r.get("model")))
        who = {BASELINE_MODEL: "the baseline", DIFFERENCE_MODEL: "the paired difference"}
    else:
        cand = [r for r in cand if r.get("model") in (None, "")
                or (isinstance(r.get("model"), float) and math.isnan(r["model"]))]
        who = {}
    if not cand:
        where = f" for attribute {rule.attribute!r}" if rule.attribute else ""
        return f"no result row of {rule.metric}{where}"
    whys = []
    for r in cand:
        if r.get("status") in USABLE and r.get("value") is not None:
            continue
        text = str(r.get("detail") or r.get("status") or "no value")
        lead = who.get(r.get("model"), "")
        whys.append(f"{rule.metric} of {lead + ' on ' if lead else ''}{r.get('attribute')}"
                    + (f" / {r.get('group')}" if r.get("group") else "") + f": {text}")
    return "; ".join(list(dict.fromkeys(whys))[:2]) or f"no usable row of {rule.metric}"
