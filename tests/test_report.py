"""report.html: self-contained, ordered, verdicts in words, inconclusive shown as counts."""

from __future__ import annotations

import base64
import html as html_lib
import itertools
import re
from html.parser import HTMLParser

import pytest

from fairspark.audits.base import ReportSection
from fairspark.audits.lines import plain
from fairspark.group.report import group_section, headlines
from fairspark.registry import specs as _registered
from fairspark.report.render import (
    external_references,
    render_report,
    render_report_html,
)

SPECS = _registered()


class _Refs(HTMLParser):
    """Collect every tag, every attribute that can load something, ids and headings."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.refs: list[tuple[str, str, str]] = []
        self.ids: set[str] = set()
        self.headings: list[int] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if re.fullmatch(r"h[1-6]", tag):
            self.headings.append(int(tag[1]))
        for k, v in attrs:
            if k == "id":
                self.ids.add(v or "")
            if k in ("src", "href", "srcset", "action", "poster", "data"):
                self.refs.append((tag, k, v or ""))

    def loads(self) -> list[tuple[str, str, str]]:
        """References that load something (in-page #fragments load nothing)."""
        return [r for r in self.refs if not r[2].startswith("#")]


def _parse(html: str) -> _Refs:
    p = _Refs()
    p.feed(html)
    return p


def _row(attr, group, metric, value, lower=None, upper=None, status="ok", detail=None):
    return {"audit": "group", "attribute": attr, "group": group, "metric": metric,
            "value": value, "lower": lower, "upper": upper, "status": status,
            "detail": detail, "metric_b": None, "model": None, "params": None}


@pytest.fixture()
def rows():
    return [
        # sex: a clear selection gap, disparate impact under 0.8, TPR gap with CI over 0
        _row("sex", "privileged", "selection_rate", 0.30, 0.29, 0.31),
        _row("sex", "unprivileged", "selection_rate", 0.12, 0.11, 0.13),
        _row("sex", "privileged", "tpr", 0.70, 0.66, 0.74),
        _row("sex", "unprivileged", "tpr", 0.66, 0.58, 0.73),
        _row("sex", "unprivileged", "statistical_parity_difference", -0.18, -0.195, -0.165),
        _row("sex", "unprivileged", "disparate_impact", 0.40, 0.36, 0.44),
        _row("sex", "unprivileged", "tpr_difference", -0.04, -0.12, 0.05),
        _row("sex", "unprivileged", "average_odds_difference", -0.05, -0.09, -0.01),
        _row("sex", "unprivileged", "fpr_ratio", None, None, None, detail=(
            "ratio undefined: fpr of the privileged group is 0")),
        _row("sex", "unprivileged", "dp", 0.18, 0.165, 0.195),
        # race: a small group, inconclusive with its count
        _row("race", "unprivileged", "statistical_parity_difference", -0.3, -0.6, 0.1,
             status="inconclusive", detail="only 12 rows in the unprivileged group (minimum 30)"),
        _row("race", "unprivileged", "tpr_difference", 0.01, -0.02, 0.04),
        _row("race", "Black", "statistical_parity_difference", -0.1, -0.14, -0.06),
        _row("race", "Other", "statistical_parity_difference", 0.2, -0.5, 0.7,
             status="inconclusive", detail="only 7 rows in the unprivileged group (minimum 30)"),
        # an attribute that failed
        _row("zip", None, "*", None, status="failed",
             detail="attribute 'zip' has a single group: all 10 rows are privileged"),
        _row("*", "all", "gei", 0.12, 0.10, 0.14),
        _row("*", "all", "theil", 0.08, 0.07, 0.09),
    ]


@pytest.fixture()
def summary():
    return {
        "run_date": "2026-11-29", "dataset": "loans", "config_hash": "abc123",
        "versions": {"fairspark": "0.1.0", "schema": "1", "spark": "4.3.0"},
        "input": {"path": "s3://bucket/scored", "table": None, "where": "region = 'EU'"},
        "rows": {"read": 1000, "dropped": {"null sensitive value": 12}, "audited": 988,
                 "unlabelled": 40,
                 "attributes": {"sex": {"values": {"Female": 400, "Male": 588},
                                        "privileged": ["Male"], "kind": "values"}}},
        "audits": {"group": {"status": "failed", "detail": "zip: single group",
                             "seconds": 3.2, "params": {"ci_level": 0.95}},
                   "hfm": {"status": "failed", "detail": "AuditError: no numeric feature",
                           "seconds": 0.1}},
        "seeds": {"seed": 7}, "stage_timings": {"read": 1.0, "prepare": 2.0},
        "exit_code": 4,
    }


def test_report_is_self_contained_and_ordered(tmp_path, rows, summary):
    sec = group_section(rows, ci_level=0.95, min_group_size=30)
    later = ReportSection(title="Later method", html="<p>LATER-SECTION</p>", order=50)
    earlier = ReportSection(title="Earlier method", html="<p>EARLIER-SECTION</p>", order=5)
    path = tmp_path / "out" / "report.html"
    render_report(summary=summary, rows=rows, sections=[later, sec, earlier], path=path,
                  specs=SPECS)
    html = path.read_text(encoding="utf-8")
    parsed = _parse(html)
    assert parsed.loads(), "the charts are images"
    assert all(v.startswith("data:") for _, _, v in parsed.loads()), parsed.refs
    # every in-page link lands on an element of the page
    frags = [v[1:] for _, _, v in parsed.refs if v.startswith("#")]
    assert frags and set(frags) <= parsed.ids, set(frags) - parsed.ids
    assert not {"script", "link", "iframe", "object"} & set(parsed.tags)
    assert "<style>" in html and external_references(html) == []
    # PNG charts really are PNGs
    for _, _, v in parsed.loads():
        assert base64.b64decode(v.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    # order: outcome and verdicts, then sections by `order`, metadata last (after the toc)
    html = html[html.index("<main>"):]
    pos = [html.index(s) for s in (
        "Decision", "What was audited",
        "Verdicts", "EARLIER-SECTION", "Group fairness metrics", "LATER-SECTION",
        "Input and run", "Stage timings",
    )]
    assert pos == sorted(pos)
    assert "988 rows audited, 40 of them without a label yet" in html
    assert "12 dropped (null sensitive value: 12)" in html
    assert "Privileged groups: sex = Male." in html


def test_verdicts_in_words(rows, summary):
    lines = headlines(rows, summary=summary)
    sex = next(line for line in lines if line.startswith("sex"))
    assert "(Female) receives the favourable decision less often" in sex
    assert "12.0% vs 30.0%" in sex
    assert "below the four-fifths threshold (0.8) even at the top of its interval" in sex
    assert "equal opportunity (true positive rate): no clear gap" in sex
    assert "average odds" not in sex  # the short form; the section has the full verdict
    race = next(line for line in lines if line.startswith("race"))
    assert "inconclusive (only 12 rows in the unprivileged group (minimum 30))" in race
    zipline = next(line for line in lines if line.startswith("zip"))
    assert "could not be audited" in zipline and "single group" in zipline


def test_inconclusive_shows_the_count_not_a_number(rows):
    # the text without the marks that name each number's row (fairspark.audits.lines)
    html = plain(group_section(rows, ci_level=0.95, min_group_size=30).html)
    # the race SP row (value -0.3) is inconclusive: its value is not printed
    assert "−0.300" not in html and "-0.300" not in html
    assert "only 12 rows in the unprivileged group (minimum 30)" in html
    assert "only 7 rows in the unprivileged group" in html
    # the undefined ratio says why
    assert "ratio undefined: fpr of the privileged group is 0" in html
    assert "average odds: lower for the unprivileged group by 0.050" in html
    # a clear gap and its interval are printed with signs
    assert "−0.180" in html and "[−0.195, −0.165]" in html
    assert "Not audited: attribute &#39;zip&#39; has a single group" in html


def test_a_section_with_outside_loads_is_left_as_written_and_blocked_by_the_policy(summary):
    """No string surgery on the page: a (third-party) section's outside references stay
    as written, and the page's Content-Security-Policy is what blocks them."""
    bad = ReportSection(
        title="Leaky", order=1,
        html='<img src="https://example.org/x.png"><a href="http://x">x</a>'
             '<div style="background:url(http://x/y.png)">y</div>'
             '<img src="data:image/png;base64,AAAA">',
    )
    html = render_report_html(summary=summary, rows=[], sections=[bad], specs=SPECS)
    assert bad.html in html
    assert len(external_references(html)) == 3
    assert "removed" not in html
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', html)
    assert policy is not None and html.index(policy.group(0)) < html.index("<style>")
    content = html_lib.unescape(policy.group(1))
    directives = dict(d.strip().split(" ", 1) for d in content.split(";"))
    assert directives["default-src"] == "'none'" and "script-src" not in directives
    assert directives["img-src"] == "data:"


def test_text_that_looks_like_an_attribute_is_shown_as_written(summary):
    """``see href=intranet`` in a dataset name is text: shown, escaped, not rewritten."""
    name = 'Sales (see href=intranet) src="x" & <b>'
    html = render_report_html(summary={**summary, "dataset": name}, rows=[], sections=[],
                              specs=SPECS)
    assert "Sales (see href=intranet) src=&#34;x&#34; &amp; &lt;b&gt;" in html
    assert external_references(html) == []


def test_user_text_is_escaped(summary):
    summary = {**summary, "dataset": "<script>alert(1)</script>"}
    html = render_report_html(summary=summary, rows=[], sections=[], specs=SPECS)
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_report_from_a_real_run(spark, tmp_path):
    """The Spark path: the runner's group audit writes a report with the group section."""
    from fairspark.config import parse_config
    from fairspark.runner import run_audit_job

    rows = []
    for i in range(400):
        sex = "F" if i % 3 == 0 else "M"
        race = ["A", "B", "C"][i % 7 % 3] if i % 50 else "D"  # D: 8 rows, inconclusive
        y = int((i * 7919) % 10 < (4 if sex == "M" else 3))
        pred = int((i * 104729) % 10 < (5 if sex == "M" else 2))
        rows.append((i, sex, race, float(i % 13), y, pred))
    src = tmp_path / "in.parquet"
    spark.createDataFrame(rows, "id long, sex string, race string, x double, y int, pred int") \
        .write.parquet(str(src))
    config = parse_config({
        "dataset": "tiny", "run_date": "2026-01-02",
        "input": {"path": str(src)},
        "columns": {"sensitive": [{"column": "sex", "privileged": "M"},
                                  {"column": "race", "privileged": "A"}],
                    "label": {"column": "y"}, "prediction": {"column": "pred"},
                    "row_key": "id"},
        "audits": {"group": {"ci_level": 0.9, "min_group_size": 30}},
        "output": {"path": str(tmp_path / "out")},
    })
    result = run_audit_job(spark, config)
    html = (tmp_path / "out" / "run_date=2026-01-02" / "report.html").read_text("utf-8")
    assert external_references(html) == []
    assert "Group fairness metrics" in html and "90% CI" in html
    # race D has 8 rows: its comparisons are inconclusive and shown as a count
    assert re.search(r"<td>D</td>.*?inconclusive: only 8 rows", html, re.DOTALL)
    assert html.count("data:image/png;base64,") >= 2
    assert result.exit_code in (0, 4)
    # the rates tables name the groups and give their sizes, counted here from the rows
    n_f = sum(1 for r in rows if r[1] == "F")
    assert f'<td>privileged (M)</td><td class="num">{400 - n_f}</td>' in html
    assert f'<td>unprivileged (F)</td><td class="num">{n_f}</td>' in html


def test_violated_limits_come_first(rows, summary):
    limit = {"audit": "limits", "attribute": "sex", "group": "unprivileged",
             "metric": "limit", "metric_b": "statistical_parity_difference",
             "value": -0.18, "lower": -0.195, "upper": -0.165, "status": "violated",
             "detail": None, "model": None, "params": '{"gates": true}'}
    summary = {**summary, "exit_code": 3,
               "audits": {"group": {"status": "ok", "params": {"ci_level": 0.95}}},
               "limits": {"status": "violated", "gates": True, "checks": 1, "violated": 1}}
    html = render_report_html(summary=summary, rows=[*rows, limit], sections=[], specs=SPECS)
    assert "1 of 1 fairness limit(s) violated, which fails the run (exit code 3)" in html
    assert html.index("LIMIT VIOLATED") < html.index("(Female) receives")


# ------------------------------------------------------------------ the decision box


def _limit(attr, metric, value, lower, upper, status, rule, gates=True):
    import json

    rule = {"metric": metric, "min": None, "max": None, "abs_max": None, **rule}
    bound = (f">= {rule['min']}" if rule["min"] is not None else f"<= {rule['max']}"
             if rule["max"] is not None else f"<= {rule['abs_max']}")
    name = f"|{metric}|" if rule["abs_max"] is not None else metric
    return {"audit": "limits", "attribute": attr, "group": "unprivileged", "metric": metric,
            "metric_b": f"{name} {bound}", "value": value, "lower": lower, "upper": upper,
            "status": status, "detail": "p(violated)=0", "model": None,
            "params": json.dumps({"rule": rule, "gates": gates, "source_audit": "group"})}


def _other(audit, attr, group, metric, value, lower=None, upper=None, detail=None):
    return {"audit": audit, "attribute": attr, "group": group, "metric": metric,
            "value": value, "lower": lower, "upper": upper, "status": "ok",
            "detail": detail, "metric_b": None, "model": None, "params": None}


@pytest.fixture()
def decision_rows(rows):
    return [
        *[r for r in rows if r["attribute"] != "zip"],
        _limit("sex", "disparate_impact", 0.40, 0.36, 0.44, "violated", {"min": 0.8}),
        _limit("sex", "statistical_parity_difference", -0.18, -0.195, -0.165, "violated",
               {"abs_max": 0.1}),
        _limit("race", "statistical_parity_difference", -0.09, -0.11, -0.07, "inconclusive",
               {"abs_max": 0.1}, gates=False),
        _other("hfm", "sex", "binary", "D", 2.0, 2.0, 2.0),
        _other("hfm", "sex", "binary", "D_f", 2.5, 2.5, 2.5),
        _other("hfm", "sex", "binary", "df", 0.25, 0.25, 0.25),
        _other("hfm", "race", "binary", "df", -0.01, -0.01, -0.01),
        _other("mdfa", "sex", "unprivileged (Female)", "gamma_max", 0.043, 0.038, 0.051,
               detail="max over y of gamma(y): evidence of multi-differential unfairness"),
        _other("mdfa", "race", "unprivileged (Other)", "gamma_max", 0.002, -0.01, 0.01,
               detail="max over y of gamma(y): no evidence (mean - 2 sd <= 0)"),
    ]


def _ok_summary(summary, **extra):
    return {**summary, "exit_code": 0,
            "audits": {"group": {"status": "ok", "params": {"ci_level": 0.95}},
                       "hfm": {"status": "ok"}, "mdfa": {"status": "ok"}}, **extra}


@pytest.mark.parametrize(("exit_code", "limits", "failed", "expected"), [
    (3, {"status": "violated", "gates": True, "checks": 2, "violated": 2}, False,
     "This run gates: exit code 3. 2 violated limit(s) fail the pipeline"),
    (0, {"status": "violated", "gates": False, "would_gate": True, "fail_on_violation": False,
         "checks": 2, "violated": 2}, False,
     "This run does not gate (exit code 0), although 2 limit(s) are violated"),
    (0, {"status": "violated", "gates": False, "checks": 2, "violated": 1}, False,
     "not yet for their required number of consecutive runs"),
    (0, None, False, "no fairness limits are configured"),
    (0, {"status": "passed", "gates": False, "checks": 2, "violated": 0, "passed": 2}, False,
     "no configured limit is violated (2 passed, 0 inconclusive)"),
    # a gate that judged nothing is never "passed" (issue 57.7)
    (0, {"status": "not evaluated", "gates": False, "checks": 0, "violated": 0, "passed": 0,
         "not_evaluated": [{"rule": "r", "checks": 0, "text": "limit r: not evaluated (0 "
                            "checks: the baseline never decides favourably)"}]}, False,
     "no configured limit was evaluated: limit r: not evaluated (0 checks: the baseline "
     "never decides favourably)"),
    (0, {"status": "passed", "gates": False, "checks": 1, "violated": 0, "passed": 1,
         "not_evaluated": [{"rule": "r", "checks": 0, "text": "limit r: not evaluated (0 "
                            "checks: why)"}]}, False,
     "no evaluated limit is violated (1 passed, 0 inconclusive); 1 limit(s) not evaluated"),
    (4, None, True, "This run fails (exit code 4): the hfm audit(s) failed"),
])
def test_the_decision_box_says_whether_the_run_gates(summary, exit_code, limits, failed,
                                                      expected):
    s = _ok_summary(summary)
    s["exit_code"] = exit_code
    if limits:
        s["limits"] = limits
    if failed:
        s["audits"]["hfm"] = {"status": "failed", "detail": "no numeric feature"}
    html = render_report_html(summary=s, rows=[], sections=[], specs=SPECS)
    box = html[html.index('id="decision"'):html.index('id="audited"')]
    assert expected in box


def _decision_rows_of(html):
    """(status, attribute, text) of every row of the decision table, in page order."""
    box = html[html.index('<table class="decision">'):]
    box = box[:box.index("</table>")]
    out = []
    for tr in re.findall(r'<tr class="row-([a-z]+)">(.*?)</tr>', box, re.DOTALL):
        cells = [re.sub(r"<[^>]+>", "", c).strip()
                 for c in re.findall(r"<td[^>]*>(.*?)</td>", tr[1], re.DOTALL)]
        out.append((tr[0], cells[1], " | ".join(cells)))
    return out


def test_decision_lines_rank_and_measure_the_distance_to_the_limit(decision_rows, summary):
    # exit code 0 with failing on a violation off: the violated lines "would gate"
    s = _ok_summary(summary, limits={"status": "violated", "gates": False, "would_gate": True,
                                     "fail_on_violation": False, "checks": 3,
                                     "violated": 2, "inconclusive": 1})
    html = render_report_html(summary=s, rows=decision_rows, sections=[], specs=SPECS)
    lines = _decision_rows_of(html)
    statuses = [st for st, _, _ in lines]
    rank = ["violated", "failed", "evidence", "inconclusive", "passed", "ok"]
    assert statuses == sorted(statuses, key=rank.index), statuses
    by = {(st, attr, "hfm" in t, "mdfa" in t, "disparate" in t): t for st, attr, t in lines}
    # DI 0.40 against a minimum of 0.8: 0.4 below, the whole interval [0.36, 0.44] too;
    # the row's number at three decimals, as the group tables print it
    di = by[("violated", "sex", False, False, True)]
    assert "DI 0.400 [0.360, 0.440], 0.4 below the minimum 0.8 (whole interval below)" in di
    assert "violated (would gate)" in di and "(gates)" not in di
    spd = next(t for st, a, t in lines if st == "violated" and "statistical" in t)
    # the value first, then its distance from the limit
    assert "SPD −0.180 [−0.195, −0.165], 0.08 beyond the limit ±0.1 (whole interval beyond)" in spd
    inc = next(t for st, a, t in lines if st == "inconclusive")
    assert "race" in inc and "0.01 within the limit ±0.1" in inc
    # hfm: df = 2.5 / 2.0 - 1 = +0.25 -> the decisions separate the groups 25% more
    hfm = by[("evidence", "sex", True, False, False)]
    assert "25.0% more than the labels" in hfm
    assert ("ok", "race", True, False, False) in by
    # mdfa: the verdict in the detail decides evidence / ok, gamma is printed
    assert "gamma_max 0.043" in by[("evidence", "sex", False, True, False)]
    assert ("ok", "race", False, True, False) in by
    # the group line of race (no limit on its group metrics... but one limit covers race)
    assert not any(st == "evidence" and "group:" in t and a == "sex" for st, a, t in lines)
    assert "not shown, this run carries no previous run" in html


def _num(metric, value, lower, upper):
    return {"metric": metric, "value": value, "lower": lower, "upper": upper}


def test_change_since_the_previous_run(decision_rows, summary):
    import math

    from fairspark.report.decision import item_key

    # the expected words by hand: beyond noise when |b - a| > sqrt(h_a^2 + h_b^2), with
    # h the interval half-widths (ratios on the log scale)
    def beyond(a, b, log=False):
        f = math.log if log else (lambda x: x)
        h = math.hypot((f(a[2]) - f(a[1])) / 2, (f(b[2]) - f(b[1])) / 2)
        return abs(f(b[0]) - f(a[0])) > h

    di_then, di_now = (0.70, 0.66, 0.74), (0.40, 0.36, 0.44)
    spd_then, spd_now = (-0.30, -0.32, -0.28), (-0.18, -0.195, -0.165)
    g_then, g_now = (0.045, 0.040, 0.050), (0.043, 0.038, 0.051)
    assert beyond(di_then, di_now, log=True) and beyond(spd_then, spd_now)
    assert not beyond(g_then, g_now)
    prev = {"run_date": "2026-11-28", "items": {
        # DI was 0.70, now 0.40, beyond the difference's interval: worse
        item_key("limit on group", "sex", "disparate_impact"): {
            "status": "violated", "excess": 0.1,
            "number": _num("disparate_impact", *di_then)},
        # SPD was -0.30, now -0.18, beyond noise: better
        item_key("limit on group", "sex", "statistical_parity_difference"): {
            "status": "violated", "excess": 0.2,
            "number": _num("statistical_parity_difference", *spd_then)},
        # mdfa sex: evidence both times, gamma 0.045 -> 0.043 inside the noise
        item_key("mdfa", "sex", "gamma_max"): {
            "status": "evidence", "excess": 0.045, "number": _num("gamma_max", *g_then)},
        # hfm race was evidence before (df 0.05), fine now (-0.01, exact): resolved
        item_key("hfm", "race", "df"): {"status": "evidence", "excess": 0.05,
                                        "number": _num("df", 0.05, 0.05, 0.05)},
        # a published run of an older version: no number, no interval
        item_key("limit on group", "race", "statistical_parity_difference"): {
            "status": "inconclusive", "excess": 0.0},
    }}
    s = _ok_summary(summary, previous=prev)
    html = render_report_html(summary=s, rows=decision_rows, sections=[], specs=SPECS)
    assert "since 2026-11-28" in html
    cells = [t.split(" | ") for _, _, t in _decision_rows_of(html)]

    def change(attr, check):
        (hit,) = [c[4] for c in cells if c[1] == attr and c[2].startswith(check)]
        return hit

    assert change("sex", "limit on group: disparate") == "worse"
    assert change("sex", "limit on group: |statistical") == "better"
    assert change("sex", "mdfa: gamma") == "still there, within noise"
    assert change("race", "hfm: D, D_f, df") == "resolved"
    assert change("sex", "hfm: D, D_f, df") == "new"  # bad now, absent before
    # no line calls a change better or worse inside its uncertainty
    assert all("better" not in c[4] and "worse" not in c[4] for c in cells
               if c[2].startswith("mdfa"))


def test_a_status_change_inside_the_noise_is_not_called_new_or_resolved(decision_rows,
                                                                        summary):
    from fairspark.report.decision import item_key

    prev = {"run_date": "2026-11-28", "items": {
        # evidence before at 0.030 [0.020, 0.040]: the status went, the number barely moved
        item_key("mdfa", "race", "gamma_max"): {
            "status": "evidence", "excess": 0.03, "number": _num("gamma_max", 0.003, -0.008,
                                                                 0.012)},
        # no evidence before at 0.040 [0.033, 0.050]; evidence now at 0.043 [0.038, 0.051]
        item_key("mdfa", "sex", "gamma_max"): {
            "status": "ok", "excess": 0.04, "number": _num("gamma_max", 0.040, 0.033, 0.050)},
    }}
    html = render_report_html(summary=_ok_summary(summary, previous=prev),
                              rows=decision_rows, sections=[], specs=SPECS)
    cells = [t.split(" | ") for _, _, t in _decision_rows_of(html)]
    by = {(c[1], c[2].split(":")[0]): c[4] for c in cells}
    assert by[("race", "mdfa")] == "no longer flagged (the number moved within noise)"
    assert by[("sex", "mdfa")] == "new (the number moved within noise)"


def test_change_note_says_why_there_is_no_change_column(decision_rows, summary):
    s = _ok_summary(summary)
    first = render_report_html(summary={**s, "previous": {"run_date": None, "items": {}}},
                               rows=decision_rows, sections=[], specs=SPECS)
    assert "no previous runs; this is the first run published" in first
    assert ">since " not in first  # no change column
    broken = render_report_html(
        summary={**s, "previous": {"run_date": "2026-11-28", "error": "OSError: gone"}},
        rows=decision_rows, sections=[], specs=SPECS)
    assert "the run of 2026-11-28 could not be read (OSError: gone)" in broken
    other = render_report_html(
        summary={**s, "config_hash": "new1", "previous": {
            "run_date": "2026-11-28", "config_hash": "old0", "items": {}}},
        rows=decision_rows, sections=[], specs=SPECS)
    assert "whose configuration differs (config hash old0 then, new1 now)" in other
    assert "since 2026-11-28" in other


def test_a_run_feeds_the_next_runs_change_column(decision_rows, summary):
    from fairspark.report.decision import decision_items

    s = _ok_summary(summary)
    items = decision_items(s, decision_rows, specs=SPECS)
    # what the next run needs: status and distance of every line, keyed as documented
    di = items["limit on group|sex|disparate_impact"]
    assert di["status"] == "violated" and di["excess"] == pytest.approx(0.8 - 0.40)
    assert items["mdfa|sex|gamma_max"]["status"] == "evidence"
    # the same rows a run later: nothing changed, every bad line is "still there"
    html = render_report_html(summary={**s, "previous": {"run_date": "2026-11-28",
                                                          "items": items}},
                              rows=decision_rows, sections=[], specs=SPECS)
    lines = _decision_rows_of(html)
    assert {st for st, _, _ in lines} >= {"violated", "evidence", "ok"}
    for st, _, t in lines:
        expected = ("still there" if st in ("violated", "evidence", "failed")
                    else "unchanged")
        assert t.split(" | ")[4] == expected, t


def test_what_was_audited_up_front(summary):
    s = {**summary, "model": {"name": "credit-scoring", "version": "2026.11.2",
                              "decision": "approve the loan", "favourable": "approved"},
         "input": {**summary["input"], "label": "defaulted", "decision": "pred",
                   "favourable": "positive"}}
    html = render_report_html(summary=s, rows=[], sections=[], specs=SPECS)
    box = html[html.index('id="audited"'):html.index('id="summary"')]
    text = re.sub(r"<[^>]+>", " ", box)
    text = re.sub(r"\s+", " ", text)
    assert "credit-scoring version 2026.11.2" in text
    assert "approve the loan (column pred); favourable outcome: approved" in text
    assert "Label column defaulted" in text
    assert "where region = &#39;EU&#39;" in text
    assert "988 audited of 1,000 read; 12 dropped (null sensitive value: 12)" in text
    assert "Male (privileged): 588; Female: 400" in text
    # it comes right after the decision box, before the verdicts
    assert html.index('id="decision"') < html.index('id="audited"') < html.index("Verdicts</h3>")


def test_heading_outline_has_no_jumps(rows, summary):
    sec = group_section(rows, ci_level=0.95, min_group_size=30)
    jumpy = ReportSection(title="Jumpy", order=40,
                          html="<h4>deep</h4><p>x</p><h5>deeper</h5><h4>back</h4>")
    html = render_report_html(summary=summary, rows=rows, sections=[sec, jumpy], specs=SPECS)
    levels = _parse(html).headings
    assert levels[0] == 1
    assert all(b <= a + 1 for a, b in itertools.pairwise(levels)), levels
    assert "<h3>deep</h3>" in html and "<h4>deeper</h4>" in html and "<h3>back</h3>" in html


def test_every_table_has_a_caption(rows, summary):
    sec = group_section(rows, ci_level=0.95, min_group_size=30)
    html = render_report_html(summary=summary, rows=rows, sections=[sec], specs=SPECS)
    tables = re.findall(r"<table\b.*?</table>", html, re.DOTALL)
    assert tables
    missing = [t[:80] for t in tables if "<caption" not in t]
    assert not missing, missing


def test_figure_text_is_at_least_nine_points(monkeypatch):
    from matplotlib.text import Text

    from fairspark.audits import figures

    fig, ax = figures.plt.subplots()
    ax.set_title("tiny", fontsize=5)
    ax.tick_params(labelsize=4)
    ax.plot([0, 1], [0, 1], label="line")
    ax.legend(fontsize=3)
    ax.annotate("note", xy=(0.5, 0.5), fontsize=6)
    monkeypatch.setattr(figures.plt, "close", lambda fig: None)  # inspect it after saving
    figures.figure_to_data_uri(fig)
    # every text that was drawn into the PNG, tick labels included
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text() and t.get_visible()]
    assert len(sizes) >= 6  # title, legend entry, annotation, tick labels
    assert sizes and min(sizes) >= 9


# ------------------------------------------------------------------ the group section


SIZES = {"sex": {"values": {"Female": 400, "Male": 588}, "privileged": ["Male"]},
         "race": {"values": {"White": 700, "Black": 250, "Other": 38},
                  "privileged": ["White"]}}


def _group_rows(rows):
    return [*rows,
            # higher FNR for the unprivileged group: it misses deserved favourable decisions
            _row("sex", "unprivileged", "fnr_difference", 0.05, 0.01, 0.09),
            # higher FPR for the unprivileged group: it gets more undeserved favourable ones,
            # so the privileged group is the one disadvantaged
            _row("sex", "unprivileged", "fpr_difference", 0.04, 0.01, 0.07),
            # a clear PPV gap has no side
            _row("sex", "unprivileged", "ppv_difference", -0.06, -0.1, -0.02),
            _row("race", "unprivileged", "disparate_impact", 0.9, 0.7, 1.1),
            _row("race", "privileged", "selection_rate", 0.3, 0.28, 0.32),
            _row("race", "Black", "selection_rate", 0.2, 0.15, 0.25),
            _row("race", "Black", "tpr_difference", -0.5, -0.7, -0.3)]


def _strip(html):
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_group_section_ranks_and_names_the_disadvantaged_group(rows):
    limits = [{"metric": "statistical_parity_difference", "abs_max": 0.1},
              {"metric": "disparate_impact", "min": 0.8, "attribute": "sex"}]
    html = group_section(_group_rows(rows), ci_level=0.95, min_group_size=30, sizes=SIZES,
                         limits=limits).html
    sex = html[html.index('id="group-sex"'):html.index('id="group-race"')]
    head = sex[sex.index('class="headline"'):]
    head = head[head.index("<tbody>"):head.index("</table>")]
    cells = [_strip(tr).split() for tr in re.findall(r"<tr>(.*?)</tr>", head, re.DOTALL)]
    text = [" ".join(c) for c in cells]
    # SPD -0.18 (clear) and DI 0.40 (clear) disadvantage Female, FPR +0.04 the privileged
    spd = next(t for t in text if t.startswith("Statistical parity"))
    assert "▼ unprivileged (Female)" in spd and "|x| ≤ 0.1" in spd
    di = next(t for t in text if t.startswith("Disparate impact"))
    assert "▼ unprivileged (Female)" in di and "≥ 0.8" in di
    fpr = next(t for t in text if t.startswith("FPR difference"))
    assert "▼ privileged (Male)" in fpr
    ppv = next(t for t in text if t.startswith("PPV difference"))
    assert "no side" in ppv and "▼" not in ppv
    # ranked: rows that disadvantage someone before the others
    marked = ["▼" in t for t in text]
    assert marked == sorted(marked, reverse=True), text
    # everything else is folded away, FNR's gap against Female among it
    folded = sex[sex.index("<details"):sex.index("</details>")]
    assert "All " in folded and "FNR difference" in _strip(folded)
    fnr = next(_strip(tr) for tr in re.findall(r"<tr>(.*?)</tr>", folded, re.DOTALL)
               if "FNR difference" in tr)
    assert "disadvantages unprivileged (Female)" in fnr
    # the limit does not apply to race's disparate impact (attribute: sex)
    race = html[html.index('id="group-race"'):]
    race_head = race[race.index('class="headline"'):race.index("</table>")]
    di_race = next(_strip(tr) for tr in re.findall(r"<tr>(.*?)</tr>", race_head, re.DOTALL)
                   if "Disparate impact" in tr)
    assert "≥ 0.8" not in di_race and "no clear gap" in di_race


def test_rates_tables_show_group_values_and_sizes(rows):
    html = group_section(_group_rows(rows), ci_level=0.95, min_group_size=30,
                         sizes=SIZES).html
    assert re.search(r"<td>privileged \(Male\)</td><td class=\"num\">588</td>", html)
    assert re.search(r"<td>unprivileged \(Female\)</td><td class=\"num\">400</td>", html)
    # race: privileged is White (700); unprivileged Black + Other = 288; Black alone 250
    assert re.search(r"<td>privileged \(White\)</td><td class=\"num\">700</td>", html)
    assert re.search(r"<td>Black</td><td class=\"num\">250</td>", html)
    assert "(288 rows)" in html


def test_charts_share_one_x_range_and_draw_disparate_impact(rows, monkeypatch):
    from fairspark.group import report as group_report

    calls = []
    real = group_report._interval_chart

    def spy(entries, **kw):
        calls.append((kw["title"], kw.get("xlim"), entries, kw.get("bands")))
        return real(entries, **kw)

    monkeypatch.setattr(group_report, "_interval_chart", spy)
    limits = [{"metric": "statistical_parity_difference", "abs_max": 0.1}]
    html = group_section(_group_rows(rows), ci_level=0.95, min_group_size=30, sizes=SIZES,
                         limits=limits).html
    diffs = [c for c in calls if "Disparate impact" not in c[0]]
    assert len(diffs) >= 3  # sex, race and race's values
    xlims = {c[1] for c in diffs}
    assert len(xlims) == 1, xlims
    (lo, hi), = xlims
    # the range holds every drawn interval (race Black: -0.7) and the ±0.1 limit
    ends = [x for c in diffs for e in c[2] for x in (e["lower"], e["upper"], e["value"])
            if x is not None]
    assert lo <= min([*ends, -0.1]) and hi >= max([*ends, 0.1])
    assert lo <= -0.7
    # the disparate impact chart: both attributes, the four-fifths band
    (di,) = [c for c in calls if "Disparate impact" in c[0]]
    assert [e["label"] for e in di[2]] == ["sex", "race"]
    assert di[3] == [(0.8, 1.25, "four-fifths band 0.8 to 1.25")]
    assert 'alt="Disparate impact of sex, race, zip' in html
    # colour only for a gap that disadvantages someone: race's DI interval holds 1
    race_di = di[2][1]
    assert race_di["side"] is None and not race_di["gap"]


# ------------------------------------------------------------------ HFM: lead, scale, redaction
def _hfm_outcome(d_sex=2.0, df_sex=2.5, d_race=1.0, df_race=0.9):
    from fairspark.audits.base import AuditOutcome
    from fairspark.hfm.results import DistanceResult, HFMResult

    def dist(v, key):
        return DistanceResult(value=v, lower=v, upper=v, certified=True, avg=v / 4,
                              avg_exact=True, key=key, nb_key=key + "n")

    result = HFMResult(
        {"sex": (dist(d_sex, "r1"), dist(df_sex, "r2")),
         "race": (dist(d_race, "r3"), dist(df_race, "r4"))},
        witnesses={"r1": {"age": 37, "marital_status": "Divorced"},
                   "r1n": {"age": 38, "marital_status": "Married"}})
    return AuditOutcome(rows=[], summary={"m2": 8, "rows": 100}, result=result)


@pytest.mark.parametrize("opt_in", [None, False, True])
def test_hfm_witness_values_are_redacted_unless_opted_in(opt_in):
    from fairspark.hfm.params import HFMParams
    from fairspark.hfm.report import render

    params = HFMParams() if opt_in is None else HFMParams(show_witness_values=opt_in)
    (sec,) = render(_hfm_outcome(), ctx=None, params=params)
    # the row keys are always there, the applicant's values only on the opt-in
    assert "<code>r1</code>" in sec.html and "<code>r1n</code>" in sec.html
    shown = "Divorced" in sec.html or "<th>marital_status</th>" in sec.html
    assert shown is (opt_in is True)
    if opt_in is not True:
        assert "audits.hfm.show_witness_values: true" in sec.html


def test_hfm_histogram_marks_d_and_d_f(monkeypatch):
    """The per-row distance histogram draws a vertical line at D and one at D_f (their
    values, the maxima of the per-row distances)."""
    import numpy as np

    from fairspark.hfm import report as hfm_report
    from fairspark.hfm.results import DistanceResult

    drawn = []
    monkeypatch.setattr(hfm_report, "figure_to_data_uri", lambda fig: drawn.append(fig) or "x")

    def dist(value, counts):
        return DistanceResult(value=value, lower=value, upper=value, certified=True,
                              avg=value / 2, avg_exact=True,
                              extra={"hist": (np.linspace(0, 3, 5), np.array(counts))})

    fig = hfm_report._figure("sex", dist(2.0, [5, 3, 2, 1]), dist(2.5, [4, 4, 2, 1]), "exact")
    assert fig is not None and drawn
    lines = {ln.get_label(): float(ln.get_xdata()[0]) for ln in drawn[0].axes[0].lines}
    assert lines == {"D = 2": 2.0, "D_f = 2.5": 2.5}


def test_hfm_section_says_what_df_means_with_a_scale_and_a_finding():
    from fairspark.hfm.params import HFMParams
    from fairspark.hfm.report import REFERENCE, render

    (sec,) = render(_hfm_outcome(), ctx=None, params=HFMParams())
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", sec.html))
    assert "D is how far the privileged and the other rows are apart" in text
    # sex: 2.5 / 2.0 - 1 = +0.25, above the largest reference df (+0.035 on Adult race)
    assert max(r[3] for r in REFERENCE) < 0.25
    assert ("sex: the decisions separate the groups 25.0% more than the labels do "
            "(df +0.250, D_f 2.5 vs D 2; above the range seen on the reference datasets)"
            in text)
    # race: 0.9 / 1.0 - 1 = -0.10, inside the reference range (-0.169 .. +0.035)
    assert ("race: the decisions separate the groups 10.0% less than the labels do "
            "(df −0.100, D_f 0.9 vs D 1; within the range seen on the reference datasets)"
            in text)
    assert "df ranged from −0.169 (COMPAS, race) to +0.035 (Adult, race)" in text


def test_hfm_discriminative_risk_is_put_on_a_scale():
    from fairspark.audits.base import MetricRow
    from fairspark.hfm.params import HFMParams
    from fairspark.hfm.report import render

    out = _hfm_outcome()
    out.rows.append(MetricRow(audit="hfm", attribute="*", metric="DR", value=0.06,
                              lower=0.05, upper=0.07, status="ok"))
    (sec,) = render(out, ctx=None, params=HFMParams())
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", sec.html))
    assert "0 = none, 0.06 = 6 in 100): 0.06 [0.05, 0.07]" in text
    # measured by studies/hfm_reference.py (docs/report.md): one attribute 0.019 (German
    # age) .. 0.070 (COMPAS sex); every attribute 0.052 (German) .. 0.085 (COMPAS)
    assert ("DR ranged from 0.019 to 0.070 with one attribute flipped and from 0.052 to "
            "0.085 with every attribute flipped" in text)


# ------------------------------------------------------------------ correlation: values, sign
def _correlation_result():
    import numpy as np

    from fairspark.correlation._cluster import Clustering
    from fairspark.correlation._estimate import CorrelationEstimate
    from fairspark.correlation.params import CorrelationParams
    from fairspark.correlation.results import CorrelationResult, ModelResult

    metrics = ["tpr_difference", "fnr_difference", "statistical_parity_difference",
               "disparate_impact"]
    r = np.array([[1.0, -1.0, 0.3, 0.2],
                  [-1.0, 1.0, -0.3, -0.6],
                  [0.3, -0.3, 1.0, 0.9],
                  [0.2, -0.6, 0.9, 1.0]])
    z = np.zeros_like(r)
    est = CorrelationEstimate(metrics=metrics, r=r, e=z, s=z, rounds=z + 5, n_min=z, n_max=z,
                              reason=np.full(r.shape, None, dtype=object),
                              per_round=r[None], ci_level=0.95)
    cl = Clustering(tau=0.5, clusters=((0, (0,)), (1, (1,)), (2, (2, 3))), repeat=0)
    res = ModelResult(attribute="sex", model="logistic_regression", status="ok",
                      estimate=est, clustering=cl, clustered_metrics=metrics)
    return CorrelationResult(params=CorrelationParams(), metrics=metrics, failed_attributes={},
                             models=[res], sample_rows=100, population_rows=1000,
                             sample_cells={}, waves=1, shipped_as="test"), r, metrics


def test_correlation_heatmap_writes_r_and_explains_the_sign(monkeypatch):
    from matplotlib.axes import Axes

    from fairspark.correlation.report import correlation_section, negative_partners

    result, _r, _metrics = _correlation_result()
    texts, shown = [], {}
    real_text, real_imshow = Axes.text, Axes.imshow

    def text(ax, x, y, s, *a, **k):
        texts.append(s)
        return real_text(ax, x, y, s, *a, **k)

    def imshow(ax, data, *a, **k):
        shown.update(k)
        return real_imshow(ax, data, *a, **k)

    monkeypatch.setattr(Axes, "text", text)
    monkeypatch.setattr(Axes, "imshow", imshow)
    html = correlation_section(result).html
    # every cell carries its value, written as two decimals without the leading zero
    expected = {"1": 4, "−1": 2, ".30": 2, "−.30": 2, ".20": 2, "−.60": 2, ".90": 2}
    got = {t: texts.count(t) for t in expected}
    assert got == expected
    # a diverging palette centred on 0 whose ends are not red, and a caption naming them
    assert shown["cmap"] == "PuOr" and (shown["vmin"], shown["vmax"]) == (-1, 1)
    import matplotlib
    lo, hi = matplotlib.colormaps["PuOr"](0.0), matplotlib.colormaps["PuOr"](1.0)
    assert lo[0] > lo[2] and hi[2] > hi[1]  # negative end orange-brown, positive purple
    text_only = re.sub(r"\s+", " ", html)
    assert "orange = negative" in text_only and "purple = positive" in text_only
    assert "mitigating one pushes the other" in text_only and "signed" in text_only
    # strongly negative partners: r* <= -tau (0.5) with the representative
    partners = negative_partners(result.models[0])
    assert partners == {"tpr_difference": [("fnr_difference", -1.0)],
                        "fnr_difference": [("tpr_difference", -1.0), ("disparate_impact", -0.6)],
                        "statistical_parity_difference": []}
    row = re.search(r"<td><b>fnr_difference</b></td><td>[^<]*</td><td>([^<]*)</td>", html)
    # the number rule's real minus, as the heatmap's cells above (``−.30``)
    assert row and row.group(1) == "tpr_difference (−1.00), disparate_impact (−0.60)"
    assert "into 3 clusters at tau 0.5" in text_only


@pytest.mark.parametrize(("verdict", "null", "status", "expected"), [
    ("evidence of multi-differential unfairness (ref)",
     {"mean": 0.0067, "bound": 0.0150, "p_value": 0.0004}, "evidence",
     "gamma_max 0.0101 above the features-only reference (test statistic, the raw mean "
     "over splits of the larger gamma(y), 0.0101 against 0.0067 for decisions that "
     "depend on the features alone; evidence when the test statistic is above 0.015"),
    ("no evidence of multi-differential unfairness (ref)",
     {"mean": 0.0067, "bound": 0.0150, "p_value": 0.15}, "ok",
     "Nothing: gamma is within what decisions that depend on the features alone give"),
    ("not judged: no null reference (null_draws = 0 or fewer than 3 null draws)", None,
     "inconclusive", "not judged"),
])
def test_the_mdfa_line_reads_the_features_only_reference(summary, verdict, null, status,
                                                          expected):
    from fairspark.report.decision import decision_box

    rows = [_other("mdfa", "race", "unprivileged (Other)", "gamma_max", 0.0101, 0.005, 0.02,
                   detail=verdict)]
    s = _ok_summary(summary)
    s["audits"]["mdfa"] = {"status": "ok", "attributes": {
        "race": {"verdict": verdict, "null": null}}}
    box = decision_box(summary=s, rows=rows, anchors={}, specs=SPECS)
    (line,) = [ln for ln in box["lines"] if ln["audit"] == "mdfa"]
    assert line["status"] == status
    assert expected in plain(f"{line['far']} {line['next']}")


def test_the_mdfa_line_says_when_evidence_comes_with_an_interval_that_holds_zero(summary):
    """Evidence (the raw mean above the bound) beside a 95% interval of the excess that
    holds 0: the line says both, with the interval and the null draws the p is from."""
    from fairspark.report.decision import decision_box

    verdict = "evidence of multi-differential unfairness (ref)"
    rows = [_other("mdfa", "sex", "unprivileged (Female)", "gamma_max", 0.0038, -0.0015,
                   0.0092, detail=verdict)]
    s = _ok_summary(summary)
    s["audits"]["mdfa"] = {"status": "ok", "attributes": {"sex": {
        "verdict": verdict, "null": {"mean": 0.0047, "bound": 0.0081, "p_value": 0.0006,
                                    "observed": 0.0085, "draws": 20}}}}
    (line,) = [ln for ln in decision_box(summary=s, rows=rows, anchors={}, specs=SPECS)["lines"]
               if ln["audit"] == "mdfa"]
    assert line["status"] == "evidence"
    far = plain(line["far"])
    # the p that decides is printed, and the floor of a rank p over 20 draws (1/21 =
    # 0.047619..., to the rule's 3 significant digits)
    assert ("p = 0.0006, the t test against 20 null draws that decides (a rank test over "
            "20 draws cannot give p below 0.0476)") in far
    assert ("depend on sex beyond the features, but how much in the population is not "
            "pinned down (95% interval \u22120.0015 to 0.0092 holds 0)") in far


def test_the_previous_run_is_compared_group_to_group(summary):
    """The previous run's items are keyed by group too: a line on tonight's worst group
    is compared with that group's line of the last run, and when the last run's line was
    on another group it is not compared with it but named."""
    from fairspark.report.decision import decision_box, decision_items, item_key

    verdict = "evidence of multi-differential unfairness (ref)"
    null = {"mean": 0.0051, "bound": 0.012, "p_value": 0.001, "observed": 0.0374}

    def box(group, value, previous):
        rows = [_other("mdfa", "race", group, "gamma_max", value, value - 0.004,
                       value + 0.004, detail=verdict)]
        s = _ok_summary(summary, previous=previous)
        s["audits"]["mdfa"] = {"status": "ok", "attributes": {
            "race": {"verdict": verdict, "null": null}}}
        return s, rows, decision_box(summary=s, rows=rows, anchors={}, specs=SPECS)

    s0, rows0, _ = box("unprivileged (Black)", 0.0323, None)
    items = decision_items(s0, rows0, specs=SPECS)
    assert item_key("mdfa", "race", "gamma_max", "unprivileged (Black)") in items
    prev = {"run_date": "2026-11-28", "items": items}
    # the same group, the number well beyond noise: compared
    *_, same = box("unprivileged (Black)", 0.0500, prev)
    (line,) = [ln for ln in same["lines"] if ln["audit"] == "mdfa"]
    assert line["change"] == "worse"
    # another group heads tonight: not compared with Black's line, which is named
    *_, other = box("unprivileged (Other)", 0.0323, prev)
    (line,) = [ln for ln in other["lines"] if ln["audit"] == "mdfa"]
    assert line["change"] == "new (last run's line was on unprivileged (Black))"


def test_trend_series_are_one_each_and_include_tonight():
    """Correlation representatives (metric_b = the metric) are three series, not one."""
    import pandas as pd

    from fairspark.report.trends import trend_frame, trend_section

    reps = ["tpr_difference", "disparate_impact", "ppv_ratio"]

    def row(d, metric_b, value):
        return {"run_date": d, "audit": "correlation", "attribute": "*", "group": None,
                "metric": "representative", "metric_b": metric_b, "model": None,
                "value": value, "lower": None, "upper": None, "status": "ok",
                "config_hash": "h", "fairspark_version": "1"}

    hist = pd.DataFrame([row(d, m, float(i + 1)) for d in ("2026-12-01", "2026-12-02")
                         for i, m in enumerate(reps)])
    tonight = [{k: v for k, v in row("2026-12-03", m, float(i + 1)).items()
                if k not in ("run_date", "config_hash", "fairspark_version")}
               for i, m in enumerate(reps)]
    frame = trend_frame(hist, tonight, run_date="2026-12-03", config_hash="h", version="1",
                        specs=SPECS)
    series = frame.groupby("series")["run_date"].apply(list)
    assert len(series) == 3
    for name, dates in series.items():
        assert dates == ["2026-12-01", "2026-12-02", "2026-12-03"], name  # tonight present
        assert any(m in name for m in reps)
    html = trend_section(frame, specs=SPECS).html
    for m in reps:
        assert f"correlation · * · representative · {m}" in html


@pytest.mark.parametrize(("df", "status", "words"), [
    # +0.003 is within the reference datasets' range (-0.169 to +0.035)
    (0.003, "ok", "within the range seen on the reference datasets"),
    (0.25, "evidence", "above the range seen on the reference datasets"),
    (-0.2, "ok", "below the range seen on the reference datasets"),
])
def test_hfm_line_follows_the_reference_range_rule(summary, df, status, words):
    from fairspark.report.decision import decision_box

    # the range by hand from docs/report.md's reference table
    lo, hi = -0.169, 0.035
    assert (df > hi) == (status == "evidence") and (df < lo) == ("below" in words)
    rows = [_other("hfm", "race", "binary", "D", 2.0, 2.0, 2.0),
            _other("hfm", "race", "binary", "D_f", 2.0 * (1 + df), 2.0 * (1 + df),
                   2.0 * (1 + df)),
            _other("hfm", "race", "binary", "df", df, df, df)]
    (line,) = decision_box(_ok_summary(summary), rows, anchors={}, specs=SPECS)["lines"]
    assert line["status"] == status
    # printed with the one number rule: fixed decimals, a sign, a real minus
    assert words in line["far"] and "(−0.169 to +0.035)" in line["far"]


def test_a_breached_limit_outranks_a_change_without_fair_side():
    """HFM's D moving 2.833 -> 2.846 was ranked above a breached limit."""
    import re as _re

    import pandas as pd

    from fairspark.report.trends import trend_frame, trend_section

    def row(d, audit, attr, group, metric, v, lo, hi):
        return {"run_date": d, "audit": audit, "attribute": attr, "group": group,
                "metric": metric, "metric_b": None, "model": None, "value": v, "lower": lo,
                "upper": hi, "status": "ok", "config_hash": "h", "fairspark_version": "1"}

    hist = pd.DataFrame([
        row("2026-12-01", "hfm", "race", "binary", "D", 2.833, 2.833, 2.833),
        row("2026-12-01", "group", "race", "unprivileged", "disparate_impact", 0.60, 0.55,
            0.65)])
    tonight = [
        {k: v for k, v in row("2026-12-02", "hfm", "race", "binary", "D", 2.846, 2.846,
                              2.846).items() if k != "run_date"},
        {k: v for k, v in row("2026-12-02", "group", "race", "unprivileged",
                              "disparate_impact", 0.61, 0.56, 0.66).items()
         if k != "run_date"}]
    frame = trend_frame(hist, tonight, run_date="2026-12-02", config_hash="h", version="1",
                        specs=SPECS)
    html = trend_section(frame, rules=[{"metric": "disparate_impact", "min": 0.8}],
                         specs=SPECS).html
    table = html[html.index("<tbody>"):]
    names = _re.findall(r"<tr class='\w*'><td>([^<]+)</td>", table)
    assert names == ["group · race · disparate_impact", "hfm · race · D"]


def test_the_mdfa_line_carries_the_balance_caveat_and_one_name(summary):
    from fairspark.report.decision import decision_box

    verdict = ("evidence of multi-differential unfairness (ref); the weights leave the "
               "groups unbalanced in 6 of 12 splits (held-out AUC ...)")
    rows = [_other("mdfa", "race", "unprivileged (Other)", "gamma_max", 0.0323, 0.02, 0.04,
                   detail=verdict)]
    s = _ok_summary(summary)
    s["audits"]["mdfa"] = {"status": "ok", "attributes": {"race": {
        "verdict": verdict, "null": {"mean": 0.0051, "bound": 0.012, "p_value": 0.001,
                                     "observed": 0.0374}}}}
    (line,) = decision_box(summary=s, rows=rows, anchors={}, specs=SPECS)["lines"]
    # the trends' name (gamma_max = the row's value) first, the raw gamma beside it
    assert line["what"] == "gamma_max"
    line["far"] = plain(line["far"])
    assert line["far"].startswith("gamma_max 0.0323 above the features-only reference (test "
                                  "statistic, the raw mean over splits of the larger "
                                  "gamma(y), 0.0374 against 0.0051")
    # "gamma" alone is the favourable outcome's row in metrics.parquet: not used here
    head = line["far"].split("; caveat")[0]
    assert " gamma " not in f" {head} ".replace("gamma_max", "")
    # the row's interval (0.02 to 0.04) excludes 0: no "not pinned down" sentence
    assert "not pinned down" not in line["far"]
    assert "caveat: the weights leave the groups unbalanced in 6 of 12 splits" in line["far"]


@pytest.mark.parametrize(("rule", "value", "lower", "upper", "words"), [
    ({"min": 0.8}, 0.057, 0.010, 0.305,
     "DI 0.057 [0.010, 0.305], 0.743 below the minimum 0.8 (whole interval below)"),
    ({"max": 0.1}, 0.25, 0.15, 0.35,
     "SPD +0.250 [+0.150, +0.350], 0.15 above the maximum 0.1 (whole interval above)"),
    ({"abs_max": 0.1}, -0.25, -0.35, -0.15,
     "SPD −0.250 [−0.350, −0.150], 0.15 beyond the limit ±0.1 (whole interval beyond)"),
])
def test_a_gating_number_wholly_beyond_its_limit_keeps_its_interval(summary, rule, value,
                                                                     lower, upper, words):
    """The line under the gate sentence prints the number with its interval also when
    the whole interval is beyond the limit (the box printed 'DI 0.057, 0.743 below the
    minimum 0.8 (whole interval below)' without the interval's numbers)."""
    from fairspark.report.decision import decision_box

    metric = "disparate_impact" if "min" in rule else "statistical_parity_difference"
    rows = [_limit("race", metric, value, lower, upper, "violated", rule)]
    s = _ok_summary(summary)
    (line,) = [ln for ln in decision_box(summary=s, rows=rows, anchors={},
                                         specs=SPECS)["lines"] if ln["metric"] == metric]
    assert words in plain(line["far"])


def test_a_fairer_headline_says_when_a_limit_check_of_its_attribute_is_not_passed(summary):
    """'fairer' (the documented family: Holm over the headline comparisons) beside an
    inconclusive limit check of the same attribute says so; without that check, or for
    another attribute's check, the headline is left as it was."""
    import json

    from fairspark.metrics._paired import DIFFERENCE_MODEL
    from fairspark.report.decision import decision_box

    # worse = -0.07 with se 0.01: z = 7, a single comparison, so "fairer" (by hand)
    diff = {"audit": "group", "attribute": "sex", "group": "unprivileged",
            "metric": "disparate_impact", "model": DIFFERENCE_MODEL, "status": "ok",
            "value": 0.07, "lower": 0.05, "upper": 0.09, "metric_b": None, "detail": None,
            "params": json.dumps({"worse": -0.07, "worse_se": 0.01, "ci_level": 0.95,
                                  "challenger": 0.81, "baseline": 0.74})}
    check = _limit("sex", "disparate_impact", 0.78, 0.70, 0.90, "inconclusive",
                   {"min": 0.8})
    other = _limit("race", "disparate_impact", 0.78, 0.70, 0.90, "inconclusive",
                   {"min": 0.8})
    s = _ok_summary(summary)

    def heads(rows):
        return [plain(h) for h in decision_box(summary=s, rows=rows, anchors={},
                                               specs=SPECS)["headlines"]]

    (plain_head,) = heads([diff])
    assert ": fairer (" in plain_head and "not passed" not in plain_head
    (with_check,) = heads([diff, check])
    assert with_check.startswith(plain_head)
    assert with_check.endswith(". But 1 limit check(s) on sex are not passed: disparate "
                               "impact ≥ 0.8: inconclusive"), with_check
    # the interval by hand: -0.07 -/+ 1.96 * 0.01
    assert "[−0.0896, −0.0504]" in plain_head
    (other_attr,) = heads([diff, other])
    assert other_attr == plain_head
