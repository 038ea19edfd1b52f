"""The decision box's line and the row rule: what an audit's ``decision_lines``
returns (see :class:`fairspark.audits.AuditSpec`).

The report's decision box (``fairspark.report.decision``) collects these lines from
every audit; an audit builds them with :func:`num` and :func:`fmt_number`, so every
number of the box is written the same way. Every printed number goes through
:func:`fairspark.numbers.format_number` (the one number rule; :func:`fmt_number` and
:func:`fmt_plain` are its forms, importable from here too).

A number printed from a result row (``metrics.parquet``) is written by
:func:`row_number`, wherever it appears (decision box, verdicts, sections): the row
decides its precision (:func:`row_decimals`) and sign, so one row's number reads the
same everywhere. It comes back marked with the row it names; :func:`marks_to_html`
turns the marks of a rendered page into ``<span class="num" data-audit=...
data-attribute=... data-group=... data-metric=... data-check=... data-stat=...>``
(``data-check`` is the row's ``metric_b``, ``data-stat`` one of ``value``,
``ci_low``, ``ci_high``), and :func:`plain` drops them from text that is not HTML.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fairspark._values import nan_to_none
from fairspark.numbers import fmt_fixed, fmt_number, fmt_plain

__all__ = ["STATUS_ORDER", "DecisionLine", "fmt_number", "fmt_plain", "mark", "marks_to_html",
           "num", "plain", "row_decimals", "row_number", "row_text", "short_metric",
           "use_least_decimals"]

#: status -> (sort rank, icon shown beside the word; colour is never the only signal)
STATUS_ORDER: dict[str, tuple[int, str]] = {
    "violated": (0, "✖"), "failed": (1, "✖"), "evidence": (2, "▲"),
    "inconclusive": (3, "?"), "passed": (4, "✔"), "ok": (5, "✔"),
}


def num(x: Any) -> float | None:
    """A row's number as a float, ``None`` for a missing or NaN one."""
    return nan_to_none(x)


#: the row column each ``data-stat`` reads
STATS = {"value": "value", "ci_low": "lower", "ci_high": "upper"}
#: the key columns a marked number names (``metric_b`` is written ``data-check``)
_KEY = ("audit", "attribute", "group", "metric", "metric_b", "model")
_OPEN, _MID, _CLOSE = "\ue000", "\ue001", "\ue002"
_MARK_RE = re.compile(f"{_OPEN}([A-Za-z0-9_=-]*){_MID}([^{_CLOSE}]*){_CLOSE}")
_TAG_RE = re.compile(r"<[^>]*>")


def _field(row: Any, name: str) -> Any:
    """A row's column: a dict's key or a :class:`~fairspark.audits.base.MetricRow`'s field."""
    return row.get(name) if isinstance(row, Mapping) else getattr(row, name, None)


def signed_metric(metric: str) -> bool:
    """Whether a metric's number is written with its sign (``+0.009``): differences."""
    from fairspark.metrics import CATALOGUE

    spec = CATALOGUE.get(metric)
    return bool(spec and spec.kind in ("difference", "combined")
                and metric != "equalized_odds_difference")


#: the fewest decimals of an audit's numbers (default 3): each registered audit's
#: ``AuditSpec.decimals``, set by the registry when it loads the audits
#: (:func:`use_least_decimals`); building a spec sets nothing
LEAST_DECIMALS: dict[str, int] = {}


def use_least_decimals(decimals: Mapping[str, int]) -> None:
    """Set the fewest decimals of each audit's numbers, audit name -> decimals (the
    registry calls it once, with the ``decimals`` of the specs it loaded)."""
    LEAST_DECIMALS.clear()
    LEAST_DECIMALS.update(decimals)


