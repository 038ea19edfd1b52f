"""Which group of a per-group limit is the worst: ranked with its uncertainty and size.

One rule, used by the decision box and the Limits section (both read the ``limits``
rows, whose interval is the one the verdict uses):

1. Groups below the minimum support (``limits.min_rank_rows`` rows, default 30, or
   ``limits.min_rank_favourable`` favourable decisions, default 5; the row's
   ``params['rankable']``) are **too small to rank**: still checked, and they may gate,
   but never named worst; they are listed apart with their size.
2. The others by verdict (violated, inconclusive, passed), then by the interval's bound
   nearest the limit: for a violated or inconclusive group the end on the within side
   (how far beyond the limit the group is *at least*), for a passed group the end
   nearest the limit (how little room it has). Larger excess is worse. A group whose
   interval is known only as a point is ranked on its value.

So a tiny group whose point estimate is the lowest but whose interval reaches towards
the limit ranks below a larger group whose whole interval is further beyond it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from fairspark._values import nan_to_none
from fairspark.numbers import fmt_count

__all__ = ["bound_excess", "excess", "limit_params", "rank_key", "rankable", "support_words"]

_ORDER = {"violated": 0, "inconclusive": 1, "passed": 2}


def _get(rule: Any, key: str) -> Any:
    return rule.get(key) if isinstance(rule, Mapping) else getattr(rule, key, None)


def excess(x: float, rule: Any) -> float:
    """Signed distance of ``x`` beyond ``rule`` (> 0: beyond the limit)."""
    parts = []
    worse = _get(rule, "no_worse_than_baseline")
    if worse is not None:  # x is "worse" (further from parity than the baseline)
        parts.append(x - float(_get(worse, "margin") or 0.0))
    if _get(rule, "abs_max") is not None:
        parts.append(abs(x) - float(_get(rule, "abs_max")))
    if _get(rule, "max") is not None:
        parts.append(x - float(_get(rule, "max")))
    if _get(rule, "min") is not None:
        parts.append(float(_get(rule, "min")) - x)
    return max(parts) if parts else -math.inf


def bound_excess(row: Mapping[str, Any], rule: Any) -> float:
    """The excess at the interval's bound nearest the limit (see the module docstring).

    Violated or inconclusive: the smallest excess over ``[lower, upper]`` (the end on
    the within side, or the interval's point nearest the fair middle of a two-sided
    limit); passed: the largest (the end nearest the limit).
    """
    v = nan_to_none(row.get("value"))
    if v is None:
        return -math.inf
    lo, hi = nan_to_none(row.get("lower")), nan_to_none(row.get("upper"))
    if lo is None or hi is None:
        return excess(v, rule)
    if str(row.get("status")) == "passed":
        return max(excess(lo, rule), excess(hi, rule))  # convex: largest at an end
    pts = [lo, hi]
    if _get(rule, "abs_max") is not None:
        pts.append(min(max(0.0, lo), hi))
    elif _get(rule, "min") is not None and _get(rule, "max") is not None:
        mid = (float(_get(rule, "min")) + float(_get(rule, "max"))) / 2
        pts.append(min(max(mid, lo), hi))
    return min(excess(x, rule) for x in pts)


def limit_params(row: Mapping[str, Any]) -> dict[str, Any]:
    """A ``limits`` row's ``params`` as a dict (JSON text or a mapping; {} if unreadable)."""
    p = row.get("params")
    if isinstance(p, Mapping):
        return dict(p)
    try:
        out = json.loads(p or "{}")
    except (TypeError, ValueError):
        return {}
    return out if isinstance(out, dict) else {}


def rankable(row: Mapping[str, Any]) -> bool:
    """Whether a limit row's group is large enough to be named worst (older rows: yes)."""
    return limit_params(row).get("rankable") is not False


def rank_key(row: Mapping[str, Any], rule: Any) -> tuple[int, float]:
    """Sort key of a limit row, worst first (ascending)."""
    return (_ORDER.get(str(row.get("status")), 3), -bound_excess(row, rule))


def support_words(row: Mapping[str, Any]) -> str:
    """``n 800, 120 favourable`` (empty when the row does not carry its counts)."""
    p = limit_params(row)
    if p.get("n") is None:
        return ""
    fav = p.get("favourable")
    return f"n {fmt_count(p['n'])}" + (f", {fmt_count(fav)} favourable" if fav is not None else "")
