"""The worst group's trend series where a limit is judged per group.

On an audit judged per group (``AuditSpec.limits_per_group``: the group audit) a
limit without ``group`` gates on every unprivileged value against the reference; the
pooled ``unprivileged`` series the trends draw is then only the extra view that never
gates. So for each (limit, attribute) judged per group, the trends also draw the
**worst group's series**: tonight's worst group, ranked by the rule of
:mod:`fairspark.nightly.worst` (the one the decision box and the Limits section use),
followed back through the earlier runs' ``limits`` rows of that same group, limit and
attribute. Its points are the ``limits`` rows' values with the interval the verdict
used (adjusted under Holm or BH), and the limit is drawn on it; the pooled series of
that metric keeps no line of that limit.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from fairspark._values import nan_to_none

if TYPE_CHECKING:  # pragma: no cover
    from fairspark.audits.spec import AuditSpec

__all__ = ["breached", "limit_excess", "limit_lines", "pooled_superseded", "rule_matches",
           "series_rules", "worst_group_series"]

_POOLED = frozenset({"unprivileged", "privileged", "all"})
_KEEP = ("attribute", "group", "metric", "metric_b", "model", "value", "lower", "upper",
         "status")


def worst_rows(rows: list[Mapping[str, Any]], specs: Mapping[str, AuditSpec]
               ) -> list[tuple[Mapping[str, Any], dict[str, Any]]]:
    """Tonight's worst group's ``limits`` row (and its params) per (limit, attribute)
    judged per group: gating checks of one unprivileged value, ranked by
    :func:`fairspark.nightly.worst.rank_key` among the groups large enough to rank (all of
    them when none is)."""
    from fairspark.nightly.worst import limit_params, rank_key, rankable

    per_group = {n for n, s in specs.items() if s.limits_per_group}
    by: dict[tuple[str, str], list[tuple[Mapping[str, Any], dict[str, Any]]]] = {}
    for r in rows:
        if r.get("audit") != "limits" or r.get("group") in _POOLED or r.get("group") is None:
            continue
        p = limit_params(r)
        if p.get("role", "gate") != "gate" or p.get("source_audit") not in per_group:
            continue
        by.setdefault((str(r.get("metric_b")), str(r.get("attribute"))), []).append((r, p))
    out = []
    for found in by.values():
        ranked = [t for t in found if rankable(t[0])] or found
        out.append(min(ranked, key=lambda t: rank_key(t[0], t[1].get("rule") or {})))
    return out


def worst_group_series(history: pd.DataFrame, rows: list[Mapping[str, Any]], *,
                       run_date: str, config_hash: str, version: str,
                       schema_hash: str | None, specs: Mapping[str, AuditSpec]
                       ) -> pd.DataFrame:
    """The worst groups' series, one row per (series, run date), ready for the trends.

    Columns as :func:`fairspark.report.trends.trend_frame`'s plus ``limit_rule`` (the
    rule as JSON, drawn on the panel) and ``source_audit``; the series is named
    ``<audit> · <attribute> · <metric> · worst group <group>``.
    """
    frames = []
    past = (history[history["audit"] == "limits"] if len(history) and "audit" in history
            else pd.DataFrame())
    for r, p in worst_rows(rows, specs):
        now = {**{k: r.get(k) for k in _KEEP}, "audit": "limits", "run_date": run_date,
               "config_hash": config_hash, "fairspark_version": version,
               "schema_hash": schema_hash}
        same = pd.DataFrame()
        if len(past):
            key = ((past["attribute"].astype(str) == str(r.get("attribute")))
                   & (past["group"].astype(str) == str(r.get("group")))
                   & (past["metric"].astype(str) == str(r.get("metric")))
                   & (past["metric_b"].astype(str) == str(r.get("metric_b"))))
            same = past[key]
        s = pd.concat([same, pd.DataFrame([now])], ignore_index=True) if len(same) else (
            pd.DataFrame([now]))
        s = s.drop_duplicates(subset=["run_date"], keep="last")
        source = str(p.get("source_audit"))
        s["series"] = (f"{source} · {r.get('attribute')} · {r.get('metric')} · "
                       f"worst group {r.get('group')}")
        s["limit_rule"] = json.dumps(p.get("rule") or {}, sort_keys=True)
        s["source_audit"] = source
        frames.append(s)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def pooled_superseded(frame: pd.DataFrame) -> set[tuple[str, str, str, str]]:
    """(audit, attribute, metric, rule text) whose limit gates per group tonight: the
    pooled series of those draws no line of that limit (it is not what gates)."""
    if "limit_rule" not in frame:
        return set()
    w = frame[frame["limit_rule"].notna()]
    return {(str(x["source_audit"]), str(x["attribute"]), str(x["metric"]), str(x["metric_b"]))
            for _, x in w.iterrows()}


def limit_excess(value: Any, rule: Any) -> float:
    """Signed distance of ``value`` beyond ``rule`` (larger = further beyond the limit)."""
    v = nan_to_none(value)
    if v is None:
        return -math.inf
    get = (lambda k: rule.get(k)) if isinstance(rule, dict) else (lambda k: getattr(rule, k))
    parts = []
    worse = get("no_worse_than_baseline")
    if worse is not None:  # the value is "worse": beyond when above the margin
        margin = worse.get("margin") if isinstance(worse, dict) else worse.margin
        parts.append(v - float(margin or 0.0))
    if get("abs_max") is not None:
        parts.append(abs(v) - float(get("abs_max")))
    if get("max") is not None:
        parts.append(v - float(get("max")))
    if get("min") is not None:
        parts.append(float(get("min")) - v)
    return max(parts) if parts else -math.inf


def rule_matches(rule: Any, series: pd.Series, specs: Mapping[str, AuditSpec]) -> bool:
    get = (lambda k: rule.get(k)) if isinstance(rule, dict) else (lambda k: getattr(rule, k))
    if get("metric") != series["metric"]:
        return False
    for key in ("audit", "attribute", "model"):
        want = get(key)
        if want is not None and str(series.get(key)) != str(want):
            return False
    spec = specs.get(str(series["audit"]))
    # the group of an audit's trend series: its spec's view_group
    group = get("group") or (spec.view_group if spec is not None else None)
    return group is None or str(series.get("group")) == str(group)


def series_rules(rules: list[Any], series: pd.Series, specs: Mapping[str, AuditSpec],
                 superseded: set[tuple[str, str, str, str]]) -> list[Any]:
    """The limit rules of one series: a worst group's series its own rule; another series
    every rule that matches it, except a rule judged per group on a pooled series
    (:mod:`fairspark.nightly.trend_groups`)."""
    from fairspark.config_model import LimitRule
    from fairspark.nightly.gating import rule_text

    own = series.get("limit_rule")
    if isinstance(own, str) and own:
        return [json.loads(own)]
    out = []
    for rule in rules:
        if not rule_matches(rule, series, specs):
            continue
        obj = LimitRule.model_validate(rule) if isinstance(rule, dict) else rule
        if obj.group is None and (str(series.get("audit")), str(series.get("attribute")),
                                  str(series.get("metric")), rule_text(obj)) in superseded:
            continue
        out.append(rule)
    return out


def breached(rules: list[Any], series: pd.Series, specs: Mapping[str, AuditSpec],
             superseded: set[tuple[str, str, str, str]] = frozenset()) -> bool:
    """Tonight's value of a series lies beyond one of the limits that match it."""
    return any(limit_excess(series.get("value"), rule) > 0
               for rule in series_rules(rules, series, specs, superseded))


def limit_lines(rules: list[Any], series: pd.Series, specs: Mapping[str, AuditSpec],
                superseded: set[tuple[str, str, str, str]] = frozenset()) -> list[float]:
    """The limit values drawn on one series' panel."""
    out: list[float] = []
    for rule in series_rules(rules, series, specs, superseded):
        get = (lambda k, r=rule: r.get(k)) if isinstance(rule, dict) else (
            lambda k, r=rule: getattr(r, k))
        if get("abs_max") is not None:
            out += [float(get("abs_max")), -float(get("abs_max"))]
        out += [float(get(k)) for k in ("min", "max") if get(k) is not None]
    return out
