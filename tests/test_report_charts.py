"""Charts and trends follow the gate: where a limit is judged per group, the gating
groups are drawn with the limit, and the pooled view is drawn without it.

The expectations are written out by hand from the rule of ``fairspark.nightly.gating``:
a limit without ``group`` on an attribute with more than one unprivileged value gates on
each value against the reference; the pooled ``unprivileged`` row never gates then. A
binary attribute's pooled row is its check.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from fairspark.audits.lines import plain
from fairspark.group.report import group_section
from fairspark.registry import specs as _registered

SPECS = _registered()
DI, SPD, TPR = "disparate_impact", "statistical_parity_difference", "tpr_difference"


def _row(attr, group, metric, value, lower, upper, status="ok"):
    return {"audit": "group", "attribute": attr, "group": group, "metric": metric,
            "value": value, "lower": lower, "upper": upper, "status": status,
            "detail": None, "metric_b": None, "model": None, "params": None}


@pytest.fixture()
def rows():
    return [
        # sex is binary: its pooled row is the check
        _row("sex", "privileged", "selection_rate", 0.30, 0.29, 0.31),
        _row("sex", "unprivileged", "selection_rate", 0.12, 0.11, 0.13),
        _row("sex", "unprivileged", DI, 0.40, 0.36, 0.44),
        _row("sex", "unprivileged", SPD, -0.18, -0.195, -0.165),
        # race has two unprivileged values: each one gates, the pooled row is a view
        _row("race", "privileged", "selection_rate", 0.30, 0.28, 0.32),
        _row("race", "unprivileged", DI, 0.70, 0.60, 0.80),
        _row("race", "unprivileged", SPD, -0.09, -0.12, -0.06),
        _row("race", "Black", DI, 0.50, 0.40, 0.60),
        _row("race", "Asian", DI, 0.95, 0.75, 1.15),
        _row("race", "Black", SPD, -0.15, -0.19, -0.11),
        _row("race", "Asian", SPD, -0.01, -0.06, 0.04),
        _row("race", "Black", TPR, -0.05, -0.09, -0.01),
    ]


SIZES = {"sex": {"values": {"Female": 400, "Male": 588}, "privileged": ["Male"]},
         "race": {"values": {"White": 700, "Black": 250, "Asian": 90},
                  "privileged": ["White"]}}


def _charts(rows, limits, monkeypatch):
    from fairspark.group import report as group_report

    calls = []
    real = group_report._interval_chart

    def spy(entries, **kw):
        calls.append((kw["title"], entries))
        return real(entries, **kw)

    monkeypatch.setattr(group_report, "_interval_chart", spy)
    html = group_section(rows, ci_level=0.95, min_group_size=30, sizes=SIZES,
                         limits=limits).html
    return html, calls


def test_di_chart_draws_each_gating_group_with_its_limit(rows, monkeypatch):
    limits = [{"metric": DI, "min": 0.8}, {"metric": SPD, "abs_max": 0.1}]
    html, calls = _charts(rows, limits, monkeypatch)
    (di,) = [e for t, e in calls if t.startswith("Disparate impact")]
    got = {e["label"]: (e["value"], e["limits"]) for e in di}
    assert got == {
        "sex": (0.40, [0.8]),  # binary: the pooled row gates
        "race: pooled (does not gate)": (0.70, []),
        "race: Black": (0.50, [0.8]),
        "race: Asian": (0.95, [0.8]),
    }
    # the pooled headline chart of race draws no per-group limit; sex's draws ±0.1
    (sex,) = [e for t, e in calls if t.startswith("sex:")]
    (race,) = [e for t, e in calls if t.startswith("race:") and "each value" not in t]
    assert {e["label"]: e["limits"] for e in sex}["Statistical parity difference"] == [-0.1, 0.1]
    assert {e["label"]: e["limits"] for e in race} == {
        "Statistical parity difference (pooled, does not gate)": []}
    # the per-value chart: the SPD limit on each value's SPD row, none on TPR
    (values,) = [e for t, e in calls if t.startswith("race: each value")]
    assert {e["label"]: e["limits"] for e in values} == {
        "Black · selection rate": [-0.1, 0.1], "Asian · selection rate": [-0.1, 0.1],
        "Black · TPR": []}
    assert "the pooled row is the view that does not gate" in html


def test_a_rule_naming_the_pooled_group_draws_on_the_pooled_row(rows, monkeypatch):
    limits = [{"metric": DI, "min": 0.8, "group": "unprivileged", "attribute": "race"},
              {"metric": DI, "min": 0.5, "group": "Black"}]
    _, calls = _charts(rows, limits, monkeypatch)
    (di,) = [e for t, e in calls if t.startswith("Disparate impact")]
    got = {e["label"]: e["limits"] for e in di}
    # each rule on the row it names; the pooled row gates here, so it is not "a view"
    assert got == {"sex": [], "race: pooled": [0.8], "race: Black": [0.5],
                   "race: Asian": []}


def test_a_limit_on_one_value_is_drawn_on_that_value_only(rows, monkeypatch):
    limits = [{"metric": DI, "min": 0.6, "group": "Asian"},
              {"metric": DI, "min": 0.8, "attribute": "race"}]
    _, calls = _charts(rows, limits, monkeypatch)
    (di,) = [e for t, e in calls if t.startswith("Disparate impact")]
    got = {e["label"]: e["limits"] for e in di}
    assert got == {"sex": [], "race: pooled (does not gate)": [],
                   "race: Black": [0.8], "race: Asian": [0.6, 0.8]}


# ------------------------------------------------------------------ trends


def _limit_row(day, group, value, lower, upper, status, *, n=500, fav=100, role="gate",
               rankable=True, rule=None):
    rule = rule or {"metric": DI, "min": 0.8}
    return {"run_date": day, "audit": "limits", "attribute": "race", "group": group,
            "metric": DI, "metric_b": "disparate_impact >= 0.8", "model": None,
            "value": value, "lower": lower, "upper": upper, "status": status,
            "config_hash": "h1", "fairspark_version": "1",
            "params": json.dumps({"rule": rule, "role": role, "source_audit": "group",
                                  "n": n, "favourable": fav, "rankable": rankable})}


def _pooled(day, attr, value, lower, upper):
    return {"run_date": day, "audit": "group", "attribute": attr, "group": "unprivileged",
            "metric": DI, "metric_b": None, "model": None, "value": value, "lower": lower,
            "upper": upper, "status": "ok", "config_hash": "h1", "fairspark_version": "1"}


def test_trends_follow_the_worst_group_with_its_limit(monkeypatch):
    from fairspark.config import LimitRule
    from fairspark.report import trends as nightly_report
    from fairspark.report.trends import trend_frame, trend_section

    d1, d2 = "2026-11-01", "2026-11-02"
    hist = pd.DataFrame([
        _pooled(d1, "race", 0.72, 0.62, 0.82), _pooled(d1, "sex", 0.45, 0.41, 0.49),
        # last night Asian was the worse one; tonight Black is: the series follows Black
        _limit_row(d1, "Black", 0.78, 0.70, 0.86, "inconclusive"),
        _limit_row(d1, "Asian", 0.60, 0.50, 0.70, "violated"),
        _limit_row(d1, "unprivileged", 0.72, 0.62, 0.82, "inconclusive", role="pooled"),
    ]).drop(columns=["params"])  # the history frame carries no params
    tonight = [
        {k: v for k, v in _pooled(d2, "race", 0.70, 0.60, 0.80).items()
         if k not in ("run_date", "config_hash", "fairspark_version")},
        {k: v for k, v in _pooled(d2, "sex", 0.40, 0.36, 0.44).items()
         if k not in ("run_date", "config_hash", "fairspark_version")},
        _limit_row(d2, "Black", 0.50, 0.38, 0.62, "violated"),
        _limit_row(d2, "Asian", 0.95, 0.72, 1.18, "inconclusive"),
        # the lowest value, but 12 rows: too small to rank, never the worst group
        _limit_row(d2, "Other", 0.20, 0.01, 0.90, "inconclusive", n=12, fav=1,
                   rankable=False),
        _limit_row(d2, "unprivileged", 0.70, 0.60, 0.80, "inconclusive", role="pooled"),
    ]
    panels: dict[str, list[float]] = {}
    real_panel = nightly_report._panel

    def panel(ax, s, name, flag, limits, ylim):
        panels[name] = list(limits)
        return real_panel(ax, s, name, flag, limits, ylim)

    monkeypatch.setattr(nightly_report, "_panel", panel)
    frame = trend_frame(hist, tonight, run_date=d2, config_hash="h1", version="1",
                        specs=SPECS)
    rules = [LimitRule(metric=DI, min=0.8)]
    html = plain(trend_section(frame, specs=SPECS, rules=rules).html)
    worst = "group · race · disparate_impact · worst group Black"
    assert panels[worst] == [0.8]
    assert panels["group · race · disparate_impact"] == []  # pooled view: no gate line
    assert panels["group · sex · disparate_impact"] == [0.8]  # binary: the check itself
    assert not any("Asian" in p or "Other" in p for p in panels)
    # the table row of the worst group: last night's Black 0.78, tonight 0.5 [0.38, 0.62]
    # (at three decimals, as the rows print everywhere)
    row = re.search(rf"<tr class='\w*'><td>{worst}</td><td>([^<]*)</td><td>([^<]*)</td>"
                    r"<td>([^<]*)</td>", html)
    assert row and row.groups() == ("0.780", "0.500 [0.380, 0.620]", "0.8")
    pooled = re.search(r"<tr class='\w*'><td>group · race · disparate_impact</td>"
                       r"<td>[^<]*</td><td>[^<]*</td><td>([^<]*)</td>", html)
    assert pooled and pooled.group(1) == "–"
    assert "worst group</em> panel follows tonight's worst group" in html