def row_decimals(row: Any, *, least: int | None = None, most: int = 12) -> int:
    """Decimals that keep a row's printed value inside its printed interval.

    Three by default (``least``, else :data:`LEAST_DECIMALS` of the row's audit); more
    while rounding would put the value outside the interval
    or print a non-empty interval as one point (e.g. a between-group GEI of 1.47e-05
    in [1.2e-05, 1.7e-05] would read "0.000 [0.000, 0.000]"), or a value that is not
    0 as 0.
    """
    if least is None:
        least = LEAST_DECIMALS.get(str(_field(row, "audit")), 3)
    v, lo, hi = (num(_field(row, k)) for k in ("value", "lower", "upper"))
    if v is None or not math.isfinite(v):
        return least
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        lo = hi = v
    for d in range(least, most + 1):
        rv, rlo, rhi = round(v, d), round(lo, d), round(hi, d)
        if rlo <= rv <= rhi and (rlo < rhi or lo == hi) and (
                rv != 0 or v == 0 or rlo < 0 < rhi):
            return d
    return most


def row_text(row: Any, stat: str = "value", *,
             signed: bool | None = None) -> str:
    """A row's ``value`` / ``ci_low`` / ``ci_high`` as every part of the report prints it.

    Parameters
    ----------
    row:
        A result row (``metrics.parquet`` as a dict, or a ``MetricRow``).
    stat:
        ``value``, ``ci_low`` (the row's ``lower``) or ``ci_high`` (``upper``).
    signed:
        Write the sign of a positive number; ``None``: for differences
        (:func:`signed_metric`).
    """
    if signed is None:
        signed = signed_metric(str(_field(row, "metric")))
    return fmt_fixed(num(_field(row, STATS[stat])), row_decimals(row), signed=signed)


def _key_text(v: Any) -> str | None:
    """A key column as text; ``None`` for a missing one (``None`` or a frame's NaN)."""
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def mark(text: str, row: Any, stat: str) -> str:
    """``text`` marked as the ``stat`` of ``row`` (see :func:`marks_to_html`)."""
    key = [_key_text(_field(row, k)) for k in _KEY] + [stat]
    code = base64.urlsafe_b64encode(json.dumps(key).encode("utf-8")).decode("ascii")
    return f"{_OPEN}{code}{_MID}{text}{_CLOSE}"


def row_number(row: Any, stat: str = "value", *,
               signed: bool | None = None) -> str:
    """:func:`row_text` marked with the row it names (``–`` for a missing number)."""
    text = row_text(row, stat, signed=signed)
    return text if text == "–" else mark(text, row, stat)


def _span(m: re.Match[str]) -> str:
    key = json.loads(base64.urlsafe_b64decode(m.group(1)).decode("utf-8"))
    names = ("audit", "attribute", "group", "metric", "check", "model", "stat")
    attrs = "".join(f' data-{n}="{html.escape(v, quote=True)}"'
                    for n, v in zip(names, key, strict=True) if v is not None)
    return f'<span class="num"{attrs}>{m.group(2)}</span>'


def marks_to_html(page: str) -> str:
    """Every mark of a rendered page as a ``<span class="num" data-...>``; a mark inside
    a tag (an attribute's text: ``alt``, ``title``) keeps its text only."""
    out, pos = [], 0
    for t in _TAG_RE.finditer(page):
        out.append(_MARK_RE.sub(_span, page[pos:t.start()]))
        out.append(plain(t.group(0)))
        pos = t.end()
    out.append(_MARK_RE.sub(_span, page[pos:]))
    return "".join(out)


def plain(text: str) -> str:
    """``text`` without its marks (for logs, the console and anything not HTML)."""
    return _MARK_RE.sub(lambda m: m.group(2), text)


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
    whose change since the previous run is judged; ``headline`` (optional) is one
    sentence the report puts at the top of the decision box, above the table, so a
    phone's first screen answers the run's main question (e.g. the challenger against
    the baseline).
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
    headline: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The line as the report's template and ``summary['previous']`` read it."""
        rank, icon = STATUS_ORDER.get(self.status, (6, "•"))
        n = self.number or {}
        return {"audit": self.audit, "attribute": self.attribute, "metric": self.metric,
                "what": self.what, "status": self.status, "icon": icon, "rank": rank,
                "far": self.far, "excess": self.excess, "next": self.nxt,
                "anchor": None if self.status in ("passed", "ok") else self.anchor,
                "gate_word": self.gate_word, "change": "", "headline": self.headline,
                # the number the change since the previous run is judged on
                "number": {"metric": n.get("metric"), "value": num(n.get("value")),
                           "lower": num(n.get("lower")), "upper": num(n.get("upper")),
                           "group": n.get("group")}}
