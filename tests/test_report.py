"""report.html: self-contained, ordered, verdicts in words, inconclusive shown as counts."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser

import pytest

from fairspark.audits.base import ReportSection
from fairspark.group.report import group_section, headlines
from fairspark.report.render import (
    external_references,
    render_report,
    render_report_html,
)


class _Refs(HTMLParser):
    """Collect every tag and every attribute that can load something."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.refs: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src", "href", "srcset", "action", "poster", "data"):
                self.refs.append((tag, k, v or ""))


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
    render_report(summary=summary, rows=rows, sections=[later, sec, earlier], path=path)
    html = path.read_text(encoding="utf-8")
    parsed = _parse(html)
    assert parsed.refs, "the charts are images"
    assert all(v.startswith("data:") for _, _, v in parsed.refs), parsed.refs
    assert not {"script", "link", "iframe", "object"} & set(parsed.tags)
    assert "<style>" in html and external_references(html) == []
    # PNG charts really are PNGs
    for _, _, v in parsed.refs:
        assert base64.b64decode(v.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    # order: outcome and verdicts, then sections by `order`, metadata last
    pos = [html.index(s) for s in (
        "2 of 2 audit(s) failed",
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
    html = group_section(rows, ci_level=0.95, min_group_size=30).html
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


def test_external_references_are_removed(summary):
    bad = ReportSection(
        title="Leaky", order=1,
        html='<img src="https://example.org/x.png"><a href="http://x">x</a>'
             '<div style="background:url(http://x/y.png)">y</div>'
             '<img src="data:image/png;base64,AAAA">',
    )
    html = render_report_html(summary=summary, rows=[], sections=[bad])
    assert external_references(html) == []
    refs = _parse(html).refs
    assert refs == [("img", "src", "data:image/png;base64,AAAA")]
    assert "external reference(s) removed" in html


def test_user_text_is_escaped(summary):
    summary = {**summary, "dataset": "<script>alert(1)</script>"}
    html = render_report_html(summary=summary, rows=[], sections=[])
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


def test_violated_limits_come_first(rows, summary):
    limit = {"audit": "limits", "attribute": "sex", "group": "unprivileged",
             "metric": "limit", "metric_b": "statistical_parity_difference",
             "value": -0.18, "lower": -0.195, "upper": -0.165, "status": "violated",
             "detail": None, "model": None, "params": '{"gates": true}'}
    summary = {**summary, "exit_code": 3,
               "audits": {"group": {"status": "ok", "params": {"ci_level": 0.95}}},
               "limits": {"status": "violated", "gates": True, "checks": 1, "violated": 1}}
    html = render_report_html(summary=summary, rows=[*rows, limit], sections=[])
    assert "1 of 1 fairness limit(s) violated, which fails the run (exit code 3)" in html
    assert html.index("LIMIT VIOLATED") < html.index("(Female) receives")
