"""Limits, persistence, exit code 3, status file, time budgets, publish crashes, warehouse."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from html import unescape

import numpy as np
import pandas as pd
import pytest
import yaml
from chispa import assert_df_equality
from conftest import printed_number, write_parquet
from scipy.stats import false_discovery_control, norm

from fairspark import cli, registry
from fairspark.audits.base import AuditOutcome, MetricRow
from fairspark.audits.lines import plain
from fairspark.config import LimitsConfig
from fairspark.nightly.gating import evaluate_limits, limits_summary
from fairspark.registry import specs as _registered
from fairspark.stats import adjust_pvalues

SPECS = _registered()


def test_holm_by_hand_and_bh_against_scipy():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.04 -> cummax
    expected = {0.005: 0.02, 0.01: 0.03, 0.03: 0.06, 0.04: 0.06}
    got = adjust_pvalues(p, "holm")
    assert [round(x, 12) for x in got] == [expected[x] for x in p]
    rng = np.random.default_rng(1)
    q = rng.uniform(0, 0.2, 25)
    np.testing.assert_allclose(adjust_pvalues(q, "bh"), false_discovery_control(q), rtol=1e-12)


def _row(value, lower, upper, *, audit="group", metric="statistical_parity_difference",
         attribute="sex", group="unprivileged", level=0.95):
    return {"audit": audit, "metric": metric, "attribute": attribute, "group": group,
            "metric_b": None, "model": None, "value": value, "lower": lower, "upper": upper,
            "status": "ok", "params": json.dumps({"ci_level": level})}


def test_verdicts_follow_the_interval_without_correction():
    # with correction none and alpha = (1 - level) / 2 a check is violated exactly when
    # the whole interval is beyond the limit, passed when it is within
    limits = LimitsConfig.model_validate({
        "rules": [{"metric": "statistical_parity_difference", "abs_max": 0.1}],
        "correction": "none", "alpha": 0.025})
    rows = [_row(-0.20, -0.25, -0.15, attribute="a"),  # entirely below -0.1: violated
            _row(0.02, -0.03, 0.07, attribute="b"),    # entirely within: passed
            _row(0.09, 0.05, 0.13, attribute="c")]     # straddles 0.1: inconclusive
    checks, out, unmatched = evaluate_limits(rows, limits=limits, specs=SPECS)
    assert [c.verdict for c in checks] == ["violated", "passed", "inconclusive"]
    assert [r.status for r in out] == ["violated", "passed", "inconclusive"]
    assert not unmatched and all(r.audit == "limits" for r in out)
    assert out[0].metric_b == "|statistical_parity_difference| <= 0.1"


def test_holm_makes_borderline_violations_inconclusive():
    # three checks whose interval just clears the limit: one-sided p ~ 0.02 each,
    # significant alone (alpha 0.05) but not after Holm over 3 checks
    z95 = norm.ppf(0.975)
    se = 0.01
    v = 0.1 + norm.ppf(0.98) * se
    rows = [_row(v, v - z95 * se, v + z95 * se, attribute=a) for a in "abc"]
    rule = {"metric": "statistical_parity_difference", "max": 0.1}
    none = evaluate_limits(rows, limits=LimitsConfig.model_validate(
        {"rules": [rule], "correction": "none"}), specs=SPECS)[0]
    holm = evaluate_limits(rows, limits=LimitsConfig.model_validate(
        {"rules": [rule], "correction": "holm"}), specs=SPECS)[0]
    assert [c.verdict for c in none] == ["violated"] * 3
    assert [c.verdict for c in holm] == ["inconclusive"] * 3
    assert holm[0].p_violated == pytest.approx(min(3 * (1 - 0.98), 1), rel=1e-6)


def test_hfm_bounds_are_judged_without_correction():
    rule = {"metric": "df", "audit": "hfm", "max": 0.5}
    rows = [_row(0.8, 0.7, 0.9, audit="hfm", metric="df", group="binary"),
            _row(0.4, 0.3, 0.6, audit="hfm", metric="df", group="binary", attribute="race")]
    checks, _, _ = evaluate_limits(rows, limits=LimitsConfig.model_validate({"rules": [rule]}),
                                   specs=SPECS)
    assert [c.verdict for c in checks] == ["violated", "inconclusive"]
    assert [c.kind for c in checks] == ["bounds", "bounds"]


def test_rule_matching_nothing_is_reported():
    limits = LimitsConfig.model_validate({"rules": [{"metric": "gamma", "max": 0.01}]})
    checks, _, unmatched = evaluate_limits([_row(0.1, 0.0, 0.2)], limits=limits, specs=SPECS)
    assert not checks
    assert unmatched == ["limit gamma <= 0.01: not evaluated (0 checks: no result row of "
                         "gamma)"]
    info = limits_summary(checks, unmatched, limits=limits, fail_on_violation=True)
    # a gate that judged nothing is never "passed"
    assert info["status"] == "not evaluated" and info["checks"] == 0
    assert info["not_evaluated"] == [{"rule": "gamma <= 0.01", "checks": 0,
                                      "text": unmatched[0]}]


def test_where_and_input_location_keep_runs_comparable():
    from fairspark.config import parse_config

    base = {"dataset": "t", "input": {"path": "in/2026-11-01.parquet"},
            "columns": {"sensitive": [{"column": "sex", "privileged": "M"}],
                        "label": {"column": "y"}, "prediction": {"column": "p"}},
            "output": {"path": "out"}}
    a = parse_config(base)
    moved = parse_config(base, overrides={"input.path": "s3a://bucket/2026-11-02.parquet",
                                          "input.where": "day = '2026-11-02'"})
    table = parse_config({**base, "input": {"table": "db.scores", "where": "day > 3"}})
    assert a.config_hash() == moved.config_hash() == table.config_hash()
    # what changes a number still changes the hash
    for key, value in (("input.format", "csv"), ("columns.label.column", "y2"),
                       ("audits.group.ci_level", 0.9), ("columns.sensitive",
                                                        [{"column": "sex", "privileged": "F"}])):
        assert parse_config(base, overrides={key: value}).config_hash() != a.config_hash(), key


# ---------------------------------------------------------------- limits and trends in words
def test_limits_table_says_how_in_words():
    from fairspark.report.limits import limits_section

    limits = LimitsConfig.model_validate({
        "rules": [{"metric": "statistical_parity_difference", "abs_max": 0.1}],
        "correction": "none", "alpha": 0.025})
    rows = [_row(-0.20, -0.25, -0.15, attribute="a"), _row(0.02, -0.03, 0.07, attribute="b"),
            _row(0.09, 0.05, 0.13, attribute="c")]
    checks, out, _ = evaluate_limits(rows, limits=limits, specs=SPECS)
    html = plain(limits_section(checks, [r.__dict__ for r in out], [], limits=limits,
                                specs=SPECS).html)
    cells = {a: unescape(t) for a, t in re.findall(
        r"<tr class='\w+'><td>[^<]*</td><td>(\w)</td>.*?<td class='small'>([^<]*)</td></tr>",
        html)}
    # the interval printed is the verdict's: each end at the level of the test it decides.
    # abs_max is two-sided: "violated" is Bonferroni over the two sides (alpha / 2),
    # "passed" is not split; the row's 95% ends are rescaled from z = 1.96 to that level.
    z = norm.ppf(0.975)
    kv, kp = norm.ppf(1 - 0.025 / 2) / z, norm.ppf(1 - 0.025) / z
    # a: -0.2 with half-width 0.05 at 95%: z = 0.1 / (0.05 / 1.96) = 3.9, p = 4.8e-5;
    # violated, so both ends at the "violated" level
    a_lo, a_hi = -0.2 - 0.05 * kv, -0.2 + 0.05 * kv
    a_lo, a_hi = (printed_number(x, a_lo, a_hi, value=-0.2, signed=True) for x in (a_lo, a_hi))
    assert cells["a"] == (f"the whole unadjusted interval [{a_lo}, {a_hi}] is beyond "
                          "the limit ±0.1 (p < 0.001, not adjusted); violated 1 run in a row")
    # b: 0.02, nearest side +0.1 is 0.08 away with se 0.05 / 1.96: p = Phi(-3.14) = 8.5e-4;
    # passed, so both ends at the "passed" level
    b_lo, b_hi = (printed_number(x, 0.02 - 0.05 * kp, 0.02 + 0.05 * kp, value=0.02,
                                 signed=True)
                  for x in (0.02 - 0.05 * kp, 0.02 + 0.05 * kp))
    assert cells["b"] == (f"the whole unadjusted interval [{b_lo}, "
                          f"{b_hi}] is within the limit ±0.1 (p < 0.001, "
                          "not adjusted)")
    # c: 0.09 with half-width 0.04: beyond +0.1 has p = 1 - Phi(-0.49) = 0.69, twice
    # (two sides, Bonferroni) capped at 1; within has p = Phi(-0.49) = 0.31
    p_within = norm.cdf(-0.01 / (0.04 / norm.ppf(0.975)))
    # inconclusive: each two-faced end at the wider level (the "violated" one here)
    c_lo, c_hi = 0.09 - 0.04 * kv, 0.09 + 0.04 * kv
    c_lo, c_hi = (printed_number(x, c_lo, c_hi, value=0.09, signed=True) for x in (c_lo, c_hi))
    assert cells["c"] == (f"cannot tell: the unadjusted interval [{c_lo}, {c_hi}] "
                          "straddles the limit ±0.1 (p = 1 for "
                          f"beyond, p = {p_within:.2g} for within, not adjusted; neither is "
                          "significant at alpha 0.025)")
    assert "p(violated)" not in html and "<caption>" in html


def _series(audit, attribute, metric, points, group=None):
    """History rows of one series: [(run_date, value, lower, upper), ...]."""
    return [{"run_date": d, "audit": audit, "attribute": attribute,
             "group": group or ("unprivileged" if audit == "group" else "binary"),
             "metric": metric, "metric_b": None, "model": None, "value": v, "lower": lo,
             "upper": hi, "status": "ok", "config_hash": "h1", "fairspark_version": "1"}
            for d, v, lo, hi in points]


@pytest.fixture()
def trend_rows():
    d1, d2 = "2026-11-01", "2026-11-02"
    spd = "statistical_parity_difference"
    rows = [
        # |SPD| grows from 0.05 to 0.20, intervals apart: worse
        *_series("group", "sex", spd, [(d1, -0.05, -0.07, -0.03), (d2, -0.20, -0.22, -0.18)]),
        # |SPD| shrinks from 0.20 to 0.05: better
        *_series("group", "race", spd, [(d1, -0.20, -0.22, -0.18), (d2, -0.05, -0.07, -0.03)]),
        # D has no fair side: changed
        *_series("hfm", "sex", "D", [(d1, 0.5, 0.5, 0.5), (d2, 0.8, 0.8, 0.8)]),
        # DI 1.5 -> 0.7: the value falls, but |ln 0.7| = 0.36 < |ln 1.5| = 0.41: better
        *_series("group", "age", "disparate_impact",
                 [(d1, 1.5, 1.45, 1.55), (d2, 0.7, 0.65, 0.75)]),
        # DI within its uncertainty: no flag
        *_series("group", "sex", "disparate_impact",
                 [(d1, 0.60, 0.55, 0.65), (d2, 0.62, 0.57, 0.67)]),
    ]
    # DR without a model: no value on either night; df the same both nights
    rows += _series("hfm", "*", "DR", [(d1, None, None, None), (d2, None, None, None)])
    rows += _series("hfm", "sex", "df", [(d1, 0.1, 0.1, 0.1), (d2, 0.1, 0.1, 0.1)])
    for i in range(8):  # quiet series that a cap pushes out of the figure
        rows += _series("group", f"region{i}", "tpr_difference",
                        [(d1, 0.01, -0.02, 0.04), (d2, 0.012, -0.018, 0.042)])
    return rows


def _trend_html(rows, monkeypatch, **kw):
    from matplotlib.axes import Axes

    from fairspark.report.trends import trend_frame, trend_section

    drawn: dict[str, dict] = {}
    alive: list = []  # every panel is its own figure: keep its axes so no id is reused
    real_hline, real_ylim = Axes.axhline, Axes.set_ylim

    def hline(ax, y=0, *a, **k):
        alive.append(ax)
        drawn.setdefault(id(ax), {}).setdefault("h", []).append(y)
        return real_hline(ax, y, *a, **k)

    def ylim(ax, *a, **k):
        if len(a) == 2:  # the panel's own call (matplotlib's internal ones pass a list)
            drawn.setdefault(id(ax), {})["ylim"] = tuple(a)
        return real_ylim(ax, *a, **k)

    def title(ax, t, *a, **k):
        alive.append(ax)
        drawn.setdefault(id(ax), {})["title"] = t

    monkeypatch.setattr(Axes, "axhline", hline)
    monkeypatch.setattr(Axes, "set_ylim", ylim)
    monkeypatch.setattr(Axes, "set_title", title)
    hist = pd.DataFrame([r for r in rows if r["run_date"] == "2026-11-01"])
    now = [r for r in rows if r["run_date"] == "2026-11-02"]
    frame = trend_frame(hist, now, run_date="2026-11-02", config_hash="h1", version="1",
                        specs=SPECS)
    sec = trend_section(frame, **kw, specs=SPECS)
    # one image per panel, in a grid that wraps on a narrow screen
    assert sec.html.count("<img ") == len([v for v in drawn.values() if "title" in v])
    assert "class='trend-panels'" in sec.html
    return sec.html, {v["title"]: v for v in drawn.values() if "title" in v}


def test_trends_state_better_or_worse_and_sort_worst_first(trend_rows, monkeypatch):
    html, _ = _trend_html(trend_rows, monkeypatch)
    table = html[html.index("<tbody>"):]
    names = re.findall(r"<tr class='\w*'><td>([^<]+)</td>", table)
    flags = re.findall(r"<td>(?:<b>(\w[\w ]*)</b>|–)</td><td class='small'>", table)
    got = dict(zip(names, flags, strict=True))
    assert got["group · sex · statistical_parity_difference"] == "worse"
    assert got["group · race · statistical_parity_difference"] == "better"
    assert got["group · age · disparate_impact"] == "better"
    assert got["hfm · sex · D"] == "changed"
    # inside the interval of the difference: one phrase, as the decision box says it
    assert got["group · sex · disparate_impact"] == "within noise"
    notes = dict(zip(names, re.findall(r"<td class='small'>([^<]*)</td></tr>", table),
                     strict=True))
    assert notes["hfm · sex · df"] == "unchanged (0.1)"
    assert "beyond its interval" in notes["group · sex · statistical_parity_difference"]
    # nothing to draw, said so; never silently gone
    assert "Not drawn, no value in any run (not computed): hfm · * · DR." in html
    # worst first: worse, then changed, then better, then unflagged
    order = [got[n] for n in names]
    rank = {"worse": 0, "changed": 1, "better": 2, "within noise": 3, "": 4}
    assert order == sorted(order, key=rank.get)
    assert len(names) == 15 and names[-1] == "hfm · * · DR"  # every series is in the table


def test_trends_cap_panels_with_a_named_n_more_list(trend_rows, monkeypatch):
    html, panels = _trend_html(trend_rows, monkeypatch, max_panels=6)
    assert len(panels) == 6
    m = re.search(r"<b>(\d+) more series not drawn</b>[^:]*: ([^<]+)\.</p>", html)
    assert m and int(m.group(1)) == 14 - 6  # 14 series have values; DR has none
    named = m.group(2).split(", ")
    quiet = {f"group · region{i} · tpr_difference" for i in range(8)} | {
        "group · sex · disparate_impact", "hfm · sex · df"}
    assert len(set(named)) == 8 and set(named) <= quiet  # only unflagged series wait
    # the flagged series are the ones drawn
    assert {"group · sex · statistical_parity_difference (worse)",
            "hfm · sex · D (changed)"} <= set(panels)


def test_trend_panels_draw_limits_on_one_scale_per_metric(trend_rows, monkeypatch):
    from fairspark.config import LimitRule

    rules = [LimitRule(metric="statistical_parity_difference", abs_max=0.1),
             LimitRule(metric="disparate_impact", min=0.8, attribute="sex")]
    _, panels = _trend_html(trend_rows, monkeypatch, rules=rules)
    spd = {t: p for t, p in panels.items() if "statistical_parity" in t}
    assert len(spd) == 2
    for p in spd.values():
        assert {0.1, -0.1, 0.0} <= set(p["h"])  # both limits and the fair value 0
    (lims,) = {p["ylim"] for p in spd.values()}  # one range for both SPD panels
    assert lims[0] < -0.22 and lims[1] > 0.1  # spans the lowest interval and the limit
    di_sex = panels["group · sex · disparate_impact"]
    di_age = panels["group · age · disparate_impact (better)"]
    assert 0.8 in di_sex["h"] and 0.8 not in di_age["h"]  # the rule names sex only
    assert di_sex["ylim"] == di_age["ylim"]
    assert di_sex["ylim"][0] < 0.55 and di_sex["ylim"][1] > 1.55


@pytest.mark.parametrize(("metric", "before", "after", "way"), [
    ("statistical_parity_difference", 0.10, -0.15, "worse"),  # |-0.15| > |0.10|
    ("disparate_impact", 0.5, 1.9, "better"),  # |ln 1.9| = 0.64 < |ln 0.5| = 0.69
    ("disparate_impact", 0.9, 1.2, "worse"),  # |ln 1.2| = 0.18 > |ln 0.9| = 0.11
    ("df", -0.05, -0.20, "better"),  # the decisions separate the groups even less
    ("DR", 0.03, 0.06, "worse"),  # twice as many decisions flip with the attribute
    ("gamma_max", 0.02, 0.01, "better"),
    ("delta", -0.4, 0.3, "better"),
])
def test_badness_orders_before_and_after(metric, before, after, way):
    from fairspark.report.trends import badness

    a, b = badness(metric, before), badness(metric, after)
    assert ("worse" if b > a else "better") == way


def test_trends_without_history_say_no_previous_runs():
    from fairspark.report.trends import trend_frame, trend_section

    now = _series("group", "sex", "statistical_parity_difference",
                  [("2026-11-02", -0.2, -0.22, -0.18)])
    frame = trend_frame(pd.DataFrame(), now, run_date="2026-11-02", config_hash="h1",
                        version="1", specs=SPECS)
    sec = trend_section(frame, specs=SPECS)
    assert sec is not None and "No previous runs" in sec.html


# ---------------------------------------------------------------- through the job
@pytest.fixture(scope="module")
def biased_table(tmp_path_factory):
    rng = np.random.default_rng(8)
    n = 3000
    sex = rng.choice(["M", "F"], n)
    pdf = pd.DataFrame({
        "id": np.arange(n).astype(str), "x": rng.normal(size=n), "sex": sex,
        "y": rng.integers(0, 2, n),
        # planted gap: men get the favourable decision far more often
        "p": (rng.random(n) < np.where(sex == "M", 0.6, 0.3)).astype(int),
    })
    base = tmp_path_factory.mktemp("biased")
    return write_parquet(pdf, base / "in"), pdf


def _cfg(tmp_path, inp, **extra):
    cfg = {
        "dataset": "biased", "input": {"path": inp},
        "columns": {"features": ["x"], "sensitive": [{"column": "sex", "privileged": "M"}],
                    "label": {"column": "y"}, "prediction": {"column": "p"}, "row_key": "id"},
        "output": {"path": str(tmp_path / "out")},
    }
    cfg.update(extra)
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return str(p)


def _main(cfg, date, *extra):
    return cli.main(["audit", "--config", cfg, "--run-date", date, "-q", *extra],
                    under_submit=True)


def test_violated_limit_exits_3_with_status_file_and_report(spark, biased_table, tmp_path):
    inp, _pdf = biased_table
    limits = {"rules": [{"metric": "statistical_parity_difference", "abs_max": 0.1},
                        {"metric": "disparate_impact", "min": 0.1}]}
    cfg = _cfg(tmp_path, inp, limits=limits)
    assert _main(cfg, "2026-11-01") == 3
    out = tmp_path / "out"
    status = json.loads((out / "_status" / "run_date=2026-11-01.json").read_text())
    assert status["exit_code"] == 3 and status["limits"]["gates"] is True
    m = pd.read_parquet(out / "run_date=2026-11-01" / "metrics.parquet")
    lim = m[m.audit == "limits"].set_index("metric")
    assert lim.loc["statistical_parity_difference", "status"] == "violated"
    assert lim.loc["disparate_impact", "status"] == "passed"
    html = (out / "run_date=2026-11-01" / "report.html").read_text()
    assert "Limits" in html and "violated" in html
    # the Limits section comes before every audit's section
    assert "<h2>Limits</h2>" in html and "<h2>Group fairness metrics</h2>" in html
    assert html.index("<h2>Limits</h2>") < html.index("<h2>Group fairness metrics</h2>")
    # the same run leaving gating to a downstream task
    assert _main(cfg, "2026-11-02", "--no-fail-on-violation") == 0
    status = json.loads((out / "_status" / "run_date=2026-11-02.json").read_text())
    assert status["limits"]["violated"] == 1


def test_persistence_gates_only_after_n_consecutive_violations(spark, biased_table, tmp_path):
    inp, _ = biased_table
    limits = {"rules": [{"metric": "statistical_parity_difference", "abs_max": 0.1,
                         "persistence": 2}]}
    cfg = _cfg(tmp_path, inp, limits=limits)
    assert _main(cfg, "2026-11-01") == 0  # violated once: not yet
    first = (tmp_path / "out" / "run_date=2026-11-01" / "report.html").read_text()
    assert "No previous runs." in first and "no previous runs; this is the first run" in first
    assert _main(cfg, "2026-11-02") == 3  # twice in a row: gates
    s2 = json.loads((tmp_path / "out" / "run_date=2026-11-02" / "summary.json").read_text())
    assert s2["previous"]["run_date"] == "2026-11-01"
    assert s2["previous"]["items"]["limit on group|sex|statistical_parity_difference"][
        "status"] == "violated"
    m = pd.read_parquet(tmp_path / "out" / "run_date=2026-11-02" / "metrics.parquet")
    row = m[m.audit == "limits"].iloc[0]
    assert "violated 2 run(s) in a row, gates at 2" in row.detail
    # trends: tonight's headline numbers are compared with the previous run
    html = (tmp_path / "out" / "run_date=2026-11-02" / "report.html").read_text()
    assert "Trends over previous runs" in html and "No previous runs." not in html
    # the same table and config both nights: the violation is "still there"
    box = html[html.index('id="decision"'):html.index("</section>", html.index('id="decision"'))]
    assert "since 2026-11-01" in box and "(same configuration and data window)" in box
    (line,) = [tr for tr in box.split("<tr")[2:] if "statistical parity" in tr]
    assert "still there" in line and "violated" in line
    # the limits table says how in words, not p(violated)=...
    assert re.search(r"the whole Holm-adjusted interval \[[^]]+\] is beyond the limit ±0\.1",
                     unescape(html)) and "p(violated)" not in html


#: the Spark job group the slow audit ran in (read back by the test)
_SLOW_GROUP: dict[str, str] = {}


def _slow_audit(ctx, params):
    _SLOW_GROUP["id"] = ctx.spark.sparkContext.getLocalProperty("spark.jobGroup.id")
    ctx.report_partial(AuditOutcome(rows=[MetricRow(
        audit="hfm", attribute="sex", metric="D", value=0.5, lower=0.4, upper=0.6,
        status="not_certified", detail="interval after step 1")]))
    def sleepy(it):
        for pdf in it:
            time.sleep(60)
            yield pdf
    ctx.spark.range(0, 4, 1, 2).mapInPandas(sleepy, "id long").count()
    raise AssertionError("the Spark job should have been cancelled")


def test_previous_run_is_read_from_published_runs_only(spark, tmp_path):
    import datetime as dt

    from fairspark.nightly.history import load_previous_run
    from fairspark.outputs import OutputLocation
    from fairspark.report.decision import decision_items

    out = OutputLocation(spark, str(tmp_path / "out"))
    day = dt.date(2026, 11, 5)
    read = lambda: load_previous_run(out, before=day, specs=SPECS, items=decision_items)
    assert read() == {"run_date": None, "items": {}}
    # a damaged published run: the report says so and the run goes on
    damaged = tmp_path / "out" / "run_date=2026-11-02"
    damaged.mkdir(parents=True)
    (damaged / "_SUCCESS").write_text("")
    (damaged / "summary.json").write_text("{not json")
    # a later folder that was never published (no _SUCCESS) and tonight's own date
    for name in ("run_date=2026-11-04", "run_date=2026-11-05"):
        (tmp_path / "out" / name).mkdir()
    prev = read()
    assert prev["run_date"] == "2026-11-02" and "JSONDecodeError" in prev["error"]
    assert "items" not in prev


def test_time_budget_keeps_partial_result_and_others_complete(
        spark, biased_table, tmp_path, monkeypatch):
    inp, _ = biased_table
    monkeypatch.setitem(registry.specs(), "hfm", dataclasses.replace(
        registry.get_spec("hfm"), run=_slow_audit, render=None))
    cfg = _cfg(tmp_path, inp, audits={"group": {}, "hfm": {"timeout_s": 4}})
    code = _main(cfg, "2026-11-03")
    # Spark's own record: the sleeping job (60 s per task) of the audit's job group ended
    # as failed (cancelled), instead of running on or succeeding
    tracker = spark.sparkContext.statusTracker()
    jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(_SLOW_GROUP["id"])]
    assert jobs and all(j.status == "FAILED" for j in jobs), jobs
    assert code == 4
    m = pd.read_parquet(tmp_path / "out" / "run_date=2026-11-03" / "metrics.parquet")
    d = m[(m.audit == "hfm") & (m.metric == "D")].iloc[0]
    assert d.status == "timed_out" and (d.lower, d.upper) == (0.4, 0.6)
    assert "time budget of 4 s" in d.detail
    s = json.loads((tmp_path / "out" / "run_date=2026-11-03" / "summary.json").read_text())
    assert s["audits"]["hfm"]["status"] == "timed_out"
    assert s["audits"]["group"]["status"] == "ok"


def test_crash_while_publishing_keeps_previous_outputs(spark, biased_table, tmp_path,
                                                       monkeypatch):
    from fairspark.outputs import OutputLocation

    inp, _ = biased_table
    cfg = _cfg(tmp_path, inp)
    assert _main(cfg, "2026-11-04") == 0
    folder = tmp_path / "out" / "run_date=2026-11-04"
    before = (folder / "summary.json").read_text()
    real = OutputLocation.rename

    def crash_on_publish(self, src, dst):  # test hook: fail moving the new run into place
        if "_tmp-run_date" in src:
            raise OSError("disk vanished (test hook)")
        return real(self, src, dst)

    monkeypatch.setattr(OutputLocation, "rename", crash_on_publish)
    assert _main(cfg, "2026-11-04") == 1
    assert (folder / "_SUCCESS").exists()
    assert (folder / "summary.json").read_text() == before
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(("_tmp", "_old"))]


def test_warehouse_table_is_idempotent_per_date(spark, biased_table, tmp_path):
    inp, _ = biased_table
    table = "fairspark_metrics_test"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    cfg = _cfg(tmp_path, inp, output={"path": str(tmp_path / "out"), "table": table,
                                      "report": False})
    assert _main(cfg, "2026-11-05") == 0
    n1 = spark.table(table).count()
    assert _main(cfg, "2026-11-05") == 0  # rerun the same date
    assert spark.table(table).count() == n1
    assert _main(cfg, "2026-11-06") == 0
    counts = {str(r["run_date"]): r["count"] for r in
              spark.table(table).groupBy("run_date").count().collect()}
    assert counts == {"2026-11-05": n1, "2026-11-06": n1}
    # each date's partition holds exactly that date's published rows
    for date in ("2026-11-05", "2026-11-06"):
        published = spark.read.parquet(str(tmp_path / "out" / f"run_date={date}"
                                           / "metrics.parquet"))
        stored = spark.table(table).where(f"run_date = DATE'{date}'")
        assert_df_equality(stored, published, ignore_column_order=True, ignore_row_order=True,
                           ignore_nullable=True, allow_nan_equality=True)


def test_three_nights_trend_the_worst_groups_series_with_its_limit(spark, tmp_path,
                                                                   monkeypatch):
    """Three nightly runs of a limit judged per group (race: A and B against W). The
    worst group changes (B on the first night, A after); the third night's trends draw
    A's series back through every night, each point that night's limits row of A (its
    DI worked out here from the data), with the limit line, and the pooled series of
    race without it. Tonight's numbers in the trend table are the rows the walk of
    ``test_report_numbers`` checks."""
    from test_report_numbers import walk

    from fairspark.report import trends as nightly_report

    rng = np.random.default_rng(42)
    rate = {1: {"W": 0.5, "A": 0.46, "B": 0.25}, 2: {"W": 0.5, "A": 0.25, "B": 0.46},
            3: {"W": 0.5, "A": 0.22, "B": 0.47}}
    parts = []
    for day, r in rate.items():
        race = rng.choice(["W", "A", "B"], 3000, p=[0.5, 0.25, 0.25])
        parts.append(pd.DataFrame({
            "day": day, "race": race, "x": rng.normal(size=3000),
            "y": rng.integers(0, 2, 3000),
            "p": (rng.random(3000) < pd.Series(race).map(r).to_numpy()).astype(int)}))
    pdf = pd.concat(parts, ignore_index=True)
    pdf["id"] = np.arange(len(pdf)).astype(str)
    inp = write_parquet(pdf, tmp_path / "in")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({
        "dataset": "three_nights", "input": {"path": inp},
        "columns": {"features": ["x"], "sensitive": [{"column": "race", "privileged": "W"}],
                    "label": {"column": "y"}, "prediction": {"column": "p"},
                    "row_key": "id"},
        "audits": {"group": {}},
        "limits": {"rules": [{"metric": "disparate_impact", "min": 0.8}],
                   "fail_on_violation": False},
        "output": {"path": str(tmp_path / "out")}}))
    panels: dict[str, tuple[list[float], pd.DataFrame]] = {}
    real_panel = nightly_report._panel

    def panel(ax, s, name, flag, limits, ylim):
        panels[name] = (list(limits), s.copy())
        return real_panel(ax, s, name, flag, limits, ylim)

    monkeypatch.setattr(nightly_report, "_panel", panel)
    dates = ["2026-11-01", "2026-11-02", "2026-11-03"]
    for day, date in enumerate(dates, start=1):
        panels.clear()
        assert _main(str(cfg), date, "--where", f"day = {day}") == 0
    runs = {d: pd.read_parquet(tmp_path / "out" / f"run_date={d}" / "metrics.parquet")
            for d in dates}

    def di_rows(m):
        lim = m[(m.audit == "limits") & (m.metric == "disparate_impact")]
        return lim[lim["params"].map(lambda p: json.loads(p)["role"]) == "gate"].set_index(
            "group")

    # by hand: each night's DI of A and B against W, and the worst group by the rule
    # (violated first, then the lowest upper end of the interval the verdict used)
    for day, d in enumerate(dates, start=1):
        night = pdf[pdf.day == day]
        sr = night.groupby("race")["p"].mean()
        lim = di_rows(runs[d])
        for g in ("A", "B"):
            assert lim.loc[g, "value"] == pytest.approx(sr[g] / sr["W"], rel=1e-9)
    worst = {}
    for d in dates:
        lim = di_rows(runs[d]).reset_index()
        lim["order"] = lim.status.map({"violated": 0, "inconclusive": 1, "passed": 2})
        worst[d] = lim.sort_values(["order", "upper"]).iloc[0]["group"]
    assert worst == {dates[0]: "B", dates[1]: "A", dates[2]: "A"}
    # the third night's panels: A's series over the three nights, with the limit
    name = "group · race · disparate_impact · worst group A"
    assert name in panels, sorted(panels)
    limits, s = panels[name]
    assert limits == [0.8]
    assert list(s["run_date"]) == dates
    for _, point in s.iterrows():
        a = di_rows(runs[point.run_date]).loc["A"]
        assert (point.value, point.lower, point.upper) == pytest.approx(
            (a.value, a.lower, a.upper), rel=1e-12)
    assert panels["group · race · disparate_impact"][0] == []  # pooled: does not gate
    assert not any("worst group B" in n for n in panels)
    # the trend table: tonight's A is printed from its row, and so is every number
    html = (tmp_path / "out" / f"run_date={dates[2]}" / "report.html").read_text()
    i = html.index("<h2>Trends over previous runs</h2>")
    trends = html[i:html.index("</section>", i)]
    row = re.search(rf"<tr class='\w*'><td>{re.escape(name)}</td>(.*?)</tr>", trends)
    assert row and "0.8" in row.group(1)
    assert 'data-group="A"' in row.group(1) and 'data-audit="limits"' in row.group(1)
    problems, _ = walk(html, runs[dates[2]])
    assert problems == []
