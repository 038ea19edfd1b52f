"""The decision box's line and the one number formatter: what an audit's
``decision_lines`` returns (see :class:`fairspark.audits.AuditSpec`).

The report's decision box (``fairspark.report.decision``) collects these lines from
every audit; an audit builds them with :func:`num` and :func:`fmt_number`, so every
number of the box is written the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fairspark._values import nan_to_none

__all__ = ["STATUS_ORDER", "DecisionLine", "fmt_number", "num", "short_metric"]

#: status -> (sort rank, icon shown beside the word; colour is never the only signal)
STATUS_ORDER: dict[str, tuple[int, str]] = {
    "violated": (0, "✖"), "failed": (1, "✖"), "evidence": (2, "▲"),
    "inconclusive": (3, "?"), "passed": (4, "✔"), "ok": (5, "✔"),
}


def num(x: Any) -> float | None:
    """A row's number as a float, ``None`` for a missing or NaN one."""
    return nan_to_none(x)


def fmt_number(x: float | None, signed: bool = False) -> str:
    """A number as the decision box writes it (3 significant digits, a real minus)."""
    if x is None:
        return "–"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return (f"{x:+.3g}" if signed else f"{x:.3g}").replace("-", "−")


#: short names of the metrics a limit line names before its value
_SHORT = {"disparate_impact": "DI", "statistical_parity_difference": "SPD",
          "average_odds_difference": "AOD", "equal_opportunity_difference": "EOD"}


def short_metric(metric: str) -> str:
    """``DI``, ``SPD``, ... or the metric's name with spaces (``tpr difference``)."""
    return _SHORT.get(metric, metric.replace("_", " "))


@dataclass(frozen=True)
class DecisionLine:
    """One line of the decision box (an audit's ``decision_lines`` returns these).

    ``what`` names the check, ``far`` says how far the number is from its limit or
    fair value, ``nxt`` the one thing to look at next, ``anchor`` the report section
    it links to; ``excess`` (> 0: beyond) orders the bad lines; ``number`` is the row
    whose change since the previous run is judged.
    """

    audit: str
    attribute: str
    metric: str
    what: str
    status: str
    far: str
    nxt: str
    anchor: str | None = None
    excess: float | None = None
    gate_word: str = ""
    number: Mapping[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The line as the report's template and ``summary['previous']`` read it."""
        rank, icon = STATUS_ORDER.get(self.status, (6, "•"))
        n = self.number or {}
        return {"audit": self.audit, "attribute": self.attribute, "metric": self.metric,
                "what": self.what, "status": self.status, "icon": icon, "rank": rank,
                "far": self.far, "excess": self.excess, "next": self.nxt,
                "anchor": None if self.status in ("passed", "ok") else self.anchor,
                "gate_word": self.gate_word, "change": "",
                # the number the change since the previous run is judged on
                "number": {"metric": n.get("metric"), "value": num(n.get("value")),
                           "lower": num(n.get("lower")), "upper": num(n.get("upper")),
                           "group": n.get("group")}}
