"""Limits that gate a nightly run, judged on each number's own uncertainty.

Every limit rule (``limits.rules`` in the config) is checked against every result row
it matches. How a row is judged is its audit's ``AuditSpec.interval``; which rows a
rule without ``group`` judges, its ``AuditSpec.limits_per_group``. A check is one of:

- **statistical** (``interval: confidence``: group metrics with confidence intervals,
  mdfa's band over splits, correlation estimates): two one-sided tests from the row's
  interval. For a limit ``value <= L`` the p-value of "violated" is ``1 - Phi((v - L) /
  se)`` and of "passed" ``Phi((v - L) / se)``, with ``se`` taken from the interval's
  half-width on the side facing the limit (``(v - lower) / z`` or ``(upper - v) / z``, z
  of the interval's level). ``abs_max`` checks both sides (intersection-union: passed
  needs both). The p-values of all statistical checks of a run form one family and are
  corrected together (Holm, default, or Benjamini-Hochberg); a check is *violated* when
  its "violated" hypothesis is rejected, *passed* when its "passed" hypothesis is, and
  *inconclusive* otherwise. With ``correction: none`` and alpha = (1 - level) / 2, a
  one-sided check is violated exactly when the interval lies entirely beyond the limit,
  and passed exactly when it lies entirely within. Under any correction the ``limits``
  row carries the **adjusted interval** instead (:func:`adjusted_interval`): the
  interval the verdict uses, so that "violated" means it lies wholly beyond the limit,
  "passed" wholly within and "inconclusive" that it straddles; the source row's own
  interval is in its ``params`` (``own_interval``).
- **bounds** (``interval: bounds``: HFM): ``[lower, upper]`` is a certified interval (or
  the approximation, an upper bound of the exact value): violated when it lies entirely
  outside the limit, passed when entirely inside, inconclusive when it straddles. No
  correction: these are not random.

**Per group.** On the group audit (``limits_per_group``) a rule without ``group`` is
checked on every unprivileged value against the reference (privileged) group wherever
the audit has those rows (``multi_valued``, an attribute or intersection with more than
one unprivileged value): each comparison is one check, named by its group, and every one
counts in the multiple-testing family. The pooled view (``group = unprivileged``, all
unprivileged values together) is kept as an extra check of role ``pooled``: judged on
its own p-values, outside the family, and it never gates. A binary attribute has one
unprivileged value and its pooled row is the check.

**Persistence.** Every violated check counts, from the history of published
``metrics.parquet`` rows, how many runs in a row it has been violated (this run
included; a run without this check breaks the chain). It *would gate* when that count
reaches the rule's ``persistence``; it *gates* (the run exits 3) only when failing on a
violation is on (``limits.fail_on_violation``, ``--no-fail-on-violation``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np

from fairspark._values import params_json
from fairspark.audits.base import MetricRow
from fairspark.constants import DEFAULT_INTERVAL_LEVEL
from fairspark.metrics import (
    BASELINE_MODEL,
    BASELINES,
    CATALOGUE,
    DIFFERENCE_MODEL,
    DISTANCE_MODEL,
    metric_range,
)
from fairspark.nightly.not_evaluated import USABLE, not_evaluated_text, why_nothing
from fairspark.numbers import fmt_detail, fmt_setting
from fairspark.stats import adjust_pvalues, family_level, normal_quantile
from fairspark.status import Verdict, verdict_counts

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping

    import pandas as pd

    from fairspark.audits.spec import AuditSpec
    from fairspark.config_model import LimitRule, LimitsConfig

__all__ = ["NOT_EVALUATED", "Check", "adjusted_interval", "evaluate_limits", "gate_word",
           "interval_label", "limits_summary", "rule_text"]

#: statuses of rows whose value a limit may judge
_USABLE = USABLE
#: the normal CDF of the tests (its quantile: fairspark.stats.normal_quantile)
_N = NormalDist()
#: the group audit's rows that are not one unprivileged value against the reference
_POOLED_GROUPS = frozenset({"unprivileged", "privileged", "all"})
#: the rows of a baseline comparison (``columns.baseline``), judged only by a rule that
#: names their model or by ``no_worse_than_baseline``
_PAIRED_MODELS = frozenset({BASELINE_MODEL, DIFFERENCE_MODEL, DISTANCE_MODEL})
#: role of a check: "gate" (may gate the run) or "pooled" (the extra pooled view)
GATE, POOLED = "gate", "pooled"
#: ``summary.json``'s ``limits.status`` when no rule made a check
NOT_EVALUATED = "not evaluated"


def rule_text(rule: LimitRule) -> str:
    """The limit in words, e.g. ``|x| <= 0.1`` or ``0 <= x <= 0.5``."""
    if rule.no_worse_than_baseline is not None:
        return (f"{rule.metric} no worse than baseline "
                f"(margin {fmt_setting(rule.no_worse_than_baseline.margin)})")
    if rule.abs_max is not None:
        return f"|{rule.metric}| <= {fmt_setting(rule.abs_max)}"
    if rule.min is not None and rule.max is not None:
        return f"{fmt_setting(rule.min)} <= {rule.metric} <= {fmt_setting(rule.max)}"
    if rule.max is not None:
        return f"{rule.metric} <= {fmt_setting(rule.max)}"
    return f"{rule.metric} >= {fmt_setting(rule.min)}"


@dataclass
class Check:
    """One rule applied to one result row."""

    rule: LimitRule
    row: dict[str, Any]
    kind: str  # "statistical" | "bounds" | "point"
    p_violated: float = 1.0
    p_passed: float = 1.0
    verdict: Verdict = Verdict.INCONCLUSIVE
    consecutive: int = 0
    would_gate: bool = False
    role: str = GATE
    #: the per-check levels the verdict used: "violated" / "passed" is rejected iff its
    #: p-value before correction is at most this (:func:`~fairspark.stats.family_level`)
    alpha_violated: float = 1.0
    alpha_passed: float = 1.0
    #: the interval the verdict uses (:func:`adjusted_interval`); None: no interval
    lower_adj: float | None = None
    upper_adj: float | None = None

    def same_check(self, history: pd.DataFrame) -> pd.DataFrame:
        """This check's rows among earlier runs' ``limits`` rows."""
        r = self.row

        def eq(col: str, v: Any) -> Any:
            return history[col].isna() if v is None else history[col] == v

        model = eq("model", r.get("model"))
        if self.rule.no_worse_than_baseline is not None:  # written as the difference's before
            model = history["model"].isin([DISTANCE_MODEL, DIFFERENCE_MODEL])
        return history[eq("attribute", r["attribute"]) & eq("group", r.get("group"))
                       & eq("metric", r["metric"]) & model
                       & (history["metric_b"] == rule_text(self.rule))]

    def persistence(self, history: pd.DataFrame | None) -> int:
        """Violations in a row, this run included (0 unless this run is violated).

        Counted for every rule, whatever its ``persistence``: the earlier runs of the
        history are walked from the newest, and the chain stops at the first run whose
        row of this check is not violated or that has no row of this check.
        """
        if self.verdict != Verdict.VIOLATED:
            return 0
        consecutive = 1
        if history is None or not len(history) or "run_date" not in history:
            return consecutive
        mine = self.same_check(history)
        status = dict(zip(mine["run_date"].astype(str), mine["status"], strict=True))
        for d in sorted(set(history["run_date"].astype(str)), reverse=True):
            if status.get(d) != Verdict.VIOLATED:
                break
            consecutive += 1
        return consecutive


def _level(row: dict[str, Any]) -> float:
    try:
        params = json.loads(row.get("params") or "{}")
    except (TypeError, ValueError):
        params = {}
    for k in ("ci_level", "band_level", "level"):
        if isinstance(params, dict) and k in params:
            return float(params[k])
    return DEFAULT_INTERVAL_LEVEL


def _log_scale(check: Check) -> bool:
    """Whether a check is judged on the log scale: a ratio (disparate impact, every
    ``*_ratio``) of one decision, with a positive value, interval and limits. Its own
    interval is a log-scale one (``fairspark.metrics._intervals``), so its one-sided
    tests and its adjusted interval are too: the adjusted ends stay positive."""
    r, rule = check.row, check.rule
    spec = CATALOGUE.get(str(r.get("metric")))
    if spec is None or spec.kind != "ratio" or rule.no_worse_than_baseline is not None:
        return False
    vals = [r.get("value"), r.get("lower"), r.get("upper"), *(b for b, _ in _sides(rule))]
    return all(isinstance(x, int | float) and math.isfinite(x) and x > 0 for x in vals)


def _scaled(check: Check) -> tuple[float, float | None, float | None, list[tuple[float, bool]]]:
    """(value, lower, upper, one-sided limits) on the scale the check is judged on."""
    r = check.row
    v, lo, hi, sides = r["value"], r.get("lower"), r.get("upper"), _sides(check.rule)
    if _log_scale(check):
        return (math.log(v), math.log(lo), math.log(hi),
                [(math.log(b), up) for b, up in sides])
    return v, lo, hi, sides


def _one_sided(v: float, lo: float | None, hi: float | None, z: float, *, limit: float,
               upper_limit: bool) -> tuple[float, float]:
    """(p_violated, p_passed) for ``v <= limit`` (upper_limit) or ``v >= limit``."""
    if upper_limit:
        excess = v - limit  # > 0 looks like a violation
        se = ((v - lo) if excess > 0 else (hi - v)) / z if lo is not None and hi is not None else 0
    else:
        excess = limit - v
        se = ((hi - v) if excess > 0 else (v - lo)) / z if lo is not None and hi is not None else 0
    if not se or se <= 0 or not math.isfinite(se):
        # no sampling error: the value is exact, and a value at the limit is within it
        # (limits are inclusive: an identical baseline passes a margin-0 no-worse check)
        return (0.0, 1.0) if excess > 0 else (1.0, 0.0)
    t = excess / se
    return 1.0 - _N.cdf(t), _N.cdf(t)


def _sides(rule: LimitRule) -> list[tuple[float, bool]]:
    """The one-sided limits of a rule: (limit, ``True`` for a maximum)."""
    if rule.no_worse_than_baseline is not None:  # judged on "worse": at most the margin
        return [(rule.no_worse_than_baseline.margin, True)]
    if rule.abs_max is not None:
        return [(rule.abs_max, True), (-rule.abs_max, False)]
    sides: list[tuple[float, bool]] = []
    if rule.max is not None:
        sides.append((rule.max, True))
    if rule.min is not None:
        sides.append((rule.min, False))
    return sides


def adjusted_interval(check: Check) -> tuple[float | None, float | None]:
    """The interval a statistical check's verdict uses, at its per-check levels.

    The one-sided test of ``v <= L`` takes ``se = h / z`` from the interval's
    half-width ``h`` on the side facing ``L`` (``z`` of the interval's level, see the
    module docstring). At level ``a`` it rejects "violated" exactly when ``(v - L) / se
    >= z_a``, ``z_a = Phi^-1(1 - a)``: when the **lower** end rescaled to ``z_a``, ``v -
    (v - lower) z_a / z``, lies at or above ``L``; and it rejects "passed" exactly when
    the **upper** end ``v + (upper - v) z_a / z`` lies at or below ``L``. A minimum is
    the mirror image. So each printed end is the row's end rescaled from ``z`` to the
    ``z_a`` of the test that end decides, with ``a``:

    - for "violated": :func:`~fairspark.stats.family_level` of the family of "violated" p-values,
      divided by the number of one-sided limits (2 for ``abs_max`` or ``min`` with
      ``max``: their "violated" p is Bonferroni over the two sides);
    - for "passed": :func:`~fairspark.stats.family_level` of the "passed" family
      (intersection-union, no split).

    A ratio (disparate impact, every ``*_ratio``) is judged on the log scale, where its
    own interval is symmetric: value, ends and limits are logged, rescaled as above and
    the ends exponentiated, so they stay positive. Any other catalogue metric's ends
    are clipped to its range (:func:`fairspark.metrics._core.metric_range`), which
    never moves an end across a limit inside the range.

    For a one-sided rule each end decides one test. For a two-sided rule one end faces
    both (e.g. the lower end: "passed" against the minimum, "violated" against the
    maximum); it is taken at the level of the test that decided the check, and at the
    wider of the two when neither did. Then the interval lies wholly beyond the limit
    exactly when the check is violated, wholly within exactly when it is passed, and
    straddles the limit exactly when it is inconclusive. With ``correction: none`` and
    ``alpha = (1 - level) / 2`` a one-sided rule's interval is the row's own.

    Returns
    -------
    (lower, upper)
        ``(None, None)`` when the row has no interval.
    """
    r = check.row
    lo, hi = r.get("lower"), r.get("upper")
    if lo is None or hi is None or any(isinstance(x, float) and math.isnan(x)
                                       for x in (lo, hi)):
        return None, None
    v, lo, hi, sides = _scaled(check)
    z = normal_quantile(0.5 + _level(r) / 2)
    a_v = check.alpha_violated / len(sides)
    a_p = check.alpha_passed

    def scale(a: float) -> float:
        return normal_quantile(1.0 - min(max(a, 1e-300), 1 - 1e-16)) / z

    has_max = any(up for _, up in sides)
    has_min = any(not up for _, up in sides)
    ends = []
    # the lower end decides "violated" against a maximum and "passed" against a
    # minimum; the upper end the reverse
    for faces_v, faces_p, width, sign in ((has_max, has_min, v - lo, -1.0),
                                          (has_min, has_max, hi - v, 1.0)):
        if faces_v and faces_p:
            f = (scale(a_v) if check.verdict == Verdict.VIOLATED else scale(a_p)
                 if check.verdict == Verdict.PASSED else max(scale(a_v), scale(a_p)))
        else:
            f = scale(a_v) if faces_v else scale(a_p)
        ends.append(v + sign * width * f)
    if _log_scale(check):
        ends = [math.exp(e) for e in ends]
    rng = metric_range(str(r.get("metric"))) if r.get("model") != DIFFERENCE_MODEL else None
    if rng is not None:  # a difference of rates never leaves [-1, 1], a gap [0, 1]
        ends = [min(max(e, rng[0]), rng[1]) for e in ends]
    return float(ends[0]), float(ends[1])


def _statistical(check: Check) -> None:
    r = check.row
    v, lo, hi, sides = _scaled(check)
    z = normal_quantile(0.5 + _level(r) / 2)
    pv, pp = [], []
    for limit, upper in sides:
        a, b = _one_sided(v, lo, hi, z, limit=limit, upper_limit=upper)
        pv.append(a)
        pp.append(b)
    check.p_violated = min(min(pv) * len(pv), 1.0)  # either side violated (Bonferroni)
    check.p_passed = max(pp)  # every side passed (intersection-union)


def _bounds(check: Check) -> None:
    r, rule = check.row, check.rule
    v = r["value"]
    lo = r["lower"] if r.get("lower") is not None else v
    hi = r["upper"] if r.get("upper") is not None else v
    if rule.abs_max is not None:
        outside = (lo > rule.abs_max) or (hi < -rule.abs_max)
        inside = (-rule.abs_max <= lo) and (hi <= rule.abs_max)
    else:
        outside = (rule.max is not None and lo > rule.max) or (
            rule.min is not None and hi < rule.min)
        inside = (rule.max is None or hi <= rule.max) and (rule.min is None or lo >= rule.min)
    check.verdict = (Verdict.VIOLATED if outside else Verdict.PASSED if inside
                     else Verdict.INCONCLUSIVE)
    check.lower_adj, check.upper_adj = r.get("lower"), r.get("upper")  # not random


def _matches(rule: LimitRule, row: dict[str, Any], *, group: str | None = None) -> bool:
    if row["metric"] != rule.metric or row.get("metric_b"):
        return False
    if rule.audit is not None and row["audit"] != rule.audit:
        return False
    if rule.attribute is not None and row["attribute"] != rule.attribute:
        return False
    if rule.no_worse_than_baseline is not None:
        if row.get("model") != DIFFERENCE_MODEL:
            return False
    elif rule.model is not None and row.get("model") != rule.model:
        return False
    elif rule.model is None and row.get("model") in _PAIRED_MODELS:
        return False  # a plain limit judges the audited decision, not the comparison
    group = rule.group if group is None else group
    if group is not None and row.get("group") != group:
        return False
    if row.get("status") not in _USABLE or row.get("value") is None:
        return False
    return not (isinstance(row["value"], float) and math.isnan(row["value"]))


def _per_group(rule: LimitRule, rows: list[dict[str, Any]], audit: str
               ) -> tuple[list[dict], list[dict]]:
    """(gating rows, pooled rows) of a rule that names no group, on a per-group audit.

    Per attribute: the rows of every unprivileged value against the reference gate
    when the audit has them; the pooled ``unprivileged`` row is then the extra view.
    Without per-value rows (binary attribute, ``multi_valued: false``, a rate metric)
    the pooled row is the check.
    """
    comparison = rule.metric in CATALOGUE or rule.metric in BASELINES
    gate: list[dict] = []
    pooled: list[dict] = []
    by_attr: dict[Any, list[dict]] = {}
    for r in rows:
        if r.get("audit") == audit:
            by_attr.setdefault(r["attribute"], []).append(r)
    for attr_rows in by_attr.values():
        # per-value rows of this metric exist, usable or not: the per-group view applies
        per_value = comparison and any(
            r["metric"] == rule.metric and not r.get("metric_b")
            and r.get("group") not in _POOLED_GROUPS for r in attr_rows)
        unpriv = [r for r in attr_rows if _matches(rule, r, group="unprivileged")]
        if per_value:
            gate += [r for r in attr_rows if r.get("group") not in _POOLED_GROUPS
                     and r.get("group") is not None and _matches(rule, r, group=r["group"])]
            pooled += unpriv
        else:
            gate += unpriv
    return gate, pooled


def _worse_row(row: dict[str, Any]) -> dict[str, Any] | None:
    """A paired-difference row as the ``no_worse_than_baseline`` check reads it: value
    and interval of ``worse`` (the challenger's distance from parity minus the
    baseline's, paired; :mod:`fairspark.metrics._paired`); ``None`` when undefined."""
    try:
        p = json.loads(row.get("params") or "{}")
    except (TypeError, ValueError):
        return None
    vals = [p.get(k) for k in ("worse", "worse_lower", "worse_upper")]
    if not isinstance(p, dict) or any(v is None or not math.isfinite(v) for v in vals):
        return None
    return {**row, "value": vals[0], "lower": vals[1], "upper": vals[2]}


def _find_checks(
    rules: list[LimitRule], rows: list[dict[str, Any]], specs: Mapping[str, AuditSpec]
) -> tuple[list[Check], list[str]]:
    """One check per (rule, matching row); messages for rules that matched nothing."""
    per_group = [n for n, s in specs.items() if s.limits_per_group]
    bounds = {n for n, s in specs.items() if s.interval == "bounds"}
    checks: list[Check] = []
    unmatched: list[str] = []
    for rule in rules:
        found = [r for r in rows if r.get("audit") not in per_group and _matches(rule, r)]
        pooled: list[dict] = []
        for audit in per_group:
            if rule.audit not in (None, audit):
                continue
            if rule.group is None:
                gate, more = _per_group(rule, rows, audit)
                found += gate
                pooled += more
            else:
                found += [r for r in rows if r.get("audit") == audit and _matches(rule, r)]
        if not found and not pooled:
            unmatched.append(not_evaluated_text(rule_text(rule), why_nothing(rule, rows)))
        if rule.no_worse_than_baseline is not None:
            had = bool(found or pooled)
            found = [w for r in found if (w := _worse_row(r)) is not None]
            pooled = [w for r in pooled if (w := _worse_row(r)) is not None]
            if had and not found and not pooled:  # e.g. HFM's differences: no "worse"
                unmatched.append(not_evaluated_text(
                    rule_text(rule),
                    "no paired row says how much further from parity the challenger is"))
        for r in found:
            kind = "bounds" if r["audit"] in bounds else "statistical"
            checks.append(Check(rule=rule, row=r, kind=kind))
        checks += [Check(rule=rule, row=r, kind="statistical", role=POOLED) for r in pooled]
    return checks, unmatched


def _judge_statistical(stat: list[Check], limits: LimitsConfig) -> None:
    """p-values of the statistical checks, corrected as one family, then verdicts.

    The family is every gating check (each group against the reference is one);
    a pooled check is judged on its own, unadjusted p-values.
    """
    for c in stat:
        _statistical(c)
        c.alpha_violated = c.alpha_passed = limits.alpha  # a pooled view: not adjusted
    family = [c for c in stat if c.role == GATE]
    if family:
        pv = adjust_pvalues(np.array([c.p_violated for c in family]), limits.correction)
        pp = adjust_pvalues(np.array([c.p_passed for c in family]), limits.correction)
        a_v = family_level(pv, limits.correction, limits.alpha)
        a_p = family_level(pp, limits.correction, limits.alpha)
        for c, a, b in zip(family, pv, pp, strict=True):
            c.p_violated, c.p_passed = float(a), float(b)
            c.alpha_violated, c.alpha_passed = a_v, a_p
    for c in stat:
        c.verdict = (Verdict.VIOLATED if c.p_violated <= limits.alpha
                     else Verdict.PASSED if c.p_passed <= limits.alpha
                     else Verdict.INCONCLUSIVE)
        c.lower_adj, c.upper_adj = adjusted_interval(c)


def gate_word(verdict: str, *, would_gate: bool, consecutive: int, persistence: int,
              fail_on_violation: bool, role: str = GATE) -> str:
    """The one phrase that says what a check does to the run.

    ``gates`` (violated long enough and failing on a violation is on: exit 3),
    ``would gate`` (violated long enough, failing is off), ``gates after N runs in a
    row`` (violated, not yet long enough), ``pooled view, does not gate``; empty for a
    passed or inconclusive check.
    """
    if role == POOLED:
        return "pooled view, does not gate"
    if verdict != Verdict.VIOLATED:
        return ""
    if would_gate:
        return "gates" if fail_on_violation else "would gate"
    return f"gates after {persistence} runs in a row ({consecutive} so far)"


def _limit_row(c: Check, limits: LimitsConfig, n_family: int) -> MetricRow:
    """The ``limits`` result row of one check."""
    r = c.row
    if c.kind == "statistical" and c.role == POOLED:
        how = (f"p(violated)={_p(c.p_violated)}, p(passed)={_p(c.p_passed)} (pooled view of "
               f"every unprivileged value, not adjusted, alpha={fmt_setting(limits.alpha)}; "
               "does not gate)")
    elif c.kind == "statistical":
        how = (f"p(violated)={_p(c.p_violated)}, p(passed)={_p(c.p_passed)} "
               f"({limits.correction} over {n_family} checks, "
               f"alpha={fmt_setting(limits.alpha)})")
    else:
        how = "judged on the certified/approximate bounds"
    gate = (f"; violated {c.consecutive} run(s) in a row, gates at {c.rule.persistence}"
            if c.verdict == Verdict.VIOLATED and c.role == GATE else "")
    label = interval_label(c.kind, c.role, limits.correction)
    support = _support(r, limits)
    levels = ({"alpha_violated": c.alpha_violated, "alpha_passed": c.alpha_passed}
              if c.kind == "statistical" else {})
    return MetricRow(
        audit="limits", attribute=r["attribute"], group=r.get("group"), metric=r["metric"],
        metric_b=rule_text(c.rule),
        # a no-worse check's value is "worse", not the metric's difference: its own model
        model=DISTANCE_MODEL if c.rule.no_worse_than_baseline is not None else r.get("model"),
        value=r["value"],
        # the interval the verdict uses; the source row's own is in params
        lower=c.lower_adj, upper=c.upper_adj, status=c.verdict,
        detail=(f"{rule_text(c.rule)} [{r['audit']}]: {c.verdict}; {how}{gate}; "
                f"{label} interval [{_num_text(c.lower_adj)}, {_num_text(c.upper_adj)}]"),
        params=params_json(rule=_rule_json(c.rule), would_gate=c.would_gate,
                           consecutive=c.consecutive, role=c.role, kind=c.kind,
                           source_audit=r["audit"], interval=label,
                           own_interval=[r.get("lower"), r.get("upper")], **levels,
                           **support),
    )


def _rule_json(rule: LimitRule) -> dict[str, Any]:
    """The rule as a limits row's ``params`` keep it (an unset ``no_worse_than_baseline``
    left out, so a plain rule's row reads as before the key existed)."""
    skip = {"no_worse_than_baseline"} if rule.no_worse_than_baseline is None else set()
    return rule.model_dump(mode="json", exclude=skip)


def _support(r: dict[str, Any], limits: LimitsConfig) -> dict[str, Any]:
    """The compared group's ``n`` and ``favourable`` (when its row has them) and whether
    it is large enough to be ranked worst (``rankable``: at least
    ``limits.min_rank_rows`` rows and ``limits.min_rank_favourable`` favourable
    decisions)."""
    try:
        p = json.loads(r.get("params") or "{}")
    except (TypeError, ValueError):
        p = {}
    if not isinstance(p, dict) or p.get("n") is None:
        return {}
    n, fav = int(p["n"]), p.get("favourable")
    ok = n >= limits.min_rank_rows and (fav is None or int(fav) >= limits.min_rank_favourable)
    return {"n": n, "favourable": None if fav is None else int(fav), "rankable": ok}


def _num_text(x: float | None) -> str:
    """An interval end in a limits row's detail (stored text: ``–`` when missing)."""
    return "–" if x is None else fmt_detail(x, 4)


def _p(p: float) -> str:
    """A p-value in a limits row's detail (stored text)."""
    return fmt_detail(p)


def interval_label(kind: str, role: str, correction: str) -> str:
    """How a limit row's interval was made, in words (its ``params['interval']``).

    ``Holm-adjusted`` / ``BH-adjusted`` (a gating statistical check under a
    correction), ``unadjusted`` (``correction: none``, or a pooled view, which is
    judged outside the family: the interval at the test's own level, alpha, split over
    the two sides of a two-sided limit) or ``certified`` (HFM's bounds, as reported).
    """
    if kind != "statistical":
        return "certified"
    if role == POOLED or correction == "none":
        return "unadjusted"
    return {"holm": "Holm-adjusted", "bh": "BH-adjusted"}.get(correction, correction)


def limits_summary(checks: list[Check], unmatched: list[str], *, limits: LimitsConfig,
                   fail_on_violation: bool) -> dict[str, Any]:
    """``summary.json``'s ``limits``: counts, and gate fields that agree with the exit code.

    ``status``: ``violated``, ``inconclusive``, ``passed``, or ``not evaluated`` when no
    rule made a check (never ``passed`` for a gate that judged nothing);
    ``not_evaluated``: each rule that made no check, with its sentence
    (:func:`fairspark.nightly.not_evaluated.not_evaluated_text`: *"not evaluated (0
    checks: why)"*);
    ``would_gate``: some check is violated for its required runs in a row;
    ``gates``: it also fails the run (``would_gate`` and ``fail_on_violation``), so
    ``gates: true`` never sits beside ``exit_code: 0``. Pooled views are counted apart
    (``pooled``) and never gate.
    """
    gating = [c for c in checks if c.role == GATE]
    would = any(c.would_gate for c in gating)
    verdicts = [c.verdict for c in gating]
    judged = {id(c.rule) for c in checks}
    # a rule that made no check judged nothing: said so, never counted as passed
    not_evaluated = [{"rule": rule_text(r), "checks": 0,
                      "text": next((m for m in unmatched
                                    if m.startswith(f"limit {rule_text(r)}: not evaluated")),
                                   not_evaluated_text(rule_text(r), "no result row matched"))}
                     for r in limits.rules if id(r) not in judged]
    info: dict[str, Any] = {
        "status": Verdict.VIOLATED if Verdict.VIOLATED in verdicts else
                  Verdict.INCONCLUSIVE if Verdict.INCONCLUSIVE in verdicts else
                  Verdict.PASSED if gating else NOT_EVALUATED,
        "gates": bool(would and fail_on_violation),
        "would_gate": would,
        "fail_on_violation": bool(fail_on_violation),
        # the one count printed everywhere (fairspark.status.verdict_counts)
        **verdict_counts(verdicts),
        "pooled": sum(1 for c in checks if c.role == POOLED),
        "unmatched": unmatched,
        "not_evaluated": not_evaluated,
        "correction": limits.correction,
        "alpha": limits.alpha,
        "min_rank_rows": limits.min_rank_rows,
        "min_rank_favourable": limits.min_rank_favourable,
    }
    if would:
        info["detail"] = "; ".join(
            f"{rule_text(c.rule)} ({c.row['attribute']}"
            + (f" / {c.row['group']}" if c.row.get("group") else "") + ")"
            for c in gating if c.would_gate)
    return info


def evaluate_limits(
    rows: list[dict[str, Any]], *, limits: LimitsConfig, specs: Mapping[str, AuditSpec],
    history: pd.DataFrame | None = None,
) -> tuple[list[Check], list[MetricRow], list[str]]:
    """Judge every limit rule against this run's rows.

    Parameters
    ----------
    rows:
        This run's long-format result rows.
    limits:
        ``config.limits``.
    specs:
        Audit name -> spec: which audits are judged per group and whose intervals are
        certified bounds (``config.audits.audit_specs()``).
    history:
        Earlier runs' ``limits`` rows (columns run_date, attribute, group, metric,
        metric_b, model, status, params) for the persistence rule; newest last.

    Returns
    -------
    checks, result rows (audit ``limits``), and messages for rules that matched nothing.
    """
    checks, unmatched = _find_checks(limits.rules, rows, specs)
    stat = [c for c in checks if c.kind == "statistical"]
    _judge_statistical(stat, limits)
    for c in checks:
        if c.kind == "bounds":
            _bounds(c)
    for c in checks:
        if c.role == GATE:
            c.consecutive = c.persistence(history)
            c.would_gate = c.consecutive >= c.rule.persistence
    n_family = sum(1 for c in stat if c.role == GATE)
    return checks, [_limit_row(c, limits, n_family) for c in checks], unmatched
